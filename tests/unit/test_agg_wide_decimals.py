"""Aggregates over wide decimals (19..38 digits), compiled and run through the process protocol,
answers compared with DuckDB (whose DECIMAL(38,s) is the same type): sum of a wide decimal is
decimal(38,s), min/max keep the type, avg is float64 with a decimal(38,s) partial sum, wide
group keys group exactly, and a sum beyond 38 digits (or beyond 128 bits on the way) is a data
error, never a wrapped answer."""
from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path

import pytest

from jumpgate.contract.ntf import generate_ntf
from jumpgate.dataflow.request import parse_request
from jumpgate.ncas.software.codegen.aggregate import generate_aggregate_query
from jumpgate.ncas.software.codegen.messages import message_params

from . import test_agg_runtime as agg_rt
from .fixtures.runtime_harness import run_scan
from .test_codegen_harness import decode, needs_runtime

pytestmark = needs_runtime

COLUMNS = {"k": "int64", "g": "decimal(30,3)", "w": "decimal(38,2)", "v": "decimal(25,0)", "d": "decimal(15,2)"}


def write_rows(path: Path, n: int, seed: int) -> Path:
    rnd = random.Random(seed)
    groups = [f"{rnd.randint(-10**27, 10**27)}.{rnd.randint(0, 999):03d}" for _ in range(12)]
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            rec = {"k": rnd.randint(0, 20), "g": rnd.choice(groups + [None]),
                   "w": f"{rnd.randint(-10**33, 10**33)}.{rnd.randint(0, 99):02d}",
                   "v": str(rnd.randint(-10**24 + 1, 10**24 - 1)), "d": f"{rnd.randint(-10**12, 10**12) / 100:.2f}"}
            if rnd.random() < 0.1:
                rec["w"] = None
            f.write(json.dumps(rec) + "\n")
    return path


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("aggwide")
    write_rows(d / "t.jsonl", 4000, seed=5)
    return d


def request(*ops: dict) -> list[dict]:
    out = [{"kind": "read", "name": "r", "path": "t.jsonl", "format": "json",
            "schema": [{"name": n, "type": t} for n, t in COLUMNS.items()]}]
    for op in ops:
        out.append({**op, "input": out[-1]["name"]})
    return out + [{"kind": "send", "name": "out", "input": out[-1]["name"], "transport": "tcp",
                   "host": "127.0.0.1", "port": 1}]


def run_fused(root: Path, ops: list[dict], threads: int = 1, params=None):
    plan = parse_request({"operations": ops}, root)
    chain = [plan.op(o["name"]) for o in ops if o["kind"] != "send"]
    layout = generate_ntf(plan.schemas[chain[-1].name])
    source = generate_aggregate_query(chain, layout)
    exe = agg_rt.build(source, "scan_json")
    event, streams, _ = run_scan(exe, [root / "t.jsonl"], threads=threads,
                                 params={**message_params(source), **(params or {})})
    tuples = [t for s in streams for t in s.tuples]
    return [decode(t, layout) for t in tuples], tuples, plan, event


AGGS = [("n", "count", "w"), ("sw", "sum", "w"), ("sv", "sum", "v"), ("sd", "sum", "d"), ("aw", "avg", "w"),
        ("av", "avg", "v"), ("mnw", "min", "w"), ("mxw", "max", "w"), ("mnv", "min", "v"), ("mxg", "max", "g")]
DUCK_AGGS = "count(w), sum(w), sum(v), sum(d), avg(w), avg(v), min(w), max(w), min(v), max(g)"


def test_result_types(root):
    plan = parse_request({"operations": request(agg_rt.agg([("k", "k")], AGGS, mode="partial"))}, root)
    types = {f.name: str(f.type) for f in plan.schemas["a"].fields}
    assert types["sw"] == "decimal(38,2)" and types["sv"] == "decimal(38,0)"
    assert types["sd"] == "decimal(18,2)"  # a narrow decimal's sum stays the v1 type
    assert types["aw__sum"] == "decimal(38,2)" and types["mnw"] == "decimal(38,2)" and types["mxg"] == "decimal(30,3)"


def test_complete_aggregates_of_wide_decimals(root):
    rows, _, _, ev = run_fused(root, request(agg_rt.agg([("k", "k")], AGGS)))
    assert ev["event"] == "done", ev
    agg_rt.assert_same_groups(rows, agg_rt.duck(root, f"SELECT k, {DUCK_AGGS} FROM SRC GROUP BY k",
                                                columns=COLUMNS))
    assert any(isinstance(r[2], Decimal) and abs(r[2]) > 10**20 for r in rows)


@pytest.mark.parametrize("threads", [1, 2])
def test_wide_group_keys(root, threads):
    rows, _, _, ev = run_fused(root, request(agg_rt.agg([("g", "g"), ("k", "k")], [("sw", "sum", "w")])),
                               threads=threads)
    assert ev["event"] == "done", ev
    agg_rt.assert_same_groups(rows, agg_rt.duck(root, "SELECT g, k, sum(w) FROM SRC GROUP BY g, k",
                                                columns=COLUMNS))


def test_partial_then_final_over_ntf(root):
    keys = [("k", "k")]
    partial_ops = request(agg_rt.agg(keys, AGGS, mode="partial"))
    rows, tuples, plan, ev = run_fused(root, partial_ops, params={"agg.table_bytes": 4096})
    assert ev["event"] == "done", ev
    final = agg_rt.agg([("k", None)], [(n, f, None) for n, f, _ in AGGS], mode="final", name="f")
    half = len(tuples) // 2
    rows, _, _, ev = agg_rt.run_ntf([final], plan.schemas["a"], [tuples[:half], tuples[half:]], threads=2,
                                    root=root)
    assert ev["event"] == "done", ev
    agg_rt.assert_same_groups(rows, agg_rt.duck(root, f"SELECT k, {DUCK_AGGS} FROM SRC GROUP BY k",
                                                columns=COLUMNS))


BIG = "9" * 36 + ".99"  # the largest decimal(38,2): unscaled 10^38 - 1
SIX = "6" + "0" * 35 + ".00"  # unscaled 6 * 10^37: two make more than 38 digits, less than 2^127
OVERFLOWS = [  # beyond 38 digits at the end; beyond 128 bits on the way (2 x 10^38 > 2^127)
    ([SIX, SIX], "sum", "complete", "decimal overflow: sum 'x' does not fit decimal(38,2)"),
    ([BIG, BIG, "-" + BIG], "sum", "complete", "decimal overflow: sum 'x' does not fit decimal(38,2)"),
    ([SIX, SIX], "avg", "partial", "the sum of avg 'x' does not fit decimal(38,2)"),
    ([BIG, BIG], "avg", "complete", "the sum of avg 'x' has more than 38 digits"),
]


@pytest.mark.parametrize("values,fn,mode,message", OVERFLOWS, ids=["sum38", "sum128", "partial_avg", "avg128"])
def test_sum_beyond_38_digits_is_a_data_error(tmp_path, values, fn, mode, message):
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"w": v}) + "\n" for v in values))
    rows, _, _, ev = run_fused(tmp_path, request(agg_rt.agg([], [("x", fn, "w")], mode=mode)))
    assert ev["event"] == "error" and message in ev["message"], ev


def test_sums_beyond_38_digits_on_the_way_are_fine_when_the_result_fits(tmp_path):
    values = [SIX, SIX, "-" + SIX, "-" + SIX, BIG, "-0.01"]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"w": v}) + "\n" for v in values))
    rows, _, _, ev = run_fused(tmp_path, request(agg_rt.agg([], [("x", "sum", "w"), ("m", "max", "w")])))
    assert ev["event"] == "done", ev
    assert rows == [(Decimal("9" * 36 + ".98"), Decimal(BIG))]
