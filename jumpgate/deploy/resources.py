"""Counting cores so that concurrent jobs do not oversubscribe the machine.

A job's demand is the largest number of cores its NCAs need *at the same time*: the NCAs of one
stage run together, and NCAs of other stages sit idle in between. One job may always use the whole
machine (capped at capacity), otherwise a pipeline with more NCAs than cores could never run; jobs
beyond that are answered 503 until cores are free (contract §4), and the client retries.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from ..errors import NoResources


@dataclass(frozen=True)
class Lease:
    job_id: str
    cores: int


class CoreManager:
    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity or os.cpu_count() or 1
        self._used: dict[str, int] = {}
        self._lock = threading.Lock()

    @staticmethod
    def demand(stage_cores: list[int]) -> int:
        return max(stage_cores, default=1)

    def acquire(self, job_id: str, stage_cores: list[int]) -> Lease:
        want = min(self.demand(stage_cores), self.capacity)
        with self._lock:
            free = self.capacity - sum(self._used.values())
            if want > free:
                raise NoResources(f"no resources: job needs {want} cores, {free} of {self.capacity} free; "
                                  "retry when running jobs finish", needed=want, free=free)
            self._used[job_id] = want
        return Lease(job_id, want)

    def release(self, job_id: str) -> None:
        with self._lock:
            self._used.pop(job_id, None)

    @property
    def free(self) -> int:
        with self._lock:
            return self.capacity - sum(self._used.values())

    def snapshot(self) -> dict:
        with self._lock:
            return {"capacity": self.capacity, "used": dict(self._used)}
