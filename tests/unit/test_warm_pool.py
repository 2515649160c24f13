"""Pre-started NCA processes (jumpgate/deploy/warm.py) with a real software NCA binary: a spare is
handed out once, to a job with the same command line, already `ready`; caps and idle expiry stop
the surplus; shutdown, and a job run through the service, leave no process behind."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from jumpgate.agent.fork_server import is_fork_server
from jumpgate.client.receiver import Receiver
from jumpgate.deploy.local import LocalDeployer
from jumpgate.deploy.warm import WarmSettings
from jumpgate.ncas.software.build import build_nca
from jumpgate.runtime.jobs import JobState
from jumpgate.runtime.service import JumpgateService, Settings

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def binary(tmp_path_factory) -> str:
    cache = tmp_path_factory.getbasetemp() / "nca-cache"
    return str(build_nca((FIXTURES / "copy_query.c").read_text(), "scan_json", cache).path)


def argv(binary: str, inputs: int = 1) -> list[str]:
    return [binary, "--bind", "127.0.0.1", "--inputs", str(inputs)]


def my_children() -> set[int]:
    """Live (not zombie) child processes of this test process."""
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            out.add(int(entry))
    return out


def my_ncas() -> set[int]:
    """Live NCA processes this test process started, itself or through its fork servers (which
    are its children, and the NCAs theirs: docs/nca-process-protocol.md, "Fork servers")."""
    out = set()
    for pid in my_children():
        try:
            forker = is_fork_server(Path(f"/proc/{pid}/cmdline").read_bytes())
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split() if forker else []
        except OSError:  # gone meanwhile
            continue
        if not forker:
            out.add(pid)
        for kid in map(int, kids):  # a fork server is one thread: its children are listed there
            try:
                if Path(f"/proc/{kid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    out.add(kid)
            except OSError:
                pass
    return out


def wait_for(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


@pytest.fixture
def deployer(tmp_path):
    before = my_children()
    made: list[LocalDeployer] = []

    def make(**settings) -> LocalDeployer:
        d = LocalDeployer("127.0.0.1", WarmSettings(**settings), tmp_path / "warm")
        made.append(d)
        return d

    yield make
    for d in made:
        d.shutdown()
    assert wait_for(lambda: not (my_children() - before), 10.0)


def ready_ports(proc) -> list[int]:
    event = json.loads(next(proc.events()))
    assert event["event"] == "ready", event
    return event["ports"]


def test_a_spare_goes_to_one_job_with_the_same_command_line(deployer, binary, tmp_path):
    d = deployer(per_binary=1)
    d.warm_up(d.host, argv(binary))
    [spare] = wait_for(d.warm.pids)
    assert d.running() == []  # idle spares are not counted as jobs' NCAs
    assert d.start(d.host, argv(binary, inputs=2), tmp_path, "other", reuse=True).pid != spare  # other command line
    proc = d.start(d.host, argv(binary), tmp_path, "job", reuse=True)
    assert proc.pid == spare and d.warm.pids() == []
    assert len(ready_ports(proc)) == 1  # it said `ready` before the job took it, ports bound
    assert proc.log_path.parent == tmp_path / "warm"
    again = d.start(d.host, argv(binary), tmp_path, "job2", reuse=True)  # handed out once only: a fresh start
    assert again.pid != spare and again.log_path == tmp_path / "job2.stderr"
    d.stop(proc)
    assert not proc.log_path.exists()  # the spare's log goes with it
    d.stop(again)


def test_per_binary_and_total_caps_stop_the_oldest(deployer, binary):
    d = deployer(per_binary=1, total=2)
    for _ in range(3):
        d.warm_up(d.host, argv(binary, 1))
    [first] = wait_for(d.warm.pids)
    time.sleep(0.2)
    assert d.warm.pids() == [first]  # one per command line
    d.warm_up(d.host, argv(binary, 2))
    wait_for(lambda: len(d.warm.pids()) == 2)
    d.warm_up(d.host, argv(binary, 3))
    wait_for(lambda: first not in d.warm.pids() and len(d.warm.pids()) == 2)
    assert wait_for(lambda: first not in my_children())  # the oldest was stopped, not forgotten


def test_a_binary_gets_as_many_spares_as_a_job_used_at_once(deployer, binary, tmp_path):
    """Each process a job ends asks for one replacement: a job that ran two processes of one
    command line leaves two spares (up to per_binary), and the next such job takes both."""
    d = deployer()  # the defaults
    assert WarmSettings().per_binary >= 2 and WarmSettings().total >= 32
    first = [d.start(d.host, argv(binary), tmp_path, f"a{i}", reuse=True) for i in range(2)]
    for proc in first:
        d.stop(proc)
        d.warm_up(d.host, argv(binary))
    spares = wait_for(lambda: len(d.warm.pids()) == 2 and d.warm.pids())
    again = [d.start(d.host, argv(binary), tmp_path, f"b{i}", reuse=True) for i in range(2)]
    assert sorted(p.pid for p in again) == sorted(spares) and d.warm.pids() == []
    for proc in again:
        d.stop(proc)


def test_idle_spares_expire_and_dead_ones_are_never_handed_out(deployer, binary, tmp_path):
    d = deployer(per_binary=1, idle_s=0.3)
    d.warm_up(d.host, argv(binary))
    [spare] = wait_for(d.warm.pids)
    wait_for(lambda: not d.warm.pids(), 5.0)
    assert wait_for(lambda: spare not in my_children())
    assert not list((tmp_path / "warm").glob("*.stderr"))

    d = deployer(per_binary=1)
    d.warm_up(d.host, argv(binary))
    [spare] = wait_for(d.warm.pids)
    os.kill(spare, 9)
    wait_for(lambda: spare not in my_children())
    proc = d.start(d.host, argv(binary), tmp_path, "job", reuse=True)
    assert proc.pid != spare and len(ready_ports(proc)) == 1
    d.stop(proc)


def test_shutdown_stops_spares_and_starts_under_way(deployer, binary):
    before = my_children()
    d = deployer(per_binary=1, total=8)
    for n in range(1, 6):
        d.warm_up(d.host, argv(binary, n))
    wait_for(d.warm.pids)  # some started, others still being started
    d.shutdown()
    assert d.warm.pids() == []
    assert wait_for(lambda: not (my_children() - before), 10.0)
    d.warm_up(d.host, argv(binary))  # after shutdown nothing starts again
    time.sleep(0.2)
    assert not (my_children() - before)


def test_a_second_job_runs_on_the_spare_left_by_the_first(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "t.jsonl").write_text("".join(json.dumps({"a": i}) + "\n" for i in range(100)))
    before = my_children()
    svc = JumpgateService(Settings(data_root=data, cores=2, cache_dir=tmp_path / "cache",
                                   warm=WarmSettings(per_binary=1)))
    spares = []
    try:
        for _ in range(2):
            with Receiver() as rx:
                job = svc.submit({"operations": [
                    {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json",
                     "schema": [{"name": "a", "type": "int64"}]},
                    {"kind": "filter", "name": "f", "input": "r", "condition": "a >= 90"},
                    {"kind": "send", "name": "out", "input": "f", "transport": "tcp", "host": "127.0.0.1",
                     "port": rx.port}]})
                out = job.pipeline.outputs["out"]
                rx.start(out.expected_streams, out.layout)
                svc.execute(job.id)
                assert job.done.wait(60) and job.state is JobState.SUCCEEDED, job.error
                assert rx.wait(10) and rx.table().column("a").to_pylist() == list(range(90, 100))
            spares.append(wait_for(svc.deployer.warm.pids)[0])
            with open(f"/proc/{spares[-1]}/stat") as f:  # forked by its binary's fork server
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            assert is_fork_server(Path(f"/proc/{parent}/cmdline").read_bytes())
        # the second job took the first spare (and destroyed it); its own end left a new one
        assert spares[0] != spares[1] and wait_for(lambda: not os.path.exists(f"/proc/{spares[0]}"))
        assert [p.pid for p in svc.deployer.running()] == []
    finally:
        svc.shutdown()
    assert wait_for(lambda: not (my_children() - before), 10.0)
