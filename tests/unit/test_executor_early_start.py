"""An NCA allocates as soon as its own compile is done (runtime/executor.py): a compile failure of
another NCA still fails the job promptly with that compile's error, and every instance, a started
native process included, is destroyed."""
from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from jumpgate.client.receiver import Receiver
from jumpgate.deploy.warm import WarmSettings
from jumpgate.nca.interface import CompileResult, NcaError, NcaInstance
from jumpgate.nca.registry import Registry, load_registry
from jumpgate.runtime.jobs import JobState
from jumpgate.runtime.service import JumpgateService, Settings
from tests.plugins.misbehaving import MisbehavingInstance, MisbehavingSource, behaviour_of

from .test_warm_pool import my_children, my_ncas, wait_for

SCHEMA = [{"name": "a", "type": "int64"}]


class SlowFailingCompile(MisbehavingSource):
    """The misbehaving source, except that a `fail_compile` read fails its compile only once
    `ready_to_fail()` is true (bounded): after the job's other NCAs compiled and started
    allocating. It alone takes ORC reads (scan_json takes only JSON)."""

    name = "testing.slow_failing_compile"

    def __init__(self, ready_to_fail: Callable[[], bool]) -> None:
        self.ready_to_fail = ready_to_fail

    def instantiate(self, spec, context) -> NcaInstance:
        behaviour = behaviour_of(spec.operations()[0])
        if behaviour == "fail_compile":
            return _SlowFailing(spec, behaviour, self.tuples, self.ready_to_fail)
        return MisbehavingInstance(spec, behaviour, self.tuples)


class _SlowFailing(MisbehavingInstance):
    def __init__(self, spec, behaviour: str, tuples: int, ready_to_fail: Callable[[], bool]) -> None:
        super().__init__(spec, behaviour, tuples)
        self.ready_to_fail = ready_to_fail

    def compile(self) -> CompileResult:
        deadline = time.monotonic() + 60
        while not self.ready_to_fail() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise NcaError("compiler said no (on purpose, late)")


def two_sends(first: str, second: str, rx1: Receiver, rx2: Receiver) -> dict:
    ops = []
    for name, path, rx in (("a", first, rx1), ("b", second, rx2)):
        fmt = path.rsplit(".", 1)[-1].replace("jsonl", "json")
        ops += [{"kind": "read", "name": f"r{name}", "path": path, "format": fmt, "schema": SCHEMA},
                {"kind": "send", "name": name, "input": f"r{name}", "transport": "tcp", "host": "127.0.0.1",
                 "port": rx.port}]
    return {"operations": ops}


def run_failing(svc: JumpgateService, body: dict, rx1: Receiver, rx2: Receiver):
    job = svc.submit(body)
    for name, rx in (("a", rx1), ("b", rx2)):
        out = job.pipeline.outputs[name]
        rx.start(out.expected_streams, out.layout)
    t0 = time.monotonic()
    svc.execute(job.id)
    assert job.done.wait(20), job.state
    return job, time.monotonic() - t0


def test_a_late_compile_failure_stops_an_nca_that_never_gets_ready(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("never_ready", "fail_compile"):
        (data / f"{name}.jsonl").write_text("{}\n")
    started = time.monotonic()
    reg = Registry()
    reg.add(SlowFailingCompile(lambda: time.monotonic() - started > 0.5))
    svc = JumpgateService(Settings(data_root=data, cores=2, overcommit=1, cache_dir=tmp_path / "cache"), registry=reg)
    try:
        with Receiver() as rx1, Receiver() as rx2:
            job, took = run_failing(svc, two_sends("never_ready.jsonl", "fail_compile.jsonl", rx1, rx2), rx1, rx2)
        failing = next(nid for nid, i in job.runner.instances.items() if isinstance(i, _SlowFailing))
        never = next(nid for nid in job.runner.instances if nid != failing)
        assert job.state is JobState.FAILED
        assert job.error["nca"] == failing and job.error["step"] == "compile"
        assert "late" in job.error["message"]
        assert took < 5  # not the never-ready NCA's own 60 s
        assert "allocate" in job.timeline.to_json()["ncas"][never]  # it had started allocating
        assert all(i.destroyed.is_set() for i in job.runner.instances.values())
        assert svc.cores.free == 2
    finally:
        svc.shutdown()


@pytest.mark.parametrize("warm", [0, 1])
def test_a_compile_failure_stops_a_started_nca_process(tmp_path, tmp_path_factory, warm):
    data = tmp_path / "data"
    data.mkdir()
    (data / "t.jsonl").write_text("".join(json.dumps({"a": i}) + "\n" for i in range(10)))
    (data / "fail_compile.orc").write_text("not read: its NCA fails to compile")
    svc: JumpgateService | None = None
    reg = load_registry(["software.scan_json"])
    reg.add(SlowFailingCompile(lambda: svc is not None and bool(svc.deployer.running())))
    before = my_children()
    svc = JumpgateService(Settings(data_root=data, cores=2, cache_dir=tmp_path_factory.getbasetemp() / "nca-cache",
                                   work_root=tmp_path / "work", warm=WarmSettings(per_binary=warm)),
                          registry=reg)
    try:
        with Receiver() as rx1, Receiver() as rx2:
            job, _ = run_failing(svc, two_sends("t.jsonl", "fail_compile.orc", rx1, rx2), rx1, rx2)
        impls = {n.id: n.implementation for n in job.pipeline.ncas}
        assert sorted(impls.values()) == ["software.scan_json", SlowFailingCompile.name]
        assert job.state is JobState.FAILED and job.error["step"] == "compile"
        scan = next(nid for nid, impl in impls.items() if impl == "software.scan_json")
        allocate = job.timeline.to_json()["ncas"][scan]["allocate"]
        assert "end_ms" in allocate  # its process started (and said ready) before the failure
        assert svc.deployer.running() == []
        assert wait_for(lambda: not (my_ncas() - before - set(svc.deployer.warm.pids())), 10.0)
    finally:
        svc.shutdown()
    assert wait_for(lambda: not (my_children() - before), 10.0)
