"""The service's limits on what one client may hold: a job may start at most `max_ncas_per_job`
NCA processes (found: 64 sends started 102 processes on 2 cores), and a job compiled and never
executed is cancelled after `compiled_ttl_s`, giving back what it holds (found: 4,000 such jobs
were kept forever)."""
from __future__ import annotations

import time

import pytest

from jumpgate.contract.errors import RequestError
from jumpgate.runtime.jobs import JobState
from jumpgate.runtime.service import JumpgateService, Settings


@pytest.fixture
def data(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "t.jsonl").write_text('{"a": 1}\n')
    return root


def request(sends: int) -> dict:
    ops = [{"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": [{"name": "a", "type": "int64"}]}]
    for i in range(sends):
        ops.append({"kind": "filter", "name": f"f{i}", "input": "r", "condition": f"a > {i}"})
        ops.append({"kind": "send", "name": f"out{i}", "input": f"f{i}", "transport": "tcp", "host": "127.0.0.1",
                    "port": 9000 + i})
    return {"operations": ops}


def test_a_job_needing_more_processes_than_the_cap_is_refused_before_anything_starts(data, tmp_path):
    svc = JumpgateService(Settings(data_root=data, cache_dir=tmp_path / "cache", max_ncas_per_job=8))
    try:
        assert svc.submit(request(2)).state is JobState.COMPILED
        with pytest.raises(RequestError, match=r"needs \d+ NCA processes; this server runs at most 8 per job"):
            svc.submit(request(64))
        assert svc.deployer.running() == []
    finally:
        svc.shutdown()


def test_a_compiled_job_never_executed_expires(data, tmp_path):
    svc = JumpgateService(Settings(data_root=data, cache_dir=tmp_path / "cache", compiled_ttl_s=0.2))
    try:
        idle = svc.submit(request(1))
        time.sleep(0.3)
        fresh = svc.submit(request(1))  # a submit sweeps the expired ones
        assert idle.state is JobState.CANCELLED and idle.done.is_set()
        assert "never executed: expired" in idle.error["message"]
        assert fresh.state is JobState.COMPILED
    finally:
        svc.shutdown()


def test_a_job_that_ended_well_gives_its_cores_back_before_its_teardown(tmp_path):
    """On one core a second job waits for the first. Its cores come back when its last stage has
    ended, not after its teardown (which also starts the next jobs' warm spares): here a teardown
    made slow on purpose, and the second job still starts during it."""
    import json
    import threading

    from jumpgate.client.receiver import Receiver

    data = tmp_path / "data"
    data.mkdir()
    (data / "t.jsonl").write_text("".join(json.dumps({"a": i}) + "\n" for i in range(100)))
    svc = JumpgateService(Settings(data_root=data, cores=1, cache_dir=tmp_path / "cache"))
    stop, slow = svc.deployer.stop, threading.Event()

    def slow_stop(proc):
        slow.set()
        time.sleep(1.0)
        return stop(proc)

    svc.deployer.stop = slow_stop
    try:
        with Receiver() as rx1, Receiver() as rx2:
            jobs = []
            for rx in (rx1, rx2):
                job = svc.submit({"operations": [
                    {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json",
                     "schema": [{"name": "a", "type": "int64"}]},
                    {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": "127.0.0.1",
                     "port": rx.port}]})
                out = job.pipeline.outputs["out"]
                rx.start(out.expected_streams, out.layout)
                jobs.append(job)
            for job in jobs:
                svc.execute(job.id)
            first, second = jobs
            assert slow.wait(30)  # the first job's teardown has begun
            deadline = time.monotonic() + 0.8
            while svc.queue.position(second.id) is not None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert svc.queue.position(second.id) is None, "the second job still waits for the core"
            assert first.state is JobState.RUNNING  # its teardown is still under way
            assert second.done.wait(30) and second.state is JobState.SUCCEEDED, second.error
            assert first.done.wait(30) and first.state is JobState.SUCCEEDED, first.error
            assert rx1.wait(10) and rx2.wait(10) and len(rx2.table()) == 100
    finally:
        svc.shutdown()
