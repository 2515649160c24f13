"""Planning runtime filters (jumpgate/compiler/runtime_filters.py, docs/runtime-filters.md): which
hash joins get a filter from their build side to the scan feeding their probe side, which must
not, and how the plan shows it (the compile answer, the NCAs' specs, the generated scan)."""
from __future__ import annotations

import pytest

from jumpgate.compiler.compile import compile_plan
from jumpgate.compiler.runtime_filters import plan_runtime_filters
from jumpgate.dataflow.request import parse_request
from jumpgate.nca.interface import NcaError, RuntimeFilterBlob
from jumpgate.ncas.software.aggregate import AggregateNca
from jumpgate.ncas.software.hash_join import HashJoinInstance, HashJoinNca
from jumpgate.ncas.software.ntf_filter_project import NtfFilterProjectNca
from jumpgate.ncas.software.scan_json import JsonScanNca

B = [{"name": "bk", "type": "int64"}, {"name": "bs", "type": "string"}]
P = [{"name": "pk", "type": "int64"}, {"name": "ps", "type": "string"}, {"name": "pv", "type": "int32"}]
IMPLS = [JsonScanNca(), HashJoinNca(), AggregateNca(), NtfFilterProjectNca()]


def read(name: str, schema: list[dict]) -> dict:
    return {"kind": "read", "name": name, "path": f"{name}.jsonl", "format": "json", "schema": schema}


def join(name: str, build: str, probe: str, bk=("bk",), pk=("pk",), **extra) -> dict:
    return {"kind": "join", "name": name, "build": build, "probe": probe, "build_keys": list(bk),
            "probe_keys": list(pk), **extra}


def send(name: str, input: str) -> dict:
    return {"kind": "send", "name": name, "input": input, "transport": "tcp", "host": "127.0.0.1", "port": 9}


def plan_of(tmp_path, *ops: dict):
    ops = list(ops)
    if not any(o["kind"] == "send" for o in ops):
        ops.append(send("out", ops[-1]["name"]))
    for op in ops:
        if op["kind"] == "read":
            (tmp_path / op["path"]).write_text("{}\n")
    return parse_request({"name": "t", "operations": ops}, tmp_path)


def planned(plan) -> tuple[dict, dict]:
    cands, notes = plan_runtime_filters(plan)
    return {c.join: c for c in cands}, notes


# ------------------------------------------------------------------ the rule on the plan


@pytest.mark.parametrize("jtype", ["inner", "left_semi"])
def test_inner_and_semi_joins_filter_the_read_of_their_probe_side(tmp_path, jtype):
    plan = plan_of(tmp_path, read("b", B), read("p", P), join("j", "b", "p", type=jtype))
    cands, notes = planned(plan)
    assert notes == {}
    c = cands["j"]
    assert (c.read, c.columns, c.keys, c.path) == ("p", (0,), ("pk",), ())


@pytest.mark.parametrize("jtype", ["left_outer", "left_anti"])
def test_joins_that_preserve_the_probe_side_get_none(tmp_path, jtype):
    plan = plan_of(tmp_path, read("b", B), read("p", P), join("j", "b", "p", type=jtype))
    cands, notes = planned(plan)
    assert cands == {}
    assert "preserved" in notes["j"] and jtype in notes["j"]


def test_through_filters_and_projections_that_pass_the_key(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("p", P),
                   {"kind": "filter", "name": "f", "input": "p", "condition": "pv > 3"},
                   {"kind": "project", "name": "pr", "input": "f",
                    "columns": [{"name": "v", "expr": "pv * 2"}, {"name": "key", "expr": "pk"}]},
                   {"kind": "filter", "name": "f2", "input": "pr", "condition": "v < 100"},
                   join("j", "b", "f2", pk=("key",)))
    c = planned(plan)[0]["j"]
    assert (c.read, c.columns, c.keys, c.path) == ("p", (0,), ("pk",), ("f", "pr", "f2"))


def test_a_key_computed_by_an_expression_gets_none(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("p", P), join("j", "b", "p", pk=("pk + 1",)))
    cands, notes = planned(plan)
    assert cands == {} and "computed by an expression" in notes["j"]


def test_a_key_the_binder_casts_gets_none(tmp_path):
    b = [{"name": "bk", "type": "int64"}]
    p = [{"name": "pk", "type": "int32"}]
    plan = plan_of(tmp_path, read("b", b), read("p", p), join("j", "b", "p"))
    cands, notes = planned(plan)
    assert cands == {} and "expression" in notes["j"]


def test_a_key_computed_by_a_projection_gets_none(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("p", P),
                   {"kind": "project", "name": "pr", "input": "p", "columns": [{"name": "k2", "expr": "pk * 2"}]},
                   join("j", "b", "pr", pk=("k2",)))
    cands, notes = planned(plan)
    assert cands == {} and "projection 'pr' computes key 0" in notes["j"]


def agg(name: str, input: str, group_by: list[tuple[str, str]], aggregates=({"name": "n", "fn": "count_star"},)) -> dict:
    return {"kind": "aggregate", "name": name, "input": input,
            "group_by": [{"name": n, "expr": e} for n, e in group_by], "aggregates": list(aggregates)}


def test_through_an_aggregation_whose_group_keys_are_the_join_keys(tmp_path):
    # TPC-H Q4's shape: orders joined with lineitem's distinct order keys; a probe row whose group
    # key matches no build key makes a group the join drops whole
    plan = plan_of(tmp_path, read("b", B), read("p", P),
                   {"kind": "filter", "name": "f", "input": "p", "condition": "pv > 3"},
                   agg("a", "f", [("v", "pv"), ("key", "pk"), ("s", "ps")]),
                   join("j", "b", "a", bk=("bs", "bk"), pk=("s", "key")))
    cands, notes = planned(plan)
    assert notes == {}
    c = cands["j"]
    assert (c.read, c.columns, c.keys, c.path) == ("p", (1, 0), ("ps", "pk"), ("f", "a"))


def test_not_through_an_aggregation_on_an_aggregate_result(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("p", P), agg("a", "p", [("s", "ps")]),
                   join("j", "b", "a", pk=("n",)))
    cands, notes = planned(plan)
    assert cands == {} and "key 0 is aggregate 'n' of 'a'" in notes["j"]


def test_not_through_a_group_key_computed_by_an_expression(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("p", P), agg("a", "p", [("k2", "pk + 1")]),
                   join("j", "b", "a", pk=("k2",)))
    cands, notes = planned(plan)
    assert cands == {} and "aggregation 'a' computes group key 'k2'" in notes["j"]


C = [{"name": "ck", "type": "int64"}, {"name": "cs", "type": "string"}]


def reads_of(plan) -> dict[str, list]:
    """Per join, its candidates' (read, key columns, path)."""
    cands, _ = plan_runtime_filters(plan)
    out: dict[str, list] = {}
    for c in cands:
        out.setdefault(c.join, []).append((c.read, c.keys, c.path))
    return out


def test_through_an_inner_join_to_both_of_its_sides_by_its_equal_keys(tmp_path):
    # TPC-H Q18's shape: the key comes from the lower join's build side (orders), equal to its
    # probe key (lineitem's order key): both scans may drop rows the upper join would drop
    plan = plan_of(tmp_path, read("b", B), read("c", C), read("p", P),
                   join("j1", "c", "p", bk=("ck",)), join("j2", "b", "j1", pk=("ck",)))
    assert reads_of(plan) == {"j1": [("p", ("pk",), ())],
                              "j2": [("p", ("pk",), ("j1",)), ("c", ("ck",), ("j1",))]}


def test_a_column_of_one_side_only_goes_to_that_side(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("c", C), read("p", P),
                   join("j1", "c", "p", bk=("ck",)), join("j2", "b", "j1", bk=("bs",), pk=("cs",)))
    assert reads_of(plan)["j2"] == [("c", ("cs",), ("j1",))]
    plan = plan_of(tmp_path, read("b", B), read("c", C), read("p", P),
                   join("j1", "c", "p", bk=("ck",), columns=[{"name": "s", "expr": "ps"}, {"name": "k", "expr": "ck"}]),
                   join("j2", "b", "j1", bk=("bs",), pk=("s",)))
    assert reads_of(plan)["j2"] == [("p", ("ps",), ("j1",))]


@pytest.mark.parametrize("jtype", ["left_outer", "left_anti", "left_semi"])
def test_past_other_join_types_only_to_their_probe_side(tmp_path, jtype):
    key = "ck" if jtype == "left_outer" else "pk"  # a left outer join's build key: equal, or NULL
    plan = plan_of(tmp_path, read("b", B), read("c", C), read("p", P),
                   join("j1", "c", "p", bk=("ck",), type=jtype), join("j2", "b", "j1", pk=(key,)))
    assert reads_of(plan)["j2"] == [("p", ("pk",), ("j1",))]


def test_not_past_a_join_computing_the_key(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("c", C), read("p", P),
                   join("j1", "c", "p", bk=("ck",), columns=[{"name": "k2", "expr": "pk * 2"}]),
                   join("j2", "b", "j1", pk=("k2",)))
    cands, notes = planned(plan)
    assert set(cands) == {"j1"} and "join 'j1' computes key 0 ('k2')" in notes["j2"]


def test_the_upper_join_filters_the_lower_ones_probe_scan_on_the_pipeline(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("c", C), read("p", P),
                   join("j1", "c", "p", bk=("ck",)), join("j2", "b", "j1", pk=("ck",)))
    pipeline = compile_plan(plan, IMPLS)
    edges = [(e.join, e.read) for e in pipeline.runtime_filters]
    assert ("j1", "p") in edges and ("j2", "p") in edges  # p's scan runs after both builds
    [scan] = [n for n in pipeline.ncas if n.ops and n.ops[0] == "p"]
    assert sorted(f.slot for f in pipeline.node(scan.id).runtime_filters) == [0, 1]
    # c's scan is part of j1's build, which the staging may run before j2's build: then it is not
    # filtered, and j2 still has its edge to p, so it has no note
    assert "j2" not in pipeline.runtime_filter_notes


def test_not_when_the_read_feeds_something_else_too(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("p", P), join("j", "b", "p"), send("out", "j"),
                   send("raw", "p"))
    cands, notes = planned(plan)
    assert cands == {} and "'p' feeds other operations" in notes["j"]


def test_not_when_a_filter_on_the_way_feeds_something_else_too(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("p", P),
                   {"kind": "filter", "name": "f", "input": "p", "condition": "pv > 3"},
                   join("j", "b", "f"), send("out", "j"), send("raw", "f"))
    cands, notes = planned(plan)
    assert cands == {} and "'f' feeds other operations" in notes["j"]


def test_multi_key_joins_filter_on_the_key_tuple(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("p", P), join("j", "b", "p", bk=("bs", "bk"), pk=("ps", "pk")))
    c = planned(plan)[0]["j"]
    assert (c.columns, c.keys) == ((1, 0), ("ps", "pk"))


# ------------------------------------------------------------------ on the pipeline


def q3_like(tmp_path):
    return plan_of(tmp_path, read("c", B), read("o", P),
                   {"kind": "filter", "name": "early", "input": "o", "condition": "pv < 10"},
                   join("co", "c", "early", columns=[{"name": "ok", "expr": "pk"}]), read("l", P),
                   join("li", "co", "l", bk=("ok",)))


def test_the_pipeline_plans_edges_from_join_ncas_to_scans(tmp_path):
    pipeline = compile_plan(q3_like(tmp_path), IMPLS)
    edges = {e.join: e for e in pipeline.runtime_filters}
    assert set(edges) == {"co", "li"}
    for e in edges.values():
        [build] = e.build_ncas
        [probe] = e.probe_ncas
        assert e.join in pipeline.node(build).ops and pipeline.node(probe).ops[0] == e.read
        assert pipeline.node(probe).stages[0] > pipeline.node(build).stages[0]
        assert [f.role for f in pipeline.node(build).runtime_filters] == ["build"]
        [spec] = pipeline.node(probe).runtime_filters
        assert (spec.role, spec.slot, spec.columns, spec.id) == ("probe", 0, e.columns, e.id)
    answer = pipeline.to_json()["runtime_filters"]
    assert [f["join"] for f in answer] == ["co", "li"] and all(f["planned"] for f in answer)
    assert answer[0]["keys"] == ["pk"] and answer[0]["through"] == ["early"]


def test_the_join_is_told_to_make_it_and_the_scan_tests_rows(tmp_path):
    pipeline = compile_plan(q3_like(tmp_path), IMPLS)
    e = pipeline.runtime_filters[0]
    spec = pipeline.build_spec(e.build_ncas[0])
    assert HashJoinInstance(spec, None).params() == {"rf.out": "1"}
    scan = JsonScanNca().instantiate(pipeline.build_spec(e.probe_ncas[0]), None)
    source = scan.generate_source()
    assert "jg_rf_test(ctx, 0u" in source and '#include "jg_hash.h"' in source


def test_switched_off_plans_none_and_says_why(tmp_path):
    pipeline = compile_plan(q3_like(tmp_path), IMPLS, runtime_filters=False)
    assert pipeline.runtime_filters == ()
    assert all(not n.runtime_filters for n in pipeline.ncas)
    answer = pipeline.to_json()["runtime_filters"]
    assert [(f["join"], f["planned"]) for f in answer] == [("co", False), ("li", False)]
    assert "switched off" in answer[0]["reason"]
    scan = JsonScanNca().instantiate(pipeline.build_spec(pipeline.ncas[1].id), None)
    assert "jg_rf_test" not in scan.generate_source()


def test_a_scan_with_a_fused_aggregation_tests_rows_before_aggregating(tmp_path):
    plan = plan_of(tmp_path, read("b", B), read("p", P),
                   {"kind": "filter", "name": "f", "input": "p", "condition": "pv > 3"},
                   agg("a", "f", [("pk", "pk")]), join("j", "b", "a"))
    pipeline = compile_plan(plan, IMPLS)
    [edge] = pipeline.runtime_filters
    [probe] = edge.probe_ncas
    assert pipeline.node(probe).ops == ("p", "f", "a") and edge.path == ("f", "a")
    source = JsonScanNca().instantiate(pipeline.build_spec(probe), None).generate_source()
    # tested after the read's own filter, before the row is aggregated; a dropped row is skipped
    assert source.index("filter 1 of 1") < source.index("jg_rf_test(ctx, 0u") < source.index("group key hash")
    assert "rf_null, rf_h, rf_i)) continue;" in source and ".nrf = 1," in source


def test_not_when_the_scan_fuses_a_shuffle(tmp_path):
    plan = plan_of(tmp_path, read("p", P), {"kind": "shuffle", "name": "sh", "input": "p", "keys": ["pk"],
                                            "partitions": 2}, send("o0", "sh[0]"), send("o1", "sh[1]"))
    assert not JsonScanNca().applies_runtime_filters(plan, ("p", "sh"))
    assert JsonScanNca().applies_runtime_filters(plan, ("p",))


def test_a_scan_that_cannot_apply_filters_gets_none(tmp_path):
    class NoFilterScan(JsonScanNca):
        name = "test.scan_without_filters"
        runtime_filter_probe = False

    pipeline = compile_plan(q3_like(tmp_path), [NoFilterScan(), HashJoinNca()])
    assert pipeline.runtime_filters == ()
    notes = pipeline.runtime_filter_notes
    assert set(notes) == {"co", "li"} and "does not apply runtime filters" in notes["co"]


# ------------------------------------------------------------------ the hand-over (executor)


class FakeInstance:
    def __init__(self, made=None, fail=False) -> None:
        self.made, self.fail, self.got = made, fail, []

    def runtime_filter(self):
        return self.made

    def accept_runtime_filter(self, slot, blob):
        if self.fail:
            raise NcaError("NCA process is gone")
        self.got.append((slot, blob))

    def destroy(self):
        pass


def runner_for(tmp_path, made):
    from jumpgate.runtime.executor import JobRunner
    from jumpgate.runtime.jobs import Job
    from jumpgate.runtime.timeline import Timeline

    pipeline = compile_plan(q3_like(tmp_path), IMPLS)
    job = Job(id="j1", name="t", plan=pipeline.plan, pipeline=pipeline, timeline=Timeline())
    runner = JobRunner(job, None, None, None, tmp_path, tmp_path, on_finish=lambda job: None)
    runner.instances = {n.id: FakeInstance(made.get(n.id)) for n in pipeline.ncas}
    return runner, pipeline


def test_each_scan_gets_the_filter_before_its_stage(tmp_path):
    blob = RuntimeFilterBlob(b"\x01\x02", rows=3)
    runner, pipeline = runner_for(tmp_path, {})
    edge = next(e for e in pipeline.runtime_filters if e.join == "li")
    runner.instances[edge.build_ncas[0]].made = blob
    scan = edge.probe_ncas[0]
    stage = pipeline.node(scan).stages[0]
    runner._hand_runtime_filters(stage - 1, pipeline.stages[stage - 1])  # not yet: the scan is not in it
    assert runner.instances[scan].got == []
    runner._hand_runtime_filters(stage, pipeline.stages[stage])
    assert runner.instances[scan].got == [(0, blob)]
    assert runner.job.runtime_filters[edge.id] == {"stage": stage, "handed": True, "build_rows": 3, "bytes": 2}
    spans = runner.job.timeline.to_json()["ncas"][scan]
    assert spans[f"runtime_filter:{edge.id}"]["from_nca"] == edge.build_ncas[0]
    status = runner.job.status_json()["runtime_filters"]
    assert [f["id"] for f in status] == [e.id for e in pipeline.runtime_filters]


def test_a_join_that_made_none_leaves_its_scan_unfiltered(tmp_path):
    runner, pipeline = runner_for(tmp_path, {})
    edge = pipeline.runtime_filters[0]
    runner.instances[edge.build_ncas[0]].made = RuntimeFilterBlob(None, rows=10**9)
    scan = edge.probe_ncas[0]
    stage = pipeline.node(scan).stages[0]
    runner._hand_runtime_filters(stage, pipeline.stages[stage])
    assert runner.instances[scan].got == []
    assert runner.job.runtime_filters[edge.id]["handed"] is False


def test_a_scan_that_cannot_take_it_fails_the_job(tmp_path):
    from jumpgate.runtime.executor import Cancelled

    runner, pipeline = runner_for(tmp_path, {})
    edge = pipeline.runtime_filters[0]
    runner.instances[edge.build_ncas[0]].made = RuntimeFilterBlob(b"x", rows=1)
    scan = edge.probe_ncas[0]
    runner.instances[scan].fail = True
    stage = pipeline.node(scan).stages[0]
    with pytest.raises(Cancelled):
        runner._hand_runtime_filters(stage, pipeline.stages[stage])
    assert runner._failure.nca == scan and "gone" in runner._failure.message


def test_a_long_chain_between_read_and_join_is_walked_without_recursion(tmp_path):
    # deeper than Python's recursion limit: the walk is a work list
    filters = [{"kind": "filter", "name": f"f{i}", "input": f"f{i - 1}" if i else "p", "condition": "pv > 3"}
               for i in range(3000)]
    plan = plan_of(tmp_path, read("b", B), read("p", P), *filters, join("j", "b", "f2999"))
    [c] = planned(plan)[0].values()
    assert c.read == "p" and len(c.path) == 3000 and c.path[0] == "f0"
