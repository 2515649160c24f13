"""A server whose inventory has two nodes, each its own address on the loopback range and one
core: `GET /v1/nodes` and the jobs page list them; the NCAs of a join spread over both nodes (the
job's status names each NCA's node), stream to each other by the nodes' addresses, and the answer
equals DuckDB's; afterwards no NCA process is left."""
from __future__ import annotations

import json
import random

import httpx
import pytest

from jumpgate.client import Jumpgate
from jumpgate.local_server import LocalServer

from .helpers import assert_same_rows, read_op

NODES = {"a": "127.0.0.2", "b": "127.0.0.3"}
SCHEMA_L = [{"name": "k", "type": "int64"}, {"name": "v", "type": "int64"}]
SCHEMA_R = [{"name": "rk", "type": "int64"}, {"name": "w", "type": "string"}]


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("nodes-data")
    rnd = random.Random(5)
    with open(root / "l.jsonl", "w") as f:
        for i in range(20_000):
            f.write(json.dumps({"k": rnd.randrange(500), "v": i}) + "\n")
    with open(root / "r.jsonl", "w") as f:
        for k in range(0, 500, 3):
            f.write(json.dumps({"rk": k, "w": f"w{k}"}) + "\n")
    inventory = root.parent / "nodes.yaml"
    inventory.write_text("nodes:\n" + "".join(f"  - {{name: {n}, address: {a}, cores: 1}}\n" for n, a in NODES.items()))
    srv = LocalServer(root, None, root.parent / "server.log", extra_args=["--nodes", str(inventory)])
    yield srv, root
    left = srv.children()
    srv.stop()
    assert not left, f"NCA processes left behind: {left}"


def test_nodes_are_listed_with_their_state(two_nodes):
    srv, _ = two_nodes
    nodes = httpx.get(srv.url + "/v1/nodes").json()
    assert [(n["name"], n["address"], n["cores"], n["state"]) for n in nodes] == [
        ("a", "127.0.0.2", 1, "up"), ("b", "127.0.0.3", 1, "up")]
    page = httpx.get(srv.url + "/ui/jobs").text
    assert "127.0.0.2" in page and "127.0.0.3" in page


def test_a_join_spreads_over_the_nodes_and_answers_right(two_nodes):
    srv, root = two_nodes
    duckdb = pytest.importorskip("duckdb")
    ops = [read_op("l", "l.jsonl", SCHEMA_L), read_op("r", "r.jsonl", SCHEMA_R),
           {"kind": "join", "name": "j", "build": "r", "probe": "l", "build_keys": ["rk"], "probe_keys": ["k"],
            "type": "inner"},
           {"kind": "send", "name": "out", "input": "j", "transport": "tcp", "host": "127.0.0.1", "port": 0}]
    with Jumpgate(srv.url) as jg:
        got = jg.run({"name": "two-nodes", "operations": ops}, timeout=120)["out"]
        job = jg.last_job
    placed = job.nodes  # the Python client says which node runs each NCA
    assert set(placed.values()) == set(NODES), placed  # both nodes run NCAs of this job
    con = duckdb.connect()
    con.execute(f"CREATE VIEW l AS SELECT * FROM read_json('{root}/l.jsonl', columns={{k: 'BIGINT', v: 'BIGINT'}})")
    con.execute(f"CREATE VIEW r AS SELECT * FROM read_json('{root}/r.jsonl', columns={{rk: 'BIGINT', w: 'VARCHAR'}})")
    assert_same_rows(con, got, "SELECT l.*, r.* FROM l JOIN r ON k = rk")
    assert all(n["ncas_running"] == 0 for n in httpx.get(srv.url + "/v1/nodes").json())


@pytest.fixture(scope="module")
def own_roots(tmp_path_factory):
    """Two nodes, each with a data root of its own: table l only on a, table r only on b."""
    base = tmp_path_factory.mktemp("own-roots")
    roots = {n: base / n for n in NODES}
    for d in roots.values():
        d.mkdir()
    rnd = random.Random(9)
    with open(roots["a"] / "l.jsonl", "w") as f:
        for i in range(5_000):
            f.write(json.dumps({"k": rnd.randrange(100), "v": i}) + "\n")
    with open(roots["b"] / "r.jsonl", "w") as f:
        for k in range(0, 100, 2):
            f.write(json.dumps({"rk": k, "w": f"w{k}"}) + "\n")
    inventory = base / "nodes.yaml"
    inventory.write_text("nodes:\n" + "".join(f"  - {{name: {n}, address: {a}, cores: 1, data_root: '{roots[n]}'}}\n"
                                               for n, a in NODES.items()))
    empty = base / "server-root"
    empty.mkdir()
    srv = LocalServer(empty, None, base / "server.log", extra_args=["--nodes", str(inventory)])
    yield srv, roots
    left = srv.children()
    srv.stop()
    assert not left, f"NCA processes left behind: {left}"


def test_each_scan_runs_on_the_node_holding_its_table(own_roots):
    srv, roots = own_roots
    duckdb = pytest.importorskip("duckdb")
    ops = [read_op("l", "l.jsonl", SCHEMA_L), read_op("r", "r.jsonl", SCHEMA_R),
           {"kind": "join", "name": "j", "build": "r", "probe": "l", "build_keys": ["rk"], "probe_keys": ["k"],
            "type": "inner"},
           {"kind": "send", "name": "out", "input": "j", "transport": "tcp", "host": "127.0.0.1", "port": 0}]
    with Jumpgate(srv.url) as jg:
        got = jg.run({"name": "own-roots", "operations": ops}, timeout=120)["out"]
        job = jg.last_job
    scans = {op: n["host"] for n in job.ncas for op in n["operations"] if op in ("l", "r")}
    assert scans == {"l": "a", "r": "b"}, job.ncas
    con = duckdb.connect()
    con.execute(f"CREATE VIEW l AS SELECT * FROM read_json('{roots['a']}/l.jsonl', columns={{k: 'BIGINT', v: 'BIGINT'}})")
    con.execute(f"CREATE VIEW r AS SELECT * FROM read_json('{roots['b']}/r.jsonl', columns={{rk: 'BIGINT', w: 'VARCHAR'}})")
    assert_same_rows(con, got, "SELECT l.*, r.* FROM l JOIN r ON k = rk")


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
