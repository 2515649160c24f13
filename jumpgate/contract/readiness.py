"""Waiting until a socket or pipe has something to read, for any file descriptor number.

`select.select` takes no descriptor numbered 1024 or more (FD_SETSIZE): a server running many
jobs, or a client inside a large application, holds that many files soon enough, and then every
wait fails with "filedescriptor out of range in select()". poll(2) has no such limit.
"""
from __future__ import annotations

import select
from typing import Protocol


class _HasFileno(Protocol):
    def fileno(self) -> int: ...


def wait_readable(source: int | _HasFileno, timeout: float | None) -> bool:
    """Whether `source` (a descriptor or an object with `fileno()`) became readable, or hung up
    or failed (a read then says what happened), within `timeout` seconds (None: no limit)."""
    poller = select.poll()
    poller.register(source, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000 + 0.999))))
