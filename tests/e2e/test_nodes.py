"""A server whose inventory has two nodes, each its own address on the loopback range and one
core: `GET /v1/nodes` and the jobs page list them; the NCAs of a join spread over both nodes (the
job's status names each NCA's node), stream to each other by the nodes' addresses, and the answer
equals DuckDB's; with a data root per node, each scan runs on the node holding its table;
afterwards no NCA process is left."""
from __future__ import annotations

import httpx
import pytest

from jumpgate.local_server import LocalServer

from .helpers import read_op
from .join_tables import SCHEMA_L, run_join, write_tables

NODES = {"a": "127.0.0.2", "b": "127.0.0.3"}


def nodes_yaml(roots: dict[str, object] | None = None) -> str:
    return "nodes:\n" + "".join(
        f"  - {{name: {n}, address: {a}, cores: 1" + (f", data_root: '{roots[n]}'" if roots else "") + "}\n"
        for n, a in NODES.items())


def serve(root, logs, inventory_text: str):
    inventory = logs / "nodes.yaml"
    inventory.write_text(inventory_text)
    srv = LocalServer(root, None, logs / "server.log", extra_args=["--nodes", str(inventory)])
    yield srv
    left = srv.children()
    srv.stop()
    assert not left, f"NCA processes left behind: {left}"


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("nodes-data")
    write_tables(root, root, rows=20_000, keys=500, step=3, seed=5)
    for srv in serve(root, root.parent, nodes_yaml()):
        yield srv, root


@pytest.fixture(scope="module")
def own_roots(tmp_path_factory):
    """Two nodes, each with a data root of its own: table l only on a, table r only on b."""
    base = tmp_path_factory.mktemp("own-roots")
    roots = {n: base / n for n in NODES}
    for d in [*roots.values(), base / "server-root"]:
        d.mkdir()
    write_tables(roots["a"], roots["b"], rows=5_000, keys=100, step=2, seed=9)
    for srv in serve(base / "server-root", base, nodes_yaml(roots)):
        yield srv, roots


def test_nodes_are_listed_with_their_state(two_nodes):
    srv, _ = two_nodes
    nodes = httpx.get(srv.url + "/v1/nodes").json()
    assert [(n["name"], n["address"], n["cores"], n["state"]) for n in nodes] == [
        ("a", "127.0.0.2", 1, "up"), ("b", "127.0.0.3", 1, "up")]
    page = httpx.get(srv.url + "/ui/jobs").text
    assert "127.0.0.2" in page and "127.0.0.3" in page


def test_a_join_spreads_over_the_nodes_and_answers_right(two_nodes):
    srv, root = two_nodes
    job = run_join(srv.url, root, root)
    placed = job.nodes  # the Python client says which node runs each NCA
    assert set(placed.values()) == set(NODES), placed  # both nodes run NCAs of this job
    assert all(n["ncas_running"] == 0 for n in httpx.get(srv.url + "/v1/nodes").json())


def test_each_scan_runs_on_the_node_holding_its_table(own_roots):
    srv, roots = own_roots
    job = run_join(srv.url, roots["a"], roots["b"])
    scans = {op: n["host"] for n in job.ncas for op in n["operations"] if op in ("l", "r")}
    assert scans == {"l": "a", "r": "b"}, job.ncas


def test_a_read_spread_over_nodes_and_a_file_on_none_are_clear_errors(own_roots):
    srv, _ = own_roots
    send = {"kind": "send", "name": "out", "input": "x", "transport": "tcp", "host": "127.0.0.1", "port": 9}
    spread = httpx.post(srv.url + "/v1/jobs", json={"operations": [
        {**read_op("x", "l.jsonl", SCHEMA_L), "path": ["l.jsonl", "r.jsonl"]}, send]})
    assert spread.status_code == 422, spread.text
    error = spread.json()["error"]
    assert "no node holds all the files of read 'x'" in error["message"] and error["path"] == "operations[0]"
    missing = httpx.post(srv.url + "/v1/jobs", json={"operations": [read_op("x", "nowhere.jsonl", SCHEMA_L), send]})
    assert missing.status_code == 400 and "does not exist in the data root" in missing.json()["error"]["message"]
