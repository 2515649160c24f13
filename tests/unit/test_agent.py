"""The node agent (docs/agent.md) as a real process on loopback, spoken to through the server's
side of its protocol (jumpgate.agent.link): the handshake refuses a wrong secret both ways, blobs
are stored by checked digest, processes run with their control channel relayed, a session's
processes end with it (goodbye, a dropped connection, a lease that expires), and the agent's
answers about a data root are the server's own (LocalStorage)."""
from __future__ import annotations

import ast
import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jumpgate.agent import node as agent_node
from jumpgate.agent.link import AgentError, AgentLink
from jumpgate.dataflow.storage import LocalStorage
from jumpgate.nca.deployment import Host

HOST = Host("n", "127.0.0.1", 1)


@pytest.fixture
def agent(tmp_path):
    """A running agent: (state dir, secret, port, process)."""
    yield from running_agent(tmp_path)


def running_agent(tmp_path: Path):
    """The agent fixture's body, for other modules' fixtures."""
    state = tmp_path / "state"
    with open(tmp_path / "agent.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, agent_node.__file__, "serve", "--state", str(state),
                                 "--cache", str(tmp_path / "cache"), "--listen", "127.0.0.1:0"], stderr=log)
    deadline = time.monotonic() + 10
    while not (state / "pid").exists():
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "agent.log").read_text()
        time.sleep(0.01)
    port = int((state / "port").read_text().split()[1])
    yield state, (state / "secret").read_text().strip().encode(), port, proc
    proc.kill()
    proc.wait()


def connect(port: int, secret: bytes, lease: float = 10.0, **kwargs) -> AgentLink:
    sock = socket.create_connection(("127.0.0.1", port))
    return AgentLink(sock, secret, label="node n", lease=lease, **kwargs)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose (and so is one reaped between the two looks)
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # (reading the file of one just gone: ESRCH)
        return False


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def cat_like(tmp_path: Path) -> Path:
    """A stand-in NCA binary: echoes its commands as events until its input ends."""
    script = tmp_path / "echo-nca"
    script.write_text("#!/bin/sh\necho ready\nwhile read line; do echo \"got $line\"; done\necho bye >&2\n")
    script.chmod(0o755)
    return script


def test_the_node_agent_imports_only_the_standard_library_and_what_is_shipped_beside_it():
    for path in (Path(agent_node.__file__), agent_node.FORK_SERVER_FILE):
        tree = ast.parse(path.read_text())
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        shipped = {"fork_server"} if path.name == "node.py" else set()  # jumpgate/deploy/ssh.py ships both
        assert names <= set(sys.stdlib_module_names) | {"__future__"} | shipped, names - set(sys.stdlib_module_names)


def test_the_shipped_agent_runs_from_a_directory_of_its_two_files(tmp_path):
    """As jumpgate/deploy/ssh.py lays it out on a node: agent.py and fork_server.py, no package."""
    (tmp_path / "agent.py").write_bytes(Path(agent_node.__file__).read_bytes())
    (tmp_path / "fork_server.py").write_bytes(agent_node.FORK_SERVER_FILE.read_bytes())
    out = subprocess.run([sys.executable, "-E", str(tmp_path / "agent.py"), "--help"], capture_output=True, text=True,
                         timeout=30, cwd="/")
    assert out.returncode == 0 and "usage: jumpgate agent" in out.stdout, out.stderr
    version = subprocess.run([sys.executable, "-E", "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
                              "import agent; print(agent.file_version())"], capture_output=True, text=True, timeout=30)
    assert version.stdout.strip() == agent_node.file_version(), version.stderr  # the server's name for it


def test_a_wrong_secret_is_refused_and_an_impostor_agent_is_not_believed(agent):
    _, secret, port, _ = agent
    with pytest.raises(AgentError, match="secret does not match"):
        connect(port, b"not the secret")
    # An impostor: a listener that speaks first like an agent but does not know the secret.
    with socket.create_server(("127.0.0.1", 0)) as fake, socket.create_connection(fake.getsockname()) as client:
        peer, _ = fake.accept()
        with peer:
            peer.sendall(b'{"agent":"jumpgate","protocol":1,"nonce":"00"}\n')

            def answer() -> None:
                while b"\n" not in peer.recv(4096):
                    pass
                peer.sendall(b'{"ok":true,"mac":"forged"}\n')
            t = threading.Thread(target=answer, daemon=True)
            t.start()
            with pytest.raises(AgentError, match="could not prove"):
                AgentLink(client, secret, label="node n")
            t.join(5)


def test_blobs_are_stored_by_their_checked_digest(agent, tmp_path):
    _, secret, port, _ = agent
    link = connect(port, secret)
    try:
        binary = cat_like(tmp_path)
        path = link.ship(binary)
        assert Path(path).read_bytes() == binary.read_bytes() and os.access(path, os.X_OK)
        digest = hashlib.sha256(b"other").hexdigest()
        with pytest.raises(AgentError, match="not " + digest[:16]):
            link.request({"op": "put", "digest": digest, "name": "x"}, b"not other")
        with pytest.raises(AgentError, match="not a plain file name"):
            link.request({"op": "put", "digest": hashlib.sha256(b"a").hexdigest(), "name": "../x"}, b"a")
    finally:
        link.close()


def test_a_process_runs_with_its_control_channel_relayed_and_is_stopped(agent, tmp_path):
    _, secret, port, _ = agent
    link = connect(port, secret)
    try:
        proc = link.start([link.ship(cat_like(tmp_path)), "--x"], "job1", "nca0", HOST)
        events = proc.events()
        assert next(events) == b"ready\n"
        proc.send(b"hello\nworld\n")
        assert [next(events), next(events)] == [b"got hello\n", b"got world\n"]
        assert proc in link.processes()
        assert link.request({"op": "activity", "p": proc.tag})["reading"] is not None
        link.stop(proc, grace=1.0)
        assert list(events) == [] and proc.exited.is_set()
        assert wait_gone(proc.pid, 5)
        assert (tmp_path / "cache" / "work" / "job1" / "nca0.stderr").read_text() == "bye\n"
        with pytest.raises(AgentError, match="no process"):
            link.request({"op": "tail", "p": proc.tag})
    finally:
        link.close()


def test_a_bad_start_is_a_clear_refusal(agent, tmp_path):
    _, secret, port, _ = agent
    link = connect(port, secret)
    try:
        with pytest.raises(AgentError, match="No such file"):
            link.start([str(tmp_path / "missing")], "job1", "nca0", HOST)
        with pytest.raises(AgentError, match="not a plain name"):
            link.start([str(cat_like(tmp_path))], "../up", "nca0", HOST)
        assert link.request({"op": "ping"}) is not None  # the session goes on
    finally:
        link.close()


def test_a_process_runs_on_the_nodes_cpus(agent, tmp_path):
    """The inventory's `cpus` travel with each start: the agent pins the process (every thread),
    and refuses CPUs the node does not let it use, naming them."""
    _, secret, port, _ = agent
    link = connect(port, secret)
    cpu = max(os.sched_getaffinity(0))
    try:
        proc = link.start([link.ship(cat_like(tmp_path))], "job1", "nca0", Host("n", "127.0.0.1", 1, cpus=(cpu,)))
        assert next(proc.events()) == b"ready\n"
        assert os.sched_getaffinity(proc.pid) == {cpu}
        link.stop(proc, grace=1.0)
        with pytest.raises(AgentError, match="this node has no CPU 4095 that the agent may use"):
            link.start([str(cat_like(tmp_path))], "job1", "nca1", Host("n", "127.0.0.1", 1, cpus=(4095,)))
    finally:
        link.close()


def test_a_process_starts_on_its_cpus_and_its_starter_gets_its_own_back():
    """`pinned_start`: the child runs on the node's CPUs from its first instruction (it reads its
    own CPU set first thing: pinning it after the start could not promise that), and the thread
    that started it has its CPU set back afterwards."""
    before = os.sched_getaffinity(0)
    cpu = max(before)
    code = "import os; print(sorted(os.sched_getaffinity(0)))"
    with agent_node.pinned_start((cpu,)):
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert child.stdout.strip() == str([cpu])
    assert os.sched_getaffinity(0) == before
    with agent_node.pinned_start(()):  # a node without `cpus`: the process runs where the kernel puts it
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert child.stdout.strip() == str(sorted(before))


@pytest.mark.parametrize("how", ["goodbye", "dropped connection", "lease expired"])
def test_a_sessions_processes_end_with_it(agent, tmp_path, how):
    _, secret, port, agent_proc = agent
    lease = 1.0 if how == "lease expired" else 10.0
    link = connect(port, secret, lease=lease)
    proc = link.start([link.ship(cat_like(tmp_path))], "job1", "nca0", HOST)
    assert next(proc.events()) == b"ready\n"
    t0 = time.monotonic()
    if how == "goodbye":
        link.close()
    elif how == "dropped connection":
        link._frames.stream.shutdown(socket.SHUT_RDWR)
    else:
        link._closed.set()  # the heartbeat stops: the server has gone silent without closing
    assert wait_gone(proc.pid, lease + 3), f"{how}: the NCA still runs"
    if how == "lease expired":
        assert time.monotonic() - t0 >= lease * 0.9
    assert agent_proc.poll() is None  # the agent itself serves on
    link._frames.close()


def test_the_agents_answers_about_a_data_root_are_the_servers_own(agent, tmp_path):
    _, secret, port, _ = agent
    root = tmp_path / "root"
    (root / "t").mkdir(parents=True)
    (root / "t" / "a.jsonl").write_text("{}\n")
    (root / "t" / "b.jsonl").write_text("{}\n{}\n")
    (tmp_path / "outside.jsonl").write_text("secret\n")
    (root / "escape.jsonl").symlink_to(tmp_path / "outside.jsonl")
    (root / "dangling.jsonl").symlink_to(tmp_path / "nothing")
    link = connect(port, secret)
    try:
        local = LocalStorage(root)
        for rel in ("t/a.jsonl", "t/b.jsonl", "t", "missing.jsonl", "escape.jsonl", "dangling.jsonl"):
            a = link.request({"op": "stat", "root": str(root), "rel": rel})
            facts = local.stat(rel)
            assert (a["real"], a["inside"], a["exists"], a["is_file"], a["size"]) == \
                (facts.real, facts.inside, facts.exists, facts.is_file, facts.size), rel
        for pattern in ("t/*.jsonl", "**/*.jsonl", "t/[a].jsonl", "nothing/*"):
            assert link.request({"op": "glob", "root": str(root), "pattern": pattern})["paths"] == local.glob(pattern)
    finally:
        link.close()


def test_ensure_starts_one_agent_and_finds_it_again(tmp_path):
    state, cache = tmp_path / "state", tmp_path / "cache"
    argv = [sys.executable, agent_node.__file__, "ensure", "--state", str(state), "--cache", str(cache),
            "--idle-exit", "30"]
    import json
    first = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    try:
        again = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
        assert again == first and alive(first["pid"])
        assert (state / "secret").stat().st_mode & 0o077 == 0  # readable by the node's user only
        link = connect(first["port"], first["secret"].encode())
        assert link.info["session"] and link.request({"op": "health"})["pid"] == first["pid"]
        link.close()
    finally:
        os.kill(first["pid"], signal.SIGTERM)
    assert wait_gone(first["pid"], 5)


def test_old_job_directories_are_swept_and_busy_ones_kept(tmp_path):
    agent = agent_node.Agent(tmp_path / "cache", b"s", "v")
    old, fresh = agent.work / "job-old", agent.work / "job-new"
    for d in (old, fresh):
        d.mkdir()
        (d / "nca0.stderr").write_text("log")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert agent.sweep_work() == ["job-old"]
    assert not old.exists() and fresh.exists()


def test_a_pod_deployer_reaches_the_agent_directly_and_is_retired_with_a_reason(agent, tmp_path):
    """The Kubernetes pod deployer (deploy/kube_pod.py): a TCP connection to the agent's address
    and the secret's handshake, then the shared agent-facing code (deploy/agent_deployer.py); a
    wrong secret is a down node with the reason; retiring the pod ends its NCAs, and what a job
    then reads of them names the node and why."""
    from jumpgate.deploy.kube_pod import KubePodDeployer

    _, secret, port, _ = agent
    host = Host("agent-x", "127.0.0.1", 2)
    wrong = KubePodDeployer(host, "agent-x", "jg", port, b"not-the-secret", connect_timeout=2)
    try:
        assert wrong.state == "down" and wrong.reason.startswith("pod jg/agent-x: node agent-x"), wrong.reason
        assert wrong.hosts() == [host] and wrong.running() == []
    finally:
        wrong.shutdown()
    pod = KubePodDeployer(host, "agent-x", "jg", port, secret, connect_timeout=2)
    try:
        assert (pod.state, pod.reason, pod.control_ports()) == ("up", "", [port])
        proc = pod.start(host, [pod.ship(host, cat_like(tmp_path))], tmp_path / "job9", "nca0")
        events = proc.events()
        assert next(events) == b"ready\n" and pod.running() == [proc]
        pod.retire("was removed: pod jg/agent-x was deleted")
        assert list(events) == [] and wait_gone(proc.pid, 5)
        assert pod.log_tail(proc) == "node agent-x was removed: pod jg/agent-x was deleted"
        assert pod.state == "down" and not pod.connect()  # retired for good
    finally:
        pod.shutdown()
