"""Benchmark: TPC-DS over JSON Lines in Spark (local mode), with and without Jumpgate offloading.

    .venv/bin/python bench/spark_tpcds.py --sf 1 [--queries 3,7,19] [--repeat 1] [--no-threshold]

Generates the data once (DuckDB's tpcds extension, see tests/spark/tpcds.py) under
`.jumpgate/bench-spark/sf<SF>`, starts a real Jumpgate server over it, and runs each query in one
Spark session (local[2] by default), first with offloading off then on, after one warm-up run of each
mode (so NCA compilation, cached by the server, and the JVM's JIT are not in the figures). Prints
per-query seconds, the speedup, the geometric-mean speedup, and which queries were slower with
Jumpgate; `--json FILE` saves everything. The threshold heuristic is on unless --no-threshold.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from jumpgate.local_server import LocalServer  # noqa: E402
from tests.spark import tpcds  # noqa: E402
from tests.spark.helpers import base_conf, normalize, run_query  # noqa: E402

JAR = PROJECT / "clients" / "spark" / "target" / "jumpgate-spark-0.1.0.jar"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--queries", default="", help="comma-separated query numbers (default: all Spark can run)")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per mode (the minimum is reported)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-threshold", action="store_true", help="offload everything that can be")
    ap.add_argument("--warmup", choices=["both", "jumpgate", "none"], default="both",
                    help="untimed first runs: of both modes, of the Jumpgate mode only (NCA compilation), or none")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from tests.spark.test_tpcds import SPARK_CANNOT_RUN

    subprocess.run(["bash", str(PROJECT / "clients" / "spark" / "build.sh")], check=True)
    root = PROJECT / ".jumpgate" / "bench-spark" / f"sf{args.sf:g}"
    root.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    tpcds.generate(root, args.sf)
    print(f"data: {root} ({time.monotonic() - t:.0f} s)", flush=True)
    queries = tpcds.queries(root / "tpcds")
    wanted = [int(q) for q in args.queries.split(",") if q] or [n for n in sorted(queries) if n not in SPARK_CANNOT_RUN]

    from pyspark.sql import SparkSession
    srv = LocalServer(root, PROJECT / ".jumpgate" / "bench-spark" / "cache", root / "server.log")
    conf = base_conf(JAR, srv.url, root)
    conf.update({"spark.jumpgate.threshold.enabled": str(not args.no_threshold).lower(),
                 "spark.jumpgate.scoring.enabled": str(not args.no_threshold).lower(),
                 "spark.driver.memory": "8g", "spark.sql.shuffle.partitions": "8"})
    b = SparkSession.builder.master(args.master).appName("jumpgate-bench")
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    tpcds.register(spark, root / "tpcds")
    results = []
    try:
        for n in wanted:
            sql = queries[n].strip().rstrip(";")
            row = {"query": n}
            try:
                for mode in (False, True):
                    if args.warmup == "both" or (args.warmup == "jumpgate" and mode):
                        run_query(spark, sql, enabled=mode)
                    times, last = [], None
                    for _ in range(args.repeat):
                        t = time.monotonic()
                        last = run_query(spark, sql, enabled=mode)
                        times.append(time.monotonic() - t)
                    row["jumpgate_s" if mode else "spark_s"] = min(times)
                    row["rows_on" if mode else "rows_off"] = normalize(last.rows, False)
                    if mode:
                        row["offloaded"] = last.offloaded
                        row["metrics"] = last.metrics
                        row["fallbacks"] = last.fallback_reasons
                row["match"] = row.pop("rows_off") == row.pop("rows_on")
                row["speedup"] = row["spark_s"] / row["jumpgate_s"]
                print(f"q{n:02d}  spark {row['spark_s']:7.2f} s  jumpgate {row['jumpgate_s']:7.2f} s  "
                      f"x{row['speedup']:5.2f}  {'' if row['match'] else 'ANSWERS DIFFER '}"
                      f"{len(row['offloaded'])} offloaded", flush=True)
            except Exception as e:  # a query that fails is reported, not fatal to the benchmark
                row["error"] = str(e).splitlines()[0][:300]
                print(f"q{n:02d}  error: {row['error']}", flush=True)
            results.append(row)
    finally:
        spark.stop()
        srv.stop()
    ok = [r for r in results if "speedup" in r]
    if ok:
        geo = math.exp(statistics.fmean(math.log(r["speedup"]) for r in ok))
        slower = [f"q{r['query']:02d} (x{r['speedup']:.2f})" for r in ok if r["speedup"] < 1.0]
        print(f"\nSF {args.sf:g}, {len(ok)} queries, master {args.master}, threshold "
              f"{'off' if args.no_threshold else 'on'}: geometric-mean speedup x{geo:.2f}; "
              f"total spark {sum(r['spark_s'] for r in ok):.0f} s, jumpgate {sum(r['jumpgate_s'] for r in ok):.0f} s")
        print("slower with Jumpgate: " + (", ".join(slower) or "none"))
        print("answers differ: " + (", ".join(f"q{r['query']:02d}" for r in ok if not r["match"]) or "none"))
    if args.json:
        args.json.write_text(json.dumps({"sf": args.sf, "master": args.master, "results": results}, indent=1))


if __name__ == "__main__":
    main()
