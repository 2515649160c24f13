"""Trino over Jumpgate against Trino alone: the 22 TPC-H queries in one Trino 476, over Trino's Hive
connector (a file metastore over the files `jumpgate datagen` wrote) and over the `jumpgate`
catalog (the same files through a real `jumpgate serve`), per format, in one run.

Per query: one warm-up on each side (Jumpgate compiles the query's NCAs then; Trino plans and
loads its caches), then `--rounds` rounds alternating Hive and Jumpgate, so both see the same
machine noise. Reported: the median wall time from submit to the last row fetched on each side, the
speedup Hive / Jumpgate, the rows each side returned (they must agree; tests/presto compares the
answers themselves), the geometric mean of the speedups per format, and the queries slower with
Jumpgate by more than 10%. Goals (issue): geometric mean >= 2x over JSON Lines and >= 1.2x over
Parquet, no query slower by more than 10%.

    .venv/bin/python bench/trino_tpch.py                    # SF 1, JSON Lines and Parquet, 3 rounds
    .venv/bin/python bench/trino_tpch.py --sf 0.1 --formats parquet --queries 1,3,6 --rounds 5

Needs what tests/presto needs (scripts/trino-install.sh, clients/presto/build.sh). Data under
.jumpgate/presto-bench/ (JUMPGATE_PRESTO_BENCH_DATA), written once by `jumpgate datagen`.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from jumpgate import datagen  # noqa: E402
from jumpgate.local_server import LocalServer  # noqa: E402
from tests.presto import trino_server  # noqa: E402
from tests.presto.test_tpch import trino_sql  # noqa: E402

TABLES = ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]
HIVE_TYPES = {"boolean": "boolean", "int32": "integer", "int64": "bigint", "float64": "double", "string": "varchar",
              "date": "date"}
HIVE_FORMATS = {"json": "JSON", "parquet": "PARQUET", "orc": "ORC"}
GOALS = {"json": 2.0, "parquet": 1.2}  # geometric-mean speedup the issue asks for


def create_hive_tables(cur, data: Path, fmt: str) -> None:
    cur.execute(f"CREATE SCHEMA hive.tpch_{fmt}")
    cur.fetchall()
    for t in TABLES:
        cols = ", ".join(f"{c['name']} {HIVE_TYPES.get(c['type'], c['type'])}" for c in datagen.read_schema(data / t))
        cur.execute(f"CREATE TABLE hive.tpch_{fmt}.{t} ({cols}) WITH (external_location = 'local://{data / t}', "
                    f"format = '{HIVE_FORMATS[fmt]}')")
        cur.fetchall()


def timed(dbapi, port: int, catalog: str, schema: str, sql: str) -> tuple[float, int]:
    cur = dbapi.connect(host="127.0.0.1", port=port, user="bench", catalog=catalog, schema=schema,
                        request_timeout=3600).cursor()
    t0 = time.perf_counter()
    cur.execute(sql)
    rows = len(cur.fetchall())
    return time.perf_counter() - t0, rows


def bench_format(dbapi, port: int, fmt: str, queries: dict[int, str], wanted: list[int], rounds: int) -> bool:
    sides = (("hive", f"tpch_{fmt}"), ("jumpgate", fmt))
    print(f"\n{fmt}: {'query':>5} {'hive s':>8} {'jumpgate s':>11} {'speedup':>8} {'rows':>6}")
    speedups: list[float] = []
    slower: list[str] = []
    ok = True
    for n in wanted:
        sql = trino_sql(n, queries[n])
        walls: dict[str, list[float]] = {"hive": [], "jumpgate": []}
        rows: dict[str, int] = {}
        try:
            for catalog, schema in sides:  # warm-up
                _, rows[catalog] = timed(dbapi, port, catalog, schema, sql)
            for _ in range(rounds):
                for catalog, schema in sides:
                    wall, rows[catalog] = timed(dbapi, port, catalog, schema, sql)
                    walls[catalog].append(wall)
        except Exception as e:  # noqa: BLE001 - reported per query, the others go on
            print(f"{'':>{len(fmt) + 1}} q{n:02d}  failed: {str(e)[:100]}", flush=True)
            ok = False
            continue
        hive, jg = statistics.median(walls["hive"]), statistics.median(walls["jumpgate"])
        speedup = hive / jg
        speedups.append(speedup)
        if speedup < 1 / 1.1:
            slower.append(f"q{n:02d} ({speedup:.2f}x)")
        agree = "" if rows["hive"] == rows["jumpgate"] else f"  ROWS DIFFER: hive {rows['hive']}"
        ok = ok and not agree
        print(f"{'':>{len(fmt) + 1}} q{n:02d} {hive:8.2f} {jg:11.2f} {speedup:7.2f}x {rows['jumpgate']:>6}{agree}",
              flush=True)
    if speedups:
        geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        goal = GOALS.get(fmt)
        verdict = f" (goal >= {goal:g}x: {'met' if geo >= goal else 'NOT met'})" if goal else ""
        print(f"{fmt}: geometric mean speedup {geo:.2f}x over {len(speedups)} queries{verdict}; "
              f"slower by more than 10%: {', '.join(slower) or 'none'} (medians of {rounds} rounds)")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--formats", default="json,parquet", help="of json, parquet, orc")
    ap.add_argument("--queries", default="", help="comma-separated query numbers (default: all 22)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = set(formats) - set(HIVE_FORMATS)
    if unknown:
        raise SystemExit(f"--formats: {', '.join(sorted(unknown))} not among {', '.join(HIVE_FORMATS)}")
    why = trino_server.missing()
    if why:
        print(f"bench: {why}")
        return 1
    subprocess.run(["bash", str(PROJECT / "clients" / "presto" / "build.sh")], check=True)
    root = Path(os.environ.get("JUMPGATE_PRESTO_BENCH_DATA") or PROJECT / ".jumpgate" / "presto-bench") / f"sf{args.sf:g}"
    for fmt in formats:
        t0 = time.monotonic()
        datagen.generate("tpch", args.sf, fmt, root / fmt, rows_per_file=1_000_000, progress=False)
        print(f"data: {root / fmt} ({time.monotonic() - t0:.1f} s)")
    con = datagen.connect(datagen.BENCHMARKS["tpch"])
    queries = {int(n): q.strip().rstrip(";") for n, q in con.execute("SELECT query_nr, query FROM tpch_queries()").fetchall()}
    con.close()
    wanted = [int(x) for x in args.queries.split(",") if x] or sorted(queries)
    work = Path(tempfile.mkdtemp(prefix="jumpgate-trino-bench-"))
    jg = LocalServer(root, work / "jg-cache", work / "jumpgate.log")
    ok = True
    try:
        catalogs = {
            "tpch": {"connector.name": "tpch"},  # also lets the server's readiness check read a table
            "hive": {"connector.name": "hive", "hive.metastore": "file",
                     "hive.metastore.catalog.dir": f"local://{work / 'metastore'}", "fs.native-local.enabled": "true",
                     "local.location": "/", "hive.non-managed-table-writes-enabled": "false"},
            "jumpgate": {"connector.name": "jumpgate", "jumpgate.url": jg.url, "jumpgate.data-root": str(root)},
        }
        (work / "metastore").mkdir()
        srv = trino_server.TrinoServer(work / "trino", catalogs, {
            "jumpgate": PROJECT / "clients" / "presto" / "target" / "jumpgate-trino-0.1.0",
            "hive": trino_server.HOME / "plugin" / "hive"})
        print(f"Trino ready in {srv.start_seconds:.1f} s; TPC-H SF {args.sf:g}, {args.rounds} rounds per query")
        try:
            from trino import dbapi
            cur = dbapi.connect(host="127.0.0.1", port=srv.port, user="bench", request_timeout=3600).cursor()
            for fmt in formats:
                create_hive_tables(cur, root / fmt, fmt)
            for fmt in formats:
                ok = bench_format(dbapi, srv.port, fmt, queries, wanted, args.rounds) and ok
        finally:
            srv.stop()
    finally:
        jg.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
