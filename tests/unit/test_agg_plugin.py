"""The aggregation NCA's operator interface and life-cycle settings, the scan's fusion of a
trailing aggregate, and how the real registry maps plans with aggregates (fused graphs win)."""
from __future__ import annotations

import pytest

from jumpgate.compiler.compile import compile_plan
from jumpgate.contract.ntf import generate_ntf
from jumpgate.dataflow.request import parse_request
from jumpgate.nca.interface import FILE, NTF, InstanceContext, NcaError, StreamSpec
from jumpgate.nca.registry import load_registry
from jumpgate.ncas.software.aggregate import AggregateInstance, AggregateNca
from jumpgate.ncas.software.common import DEFAULT_TABLE_BYTES, TABLE_BYTES_ENV
from jumpgate.ncas.software.scan_json import JsonScanInstance, JsonScanNca

SCHEMA = [{"name": "k", "type": "int64"}, {"name": "s", "type": "string"}, {"name": "d", "type": "decimal(10,2)"}]


def read(name="r"):
    return {"kind": "read", "name": name, "path": "t.jsonl", "format": "json", "schema": SCHEMA}


def agg(name, input, mode="complete", final=False):
    aggs = [{"name": "n", "fn": "count_star"}, {"name": "total", "fn": "sum", **({} if final else {"expr": "d"})},
            {"name": "mean", "fn": "avg", **({} if final else {"expr": "d"})}]
    return {"kind": "aggregate", "name": name, "input": input, "mode": mode,
            "group_by": [{"name": "k", **({} if final else {"expr": "k"})}], "aggregates": aggs}


def send(input):
    return {"kind": "send", "name": "out", "input": input, "transport": "tcp", "host": "127.0.0.1", "port": 9}


@pytest.fixture
def root(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"k": 1, "s": "a", "d": 1.5}\n')
    return tmp_path


def plan_of(root, *ops):
    return parse_request({"operations": list(ops)}, root)


def ntf_input(plan, op):
    return StreamSpec(NTF, "tcp", generate_ntf(plan.input_schema(plan.op(op).input)))


# ------------------------------------------------------------------ operator interface


def test_takes_an_aggregate_and_its_filters_and_projections(root):
    plan = plan_of(root, read(), agg("a", "r"), {"kind": "filter", "name": "h", "input": "a", "condition": "n > 1"},
                   {"kind": "project", "name": "p", "input": "h", "columns": [{"name": "k", "expr": "k"}]},
                   send("p"))
    nca = AggregateNca()
    assert nca.match_operations(plan, "a").value == ("a", "h", "p")
    v = nca.match_operations(plan, "h")
    assert not v and "aggregate" in v.reason
    assert not nca.match_operations(plan, "")
    assert nca.operation_kinds == ("aggregate", "filter", "project")


def test_input_is_contract_ntf_over_tcp(root):
    plan = plan_of(root, read(), agg("a", "r"), send("a"))
    nca = AggregateNca()
    assert nca.match_input(plan, ("a",), (ntf_input(plan, "a"),))
    assert not nca.match_input(plan, ("a",), (StreamSpec("json", FILE),))
    other = StreamSpec(NTF, "tcp", generate_ntf(plan.schemas["a"]))  # a layout of another schema
    assert not nca.match_input(plan, ("a",), (other,))


def test_output_is_ntf_of_the_last_operation_one_stream_per_thread(root):
    plan = plan_of(root, read(), agg("a", "r", mode="partial"), send("a"))
    nca = AggregateNca()
    [out] = nca.match_output(plan, ("a",), (ntf_input(plan, "a"),), ("tcp",)).value
    assert out.spec.layout == generate_ntf(plan.schemas["a"])
    assert [f.name for f in out.spec.layout.fields] == ["k", "n", "total", "mean__sum", "mean__count"]
    assert out.streams is None
    [udp] = nca.match_output(plan, ("a",), (ntf_input(plan, "a"),), ("udp",)).value  # docs/udp-transport.md
    assert udp.spec.transport == "udp" and udp.spec.layout == out.spec.layout
    assert not nca.match_output(plan, ("a",), (ntf_input(plan, "a"),), ("sctp",))
    res = nca.resources(plan, ("a",))
    assert res.cores == 1 and res.max_cores > 1


def test_scan_fuses_a_trailing_aggregate_in_any_mode_and_its_having(root):
    scan = JsonScanNca()
    for mode in ("partial", "complete"):
        plan = plan_of(root, read(), {"kind": "filter", "name": "w", "input": "r", "condition": "k > 0"},
                       agg("a", "w", mode=mode), {"kind": "filter", "name": "h", "input": "a", "condition": "n > 1"},
                       send("h"))
        assert scan.match_operations(plan, "r").value == ("r", "w", "a", "h")
    plan = plan_of(root, read(), agg("a", "r", mode="partial"), agg("f", "a", mode="final", final=True), send("f"))
    assert scan.match_operations(plan, "r").value == ("r", "a")  # one aggregate, not a second one
    assert "aggregate" in scan.operation_kinds


# ------------------------------------------------------------------ mapping with the real registry


def mapped(plan):
    pipeline = compile_plan(plan, load_registry().all(), thread_budget=2)
    return [(n.implementation, n.ops) for n in pipeline.ncas], pipeline


def test_read_filter_partial_aggregate_is_one_nca(root):
    plan = plan_of(root, read(), {"kind": "filter", "name": "w", "input": "r", "condition": "k > 0"},
                   agg("a", "w", mode="partial"), send("a"))
    ncas, _ = mapped(plan)
    assert ncas == [("software.scan_json", ("r", "w", "a"))]


def test_partial_then_final_is_two_ncas(root):
    plan = plan_of(root, read(), agg("a", "r", mode="partial"), agg("f", "a", mode="final", final=True), send("f"))
    ncas, pipeline = mapped(plan)
    assert ncas == [("software.scan_json", ("r", "a")), ("software.aggregate", ("f",))]
    [edge] = [e for e in pipeline.edges if e.consumer == "nca1"]
    assert edge.spec.layout == generate_ntf(plan.schemas["a"])


def test_aggregate_after_a_fan_out_gets_its_own_nca_with_its_having(root):
    """A read with two consumers cannot fuse either; each aggregate (with its HAVING filter and
    projection) runs on the aggregation NCA."""
    plan = plan_of(root, read(), agg("a", "r"), agg("b", "r", mode="partial"),
                   {"kind": "filter", "name": "h", "input": "a", "condition": "total > 0"},
                   {"kind": "project", "name": "p", "input": "h", "columns": [{"name": "k", "expr": "k"}]},
                   send("p"), {**send("b"), "name": "out2", "port": 10})
    ncas, _ = mapped(plan)
    assert ("software.aggregate", ("a", "h", "p")) in ncas and ("software.aggregate", ("b",)) in ncas
    assert ("software.scan_json", ("r",)) in ncas


# ------------------------------------------------------------------ instances


def instance(root, tmp_path, plan, settings=None):
    ncas, pipeline = mapped(plan)
    context = InstanceContext(deployer=None, work_dir=str(tmp_path), cache_dir=str(tmp_path), settings=settings or {})
    reg = load_registry()
    return [reg.get(n.implementation).instantiate(pipeline.build_spec(n), context) for n in pipeline.ncas]


def test_partial_table_bound_default_settings_and_environment(root, tmp_path, monkeypatch):
    plan = plan_of(root, read(), agg("a", "r", mode="partial"), agg("f", "a", mode="final", final=True), send("f"))
    monkeypatch.delenv(TABLE_BYTES_ENV, raising=False)
    scan, final = instance(root, tmp_path, plan)
    assert isinstance(scan, JsonScanInstance) and isinstance(final, AggregateInstance)
    assert scan.params() == {"agg.table_bytes": str(DEFAULT_TABLE_BYTES)} and DEFAULT_TABLE_BYTES == 8 << 20
    assert final.params() == {}  # final and complete grow without bound
    monkeypatch.setenv(TABLE_BYTES_ENV, "4096")
    assert scan.params() == {"agg.table_bytes": "4096"}
    scan, _ = instance(root, tmp_path, plan, settings={"agg.table_bytes": 65536})
    assert scan.params() == {"agg.table_bytes": "65536"}
    scan, _ = instance(root, tmp_path, plan, settings={"agg.table_bytes": 100})
    with pytest.raises(NcaError, match="at least 1024"):
        scan.params()


def test_generated_sources_use_the_aggregation_table(root, tmp_path):
    plan = plan_of(root, read(), agg("a", "r", mode="partial"), agg("f", "a", mode="final", final=True), send("f"))
    scan, final = instance(root, tmp_path, plan)
    assert scan.driver == "scan_json" and final.driver == "ntf_relay"
    for inst, mode in ((scan, "JG_AGG_PARTIAL"), (final, "JG_AGG_FINAL")):
        src = inst.generate_source()
        assert '#include "jg_agg.h"' in src and f".mode = {mode}," in src and ".finish = query_finish," in src
