"""A server whose inventory has two nodes, each its own address on the loopback range and one
core: `GET /v1/nodes` and the jobs page list them; the NCAs of a join spread over both nodes (the
job's status names each NCA's node), stream to each other by the nodes' addresses, and the answer
equals DuckDB's; with a data root per node, each scan runs on the node holding its table, and a
table whose files are split over the nodes is read by one scan per node, on the node holding its
files (a filtered scan, a global sum, a grouped aggregation split into partial and final, and a
join with either side split answer as DuckDB does; a join probing the split table runs once per
node, next to that node's scan, with the whole build side sent to each); afterwards no NCA
process is left."""
from __future__ import annotations

import datetime as dt
import json
import os
import random
import time

import httpx
import pytest

from jumpgate.client import Jumpgate
from jumpgate.local_server import LocalServer

from .helpers import assert_same_rows, read_op
from .join_tables import SCHEMA_L, run_join, write_tables
from .test_aggregate import assert_same_groups

NODES = {"a": "127.0.0.2", "b": "127.0.0.3"}


# Node a on the first CPU the tests may use, b on the last (the same one on a one-CPU machine).
CPUS = {"a": min(os.sched_getaffinity(0)), "b": max(os.sched_getaffinity(0))}


def nodes_yaml(roots: dict[str, object] | None = None, *, pinned: bool = False) -> str:
    return "nodes:\n" + "".join(
        f"  - {{name: {n}, address: {a}, cores: 1" + (f", data_root: '{roots[n]}'" if roots else "")
        + (f", cpus: '{CPUS[n]}'" if pinned else "") + "}\n"
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
    for srv in serve(root, root.parent, nodes_yaml(pinned=True)):
        yield srv, root


# A lineitem-like table split over the nodes' data roots (parts 0 and 2 on a, 1 on b), orders on b
# and customer on a.
LI_COLUMNS = [("l_orderkey", "int64", "BIGINT"), ("l_quantity", "decimal(15,2)", "DECIMAL(15,2)"),
              ("l_extendedprice", "decimal(15,2)", "DECIMAL(15,2)"), ("l_discount", "decimal(15,2)", "DECIMAL(15,2)"),
              ("l_returnflag", "string", "VARCHAR"), ("l_linestatus", "string", "VARCHAR"),
              ("l_shipmode", "string", "VARCHAR"), ("l_shipdate", "date", "DATE"), ("l_commitdate", "date", "DATE"),
              ("l_receiptdate", "date", "DATE")]
ORDERS_COLUMNS = [("o_orderkey", "int64", "BIGINT"), ("o_orderpriority", "string", "VARCHAR"),
                  ("o_custkey", "int64", "BIGINT"), ("o_orderdate", "date", "DATE")]
CUSTOMER_COLUMNS = [("c_custkey", "int64", "BIGINT"), ("c_mktsegment", "string", "VARCHAR")]
LI_PARTS = {"a": ("part-0.jsonl", "part-2.jsonl"), "b": ("part-1.jsonl",)}
ORDERS, CUSTOMERS = 1_000, 150


def write_split_tables(roots: dict[str, object], rows_per_part: int, seed: int) -> None:
    rnd = random.Random(seed)

    def date(days: int) -> str:  # days after 1992-01-01
        return (dt.date(1992, 1, 1) + dt.timedelta(days=days)).isoformat()

    for node, parts in LI_PARTS.items():
        (roots[node] / "li").mkdir(exist_ok=True)
        for part in parts:
            with open(roots[node] / "li" / part, "w") as f:
                for _ in range(rows_per_part):
                    ship = rnd.randrange(2400)
                    commit, receipt = ship + rnd.randrange(-30, 60), ship + rnd.randrange(1, 40)
                    f.write(json.dumps({
                        "l_orderkey": rnd.randrange(ORDERS * 3 // 2), "l_quantity": f"{rnd.randint(1, 50)}.00",
                        "l_extendedprice": f"{rnd.randint(100, 10_000_000) / 100:.2f}",
                        "l_discount": f"0.0{rnd.randint(0, 9)}", "l_returnflag": rnd.choice("ANR"),
                        "l_linestatus": rnd.choice("OF"), "l_shipmode": rnd.choice(["MAIL", "SHIP", "AIR", "RAIL"]),
                        "l_shipdate": date(ship), "l_commitdate": date(commit), "l_receiptdate": date(receipt)}) + "\n")
    with open(roots["b"] / "orders.jsonl", "w") as f:
        for k in range(ORDERS):
            f.write(json.dumps({"o_orderkey": k, "o_orderpriority": rnd.choice(["1-URGENT", "2-HIGH", "3-MEDIUM",
                                                                             "4-NOT SPECIFIED", "5-LOW"]),
                                "o_custkey": rnd.randrange(CUSTOMERS), "o_orderdate": date(rnd.randrange(2400))}) + "\n")
    with open(roots["a"] / "customer.jsonl", "w") as f:
        for k in range(CUSTOMERS):
            f.write(json.dumps({"c_custkey": k, "c_mktsegment": rnd.choice(["BUILDING", "MACHINERY", "AUTOMOBILE"])}) + "\n")


@pytest.fixture(scope="module")
def own_roots(tmp_path_factory):
    """Two nodes, each with a data root of its own: table l only on a, table r only on b; the
    parts of table li split over both, orders only on b, customer only on a."""
    base = tmp_path_factory.mktemp("own-roots")
    roots = {n: base / n for n in NODES}
    for d in [*roots.values(), base / "server-root"]:
        d.mkdir()
    write_tables(roots["a"], roots["b"], rows=5_000, keys=100, step=2, seed=9)
    write_split_tables(roots, rows_per_part=3_000, seed=13)
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


def test_each_nodes_ncas_run_on_its_own_cpus(two_nodes):
    """`cpus` in the inventory: the NCAs a node starts (here the spares each node keeps after a
    job) run on that node's CPUs only, and GET /v1/nodes says which."""
    srv, root = two_nodes
    run_join(srv.url, root, root)
    assert {n["name"]: n.get("cpus") for n in httpx.get(srv.url + "/v1/nodes").json()} == {
        n: str(c) for n, c in CPUS.items()}
    deadline = time.monotonic() + 10
    while True:  # each node starts its spares in the background once a job's NCAs are destroyed
        spares = set(srv.children(spares=True)) - set(srv.children())
        pinned = {frozenset(os.sched_getaffinity(pid)) for pid in spares if os.path.exists(f"/proc/{pid}")}
        if pinned == {frozenset({c}) for c in CPUS.values()} or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert pinned == {frozenset({c}) for c in CPUS.values()}, (spares, pinned)


def test_each_scan_runs_on_the_node_holding_its_table(own_roots):
    srv, roots = own_roots
    job = run_join(srv.url, roots["a"], roots["b"])
    scans = {op: n["host"] for n in job.ncas for op in n["operations"] if op in ("l", "r")}
    assert scans == {"l": "a", "r": "b"}, job.ncas


def test_a_file_on_no_node_is_a_clear_error(own_roots):
    srv, _ = own_roots
    send = {"kind": "send", "name": "out", "input": "x", "transport": "tcp", "host": "127.0.0.1", "port": 9}
    missing = httpx.post(srv.url + "/v1/jobs", json={"operations": [read_op("x", "nowhere.jsonl", SCHEMA_L), send]})
    assert missing.status_code == 400 and "does not exist in the data root" in missing.json()["error"]["message"]


# ------------------------------------------------------------------ a table split over the nodes


def li_read(columns: list[str]) -> dict:
    types = {n: t for n, t, _ in LI_COLUMNS}
    return read_op("li", "li/*.jsonl", [{"name": c, "type": types[c]} for c in columns])


@pytest.fixture
def duck_split(own_roots):
    duckdb = pytest.importorskip("duckdb")
    _, roots = own_roots
    con = duckdb.connect()

    def view(name: str, files: list, columns) -> None:
        cols = ", ".join(f"'{n}': '{t}'" for n, _, t in columns)
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_json({[str(f) for f in files]}, "
                    f"format='newline_delimited', columns={{{cols}}})")

    view("li", [roots[n] / "li" / p for n, parts in LI_PARTS.items() for p in parts], LI_COLUMNS)
    view("orders", [roots["b"] / "orders.jsonl"], ORDERS_COLUMNS)
    view("customer", [roots["a"] / "customer.jsonl"], CUSTOMER_COLUMNS)
    yield con
    con.close()


def run_split(url: str, ops: list[dict]):
    """(table, job status) of `ops` plus one send of the last operation; the status carries the
    compile answer's `edges` too."""
    send = {"kind": "send", "name": "out", "input": ops[-1]["name"], "transport": "tcp", "host": "127.0.0.1", "port": 0}
    with Jumpgate(url) as jg:
        table = jg.run({"name": "split", "operations": ops + [send]}, timeout=120)["out"]
        job = jg.last_job
    status = httpx.get(f"{url}/v1/jobs/{job.job_id}", params={"wait": 10}, timeout=20).json()
    assert status["state"] == "succeeded", status
    return table, {**status, "edges": job.answer["edges"]}


def assert_one_scan_per_node(status: dict, roots: dict) -> list[dict]:
    """The job's status shows one scan of li per node, each on the node holding the files it reads."""
    scans = [n for n in status["ncas"] if "li" in n["operations"]]
    assert sorted(n["host"] for n in scans) == sorted(NODES), scans
    for n in scans:
        held = sorted(os.path.realpath(roots[n["host"]] / "li" / p) for p in LI_PARTS[n["host"]])
        assert n["files"] == held, n
        assert n["placement"].startswith(f"{n['host']}: holds {len(held)} of the 3 files of read 'li'"), n
    return scans


def test_a_filtered_scan_of_a_split_table_reads_each_part_on_its_node(own_roots, duck_split):
    srv, roots = own_roots
    ops = [li_read(["l_orderkey", "l_quantity", "l_shipmode", "l_shipdate"]),
           {"kind": "filter", "name": "f", "input": "li", "condition": "l_quantity < 10 AND l_shipmode = 'MAIL'"},
           {"kind": "project", "name": "p", "input": "f",
            "columns": [{"name": "l_orderkey", "expr": "l_orderkey"}, {"name": "l_shipdate", "expr": "l_shipdate"}]}]
    table, status = run_split(srv.url, ops)
    assert_one_scan_per_node(status, roots)
    assert table.num_rows > 100
    assert_same_rows(duck_split, table, "SELECT l_orderkey, l_shipdate FROM li WHERE l_quantity < 10 AND l_shipmode = 'MAIL'")


def test_a_global_sum_of_a_split_table_is_partial_on_each_node_and_final_once(own_roots, duck_split):
    """TPC-H Q6's shape."""
    srv, roots = own_roots
    where = ("l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
             "AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND l_quantity < 24")
    ops = [li_read(["l_extendedprice", "l_discount", "l_quantity", "l_shipdate"]),
           {"kind": "filter", "name": "f", "input": "li", "condition": where},
           {"kind": "aggregate", "name": "total", "input": "f", "group_by": [],
            "aggregates": [{"name": "revenue", "fn": "sum", "expr": "l_extendedprice * l_discount"}]}]
    table, status = run_split(srv.url, ops)
    assert_one_scan_per_node(status, roots)
    assert sorted((n["implementation"], tuple(n["operations"])) for n in status["ncas"]) == [
        ("software.aggregate", ("total",)),
        ("software.scan_json", ("li", "f", "total_partial")), ("software.scan_json", ("li", "f", "total_partial"))]
    assert_same_rows(duck_split, table, f"SELECT CAST(sum(l_extendedprice * l_discount) AS DECIMAL(18,4)) AS revenue "
                                        f"FROM li WHERE {where}")


def test_a_grouped_aggregation_of_a_split_table_answers_right(own_roots, duck_split):
    """TPC-H Q1's shape: every function's partial state is merged by the final aggregation."""
    srv, roots = own_roots
    aggs = [("sum_qty", "sum", "l_quantity"), ("sum_disc_price", "sum", "l_extendedprice * (1 - l_discount)"),
            ("avg_qty", "avg", "l_quantity"), ("avg_disc", "avg", "l_discount"), ("count_order", "count_star", None),
            ("min_price", "min", "l_extendedprice"), ("max_ship", "max", "l_shipdate"), ("n_disc", "count", "l_discount")]
    ops = [li_read(["l_quantity", "l_extendedprice", "l_discount", "l_returnflag", "l_linestatus", "l_shipdate"]),
           {"kind": "filter", "name": "f", "input": "li", "condition": "l_shipdate <= DATE '1998-09-02'"},
           {"kind": "aggregate", "name": "q1", "input": "f",
            "group_by": [{"name": "l_returnflag", "expr": "l_returnflag"}, {"name": "l_linestatus", "expr": "l_linestatus"}],
            "aggregates": [{"name": n, "fn": fn, **({"expr": e} if e else {})} for n, fn, e in aggs]}]
    table, status = run_split(srv.url, ops)
    assert_one_scan_per_node(status, roots)
    final = next(n for n in status["ncas"] if n["operations"] == ["q1"])
    assert final["implementation"] == "software.aggregate"
    assert status["decisions"]["q1"]["nca"] == final["id"]
    assert_same_groups(duck_split, table, """
        SELECT l_returnflag, l_linestatus, CAST(sum(l_quantity) AS DECIMAL(18,2)) AS sum_qty,
               CAST(sum(l_extendedprice * (1 - l_discount)) AS DECIMAL(18,4)) AS sum_disc_price,
               avg(l_quantity) AS avg_qty, avg(l_discount) AS avg_disc, count(*) AS count_order,
               min(l_extendedprice) AS min_price, max(l_shipdate) AS max_ship, count(l_discount) AS n_disc
        FROM li WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus""",
                       ["l_returnflag", "l_linestatus"])


def assert_a_join_per_node(status: dict, scans: list[dict], join: str) -> list[dict]:
    """The job's status shows an instance of `join` on each node, probing only the rows of its
    node's scan of li and building on the same producer as every other instance."""
    joins = [n for n in status["ncas"] if n["operations"][0] == join]
    assert sorted(n["host"] for n in joins) == sorted(NODES), joins
    scan_on = {n["host"]: n["id"] for n in scans}
    builds = set()
    for n in joins:
        into = [e for e in status["edges"] if not e["client"] and e["to"] == n["id"]]
        assert [e["from"] for e in into if e["to_port"] == 1] == [scan_on[n["host"]]], into
        builds.add(tuple(e["from"] for e in into if e["to_port"] == 0))
        assert n["placement"].startswith(f"{n['host']}: takes its rows from {scan_on[n['host']]} on {n['host']}"), n
    assert len(builds) == 1, builds  # the whole build side, from one producer, to each instance
    return joins


@pytest.mark.parametrize("split_side", ["probe", "build"])
def test_a_join_with_a_split_side_answers_right(own_roots, duck_split, split_side):
    """TPC-H Q12's shape, with the filtered lineitem (split over the nodes) on either side of the
    join and orders (on b) on the other: probing it, the join runs once per node next to the
    node's scan, each receiving all of orders; building on it, one join receives every part."""
    srv, roots = own_roots
    where = ("l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate "
             "AND l_receiptdate >= DATE '1994-01-01' AND l_receiptdate < DATE '1995-01-01'")
    sides = {"build": "f", "probe": "o"} if split_side == "build" else {"build": "o", "probe": "f"}
    keys = {"f": ["l_orderkey"], "o": ["o_orderkey"]}
    urgent = "o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH'"
    ops = [li_read(["l_orderkey", "l_shipmode", "l_commitdate", "l_receiptdate", "l_shipdate"]),
           {"kind": "filter", "name": "f", "input": "li", "condition": where},
           read_op("o", "orders.jsonl", [{"name": n, "type": t} for n, t, _ in ORDERS_COLUMNS]),
           {"kind": "join", "name": "j", **sides, "build_keys": keys[sides["build"]], "probe_keys": keys[sides["probe"]],
            "columns": [{"name": "l_shipmode", "expr": "l_shipmode"}, {"name": "o_orderpriority", "expr": "o_orderpriority"}]},
           {"kind": "aggregate", "name": "counts", "input": "j", "group_by": [{"name": "l_shipmode", "expr": "l_shipmode"}],
            "aggregates": [{"name": "high", "fn": "sum", "expr": f"CASE WHEN {urgent} THEN 1 ELSE 0 END"},
                           {"name": "low", "fn": "sum", "expr": f"CASE WHEN NOT ({urgent}) THEN 1 ELSE 0 END"}]}]
    table, status = run_split(srv.url, ops)
    scans = assert_one_scan_per_node(status, roots)
    if split_side == "probe":
        joins = assert_a_join_per_node(status, scans, "j")
    else:
        joins = [n for n in status["ncas"] if n["operations"][0] == "j"]
        assert len(joins) == 1
        assert sorted(e["from"] for e in status["edges"] if e["to"] == joins[0]["id"] and e["to_port"] == 0) \
            == sorted(n["id"] for n in scans)
    [counts] = [n for n in status["ncas"] if n["operations"][0] == "counts"]  # one instance gets every row
    assert sorted(e["from"] for e in status["edges"] if e["to"] == counts["id"]) == sorted(n["id"] for n in joins)
    assert_same_groups(duck_split, table, f"""
        SELECT l_shipmode, CAST(sum(CASE WHEN {urgent} THEN 1 ELSE 0 END) AS BIGINT) AS high,
               CAST(sum(CASE WHEN NOT ({urgent}) THEN 1 ELSE 0 END) AS BIGINT) AS low
        FROM orders, li WHERE o_orderkey = l_orderkey AND {where} GROUP BY l_shipmode""", ["l_shipmode"])


def test_a_q3_like_join_runs_once_per_node_next_to_each_scan(own_roots, duck_split):
    """TPC-H Q3's shape: (customer on a ⋈ orders on b) ⋈ lineitem split over both; the second join
    runs on each node, probing that node's lineitem rows, each building on the whole first join's
    output; one aggregation receives both joins' rows."""
    srv, roots = own_roots
    schema = {n: t for n, t, _ in [*ORDERS_COLUMNS, *CUSTOMER_COLUMNS]}

    def columns(*names: str) -> list[dict]:
        return [{"name": n, "expr": n} for n in names]

    ops = [read_op("cust", "customer.jsonl", [{"name": n, "type": schema[n]} for n in ("c_custkey", "c_mktsegment")]),
           {"kind": "filter", "name": "building", "input": "cust", "condition": "c_mktsegment = 'BUILDING'"},
           read_op("ord", "orders.jsonl", [{"name": n, "type": schema[n]} for n in ("o_orderkey", "o_custkey", "o_orderdate")]),
           {"kind": "filter", "name": "early", "input": "ord", "condition": "o_orderdate < DATE '1995-03-15'"},
           {"kind": "join", "name": "cust_orders", "build": "building", "probe": "early", "build_keys": ["c_custkey"],
            "probe_keys": ["o_custkey"], "columns": columns("o_orderkey", "o_orderdate")},
           li_read(["l_orderkey", "l_extendedprice", "l_discount", "l_shipdate"]),
           {"kind": "filter", "name": "late", "input": "li", "condition": "l_shipdate > DATE '1995-03-15'"},
           {"kind": "join", "name": "with_items", "build": "cust_orders", "probe": "late", "build_keys": ["o_orderkey"],
            "probe_keys": ["l_orderkey"], "columns": columns("l_orderkey", "o_orderdate", "l_extendedprice", "l_discount")},
           {"kind": "aggregate", "name": "revenue_by_order", "input": "with_items", "group_by": columns("l_orderkey", "o_orderdate"),
            "aggregates": [{"name": "revenue", "fn": "sum", "expr": "l_extendedprice * (1 - l_discount)"}]}]
    table, status = run_split(srv.url, ops)
    scans = assert_one_scan_per_node(status, roots)
    joins = assert_a_join_per_node(status, scans, "with_items")
    [agg] = [n for n in status["ncas"] if n["operations"][0] == "revenue_by_order"]
    assert sorted(e["from"] for e in status["edges"] if e["to"] == agg["id"]) == sorted(n["id"] for n in joins)
    assert table.num_rows > 50
    assert_same_groups(duck_split, table, """
        SELECT l_orderkey, o_orderdate, CAST(sum(l_extendedprice * (1 - l_discount)) AS DECIMAL(18,4)) AS revenue
        FROM customer, orders, li
        WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
          AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
        GROUP BY l_orderkey, o_orderdate""", ["l_orderkey", "o_orderdate"])
