"""DISTINCT aggregates: what the request may say (dataflow/aggregates.py) and the plan the compiler
runs instead (compiler/distinct.py). Answers are checked against DuckDB in tests/e2e/test_distinct.py."""
from __future__ import annotations

import pytest

from jumpgate.compiler.distinct import expand_distinct, has_distinct
from jumpgate.contract.errors import RequestError
from jumpgate.dataflow.plan import AggFn, Aggregate, Project
from jumpgate.dataflow.request import parse_request

SCHEMA = [{"name": "k", "type": "int32"}, {"name": "x", "type": "int64"}, {"name": "y", "type": "decimal(10,2)"}]


def plan_of(aggregates, group_by=("k",), mode="complete", tmp=None):
    ops = [{"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": SCHEMA},
           {"kind": "aggregate", "name": "g", "input": "r", "mode": mode,
            "group_by": [{"name": g, "expr": g} for g in group_by],
            "aggregates": [{"name": n, "fn": f, **({"expr": e} if e else {})} for n, f, e in aggregates]},
           {"kind": "send", "name": "o", "input": "g", "transport": "tcp", "host": "127.0.0.1", "port": 1}]
    return parse_request({"operations": ops}, tmp)


@pytest.fixture
def root(tmp_path):
    (tmp_path / "t.jsonl").write_text("")
    return tmp_path


def test_distinct_is_parsed_case_blind_and_marked(root):
    plan = plan_of([("n", "count", "DISTINCT x"), ("s", "sum", "  distinct(x)"), ("c", "count", "x")], tmp=root)
    calls = plan.op("g").aggregates
    assert [c.distinct for c in calls] == [True, True, False]
    assert calls[0].expr == calls[1].expr == calls[2].expr
    assert has_distinct(plan)


def test_a_plan_without_distinct_is_left_alone(root):
    plan = plan_of([("c", "count", "x")], tmp=root)
    assert expand_distinct(plan, plan.op_paths) == (plan, plan.op_paths)


def test_distinct_alone_becomes_two_aggregations(root):
    plan = plan_of([("n", "count", "DISTINCT x"), ("m", "max", "y")], tmp=root)
    out, paths = expand_distinct(plan, dict(plan.op_paths))
    assert [(op.kind, op.name) for op in out.ops] == [("read", "r"), ("aggregate", "g__distinct"),
                                                     ("aggregate", "g"), ("send", "o")]
    inner, outer = out.op("g__distinct"), out.op("g")
    assert [g.name for g in inner.group_by] == ["k", "distinct_value"]
    assert [(c.name, c.fn) for c in inner.aggregates] == [("m", AggFn.MAX)]
    assert [(c.name, c.fn, c.distinct) for c in outer.aggregates] == [("n", AggFn.COUNT, False), ("m", AggFn.MAX, False)]
    assert out.schemas["g"] == plan.schemas["g"]
    assert paths["g__distinct"] == paths["g"] == "operations[1]" and out.op_paths["g__distinct"] == "operations[1]"
    assert not has_distinct(out)


def test_averages_and_global_counts_are_finished_by_a_projection(root):
    plan = plan_of([("a", "avg", "y"), ("n", "count", "DISTINCT x"), ("c", "count_star", None)], group_by=(),
                   tmp=root)
    out, _ = expand_distinct(plan)
    assert [op.name for op in out.ops if isinstance(op, (Aggregate, Project))] == ["g__distinct", "g__merge", "g"]
    assert [c.name for c in out.op("g__distinct").aggregates] == ["a__sum", "a__count", "c"]
    assert out.schemas["g"] == plan.schemas["g"]


def test_names_the_rewrite_needs_never_clash(root):
    plan = plan_of([("distinct_value", "count", "DISTINCT x"), ("a", "avg", "y"), ("a__sum", "sum", "x")],
                   tmp=root)
    out, _ = expand_distinct(plan)
    inner = out.schemas["g__distinct"]
    assert len(set(inner.names)) == len(inner.names)
    assert out.schemas["g"] == plan.schemas["g"]


@pytest.mark.parametrize("aggregates,mode,message", [
    ([("n", "count", "DISTINCT x")], "partial", "count(DISTINCT …) is not supported in partial mode"),
    ([("n", "sum", "DISTINCT x")], "final", "sum(DISTINCT …) is not supported in final mode"),
    ([("n", "count", "DISTINCT x"), ("m", "avg", "DISTINCT y")], "complete",
     "avg(DISTINCT …) over a second expression is not supported"),
    ([("n", "count_star", "DISTINCT x")], "complete", "count_star takes no DISTINCT"),
])
def test_what_is_not_supported_is_rejected_by_name(root, aggregates, mode, message):
    with pytest.raises(RequestError) as e:
        plan_of(aggregates, mode=mode, tmp=root)
    assert message in e.value.message
    assert e.value.path == f"operations[1].aggregates[{len(aggregates) - 1}].expr"
