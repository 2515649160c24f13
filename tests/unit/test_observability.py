"""Metrics and logs in one process (docs/operations.md), with the test NCAs of tests/plugins: every
line logged in a job's threads carries its id, the JSON lines parse, and two services in one
process keep their own metrics. The real server and a real scrape: tests/e2e/test_metrics.py."""
from __future__ import annotations

import json
import logging
import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jumpgate.client.receiver import Receiver
from jumpgate.nca.interface import CompileResult, Endpoint, NcaInstance, NcaSpec, PhaseStats
from jumpgate.nca.registry import Registry
from jumpgate.runtime.jobs import JobState
from jumpgate.runtime.logs import JOB_ID, JsonFormatter
from jumpgate.runtime.service import JumpgateService, Settings
from tests.plugins.misbehaving import BEHAVIOURS, MisbehavingInstance, MisbehavingSource, behaviour_of

loud = logging.getLogger("jumpgate.tests.loud")


class LoudInstance(MisbehavingInstance):
    """Logs in every life-cycle step, each of which the executor runs in a thread of the job's."""

    def compile(self) -> CompileResult:
        loud.info("compile")
        return super().compile()

    def allocate(self) -> list[Endpoint]:
        loud.info("allocate")
        return super().allocate()

    def execute(self, phase: int) -> PhaseStats:
        loud.info("execute %d", phase)
        return super().execute(phase)

    def destroy(self) -> None:
        loud.info("destroy")
        super().destroy()


class LoudSource(MisbehavingSource):
    def instantiate(self, spec: NcaSpec, context) -> NcaInstance:
        return LoudInstance(spec, behaviour_of(spec.operations()[0]), self.tuples)


def make_service(tmp_path, name: str, source: MisbehavingSource) -> JumpgateService:
    data = tmp_path / name
    data.mkdir()
    for b in BEHAVIOURS:
        (data / f"{b}.jsonl").write_text("{}\n")
    reg = Registry()
    reg.add(source)
    return JumpgateService(Settings(data_root=data, cores=2, cache_dir=tmp_path / "cache", stall_timeout_s=5),
                           registry=reg)


class Lines(logging.Handler):
    """The JSON lines a server would write, and the thread each was logged in."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())
        self.lines: list[tuple[str, dict]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((threading.current_thread().name, json.loads(self.format(record))))


@pytest.fixture
def lines():
    handler = Lines()
    logger = logging.getLogger("jumpgate")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.lines
    logger.removeHandler(handler)
    logger.setLevel(old)


def run(svc: JumpgateService, behaviour: str):
    """Run a job whose read names the test NCA's behaviour; its rows go to a receiver here."""
    with Receiver() as rx:
        job = svc.submit({"operations": [
            {"kind": "read", "name": "r", "path": f"{behaviour}.jsonl", "format": "json",
             "schema": [{"name": "a", "type": "int64"}]},
            {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": "127.0.0.1", "port": rx.port}]})
        out = job.pipeline.outputs["out"]
        rx.start(out.expected_streams, out.layout)
        svc.execute(job.id)
        assert job.done.wait(30), f"job still {job.state}"
    return job


def test_every_line_logged_in_a_jobs_threads_carries_its_id(tmp_path, lines):
    svc = make_service(tmp_path, "data", LoudSource())
    try:
        ok, failed = run(svc, "ok"), run(svc, "fail_midstream")
    finally:
        svc.shutdown()
    loud.info("after the jobs")
    assert ok.state is JobState.SUCCEEDED and failed.state is JobState.FAILED
    for job in (ok, failed):
        mine = [(thread, line) for thread, line in lines if line.get("job_id") == job.id]
        steps = {line["message"] for _, line in mine if line["logger"] == loud.name}
        assert steps == {"compile", "allocate", "execute 0", "destroy"}, steps
        # the pool that runs steps and stages, and the threads that destroy NCAs, not just the job's own
        assert len({thread for thread, _ in mine}) >= 2, mine
        states = [line["message"] for _, line in mine if line["logger"] == "jumpgate.runtime.jobs"]
        assert states[0] == f"job {job.id} compiled for tenant default" and states[-1].startswith(
            f"job {job.id} running -> {job.state.value}"), states
    assert lines[-1][1]["message"] == "after the jobs" and "job_id" not in lines[-1][1]
    assert {"time", "level", "logger", "message"} <= set(lines[-1][1])
    assert JOB_ID.get() is None  # nothing leaked into the caller's context


def test_json_lines_carry_exceptions_and_ids_given_explicitly():
    record = logging.LogRecord("jumpgate.x", logging.ERROR, __file__, 1, "boom %s", ("now",), None)
    record.job_id = "abc"
    try:
        raise ValueError("inner")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "boom now" and line["job_id"] == "abc" and line["level"] == "ERROR"
    assert "ValueError: inner" in line["exception"]
    assert line["time"].endswith("+00:00")


def samples(svc: JumpgateService) -> dict[tuple[str, tuple], float]:
    body, _ = svc.metrics.render(None)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def test_two_services_in_one_process_keep_their_own_metrics(tmp_path):
    a = make_service(tmp_path, "a", MisbehavingSource())
    b = make_service(tmp_path, "b", MisbehavingSource())
    try:
        run(a, "ok")
        run(a, "ok")
        run(b, "fail_midstream")
        sa, sb = samples(a), samples(b)
    finally:
        a.shutdown()
        b.shutdown()
    assert sa[("jumpgate_jobs_finished_total", (("state", "succeeded"), ("tenant", "default")))] == 2
    assert ("jumpgate_jobs_finished_total", (("state", "succeeded"), ("tenant", "default"))) not in sb
    assert sb[("jumpgate_jobs_finished_total", (("state", "failed"), ("tenant", "default")))] == 1
    impl = (("direction", "out"), ("implementation", MisbehavingSource.name))
    assert sa[("jumpgate_nca_tuples_total", impl)] == 2 * MisbehavingSource.tuples
    assert ("jumpgate_nca_tuples_total", impl) not in sb  # its one execute failed: it reported nothing
    hit = (("implementation", MisbehavingSource.name), ("result", "hit"))
    assert sa[("jumpgate_compile_cache_total", hit)] == 2 and sb[("jumpgate_compile_cache_total", hit)] == 1
    # the failed job's setup ended, its execute did not
    assert sb[("jumpgate_job_phase_seconds_count", (("phase", "setup"),))] == 1
    assert ("jumpgate_job_phase_seconds_count", (("phase", "execute"),)) not in sb
    assert sa[("jumpgate_jobs", (("state", "succeeded"), ("tenant", "default")))] == 2
