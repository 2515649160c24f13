"""Which side of a left outer join is built (jumpgate/compiler/join_sides.py): the size estimates,
when the compiler swaps the join into a right outer join, and that the swapped join reads the same
columns. Answers of swapped joins against DuckDB are in tests/e2e/test_join.py; the driver's
right_outer rows in tests/unit/test_join_runtime.py."""
from __future__ import annotations

import pytest

from jumpgate.compiler.compile import compile_plan
from jumpgate.compiler.join_sides import build_smaller_outer_side, estimate_bytes
from jumpgate.dataflow.expr import Column, columns_used
from jumpgate.dataflow.plan import Join, JoinType
from jumpgate.dataflow.request import parse_request
from jumpgate.ncas.software.hash_join import HashJoinNca
from jumpgate.ncas.software.scan_json import JsonScanNca

SMALL = [{"name": "sk", "type": "int64"}, {"name": "sv", "type": "string"}]
LARGE = [{"name": "lk", "type": "int64"}, {"name": "lv", "type": "int32"}, {"name": "lw", "type": "string"}]


def plan_of(tmp_path, ops: list[dict], sizes: dict[str, int], outputs: tuple[str, ...] = ()):
    """A plan over JSON files of the given sizes in bytes (their content is never read), sending
    `outputs` (default: the last operation)."""
    for name, size in sizes.items():
        (tmp_path / f"{name}.jsonl").write_bytes(b"{}\n".ljust(size, b" "))
    ops = ops + [{"kind": "send", "name": f"out{i}", "input": name, "transport": "tcp", "host": "127.0.0.1",
                  "port": 9} for i, name in enumerate(outputs or (ops[-1]["name"],))]
    return parse_request({"name": "t", "operations": ops}, tmp_path)


def read(name: str, schema: list[dict]) -> dict:
    return {"kind": "read", "name": name, "path": f"{name}.jsonl", "format": "json", "schema": schema}


def left_outer(build: str, probe: str, bk: str, pk: str, **extra) -> dict:
    return {"kind": "join", "name": "j", "build": build, "probe": probe, "build_keys": [bk],
            "probe_keys": [pk], "type": "left_outer", **extra}


def the_join(plan) -> Join:
    [j] = [o for o in plan.ops if isinstance(o, Join)]
    return j


def test_estimates_follow_the_operations(tmp_path):
    plan = plan_of(tmp_path, [
        read("l", LARGE), {"kind": "filter", "name": "f", "input": "l", "condition": "lv > 0"},
        {"kind": "aggregate", "name": "a", "input": "f", "group_by": [{"name": "lk", "expr": "lk"}],
         "aggregates": [{"name": "n", "fn": "count_star"}]},
        {"kind": "aggregate", "name": "total", "input": "l", "group_by": [],
         "aggregates": [{"name": "n", "fn": "count_star"}]}],
        {"l": 8000}, outputs=("a", "total"))
    sizes = estimate_bytes(plan)
    assert sizes["l"] == 8000 and sizes["f"] == 4000 and sizes["a"] == 1000
    assert sizes["total"] == 0


def test_a_left_outer_join_keeping_the_small_side_is_swapped(tmp_path):
    plan = plan_of(tmp_path, [read("s", SMALL), read("l", LARGE),
                              left_outer("l", "s", "lk", "sk", condition="lv > length(sv)")],
                   {"s": 1000, "l": 50_000})
    new, why = build_smaller_outer_side(plan)
    j = the_join(new)
    assert (j.type, j.build.op, j.probe.op) == (JoinType.RIGHT_OUTER, "s", "l")
    assert [str(k) for k in j.build_keys] == [str(k) for k in the_join(plan).probe_keys]
    assert "preserved side 's'" in why["j"] and "run as right_outer" in why["j"]
    # the joined row is now l's 3 columns then s's 2: sk (was 0) is 3, lv (was 3) is 1
    assert [(c.name, c.expr.index) for c in j.columns if isinstance(c.expr, Column)] == [
        ("sk", 3), ("sv", 4), ("lk", 0), ("lv", 1), ("lw", 2)]
    assert columns_used(j.condition) == {1, 4}
    assert new.schemas == plan.schemas  # every operation's output is unchanged


def test_explicit_columns_are_read_from_the_swapped_row(tmp_path):
    cols = [{"name": "x", "expr": "lv + 1"}, {"name": "y", "expr": "sv"}]
    plan = plan_of(tmp_path, [read("s", SMALL), read("l", LARGE), left_outer("l", "s", "lk", "sk", columns=cols)],
                   {"s": 1000, "l": 50_000})
    j = the_join(build_smaller_outer_side(plan)[0])
    assert [c.name for c in j.columns] == ["x", "y"]
    assert [columns_used(c.expr) for c in j.columns] == [{1}, {4}]


@pytest.mark.parametrize("sizes", [{"s": 50_000, "l": 1000}, {"s": 1000, "l": 1000}], ids=["smaller build", "equal"])
def test_a_left_outer_join_whose_build_side_is_not_larger_is_left_alone(tmp_path, sizes):
    plan = plan_of(tmp_path, [read("s", SMALL), read("l", LARGE), left_outer("l", "s", "lk", "sk")], sizes)
    new, why = build_smaller_outer_side(plan)
    assert new is plan and why == {}


def test_a_filter_counts_half(tmp_path):
    """l is 3x s, but filtered it is estimated at 1.5x: still swapped; filtered twice, at 0.75x: not."""
    def swapped(filters: int) -> bool:
        ops = [read("s", SMALL), read("l", LARGE)]
        prev = "l"
        for i in range(filters):
            ops.append({"kind": "filter", "name": f"f{i}", "input": prev, "condition": "lv > 0"})
            prev = f"f{i}"
        plan = plan_of(tmp_path, ops + [left_outer(prev, "s", "lk", "sk")], {"s": 1000, "l": 3000})
        return bool(build_smaller_outer_side(plan)[1])
    assert swapped(1) and not swapped(2)


@pytest.mark.parametrize("jtype", ["inner", "left_semi", "left_anti"])
def test_other_join_types_keep_the_sides_the_request_gave(tmp_path, jtype):
    plan = plan_of(tmp_path, [read("s", SMALL), read("l", LARGE), left_outer("l", "s", "lk", "sk", type=jtype)],
                   {"s": 1000, "l": 50_000})
    assert build_smaller_outer_side(plan)[0] is plan


def test_a_request_cannot_name_right_outer(tmp_path):
    from jumpgate.contract.errors import RequestError
    with pytest.raises(RequestError, match="'type' must be one of inner, left_semi, left_anti, left_outer"):
        plan_of(tmp_path, [read("s", SMALL), read("l", LARGE), left_outer("l", "s", "lk", "sk", type="right_outer")],
                {"s": 10, "l": 10})


def test_the_compiled_pipeline_builds_the_kept_side_first(tmp_path):
    plan = plan_of(tmp_path, [read("s", SMALL), read("l", LARGE), left_outer("l", "s", "lk", "sk")],
                   {"s": 1000, "l": 50_000})
    pipeline = compile_plan(plan, [JsonScanNca(), HashJoinNca()])
    assert pipeline.op_stages["s"] == (0,) and pipeline.op_stages["l"] == (1,)
    assert "run as right_outer" in pipeline.decisions["j"].note
    assert [f.join for f in pipeline.runtime_filters] == ["j"]  # s's keys filter l's scan


def test_a_condition_nested_to_the_request_limit_is_swapped(tmp_path):
    """Swapping re-reads every column of the condition: a tree as deep as a request may nest."""
    depth = 95  # each "(... + 1)" is two levels: about 195 of the 200 a request may have
    cond = "lv" + " + 1)" * depth
    cond = "(" * depth + cond + " > length(sv)"
    plan = plan_of(tmp_path, [read("s", SMALL), read("l", LARGE), left_outer("l", "s", "lk", "sk", condition=cond)],
                   {"s": 1000, "l": 50_000})
    j = the_join(build_smaller_outer_side(plan)[0])
    assert j.type is JoinType.RIGHT_OUTER and columns_used(j.condition) == {1, 4}
    compile_plan(plan, [JsonScanNca(), HashJoinNca()])
