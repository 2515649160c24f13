"""Stage computation (thesis Appendix A.1.4) on logical plans built directly from plan.py."""
from __future__ import annotations

import pytest

from jumpgate.compiler.staging import compute_stages, stage_count
from jumpgate.contract.errors import MappingError
from tests.unit.fake_ncas import PlanBuilder, running_example


def by_stage(op_stages: dict[str, tuple[int, ...]]) -> list[set[str]]:
    """Stage number -> operations running in it (a join appears in two)."""
    out: list[set[str]] = [set() for _ in range(stage_count(op_stages))]
    for op, stages in op_stages.items():
        for s in stages:
            out[s].add(op)
    return out


def test_running_example_has_two_stages():
    stages = compute_stages(running_example())
    assert by_stage(stages) == [
        {"read_stores", "project_stores", "join_sales_stores"},
        {"read_sales", "filter_sales", "project_sales", "join_sales_stores", "project_join", "agg",
         "shuffle", "host1", "host2"},
    ]
    assert stages["join_sales_stores"] == (0, 1)
    assert list(stages) == [op.name for op in running_example().ops]  # plan order


def test_stages_do_not_depend_on_plan_order():
    plan = running_example()
    reordered = PlanBuilder()
    reordered.ops = [plan.op(n) for n in ("read_stores", "project_stores", "read_sales", "filter_sales",
                                          "project_sales", "join_sales_stores", "project_join", "agg",
                                          "shuffle", "host2", "host1")]
    reordered.schemas = dict(plan.schemas)
    assert compute_stages(reordered.build()) == compute_stages(plan)


def test_single_scan_to_send_is_one_stage():
    plan = PlanBuilder().read("r").send("out", "r").build()
    assert compute_stages(plan) == {"r": (0,), "out": (0,)}


def test_independent_sends_run_together():
    pb = PlanBuilder()
    for i in range(3):
        pb.read(f"r{i}").filter(f"f{i}", f"r{i}").send(f"s{i}", f"f{i}")
    stages = compute_stages(pb.build())
    assert set(stages.values()) == {(0,)}


def test_fan_out_to_two_sends_is_one_stage():
    plan = (PlanBuilder().read("r").filter("f1", "r").filter("f2", "r")
            .send("s1", "f1").send("s2", "f2").build())
    assert set(compute_stages(plan).values()) == {(0,)}


def test_chained_joins_take_three_stages():
    """join1's output is join2's build side: join2 builds while join1 probes."""
    plan = (PlanBuilder()
            .read("a").read("b").read("c")
            .join("j1", "a", "b", "a", ["a", "b"])
            .join("j2", "j1", "c", "a", ["a"])
            .send("out", "j2").build())
    stages = compute_stages(plan)
    assert by_stage(stages) == [{"a", "j1"}, {"b", "j1", "j2"}, {"c", "j2", "out"}]
    assert stages["j1"] == (0, 1)
    assert stages["j2"] == (1, 2)


def test_join_feeding_the_probe_side_of_another_join():
    """j1's output is j2's probe side: both build first, then both probe at once."""
    plan = (PlanBuilder()
            .read("a").read("b").read("c")
            .join("j1", "a", "b", "a", ["a", "b"])
            .join("j2", "c", "j1", "a", ["a"])
            .send("out", "j2").build())
    assert by_stage(compute_stages(plan)) == [{"a", "c", "j1", "j2"}, {"b", "j1", "j2", "out"}]


def test_one_read_feeding_both_sides_of_a_join_needs_buffering():
    plan = (PlanBuilder()
            .read("r").filter("left", "r").filter("right", "r")
            .join("j", "left", "right", "a", ["a"])
            .send("out", "j").build())
    with pytest.raises(MappingError) as info:
        compute_stages(plan, op_paths={"right": "operations[2]", "r": "operations[0]"})
    err = info.value
    assert err.status == 422
    assert "without buffering" in err.message
    assert "join 'j' reads both its build side (left) and its probe side (right) from 'r'" in err.message
    assert "feeds the probe side of join 'j', which is still in its build phase" in err.message
    assert err.path == "operations[2]"  # the first operation that could not run: the probe feeder
    assert set(err.context["operations"]) == {"r", "left", "right", "j", "out"}


def test_a_self_join_on_one_operation_needs_buffering():
    plan = PlanBuilder().read("r").join("j", "r", "r", "a", ["a"]).send("out", "j").build()
    with pytest.raises(MappingError, match="reads both its build side"):
        compute_stages(plan)


def test_crossed_joins_cannot_be_staged():
    """Each read feeds one join's build and the other's probe: no order works without buffering."""
    plan = (PlanBuilder()
            .read("x").read("y")
            .join("j1", "x", "y", "a", ["a"])
            .join("j2", "y", "x", "a", ["a"])
            .send("s1", "j1").send("s2", "j2").build())
    with pytest.raises(MappingError, match="in stage 0 none of"):
        compute_stages(plan)


def test_one_producer_may_feed_two_build_sides():
    plan = (PlanBuilder()
            .read("a").read("b")
            .join("j", "a", "b", "a", ["a"])
            .filter("late", "a")
            .join("j2", "late", "j", "a", ["a"])
            .send("out", "j2").build())
    assert by_stage(compute_stages(plan)) == [{"a", "late", "j", "j2"}, {"b", "j", "j2", "out"}]


def test_a_producer_feeding_a_build_and_a_later_probe_needs_buffering():
    """`a` feeds j's build (stage 0) and j2's probe, which can only run after j2 builds from j's
    output (stage 1): `a` would have to run twice."""
    plan = (PlanBuilder()
            .read("a").read("b")
            .join("j", "a", "b", "a", ["a"])
            .join("j2", "j", "a", "a", ["a"])
            .send("out", "j2").build())
    with pytest.raises(MappingError) as info:
        compute_stages(plan)
    assert "reads both its build side (j) and its probe side (a) from 'a'" in info.value.message
