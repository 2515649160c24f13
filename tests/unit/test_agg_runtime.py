"""Compile-and-run tests of aggregation queries (codegen/aggregate.py + ncas/runtime/agg_table.c)
through the process protocol, answers compared with DuckDB over the same JSON Lines file.

Two drivers run them: the JSON scan with the aggregation fused in (`scan_json`), and the
aggregation NCA reading NTF (`ntf_relay`), fed either by a scan's output (a passthrough scan makes
real NTF input) or by a partial aggregation's output (partial -> final, like two NCAs of a job).
"""
from __future__ import annotations

import datetime as dt
import json
import math
import random
import socket
import struct
import threading
from decimal import Decimal
from pathlib import Path

import pytest

from jumpgate.contract.ntf import generate_ntf
from jumpgate.dataflow.request import parse_request
from jumpgate.ncas.software.build import build_nca
from jumpgate.ncas.software.codegen import generate_scan_query
from jumpgate.ncas.software.codegen.aggregate import generate_aggregate_query
from jumpgate.ncas.software.codegen.messages import message_params

from .fixtures.runtime_harness import NcaProcess, Receiver, run_scan, stream_bytes
from .test_codegen_harness import cache_dir, decode, needs_runtime

pytestmark = needs_runtime

EPOCH = dt.date(1970, 1, 1)
HOSTILE = "'); system(\"id\"); /* ??/"
COLUMNS = {"k": "int64", "i": "int32", "l": "int64", "f": "float64", "d": "decimal(12,2)", "e": "decimal(18,4)",
           "s": "string", "dt": "date", "b": "boolean", HOSTILE: "string"}
DUCK = {"int64": "BIGINT", "int32": "INTEGER", "float64": "DOUBLE", "string": "VARCHAR", "date": "DATE",
        "boolean": "BOOLEAN"}
WORDS = ["alpha", "beta", "", "naïve", "日本語", "Ab", "ab", "zeta", "quote\"d", "x" * 40]


def write_rows(path: Path, n: int, seed: int) -> Path:
    rnd = random.Random(seed)

    def maybe(v, p=0.1):
        return None if rnd.random() < p else v

    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            rec = {"k": maybe(rnd.randint(0, 40)), "i": maybe(rnd.randint(-2**31, 2**31 - 1)),
                   "l": maybe(rnd.randint(-10**15, 10**15)), "f": maybe(rnd.uniform(-1e3, 1e3)),
                   "d": maybe(f"{rnd.randint(-10**10, 10**10) / 100:.2f}"),
                   "e": maybe(f"{rnd.randint(-10**13, 10**13) / 10**4:.4f}"), "s": maybe(rnd.choice(WORDS)),
                   "dt": maybe((EPOCH + dt.timedelta(days=rnd.randint(-800, 800))).isoformat()),
                   "b": maybe(rnd.random() < 0.5), HOSTILE: maybe(rnd.choice(WORDS[:4]))}
            f.write(json.dumps({k: v for k, v in rec.items() if v is not None or rnd.random() < 0.5},
                               ensure_ascii=False) + "\n")
    return path


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("agg")
    write_rows(d / "t.jsonl", 6000, seed=3)
    (d / "empty.jsonl").write_text("")
    return d


# ------------------------------------------------------------------ building and running


def schema_json() -> list[dict]:
    return [{"name": n, "type": t} for n, t in COLUMNS.items()]


def request(*ops: dict, path: str = "t.jsonl") -> list[dict]:
    """read `path`, then `ops` each reading the previous one, then a send."""
    out = [{"kind": "read", "name": "r", "path": path, "format": "json", "schema": schema_json()}]
    for op in ops:
        out.append({**op, "input": out[-1]["name"]})
    return out + [{"kind": "send", "name": "out", "input": out[-1]["name"], "transport": "tcp",
                   "host": "127.0.0.1", "port": 1}]


def agg(group_by, aggregates, mode="complete", name="a") -> dict:
    return {"kind": "aggregate", "name": name, "mode": mode,
            "group_by": [{"name": n, **({"expr": e} if e else {})} for n, e in group_by],
            "aggregates": [{"name": n, "fn": f, **({"expr": e} if e else {})} for n, f, e in aggregates]}


def plan_of(root: Path, ops: list[dict]):
    plan = parse_request({"operations": ops}, root)
    names = [o["name"] for o in ops if o["kind"] != "send"]
    return plan, [plan.op(n) for n in names]


def build(source: str, driver: str) -> Path:
    return Path(build_nca(source, driver, cache_dir()).path)


def run_fused(root: Path, ops: list[dict], threads: int = 1, params=None, path: str = "t.jsonl"):
    """The scan with the aggregation fused in: (rows, tuples, layout, done or error event)."""
    plan, chain = plan_of(root, ops)
    layout = generate_ntf(plan.schemas[chain[-1].name])
    source = generate_aggregate_query(chain, layout)  # its error messages go with the configuration
    exe = build(source, "scan_json")
    event, streams, _ = run_scan(exe, [root / path], threads=threads, params={**message_params(source), **(params or {})})
    tuples = [t for s in streams for t in s.tuples]
    return [decode(t, layout) for t in tuples], tuples, layout, event


def feed(port: int, payloads: list[bytes]) -> list[threading.Thread]:
    def send(data: bytes) -> None:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(30)
            try:
                s.recv(1)
            except OSError:
                pass

    ts = [threading.Thread(target=send, args=(p,), daemon=True) for p in payloads]
    for t in ts:
        t.start()
    return ts


def run_ntf(ops_after: list[dict], input_schema, input_streams: list[list[bytes]], threads: int = 1,
            params=None, root: Path | None = None):
    """The aggregation NCA over NTF input: `ops_after` (an aggregate, filters, projects) reading
    tuples of `input_schema` (a plan's schema) sent on len(input_streams) streams."""
    fields = [{"name": f.name, "type": str(f.type)} for f in input_schema.fields]
    ops = [{"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": fields}]
    for op in ops_after:
        ops.append({**op, "input": ops[-1]["name"]})
    ops.append({"kind": "send", "name": "out", "input": ops[-1]["name"], "transport": "tcp", "host": "127.0.0.1",
                "port": 1})
    plan, chain = plan_of(root, ops)
    layout = generate_ntf(plan.schemas[chain[-1].name])
    source = generate_aggregate_query(chain[1:], layout, input_schema)
    exe = build(source, "ntf_relay")
    r = Receiver()
    nca = NcaProcess(exe, inputs=1)
    try:
        nca.configure(dests=[(0, r.port, 0, threads)], threads=threads, expect=[(0, len(input_streams))],
                      params={**message_params(source), **(params or {})})
        nca.send("execute 0")
        senders = feed(nca.ports[0], [stream_bytes(i, ts) for i, ts in enumerate(input_streams)])
        event = nca.event()
        for t in senders:
            t.join()
        tuples = [t for s in r.streams(threads) for t in s.tuples] if event["event"] == "done" else []
        return [decode(t, layout) for t in tuples], tuples, layout, event
    finally:
        nca.kill()
        r.close()


def passthrough(root: Path, path: str = "t.jsonl", threads: int = 1):
    """The file as NTF tuples of the read's schema (a scan NCA without operations)."""
    plan, chain = plan_of(root, request(path=path))
    layout = generate_ntf(plan.schemas["r"])
    event, streams, _ = run_scan(build(generate_scan_query(chain, layout), "scan_json"), [root / path],
                                 threads=threads)
    assert event["event"] == "done", event
    return plan.schemas["r"], [s.tuples for s in streams]


# ------------------------------------------------------------------ DuckDB, the oracle


def duck(root: Path, sql: str, path: str = "t.jsonl", columns: dict[str, str] | None = None) -> list[tuple]:
    """`sql` in DuckDB, SRC standing for the JSON Lines file `path` under `root` read with `columns`
    (name to Jumpgate type; this module's COLUMNS unless given)."""
    import duckdb

    cols = ", ".join(f"'{n.replace(chr(39), chr(39) * 2)}': '{DUCK.get(t, t.upper())}'"
                     for n, t in (columns or COLUMNS).items())
    src = f"read_json('{root / path}', format='newline_delimited', columns={{{cols}}})"
    con = duckdb.connect()
    try:
        return con.execute(sql.replace("SRC", src)).fetchall()
    finally:
        con.close()


def norm(v):
    """DuckDB's value as NTF carries it (dates as days since 1970)."""
    return (v - EPOCH).days if isinstance(v, dt.date) else v


def same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def sort_key(row):
    return tuple((v is None, str(type(v)), v if v is not None else 0) for v in row)


def assert_same_groups(got: list[tuple], want: list[tuple]) -> None:
    want = [tuple(norm(v) for v in r) for r in want]
    got, want = sorted(got, key=sort_key), sorted(want, key=sort_key)
    assert len(got) == len(want), f"{len(got)} groups, DuckDB {len(want)}"
    bad = [(g, w) for g, w in zip(got, want) if len(g) != len(w) or not all(same(x, y) for x, y in zip(g, w))]
    assert not bad, f"{len(bad)} groups differ, e.g. {bad[:3]}"


# ------------------------------------------------------------------ the cases

# every function over every numeric type, min/max over every type
AGGS = [("n", "count_star", None), ("ck", "count", "k"), ("cs", "count", "s"),
        ("si", "sum", "i"), ("sl", "sum", "l"), ("sf", "sum", "f"), ("sd", "sum", "d"), ("se", "sum", "e"),
        ("ai", "avg", "i"), ("al", "avg", "l"), ("af", "avg", "f"), ("ad", "avg", "d"), ("ae", "avg", "e"),
        ("mni", "min", "i"), ("mxl", "max", "l"), ("mnf", "min", "f"), ("mxf", "max", "f"), ("mnd", "min", "d"),
        ("mxe", "max", "e"), ("mns", "min", "s"), ("mxs", "max", "s"), ("mndt", "min", "dt"),
        ("mxdt", "max", "dt"), ("mnb", "min", "b"), ("mxb", "max", "b")]
DUCK_FN = {"count_star": "count(*)", "count": "count({})", "sum": "sum({})", "avg": "avg({})", "min": "min({})",
           "max": "max({})"}


def duck_aggs(aggs=AGGS) -> str:
    return ", ".join(DUCK_FN[f].format(e) for _, f, e in aggs)


def test_complete_every_function_grouped_by_int_key(root):
    rows, _, _, ev = run_fused(root, request(agg([("k", "k")], AGGS)))
    assert ev["event"] == "done", ev
    assert ev["stats"]["agg_groups_out"] == len(rows) == 42  # 0..40 and NULL
    assert_same_groups(rows, duck(root, f"SELECT k, {duck_aggs()} FROM SRC GROUP BY k"))


@pytest.mark.parametrize("threads", [1, 2])
def test_complete_multi_column_keys_of_every_type(root, threads):
    """String, date, decimal, boolean and int keys together (NULLs group together); two threads
    merge their tables before emitting, so every group comes out once."""
    keys = [("s", "s"), ("b", "b"), ("y", "year(dt)"), ("dd", "d % 3"), ("kk", "k % 2")]
    aggs = [("n", "count_star", None), ("sd", "sum", "d"), ("mx", "max", "s"), ("af", "avg", "f")]
    rows, _, _, ev = run_fused(root, request(agg(keys, aggs)), threads=threads)
    assert ev["event"] == "done", ev
    want = duck(root, "SELECT s, b, year(dt), d % 3, k % 2, count(*), sum(d), max(s), avg(f) FROM SRC "
                      "GROUP BY ALL")
    assert_same_groups(rows, want)


def test_global_aggregation_and_hostile_names(root):
    q = '"' + HOSTILE.replace('"', '""') + '"'
    aggs = [(HOSTILE, "count", q), ("mx", "max", q), ("n", "count_star", None), ("sl", "sum", "l")]
    rows, _, _, ev = run_fused(root, request(agg([], aggs)), threads=2)
    assert ev["event"] == "done", ev
    assert_same_groups(rows, duck(root, f"SELECT count({q}), max({q}), count(*), sum(l) FROM SRC"))


@pytest.mark.parametrize("mode,groups", [("complete", 1), ("final", 1), ("partial", 0)])
def test_global_aggregation_of_empty_input(root, mode, groups):
    """Complete and final emit one row for no input (count 0, the rest NULL, as DuckDB); partial
    emits nothing (the final side makes the row)."""
    aggs = [("n", "count_star", None), ("sl", "sum", "l"), ("mx", "max", "s"), ("a", "avg", "d")]
    if mode == "final":
        plan, _ = plan_of(root, request(agg([], aggs, mode="partial"), path="empty.jsonl"))
        final = agg([], [(n, f, None) for n, f, _ in aggs], mode="final")
        rows, _, _, ev = run_ntf([final], plan.schemas["a"], [[], []], threads=2, root=root)
    else:
        rows, _, _, ev = run_fused(root, request(agg([], aggs, mode=mode)), threads=2, path="empty.jsonl")
    assert ev["event"] == "done", ev
    assert len(rows) == groups
    if groups:
        assert rows == duck(root, "SELECT count(*), sum(l), max(s), avg(d) FROM SRC", "empty.jsonl")
        assert rows == [(0, None, None, None)]


def test_having_filter_and_projection_after_the_aggregate(root):
    ops = request({"kind": "filter", "name": "w", "condition": "k IS NOT NULL AND b"},
                  agg([("k", "k")], [("n", "count_star", None), ("sd", "sum", "d"), ("mx", "max", "s")]),
                  {"kind": "filter", "name": "h", "condition": "n > 70 AND sd IS NOT NULL"},
                  {"kind": "project", "name": "p", "columns": [{"name": "key", "expr": "k * 10"},
                                                               {"name": "avg_d", "expr": "sd / n"},
                                                               {"name": "up", "expr": "upper(mx)"}]})
    rows, _, layout, ev = run_fused(root, ops, threads=2)
    assert ev["event"] == "done", ev
    assert [f.name for f in layout.fields] == ["key", "avg_d", "up"]
    want = duck(root, "SELECT k * 10, sum(d) / count(*), upper(max(s)) FROM SRC WHERE k IS NOT NULL AND b "
                      "GROUP BY k HAVING count(*) > 70 AND sum(d) IS NOT NULL")
    assert 0 < len(rows) < 41
    assert_same_groups(rows, want)


@pytest.mark.parametrize("bound,threads", [(None, 1), (4096, 1), (4096, 2)])
def test_partial_then_final_gives_the_complete_answer(root, bound, threads):
    """Partial states (evicted again and again with a 4 KiB table) merged by a final aggregation
    on NTF: the same answer as one complete aggregation, for every function."""
    keys = [("k", "k"), ("s", "s")]
    params = {"agg.table_bytes": bound} if bound else None
    partial_ops = request(agg(keys, AGGS, mode="partial"))
    rows, tuples, _, ev = run_fused(root, partial_ops, threads=threads, params=params)
    assert ev["event"] == "done", ev
    assert ev["stats"]["agg_table_bytes"] <= (bound or 8 << 20) * threads * 1.25
    if bound:
        assert ev["stats"]["agg_evictions"] > 10 and len(rows) > 1000  # a group comes out many times
    plan, _ = plan_of(root, partial_ops)
    final = agg([("k", None), ("s", None)], [(n, f, None) for n, f, _ in AGGS], mode="final", name="f")
    half = len(tuples) // 2
    rows, _, _, ev = run_ntf([final], plan.schemas["a"], [tuples[:half], tuples[half:]], threads=2, root=root)
    assert ev["event"] == "done", ev
    assert_same_groups(rows, duck(root, f"SELECT k, s, {duck_aggs()} FROM SRC GROUP BY k, s"))


GLOBAL_AGGS = [("n", "count_star", None), ("sl", "sum", "l"), ("mx", "max", "s"), ("a", "avg", "d")]
GLOBAL_SQL = "SELECT count(*), sum(l), max(s), avg(d) FROM SRC"


def merged_partials(rows: list[tuple]) -> list[tuple]:
    """The partial rows of GLOBAL_AGGS (n, sl, mx, a__sum, a__count), one per worker that saw a
    row, merged as the final side merges them."""
    assert 1 <= len(rows) <= 2, rows
    return [(sum(r[0] for r in rows), sum(r[1] for r in rows), max(r[2] for r in rows),
             sum(r[3] for r in rows) / sum(r[4] for r in rows))]


@pytest.mark.parametrize("mode", ["complete", "partial"])
@pytest.mark.parametrize("condition", ["k > 20", "k > 1000"])
def test_global_aggregation_after_a_filter(root, mode, condition):
    """A global aggregation adds each row to its one entry, which the first row that passes the
    filter inserts: over rows of which some pass, the answer is DuckDB's; when none passes,
    complete emits its one row (count 0, the rest NULL) and partial emits nothing, as for no
    input."""
    ops = [{"kind": "filter", "name": "f", "condition": condition}, agg([], GLOBAL_AGGS, mode=mode)]
    rows, _, _, ev = run_fused(root, request(*ops), threads=2)
    assert ev["event"] == "done", ev
    want = duck(root, GLOBAL_SQL + f" WHERE {condition}")
    if condition == "k > 1000":
        assert want == [(0, None, None, None)]
        assert rows == ([] if mode == "partial" else want)
    else:
        assert_same_groups(rows if mode == "complete" else merged_partials(rows), want)


@pytest.mark.parametrize("mode", ["complete", "partial"])
def test_global_aggregation_over_ntf(root, mode):
    """The aggregation NCA's global path over NTF tuples (query_tuples) on two streams and threads."""
    schema, streams = passthrough(root, threads=2)
    rows, _, _, ev = run_ntf([agg([], GLOBAL_AGGS, mode=mode)], schema, streams, threads=2, root=root)
    assert ev["event"] == "done", ev
    assert ev["stats"]["tuples_in"] == 6000
    assert_same_groups(rows if mode == "complete" else merged_partials(rows), duck(root, GLOBAL_SQL))


def test_ntf_complete_on_several_streams_and_threads(root):
    schema, streams = passthrough(root, threads=2)
    aggs = [("n", "count_star", None), ("se", "sum", "e"), ("mn", "min", "s"), ("ai", "avg", "i")]
    rows, _, _, ev = run_ntf([agg([("dt", "dt"), ("b", "b")], aggs)], schema, streams, threads=2, root=root)
    assert ev["event"] == "done", ev
    assert ev["stats"]["tuples_in"] == 6000
    assert_same_groups(rows, duck(root, "SELECT dt, b, count(*), sum(e), min(s), avg(i) FROM SRC GROUP BY ALL"))


def _bad_string(tuple_: bytes, layout, name: str) -> bytes:
    """`tuple_` with string field `name`'s (offset, length) pointing past its end."""
    f = next(f for f in layout.fields if f.name == name)
    t = bytearray(tuple_)
    t[f.null_bit // 8] &= ~(1 << (f.null_bit % 8))
    struct.pack_into("<II", t, f.offset, len(t) - 2, 10)
    return bytes(t)


@pytest.mark.parametrize("bad,message", [
    ("short", "malformed tuple: tuple shorter than the layout's fixed size"),
    ("string_read", "malformed tuple: string field points outside the tuple"),
    ("string_unread", "malformed tuple: string field points outside the tuple"),
])
def test_ntf_malformed_tuples_fail_the_job(root, bad, message):
    """The aggregation NCA reads NTF tuples with generated code (query_tuples), which rejects a
    malformed tuple as the runtime's decoder does, strings it does not read included."""
    schema, streams = passthrough(root)
    good = [t for s in streams for t in s]
    layout = generate_ntf(schema)
    broken = {"short": good[7][:16], "string_read": _bad_string(good[7], layout, "s"),
              "string_unread": _bad_string(good[7], layout, HOSTILE)}[bad]
    ops = [agg([("k", "k")], [("n", "count_star", None), ("mx", "max", "s")])]
    rows, _, _, ev = run_ntf(ops, schema, [good[:7] + [broken] + good[8:100]], root=root)
    assert ev["event"] == "error", ev
    assert message in ev["message"], ev
    assert "input port 0" in ev["message"], ev


def test_large_string_keys_and_growth(root, tmp_path):
    """Many groups (the table grows many times) with long string keys."""
    with open(tmp_path / "t.jsonl", "w") as f:
        for i in range(40000):
            f.write(json.dumps({"s": f"key-{i % 15000:05d}-" + "x" * (i % 50), "l": i}) + "\n")
    rows, _, _, ev = run_fused(tmp_path, request(agg([("s", "s")], [("n", "count_star", None), ("sl", "sum", "l")])),
                               threads=2)
    assert ev["event"] == "done", ev
    assert_same_groups(rows, duck(tmp_path, "SELECT s, count(*), sum(l) FROM SRC GROUP BY s"))


OVERFLOWS = [
    ('{"l": 9223372036854775807}\n{"l": 1}\n', [("x", "sum", "l")], "integer overflow: sum 'x' does not fit int64"),
    ('{"e": "99999999999999.9999"}\n' * 2, [("x", "sum", "e")], "decimal overflow: sum 'x' does not fit decimal(18,4)"),
    ('{"e": "99999999999999.9999"}\n' * 2, [("x", "avg", "e")], "the sum of avg 'x' does not fit decimal(18,4)"),
]


@pytest.mark.parametrize("text,aggs,message", OVERFLOWS, ids=["int64", "decimal", "partial_avg"])
def test_overflow_is_a_data_error(tmp_path, text, aggs, message):
    (tmp_path / "t.jsonl").write_text(text)
    mode = "partial" if "avg" in message else "complete"
    rows, _, _, ev = run_fused(tmp_path, request(agg([], aggs, mode=mode)))
    assert ev["event"] == "error" and message in ev["message"], ev


def test_sums_are_exact_and_cancel_without_overflow(tmp_path):
    """Intermediate sums beyond int64 are fine when the result fits (int128 accumulators)."""
    big = 9223372036854775807
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"l": v, "e": e}) + "\n" for v, e in
                                              [(big, "99999999999999.9999"), (big, "99999999999999.9999"),
                                               (-big, "-99999999999999.9999"), (-big, "-99999999999999.9998")]))
    rows, _, _, ev = run_fused(tmp_path, request(agg([], [("sl", "sum", "l"), ("se", "sum", "e"),
                                                          ("al", "avg", "l")])))
    assert ev["event"] == "done", ev
    assert rows == [(0, Decimal("0.0001"), 0.0)]


def test_bad_table_bound_is_reported(root):
    _, _, _, ev = run_fused(root, request(agg([("k", "k")], [("n", "count_star", None)], mode="partial")),
                            params={"agg.table_bytes": "12"})
    assert ev["event"] == "error" and "agg.table_bytes" in ev["message"], ev


def test_float_keys_group_as_they_hash(tmp_path):
    """-0.0 groups with 0.0 (jg_hash reads -0.0 as 0.0), as in DuckDB; NULL is a group of its own."""
    values = [0.0, -0.0, 1.5, 1.5, None, -2.25, 0.0]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"f": v, "l": i}) + "\n" for i, v in enumerate(values)))
    rows, _, _, ev = run_fused(tmp_path, request(agg([("f", "f")], [("n", "count_star", None), ("sl", "sum", "l")])))
    assert ev["event"] == "done", ev
    assert_same_groups(rows, duck(tmp_path, "SELECT f, count(*), sum(l) FROM SRC GROUP BY f"))
    assert sorted(r[1] for r in rows) == [1, 1, 2, 3]
