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
