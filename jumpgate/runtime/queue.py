"""The run queue (docs/security.md, "Limits and the queue"): a job executed while the cores it
needs are taken waits here instead of being answered 503, and tenants share the cores fairly.

A job is admitted when every node it runs on has the cores its stages need (the resource view,
`HostCores`) and its tenant is under its own limits (`max_jobs` running, `max_cores` in use; the
tenant's policy). Whenever cores are given back, the waiting jobs are looked at again: the tenant
using the fewest cores now goes first (ties: the longest waiting), each tenant's jobs in the order
they came. A tenant's first job that does not fit blocks that tenant's later ones (no small job
overtakes a big one of the same tenant forever), not the other tenants'. A job waits at most
`max_wait_s`; then it fails, saying so. While it waits its status says where it is in the queue.

The contract's states stay: a queued job is `running` (its execute was accepted) with a `queue`
entry in its status.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..contract.errors import NoResources
from ..deploy.resources import HostCores


@dataclass
class Waiting:
    job_id: str
    tenant: str
    demand: dict[str, list[int]]  # per host, the cores of each stage there
    start: Callable[[], None]  # runs the job once admitted (cores held)
    fail: Callable[[str], None]  # ends the job with this message (waited too long)
    since: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class TenantLimits:
    max_jobs: int | None = None
    max_cores: int | None = None


class RunQueue:
    def __init__(self, cores: HostCores, limits: Callable[[str], TenantLimits], max_wait_s: float = 300.0) -> None:
        self.cores = cores
        self.limits = limits
        self.max_wait_s = max_wait_s
        self._waiting: list[Waiting] = []
        self._running: dict[str, tuple[str, int]] = {}  # job id -> (tenant, cores held)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._closed = False
        self._watch = threading.Thread(target=self._expire_loop, name="run-queue", daemon=True)
        self._watch.start()

    # ---------------------------------------------------------------- use

    def enter(self, w: Waiting) -> bool:
        """Admit the job now (True: `start` has been called) or queue it (False)."""
        with self._lock:
            self._waiting.append(w)
            admitted = self._admit()
        self._start(admitted)
        return any(a.job_id == w.job_id for a in admitted)

    def leave(self, job_id: str) -> bool:
        """A queued job was cancelled: it no longer waits. True if it was waiting."""
        with self._lock:
            before = len(self._waiting)
            self._waiting = [w for w in self._waiting if w.job_id != job_id]
            return len(self._waiting) < before

    def release(self, job_id: str) -> None:
        """The job's cores are free: give them to the waiting jobs that now fit."""
        self.cores.release(job_id)
        with self._lock:
            self._running.pop(job_id, None)
            admitted = self._admit()
        self._start(admitted)

    def position(self, job_id: str) -> dict | None:
        """Where a waiting job is: its place in the order admission would take now, and how long
        it has waited; None when it is not waiting."""
        with self._lock:
            order = self._order()
            for i, w in enumerate(order):
                if w.job_id == job_id:
                    return {"position": i + 1, "waiting": len(order), "waited_s": round(time.monotonic() - w.since, 3),
                            "max_wait_s": self.max_wait_s}
        return None

    def snapshot(self) -> dict:
        with self._lock:
            by_tenant: dict[str, int] = {}
            for w in self._waiting:
                by_tenant[w.tenant] = by_tenant.get(w.tenant, 0) + 1
            oldest = max((time.monotonic() - w.since for w in self._waiting), default=0.0)
            return {"waiting": len(self._waiting), "by_tenant": by_tenant, "oldest_s": round(oldest, 3)}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wake.notify_all()

    # ---------------------------------------------------------------- admission (lock held)

    def _usage(self) -> dict[str, tuple[int, int]]:
        """Per tenant: jobs running, cores held."""
        out: dict[str, tuple[int, int]] = {}
        for tenant, cores in self._running.values():
            jobs, held = out.get(tenant, (0, 0))
            out[tenant] = (jobs + 1, held + cores)
        return out

    def _order(self) -> list[Waiting]:
        usage = self._usage()
        return sorted(self._waiting, key=lambda w: (usage.get(w.tenant, (0, 0))[1], w.since))

    def _admit(self) -> list[Waiting]:
        admitted: list[Waiting] = []
        blocked: set[str] = set()
        progress = True
        while progress:
            progress = False
            for w in self._order():
                if w.tenant in blocked:
                    continue
                if not self._within_limits(w):
                    blocked.add(w.tenant)
                    continue
                try:
                    self.cores.acquire(w.job_id, w.demand)
                except NoResources:
                    blocked.add(w.tenant)
                    continue
                self._waiting.remove(w)
                self._running[w.job_id] = (w.tenant, _cores(w.demand))
                admitted.append(w)
                progress = True
                break  # usage changed: order again
        return admitted

    def _within_limits(self, w: Waiting) -> bool:
        limits = self.limits(w.tenant)
        jobs, held = self._usage().get(w.tenant, (0, 0))
        if limits.max_jobs is not None and jobs >= limits.max_jobs:
            return False
        if limits.max_cores is not None and held > 0 and held + _cores(w.demand) > limits.max_cores:
            return False  # a tenant's first job may always run, as one job may use the whole machine
        return True

    @staticmethod
    def _start(admitted: list[Waiting]) -> None:
        for w in admitted:
            w.start()

    # ---------------------------------------------------------------- the wait limit

    def _expire_loop(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                self._wake.wait(0.5)
                now = time.monotonic()
                expired = [w for w in self._waiting if now - w.since > self.max_wait_s]
                self._waiting = [w for w in self._waiting if w not in expired]
            for w in expired:
                w.fail(f"waited {now - w.since:.0f} s in the run queue for cores (the most a job waits is "
                       f"{self.max_wait_s:g} s; the server's cores were busy with other jobs)")


def _cores(demand: dict[str, list[int]]) -> int:
    return sum(max(stages, default=0) for stages in demand.values())
