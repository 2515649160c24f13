"""The control plane is linear in the size of a request: long fused chains, chains with a send on
every operation, long chains waiting on a join, big IN lists; and nothing recurses on the plan.

Times are compared as ratios on one machine, never as wall times: a 10x larger request may take
at most 20x as long (linear is 10x; the search this replaced was cubic, 100x and more).
"""
from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from functools import cache

import pytest

from jumpgate.compiler import staging
from jumpgate.compiler.compile import compile_plan
from jumpgate.compiler.pipeline import StagedPipeline
from jumpgate.compiler.staging import compute_stages
from jumpgate.dataflow.limits import RequestLimits, RequestTooLarge
from jumpgate.dataflow.request import parse_request
from jumpgate.nca.deployment import Host
from jumpgate.nca.registry import Registry, load_registry
from jumpgate.ncas.software.codegen.scan import generate_scan_query
from tests.unit.fake_ncas import PlanBuilder

pytestmark = pytest.mark.slow

SCHEMA = [{"name": "a", "type": "int64"}, {"name": "s", "type": "string"}]
ROOMY = RequestLimits(max_operations=1_000_000)
HOSTS = [Host("local", "127.0.0.1", 2)]


@cache
def registry() -> Registry:
    return load_registry()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("data")
    (path / "t.jsonl").write_text('{"a": 1, "s": "x"}\n')
    return path


_CHAINS = 0


def chain(n: int, sends: bool = False) -> dict:
    """read -> n filters -> send; with `sends`, every filter also feeds a send of its own (so
    nothing fuses: n NCAs). Every call's conditions are new texts, so that each timed run parses
    them (the parser remembers the trees of texts it has seen: dataflow/parse.py)."""
    global _CHAINS
    _CHAINS += 1
    salt = _CHAINS * 1_000_000
    ops = [{"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": SCHEMA}]
    prev = "r"
    for i in range(n):
        ops.append({"kind": "filter", "name": f"f{i}", "input": prev, "condition": f"a <> {salt + i}"})
        prev = f"f{i}"
        if sends:
            ops.append({"kind": "send", "name": f"s{i}", "input": prev, "transport": "tcp",
                        "host": "127.0.0.1", "port": 9000 + i % 1000})
    ops.append({"kind": "send", "name": "out", "input": prev, "transport": "tcp", "host": "127.0.0.1", "port": 9})
    return {"name": "chain", "operations": ops}


def submit(body: dict, root, limits: RequestLimits = ROOMY) -> StagedPipeline:
    """What POST /v1/jobs does before answering: parse, map, stage, scale, place."""
    plan = parse_request(body, root, limits)
    return compile_plan(plan, registry().all(), op_paths=plan.op_paths, hosts=HOSTS)


def timed(fn: Callable[[], object], repeat: int = 1) -> tuple[float, object]:
    """The best of `repeat` runs, without the cyclic garbage collector: its full passes cost
    in proportion to everything the test process holds, which is not the compiler's to answer."""
    best, out = float("inf"), None
    for _ in range(repeat):
        out = None
        gc.collect()
        gc.disable()
        try:
            started = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - started)
        finally:
            gc.enable()
    return best, out


def test_a_fused_chain_of_filters_compiles_in_linear_time(root):
    registry()  # plugins loaded outside the timings
    small, _ = timed(lambda: submit(chain(1_000), root), repeat=3)
    big, pipeline = timed(lambda: submit(chain(10_000), root))
    print(f"1,000 filters {small:.3f} s, 10,000 filters {big:.3f} s ({big / small:.1f}x)")
    assert [(n.implementation, len(n.ops)) for n in pipeline.ncas] == [("software.scan_json", 10_001)]
    assert pipeline.stats["states"] <= 5  # the chain, or the read alone and the filters together
    assert big / small < 20


def test_a_long_chain_answers_with_short_verdicts(root):
    pipeline = submit(chain(2_000), root)
    decision = pipeline.decisions["f1500"]
    chosen = [v for v in decision.verdicts if v.chosen]
    assert [v.implementation for v in chosen] == ["software.scan_json"]
    assert "1,990 more" in chosen[0].reason  # the chain's first and last operations, not all 2,001
    others = [v for v in decision.verdicts if not v.chosen]
    assert others and all(v.step == "skipped" for v in others)
    assert max(len(v.reason) for v in decision.verdicts) < 400
    assert len(json.dumps(pipeline.to_json())) < 2_000 * 4_000


def test_a_send_on_every_filter_compiles_in_linear_time_without_recursion(root):
    small, _ = timed(lambda: submit(chain(1_000, sends=True), root), repeat=2)
    # 10,000 NCAs one after the other: a recursive search would go 10,000 frames deep
    big, pipeline = timed(lambda: submit(chain(10_000, sends=True), root))
    print(f"1,000 filters+sends {small:.3f} s, 10,000 {big:.3f} s ({big / small:.1f}x)")
    assert len(pipeline.ncas) == 10_000 and len(pipeline.outputs) == 10_001
    assert pipeline.stats["states"] <= 10_002 and not pipeline.stats["greedy"]  # one per anchor
    assert pipeline.outputs["s9999"].producer == pipeline.outputs["out"].producer
    assert big / small < 20


def test_fifty_thousand_filters_with_sends_get_a_clear_answer(root):
    started = time.perf_counter()
    with pytest.raises(RequestTooLarge) as info:
        submit(chain(50_000, sends=True), root, RequestLimits())
    assert info.value.status == 413 and info.value.path == "operations"
    assert info.value.context["found"] == 100_002
    assert time.perf_counter() - started < 2.0


def probe_chain(n: int):
    """A join whose probe side is a chain of n filters: in stage 0 the join builds, so every
    filter of the chain is ruled out, one after the other, from the join backwards."""
    pb = PlanBuilder().read("b").read("p")
    prev = "p"
    for i in range(n):
        pb.filter(f"f{i}", prev)
        prev = f"f{i}"
    return pb.join("j", "b", prev, "a", columns=["a"]).send("out", "j").build()


def test_staging_a_chain_behind_a_join_is_linear(monkeypatch):
    # counted, not timed: each operation's conditions are checked a bounded number of times per
    # stage (the fixpoint swept the whole plan again for every filter it ruled out: N^2 checks)
    checks = 0
    blocker = staging._Simulation.blocker

    def counted(self, name, running):
        nonlocal checks
        checks += 1
        return blocker(self, name, running)

    monkeypatch.setattr(staging._Simulation, "blocker", counted)
    plan = probe_chain(20_000)
    stages = compute_stages(plan)
    assert stages["j"] == (0, 1) and stages["f19999"] == (1,) and stages["b"] == (0,)
    assert checks <= 4 * len(plan.ops), checks


def test_a_hundred_thousand_value_in_list_compiles_to_one_nca(root):
    values = ", ".join(str(i * 7) for i in range(100_000))
    body = chain(1)
    body["operations"][1]["condition"] = f"a IN ({values})"
    elapsed, pipeline = timed(lambda: submit(body, root, RequestLimits(max_in_list=100_000)))
    assert [n.ops for n in pipeline.ncas] == [("r", "f0")]
    nca = pipeline.ncas[0]
    source = generate_scan_query([pipeline.plan.op(n) for n in nca.ops], nca.outputs[0].spec.layout)
    assert source.count("while (lo") == 1 and "static const int64_t set" in source
    assert len(source) < 3_000_000
    print(f"100,000-value IN list: parsed and compiled in {elapsed:.2f} s; {len(source):,} bytes of C")


def doubling_projections(n: int) -> dict:
    """read -> n projections `a = a + a`: folded into one expression by substitution, each level
    uses the one below twice, so a tree walk that copies shared sub-trees does 2^n steps."""
    body = chain(0)
    ops = body["operations"]
    for i in range(n):
        ops.insert(-1, {"kind": "project", "name": f"p{i}", "input": ops[-2]["name"],
                        "columns": [{"name": "a", "expr": "a + a"}, {"name": "s", "expr": "s"}]})
    ops[-1]["input"] = ops[-2]["name"]
    return body


def test_folded_projections_generate_in_linear_time(root):
    pipeline = submit(doubling_projections(60), root)
    nca = pipeline.ncas[0]
    assert len(nca.ops) == 61
    elapsed, source = timed(lambda: generate_scan_query([pipeline.plan.op(n) for n in nca.ops],
                                                        nca.outputs[0].spec.layout))
    assert source.count("__builtin_add_overflow") == 60  # each level computed once
    assert elapsed < 5.0  # it was 2^60 steps: 18 projections took 14 s


def test_a_join_fusing_folded_projections_compiles_quickly(root):
    # the hash join generates its C while it answers match_operations, i.e. during POST /v1/jobs
    body = doubling_projections(0)
    ops = body["operations"]
    ops.insert(1, {**ops[0], "name": "r2", "schema": [{"name": "k", "type": "int64"}]})
    ops.insert(2, {"kind": "join", "name": "j", "build": "r2", "probe": "r", "build_keys": ["k"],
                   "probe_keys": ["a"], "columns": [{"name": "a", "expr": "a"}, {"name": "s", "expr": "s"}]})
    for i in range(60):
        ops.insert(-1, {"kind": "project", "name": f"p{i}", "input": ops[-2]["name"],
                        "columns": [{"name": "a", "expr": "a + a"}, {"name": "s", "expr": "s"}]})
    ops[-1]["input"] = ops[-2]["name"]
    elapsed, pipeline = timed(lambda: submit(body, root))
    join = next(n for n in pipeline.ncas if n.implementation == "software.hash_join")
    assert join.ops[0] == "j" and len(join.ops) == 61
    assert elapsed < 10.0
