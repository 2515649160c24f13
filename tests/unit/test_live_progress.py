"""Live progress (docs/nca-process-protocol.md, "Live counters"; docs/contract.md §4): the runtime
answers `stats` with a running phase's counters; the software NCA plugin asks for them (also
through a node agent, which relays the command and the answer like any other); the executor reads
every running NCA's counters into the job's status, showing an NCA that cannot report as unknown
and never failing a job for it; and the `progress` object is final once the job has ended."""
from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jumpgate.agent import node as agent_node
from jumpgate.agent.link import AgentLink
from jumpgate.client.receiver import Receiver as ClientReceiver
from jumpgate.dataflow.plan import InputRef
from jumpgate.deploy.local import LocalDeployer
from jumpgate.nca.deployment import ControlChannel, Deployer, Host
from jumpgate.nca.interface import (
    FILE,
    NTF,
    Destination,
    Endpoint,
    InputPort,
    InstanceContext,
    NcaSpec,
    OutputSpec,
    PhaseStats,
    ResourceRequest,
    StreamSpec,
)
from jumpgate.nca.registry import Registry
from jumpgate.ncas.software.build import build_nca
from jumpgate.ncas.software.process import ProcessNca
from jumpgate.runtime.jobs import JobState
from jumpgate.runtime.progress import LiveReadings, progress_json
from jumpgate.runtime.service import JumpgateService, Settings
from tests.plugins.misbehaving import MisbehavingInstance, MisbehavingSource, behaviour_of

from .fixtures.runtime_harness import FIXTURES, NcaProcess, Receiver

ROWS = 40000  # ~1 KB each: far more than the socket buffers hold, so a scan to a client that does
# not read blocks with part of its input read


@pytest.fixture(scope="module")
def scan(tmp_path_factory) -> Path:
    cache = tmp_path_factory.getbasetemp() / "nca-cache"
    return build_nca((FIXTURES / "copy_query.c").read_text(), "scan_json", cache).path


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "big.jsonl"
    path.write_text("".join(json.dumps({"i": i, "s": "x" * 1000}) + "\n" for i in range(ROWS)))
    return path


def drain(receiver: Receiver) -> None:
    """Start reading every connection the (not reading) receiver accepted."""
    def read(c: socket.socket) -> None:
        with contextlib.suppress(OSError):  # the test closes the receiver when it is done
            while c.recv(1 << 20):
                pass

    for c in list(receiver.conns):
        threading.Thread(target=read, args=(c,), daemon=True).start()


def counters(event: dict) -> dict:
    return {k: event["stats"][k] for k in ("tuples_in", "bytes_in", "tuples_out", "bytes_out")}


# ------------------------------------------------------------------ the runtime's `stats`


def test_stats_answers_a_running_phases_counters_so_far_then_its_totals(scan, big):
    rx = Receiver(read=False)  # accepts, never reads: the scan blocks once the buffers are full
    nca = NcaProcess(scan)
    try:
        assert nca.ready["stats"] is True  # says it answers `stats`
        nca.send("stats")
        before = nca.event("stats")
        assert before["phase"] is None and before["running"] is False and not any(counters(before).values())
        nca.configure([big], [(0, rx.port, 0, 1)])
        nca.send("execute 0")
        deadline = time.monotonic() + 30
        while True:  # until the scan has read part of its input (then it blocks on its client)
            time.sleep(0.1)
            nca.send("stats")
            live = nca.event("stats")
            assert live["phase"] == 0 and live["running"] is True, live
            if live["stats"]["tuples_in"] > 0 or time.monotonic() > deadline:
                break
        # Several `stats` lines at once, during the phase: each is answered once, at once.
        nca.send("stats", "stats")
        a, b = nca.event("stats"), nca.event("stats")
        for ev in (live, a, b):
            c = counters(ev)
            assert 0 < c["tuples_in"] < ROWS and 0 < c["bytes_in"] < big.stat().st_size, ev
            assert 0 < c["tuples_out"] <= c["tuples_in"] and c["bytes_out"] > 0, ev
            assert ev["stats"]["wall_ns"] > 0 and ev["stats"]["threads"] == 1
        assert counters(live)["tuples_in"] <= counters(a)["tuples_in"] <= counters(b)["tuples_in"]
        drain(rx)
        done = nca.event("done")  # not an answer to a `stats` seen during the phase
        assert done["stats"]["tuples_in"] == done["stats"]["tuples_out"] == ROWS
        nca.send("stats")
        after = nca.event("stats")
        assert after["phase"] == 0 and after["running"] is False
        assert counters(after) == counters(done) and after["stats"]["wall_ns"] == done["stats"]["wall_ns"]
        assert nca.close() == 0
    finally:
        nca.kill()
        rx.close()


# ------------------------------------------------------------------ the plugin, here and on an agent


class CopyScan(ProcessNca):
    """The copy fixture as a software NCA: a JSON scan of its `file` input to output port 0."""

    driver = "scan_json"

    def generate_source(self) -> str:
        return (FIXTURES / "copy_query.c").read_text()


def copy_scan_spec(path: Path) -> NcaSpec:
    return NcaSpec(id="nca0", implementation="testing.copy_scan", plan=None, ops=(),
                   inputs=(InputPort(StreamSpec("json", FILE), InputRef("r"), files=(str(path),)),),
                   outputs=(OutputSpec(StreamSpec(NTF, "tcp")),), output_refs=(InputRef("r"),), stages=(0,),
                   resources=ResourceRequest(cores=1), job_id="job1")


class AgentDeployer(Deployer):
    """One node's NCAs through a node agent's session (what the SSH deployer does once connected)."""

    def __init__(self, link: AgentLink, host: Host) -> None:
        self.link, self.host = link, host

    def hosts(self):
        return [self.host]

    def ship(self, host: Host, artifact: Path) -> str:
        return self.link.ship(artifact)

    def start(self, host: Host, argv, work_dir: Path, name: str, *, reuse: bool = False) -> ControlChannel:
        return self.link.start(argv, work_dir.name, name, host)

    def stop(self, channel, grace: float = 2.0) -> None:
        self.link.stop(channel, grace)

    def shutdown(self) -> None:
        pass


@pytest.fixture
def agent_link(tmp_path):
    state = tmp_path / "state"
    with open(tmp_path / "agent.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, agent_node.__file__, "serve", "--state", str(state),
                                 "--cache", str(tmp_path / "agent-cache"), "--listen", "127.0.0.1:0"], stderr=log)
    try:
        deadline = time.monotonic() + 10
        while not (state / "pid").exists():
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "agent.log").read_text()
            time.sleep(0.01)
        port = int((state / "port").read_text().split()[1])
        secret = (state / "secret").read_text().strip().encode()
        link = AgentLink(socket.create_connection(("127.0.0.1", port)), secret, label="node n", lease=10.0)
        yield link
        link.close()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("where", ["local", "agent"])
def test_the_plugin_reads_a_running_nca_s_counters_here_and_through_a_node_agent(scan, big, tmp_path, where,
                                                                                 request):
    host = Host("n", "127.0.0.1", 1)
    deployer = AgentDeployer(request.getfixturevalue("agent_link"), host) if where == "agent" \
        else LocalDeployer("127.0.0.1")
    if where == "local":
        host = deployer.hosts()[0]
    context = InstanceContext(deployer=deployer, work_dir=str(tmp_path / "job1"), cache_dir=str(scan.parent.parent),
                              host=host)
    (tmp_path / "job1").mkdir()
    inst = CopyScan(copy_scan_spec(big), context)
    rx = Receiver(read=False)
    result: dict = {}
    try:
        inst.compile()
        assert inst.allocate() == []
        assert inst.progress() is None  # nothing executed yet
        inst.configure([[Destination(Endpoint("127.0.0.1", rx.port), 0, 1)]])
        t = threading.Thread(target=lambda: result.update(stats=inst.execute(0)), daemon=True)
        t.start()
        readings: list[PhaseStats] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (len(readings) >= 2 and readings[-1].tuples_in > 0):
            reading = inst.progress()  # the answer to the call before (zeros at first)
            assert reading is not None
            if reading.tuples_in:
                readings.append(reading)
            time.sleep(0.1)
        assert readings and 0 < readings[-1].tuples_in < ROWS and readings[-1].bytes_in > 0, readings
        assert readings[0].tuples_in <= readings[-1].tuples_in and readings[-1].tuples_out > 0
        drain(rx)
        t.join(30)
        assert result["stats"].tuples_in == ROWS
        inst.progress()
        time.sleep(0.3)
        final = inst.progress()  # after the phase: its totals
        assert (final.tuples_in, final.tuples_out, final.bytes_in) == (ROWS, ROWS, result["stats"].bytes_in)
    finally:
        inst.destroy()
        rx.close()
        if where == "local":
            deployer.shutdown()


def test_a_process_that_does_not_say_it_answers_stats_is_never_asked(tmp_path):
    """A process speaking an older protocol (no `"stats": true` in its `ready`) would take `stats`
    for an unknown command and fail: it is never sent one, and its progress is unknown."""
    seen = tmp_path / "commands.txt"
    script = tmp_path / "old-nca"
    script.write_text("#!/bin/sh\necho '{\"event\":\"ready\",\"ports\":[]}'\n"
                      f"while read line; do echo \"$line\" >> {seen}\n"
                      "  case \"$line\" in execute*) sleep 0.5; echo '{\"event\":\"done\",\"phase\":0,\"stats\":"
                      "{\"tuples_out\":3}}';; esac\ndone\n")
    script.chmod(0o755)
    deployer = LocalDeployer("127.0.0.1")
    context = InstanceContext(deployer=deployer, work_dir=str(tmp_path), cache_dir=str(tmp_path / "cache"),
                              host=deployer.hosts()[0])
    inst = CopyScan(copy_scan_spec(tmp_path / "none.jsonl"), context)
    inst.binary = script
    inst.udp = type("NoUdp", (), {"dpdk": False, "acquire": lambda self: None, "release": lambda self: None,
                                  "params": lambda self: {}})()
    try:
        inst.allocate()
        result: dict = {}
        t = threading.Thread(target=lambda: result.update(stats=inst.execute(0)), daemon=True)
        t.start()
        time.sleep(0.1)
        assert inst.progress() is None
        t.join(10)
        assert result["stats"].tuples_out == 3
    finally:
        inst.destroy()
        deployer.shutdown()
    assert "stats" not in seen.read_text().split("\n")


# ------------------------------------------------------------------ the executor and the status


class ReportingInstance(MisbehavingInstance):
    """A misbehaving source that reports its counters (`progress`); `broken` ones raise instead."""

    broken = False

    def progress(self) -> PhaseStats | None:
        if self.broken:
            raise RuntimeError("cannot count (on purpose)")
        return PhaseStats(tuples_out=self.sent, bytes_out=self.sent * 16)


class BrokenInstance(ReportingInstance):
    broken = True


class ReportingSource(MisbehavingSource):
    name = "testing.reporting_source"
    kinds = {"ok": MisbehavingInstance, "slow": ReportingInstance, "stuck": BrokenInstance}

    def instantiate(self, spec, context):
        return self.kinds[behaviour_of(spec.operations()[0])](spec, "slow", self.tuples)


@pytest.fixture
def service(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("slow", "stuck", "ok"):
        (data / f"{name}.jsonl").write_text("{}\n")
    reg = Registry()
    reg.add(ReportingSource())
    svc = JumpgateService(Settings(data_root=data, cores=4, cache_dir=tmp_path / "cache"), registry=reg)
    yield svc
    svc.shutdown()


def test_the_executor_reads_running_ncas_counters_and_an_nca_that_cannot_is_unknown(service):
    """Three sources, each 2 s long: one reports, one does not (no `progress`), one's `progress`
    raises. While they run, the status shows the first's growing count and the others' as null;
    the job succeeds; afterwards all three show their `done` totals, and the answer is final."""
    receivers = {n: ClientReceiver() for n in ("slow", "ok", "stuck")}
    ops = []
    for name in receivers:
        ops.append({"kind": "read", "name": f"r_{name}", "path": f"{name}.jsonl", "format": "json",
                    "schema": [{"name": "a", "type": "int64"}]})
        ops.append({"kind": "send", "name": f"o_{name}", "input": f"r_{name}", "transport": "tcp",
                    "host": "127.0.0.1", "port": receivers[name].port})
    try:
        job = service.submit({"operations": ops})
        for name, rx in receivers.items():
            out = job.pipeline.outputs[f"o_{name}"]
            rx.start(out.expected_streams, out.layout)
        by_read = {op: n.id for n in job.pipeline.ncas for op in n.ops}
        ids = {name: by_read[f"r_{name}"] for name in receivers}
        before = job.status_json()["progress"]
        assert before["final"] is False and before["stage"] is None
        assert {n["state"] for n in before["ncas"].values()} == {"waiting"}
        service.execute(job.id)
        seen = []
        while not job.done.wait(0.1):
            progress = job.status_json()["progress"]
            slow = progress["ncas"][ids["slow"]]
            # while all three run (on a busy machine one may end a little before the others, and
            # its `done` totals are known from then on)
            if slow["state"] == "running" and slow["tuples_out"] and all(
                    progress["ncas"][ids[n]]["state"] == "running" for n in ("ok", "stuck")):
                seen.append(progress)
        assert job.state is JobState.SUCCEEDED, job.error
        assert len(seen) >= 2, "no live reading seen"
        assert seen[0]["ncas"][ids["slow"]]["tuples_out"] < seen[-1]["ncas"][ids["slow"]]["tuples_out"] < 1000
        for p in seen:
            assert p["stage"] == 0 and p["final"] is False and p["rows_to_clients"] is None  # two unknown
            for name in ("ok", "stuck"):
                assert p["ncas"][ids[name]] == {"state": "running", "stage": 0, "tuples_in": None, "bytes_in": None,
                                                "tuples_out": None, "bytes_out": None}
        final = job.status_json()["progress"]
        assert final["final"] is True and final["stage"] is None and final["rows_to_clients"] == 3000
        for nid in ids.values():
            assert final["ncas"][nid]["state"] == "done" and final["ncas"][nid]["tuples_out"] == 1000
    finally:
        for rx in receivers.values():
            rx.close()


def test_progress_of_a_pipeline_from_its_timeline_and_live_readings():
    """Finished phases count from the timeline, the running one from its reading; a reading of a
    phase that has finished since is not counted twice."""
    pipeline = {"ncas": [{"id": "nca0", "stages": [0]}, {"id": "nca1", "stages": [0, 1]}], "stages": [["nca0", "nca1"],
                                                                                                   ["nca1"]],
                "edges": [{"from": "nca0", "client": False}, {"from": "nca1", "client": True}]}
    done = {"tuples_in": 10, "bytes_in": 100, "tuples_out": 5, "bytes_out": 50, "end_ms": 12.0}
    timeline = {"ncas": {"nca0": {"stages": [{"stage": 0, **done}]}, "nca1": {"stages": [{"stage": 0, **done}]}}}
    live = LiveReadings()
    live.stage_started(1)
    live.started("nca0", 0)
    live.read("nca0", 0, PhaseStats(tuples_in=9))  # late: nca0's stage 0 is in the timeline
    live.started("nca1", 1)
    live.read("nca1", 1, PhaseStats(tuples_in=3, bytes_in=30, tuples_out=2, bytes_out=20))
    live.read("nca1", 0, PhaseStats(tuples_in=99))  # a reading of a phase no longer current: ignored
    p = progress_json(pipeline, timeline, live, final=False, t0_ns=0)
    assert p["stage"] == 1 and p["stages"] == 2 and p["final"] is False and p["updated_ms"] > 12
    assert p["ncas"]["nca0"] == {"state": "done", "stage": 0, "tuples_in": 10, "bytes_in": 100, "tuples_out": 5,
                                 "bytes_out": 50}
    assert p["ncas"]["nca1"] == {"state": "running", "stage": 1, "tuples_in": 13, "bytes_in": 130, "tuples_out": 7,
                                 "bytes_out": 70}
    assert p["rows_to_clients"] == 7
    # ended before nca1's last phase finished (failed or cancelled): its phase that ran reported nothing
    timeline["ncas"]["nca1"]["stages"].append({"stage": 1, "end_ms": 20.0})
    p = progress_json(pipeline, timeline, None, final=True)
    assert p["final"] is True and p["stage"] is None and p["updated_ms"] == 20.0
    assert p["ncas"]["nca1"] == {"state": "done", "stage": 1, "tuples_in": None, "bytes_in": None,
                                 "tuples_out": None, "bytes_out": None}
    assert p["rows_to_clients"] is None
    del timeline["ncas"]["nca1"]["stages"][1:]
    assert progress_json(pipeline, timeline, None, final=True)["ncas"]["nca1"]["state"] == "stopped"
