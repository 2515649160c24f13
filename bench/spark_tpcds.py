"""Benchmark: TPC-DS over JSON Lines, Parquet or ORC in Spark (local mode), with and without Jumpgate
offloading.

    .venv/bin/python bench/spark_tpcds.py --sf 1 [--format json|parquet|orc] [--queries 3,7,19] [--repeat 1]
        [--no-threshold] [--shared-scans]

Generates the data once (DuckDB's tpcds extension, see tests/spark/tpcds.py) as JSON Lines under
`.jumpgate/bench-spark/sf<SF>/tpcds`; with `--format parquet` or `orc`, Spark itself rewrites those
tables once, Snappy-compressed, as its users' files are (`jumpgate/datagen/spark_copy.py`), into
`.jumpgate/bench-spark/sf<SF>/tpcds-<format>`, and the queries read that copy. It starts a real
Jumpgate server over the folder, and runs each query in one
Spark session (local[2] by default): after untimed warm-up runs (`--warmup`: both modes, or only
with offloading on, which compiles the NCAs, cached by the server, and fills the page cache for
both), `--repeat` rounds of one run with offloading off then one with it on; the median of each
mode counts. Prints per-query seconds (with their min-max over several rounds), the speedup, the
geometric-mean speedup, and which queries were slower with Jumpgate; `--json FILE` saves
everything, with per query the last Jumpgate run's jobs (per NCA: wall, busy, CPU time, tuples;
from the server's GET /v1/jobs/{id}) and EXPLAIN's Jumpgate section (what stayed in Spark, and
why). The threshold heuristic and the score are on unless --no-threshold. `--shared-scans` adds
a third mode to every round: the plugin on a second server that shares scans of the same files
running at the same time (docs/shared-scans.md), with its time and the bytes its jobs read (a
shared read counted once) beside the first server's. `--jar FILE` runs a
given build of the plugin instead of building clients/spark (to compare two versions).
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

from jumpgate.datagen.spark_copy import spark_copy  # noqa: E402
from jumpgate.local_server import LocalServer  # noqa: E402
from tests.spark import tpcds  # noqa: E402
from tests.spark.helpers import base_conf, normalize, run_query  # noqa: E402

JAR = PROJECT / "clients" / "spark" / "target" / "jumpgate-spark-0.1.0.jar"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--format", choices=["json", "parquet", "orc"], default="json",
                    help="the tables' files: JSON Lines as generated, or Spark's own Snappy Parquet or ORC copy")
    ap.add_argument("--queries", default="", help="comma-separated queries, as 58 or q58 (default: all Spark can run)")
    ap.add_argument("--repeat", type=int, default=1, help="timed rounds (off, on); the median of each mode counts")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-threshold", action="store_true", help="offload everything that can be")
    ap.add_argument("--warmup", choices=["both", "jumpgate", "none"], default="both",
                    help="untimed first runs: of both modes, of the Jumpgate mode only (NCA compilation), or none")
    ap.add_argument("--shared-scans", action="store_true",
                    help="a third mode in every round: Jumpgate on a second server that shares scans of the same "
                         "files running at the same time (docs/shared-scans.md)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--jar", type=Path, default=JAR,
                    help="the plugin jar (default: build clients/spark and use its jar), e.g. to compare two versions")
    args = ap.parse_args()
    try:  # the names the per-query lines print (q58) or bare numbers, checked before anything starts
        picked = [int(q.strip().lower().removeprefix("q")) for q in args.queries.split(",") if q.strip()]
    except ValueError:
        ap.error(f"--queries {args.queries!r}: expected comma-separated queries such as 58 or q58")

    from tests.spark.test_tpcds import SPARK_CANNOT_RUN

    if args.jar == JAR:
        subprocess.run(["bash", str(PROJECT / "clients" / "spark" / "build.sh")], check=True)
    root = PROJECT / ".jumpgate" / "bench-spark" / f"sf{args.sf:g}"
    root.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    tpcds.generate(root, args.sf)
    print(f"data: {root} ({time.monotonic() - t:.0f} s)", flush=True)
    queries = tpcds.queries(root / "tpcds")
    unknown = [f"q{n:02d}" for n in picked if n not in queries]
    if unknown:
        ap.error(f"--queries: no TPC-DS query {', '.join(unknown)} (1-99)")
    wanted = picked or [n for n in sorted(queries) if n not in SPARK_CANNOT_RUN]

    from pyspark.sql import SparkSession
    # A stop by SIGTERM unwinds like Ctrl-C, so the server and Spark are stopped (finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cache = PROJECT / ".jumpgate" / "bench-spark" / "cache"
    srv = LocalServer(root, cache, root / "server.log")
    # the plugin reads spark.jumpgate.url when it plans each query: each run names its server
    sharing = LocalServer(root, cache, root / "server-shared.log", extra_args=["--shared-scans"]) \
        if args.shared_scans else None
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
    if args.format != "json":
        t = time.monotonic()
        copy = register_copy(spark, root / "tpcds", root / f"tpcds-{args.format}", args.format)
        print(f"{args.format} copy: {copy} ({time.monotonic() - t:.0f} s)", flush=True)
    results = []
    try:
        for n in wanted:
            sql = queries[n].strip().rstrip(";")
            row = {"query": n}
            try:
                if args.warmup in ("both", "jumpgate"):
                    run_query(spark, sql, enabled=True)  # NCA compilation (cached by the server), page cache
                    if sharing is not None:
                        on_server(spark, sharing, lambda q=sql: run_query(spark, q, enabled=True))
                if args.warmup == "both":
                    run_query(spark, sql, enabled=False)
                times: dict[bool | str, list[float]] = {False: [], True: []}
                last = {}
                jobs_since = time.time()  # the start of the last timed run with Jumpgate
                # Off and on alternate, so a change in the machine's load weighs on both alike.
                for _ in range(args.repeat):
                    for mode in (False, True):
                        t, since = time.monotonic(), time.time()
                        last[mode] = run_query(spark, sql, enabled=mode)
                        times[mode].append(time.monotonic() - t)
                        if mode:
                            jobs_since = since
                    if sharing is not None:  # the same plugin on the sharing server
                        t, since = time.monotonic(), time.time()
                        last["shared"] = on_server(spark, sharing, lambda q=sql: run_query(spark, q, enabled=True))
                        times.setdefault("shared", []).append(time.monotonic() - t)
                        shared_since = since
                row["spark_s"] = statistics.median(times[False])
                row["jumpgate_s"] = statistics.median(times[True])
                row["spark_runs"], row["jumpgate_runs"] = times[False], times[True]
                row["offloaded"] = last[True].offloaded
                row["metrics"] = last[True].metrics
                row["fallbacks"] = last[True].fallback_reasons
                row["match"] = normalize(last[False].rows, False) == normalize(last[True].rows, False)
                row["jobs"] = job_stats(srv.url, jobs_since)
                row["bytes_read"] = bytes_read(row["jobs"])
                shared_note = ""
                if sharing is not None:
                    row["shared_s"] = statistics.median(times["shared"])
                    row["shared_runs"] = times["shared"]
                    row["shared_match"] = normalize(last[False].rows, False) == normalize(last["shared"].rows, False)
                    row["shared_jobs"] = job_stats(sharing.url, shared_since)
                    row["shared_bytes_read"] = bytes_read(row["shared_jobs"])
                    shared_note = (f"  sharing {row['shared_s']:7.2f} s x{row['spark_s'] / row['shared_s']:5.2f} "
                                   f"({min(times['shared']):.2f}-{max(times['shared']):.2f}) "
                                   f"{row['shared_bytes_read'] / 2**20:.0f} MiB read"
                                   f"{'' if row['shared_match'] else ' ANSWERS DIFFER'}")
                row["report"] = last[True].report  # EXPLAIN's Jumpgate section: what stayed in Spark, and why
                row["speedup"] = row["spark_s"] / row["jumpgate_s"]
                # Over several rounds the spread (min-max) shows how much of a ratio near 1 is noise.
                spread = (f"  (min-max spark {min(times[False]):.2f}-{max(times[False]):.2f}, jumpgate "
                          f"{min(times[True]):.2f}-{max(times[True]):.2f})" if args.repeat > 1 else "")
                print(f"q{n:02d}  spark {row['spark_s']:7.2f} s  jumpgate {row['jumpgate_s']:7.2f} s  "
                      f"x{row['speedup']:5.2f}{spread}  {'' if row['match'] else 'ANSWERS DIFFER '}"
                      f"{len(row['offloaded'])} offloaded, {row['metrics']['jobs_run']} jobs, "
                      f"{row['bytes_read'] / 2**20:.0f} MiB read{shared_note}", flush=True)
            except Exception as e:  # a query that fails is reported, not fatal to the benchmark
                row["error"] = str(e).splitlines()[0][:300]
                print(f"q{n:02d}  error: {row['error']}", flush=True)
            results.append(row)
            if args.json:  # after every query, so a run stopped early keeps what it measured
                args.json.write_text(json.dumps(summary(args, results), indent=1))
    finally:
        # The server is stopped even when Spark's stop fails (a stop by SIGTERM in a call to the
        # JVM breaks the Py4J connection, and spark.stop() then raises).
        try:
            spark.stop()
        finally:
            srv.stop()
            if sharing is not None:
                sharing.stop()
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
        print(f"\nSF {args.sf:g} over {args.format}, {len(ok)} queries, master {args.master}, threshold "
              f"{'off' if args.no_threshold else 'on'}: geometric-mean speedup x{geo:.2f}; "
              f"total spark {sum(r['spark_s'] for r in ok):.0f} s, jumpgate {sum(r['jumpgate_s'] for r in ok):.0f} s")
        print("slower with Jumpgate: " + (", ".join(slower) or "none"))
        if worst:
            print(f"{len(offl)} queries offloaded something; the least sped up: q{worst['query']:02d} "
                  f"x{worst['speedup']:.2f}; geometric mean over them x"
                  f"{math.exp(statistics.fmean(math.log(r['speedup']) for r in offl)):.2f}")
        print("answers differ: " + (", ".join(f"q{r['query']:02d}" for r in ok if not r["match"]) or "none"))
        if sharing is not None:
            geo_shared = math.exp(statistics.fmean(math.log(r["spark_s"] / r["shared_s"]) for r in ok))
            print(f"with shared scans: geometric-mean speedup x{geo_shared:.2f}; total {sum(r['shared_s'] for r in ok):.0f} s; "
                  f"read {sum(r['shared_bytes_read'] for r in ok) / 2**20:.0f} MiB against "
                  f"{sum(r['bytes_read'] for r in ok) / 2**20:.0f} MiB without sharing")
    if args.json:
        args.json.write_text(json.dumps(summary(args, results), indent=1))


def job_stats(url: str, since: float) -> list[dict]:
    """Where the time of the last timed run with Jumpgate went: per job it ran (created after
    `since`, epoch seconds; dry runs of planning end cancelled and are left out), its execute span
    and per NCA its implementation, wall, busy and CPU time and tuples in and out (the server's
    timeline, GET /v1/jobs/{id}), and the duration of every phase. Only to read the figures: a
    failure leaves the list empty."""
    import httpx

    out = []
    try:
        listed = httpx.get(url + "/v1/jobs", timeout=30).json()
        for line in listed:
            if line["created"] < since or line["state"] in ("cancelled", "compiled"):
                continue
            job = httpx.get(f"{url}/v1/jobs/{line['job_id']}", timeout=30).json()
            impl = {n["id"]: n["implementation"] for n in job.get("ncas", [])}
            ncas = []
            for nid, steps in job["timeline"]["ncas"].items():
                stages = steps.get("stages", [])
                ncas.append({"nca": nid, "implementation": impl.get(nid, "?"),
                             "compile_cached": steps.get("compile", {}).get("cached"),
                             # its share of the job's setup and teardown
                             **{f"{k}_ms": steps[k].get("duration_ms") for k in ("compile", "allocate", "configure",
                                                                                 "destroy") if k in steps},
                             **{k: round(sum(st.get(k) or 0 for st in stages), 1)
                                for k in ("wall_ms", "busy_ms", "wait_input_ms", "wait_output_ms", "cpu_ms",
                                          "tuples_in", "tuples_out", "bytes_in")},
                             "threads": max((st.get("threads") or 0 for st in stages), default=0),
                             # a shared scan's read is every member's: count it once per group
                             "shared_group": next((st["shared_scan"]["group"] for st in stages
                                                   if "shared_scan" in st), None)})
            phases = job["timeline"]["phases"]
            out.append({"job_id": line["job_id"], "state": line["state"],
                        "execute_ms": phases.get("execute", {}).get("duration_ms"),
                        # every phase (parse, mapping, compile, allocate, configure, execute, ...): the
                        # job's fixed cost around its execute span
                        "phases_ms": {k: v.get("duration_ms") for k, v in phases.items()},
                        "ncas": ncas})
    except Exception as e:  # the stats are a reading aid, never fatal to the benchmark
        print(f"  (job stats unavailable: {e})", flush=True)
    return out


def on_server(spark, server: LocalServer, run):
    """`run()` with the plugin pointed at `server`, then back at the default one."""
    default = spark.conf.get("spark.jumpgate.url")
    spark.conf.set("spark.jumpgate.url", server.url)
    try:
        return run()
    finally:
        spark.conf.set("spark.jumpgate.url", default)


def bytes_read(jobs: list[dict]) -> int:
    """What the NCAs of a run read from files and streams, a shared scan's read counted once."""
    seen, total = set(), 0
    for job in jobs:
        for nca in job["ncas"]:
            group = nca.get("shared_group")
            if group is not None:
                if group in seen:
                    continue
                seen.add(group)
            total += int(nca.get("bytes_in") or 0)
    return total


def summary(args: argparse.Namespace, results: list[dict]) -> dict:
    return {"sf": args.sf, "format": args.format, "master": args.master, "shared_scans": args.shared_scans,
            "results": results}


def register_copy(spark, tpcds_json: Path, out: Path, fmt: str) -> Path:
    """Have Spark rewrite the JSON Lines tables (registered in `spark`) as Snappy `fmt` under `out`
    (once: tables already there are kept), then register the copy under the same table names."""
    # Spark's own reader and writer make the copy, not the plugin under test.
    spark.conf.set("spark.jumpgate.enabled", "false")
    try:
        spark_copy(spark, tpcds.TABLES, out, fmt)
    finally:
        spark.conf.set("spark.jumpgate.enabled", "true")
    for table, cols in tpcds.schemas(tpcds_json).items():
        ddl = ", ".join(f"`{c['name']}` {c['type']}" for c in cols)
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.sql(f"CREATE TABLE {table} ({ddl}) USING {fmt} LOCATION '{out / table}'")
    return out


if __name__ == "__main__":
    main()
