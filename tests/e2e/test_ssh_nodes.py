"""Nodes reached over SSH (docs/deploy.md, `reach: ssh`), against a real OpenSSH server on an
address of the loopback range: the server ships its agent to the node and starts it through SSH
(docs/agent.md), a job's NCAs run on a local node and on the SSH node (through the agent, over
one channel of the SSH connection, binaries shipped by content), the answer equals DuckDB's, and
no NCA is left on the node afterwards. A node whose host key does not match, whose server is
stopped, or which refuses the login is down with the reason, and jobs run on the other nodes. An
agent killed mid-job fails the job with the node's name and leaves no NCA; the node is up again
at the next check. A server killed mid-job leaves no NCA on the node."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from jumpgate.client import Jumpgate
from jumpgate.deploy import sshd_fixture as test_sshd
from jumpgate.local_server import LocalServer

from .join_tables import run_join, write_tables

pytestmark = pytest.mark.skipif(test_sshd.why_not() is not None, reason=test_sshd.why_not() or "")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("ssh-data")
    write_tables(root, root, rows=10_000, keys=200, step=4, seed=3)
    return root


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = test_sshd.start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def node_cache(tmp_path):
    """The SSH node's agent cache for one test; the agent the test's server started there is
    stopped afterwards (agents outlive their servers by design, for the next server)."""
    cache = tmp_path / "node-cache"
    yield cache
    for pid in processes_with(str(cache) + "/agent/"):
        os.kill(pid, signal.SIGKILL)


def processes_with(text: str) -> list[int]:
    out = subprocess.run(["ps", "-wweo", "pid=,args="], capture_output=True, text=True).stdout
    return [int(line.split(None, 1)[0]) for line in out.splitlines() if text in line]


def inventory(path, sshd, cache, *, known_hosts=None, key_file=None, port=None, data_root=None) -> str:
    ssh = {"host": sshd.address, "port": port or sshd.port, "user": "root", "cache_dir": str(cache),
           "key_file": str(key_file or sshd.key_file), "known_hosts": str(known_hosts or sshd.known_hosts)}
    root = f", data_root: {data_root}" if data_root else ""
    a_root = path.parent / "a-root"
    a_root.mkdir(exist_ok=True)
    a = f", data_root: {a_root}" if data_root else ""  # node a holds nothing when s has its own root
    path.write_text(f"nodes:\n  - {{name: a, address: 127.0.0.2, cores: 1{a}}}\n"
                    f"  - {{name: s, address: {sshd.address}, cores: 1, reach: ssh{root}, ssh: {json.dumps(ssh)}}}\n")
    return str(path)


def server(data, tmp_path, nodes_file) -> LocalServer:
    return LocalServer(data, tmp_path / "cache", tmp_path / "server.log", extra_args=["--nodes", nodes_file])


def ncas_on_node(cache) -> list[int]:
    """NCA processes started from binaries shipped to the node (its agent's blob cache)."""
    return processes_with(f"{cache}/blobs/")


def wait_until(check, timeout: float, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


def node(srv: LocalServer, name: str) -> dict:
    return {n["name"]: n for n in httpx.get(srv.url + "/v1/nodes").json()}[name]


def test_ncas_run_on_the_ssh_node_through_its_agent_and_answer_right(data, sshd, node_cache, tmp_path):
    srv = server(data, tmp_path, inventory(tmp_path / "nodes.yaml", sshd, node_cache))
    try:
        s = node(srv, "s")
        assert s["state"] == "up" and node(srv, "a")["state"] == "up", s
        assert s["reach"] == "ssh" and s["ssh"] == f"root@{sshd.address}:{sshd.port}", s
        agent_pid = wait_until(lambda: node(srv, "s")["agent"].get("pid"), 10)  # its first heartbeat
        assert agent_pid in processes_with(str(node_cache) + "/agent/"), s
        page = httpx.get(srv.url + "/ui/jobs").text  # the nodes page: how each is reached, its agent
        assert f"root@{sshd.address}:{sshd.port}" in page and f"agent pid {agent_pid}" in page
        before = sshd.sessions()
        job = run_join(srv.url, data, data)
        assert set(job.nodes.values()) == {"a", "s"}, job.nodes
        # No SSH session per NCA: the node's NCAs went through the agent's one channel.
        assert sshd.sessions() == before
        assert "opened by" in (node_cache / "agent").glob("*/agent.log").__next__().read_text()
        blobs = sorted((node_cache / "blobs").iterdir())
        assert blobs, "the NCA binary was shipped to the node's cache"
        again = run_join(srv.url, data, data)  # the binary is on the node already: shipped once, by content
        assert set(again.nodes.values()) == {"a", "s"}
        assert sorted((node_cache / "blobs").iterdir()) == blobs
    finally:
        srv.stop()
    assert wait_until(lambda: not ncas_on_node(node_cache), 5), ncas_on_node(node_cache)


def stalled_scan_on_s(srv: LocalServer, tmp_path, big: str):
    """A job whose scan runs on node s and sends 40 MB to a client that never reads: it is mid-job
    until something ends it. Returns the job, the client's socket and the listener."""
    listener = socket.create_server(("127.0.0.1", 0))
    body = {"operations": [
        {"kind": "read", "name": "r", "path": big, "format": "json",
         "schema": [{"name": "a", "type": "int32"}, {"name": "s", "type": "string"}]},
        {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": "127.0.0.1",
         "port": listener.getsockname()[1]}]}
    jg = Jumpgate(srv.url)
    job = jg.submit(body)
    assert {n["host"] for n in job.ncas} == {"s"}, job.ncas
    job.execute()
    conn, _ = listener.accept()  # and never read from it
    return jg, job, conn, listener


@pytest.fixture
def big_on_s(tmp_path):
    root = tmp_path / "s-root"
    root.mkdir()
    (root / "big.jsonl").write_text(('{"a": 1, "s": "' + "x" * 2000 + '"}\n') * 20000)
    return root


def test_an_agent_killed_mid_job_fails_the_job_and_the_node_comes_back(data, sshd, node_cache, tmp_path, big_on_s):
    srv = server(data, tmp_path, inventory(tmp_path / "nodes.yaml", sshd, node_cache, data_root=big_on_s))
    try:
        agent_pid = wait_until(lambda: node(srv, "s")["agent"].get("pid"), 10)
        jg, job, conn, listener = stalled_scan_on_s(srv, tmp_path, "big.jsonl")
        try:
            assert wait_until(lambda: ncas_on_node(node_cache), 10), "the scan runs on the node"
            os.kill(agent_pid, signal.SIGKILL)
            status = job.status(wait=30)
            while status["state"] == "running":
                status = job.status(wait=30)
        finally:
            conn.close()
            listener.close()
            jg.close()
        assert status["state"] == "failed", status
        assert "node s" in status["error"]["message"] and "agent" in status["error"]["message"], status["error"]
        # The NCA read the end of its standard input (the agent held it) and exited.
        assert wait_until(lambda: not ncas_on_node(node_cache), 5), ncas_on_node(node_cache)
        down = node(srv, "s")
        assert down["state"] == "down" and "lost its agent" in down["reason"], down
        # The next check starts a new agent; jobs run on the node again.
        assert wait_until(lambda: node(srv, "s")["state"] == "up", 20, 0.2), node(srv, "s")
        with Jumpgate(srv.url) as jg2:
            rows = jg2.run({"operations": [
                {"kind": "read", "name": "r", "path": "big.jsonl", "format": "json",
                 "schema": [{"name": "a", "type": "int32"}]},
                {"kind": "aggregate", "name": "n", "input": "r", "group_by": [],
                 "aggregates": [{"name": "c", "fn": "count", "expr": "a"}]},
                {"kind": "send", "name": "out", "input": "n", "transport": "tcp", "host": "127.0.0.1",
                 "port": 0}]}, timeout=120)["out"]
            assert rows.to_pylist() == [{"c": 20000}]
            assert set(jg2.last_job.nodes.values()) == {"s"}
    finally:
        srv.stop()
    assert wait_until(lambda: not ncas_on_node(node_cache), 5), ncas_on_node(node_cache)


def test_a_server_killed_mid_job_leaves_no_nca_on_the_node(data, sshd, node_cache, tmp_path, big_on_s):
    srv = server(data, tmp_path, inventory(tmp_path / "nodes.yaml", sshd, node_cache, data_root=big_on_s))
    try:
        jg, job, conn, listener = stalled_scan_on_s(srv, tmp_path, "big.jsonl")
        try:
            assert wait_until(lambda: ncas_on_node(node_cache), 10), "the scan runs on the node"
            os.killpg(srv.proc.pid, signal.SIGKILL)  # the server and its local children, at once
            t0 = time.monotonic()
            gone = wait_until(lambda: not ncas_on_node(node_cache), 10.0)  # the lease is 10 s
            took = time.monotonic() - t0
        finally:
            conn.close()
            listener.close()
            jg.close()
    finally:
        srv.stop()
    assert gone, ncas_on_node(node_cache)
    assert took < 10.0, took


@pytest.mark.parametrize("fault, reason", [
    ("wrong host key", "does not match"),
    ("unknown host key", "is not in"),
    ("refused login", "refused the login"),
    ("server stopped", "cannot reach"),
])
def test_a_node_that_cannot_be_used_is_down_and_jobs_avoid_it(data, sshd, node_cache, tmp_path, fault, reason):
    kwargs = {}
    if fault == "wrong host key":
        other = test_sshd.keygen(tmp_path / "other_host_key").split()
        (tmp_path / "known").write_text(f"[{sshd.address}]:{sshd.port} {other[0]} {other[1]}\n")
        kwargs["known_hosts"] = tmp_path / "known"
    elif fault == "unknown host key":
        (tmp_path / "known").write_text("")
        kwargs["known_hosts"] = tmp_path / "known"
    elif fault == "refused login":
        test_sshd.keygen(tmp_path / "stranger")
        kwargs["key_file"] = tmp_path / "stranger"
    else:
        kwargs["port"] = test_sshd.free_port(sshd.address)  # nothing listens there
    srv = server(data, tmp_path, inventory(tmp_path / "nodes.yaml", sshd, node_cache, **kwargs))
    try:
        nodes = {n["name"]: n for n in httpx.get(srv.url + "/v1/nodes").json()}
        assert nodes["s"]["state"] == "down" and reason in nodes["s"]["reason"], nodes["s"]
        job = run_join(srv.url, data, data)
        assert set(job.nodes.values()) == {"a"}, job.nodes
        assert reason in job.search["nodes_skipped"]["s"], job.search  # the mapping says why
    finally:
        srv.stop()


def test_ntf_over_udp_from_an_ssh_node_reaches_the_client(data, sshd, node_cache, tmp_path):
    """UDP across hosts: the scan runs on node s (it alone holds the file) and sends its datagrams
    to the client's UDP endpoint; every row arrives, each stream complete (docs/udp-transport.md)."""
    root = tmp_path / "s-root"
    root.mkdir()
    (root / "u.jsonl").write_text("".join(f'{{"a": {i}, "s": "r{i}"}}\n' for i in range(20_000)))
    srv = server(data, tmp_path, inventory(tmp_path / "nodes.yaml", sshd, node_cache, data_root=root))
    try:
        with Jumpgate(srv.url) as jg:
            got = jg.run({"operations": [
                {"kind": "read", "name": "r", "path": "u.jsonl", "format": "json",
                 "schema": [{"name": "a", "type": "int64"}, {"name": "s", "type": "string"}]},
                {"kind": "filter", "name": "f", "input": "r", "condition": "a % 3 = 0"},
                {"kind": "send", "name": "out", "input": "f", "transport": "udp", "host": "127.0.0.1",
                 "port": 0}]}, timeout=120)["out"]
            assert set(jg.last_job.nodes.values()) == {"s"}, jg.last_job.nodes
        assert sorted(got.column("a").to_pylist()) == list(range(0, 20_000, 3))
        assert sorted(got.column("s").to_pylist()) == sorted(f"r{i}" for i in range(0, 20_000, 3))
    finally:
        srv.stop()
    assert wait_until(lambda: not ncas_on_node(node_cache), 5), ncas_on_node(node_cache)


def test_serve_with_every_node_down_says_why_without_a_traceback(data, sshd, node_cache, tmp_path):
    nodes_file = tmp_path / "nodes.yaml"
    ssh = {"host": sshd.address, "port": test_sshd.free_port(sshd.address), "user": "root",
           "key_file": str(sshd.key_file), "known_hosts": str(sshd.known_hosts), "cache_dir": str(node_cache)}
    nodes_file.write_text(f"nodes:\n  - {{name: s, address: {sshd.address}, cores: 1, reach: ssh, ssh: {json.dumps(ssh)}}}\n")
    exe = Path(sys.executable).with_name("jumpgate")
    done = subprocess.run([str(exe), "serve", "--data-root", str(data), "--port", "0", "--nodes", str(nodes_file)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    assert "jumpgate: no node is up: s: cannot reach" in done.stderr and "Traceback" not in done.stderr, done.stderr
