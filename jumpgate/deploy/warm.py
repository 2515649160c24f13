"""Warm NCA processes: a few pre-started processes per NCA binary, each waiting for one job.

Starting an NCA process is most of a small job's fixed cost: an ORC or Parquet scan spends 8-10 ms
loading and relocating Arrow C++ from the pyarrow wheel (and initialising the OpenSSL inside it)
before it can say `ready`. When a job's process of some binary is destroyed, the pool starts a
spare with the same command line in the background; the next job with that binary takes the
spare, which has long bound its ports and printed `ready`, so its allocate is a pipe read. (The
deployer starts a spare the way it starts any process: forked from the binary's fork server when
it has one, agent/fork_server.py, which leaves ~1 ms of that start's CPU instead of 8-10.)

What stays the same: each process serves exactly one job (a spare is handed out once and
destroyed with its job, never returned); its standard input is a pipe from the control plane, so
a spare exits when the control plane goes away. What it costs: an idle spare holds its memory
(private: 0.2 MB for a JSON scan, 2.5 MB for a Parquet or ORC scan, plus shared library pages)
and its bound ports, no CPU. Spares unused for `idle_s` seconds are stopped, at most
`per_binary` wait per command line and `total` in all (the oldest is stopped first).
`per_binary = 0` turns the pool off (`jumpgate serve --warm-ncas 0`). `shutdown` stops every
spare and every start still under way.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WarmSettings:
    # Spares kept per distinct command line; 0 = no pool. Every destroyed process asks for one
    # replacement, so a binary gets as many as the last job used at once (a Spark job often runs
    # two copies of one scan and join), up to this.
    per_binary: int = 4
    # Spares kept in all. A TPC-DS job of Spark's runs 10-25 NCA processes; an idle spare costs
    # 0.2-2.5 MB of its own memory (module docstring), so 64 cost at most ~160 MB.
    total: int = 64
    idle_s: float = 30.0  # a spare unused this long is stopped
    # Binaries kept loaded as fork servers (agent/fork_server.py), which start that binary's
    # processes, spares included, as forks; the least recently used is stopped beyond this. One
    # costs ~2.5 MB of its own memory (a Parquet or ORC scan's). 0 = every process is exec'ed.
    fork_servers: int = 16

    @property
    def enabled(self) -> bool:
        return self.per_binary > 0 and self.total > 0 and self.idle_s > 0


@dataclass
class _Spare:
    argv: tuple[str, ...]
    proc: object  # the deployer's process handle
    since: float  # time.monotonic() when it was started


class WarmPool:
    """Spares by command line. `start(argv, dir, log_name)` starts a process (the deployer's start);
    `stop(proc)` stops one; `alive(proc)` says whether it still runs. One background thread
    starts spares and stops expired ones, so asking for a spare costs the job a queue append."""

    def __init__(self, settings: WarmSettings, start: Callable[[list[str], Path, str], object],
                 stop: Callable[[object], None], alive: Callable[[object], bool], spare_dir: Path) -> None:
        self.settings = settings
        self._start, self._stop, self._alive = start, stop, alive
        self.spare_dir = Path(spare_dir)
        self._spares: list[_Spare] = []  # oldest first
        self._wanted: list[tuple[str, ...]] = []  # spares asked for, not yet started
        self._cond = threading.Condition()
        self._closed = False
        self._serial = 0
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- use

    def take(self, argv: list[str]) -> object | None:
        """A running spare started with exactly `argv`, now the caller's; None when there is none."""
        key = tuple(argv)
        dead = []
        found = None
        with self._cond:
            for spare in [s for s in self._spares if s.argv == key]:
                self._spares.remove(spare)
                if self._alive(spare.proc):
                    found = spare.proc
                    break
                dead.append(spare.proc)
        for proc in dead:
            self._stop(proc)
        return found

    def replenish(self, argv: list[str]) -> None:
        """Have a spare for `argv` started in the background unless enough wait or are asked for."""
        if not self.settings.enabled:
            return
        key = tuple(argv)
        with self._cond:
            have = sum(1 for s in self._spares if s.argv == key) + self._wanted.count(key)
            if self._closed or have >= self.settings.per_binary:
                return
            self._wanted.append(key)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="jg-warm", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def pids(self) -> list[int]:
        with self._cond:
            return [s.proc.pid for s in self._spares]

    def shutdown(self) -> None:
        """Stop every spare; a start under way stops its process as soon as it exists."""
        with self._cond:
            self._closed = True
            self._wanted.clear()
            thread = self._thread
            self._cond.notify_all()
        if thread is not None:
            thread.join(30.0)
        with self._cond:
            spares, self._spares = self._spares, []
        for spare in spares:
            self._stop(spare.proc)

    # ---------------------------------------------------------------- background

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    now = time.monotonic()
                    expired = [s for s in self._spares if now - s.since >= self.settings.idle_s]
                    if expired or self._wanted:
                        break
                    due = min((s.since + self.settings.idle_s for s in self._spares), default=None)
                    self._cond.wait(None if due is None else max(0.01, due - now))
                for s in expired:
                    self._spares.remove(s)
                key = self._wanted[0] if self._wanted else None
                self._serial += 1
                name = f"warm-{self._serial}"
            for s in expired:
                self._stop(s.proc)
            if key is not None:
                self._start_spare(key, name)

    def _start_spare(self, key: tuple[str, ...], name: str) -> None:
        proc = None
        try:
            self.spare_dir.mkdir(parents=True, exist_ok=True)
            proc = self._start(list(key), self.spare_dir, name)
        except Exception:  # a binary that cannot start now fails its next job the normal way
            log.warning("starting a warm NCA process %s failed", key[0], exc_info=True)
        evicted: list[object] = []
        with self._cond:
            if key in self._wanted:  # still counted as wanted while it started: no second start
                self._wanted.remove(key)
            if proc is not None and self._closed:
                evicted.append(proc)
            elif proc is not None:
                self._spares.append(_Spare(key, proc, time.monotonic()))
                while len(self._spares) > self.settings.total:
                    evicted.append(self._spares.pop(0).proc)
        for p in evicted:
            self._stop(p)
