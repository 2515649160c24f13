"""Scaling out over nodes (jumpgate/compiler/scale_out.py), with the real registry: a read whose
files are spread over nodes becomes one scan per node, each reading the files its node holds
(balanced by bytes where a file is on several nodes) and placed there, all sending into the same
consumers with consistent stream ids; a complete aggregation fused with such a read becomes a
partial one on every node and a final one of its own; a join fused with the read's scan on its
probe side is cloned too and every clone receives the whole build side; so is an NCA the scans
feed over the network when it can work on each node's part (a join probing the read, a partial
aggregation after it, ...: one clone per scan, on its node, fed only by it), up to the first NCA
needing every row, which stays one; what cannot be split correctly is a clear 422 naming the
read."""
from __future__ import annotations

import fnmatch

import pytest

from jumpgate.compiler.compile import compile_plan
from jumpgate.compiler.pipeline import NcaNode, StagedPipeline
from jumpgate.contract.errors import MappingError
from jumpgate.contract.ntf import generate_ntf
from jumpgate.dataflow.plan import AggFn, AggMode, Aggregate, FileFormat, Join, Read
from jumpgate.dataflow.request import parse_request
from jumpgate.dataflow.storage import FileFacts
from jumpgate.nca.deployment import Host
from jumpgate.nca.interface import (
    FILE,
    NTF,
    NcaImplementation,
    OutputSpec,
    ResourceRequest,
    StreamSpec,
    Verdict,
)
from jumpgate.nca.registry import load_registry

LI = [{"name": "k", "type": "int64"}, {"name": "flag", "type": "string"}, {"name": "price", "type": "decimal(12,2)"},
      {"name": "qty", "type": "int32"}]
ORDERS = [{"name": "ok", "type": "int64"}, {"name": "prio", "type": "string"}]


class NodesStorage:
    """Files on nodes, answered as the fleet's storage answers: relative name -> (bytes, holders)."""

    def __init__(self, files: dict[str, tuple[int, tuple[str, ...]]]) -> None:
        self.files = files

    def stat(self, relative: str) -> FileFacts:
        if relative not in self.files:
            return FileFacts(f"/data/{relative}", True, False, False)
        size, holders = self.files[relative]
        return FileFacts(f"/data/{relative}", True, True, True, size, holders)

    def glob(self, pattern: str) -> list[str]:
        return sorted(n for n in self.files if fnmatch.fnmatch(n, pattern))


def nodes(*names: str, cores: int = 4) -> list[Host]:
    return [Host(n, f"127.0.0.{i + 2}", cores) for i, n in enumerate(names)]


def read(name: str, path: str, schema: list[dict]) -> dict:
    return {"kind": "read", "name": name, "path": path, "format": "json", "schema": schema}


def send(input: str, name: str = "out") -> dict:
    return {"kind": "send", "name": name, "input": input, "transport": "tcp", "host": "127.0.0.1", "port": 9}


def plan_of(files: dict[str, tuple[int, tuple[str, ...]]], *ops: dict):
    return parse_request({"name": "q", "operations": list(ops)}, NodesStorage(files))


def compiled(plan, hosts: list[Host], extra: tuple[NcaImplementation, ...] = (), **kw) -> StagedPipeline:
    return compile_plan(plan, [*load_registry().all(), *extra], op_paths=plan.op_paths, hosts=hosts, **kw)


def scans_of(p: StagedPipeline, read_name: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """NCA id -> (host, files) of every instance reading `read_name`'s files."""
    return {n.id: (n.host, port.files) for n in p.ncas for port in n.inputs
            if port.spec.transport == FILE and port.source.op == read_name}


def assert_consistent(p: StagedPipeline) -> None:
    """Ids nca0.. in a topological order; every destination's stream ids are 0..expected-1, each
    once; stages, decisions and outputs name NCAs that exist."""
    ids = [n.id for n in p.ncas]
    assert ids == [f"nca{i}" for i in range(len(ids))]
    rank = {nid: i for i, nid in enumerate(ids)}
    for e in p.edges:
        assert rank[e.producer] < (1 << 30 if e.to_client else rank[e.consumer]), e
    got: dict[tuple[str, int, bool], list[int]] = {}
    for e in p.edges:
        got.setdefault((e.consumer, e.consumer_port, e.to_client), []).extend(
            range(e.first_stream, e.first_stream + e.streams))
    for n in p.ncas:
        for i, port in enumerate(n.inputs):
            if port.spec.transport != FILE:
                assert sorted(got[(n.id, i, False)]) == list(range(port.expected_streams)), (n.id, i)
    for name, out in p.outputs.items():
        assert sorted(got[(name, 0, True)]) == list(range(out.expected_streams)), name
        assert out.producer in ids
    assert [[nid for nid in stage] for stage in p.stages] == \
        [[n.id for n in p.ncas if s in n.stages] for s in range(len(p.stages))]
    for op, d in p.decisions.items():
        if d.nca is not None:
            assert op in p.node(d.nca).ops, (op, d.nca)


# ------------------------------------------------------------------ one scan per node


SPREAD2 = {"li/0.jsonl": (1000, ("a",)), "li/1.jsonl": (3000, ("b",)), "li/2.jsonl": (2000, ("a",))}


def test_a_read_spread_over_two_nodes_is_one_scan_per_node_with_its_files():
    plan = plan_of(SPREAD2, read("li", "li/*.jsonl", LI),
                   {"kind": "filter", "name": "f", "input": "li", "condition": "qty > 3"},
                   {"kind": "project", "name": "p", "input": "f", "columns": [{"name": "k", "expr": "k"}]}, send("p"))
    p = compiled(plan, nodes("a", "b"))
    assert_consistent(p)
    assert [(n.implementation, n.ops) for n in p.ncas] == [("software.scan_json", ("li", "f", "p"))] * 2
    assert scans_of(p, "li") == {"nca0": ("a", ("/data/li/0.jsonl", "/data/li/2.jsonl")),
                                 "nca1": ("b", ("/data/li/1.jsonl",))}
    # both send to the client, which expects both streams: ids 0 and 1 in NCA id order
    assert [(e.producer, e.consumer, e.first_stream, e.streams) for e in p.edges] == [
        ("nca0", "out", 0, 1), ("nca1", "out", 1, 1)]
    assert p.outputs["out"].expected_streams == 2
    assert p.stages == [["nca0", "nca1"]]
    assert p.decisions["li"].nca == "nca0" and "nca0 on a, nca1 on b" in p.decisions["li"].note
    assert p.decisions["out"].note.endswith("fed by nca0, nca1")
    doc = p.to_json()["ncas"]
    assert doc[0]["files"] == ["/data/li/0.jsonl", "/data/li/2.jsonl"] and doc[1]["files"] == ["/data/li/1.jsonl"]
    assert "holds 2 of the 3 files of read 'li'" in doc[0]["placement"]


def test_files_several_nodes_hold_are_balanced_by_bytes_over_three_nodes():
    files = {"li/0.jsonl": (5000, ("a",)),            # only a: a = 5000
             "li/1.jsonl": (4000, ("b", "c")),        # largest shared first: b (fewest bytes, listed first)
             "li/2.jsonl": (3000, ("a", "b", "c")),   # c has 0
             "li/3.jsonl": (2000, ("b", "c")),        # c 3000 < b 4000
             "li/4.jsonl": (1000, ("a", "b", "c"))}   # b 4000 < c 5000 = a 5000
    plan = plan_of(files, read("li", "li/*.jsonl", LI), send("li"))
    p = compiled(plan, nodes("a", "b", "c"))
    assert_consistent(p)
    assert scans_of(p, "li") == {"nca0": ("a", ("/data/li/0.jsonl",)),
                                 "nca1": ("b", ("/data/li/1.jsonl", "/data/li/4.jsonl")),
                                 "nca2": ("c", ("/data/li/2.jsonl", "/data/li/3.jsonl"))}
    assert p.outputs["out"].expected_streams == 3


def test_a_read_one_node_holds_entirely_stays_one_scan():
    files = {"li/0.jsonl": (1000, ("a", "b")), "li/1.jsonl": (3000, ("b",))}
    plan = plan_of(files, read("li", "li/*.jsonl", LI), send("li"))
    p = compiled(plan, nodes("a", "b"))
    alone = compile_plan(plan, load_registry().all(), op_paths=plan.op_paths)
    assert [(n.id, n.ops, n.inputs) for n in p.ncas] == [(n.id, n.ops, n.inputs) for n in alone.ncas]
    assert p.edges == alone.edges and p.node("nca0").host == "b"


def test_thread_streams_are_counted_per_clone():
    """Scans with two threads open two streams each: the client expects four, ids 0-1 and 2-3."""
    files = {"li/0.jsonl": (32 << 20, ("a",)), "li/1.jsonl": (32 << 20, ("b",))}  # 16 MB a thread
    plan = plan_of(files, read("li", "li/*.jsonl", LI), send("li"))
    p = compiled(plan, nodes("a", "b"), thread_budget=2)
    assert_consistent(p)
    assert [(e.producer, e.first_stream, e.streams) for e in p.edges] == [("nca0", 0, 2), ("nca1", 2, 2)]
    assert p.outputs["out"].expected_streams == 4


def test_a_fused_shuffle_is_cloned_each_partition_to_the_same_consumer():
    plan = plan_of(SPREAD2, read("li", "li/*.jsonl", LI),
                   {"kind": "shuffle", "name": "s", "input": "li", "keys": ["k"], "partitions": 2},
                   send("s[0]", "out0"), {**send("s[1]", "out1"), "port": 10})
    p = compiled(plan, nodes("a", "b"))
    assert_consistent(p)
    assert [n.ops for n in p.ncas] == [("li", "s")] * 2
    assert {(e.producer, e.producer_port, e.consumer, e.first_stream) for e in p.edges} == {
        ("nca0", 0, "out0", 0), ("nca1", 0, "out0", 1), ("nca0", 1, "out1", 0), ("nca1", 1, "out1", 1)}
    assert p.outputs["out0"].expected_streams == p.outputs["out1"].expected_streams == 2


# ------------------------------------------------------------------ aggregations


def q1_like():
    return {"kind": "aggregate", "name": "a", "input": "f", "group_by": [{"name": "flag", "expr": "flag"}],
            "aggregates": [{"name": "n", "fn": "count_star"}, {"name": "total", "fn": "sum", "expr": "price"},
                           {"name": "mean", "fn": "avg", "expr": "price"}, {"name": "most", "fn": "max", "expr": "qty"},
                           {"name": "nq", "fn": "count", "expr": "qty"}]}


def test_a_complete_aggregation_becomes_partial_on_each_node_and_final_of_its_own():
    plan = plan_of(SPREAD2, read("li", "li/*.jsonl", LI),
                   {"kind": "filter", "name": "f", "input": "li", "condition": "qty > 3"}, q1_like(),
                   {"kind": "filter", "name": "h", "input": "a", "condition": "n > 1"}, send("h"))
    p = compiled(plan, nodes("a", "b"))
    assert_consistent(p)
    assert [(n.implementation, n.ops, n.host) for n in p.ncas] == [
        ("software.scan_json", ("li", "f", "a_partial"), "a"), ("software.scan_json", ("li", "f", "a_partial"), "b"),
        ("software.aggregate", ("a", "h"), p.node("nca2").host)]
    partial, final = p.plan.op("a_partial"), p.plan.op("a")
    assert isinstance(partial, Aggregate) and partial.mode is AggMode.PARTIAL
    assert isinstance(final, Aggregate) and final.mode is AggMode.FINAL and final.input.op == "a_partial"
    # the final aggregation answers in the complete one's schema, so the HAVING filter still binds
    assert p.plan.schemas["a"] == plan.schemas["a"]
    assert p.plan.schemas["a_partial"].names == ["flag", "n", "total", "mean__sum", "mean__count", "most", "nq"]
    assert [(c.name, c.fn, c.expr.name) for c in final.aggregates] == [
        ("n", AggFn.COUNT_STAR, "n"), ("total", AggFn.SUM, "total"), ("mean", AggFn.AVG, "mean__sum"),
        ("most", AggFn.MAX, "most"), ("nq", AggFn.COUNT, "nq")]
    # the final NCA receives both scans' partial rows, in the partial layout
    into = [e for e in p.edges if e.consumer == "nca2"]
    assert [(e.producer, e.first_stream) for e in into] == [("nca0", 0), ("nca1", 1)]
    assert p.node("nca2").inputs[0].expected_streams == 2
    assert into[0].spec.layout == generate_ntf(p.plan.schemas["a_partial"])
    # both halves point at the aggregation of the request
    assert p.plan.op_paths["a_partial"] == p.plan.op_paths["a"] == "operations[2]"
    assert p.decisions["a"].nca == "nca2" and p.decisions["a_partial"].nca == "nca0"


def test_a_global_sum_over_three_nodes_has_one_final_fed_by_three_scans():
    files = {f"li/{i}.jsonl": (1000 * (i + 1), (n,)) for i, n in enumerate("abc")}
    q6 = {"kind": "aggregate", "name": "rev", "input": "f", "group_by": [],
          "aggregates": [{"name": "revenue", "fn": "sum", "expr": "price * qty"}]}
    plan = plan_of(files, read("li", "li/*.jsonl", LI),
                   {"kind": "filter", "name": "f", "input": "li", "condition": "qty < 24"}, q6, send("rev"))
    p = compiled(plan, nodes("a", "b", "c"))
    assert_consistent(p)
    assert [n.ops for n in p.ncas] == [("li", "f", "rev_partial")] * 3 + [("rev",)]
    assert [n.host for n in p.ncas[:3]] == ["a", "b", "c"]
    assert p.node("nca3").inputs[0].expected_streams == 3 and p.outputs["out"].expected_streams == 1


# ------------------------------------------------------------------ partition-wise: NCAs fed by the scans


CUST = [{"name": "c_custkey", "type": "int64"}, {"name": "c_mktsegment", "type": "string"}]
ORD = [{"name": "o_orderkey", "type": "int64"}, {"name": "o_custkey", "type": "int64"},
       {"name": "o_orderdate", "type": "date"}]
LINE = [{"name": "l_orderkey", "type": "int64"}, {"name": "l_extendedprice", "type": "decimal(15,2)"},
        {"name": "l_shipdate", "type": "date"}]
GROUPS = [{"name": "l_orderkey", "expr": "l_orderkey"}, {"name": "o_orderdate", "expr": "o_orderdate"}]
REVENUE = [{"name": "revenue", "fn": "sum", "expr": "l_extendedprice"}]


def q3_ops(*aggregates: dict) -> list[dict]:
    """TPC-H Q3's shape: (customer ⋈ orders) ⋈ lineitem, each filtered, then `aggregates` (by
    default one complete aggregation) and a send of the last one."""
    aggregates = aggregates or ({"kind": "aggregate", "name": "revenue_by_order", "input": "with_items",
                                 "group_by": GROUPS, "aggregates": REVENUE},)
    return [read("cust", "c.jsonl", CUST),
            {"kind": "filter", "name": "building", "input": "cust", "condition": "c_mktsegment = 'BUILDING'"},
            read("ord", "o.jsonl", ORD),
            {"kind": "filter", "name": "early", "input": "ord", "condition": "o_orderdate < DATE '1995-03-15'"},
            {"kind": "join", "name": "cust_orders", "build": "building", "probe": "early",
             "build_keys": ["c_custkey"], "probe_keys": ["o_custkey"]},
            read("li", "li/*.jsonl", LINE),
            {"kind": "filter", "name": "late", "input": "li", "condition": "l_shipdate > DATE '1995-03-15'"},
            {"kind": "join", "name": "with_items", "build": "cust_orders", "probe": "late",
             "build_keys": ["o_orderkey"], "probe_keys": ["l_orderkey"]},
            *aggregates, send(aggregates[-1]["name"])]


def q3_files(li_on: str) -> dict[str, tuple[int, tuple[str, ...]]]:
    """customer and orders on a, one lineitem file on each node of `li_on`."""
    return {"c.jsonl": (100, ("a",)), "o.jsonl": (1000, ("a",))} | \
        {f"li/{i}.jsonl": (5000, (n,)) for i, n in enumerate(li_on)}


def with_ops(p: StagedPipeline, *ops: str) -> list[NcaNode]:
    return [n for n in p.ncas if n.ops == ops]


@pytest.mark.parametrize("names", ["ab", "abc"])
def test_a_join_probing_a_split_read_is_cloned_next_to_each_scan(names):
    plan = plan_of(q3_files(names), *q3_ops())
    p = compiled(plan, nodes(*names))
    assert_consistent(p)
    scans, joins = with_ops(p, "li", "late"), with_ops(p, "with_items")
    [build], [agg] = with_ops(p, "cust_orders"), with_ops(p, "revenue_by_order")
    assert [s.host for s in scans] == [j.host for j in joins] == list(names)
    # clone k probes scan k's rows only, and builds the whole build side
    for scan, join in zip(scans, joins):
        build_in, probe_in = p.input_edges(join.id)
        assert [(e.producer, e.first_stream) for e in probe_in] == [(scan.id, 0)]
        assert [(e.producer, e.first_stream) for e in build_in] == [(build.id, 0)]
        assert [port.expected_streams for port in join.inputs] == [1, 1]
        assert join.placement == (f"{join.host}: takes its rows from {scan.id} on {join.host}, the scan of "
                                  f"{join.host}'s part of read 'li' (split over nodes); one instance per part: "
                                  + ", ".join(f"{j.id} on {j.host}" for j in joins))
    # the build side's one output port sends everything to every clone
    [port] = p.output_edges(build.id)
    assert [(e.consumer, e.consumer_port, e.first_stream) for e in port] == [(j.id, 0, 0) for j in joins]
    # one complete aggregation receives every clone's rows
    assert [(e.producer, e.first_stream) for e in p.input_edges(agg.id)[0]] == [(j.id, k) for k, j in enumerate(joins)]
    assert agg.inputs[0].expected_streams == len(names) and agg.placement.startswith(f"{agg.host}: ")
    assert "revenue_by_order_partial" not in {op.name for op in p.plan.ops}
    # the clones keep the original's stages (build before probe, the probe with the scans) and threads
    alone = compile_plan(plan, load_registry().all(), op_paths=plan.op_paths)
    [original] = with_ops(alone, "with_items")
    assert all(j.stages == original.stages and j.resources == original.resources for j in joins)
    assert joins[0].stages == (1, 2) and scans[0].stages == (2,) and build.stages == (0, 1)
    assert p.decisions["with_items"].nca == joins[0].id
    assert p.decisions["with_items"].note.endswith(
        "taken partition-wise with read 'li', split over nodes: one instance per part: "
        + ", ".join(f"{j.id} on {j.host}" for j in joins))


def test_a_chain_of_safe_ncas_follows_the_scans_up_to_a_final_aggregation():
    """Q3 as the conformance suite has it: the partial aggregation after the join is cloned too
    (clone k fed by join clone k), the final one is one instance fed by every partial clone."""
    partial = {"kind": "aggregate", "name": "partial", "input": "with_items", "group_by": GROUPS,
               "aggregates": REVENUE, "mode": "partial"}
    final = {**partial, "name": "final", "input": "partial", "mode": "final"}
    p = compiled(plan_of(q3_files("ab"), *q3_ops(partial, final)), nodes("a", "b"))
    assert_consistent(p)
    scans, joins, partials = with_ops(p, "li", "late"), with_ops(p, "with_items"), with_ops(p, "partial")
    [last] = with_ops(p, "final")
    assert [n.host for n in joins] == [n.host for n in partials] == ["a", "b"]
    for scan, join, part in zip(scans, joins, partials):
        assert [e.producer for e in p.input_edges(part.id)[0]] == [join.id]
        assert part.placement.startswith(f"{part.host}: takes its rows from {join.id} on {part.host}, next to "
                                         f"{scan.id}, the scan of {part.host}'s part of read 'li'")
    assert [e.producer for e in p.input_edges(last.id)[0]] == [n.id for n in partials]
    assert last.inputs[0].expected_streams == 2


def test_a_chain_stops_where_its_rows_are_a_join_s_build_side():
    """j1 probes the split read and is cloned; j2 builds on j1's output, so it needs all of it: one
    j2 receiving both clones on its build port."""
    files = {**SPREAD2, "o.jsonl": (500, ("b",)), "o2.jsonl": (500, ("a",))}
    plan = plan_of(files, read("o", "o.jsonl", ORDERS), read("li", "li/*.jsonl", LI),
                   {"kind": "join", "name": "j1", "build": "o", "probe": "li", "build_keys": ["ok"], "probe_keys": ["k"],
                    "columns": [{"name": "k", "expr": "k"}, {"name": "prio", "expr": "prio"}]},
                   read("o2", "o2.jsonl", [{"name": "ok2", "type": "int64"}]),
                   {"kind": "join", "name": "j2", "build": "j1", "probe": "o2", "build_keys": ["k"], "probe_keys": ["ok2"]},
                   send("j2"))
    p = compiled(plan, nodes("a", "b"))
    assert_consistent(p)
    scans, firsts = with_ops(p, "li"), with_ops(p, "j1")
    [second] = with_ops(p, "j2")
    assert [n.host for n in scans] == [n.host for n in firsts] == ["a", "b"]
    assert [e.producer for e in p.input_edges(second.id)[0]] == [n.id for n in firsts]
    assert second.inputs[0].expected_streams == 2


def test_a_join_probing_one_split_read_and_building_another_stays_one():
    """Both sides are split reads: one join receives every part of each."""
    files = SPREAD2 | {"o/0.jsonl": (500, ("a",)), "o/1.jsonl": (500, ("b",))}
    plan = plan_of(files, read("o", "o/*.jsonl", ORDERS), read("li", "li/*.jsonl", LI),
                   {"kind": "join", "name": "j", "build": "o", "probe": "li", "build_keys": ["ok"], "probe_keys": ["k"]},
                   send("j"))
    p = compiled(plan, nodes("a", "b"))
    assert_consistent(p)
    [join] = with_ops(p, "j")
    assert [len(edges) for edges in p.input_edges(join.id)] == [2, 2]
    assert [port.expected_streams for port in join.inputs] == [2, 2] and p.outputs["out"].expected_streams == 1


def test_a_spread_read_on_the_build_side_of_a_join_keeps_one_join():
    files = {**SPREAD2, "o.jsonl": (500, ("a",))}
    plan = plan_of(files, read("li", "li/*.jsonl", LI), read("o", "o.jsonl", ORDERS),
                   {"kind": "join", "name": "j", "build": "li", "probe": "o", "build_keys": ["k"], "probe_keys": ["ok"]},
                   send("j"))
    p = compiled(plan, nodes("a", "b"))
    assert_consistent(p)
    scans, [join] = with_ops(p, "li"), with_ops(p, "j")
    assert [e.producer for e in p.input_edges(join.id)[0]] == [n.id for n in scans]
    assert join.inputs[0].expected_streams == 2  # the whole build side: both parts


def test_a_q3_whose_lineitem_one_node_holds_is_not_touched():
    plan = plan_of(q3_files("b"), *q3_ops())
    p = compiled(plan, nodes("a", "b"))
    alone = compile_plan(plan, load_registry().all(), op_paths=plan.op_paths)
    assert [(n.id, n.ops, n.inputs, n.stages) for n in p.ncas] == [(n.id, n.ops, n.inputs, n.stages) for n in alone.ncas]
    assert p.edges == alone.edges and p.decisions == alone.decisions


# ------------------------------------------------------------------ a join fused with the scan


class ScanJoin(NcaImplementation):
    """A JSON scan fusing the join it feeds, on either side, with the other side over TCP: not in
    the registry (the hash join takes its inputs over the network); it shows how a clone of a
    fused join gets the whole build side."""

    name = "test.scan_join"
    description = "JSON scan fused with the join it feeds"
    operation_kinds = ("read", "join")

    def match_operations(self, plan, anchor):
        op = plan.op(anchor) if anchor else None
        consumers = plan.consumers(anchor) if isinstance(op, Read) else []
        if not isinstance(op, Read) or op.format is not FileFormat.JSON or len(consumers) != 1 \
                or not isinstance(consumers[0][0], Join):
            return Verdict.no("a json read feeding a join only")
        return Verdict.yes((anchor, consumers[0][0].name))

    def match_input(self, plan, ops, inputs):
        if len(ops) != 2 or [i.transport for i in inputs] != [FILE, "tcp"]:
            return Verdict.no("json files and the join's other side over tcp")
        return Verdict.yes()

    def match_output(self, plan, ops, inputs, wanted):
        return Verdict.yes((OutputSpec(StreamSpec(NTF, "tcp", generate_ntf(plan.schemas[ops[-1]]))),))

    def resources(self, plan, ops):
        return ResourceRequest(cores=1)

    def instantiate(self, spec, context):
        raise NotImplementedError("for compiler tests only")


def test_a_join_fused_on_the_probe_side_is_cloned_and_the_build_side_fans_out():
    files = {f"li/{i}.jsonl": (1000, (n,)) for i, n in enumerate("abc")} | {"o.jsonl": (500, ("b",))}
    plan = plan_of(files, read("o", "o.jsonl", ORDERS), read("li", "li/*.jsonl", LI),
                   {"kind": "join", "name": "j", "build": "o", "probe": "li", "build_keys": ["ok"], "probe_keys": ["k"]},
                   send("j"))
    p = compiled(plan, nodes("a", "b", "c"), extra=(ScanJoin(),))
    assert_consistent(p)
    assert [(n.implementation, n.ops, n.host) for n in p.ncas] == [
        ("software.scan_json", ("o",), "b"), ("test.scan_join", ("li", "j"), "a"),
        ("test.scan_join", ("li", "j"), "b"), ("test.scan_join", ("li", "j"), "c")]
    # the build scan's one output port sends everything to each clone: stream ids from 0 at each
    [port] = p.output_edges("nca0")
    assert [(e.consumer, e.consumer_port, e.first_stream, e.streams) for e in port] == [
        ("nca1", 1, 0, 1), ("nca2", 1, 0, 1), ("nca3", 1, 0, 1)]
    for clone in ("nca1", "nca2", "nca3"):
        files_port, build_port = p.node(clone).inputs
        assert build_port.expected_streams == 1 and len(files_port.files) == 1
    assert p.outputs["out"].expected_streams == 3
    assert p.stages == [["nca0", "nca1", "nca2", "nca3"], ["nca1", "nca2", "nca3"]]


def test_a_spread_read_fused_on_the_build_side_of_a_join_is_refused():
    """o (spread) is the build side of j2; j2's probe side (itself a join) is mapped first, so the
    test plugin fuses o with j2: its clones would each build a part of the hash table."""
    files = {"o/0.jsonl": (100, ("a",)), "o/1.jsonl": (100, ("b",)), "c.jsonl": (10, ("a",)), "l.jsonl": (10, ("a",))}
    cust = [{"name": "ck", "type": "int64"}]
    plan = plan_of(files, read("c", "c.jsonl", cust), read("l", "l.jsonl", LI), read("o", "o/*.jsonl", ORDERS),
                   {"kind": "join", "name": "j1", "build": "c", "probe": "l", "build_keys": ["ck"], "probe_keys": ["k"]},
                   {"kind": "join", "name": "j2", "build": "o", "probe": "j1", "build_keys": ["ok"], "probe_keys": ["k"]},
                   send("j2"))
    with pytest.raises(MappingError) as err:
        compiled(plan, nodes("a", "b"), extra=(ScanJoin(),))
    msg = err.value.message
    assert msg.startswith("no node holds all the files of read 'o' (/data/o/0.jsonl on a; /data/o/1.jsonl on b)")
    assert "cannot be split into one scan per node: it feeds the build side of join 'j2'" in msg
    assert err.value.path == "operations[2]"


def test_an_aggregation_whose_partial_state_would_clash_is_refused():
    """A group column named like an average's partial sum: the split cannot name its state."""
    agg = {"kind": "aggregate", "name": "a", "input": "li", "group_by": [{"name": "m__sum", "expr": "flag"}],
           "aggregates": [{"name": "m", "fn": "avg", "expr": "price"}]}
    plan = plan_of(SPREAD2, read("li", "li/*.jsonl", LI), agg, send("a"))
    with pytest.raises(MappingError, match="duplicate column name 'm__sum'") as err:
        compiled(plan, nodes("a", "b"))
    assert err.value.path == "operations[1]"
    # without nodes to split over, the complete aggregation is fused with the scan as ever
    assert compile_plan(plan, load_registry().all()).node("nca0").ops == ("li", "a")
