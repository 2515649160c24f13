"""ORC and Parquet scans end to end: a real server, the scan NCAs on Arrow C++, the Python client,
answers compared with DuckDB over the same data. Every type and NULLs (the e2e JSON data rewritten
as ORC by pyarrow and as Parquet by DuckDB, with dictionary-encoded strings and several
stripes / row groups), statistics pruning visible in the job's timeline, several files, two
threads, a fused aggregation, and bad files failing the job with the file named and no NCA process
left behind."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from jumpgate.client import JobFailed, Jumpgate
from jumpgate.ncas.software.arrow_cpp import unavailable_reason

from .data import duck_view, schema_json
from .helpers import assert_same_rows
from .test_errors import wait_no_children
from .test_filter_project import CASES, DUCK_SPELLING, q

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(unavailable_reason() is not None, reason=f"Arrow C++: {unavailable_reason()}")]

FORMATS = ["orc", "parquet"]
PICKED = ["all_columns", "int_compare", "decimal_cmp_arith", "dates", "like_unicode_and_specials", "is_null_or",
          "three_valued_logic", "in_lists", "between", "strings", "hostile_names", "empty_result"]


@pytest.fixture(scope="module")
def columnar(data_root):
    """all.orc / all.parquet (the e2e rows, 5 units of 1000 rows), sorted.orc / sorted.parquet (for
    pruning), big.orc / big.parquet (large enough for two threads), parts/*.{orc,parquet}."""
    import duckdb

    con = duckdb.connect()
    duck_view(con, "t", data_root / "t.jsonl")
    con.execute(f"COPY (SELECT * FROM t) TO '{data_root / 'all.parquet'}' (FORMAT parquet, ROW_GROUP_SIZE 1000)")
    table = con.sql("SELECT * FROM t").to_arrow_table()
    orc.write_table(table, str(data_root / "all.orc"), stripe_size=1024, batch_size=1000,
                    dictionary_key_size_threshold=1.0)  # strings dictionary-encoded in ORC too
    n = 20000
    sorted_t = pa.table({"k": pa.array(range(n), pa.int64()), "day": pa.array(range(n), pa.int32()).cast(pa.date32()),
                         "s": pa.array([f"s{k:06d}" for k in range(n)])})
    orc.write_table(sorted_t, str(data_root / "sorted.orc"), stripe_size=1024, batch_size=2000)
    pq.write_table(sorted_t, str(data_root / "sorted.parquet"), row_group_size=2000)
    rng = np.random.default_rng(5)  # ~10 MB of incompressible data: big enough for two threads
    big = pa.table({"k": pa.array(rng.permutation(1_200_000), pa.int64()),
                    "r": pa.array(rng.integers(-2**62, 2**62, 1_200_000), pa.int64())})
    orc.write_table(big, str(data_root / "big.orc"), compression="uncompressed", stripe_size=1024, batch_size=300_000)
    pq.write_table(big, str(data_root / "big.parquet"), compression="none", row_group_size=300_000)
    (data_root / "parts").mkdir(exist_ok=True)
    for i in range(3):
        part = pa.table({"k": pa.array(range(i * 1000, i * 1000 + 700 + i), pa.int64())})
        orc.write_table(part, str(data_root / "parts" / f"p{i}.orc"))
        pq.write_table(part, str(data_root / "parts" / f"p{i}.parquet"))
    con.close()
    return data_root


def read(fmt: str, path: str, schema=None) -> dict:
    return {"kind": "read", "name": "r", "path": path, "format": fmt, "schema": schema or schema_json()}


def run(url: str, ops: list[dict]):
    send = {"kind": "send", "name": "out", "input": ops[-1]["name"], "transport": "tcp", "host": "127.0.0.1",
            "port": 0}
    with Jumpgate(url) as jg:
        table = jg.run({"name": "columnar", "operations": ops + [send]}, timeout=600)["out"]
        return table, jg.last_job


def stage_stats(job) -> list[dict]:
    return [s for n in job.last_status["timeline"]["ncas"].values() for s in n.get("stages", [])]


# ------------------------------------------------------------------ answers


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case_id,cond,cols", [c for c in CASES if c[0] in PICKED], ids=PICKED)
def test_filter_project_matches_duckdb(server, duck, columnar, fmt, case_id, cond, cols):
    duck_view(duck, "t", columnar / "t.jsonl")
    ops = [read(fmt, f"all.{fmt}")]
    if cond:
        ops.append({"kind": "filter", "name": "f", "input": "r", "condition": cond})
    ops.append({"kind": "project", "name": "p", "input": ops[-1]["name"],
                "columns": [{"name": n, "expr": e} for n, e in cols]})
    got, job = run(server.url, ops)
    assert [n["implementation"] for n in job.ncas] == [f"software.scan_{fmt}"]
    sql = (f"SELECT {', '.join(f'{DUCK_SPELLING.get(e, e)} AS {q(n)}' for n, e in cols)} FROM t"
           + (f" WHERE {cond}" if cond else ""))
    assert_same_rows(duck, got, sql)


@pytest.mark.parametrize("fmt", FORMATS)
def test_pruning_skips_units_and_shows_in_timeline(server, duck, columnar, fmt):
    schema = [{"name": "k", "type": "int64"}, {"name": "day", "type": "date"}, {"name": "s", "type": "string"}]
    cond = "k >= 13000 AND s < 's015000'"
    ops = [read(fmt, f"sorted.{fmt}", schema), {"kind": "filter", "name": "f", "input": "r", "condition": cond},
           {"kind": "project", "name": "p", "input": "f", "columns": [{"name": "k", "expr": "k"},
                                                                      {"name": "day", "expr": "day"}]}]
    got, job = run(server.url, ops)
    duck.execute(f"CREATE OR REPLACE VIEW srt AS SELECT * FROM read_parquet('{columnar / 'sorted.parquet'}')")
    assert_same_rows(duck, got, f"SELECT k, day FROM srt WHERE {cond}")
    [st] = stage_stats(job)
    unit = "stripes" if fmt == "orc" else "row_groups"
    # units of 2000 rows: 6000..7999 (k >= 13000 keeps 6..9), s < 's015000' keeps 0..7: 6 and 7 remain
    assert st[f"{unit}_total"] == 10 and st[f"{unit}_skipped"] == 8, st
    assert st["rows_skipped"] == 16000 and st["tuples_in"] == 4000


@pytest.mark.parametrize("fmt", FORMATS)
def test_several_files_and_two_threads(server, duck, columnar, fmt):
    schema = [{"name": "k", "type": "int64"}]
    got, job = run(server.url, [read(fmt, f"parts/*.{fmt}", schema)])
    assert sorted(got.column("k").to_pylist()) == [k for i in range(3) for k in range(i * 1000, i * 1000 + 700 + i)]
    # both columns: the thread count weighs the bytes of the columns read (~13 MB here)
    both = [*schema, {"name": "r", "type": "int64"}]
    got, job = run(server.url, [read(fmt, f"big.{fmt}", both),
                                {"kind": "filter", "name": "f", "input": "r", "condition": "k % 1000 = 7"}])
    assert job.outputs["out"].expected_streams == 2  # two worker threads, one stream each
    assert sorted(got.column("k").to_pylist()) == list(range(7, 1_200_000, 1000))
    [st] = stage_stats(job)
    assert st["tuples_in"] == 1_200_000


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mode", ["complete", "partial"])
def test_fused_aggregation_matches_duckdb(server, duck, columnar, fmt, mode):
    duck_view(duck, "t", columnar / "t.jsonl")
    ops = [read(fmt, f"all.{fmt}"), {"kind": "filter", "name": "f", "input": "r", "condition": "a > -500"},
           {"kind": "aggregate", "name": "g", "input": "f", "mode": mode,
            "group_by": [{"name": "flag", "expr": "flag"}],
            "aggregates": [{"name": "n", "fn": "count_star"}, {"name": "sd", "fn": "sum", "expr": "d"},
                           {"name": "mx", "fn": "max", "expr": "s"}]}]
    got, job = run(server.url, ops)
    assert [(n["implementation"], tuple(n["operations"])) for n in job.ncas] == [(f"software.scan_{fmt}", ("r", "f", "g"))]
    if mode == "partial":  # partial states, possibly several per group: finish them here
        duck.register("partials", got)
        got = duck.sql("SELECT flag, sum(n)::BIGINT AS n, sum(sd) AS sd, max(mx) AS mx FROM partials GROUP BY flag").to_arrow_table()
        duck.unregister("partials")
    assert_same_rows(duck, got, "SELECT flag, count(*) AS n, sum(d) AS sd, max(s) AS mx FROM t WHERE a > -500 GROUP BY flag")


@pytest.mark.parametrize("fmt", FORMATS + ["json"])
def test_runtime_filter_through_a_fused_aggregation(server, duck, columnar, fmt):
    """TPC-H Q4's shape: a join probed by a scan's fused aggregation whose group key is the join key.
    The build side's keys reach the scan, which drops rows before aggregating them (its groups
    would be dropped by the join whole), and the answer is DuckDB's."""
    duck_view(duck, "t", columnar / "t.jsonl")
    path = "t.jsonl" if fmt == "json" else f"all.{fmt}"
    build = dict(read(fmt, path), name="rb")
    ops = [build, {"kind": "filter", "name": "bf", "input": "rb", "condition": "id < 300 AND a BETWEEN 0 AND 100"},
           read(fmt, path), {"kind": "filter", "name": "f", "input": "r", "condition": "flag IS NOT NULL"},
           {"kind": "aggregate", "name": "g", "input": "f", "group_by": [{"name": "ga", "expr": "a"}],
            "aggregates": [{"name": "n", "fn": "count_star"}, {"name": "sd", "fn": "sum", "expr": "d"}]},
           {"kind": "join", "name": "j", "build": "bf", "probe": "g", "build_keys": ["a"], "probe_keys": ["ga"],
            "columns": [{"name": "ga", "expr": "ga"}, {"name": "n", "expr": "n"}, {"name": "sd", "expr": "sd"},
                        {"name": "bid", "expr": "id"}]}]
    got, job = run(server.url, ops)
    assert_same_rows(duck, got, "SELECT g.ga, g.n, g.sd, b.id AS bid FROM (SELECT a AS ga, count(*) AS n, "
                                "sum(d) AS sd FROM t WHERE flag IS NOT NULL GROUP BY a) g JOIN "
                                "(SELECT * FROM t WHERE id < 300 AND a BETWEEN 0 AND 100) b ON g.ga = b.a")
    [f] = job.last_status["runtime_filters"]
    assert (f["join"], f["read"], f["handed"]) == ("j", "r", True), f
    assert [p["through"] for p in job.answer["runtime_filters"]] == [["f", "g"]]
    [scan] = f["to"]
    assert job.last_status["timeline"]["ncas"][scan]["stages"][-1]["rf_rows_removed"] > 3000
    assert f["rows_removed"] > 3000


# ------------------------------------------------------------------ bad files


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("damage", ["truncated", "json_named_as_it", "wrong_column_type"])
def test_bad_file_fails_job_naming_it(server, columnar, fmt, damage):
    name = f"bad_{damage}.{fmt}"
    schema = schema_json()
    if damage == "truncated":
        data = (columnar / f"all.{fmt}").read_bytes()
        (columnar / name).write_bytes(data[: len(data) * 2 // 3])
    elif damage == "json_named_as_it":
        (columnar / name).write_bytes((columnar / "t.jsonl").read_bytes())
    else:  # `a` holds strings in this file
        table = pq.read_table(columnar / "all.parquet")
        table = table.set_column(table.column_names.index("a"), "a", table.column("a").cast(pa.string()))
        if fmt == "orc":
            orc.write_table(table, str(columnar / name))
        else:
            pq.write_table(table, str(columnar / name))
    ops = [read(fmt, name, schema), {"kind": "filter", "name": "f", "input": "r", "condition": "a > 0"}]
    with Jumpgate(server.url) as jg:
        with pytest.raises(JobFailed) as e:
            jg.run({"operations": ops + [{"kind": "send", "name": "out", "input": "f", "transport": "tcp",
                                          "host": "127.0.0.1", "port": 0}]}, timeout=300)
    err = e.value.error
    assert (err.get("file") or "").endswith(name), err
    assert ("ORC" if fmt == "orc" else "Parquet") in err["message"] or 'column "a"' in err["message"], err
    if damage == "wrong_column_type":
        assert 'column "a" is string in the file' in err["message"], err
    assert wait_no_children(server) == [], "NCA processes left behind"
    (columnar / name).unlink()


@pytest.mark.parametrize("fmt", FORMATS)
def test_fused_shuffle_partitions_by_jg_hash(server, duck, columnar, fmt):
    from jumpgate.ncas.software import hashing

    duck_view(duck, "t", columnar / "t.jsonl")
    ops = [read(fmt, f"all.{fmt}"), {"kind": "filter", "name": "f", "input": "r", "condition": "a > 0"},
           {"kind": "shuffle", "name": "sh", "input": "f", "keys": ["s", "a"], "partitions": 2}]
    sends = [{"kind": "send", "name": f"sh_{i}", "input": f"sh[{i}]", "transport": "tcp", "host": "127.0.0.1",
              "port": 0} for i in range(2)]
    with Jumpgate(server.url) as jg:
        out = jg.run({"operations": ops + sends}, timeout=300)
        assert [(n["implementation"], n["operations"]) for n in jg.last_job.ncas] == [
            (f"software.scan_{fmt}", ["r", "f", "sh"])]
    assert_same_rows(duck, pa.concat_tables([out["sh_0"], out["sh_1"]]), "SELECT * FROM t WHERE a > 0")
    for p in range(2):
        for row in out[f"sh_{p}"].select(["s", "a"]).to_pylist():
            assert hashing.partition([row["s"], row["a"]], 2, ["string", "int32"]) == p, row
