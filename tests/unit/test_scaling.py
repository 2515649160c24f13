"""Internal scaling: the control plane picks thread counts within a per-stage core budget, and
output streams left to it follow the thread count (thesis §3.4)."""
from __future__ import annotations

from jumpgate.compiler.compile import compile_plan
from jumpgate.nca.interface import OutputSpec, ResourceRequest, Verdict
from jumpgate.runtime.service import stage_cores
from tests.unit.fake_ncas import FakeJsonScan, FakeSoftAgg, PlanBuilder, fakes


class ScalingScan(FakeJsonScan):
    """A scan that may use up to 8 threads, one output stream per thread."""

    name = "fake.scan_json_scaling"
    description = "JSON scan scaling to 8 threads"

    def match_output(self, plan, ops, inputs, wanted):
        v = super().match_output(plan, ops, inputs, wanted)
        return Verdict.yes(tuple(OutputSpec(o.spec, streams=None) for o in v.value))

    def resources(self, plan, ops):
        return ResourceRequest(cores=1, max_cores=8)


class ScalingAgg(FakeSoftAgg):
    name = "fake.agg_scaling"
    description = "aggregation scaling to 4 threads, merging into one output stream"

    def resources(self, plan, ops):
        return ResourceRequest(cores=1, max_cores=4)


def scan_plan():
    return PlanBuilder().read("r").filter("f", "r").send("out", "f").build()


def test_one_nca_gets_the_whole_budget_and_one_stream_per_thread():
    p = compile_plan(scan_plan(), fakes(ScalingScan), thread_budget=6)
    assert p.node("nca0").resources.cores == 6
    assert p.outputs["out"].expected_streams == 6
    assert p.build_spec("nca0").resources.cores == 6


def test_budget_is_capped_by_what_the_nca_can_use():
    p = compile_plan(scan_plan(), fakes(ScalingScan), thread_budget=64)
    assert p.node("nca0").resources.cores == 8


def test_no_budget_means_the_minimum():
    p = compile_plan(scan_plan(), fakes(ScalingScan), thread_budget=1)
    assert p.node("nca0").resources.cores == 1
    assert p.outputs["out"].expected_streams == 1


def test_spare_cores_go_to_the_parser_first_and_streams_follow():
    plan = (PlanBuilder().read("r").aggregate("g", "r", ["a"], [("s", "sum", "b")], "complete")
            .send("out", "g").build())
    p = compile_plan(plan, fakes(ScalingScan, ScalingAgg), thread_budget=3)
    scan, agg = p.node("nca0"), p.node("nca1")
    # the aggregation's first thread, fed by the scan, is not charged: the scan gets the budget
    assert (scan.resources.cores, agg.resources.cores) == (3, 1)
    assert p.build_spec("nca1").inputs[0].expected_streams == 3
    assert p.outputs["out"].expected_streams == 1  # the aggregation declares one output stream
    p = compile_plan(plan, fakes(ScalingScan, ScalingAgg), thread_budget=10)  # the scan's 8, then the rest
    assert (p.node("nca0").resources.cores, p.node("nca1").resources.cores) == (8, 3)


def test_waiting_consumers_leave_the_cores_to_the_file_reader():
    """A 2-core budget with a scan and the aggregation it feeds: the scan gets both cores (before,
    the aggregation's thread was charged as a full core and the scan kept one)."""
    plan = (PlanBuilder().read("r").aggregate("g", "r", ["a"], [("s", "sum", "b")], "complete")
            .send("out", "g").build())
    p = compile_plan(plan, fakes(ScalingScan, ScalingAgg), thread_budget=2)
    assert (p.node("nca0").resources.cores, p.node("nca1").resources.cores) == (2, 1)
    # the cores the job reserves count the scan's threads, not the waiting aggregation's first one
    assert stage_cores(p) == [2]
    p = compile_plan(plan, fakes(ScalingScan, ScalingAgg), thread_budget=1)
    assert (p.node("nca0").resources.cores, p.node("nca1").resources.cores) == (1, 1)
    assert stage_cores(p) == [1]


def test_consumer_gets_no_more_threads_than_streams_arriving():
    class OneStreamScan(ScalingScan):
        name = "fake.scan_one_thread"

        def resources(self, plan, ops):
            return ResourceRequest(cores=1, max_cores=1)

    plan = (PlanBuilder().read("r").aggregate("g", "r", ["a"], [("s", "sum", "b")], "complete")
            .send("out", "g").build())
    p = compile_plan(plan, fakes(OneStreamScan, ScalingAgg), thread_budget=8)
    assert (p.node("nca0").resources.cores, p.node("nca1").resources.cores) == (1, 1)
