"""Nodes reached over SSH (docs/deploy.md, `reach: ssh`), against a real OpenSSH server on an
address of the loopback range: a job's NCAs run on a local node and on the SSH node (commands
through the SSH server, binaries shipped to the node by content), the answer equals DuckDB's, and
no NCA is left on the node afterwards. A node whose host key does not match, whose server is
stopped, or which refuses the login is down with the reason, and jobs run on the other nodes."""
from __future__ import annotations

import json
import subprocess

import httpx
import pytest

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


def inventory(path, sshd, *, known_hosts=None, key_file=None, port=None) -> str:
    ssh = {"host": sshd.address, "port": port or sshd.port, "user": "root",
           "key_file": str(key_file or sshd.key_file), "known_hosts": str(known_hosts or sshd.known_hosts)}
    path.write_text("nodes:\n  - {name: a, address: 127.0.0.2, cores: 1}\n"
                    f"  - {{name: s, address: {sshd.address}, cores: 1, reach: ssh, ssh: {json.dumps(ssh)}}}\n")
    return str(path)


def server(data, tmp_path, nodes_file) -> LocalServer:
    return LocalServer(data, tmp_path / "cache", tmp_path / "server.log", extra_args=["--nodes", nodes_file])


def shipped_ncas_running() -> list[str]:
    """NCA processes started from binaries shipped to an SSH node (~/.cache/jumpgate/ncas)."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "/.cache/jumpgate/ncas/" in line]


def test_ncas_run_on_the_ssh_node_and_answer_right(data, sshd, tmp_path):
    srv = server(data, tmp_path, inventory(tmp_path / "nodes.yaml", sshd))
    try:
        nodes = {n["name"]: n for n in httpx.get(srv.url + "/v1/nodes").json()}
        assert nodes["s"]["state"] == "up" and nodes["a"]["state"] == "up", nodes
        before = sshd.sessions()
        job = run_join(srv.url, data, data)
        assert set(job.nodes.values()) == {"a", "s"}, job.nodes
        assert sshd.sessions() > before  # the NCAs of node s were started through its SSH server
        again = run_join(srv.url, data, data)  # the binary is on the node already: shipped once, by content
        assert set(again.nodes.values()) == {"a", "s"}
    finally:
        srv.stop()
    assert not shipped_ncas_running()


@pytest.mark.parametrize("fault, reason", [
    ("wrong host key", "does not match"),
    ("unknown host key", "is not in"),
    ("refused login", "refused the login"),
    ("server stopped", "cannot reach"),
])
def test_a_node_that_cannot_be_used_is_down_and_jobs_avoid_it(data, sshd, tmp_path, fault, reason):
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
    srv = server(data, tmp_path, inventory(tmp_path / "nodes.yaml", sshd, **kwargs))
    try:
        nodes = {n["name"]: n for n in httpx.get(srv.url + "/v1/nodes").json()}
        assert nodes["s"]["state"] == "down" and reason in nodes["s"]["reason"], nodes["s"]
        job = run_join(srv.url, data, data)
        assert set(job.nodes.values()) == {"a"}, job.nodes
    finally:
        srv.stop()
