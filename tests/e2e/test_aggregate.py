"""Aggregations end to end: a real server, real NCAs (the aggregation NCA and the scan with a fused
aggregation), the Python client, every answer compared with DuckDB over the same file."""
from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import pytest

from jumpgate.client import JobFailed, Jumpgate
from jumpgate.local_server import LocalServer

from .data import ALL_TYPES, HOSTILE_S, duck_view
from .helpers import read_op

pytestmark = pytest.mark.e2e

HS = '"' + HOSTILE_S.replace('"', '""') + '"'


def agg(name, input, group_by, aggregates, mode="complete") -> dict:
    return {"kind": "aggregate", "name": name, "input": input, "mode": mode,
            "group_by": [{"name": n, **({"expr": e} if e else {})} for n, e in group_by],
            "aggregates": [{"name": n, "fn": f, **({"expr": e} if e else {})} for n, f, e in aggregates]}


def final_of(name, input, partial: dict) -> dict:
    """The final half of a split aggregation: the same names, no expressions."""
    return agg(name, input, [(g["name"], None) for g in partial["group_by"]],
               [(a["name"], a["fn"], None) for a in partial["aggregates"]], mode="final")


def run(url: str, ops: list[dict]):
    """(table, job) of `ops` plus one send of the last operation."""
    send = {"kind": "send", "name": "out", "input": ops[-1]["name"], "transport": "tcp",
            "host": "127.0.0.1", "port": 0}
    with Jumpgate(url) as jg:
        table = jg.run({"name": "agg", "operations": ops + [send]}, timeout=600)["out"]
        return table, jg.last_job


def implementations(job) -> list[tuple[str, tuple[str, ...]]]:
    return [(n["implementation"], tuple(n["operations"])) for n in job.ncas]


def stage_stats(job) -> list[dict]:
    return [s for n in job.last_status["timeline"]["ncas"].values() for s in n.get("stages", [])]


def assert_same_groups(con, got, sql: str, keys: list[str]) -> None:
    """`got` has the columns and the groups of DuckDB's answer to `sql`, each group once, with equal
    values (float64 to 1e-9 relative: sums are added in another order). `keys` are the group
    columns. Compared inside DuckDB, so 100K groups take a blink."""
    import pyarrow as pa

    want = con.sql(sql).to_arrow_table()
    assert got.column_names == want.column_names, (got.column_names, want.column_names)
    assert got.num_rows == want.num_rows, f"{got.num_rows} groups, DuckDB {want.num_rows}"
    con.register("got_t", got)
    con.register("want_t", want)
    try:
        if keys:
            cols = ", ".join(f'"{k}"' for k in keys)
            distinct = con.sql(f"SELECT count(*) FROM (SELECT DISTINCT {cols} FROM got_t)").fetchone()[0]
            assert distinct == got.num_rows, "a group came out more than once"
        on = " AND ".join(f'g."{k}" IS NOT DISTINCT FROM w."{k}"' for k in keys) or "TRUE"
        same = []
        for f in want.schema:
            c = f'"{f.name}"'
            if f.name in keys:
                continue
            if pa.types.is_floating(f.type):
                same.append(f"(g.{c} IS NOT DISTINCT FROM w.{c} OR abs(g.{c} - w.{c}) <= 1e-9 * greatest(abs(w.{c}), 1))")
            else:
                same.append(f"g.{c} IS NOT DISTINCT FROM w.{c}")
        bad = con.sql(f"SELECT g.*, w.* FROM got_t g FULL JOIN want_t w ON {on} "
                      f"WHERE NOT ({' AND '.join(same) or 'TRUE'}) LIMIT 3").fetchall()
    finally:
        con.unregister("got_t")
        con.unregister("want_t")
    assert not bad, f"groups differ (ours, DuckDB's): {bad}"


@pytest.fixture
def t(duck, data_root):
    duck_view(duck, "t", data_root / "t.jsonl")
    return duck


EVERY = [("n", "count_star", None), ("ca", "count", "a"), ("cs", "count", "s"),
         ("sa", "sum", "a"), ("sb", "sum", "b"), ("sx", "sum", "x"), ("sd", "sum", "d"),
         ("aa", "avg", "a"), ("ab", "avg", "b"), ("ax", "avg", "x"), ("ad", "avg", "d"),
         ("mna", "min", "a"), ("mxb", "max", "b"), ("mnx", "min", "x"), ("mxd", "max", "d"), ("mns", "min", "s"),
         ("mxs", "max", "s"), ("mndt", "min", "dt"), ("mxdt", "max", "dt"), ("mnf", "min", "flag"),
         ("mxh", "max", HS)]
DUCK_EVERY = ("count(*) AS n, count(a) AS ca, count(s) AS cs, sum(a)::BIGINT AS sa, sum(b)::BIGINT AS sb, "
              "sum(x) AS sx, sum(d)::DECIMAL(18,2) AS sd, avg(a) AS aa, avg(b) AS ab, avg(x) AS ax, avg(d) AS ad, "
              "min(a) AS mna, max(b) AS mxb, min(x) AS mnx, max(d) AS mxd, min(s) AS mns, max(s) AS mxs, "
              "min(dt) AS mndt, max(dt) AS mxdt, min(flag) AS mnf, " + f"max({HS}) AS mxh")


def test_complete_every_function_by_string_key(server, t):
    """Scan with a fused complete aggregation: every function over every type, NULLs in the key
    (one group) and in the values."""
    table, job = run(server.url, [read_op(), agg("g", "r", [("s", "s")], EVERY)])
    assert implementations(job) == [("software.scan_json", ("r", "g"))]
    assert_same_groups(t, table, f"SELECT s, {DUCK_EVERY} FROM t GROUP BY s", ["s"])


def test_keys_of_every_type_on_the_aggregation_nca(server, t):
    """A read with two consumers: each aggregate runs on the aggregation NCA over NTF, one with
    date/decimal/boolean/int keys together, one global; a HAVING-like filter and a projection are
    fused after the grouped one."""
    keys = agg("g", "r", [("dt", "dt"), ("dd", "d % 7"), ("flag", "flag"), ("a3", "a % 3")],
               [("n", "count_star", None), ("sd", "sum", "d"), ("mx", "max", "s")])
    having = {"kind": "filter", "name": "h", "input": "g", "condition": "n >= 1 AND (flag OR sd IS NULL)"}
    proj = {"kind": "project", "name": "p", "input": "h",
            "columns": [{"name": "dt", "expr": "dt"}, {"name": "a3", "expr": "a3"}, {"name": "dd", "expr": "dd"},
                        {"name": "total", "expr": "coalesce(sd, 0) * 2"}, {"name": "mx", "expr": "lower(mx)"}]}
    glob = agg("z", "r", [], [("n", "count_star", None), ("sx", "sum", "x"), ("mx", "max", "dt")])
    send2 = {"kind": "send", "name": "out2", "input": "z", "transport": "tcp", "host": "127.0.0.1", "port": 0}
    send1 = {"kind": "send", "name": "out", "input": "p", "transport": "tcp", "host": "127.0.0.1", "port": 0}
    with Jumpgate(server.url) as jg:
        got = jg.run({"operations": [read_op(), keys, having, proj, glob, send1, send2]}, timeout=600)
        job = jg.last_job
    assert ("software.aggregate", ("g", "h", "p")) in implementations(job)
    assert ("software.aggregate", ("z",)) in implementations(job)
    assert_same_groups(t, got["out"], "SELECT dt, a % 3 AS a3, d % 7 AS dd, coalesce(sum(d), 0) * 2 AS total, "
                                      "lower(max(s)) AS mx FROM t GROUP BY dt, d % 7, flag, a % 3 "
                                      "HAVING count(*) >= 1 AND (flag OR sum(d) IS NULL)", ["dt", "a3", "dd", "mx"])
    assert_same_groups(t, got["out2"], "SELECT count(*) AS n, sum(x) AS sx, max(dt) AS mx FROM t", [])


def test_partial_then_final_on_two_ncas(server, t):
    partial = agg("p", "r", [("s", "s"), ("flag", "flag")], EVERY, mode="partial")
    table, job = run(server.url, [read_op(), partial, final_of("f", "p", partial)])
    assert implementations(job) == [("software.scan_json", ("r", "p")), ("software.aggregate", ("f",))]
    assert_same_groups(t, table, f"SELECT s, flag, {DUCK_EVERY} FROM t GROUP BY s, flag", ["s", "flag"])


def test_scan_fused_partial_states_add_up(server, t):
    """What a partial aggregation sends (here to the client) merges into the right answer."""
    table, job = run(server.url, [read_op(), {"kind": "filter", "name": "w", "input": "r", "condition": "a > 0"},
                                  agg("p", "w", [("flag", "flag")], [("n", "count_star", None), ("sd", "sum", "d"),
                                                                     ("av", "avg", "x")], mode="partial")])
    assert implementations(job) == [("software.scan_json", ("r", "w", "p"))]
    assert table.column_names == ["flag", "n", "sd", "av__sum", "av__count"]
    t.register("partial_t", table)
    merged = t.sql("SELECT flag, sum(n)::BIGINT AS n, sum(sd) AS sd, sum(av__sum) / sum(av__count) AS av "
                   "FROM partial_t GROUP BY flag").to_arrow_table()
    assert_same_groups(t, merged, "SELECT flag, count(*) AS n, sum(d) AS sd, avg(x) AS av FROM t WHERE a > 0 "
                                  "GROUP BY flag", ["flag"])


def test_empty_input_and_global_aggregation(server, data_root, t):
    """No rows: a complete global aggregation answers one row (count 0, the rest NULL); partial
    sends nothing and the final half still answers that row; a grouped aggregation answers none."""
    (data_root / "empty.jsonl").write_text("")
    empty = {**read_op(), "path": "empty.jsonl"}
    aggs = [("n", "count_star", None), ("sb", "sum", "b"), ("mx", "max", "s"), ("av", "avg", "d")]
    table, _ = run(server.url, [empty, agg("g", "r", [], aggs)])
    assert table.to_pylist() == [{"n": 0, "sb": None, "mx": None, "av": None}]
    partial = agg("p", "r", [], aggs, mode="partial")
    table, _ = run(server.url, [empty, partial, final_of("f", "p", partial)])
    assert table.to_pylist() == [{"n": 0, "sb": None, "mx": None, "av": None}]
    table, _ = run(server.url, [empty, agg("g", "r", [("s", "s")], aggs)])
    assert table.num_rows == 0
    duck_view(t, "e", data_root / "empty.jsonl")
    assert t.sql("SELECT count(*), sum(b), max(s), avg(d) FROM e").fetchall() == [(0, None, None, None)]


def test_overflow_fails_the_job_with_a_clear_error(server, data_root):
    (data_root / "huge.jsonl").write_text('{"b": 9223372036854775807}\n{"b": 5}\n')
    with pytest.raises(JobFailed) as e:
        run(server.url, [{**read_op(), "path": "huge.jsonl"}, agg("g", "r", [], [("total", "sum", "b")])])
    assert "integer overflow: sum 'total' does not fit int64" in str(e.value)


def test_builder_aggregate(server, t):
    with Jumpgate(server.url) as jg:
        src = jg.read("t.jsonl", schema=[(n, ty) for n, ty, _ in ALL_TYPES])
        table = jg.collect(src.filter("b IS NOT NULL").aggregate(["flag"], n="count(*)", total="sum(b)",
                                                                 hi=("max", "dt")))
    assert_same_groups(t, table, "SELECT flag, count(*) AS n, sum(b)::BIGINT AS total, max(dt) AS hi FROM t "
                                 "WHERE b IS NOT NULL GROUP BY flag", ["flag"])


# ------------------------------------------------------------------ bigger data: threads, evictions


@pytest.fixture(scope="module")
def big(data_root):
    """~40 MB of JSON Lines (the scan splits it over 2 threads), 100K groups of an int64 key."""
    import duckdb

    path = data_root / "agg_big.jsonl"
    if not path.exists():
        con = duckdb.connect()
        con.execute(f"""COPY (SELECT (i * 7919) % 100003 AS k, CASE WHEN i % 10 = 0 THEN NULL ELSE 'g' || (i % 53) END AS s,
                                     ((i * 31) % 2000001 - 1000000)::BIGINT AS v, ((i * 17) % 100000) / 100.0 AS x,
                                     'padding padding padding padding' AS pad
                             FROM range(500000) t(i)) TO '{path}' (FORMAT json)""")
        con.close()
    return path


BIG_SCHEMA = [{"name": "k", "type": "int64"}, {"name": "s", "type": "string"}, {"name": "v", "type": "int64"},
              {"name": "x", "type": "float64"}]


def big_read():
    return {"kind": "read", "name": "r", "path": "agg_big.jsonl", "format": "json", "schema": BIG_SCHEMA}


def duck_big(con, path):
    con.execute(f"CREATE OR REPLACE VIEW big AS SELECT * FROM read_json('{path}', format='newline_delimited', "
                "columns={'k': 'BIGINT', 's': 'VARCHAR', 'v': 'BIGINT', 'x': 'DOUBLE'})")


@pytest.mark.slow
def test_two_scan_threads_merge_their_tables(server, duck, big):
    """Complete mode fused into a scan of 2 threads: each group comes out exactly once."""
    table, job = run(server.url, [big_read(), agg("g", "r", [("k", "k")], [("n", "count_star", None),
                                                                           ("sv", "sum", "v"), ("mx", "max", "s")])])
    assert job.outputs["out"].expected_streams == 2  # one stream per scan thread
    duck_big(duck, big)
    assert table.num_rows == 100003
    assert_same_groups(duck, table, "SELECT k, count(*) AS n, sum(v)::BIGINT AS sv, max(s) AS mx FROM big GROUP BY k",
                       ["k"])


@pytest.fixture(scope="module")
def tiny_table_server(data_root, tmp_path_factory):
    """A server whose partial aggregations keep 4 KiB tables (JUMPGATE_AGG_TABLE_BYTES)."""
    cache = os.environ.get("JUMPGATE_TEST_CACHE") or tmp_path_factory.mktemp("cache-tiny")
    os.environ["JUMPGATE_AGG_TABLE_BYTES"] = "4096"
    try:
        srv = LocalServer(data_root, cache, tmp_path_factory.mktemp("logs-tiny") / "server.log")
    finally:
        del os.environ["JUMPGATE_AGG_TABLE_BYTES"]
    yield srv
    left = srv.children()
    srv.stop()
    assert not left, f"NCA processes left behind: {left}"


@pytest.mark.slow
def test_tiny_partial_table_evicts_but_the_answer_holds(tiny_table_server, duck, big):
    partial = agg("p", "r", [("k", "k % 1000"), ("s", "s")], [("n", "count_star", None), ("sv", "sum", "v"),
                                                       ("av", "avg", "x"), ("mn", "min", "s")], mode="partial")
    table, job = run(tiny_table_server.url, [big_read(), partial, final_of("f", "p", partial)])
    stats = {s.get("agg_evictions", 0) for s in stage_stats(job)}
    assert max(stats) > 100, stage_stats(job)
    duck_big(duck, big)
    assert_same_groups(duck, table, "SELECT k % 1000 AS k, s, count(*) AS n, sum(v)::BIGINT AS sv, avg(x) AS av, "
                                    "min(s) AS mn FROM big GROUP BY k % 1000, s", ["k", "s"])


def test_dates_and_decimals_come_back_typed(server, t):
    table, _ = run(server.url, [read_op(), agg("g", "r", [("dt", "dt")], [("sd", "sum", "d")])])
    row = next(r for r in table.to_pylist() if r["dt"] is not None and r["sd"] is not None)
    assert isinstance(row["dt"], dt.date) and isinstance(row["sd"], Decimal)
    assert str(table.schema.field("sd").type) == "decimal128(18, 2)"
