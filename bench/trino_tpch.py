"""Benchmark: the 22 TPC-H queries in one Trino 476, over Trino's Hive connector (Parquet files, a
file metastore) and over the `jumpgate` catalog (the same Parquet files through a real
`jumpgate serve`), with wall times per query. Off by default; run by hand:

    .venv/bin/python bench/trino_tpch.py --sf 1 [--format parquet] [--queries 1,3,6]

Needs what tests/presto needs (scripts/trino-install.sh, clients/presto/build.sh). Data under
.jumpgate/presto-bench/ (JUMPGATE_PRESTO_BENCH_DATA), written once by `jumpgate datagen`.
Each query runs `--runs` + 1 times (the first warms up); the best time is printed. Answers are not compared here (tests/presto does that).
"""
from __future__ import annotations

import argparse
import os
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--format", default="parquet", choices=["parquet", "orc"])
    ap.add_argument("--queries", default="")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    why = trino_server.missing()
    if why:
        print(f"bench: {why}")
        return 1
    subprocess.run(["bash", str(PROJECT / "clients" / "presto" / "build.sh")], check=True)
    root = Path(os.environ.get("JUMPGATE_PRESTO_BENCH_DATA") or PROJECT / ".jumpgate" / "presto-bench")
    data = root / f"sf{args.sf:g}" / args.format
    t0 = time.monotonic()
    datagen.generate("tpch", args.sf, args.format, data, rows_per_file=1_000_000, progress=False)
    print(f"data: {data} ({time.monotonic() - t0:.1f} s)")
    con = datagen.connect(datagen.BENCHMARKS["tpch"])
    queries = {int(n): q.strip().rstrip(";") for n, q in con.execute("SELECT query_nr, query FROM tpch_queries()").fetchall()}
    con.close()
    wanted = [int(x) for x in args.queries.split(",") if x] or sorted(queries)
    work = Path(tempfile.mkdtemp(prefix="jumpgate-trino-bench-"))
    jg = LocalServer(data.parent, work / "jg-cache", work / "jumpgate.log")
    schema = f"{args.format}"
    try:
        catalogs = {
            "tpch": {"connector.name": "tpch"},  # also lets the server's readiness check read a table
            "hive": {"connector.name": "hive", "hive.metastore": "file",
                     "hive.metastore.catalog.dir": f"local://{work / 'metastore'}", "fs.native-local.enabled": "true",
                     "local.location": "/", "hive.non-managed-table-writes-enabled": "false"},
            "jumpgate": {"connector.name": "jumpgate", "jumpgate.url": jg.url, "jumpgate.data-root": str(data.parent)},
        }
        (work / "metastore").mkdir()
        srv = trino_server.TrinoServer(work / "trino", catalogs, {
            "jumpgate": PROJECT / "clients" / "presto" / "target" / "jumpgate-trino-0.1.0",
            "hive": trino_server.HOME / "plugin" / "hive"})
        print(f"Trino ready in {srv.start_seconds:.1f} s")
        try:
            from trino import dbapi
            conn = dbapi.connect(host="127.0.0.1", port=srv.port, user="bench", request_timeout=3600)
            cur = conn.cursor()
            cur.execute("CREATE SCHEMA hive.tpch")
            cur.fetchall()
            for t in TABLES:
                cols = ", ".join(f"{c['name']} {HIVE_TYPES.get(c['type'], c['type'])}" for c in datagen.read_schema(data / t))
                cur.execute(f"CREATE TABLE hive.tpch.{t} ({cols}) WITH (external_location = 'local://{data / t}', "
                            f"format = '{args.format.upper()}')")
                cur.fetchall()
            print(f"{'query':>5} {'hive s':>8} {'jumpgate s':>11} {'rows':>6}")
            totals = {"hive": 0.0, "jumpgate": 0.0}
            for n in wanted:
                line = [f"q{n:02d}"]
                rows = None
                for cat, sch in (("hive", "tpch"), ("jumpgate", schema)):
                    best = None
                    try:
                        for _ in range(args.runs + 1):
                            c = dbapi.connect(host="127.0.0.1", port=srv.port, user="bench", catalog=cat, schema=sch,
                                              request_timeout=3600).cursor()
                            s0 = time.monotonic()
                            c.execute(trino_sql(n, queries[n]))
                            rows = len(c.fetchall())
                            took = time.monotonic() - s0
                            best = took if best is None else min(best, took)
                        totals[cat] += best
                        line.append(f"{best:8.2f}")
                    except Exception as e:  # noqa: BLE001 - reported per query
                        line.append(f"failed: {str(e)[:80]}")
                print(f"{line[0]:>5} {line[1]:>8} {line[2]:>11} {rows if rows is not None else '-':>6}", flush=True)
            print(f"total  {totals['hive']:8.2f} {totals['jumpgate']:11.2f}   (SF {args.sf:g}, {args.format}, best of {args.runs + 1} runs, the first one warming up)")
        finally:
            srv.stop()
    finally:
        jg.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
