"""Scaling out over nodes (jumpgate/compiler/scale_out.py), with the real registry: a read whose
files are spread over nodes becomes one scan per node, each reading the files its node holds
(balanced by bytes where a file is on several nodes) and placed there, all sending into the same
consumers with consistent stream ids; a complete aggregation fused with such a read becomes a
partial one on every node and a final one of its own; a join fused with the read's scan on its
probe side is cloned too and every clone receives the whole build side; what cannot be split
correctly is a clear 422 naming the read."""
from __future__ import annotations

import fnmatch

import pytest

from jumpgate.compiler.compile import compile_plan
from jumpgate.compiler.pipeline import StagedPipeline
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


def test_an_aggregation_after_a_join_stays_complete():
    """The join is an NCA of its own, fed by the scans over the network: it receives every part,
    so the aggregation after it is not split."""
    files = {**SPREAD2, "o.jsonl": (500, ("b",))}
    plan = plan_of(files, read("o", "o.jsonl", ORDERS), read("li", "li/*.jsonl", LI),
                   {"kind": "join", "name": "j", "build": "o", "probe": "li", "build_keys": ["ok"], "probe_keys": ["k"]},
                   {"kind": "aggregate", "name": "a", "input": "j", "group_by": [{"name": "prio", "expr": "prio"}],
                    "aggregates": [{"name": "n", "fn": "count_star"}]}, send("a"))
    p = compiled(plan, nodes("a", "b"))
    assert_consistent(p)
    assert "a_partial" not in {op.name for op in p.plan.ops}
    assert [(n.implementation, n.ops) for n in p.ncas] == [
        ("software.scan_json", ("o",)), ("software.scan_json", ("li",)), ("software.scan_json", ("li",)),
        ("software.hash_join", ("j",)), ("software.aggregate", ("a",))]
    probe = [e for e in p.edges if e.consumer == "nca3" and e.consumer_port == 1]
    assert [(e.producer, e.first_stream) for e in probe] == [("nca1", 0), ("nca2", 1)]
    assert p.node("nca3").inputs[1].expected_streams == 2 and p.node("nca3").inputs[0].expected_streams == 1


def test_a_spread_read_on_the_build_side_of_a_join_over_the_network_is_split():
    files = {**SPREAD2, "o.jsonl": (500, ("a",))}
    plan = plan_of(files, read("li", "li/*.jsonl", LI), read("o", "o.jsonl", ORDERS),
                   {"kind": "join", "name": "j", "build": "li", "probe": "o", "build_keys": ["k"], "probe_keys": ["ok"]},
                   send("j"))
    p = compiled(plan, nodes("a", "b"))
    assert_consistent(p)
    join = next(n for n in p.ncas if n.implementation == "software.hash_join")
    assert join.inputs[0].expected_streams == 2  # the whole build side: both parts


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
