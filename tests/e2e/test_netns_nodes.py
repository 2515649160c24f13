"""Three hosts, each a network namespace with its own address, data root and OpenSSH server
(jumpgate/deploy/netns_fixture.py), as the `reach: ssh` nodes of one `jumpgate serve --nodes`
(docs/deploy.md): NCAs on different hosts really talk over IP, through a bridge, and send their
results to the test client at the root namespace's address on it.

- The thesis' running example with sales on one node and stores on another, and a selection of
  the conformance suite's TPC-H and TPC-DS requests over tables spread one per node: the answers
  equal DuckDB's, each scan runs on the node holding its table, join and aggregate NCAs where
  placement puts them (some on a node holding none of the tables).
- Where each NCA ran is proven, not taken from the job's status (see `run_held`).
- Faults: a node whose sshd is stopped, whose host key does not match, or which refuses the login
  is down with the reason and jobs avoid it; a node whose data root lacks a file has no scan of
  it, and a file no node has is a clear 400 naming it.
- Mid-job: an agent killed fails its job naming the node, and the node comes back; a server
  killed leaves no NCA on any node.
- The whole conformance suite over its tables spread over the nodes, lineitem split over two:
  one scan per node, DuckDB's answers.
- After every test no NCA process is left in any namespace.
"""
from __future__ import annotations

import copy
import dataclasses
import os
import shutil
import signal
import socket
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from jumpgate.client import Jumpgate
from jumpgate.client.receiver import Receiver, wait_all
from jumpgate.conformance import (
    PASSED,
    UNSUPPORTED,
    Case,
    Oracle,
    Runner,
    check_rows,
    default_data_dir,
    ensure_data,
    load_cases,
)
from jumpgate.deploy import netns_fixture, sshd_fixture
from jumpgate.deploy.netns_fixture import NetnsHosts, NsProcess
from jumpgate.examples import running_example, write_data
from jumpgate.local_server import LocalServer

from .helpers import assert_same_rows
from .join_tables import JOIN, write_tables

WHY_NOT = netns_fixture.why_not()
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(WHY_NOT is not None, reason=f"no namespace test hosts: {WHY_NOT}")]

SF = float(os.environ.get("JUMPGATE_NETNS_SF", "0.01"))
# One table per node: every read of the cases below is on exactly one node, and each two-table
# case leaves a node holding none of its tables, free for placement to use.
TABLES = {"n0": ["tpch/lineitem", "tpcds/store_sales"],
          "n1": ["tpch/orders", "tpch/part", "tpcds/date_dim", "tpcds/store_returns"],
          "n2": ["tpch/customer", "tpcds/item"]}
HOLDER = {t: node for node, tables in TABLES.items() for t in tables}
# Joins and aggregates over two or three tables (none needs a read spread over nodes).
CASES = ["tpch_q12", "tpch_q14", "tpch_q03", "tpcds_q42", "tpcds_q93_left_outer"]
SALES, STORES = "n0", "n1"  # the running example's tables
READS_ALL = "n0"  # l.jsonl and r.jsonl are on every node; the first listed holds them


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def hosts(tmp_path_factory) -> Iterator[NetnsHosts]:
    with NetnsHosts(tmp_path_factory.mktemp("netns"), 3) as made:
        yield made


@pytest.fixture(scope="module")
def conformance_root() -> Path:
    pytest.importorskip("duckdb")
    root = default_data_dir(SF)
    ensure_data(root, {t for tables in TABLES.values() for t in tables}, SF)
    return root


@pytest.fixture(scope="module")
def data(hosts, conformance_root, tmp_path_factory) -> Path:
    """Every node's data root filled; returns where the running example's files were written
    (for DuckDB)."""
    for node, tables in TABLES.items():
        for table in tables:
            place_table(conformance_root / table, hosts.host(node).data_root / table)
    example = tmp_path_factory.mktemp("example")
    write_data(example, sales=50_000)
    shutil.copy(example / "sales.jsonl", hosts.host(SALES).data_root)
    shutil.copy(example / "stores.jsonl", hosts.host(STORES).data_root)
    write_tables(example, example, rows=5_000, keys=200, step=3, seed=7)
    for h in hosts.hosts:
        for name in ("l.jsonl", "r.jsonl"):
            shutil.copy(example / name, h.data_root)
    return example


def place_table(source: Path, target: Path) -> None:
    """A table directory on a node: hard links to the cached files where the file system allows
    (no copy), else copies. Not symlinks: a node resolves them, and the target would be outside
    its data root."""
    target.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        try:
            os.link(f, target / f.name)
        except OSError:
            shutil.copy2(f, target / f.name)


def inventory(hosts: NetnsHosts, path: Path, *, pinned: bool = False, **overrides: dict) -> str:
    """The hosts as nodes. Each node's agent keeps its files under its own host's directory, as
    each machine has its own home (the namespaces share a disk). `pinned`: each node's NCAs on
    its CPU of `pins(hosts)`."""
    per_node = {h.name: {"cache_dir": str(h.home / "cache")} for h in hosts.hosts}
    for name, fields in overrides.items():
        per_node[name] = {**per_node[name], **fields}
    cpus = {name: {"cpus": str(cpu)} for name, cpu in pins(hosts).items()} if pinned else None
    return str(hosts.inventory_yaml(path, cores=1, overrides=per_node, node_fields=cpus))


def pins(hosts: NetnsHosts) -> dict[str, int]:
    """A CPU per node, in turn over the CPUs the tests may use."""
    allowed = sorted(os.sched_getaffinity(0))
    return {h.name: allowed[i % len(allowed)] for i, h in enumerate(hosts.hosts)}


RUNNING: list[LocalServer] = []  # this module's servers now running


def spares() -> set[int]:
    """The NCA processes the running servers keep started for their next jobs (warm spares, also
    on SSH nodes): not NCAs left behind while their server runs."""
    pids: set[int] = set()
    for srv in RUNNING:
        pids.update(httpx.get(srv.url + "/v1/health").json().get("ncas_warm", []))
    return pids


@contextmanager
def serving(hosts: NetnsHosts, work: Path, nodes_file: str) -> Iterator[LocalServer]:
    """`jumpgate serve --nodes` over the hosts; once it has stopped, no NCA process may be left in
    any namespace (its spares neither), but those of another server still running."""
    root = work / "server-root"  # the server's own root is unused: every node has a data root
    root.mkdir(exist_ok=True)
    cache = os.environ.get("JUMPGATE_TEST_CACHE")
    # The test client receives at the root namespace's address on the bridge: allowed to send to.
    srv = LocalServer(root, Path(cache) if cache else None, work / "server.log",
                      extra_args=["--nodes", nodes_file, "--send-allow", str(hosts.subnet)])
    RUNNING.append(srv)
    try:
        yield srv
    finally:
        if srv in RUNNING:  # a test that killed it has taken it off already
            RUNNING.remove(srv)
        srv.stop()
    left = hosts.ncas_left(ignore=spares)
    assert not left, f"NCA processes left in the namespaces after the server stopped: {left}"


@pytest.fixture(scope="module")
def server(hosts, data, tmp_path_factory) -> Iterator[LocalServer]:
    work = tmp_path_factory.mktemp("netns-server")
    with serving(hosts, work, inventory(hosts, work / "nodes.yaml", pinned=True)) as srv:
        yield srv


@pytest.fixture(autouse=True)
def nothing_left_behind(request) -> Iterator[None]:
    """After each test, no NCA of a job runs in any namespace, and every NCA process there (a
    running server's spares) was told to bind its own host's address."""
    yield
    if "hosts" in request.fixturenames:
        hosts: NetnsHosts = request.getfixturevalue("hosts")
        left = hosts.ncas_left(ignore=spares)
        assert not left, f"NCA processes left in the namespaces: {left}"
        for h in hosts.hosts:
            assert all(p.bind == h.address for p in hosts.ncas()[h.name]), hosts.ncas()


@pytest.fixture(scope="module")
def oracle(conformance_root) -> Iterator[Oracle]:
    o = Oracle(conformance_root)
    yield o
    o.close()


# ---------------------------------------------------------------------------- running a job, held


@dataclass
class Run:
    tables: dict[str, pa.Table]  # rows per send
    ncas: list[dict]  # the job's NCAs as its status names them: id, implementation, operations, host
    seen: dict[str, list[NsProcess]]  # the NCA processes in each node's namespace, mid-job
    answer: dict  # POST /v1/jobs's answer

    def host_of(self, op: str) -> str | None:
        return next((n["host"] for n in self.ncas if op in n["operations"]), None)


def free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def run_held(url: str, hosts: NetnsHosts, request: dict, timeout: float = 120) -> Run:
    """Run `request` with every send going to the client's address, and look, mid-job, at which
    NCA processes run in which namespace.

    The job is held at its end by the client: the port each send goes to is not listening yet, so
    an NCA sending to the client retries its connect (for up to 10 s, ncas/runtime/out_tcp.c).
    The executor starts every NCA of a job before its first stage and stops them after its last,
    so meanwhile every NCA process of the job is alive. One pass over /proc (what `ip netns pids`
    does, for all namespaces at once) then lists the NCA processes of each host; only after that
    do the client's receivers listen, and the job completes. No sleeping, no timing luck: the job
    cannot finish before the look, and the look waits until the job's NCAs are all there."""
    request = copy.deepcopy(request)
    ports = {}
    for op in request["operations"]:
        if op["kind"] == "send":
            op["host"], op["port"] = hosts.client_address, free_port(hosts.client_address)
            ports[op["name"]] = op["port"]
    left = hosts.ncas_left(ignore=spares)
    assert not left, f"NCAs of an earlier job still run: {left}"
    receivers: list[Receiver] = []
    with Jumpgate(url) as jg:
        job = jg.submit(request)
        try:
            job.execute()
            placed = Counter(n["host"] for n in job.ncas if n.get("host"))
            seen = wait_for_ncas(hosts, placed, job, timeout)
            for name, port in ports.items():
                r = Receiver(hosts.client_address, port, name=name)
                receivers.append(r)
                r.start(job.outputs[name].expected_streams, job.outputs[name].layout)
            deadline = time.monotonic() + timeout
            while not job.finished and time.monotonic() < deadline:
                job.status(wait=0.25)
            job.raise_if_failed()
            assert job.state == "succeeded", f"job {job.job_id} is {job.state} after {timeout} s"
            assert wait_all(receivers, 30), "the job succeeded but its streams did not end"
            return Run({r.name: r.table() for r in receivers}, job.ncas, seen, job.answer)
        finally:
            if not job.finished:
                job.cancel_quietly()
            for r in receivers:
                r.close()


def wait_for_ncas(hosts: NetnsHosts, placed: Counter[str], job, timeout: float) -> dict[str, list[NsProcess]]:
    """The NCA processes in each namespace once each host runs as many as the job places there.
    Spares are not the job's: the servers are asked which pids are spares after each look (a spare
    the job took meanwhile is the job's by then, one started meanwhile is not in the look). A spare
    an agent is still starting is in /proc before its server has its pid, so a look can count it
    as the job's: counting per host, not in all, keeps looking until it is a known spare rather
    than taking it for an NCA of the job that has yet to start elsewhere. An NCA that ran on the
    wrong host never matches, and the wait ends naming what ran where."""
    deadline = time.monotonic() + timeout
    while True:
        seen = hosts.ncas()
        warm = spares()
        seen = {name: [p for p in procs if p.pid not in warm] for name, procs in seen.items()}
        if all(len(seen.get(name, [])) == placed.get(name, 0) for name in {*seen, *placed}):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"NCAs expected in the namespaces: {dict(placed)}; found {seen}")
        job.status()
        job.raise_if_failed()  # e.g. an NCA that failed to start
        time.sleep(0.01)


def assert_ran_where_placed(run: Run, hosts: NetnsHosts) -> None:
    """Node by node, the NCA processes in its namespace are the NCAs the job's status places
    there: as many, each told to bind that node's address, with the same numbers of network input
    ports (`--inputs N`; from the job's edges), so no two NCAs can have swapped nodes unnoticed
    unless they are alike in that too."""
    edges = [e for e in run.answer.get("edges", []) if not e["client"]]
    inputs = {n["id"]: len({e["to_port"] for e in edges if e["to"] == n["id"]}) for n in run.ncas}
    for h in hosts.hosts:
        placed = Counter(inputs[n["id"]] for n in run.ncas if n.get("host") == h.name)
        procs = run.seen[h.name]
        assert {p.bind for p in procs} <= {h.address}, (h.name, procs)
        ran = Counter(p.inputs for p in procs)
        assert ran == placed, (f"node {h.name}: the status places NCAs with {dict(placed)} network inputs there, "
                               f"its namespace ran {dict(ran)}: {procs}")


def nodes(srv: LocalServer) -> dict[str, dict]:
    return {n["name"]: n for n in httpx.get(srv.url + "/v1/nodes").json()}


# ---------------------------------------------------------------------------- tests


def test_the_hosts_are_separate_machines(hosts, server):
    """Each node is up, and its address exists in its own namespace only (a process there can
    bind it, the root namespace cannot): an NCA listening on its node's address runs there."""
    listed = nodes(server)
    assert [(n, listed[n]["address"], listed[n]["state"]) for n in listed] == \
        [(h.name, h.address, "up") for h in hosts.hosts], listed
    with socket.socket() as s, pytest.raises(OSError):
        s.bind((hosts.host(0).address, 0))


def test_running_example_over_nodes_matches_duckdb(hosts, server, data):
    """Sales on n0, stores on n1: each scan runs on its table's node, the answer equals DuckDB's."""
    duckdb = pytest.importorskip("duckdb")
    with Jumpgate(server.url) as jg:
        shuffle = running_example(jg)
        request = jg.request(*[part.send(hosts.client_address, 1, name=f"shuffle_{i}")  # run_held picks ports
                               for i, part in enumerate(shuffle)])
    run = run_held(server.url, hosts, request)
    assert_ran_where_placed(run, hosts)
    # the inventory's `cpus`, applied by each node's agent
    assert {h: {p.cpus for p in procs} for h, procs in run.seen.items() if procs} == {
        h: {frozenset({cpu})} for h, cpu in pins(hosts).items() if run.seen[h]}, run.seen
    assert nodes(server)[SALES]["cpus"] == str(pins(hosts)[SALES])
    assert run.host_of("read_sales") == SALES and run.host_of("read_stores") == STORES, run.ncas
    got = pa.concat_tables([run.tables["shuffle_0"], run.tables["shuffle_1"]])
    con = duckdb.connect()
    assert_same_rows(con, got, f"""
        SELECT st.state, sum(s.price) AS total_price
        FROM read_json('{data}/sales.jsonl', columns={{'sale_id': 'BIGINT', 'item_id': 'INTEGER',
                       'store_id': 'INTEGER', 'price': 'DECIMAL(10,2)'}}) s
        JOIN read_json('{data}/stores.jsonl', columns={{'store_id': 'INTEGER', 'state': 'VARCHAR'}}) st
          ON s.store_id = st.store_id
        WHERE s.item_id = 100 GROUP BY st.state""")


CONFORMANCE = {c.name: c for c in load_cases() if c.name in CASES}
assert sorted(CONFORMANCE) == sorted(CASES), f"conformance cases not found: {set(CASES) - set(CONFORMANCE)}"


@pytest.fixture(scope="module")
def placements() -> dict[str, list[str]]:
    """"ran": the cases that ran; "third": those where a join or aggregate NCA ran on a node
    holding none of the case's tables."""
    return {"ran": [], "third": [], "rf_across": []}


@pytest.mark.parametrize("name", CASES)
def test_conformance_case_over_nodes(hosts, server, oracle, name, placements):
    case = CONFORMANCE[name]
    run = run_held(server.url, hosts, case.runnable_request(host=hosts.client_address))
    assert_ran_where_placed(run, hosts)
    problems = [p for check in case.checks if (p := check_rows(oracle, case, check, run.tables))]
    assert not problems, f"{name}: {'; '.join(problems)}"
    for op in case.operations:
        if op["kind"] == "read":
            table = "/".join(str(op["path"]).split("/")[:2])  # tpch/<table>/*.jsonl
            assert run.host_of(op["name"]) == HOLDER[table], f"scan {op['name']} of {table}: {run.ncas}"
    holders = {HOLDER[t] for t in case.tables}
    kinds = {op["name"]: op["kind"] for op in case.operations}
    placements["ran"].append(name)
    if any(n["host"] not in holders for n in run.ncas if {kinds[o] for o in n["operations"]} & {"join", "aggregate"}):
        placements["third"].append(name)
    # runtime filters (docs/runtime-filters.md) travel between nodes through the control plane
    status = httpx.get(f"{server.url}/v1/jobs/{run.answer['job_id']}").json()
    host = {n["id"]: n["host"] for n in run.ncas}
    for f in status.get("runtime_filters", []):
        assert f["handed"], f
        if any(host[b] != host[s] for b in f["from"] for s in f["to"]):
            placements["rf_across"].append((name, f["join"], f["rows_removed"]))


def test_runtime_filters_crossed_nodes_and_removed_rows(placements):
    """Some join's runtime filter went from its node to a scan on another node, which then
    removed rows before sending them."""
    if not placements["ran"]:
        pytest.skip("no conformance case ran over the nodes")
    assert any(removed > 0 for _, _, removed in placements["rf_across"]), placements["rf_across"]


def test_some_join_or_aggregate_ran_on_a_node_without_tables(placements):
    """Across the cases above, placement put some join or aggregate NCA on a node that holds none
    of its case's tables (the cores there were free)."""
    if sorted(placements["ran"]) != sorted(CASES):
        pytest.skip(f"not every conformance case ran: {placements['ran']}")
    assert placements["third"], "every join and aggregate NCA ran on a node holding one of its tables"


def run_join_held(url: str, hosts: NetnsHosts, data: Path) -> Run:
    """The join of tests/e2e/join_tables.py (l and r are on every node), checked against DuckDB."""
    duckdb = pytest.importorskip("duckdb")
    run = run_held(url, hosts, {"name": "join-over-namespaces", "operations": JOIN})
    assert_ran_where_placed(run, hosts)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW l AS SELECT * FROM read_json('{data}/l.jsonl', columns={{k: 'BIGINT', v: 'BIGINT'}})")
    con.execute(f"CREATE VIEW r AS SELECT * FROM read_json('{data}/r.jsonl', columns={{rk: 'BIGINT', w: 'VARCHAR'}})")
    assert_same_rows(con, run.tables["out"], "SELECT l.*, r.* FROM l JOIN r ON k = rk")
    return run


def test_a_node_lacking_a_file_gets_no_scan_of_it_and_a_file_on_none_is_a_clear_400(hosts, server, data):
    """l.jsonl is on every node and n0, listed first, holds it; taken off n0, its scan runs on
    n1, the next node that has it; taken off every node, the request is refused naming it."""
    aside = []
    try:
        assert run_join_held(server.url, hosts, data).host_of("l") == READS_ALL
        for h in hosts.hosts:
            (h.data_root / "l.jsonl").rename(h.data_root / "l.jsonl.aside")
            aside.append(h)
            if h.name == READS_ALL:
                run = run_join_held(server.url, hosts, data)
                assert run.host_of("l") == "n1" and run.host_of("r") == READS_ALL, run.ncas
        send = {**JOIN[-1], "host": hosts.client_address, "port": 9}
        answer = httpx.post(server.url + "/v1/jobs", json={"operations": [*JOIN[:-1], send]})
        assert answer.status_code == 400, answer.text
        message = answer.json()["error"]["message"]
        assert "l.jsonl" in message and "does not exist" in message, message
    finally:
        for h in aside:
            (h.data_root / "l.jsonl.aside").rename(h.data_root / "l.jsonl")


FAULTS = {
    "sshd stopped": ("n0", "cannot reach"),
    "wrong host key": ("n1", "does not match"),
    "refused login": ("n2", "refused the login"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_node_that_cannot_be_used_is_down_and_jobs_avoid_it(hosts, data, tmp_path, fault):
    """Each fault on one node, with a server of its own: the node is down with the reason in
    GET /v1/nodes and in the job's mapping answer (`search.nodes_skipped`), the job
    runs on the other nodes only (its scans move to the next node holding l and r when n0 is the
    one down) and answers right."""
    down, reason = FAULTS[fault]
    overrides: dict[str, dict] = {}
    if fault == "sshd stopped":
        hosts.stop_sshd(down)
    elif fault == "wrong host key":
        other = sshd_fixture.keygen(tmp_path / "other_host_key").split()
        (tmp_path / "known_hosts").write_text(f"{hosts.host(down).address} {other[0]} {other[1]}\n")
        overrides[down] = {"known_hosts": str(tmp_path / "known_hosts")}
    else:
        sshd_fixture.keygen(tmp_path / "stranger")
        overrides[down] = {"key_file": str(tmp_path / "stranger")}
    try:
        check_down_node_avoided(hosts, tmp_path, data, down, reason, overrides)
    finally:
        hosts.start_sshd(down)  # back for the next tests (a no-op unless it was stopped)


def check_down_node_avoided(hosts: NetnsHosts, tmp_path: Path, data: Path, down: str, reason: str,
                            overrides: dict[str, dict]) -> None:
    with serving(hosts, tmp_path, inventory(hosts, tmp_path / "nodes.yaml", **overrides)) as srv:
        listed = nodes(srv)
        assert listed[down]["state"] == "down" and reason in listed[down]["reason"], listed[down]
        assert all(n["state"] == "up" for name, n in listed.items() if name != down), listed
        run = run_join_held(srv.url, hosts, data)
        assert down not in {n["host"] for n in run.ncas} and not run.seen[down], run.ncas
        if down == READS_ALL:
            assert run.host_of("l") == run.host_of("r") == "n1", run.ncas
        skipped = run.answer["search"]["nodes_skipped"]  # the mapping says which nodes it skipped, and why
        assert reason in skipped[down], skipped


# ---------------------------------------------------------------------------- the whole suite, spread

# Every conformance case, over its tables spread round robin over the three nodes (under spread/
# of their data roots), with lineitem's rows split over n0 and n1: each read of lineitem becomes
# one scan per node (docs/deploy.md, "A read spread over nodes").
SPREAD = "spread"
ALL_CASES = load_cases()
SPLIT_TABLE, SPLIT_OVER = "tpch/lineitem", ("n0", "n1")


class Unsupported(Exception):
    """The server refused a request that needs an operation no registered NCA claims."""


@pytest.fixture(scope="module")
def spread_data(hosts, conformance_root) -> dict[str, str]:
    """The suite's tables on the nodes; returns table -> the node(s) holding it."""
    tables = sorted({t for c in ALL_CASES for t in c.tables})
    ensure_data(conformance_root, set(tables), SF)
    where: dict[str, str] = {}
    others = [t for t in tables if t != SPLIT_TABLE]
    for i, table in enumerate(others):
        node = hosts.hosts[i % len(hosts.hosts)]
        place_table(conformance_root / table, node.data_root / SPREAD / table)
        where[table] = node.name
    split_rows(conformance_root / SPLIT_TABLE, [hosts.host(n).data_root / SPREAD / SPLIT_TABLE for n in SPLIT_OVER])
    where[SPLIT_TABLE] = "+".join(SPLIT_OVER)
    return where


def split_rows(source: Path, targets: list[Path]) -> None:
    """Each JSON Lines file's rows dealt over `targets` (file `<stem>-<i>.jsonl` in target i), so
    that no target holds the whole table; the other files (its schema) go to every target."""
    for t in targets:
        t.mkdir(parents=True, exist_ok=True)
    for f in sorted(source.iterdir()):
        if f.suffix != ".jsonl":
            for t in targets:
                shutil.copy2(f, t / f.name)
            continue
        outs = [open(t / f"{f.stem}-{i}.jsonl", "w") for i, t in enumerate(targets)]
        try:
            with open(f) as rows:
                for n, row in enumerate(rows):
                    outs[n % len(outs)].write(row)
        finally:
            for out in outs:
                out.close()


def spread(case: Case) -> Case:
    """The case reading its tables under spread/."""
    ops = [{**op, "path": [f"{SPREAD}/{p}" for p in op["path"]] if isinstance(op["path"], list)
            else f"{SPREAD}/{op['path']}"} if op["kind"] == "read" else op for op in case.operations]
    return dataclasses.replace(case, request={**case.request, "operations": ops})


@pytest.fixture(scope="module")
def spread_runner(server, oracle, hosts, spread_data) -> Iterator[Runner]:
    r = Runner(server.url, oracle, host=hosts.client_address, timeout=120)
    yield r
    r.close()


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_the_conformance_suite_over_three_ssh_nodes(case, spread_runner, request):
    """As tests/conformance runs it on one node (a request that needs an NCA nobody registered is
    a strict expected failure), with the tables on three SSH nodes and lineitem split over two."""
    gap = spread_runner.gap(case)
    if gap:
        request.applymarker(pytest.mark.xfail(reason=gap, strict=True, raises=Unsupported))
    outcome = spread_runner.run(spread(case))
    if outcome.status == UNSUPPORTED:
        raise Unsupported(outcome.message)
    assert outcome.status == PASSED, f"{case.name} ({case.source}): {outcome.message}"


def test_a_table_split_over_two_nodes_is_one_scan_on_each(hosts, server, spread_data, oracle):
    """TPC-H Q6 over lineitem split over n0 and n1: one scan per node, each running in its node's
    namespace and reading its node's files, a partial sum on each and one final sum; one answer,
    DuckDB's."""
    case = spread(next(c for c in ALL_CASES if c.name == "tpch_q06"))
    run = run_held(server.url, hosts, case.runnable_request(host=hosts.client_address))
    assert_ran_where_placed(run, hosts)
    problems = [p for check in case.checks if (p := check_rows(oracle, case, check, run.tables))]
    assert not problems, problems
    scans = [n for n in run.ncas if "li" in n["operations"]]
    assert sorted(n["host"] for n in scans) == list(SPLIT_OVER), run.ncas
    for n in scans:
        assert n["files"] and all(f.endswith(f"-{SPLIT_OVER.index(n['host'])}.jsonl") for f in n["files"]), n


# ---------------------------------------------------------------------------- faults mid-job


@contextmanager
def stalled_scan(srv: LocalServer, hosts: NetnsHosts, node: str) -> Iterator[object]:
    """A job whose one scan runs on `node` and sends 40 MB to a client that accepts and never
    reads: it stays mid-job until something ends it. Yields the job once its NCA runs there."""
    big = f"big-{node}.jsonl"
    path = hosts.host(node).data_root / big
    path.write_text(('{"a": 1, "s": "' + "x" * 2000 + '"}\n') * 20000)
    listener = socket.create_server((hosts.client_address, 0))
    body = {"operations": [
        {"kind": "read", "name": "r", "path": big, "format": "json",
         "schema": [{"name": "a", "type": "int32"}, {"name": "s", "type": "string"}]},
        {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": hosts.client_address,
         "port": listener.getsockname()[1]}]}
    conn = None
    try:
        with Jumpgate(srv.url) as jg:
            job = jg.submit(body)
            assert [n["host"] for n in job.ncas] == [node], job.ncas
            job.execute()
            conn, _ = listener.accept()
            deadline = time.monotonic() + 10
            while not [p for p in hosts.ncas()[node] if p.pid not in spares()]:
                assert time.monotonic() < deadline, "the scan never ran on its node"
                time.sleep(0.02)
            yield job
    finally:
        if conn is not None:
            conn.close()
        listener.close()
        path.unlink()


def agent_pid(srv: LocalServer, node: str) -> int:
    deadline = time.monotonic() + 10
    while not (pid := nodes(srv)[node].get("agent", {}).get("pid")):
        assert time.monotonic() < deadline, nodes(srv)[node]
        time.sleep(0.05)
    return pid


def test_an_agent_killed_mid_job_fails_the_job_naming_the_node(hosts, data, tmp_path):
    """The agent of n1 is killed while its scan sends: the job fails naming the node and its lost
    agent, the NCA (whose input was the agent's pipe) exits, and the node is up again, with a new
    agent, at the next check."""
    with serving(hosts, tmp_path, inventory(hosts, tmp_path / "nodes.yaml")) as srv:
        pid = agent_pid(srv, "n1")
        with stalled_scan(srv, hosts, "n1") as job:
            os.kill(pid, signal.SIGKILL)
            status = job.status(wait=30)
            while status["state"] == "running":
                status = job.status(wait=30)
        assert status["state"] == "failed", status
        message = status["error"]["message"]
        assert "node n1" in message and "agent" in message, status["error"]
        assert not hosts.ncas_left(ignore=spares), hosts.ncas()
        deadline = time.monotonic() + 20
        while nodes(srv)["n1"]["state"] != "up":
            assert time.monotonic() < deadline, nodes(srv)["n1"]
            time.sleep(0.2)
        assert agent_pid(srv, "n1") != pid
        run_join_held(srv.url, hosts, data)


def test_a_server_killed_mid_job_leaves_no_nca_on_any_node(hosts, tmp_path):
    """The server is killed (SIGKILL, with its local children) while a scan on n2 sends: its SSH
    connections close with it, each agent ends that server's session, and no NCA is left on any
    node well within the lease (10 s)."""
    with serving(hosts, tmp_path, inventory(hosts, tmp_path / "nodes.yaml")) as srv:
        with stalled_scan(srv, hosts, "n2"):
            os.killpg(srv.proc.pid, signal.SIGKILL)
            RUNNING.remove(srv)  # its spares count as left behind too; the module's server's do not
            t0 = time.monotonic()
            left = hosts.ncas_left(within=10.0, ignore=spares)
            took = time.monotonic() - t0
        assert not left, left
        assert took < 10.0, took
