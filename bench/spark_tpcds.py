"""Benchmark: TPC-DS over JSON Lines in Spark (local mode), with and without Jumpgate offloading.

    .venv/bin/python bench/spark_tpcds.py --sf 1 [--queries 3,7,19] [--repeat 1] [--no-threshold]

Generates the data once (DuckDB's tpcds extension, see tests/spark/tpcds.py) under
`.jumpgate/bench-spark/sf<SF>`, starts a real Jumpgate server over it, and runs each query in one
Spark session (local[2] by default): after untimed warm-up runs (`--warmup`: both modes, or only
with offloading on, which compiles the NCAs, cached by the server, and fills the page cache for
both), `--repeat` rounds of one run with offloading off then one with it on; the median of each
mode counts. Prints per-query seconds (with their min-max over several rounds), the speedup, the
geometric-mean speedup, and which queries were slower with Jumpgate; `--json FILE` saves
everything. The threshold heuristic and the score are on unless --no-threshold. `--jar FILE` runs
a given build of the plugin instead of building clients/spark (to compare two versions).
"""
from __future__ import annotations

import argparse
import json
import math
import signal
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
    ap.add_argument("--repeat", type=int, default=1, help="timed rounds (off, on); the median of each mode counts")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-threshold", action="store_true", help="offload everything that can be")
    ap.add_argument("--warmup", choices=["both", "jumpgate", "none"], default="both",
                    help="untimed first runs: of both modes, of the Jumpgate mode only (NCA compilation), or none")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--jar", type=Path, default=JAR,
                    help="the plugin jar (default: build clients/spark and use its jar), e.g. to compare two versions")
    args = ap.parse_args()

    from tests.spark.test_tpcds import SPARK_CANNOT_RUN

    if args.jar == JAR:
        subprocess.run(["bash", str(PROJECT / "clients" / "spark" / "build.sh")], check=True)
    root = PROJECT / ".jumpgate" / "bench-spark" / f"sf{args.sf:g}"
    root.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    tpcds.generate(root, args.sf)
    print(f"data: {root} ({time.monotonic() - t:.0f} s)", flush=True)
    queries = tpcds.queries(root / "tpcds")
    wanted = [int(q) for q in args.queries.split(",") if q] or [n for n in sorted(queries) if n not in SPARK_CANNOT_RUN]

    from pyspark.sql import SparkSession
    # A stop by SIGTERM unwinds like Ctrl-C, so the server and Spark are stopped (finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    srv = LocalServer(root, PROJECT / ".jumpgate" / "bench-spark" / "cache", root / "server.log")
    conf = base_conf(args.jar, srv.url, root)
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
                if args.warmup in ("both", "jumpgate"):
                    run_query(spark, sql, enabled=True)  # NCA compilation (cached by the server), page cache
                if args.warmup == "both":
                    run_query(spark, sql, enabled=False)
                times: dict[bool, list[float]] = {False: [], True: []}
                last = {}
                # Off and on alternate, so a change in the machine's load weighs on both alike.
                for _ in range(args.repeat):
                    for mode in (False, True):
                        t = time.monotonic()
                        last[mode] = run_query(spark, sql, enabled=mode)
                        times[mode].append(time.monotonic() - t)
                row["spark_s"] = statistics.median(times[False])
                row["jumpgate_s"] = statistics.median(times[True])
                row["spark_runs"], row["jumpgate_runs"] = times[False], times[True]
                row["offloaded"] = last[True].offloaded
                row["metrics"] = last[True].metrics
                row["fallbacks"] = last[True].fallback_reasons
                row["match"] = normalize(last[False].rows, False) == normalize(last[True].rows, False)
                row["speedup"] = row["spark_s"] / row["jumpgate_s"]
                # Over several rounds the spread (min-max) shows how much of a ratio near 1 is noise.
                spread = (f"  (min-max spark {min(times[False]):.2f}-{max(times[False]):.2f}, jumpgate "
                          f"{min(times[True]):.2f}-{max(times[True]):.2f})" if args.repeat > 1 else "")
                print(f"q{n:02d}  spark {row['spark_s']:7.2f} s  jumpgate {row['jumpgate_s']:7.2f} s  "
                      f"x{row['speedup']:5.2f}{spread}  {'' if row['match'] else 'ANSWERS DIFFER '}"
                      f"{len(row['offloaded'])} offloaded, {row['metrics']['jobs_run']} jobs", flush=True)
            except Exception as e:  # a query that fails is reported, not fatal to the benchmark
                row["error"] = str(e).splitlines()[0][:300]
                print(f"q{n:02d}  error: {row['error']}", flush=True)
            results.append(row)
            if args.json:  # after every query, so a run stopped early keeps what it measured
                args.json.write_text(json.dumps({"sf": args.sf, "master": args.master, "results": results}, indent=1))
    finally:
        spark.stop()
        srv.stop()
    ok = [r for r in results if "speedup" in r]
    if ok:
        geo = math.exp(statistics.fmean(math.log(r["speedup"]) for r in ok))
        # A query with nothing offloaded runs the same plan both times: its ratio is the machine's noise.
        # Jobs run, not the final plan's nodes: adaptive execution drops the nodes of finished stages.
        def ran_jobs(r: dict) -> bool:
            return bool(r["offloaded"] or r["metrics"].get("jobs_run"))
        slower = [f"q{r['query']:02d} (x{r['speedup']:.2f}{'' if ran_jobs(r) else ', nothing offloaded'})"
                  for r in ok if r["speedup"] < 1.0]
        offl = [r for r in ok if ran_jobs(r)]
        worst = min(offl, key=lambda r: r["speedup"]) if offl else None
        print(f"\nSF {args.sf:g}, {len(ok)} queries, master {args.master}, threshold "
              f"{'off' if args.no_threshold else 'on'}: geometric-mean speedup x{geo:.2f}; "
              f"total spark {sum(r['spark_s'] for r in ok):.0f} s, jumpgate {sum(r['jumpgate_s'] for r in ok):.0f} s")
        print("slower with Jumpgate: " + (", ".join(slower) or "none"))
        if worst:
            print(f"{len(offl)} queries offloaded something; the least sped up: q{worst['query']:02d} "
                  f"x{worst['speedup']:.2f}; geometric mean over them x"
                  f"{math.exp(statistics.fmean(math.log(r['speedup']) for r in offl)):.2f}")
        print("answers differ: " + (", ".join(f"q{r['query']:02d}" for r in ok if not r["match"]) or "none"))
    if args.json:
        args.json.write_text(json.dumps({"sf": args.sf, "master": args.master, "results": results}, indent=1))


if __name__ == "__main__":
    main()
