"""Operator interfaces of the shuffle NCA (`software.shuffle`), the NTF filter/project NCA
(`software.ntf_filter_project`) and the JSON scan's fused shuffle, and how the mapper uses them:
the fused scan whenever it can (fewest NCAs), the NTF NCAs only where nothing fuses."""
from __future__ import annotations

import pytest

from jumpgate.compiler.compile import compile_plan
from jumpgate.contract.ntf import NtfField, NtfLayout, generate_ntf
from jumpgate.contract.types import INT64
from jumpgate.dataflow.request import parse_request
from jumpgate.nca.interface import FILE, NTF, StreamSpec
from jumpgate.nca.registry import load_registry
from jumpgate.ncas.software.codegen.csyntax import CodegenError
from jumpgate.ncas.software.codegen.shuffle import (
    generate_relay_query,
    generate_scan_shuffle_query,
    is_contract_layout,
)
from jumpgate.ncas.software.ntf_filter_project import NtfFilterProjectNca
from jumpgate.ncas.software.scan_json import JsonScanNca
from jumpgate.ncas.software.shuffle import ShuffleNca
from tests.unit.fake_ncas import FakeJoin, FakeSoftAgg

SCHEMA = [{"name": "a", "type": "int32"}, {"name": "s", "type": "string"}, {"name": "x", "type": "float64"},
          {"name": "d", "type": "decimal(12,2)"}, {"name": "dt", "type": "date"}]
REAL = (JsonScanNca, NtfFilterProjectNca, ShuffleNca)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    (d / "t.jsonl").write_text('{"a": 1, "s": "x"}\n')
    (d / "u.csv").write_text("a\n1\n")
    return d


def read(name="r", fmt="json"):
    path = "t.jsonl" if fmt == "json" else "u.csv"
    schema = SCHEMA if fmt == "json" else [{"name": "a", "type": "int32"}]
    return {"kind": "read", "name": name, "path": path, "format": fmt, "schema": schema}


def flt(name, inp, cond="a > 0"):
    return {"kind": "filter", "name": name, "input": inp, "condition": cond}


def proj(name, inp, cols):
    return {"kind": "project", "name": name, "input": inp, "columns": [{"name": n, "expr": e} for n, e in cols]}


def shuf(name, inp, keys, p):
    return {"kind": "shuffle", "name": name, "input": inp, "keys": keys, "partitions": p}


def send(name, inp, transport="tcp"):
    return {"kind": "send", "name": name, "input": inp, "transport": transport, "host": "127.0.0.1", "port": 9}


def sends(shuffle, p, transport="tcp"):
    return [send(f"o{i}", f"{shuffle}[{i}]", transport) for i in range(p)]


def plan_of(root, ops):
    return parse_request({"operations": ops}, root)


def mapped(root, ops, extra=()):
    plan = plan_of(root, ops)
    impls = [c() for c in REAL + tuple(extra)]
    p = compile_plan(plan, impls, op_paths=plan.op_paths)
    return [(n.implementation, n.ops) for n in p.ncas], p


def ntf(plan, op, transport="tcp"):
    return StreamSpec(NTF, transport, generate_ntf(plan.schemas[op]))


# ------------------------------------------------------------------ registry


def test_plugins_are_registered_by_entry_point():
    reg = load_registry(["software.shuffle", "software.ntf_filter_project"], strict=True)
    assert sorted(reg.implementations) == ["software.ntf_filter_project", "software.shuffle"]
    assert "shuffle" in reg.get("software.shuffle").capabilities()["operations"]


# ------------------------------------------------------------------ shuffle NCA


def test_shuffle_takes_only_a_shuffle(root):
    plan = plan_of(root, [read(), shuf("s", "r", ["a"], 2), flt("f", "r"), send("x", "f"), *sends("s", 2)])
    nca = ShuffleNca()
    assert nca.match_operations(plan, "s").value == ("s",)
    assert not nca.match_operations(plan, "f")
    assert "only 'shuffle'" in nca.match_operations(plan, "r").reason
    assert not nca.match_operations(plan, "")


def test_shuffle_inputs_and_outputs(root):
    plan = plan_of(root, [read(), shuf("s", "r", ["a", "lower(s)"], 3), flt("f", "r"), send("x", "f"),
                          *sends("s", 3)])
    nca = ShuffleNca()
    spec = ntf(plan, "r")
    assert nca.match_input(plan, ("s",), (spec,))
    assert "reads NTF over tcp" in nca.match_input(plan, ("s",), (ntf(plan, "r", "udp"),)).reason
    assert not nca.match_input(plan, ("s",), (StreamSpec("json", FILE),))
    assert not nca.match_input(plan, ("s",), (spec, spec))
    custom = NtfLayout(8, 16, False, (NtfField("a", INT64, 8, 8, 0),))  # not r's contract layout
    assert "custom layout" in nca.match_input(plan, ("s",), (StreamSpec(NTF, "tcp", custom),)).reason
    outs = nca.match_output(plan, ("s",), (spec,), (None, "tcp", None)).value
    assert len(outs) == 3 and all(o.spec == spec and o.streams is None for o in outs)  # the input's layout
    assert "not udp" in nca.match_output(plan, ("s",), (spec,), ("udp", None, None)).reason
    assert nca.resources(plan, ("s",)).cores == 1


# ------------------------------------------------------------------ NTF filter/project NCA


def test_ntf_filter_project_chains(root):
    ops = [read(), flt("f1", "r"), proj("p1", "f1", [("u", "upper(s)"), ("a", "a")]), shuf("s", "p1", ["u"], 2),
           proj("p2", "r", [("a", "a")]), send("y", "p2"), *sends("s", 2)]
    plan = plan_of(root, ops)
    nca = NtfFilterProjectNca()
    assert nca.match_operations(plan, "f1").value == ("f1", "p1", "s")  # a trailing shuffle fuses
    assert nca.match_operations(plan, "p2").value == ("p2",)
    assert "not 'read'" in nca.match_operations(plan, "r").reason
    assert "not 'shuffle'" in nca.match_operations(plan, "s").reason
    assert nca.match_input(plan, ("f1", "p1", "s"), (ntf(plan, "r"),))
    outs = nca.match_output(plan, ("f1", "p1", "s"), (ntf(plan, "r"),), (None, None)).value
    assert len(outs) == 2 and outs[0].spec.layout == generate_ntf(plan.schemas["p1"])
    assert len(nca.match_output(plan, ("p2",), (ntf(plan, "r"),), ("tcp",)).value) == 1


def test_ntf_filter_project_stops_at_a_fan_out(root):
    ops = [read(), flt("f", "r"), proj("p", "f", [("a", "a")]), flt("g", "f", "a < 5"), send("x", "p"),
           send("y", "g")]
    plan = plan_of(root, ops)
    assert NtfFilterProjectNca().match_operations(plan, "f").value == ("f",)


# ------------------------------------------------------------------ the JSON scan's fused shuffle


def test_scan_fuses_a_final_shuffle(root):
    plan = plan_of(root, [read(), flt("f", "r"), shuf("s", "f", ["s", "a"], 3), *sends("s", 3)])
    scan = JsonScanNca()
    ops = scan.match_operations(plan, "r").value
    assert ops == ("r", "f", "s")
    outs = scan.match_output(plan, ops, (StreamSpec("json", FILE),), (None, None, None)).value
    assert len(outs) == 3 and {o.spec.layout for o in outs} == {generate_ntf(plan.schemas["f"])}
    assert not scan.match_output(plan, ops, (StreamSpec("json", FILE),), ("tcp", "udp", None))


def test_scan_stops_after_the_shuffle(root):
    """A shuffle with one output read by a filter: the shuffle ends the scan's chain."""
    plan = plan_of(root, [read(), shuf("s", "r", ["a"], 1), flt("f", "s[0]"), send("x", "f")])
    assert JsonScanNca().match_operations(plan, "r").value == ("r", "s")


# ------------------------------------------------------------------ mapping with the real plugins


def test_fused_scan_is_preferred(root):
    graph, p = mapped(root, [read(), flt("f", "r"), proj("p", "f", [("a", "a")]), send("x", "p")])
    assert graph == [("software.scan_json", ("r", "f", "p"))]
    verdicts = {v.implementation: v for v in p.decisions["r"].verdicts}
    assert verdicts["software.scan_json"].chosen
    assert not verdicts["software.ntf_filter_project"].ok and not verdicts["software.shuffle"].ok


def test_scan_filter_shuffle_is_one_nca(root):
    graph, p = mapped(root, [read(), flt("f", "r"), shuf("s", "f", ["a"], 2), *sends("s", 2)])
    assert graph == [("software.scan_json", ("r", "f", "s"))]
    assert sorted(p.outputs) == ["o0", "o1"]
    assert [e.producer_port for e in p.edges] == [0, 1]


def test_fan_out_uses_ntf_filter_project_per_branch(root):
    graph, p = mapped(root, [read(), flt("f1", "r", "a > 0"), proj("p1", "f1", [("s", "s")]),
                             flt("f2", "r", "a <= 0"), send("x", "p1"), send("y", "f2")])
    assert graph == [("software.scan_json", ("r",)), ("software.ntf_filter_project", ("f1", "p1")),
                     ("software.ntf_filter_project", ("f2",))]
    scan_out = [e for e in p.edges if e.producer == "nca0"]
    assert len(scan_out) == 2 and {e.producer_port for e in scan_out} == {0}  # one port, two destinations
    assert p.stages == [["nca0", "nca1", "nca2"]]


def test_fan_out_to_a_shuffle_uses_the_shuffle_nca(root):
    graph, _ = mapped(root, [read(), shuf("s", "r", ["a"], 2), flt("f", "r"), send("x", "f"), *sends("s", 2)])
    assert ("software.shuffle", ("s",)) in graph
    assert ("software.ntf_filter_project", ("f",)) in graph


def test_fan_out_filter_then_shuffle_fuses(root):
    graph, _ = mapped(root, [read(), flt("f", "r"), shuf("s", "f", ["a"], 2), flt("g", "r"), send("x", "g"),
                             *sends("s", 2)])
    assert ("software.ntf_filter_project", ("f", "s")) in graph


def test_project_after_another_ncas_aggregate(root):
    """The read also feeds a send, so the scan cannot fuse the aggregate; an aggregation NCA that
    does not fuse projections (a fake here) leaves the projection to the NTF NCA."""
    ops = [read(), {"kind": "aggregate", "name": "g", "input": "r", "group_by": [{"name": "s", "expr": "s"}],
                    "aggregates": [{"name": "n", "fn": "count_star"}]},
           proj("p", "g", [("s2", "upper(s)"), ("n", "n * 2")]), send("x", "p"), send("y", "r")]
    graph, _ = mapped(root, ops, extra=(FakeSoftAgg,))
    assert graph == [("software.scan_json", ("r",)), ("fake.soft_agg", ("g",)),
                     ("software.ntf_filter_project", ("p",))]


def test_shuffle_after_another_ncas_join(root):
    ops = [read("r1"), read("r2"),
           {"kind": "join", "name": "j", "build": "r1", "probe": "r2", "build_keys": ["a"], "probe_keys": ["a"],
            "type": "left_semi"},
           shuf("s", "j", ["s"], 2), *sends("s", 2)]
    graph, _ = mapped(root, ops, extra=(FakeJoin,))
    assert graph == [("software.scan_json", ("r1",)), ("software.scan_json", ("r2",)), ("fake.join", ("j",)),
                     ("software.shuffle", ("s",))]


def test_no_nca_for_a_csv_read(root):
    from jumpgate.contract.errors import MappingError

    with pytest.raises(MappingError) as info:
        mapped(root, [read(fmt="csv"), flt("f", "r"), send("x", "f")])
    assert "software.ntf_filter_project" in str(info.value)


# ------------------------------------------------------------------ generated code


def test_filter_only_chain_forwards_raw_tuples(root):
    plan = plan_of(root, [read(), flt("f", "r"), flt("g", "r"), send("x", "f"), send("y", "g")])
    layout = generate_ntf(plan.schemas["r"])
    src = generate_relay_query([plan.op("f")], plan.schemas["r"], layout, layout)
    assert "jg_input_tuple" in src and "jg_hash" not in src and ".noutputs = 1" in src


def test_shuffle_forwards_and_reencodes(root):
    plan = plan_of(root, [read(), shuf("s", "r", ["lower(s)", "a"], 3), proj("p", "r", [("a", "a")]),
                          shuf("t", "p", ["a"], 2), send("x", "t[0]"), send("y", "t[1]"), *sends("s", 3)])
    layout = generate_ntf(plan.schemas["r"])
    src = generate_relay_query([plan.op("s")], plan.schemas["r"], layout, layout)
    assert '#include "jg_hash.h"' in src and "% UINT64_C(3)" in src and "jg_input_tuple" in src
    assert "jg_lower" in src and ".noutputs = 3" in src
    src = generate_relay_query([plan.op("p"), plan.op("t")], plan.schemas["r"], layout,
                               generate_ntf(plan.schemas["p"]))
    assert "jg_input_tuple" not in src and "jg_emit(jg_output(ctx, p" in src  # a projection re-encodes
    with pytest.raises(CodegenError, match="contract"):
        generate_relay_query([plan.op("s")], plan.schemas["r"],
                             NtfLayout(8, 16, False, (NtfField("a", INT64, 8, 8, 0),)), layout)


def test_scan_shuffle_query(root):
    plan = plan_of(root, [read(), flt("f", "r", "x > 0.5"), shuf("s", "f", ["d", "dt", "x"], 4), *sends("s", 4)])
    src = generate_scan_shuffle_query([plan.op(n) for n in ("r", "f", "s")], generate_ntf(plan.schemas["s"]))
    assert ".noutputs = 4" in src and "jg_hash_float" in src and src.count("jg_hash_int") == 2
    with pytest.raises(CodegenError):
        generate_scan_shuffle_query([plan.op("r"), plan.op("f")], generate_ntf(plan.schemas["f"]))


def test_contract_layout_check(root):
    plan = plan_of(root, [read(), send("x", "r")])
    schema = plan.schemas["r"]
    assert is_contract_layout(generate_ntf(schema), schema)
    renamed = generate_ntf(schema)
    assert not is_contract_layout(NtfLayout(renamed.null_bytes, renamed.fixed_size + 8, True, renamed.fields),
                                  schema)
