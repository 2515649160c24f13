"""The executor's failure handling with NCAs that misbehave on purpose: every job ends in the right
state with the right error, and every instance is destroyed (no thread, socket or lease left)."""
from __future__ import annotations

import time

import pytest

from jumpgate.client.receiver import Receiver
from jumpgate.deploy.resources import HostCores
from jumpgate.nca.registry import Registry
from jumpgate.runtime.jobs import JobState
from jumpgate.runtime.service import JumpgateService, Settings
from tests.plugins.misbehaving import BEHAVIOURS, MisbehavingSource


@pytest.fixture
def service(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for b in BEHAVIOURS:
        (data / f"{b}.jsonl").write_text("{}\n")
    reg = Registry()
    reg.add(MisbehavingSource())
    svc = JumpgateService(Settings(data_root=data, cores=2, overcommit=1, cache_dir=tmp_path / "cache", stall_timeout_s=1.5),
                          registry=reg)
    yield svc
    svc.shutdown()


def submit(svc: JumpgateService, behaviour: str, receiver: Receiver):
    body = {"operations": [
        {"kind": "read", "name": "r", "path": f"{behaviour}.jsonl", "format": "json",
         "schema": [{"name": "a", "type": "int64"}, {"name": "s", "type": "string"}]},
        {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": "127.0.0.1",
         "port": receiver.port}]}
    job = svc.submit(body)
    out = job.pipeline.outputs["out"]
    receiver.start(out.expected_streams, out.layout)
    return job


def wait_terminal(job, timeout=30.0):
    assert job.done.wait(timeout), f"job still {job.state}"
    return job


def test_ok_job_succeeds_with_timeline(service):
    with Receiver() as rx:
        job = submit(service, "ok", rx)
        service.execute(job.id)
        wait_terminal(job)
        assert rx.wait(10)
        assert job.state is JobState.SUCCEEDED, job.error
        assert rx.table().num_rows == MisbehavingSource.tuples
        assert rx.table().column("a").null_count == MisbehavingSource.tuples
    tl = job.timeline.to_json()
    nca = tl["ncas"]["nca0"]
    assert {"compile", "allocate", "configure", "stages"} <= set(nca)
    assert nca["stages"][0]["tuples_out"] == MisbehavingSource.tuples
    assert {"setup", "execute", "stage:0", "destroy"} <= set(tl["phases"])
    assert service.cores.free == 2


def test_compile_failure_names_nca_and_step(service):
    with Receiver() as rx:
        job = submit(service, "fail_compile", rx)
        service.execute(job.id)
        wait_terminal(job)
    assert job.state is JobState.FAILED
    assert job.error["nca"] == "nca0" and job.error["step"] == "compile"
    assert "on purpose" in job.error["message"]
    assert service.cores.free == 2


def test_midstream_failure_reports_file_record_and_stage(service):
    with Receiver() as rx:
        job = submit(service, "fail_midstream", rx)
        service.execute(job.id)
        wait_terminal(job)
        assert rx.wait(10)
        assert rx.error is not None  # the stream ended without its end marker
    assert job.state is JobState.FAILED
    assert job.error["stage"] == 0 and job.error["record"] == MisbehavingSource.tuples // 2 + 1
    assert job.error["file"].endswith("fail_midstream.jsonl")


def test_cancel_never_ready_job_returns_promptly(service):
    with Receiver() as rx:
        job = submit(service, "never_ready", rx)
        service.execute(job.id)
        time.sleep(0.2)
        t0 = time.monotonic()
        service.cancel(job.id)
        wait_terminal(job, 10)
        assert time.monotonic() - t0 < 5
    assert job.state is JobState.CANCELLED
    assert job.error is None
    assert service.cores.free == 2


def test_cancel_running_job(service):
    with Receiver() as rx:
        job = submit(service, "slow", rx)
        service.execute(job.id)
        time.sleep(0.3)
        service.cancel(job.id)
        wait_terminal(job, 10)
    assert job.state is JobState.CANCELLED


def test_a_job_beyond_the_free_cores_waits_in_the_queue_and_runs_when_they_free(tmp_path, service):
    service.cores = service.queue.cores = HostCores(service.all_hosts, capacity=1)
    with Receiver() as rx1, Receiver() as rx2:
        slow = submit(service, "slow", rx1)
        other = submit(service, "ok", rx2)
        service.execute(slow.id)
        assert service.execute(other.id).state is JobState.RUNNING  # accepted: no 503
        assert service.queue.position(other.id)["position"] == 1
        assert other.runner.instances == {}  # nothing of it started yet
        service.cancel(slow.id)
        wait_terminal(slow)
        wait_terminal(other)
        assert other.state is JobState.SUCCEEDED, other.error
        assert service.queue.position(other.id) is None


def test_a_queued_job_can_be_cancelled_and_one_waiting_too_long_fails(tmp_path, service):
    service.cores = service.queue.cores = HostCores(service.all_hosts, capacity=1)
    service.queue.max_wait_s = 0.5
    with Receiver() as rx1, Receiver() as rx2, Receiver() as rx3:
        slow = submit(service, "slow", rx1)
        cancelled, expired = submit(service, "ok", rx2), submit(service, "ok", rx3)
        service.execute(slow.id)
        service.execute(cancelled.id)
        service.execute(expired.id)
        assert service.cancel(cancelled.id).state is JobState.CANCELLED
        wait_terminal(expired, 5)
        assert expired.state is JobState.FAILED and "waited" in expired.error["message"], expired.error
        service.cancel(slow.id)
        wait_terminal(slow)


def test_a_stalled_stage_fails_its_job_and_cleans_up(service):
    """The NCA opened its stream and then went quiet: after the stall timeout (1.5 s here) the
    job fails, naming the stage and the NCAs that made no progress, instead of running forever."""
    with Receiver() as rx:
        job = submit(service, "stuck", rx)
        t0 = time.monotonic()
        service.execute(job.id)
        wait_terminal(job, 15)
        took = time.monotonic() - t0
        assert rx.wait(10) and rx.error is not None  # its stream never ended
    assert job.state is JobState.FAILED
    assert job.error["nca"] == "nca0" and job.error["stage"] == 0 and job.error["stalled"] == ["nca0"]
    assert "made no progress for 2 s" in job.error["message"]
    assert 1.5 <= took < 8
    assert service.cores.free == 2


def test_a_slow_stage_that_moves_is_not_stalled(service):
    """2 ms a tuple for 1000 tuples takes longer than the 1.5 s timeout, but moves all along."""
    with Receiver() as rx:
        job = submit(service, "slow", rx)
        service.execute(job.id)
        wait_terminal(job, 30)
        assert rx.wait(10)
    assert job.state is JobState.SUCCEEDED, job.error
    assert job.timeline.to_json()["phases"]["stage:0"]["duration_ms"] > 1500
