"""The run queue's admission rules (runtime/queue.py) on a real resource view: fair shares between
tenants (the tenant holding the fewest cores goes first), each tenant's jobs in order, per-tenant
limits on jobs and cores, and positions that say where each waiting job is."""
from __future__ import annotations

from jumpgate.deploy.resources import HostCores
from jumpgate.nca.deployment import Host
from jumpgate.runtime.queue import RunQueue, TenantLimits, Waiting

HOST = Host("h", "127.0.0.1", 4)


def queue(limits: dict[str, TenantLimits] | None = None, cores: int = 4) -> tuple[RunQueue, list[str]]:
    started: list[str] = []
    q = RunQueue(HostCores([HOST], cores), lambda t: (limits or {}).get(t, TenantLimits()), max_wait_s=60)
    return q, started


def job(q: RunQueue, started: list[str], job_id: str, tenant: str, cores: int = 1) -> bool:
    return q.enter(Waiting(job_id, tenant, {"h": [cores]}, start=lambda: started.append(job_id),
                           fail=lambda message: None))


def test_the_tenant_holding_fewest_cores_goes_first_each_in_its_order():
    """Shares follow the cores each tenant holds now; ties go to the job waiting longest."""
    q, started = queue(cores=2)
    try:
        assert job(q, started, "a1", "a", 2)  # a holds the whole machine
        for name in ("a2", "a3", "b1", "b2"):
            assert not job(q, started, name, name[0])
        assert [q.position(n)["position"] for n in ("b1", "b2", "a2", "a3")] == [1, 2, 3, 4]
        q.release("a1")  # both hold nothing now: the longest waiting first, then the other tenant
        assert started == ["a1", "a2", "b1"]
        q.release("b1")  # a holds 1, b 0: b's next job, though a3 waited longer
        assert started[-1] == "b2"
    finally:
        q.close()


def test_a_tenants_limits_hold_its_jobs_back_but_not_the_others():
    q, started = queue({"a": TenantLimits(max_jobs=1)})
    try:
        assert job(q, started, "a1", "a")
        assert not job(q, started, "a2", "a")  # a is at its one job although cores are free
        assert job(q, started, "b1", "b")  # b is not held back by a's limit
        q.release("a1")
        assert started == ["a1", "b1", "a2"]
    finally:
        q.close()
    q, started = queue({"a": TenantLimits(max_cores=2)})
    try:
        assert job(q, started, "a1", "a", 2)
        assert not job(q, started, "a2", "a", 1)  # 2 + 1 > 2
        assert job(q, started, "b1", "b", 1)
        q.release("a1")
        assert started[-1] == "a2"
    finally:
        q.close()


def test_a_cancelled_waiting_job_leaves_and_one_waiting_too_long_fails():
    failed: list[str] = []
    q = RunQueue(HostCores([HOST], 1), lambda t: TenantLimits(), max_wait_s=0.3)
    try:
        q.enter(Waiting("x", "a", {"h": [1]}, start=lambda: None, fail=lambda m: None))
        q.enter(Waiting("y", "a", {"h": [1]}, start=lambda: None, fail=lambda m: None))
        q.enter(Waiting("z", "a", {"h": [1]}, start=lambda: None, fail=failed.append))
        assert q.leave("y") and not q.leave("y")
        import time
        time.sleep(1.0)
        assert len(failed) == 1 and "waited" in failed[0] and q.position("z") is None
    finally:
        q.close()


def test_overcommit_lets_jobs_share_cores_but_never_gives_one_job_more_than_the_cores():
    """Two cores at overcommit 2: jobs hold up to four threads together; one job's demand is
    capped at the two cores, and a job compiled now is given at most what is free and at most
    the cores (deploy/resources.py)."""
    cores = HostCores([HOST], 2, overcommit=2)
    q = RunQueue(cores, lambda t: TenantLimits(), max_wait_s=60)
    started: list[str] = []
    try:
        assert cores.thread_budget == 2 and cores.most_free == 4
        assert job(q, started, "big", "a", 3)  # a 3-thread stage holds the 2 cores it may have
        assert cores.snapshot()["h"] == {"cores": 2, "capacity": 4, "used": {"big": 2}}
        assert cores.thread_budget == 2  # the next job compiled may still use both cores
        assert job(q, started, "small", "a", 1)  # runs beside it: 3 of 4 threads held
        assert cores.thread_budget == 1
        assert not job(q, started, "third", "a", 2)  # 2 more would make 5
        q.release("big")
        assert started == ["big", "small", "third"]
    finally:
        q.close()


def test_overcommit_one_is_one_thread_per_core():
    cores = HostCores([HOST], 2, overcommit=1)
    q = RunQueue(cores, lambda t: TenantLimits(), max_wait_s=60)
    started: list[str] = []
    try:
        assert job(q, started, "a1", "a", 2)
        assert not job(q, started, "a2", "a", 1) and cores.thread_budget == 0
    finally:
        q.close()
