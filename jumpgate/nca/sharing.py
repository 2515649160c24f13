"""Grouping instances of different jobs that can do their work together (docs/shared-scans.md):
the service holds one `Sharing`, instances reach it through InstanceContext.sharing. It knows
nothing of what is shared: an implementation names a key (what members must have in common), and
its own run of a group (`Group.runner`).

An instance announces itself under its key when its job compiles it. When its stage runs it
joins the group open for its key, or opens one and keeps it open, up to `wait_s`, while instances
announced for that key have not arrived or requests are being planned (the other jobs of a wave
reach the server at the same time), and at least `linger_s`. A group is closed to newcomers
before any of its members runs.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Group:
    """Members that run together. `runner` holds the implementation's run of the group, made by
    whichever member asks first."""

    name: str
    members: list[Any]
    closed: bool = False
    _runner: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def alone(self) -> bool:
        return len(self.members) == 1

    def runner(self, make: Callable[[Group], Any]) -> Any:
        with self._lock:
            if self._runner is None:
                self._runner = make(self)
            return self._runner


@dataclass(eq=False)
class Ticket:
    """One announced instance's place."""

    sharing: Sharing
    key: Hashable
    member: Any

    def join(self, fits: Callable[[Group, Any], bool] | None = None) -> Group:
        return self.sharing.join(self, fits)

    def withdraw(self) -> None:
        self.sharing.withdraw(self)


class Sharing:
    """The service's coordinator: one per server, shared by every job."""

    def __init__(self, wait_s: float = 0.2, linger_s: float = 0.05) -> None:
        self.wait_s = wait_s
        self.linger_s = min(linger_s, wait_s)
        self._cv = threading.Condition()
        self._pending: dict[Hashable, set[int]] = {}  # announced members that have not arrived
        self._open: dict[Hashable, Group] = {}
        self._groups = 0
        self._planning = 0  # requests being planned: their instances may be about to be announced

    @contextmanager
    def planning(self) -> Iterator[None]:
        """Around the planning of a request (the service's submit): an open group waits for it."""
        with self._cv:
            self._planning += 1
        try:
            yield
        finally:
            with self._cv:
                self._planning -= 1
                self._cv.notify_all()

    def announce(self, key: Hashable, member: Any) -> Ticket:
        ticket = Ticket(self, key, member)
        with self._cv:
            self._pending.setdefault(key, set()).add(id(ticket))
        return ticket

    def withdraw(self, ticket: Ticket) -> None:
        with self._cv:
            self._not_pending(ticket)
            self._cv.notify_all()

    def _not_pending(self, ticket: Ticket) -> None:
        pending = self._pending.get(ticket.key)
        if pending is not None:
            pending.discard(id(ticket))
            if not pending:
                del self._pending[ticket.key]

    def join(self, ticket: Ticket, fits: Callable[[Group, Any], bool] | None = None) -> Group:
        """The group `ticket`'s member runs in, once it is closed to newcomers. `fits(group,
        member)` says whether an open group can take one more (a process's limits)."""
        member = ticket.member
        with self._cv:
            self._not_pending(ticket)
            group = self._open.get(ticket.key)
            if group is not None and (fits is None or fits(group, member)):
                group.members.append(member)
                self._cv.notify_all()  # its opener looks again at who is still to come
                while not group.closed:
                    self._cv.wait()
                return group
            self._groups += 1
            group = Group(f"shared{self._groups}", [member])
            if self._open.get(ticket.key) is None:
                self._open[ticket.key] = group
                start = time.monotonic()
                deadline, linger = start + self.wait_s, start + self.linger_s
                while (left := deadline - time.monotonic()) > 0:
                    if not self._pending.get(ticket.key) and not self._planning:  # nobody may still come
                        left = linger - time.monotonic()
                        if left <= 0:
                            break
                    self._cv.wait(left)
                del self._open[ticket.key]
            group.closed = True
            self._cv.notify_all()
            return group
