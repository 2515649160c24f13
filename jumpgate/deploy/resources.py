"""Counting cores so that concurrent jobs do not oversubscribe the machine.

A job's demand is the largest number of cores its NCAs need *at the same time*: the NCAs of one
stage run together, and NCAs of other stages sit idle in between. One job may always use the whole
machine (its demand capped at the host's cores), otherwise a pipeline with more NCAs than cores
could never run; jobs beyond the capacity wait in the run queue (runtime/queue.py) until cores
are free.

The capacity is the host's cores times `overcommit` (the server's `--overcommit`, default 2):
several jobs may hold up to that many threads in all, while one job's threads never exceed the
cores. NCA threads spend much of their time waiting for the network (a scan for its consumer, a
join or an aggregation for its producers), and the jobs of one query engine's query come
together and are all needed before it goes on: TPC-H Q22 through Trino runs a 2-thread
aggregation of orders and a 1-thread scan of customer at the same time, which one-to-one
counting serialized (the second waited ~80 ms for the first's cores, in a query of ~300 ms).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from ..contract.errors import NoResources
from ..nca.deployment import Host


@dataclass(frozen=True)
class Lease:
    job_id: str
    cores: int


class CoreManager:
    def __init__(self, cores: int | None = None, overcommit: float = 1.0) -> None:
        if overcommit < 1:
            raise ValueError(f"overcommit must be at least 1, got {overcommit}")
        self.cores = cores or os.cpu_count() or 1
        self.capacity = max(self.cores, round(self.cores * overcommit))  # threads of all jobs together
        self._used: dict[str, int] = {}
        self._lock = threading.Lock()

    @staticmethod
    def demand(stage_cores: list[int]) -> int:
        return max(stage_cores, default=1)

    def acquire(self, job_id: str, stage_cores: list[int]) -> Lease:
        want = min(self.demand(stage_cores), self.cores)
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

    @property
    def budget(self) -> int:
        """The threads a job compiled now may give a stage: what is free, at most the cores."""
        return min(self.free, self.cores)

    def snapshot(self) -> dict:
        with self._lock:
            return {"cores": self.cores, "capacity": self.capacity, "used": dict(self._used)}


class HostCores:
    """The resource view of a deployment: a `CoreManager` per host. A job's demand is per host
    (its placed instances, stage by stage); it is granted on every host or on none."""

    def __init__(self, hosts: Sequence[Host], capacity: int | None = None, *, dynamic: bool = False,
                 overcommit: float = 1.0) -> None:
        """`capacity`: the cores of every host (default: each host's own); `dynamic`: hosts come
        and go (`sync`), so there may be none for a while; `overcommit`: see the module."""
        if not hosts and not dynamic:
            raise ValueError("a deployment needs at least one host")
        self.hosts = list(hosts)
        self.capacity = capacity
        self.overcommit = overcommit
        self._cores = {h.name: CoreManager(capacity or h.cores, overcommit) for h in hosts}
        self._lock = threading.Lock()

    def sync(self, hosts: Sequence[Host]) -> None:
        """The deployment's hosts now (nodes that came and went, deploy/kube_source.py): a new one
        is counted from now on; one that is gone is forgotten once no job holds its cores (a job
        that ran there releases them when it ends, failed)."""
        with self._lock:
            names = {h.name for h in hosts}
            for h in hosts:
                manager = self._cores.get(h.name)
                if manager is None or manager.cores != (self.capacity or h.cores) and not manager.snapshot()["used"]:
                    self._cores[h.name] = CoreManager(self.capacity or h.cores, self.overcommit)
            for name in [n for n in self._cores if n not in names]:
                if not self._cores[name].snapshot()["used"]:
                    del self._cores[name]
            known = {h.name for h in self.hosts}
            self.hosts = [h for h in self.hosts if h.name in names] + [h for h in hosts if h.name not in known]

    def acquire(self, job_id: str, demand: dict[str, list[int]]) -> None:
        """Lease each host's demand (its stages' cores) for `job_id`; NoResources naming the
        first host that lacks them, and then nothing is held."""
        with self._lock:
            taken = []
            try:
                for host, stage_cores in demand.items():
                    manager = self._cores.get(host)
                    if manager is None:
                        raise NoResources(f"no resources: the job was placed on host {host!r}, which "
                                          f"this deployment does not have")
                    try:
                        manager.acquire(job_id, stage_cores)
                    except NoResources as e:
                        raise NoResources(f"{e.message} (host {host})" if len(self._cores) > 1 else e.message,
                                          **e.context) from None
                    taken.append(manager)
            except NoResources:
                for manager in taken:
                    manager.release(job_id)
                raise

    def release(self, job_id: str) -> None:
        for manager in self._managers():
            manager.release(job_id)

    def _managers(self) -> list[CoreManager]:
        with self._lock:
            return list(self._cores.values())

    @property
    def free(self) -> int:
        """Cores free on all hosts together."""
        return sum(m.free for m in self._managers())

    @property
    def most_free(self) -> int:
        """The most cores free on any one host."""
        return max((m.free for m in self._managers()), default=0)

    @property
    def thread_budget(self) -> int:
        """The budget of a stage's thread assignment for a job compiled now: the most any one host
        could give it (free, and at most its cores)."""
        return max((m.budget for m in self._managers()), default=0)

    def snapshot(self) -> dict:
        with self._lock:
            cores = dict(self._cores)
        return {name: m.snapshot() for name, m in cores.items()}


# ------------------------------------------------------------------ named pools (ResourceRequest.pools)


@dataclass(frozen=True)
class BlockLease:
    """`size` consecutive units of a pool starting at `start`, held by `owner` (a job's NCA)."""

    pool: str
    owner: str
    start: int
    size: int


class BlockPool:
    """An exclusive resource of `capacity` units that jobs lease in aligned blocks, e.g. the register
    slots of a switch aggregator (ResourceRequest.pools). A block of a power-of-two size is aligned
    to its size, so a switch can address it with a base and a mask; sizes are rounded up to the
    pool's granularity. Two leases never overlap; a request that finds no free block is refused,
    and the mapping (through the service's capacity check) then picks another NCA."""

    def __init__(self, name: str, capacity: int, granularity: int = 1) -> None:
        self.name = name
        self.capacity = capacity
        self.granularity = granularity
        self._leases: dict[str, BlockLease] = {}
        self._lock = threading.Lock()

    def block_size(self, units: int) -> int:
        size = max(self.granularity, units)
        return 1 << (size - 1).bit_length()  # power-of-two blocks, aligned to their size

    def _find(self, size: int) -> int | None:
        taken = sorted((lease.start, lease.start + lease.size) for lease in self._leases.values())
        for start in range(0, self.capacity - size + 1, size):
            if all(end <= start or begin >= start + size for begin, end in taken):
                return start
        return None

    def can_acquire(self, units: int) -> bool:
        size = self.block_size(units)
        with self._lock:
            return size <= self.capacity and self._find(size) is not None

    def acquire(self, owner: str, units: int) -> BlockLease:
        size = self.block_size(units)
        with self._lock:
            if owner in self._leases:
                raise ValueError(f"{owner} already holds a lease of pool {self.name}")
            start = self._find(size) if size <= self.capacity else None
            if start is None:
                raise NoResources(f"no resources: pool {self.name} has no free block of {size} units "
                                  f"({self._free_locked()} of {self.capacity} free)", needed=size,
                                  free=self._free_locked())
            lease = self._leases[owner] = BlockLease(self.name, owner, start, size)
        return lease

    def release(self, owner: str) -> None:
        with self._lock:
            self._leases.pop(owner, None)

    def _free_locked(self) -> int:
        return self.capacity - sum(lease.size for lease in self._leases.values())

    @property
    def free(self) -> int:
        with self._lock:
            return self._free_locked()

    def snapshot(self) -> dict:
        with self._lock:
            return {"capacity": self.capacity, "leases": {o: [lease.start, lease.size] for o, lease in self._leases.items()}}
