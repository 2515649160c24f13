"""Benchmark: shared scans (docs/shared-scans.md) on a wave of TPC-DS jobs over JSON Lines.

    .venv/bin/python bench/shared_scans.py [--sf 1] [--rounds 3] [--json FILE]

The wave is the subqueries of TPC-DS Q9 (five quantity ranges: count, average discount and
average net paid) and Q28 (six buckets: average, count, min and max of the list price), each its
own job over store_sales, submitted at the same time, as a dashboard or a Spark query with
several scalar subqueries submits them. Two servers over the same data, one with `--shared-scans`
and one without, both admitting the whole wave at once (`--overcommit`), run it in alternating
rounds after an untimed warm-up of each (compiles, page cache). Prints per mode the median wave
time (min-max), the bytes the scans read (a shared scan's read counted once) and the CPU time of
the scans, the ratios, and checks that both modes return the same answers.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from jumpgate.client import Jumpgate  # noqa: E402
from jumpgate.conformance import default_data_dir, ensure_data  # noqa: E402
from jumpgate.local_server import LocalServer  # noqa: E402

SS = "tpcds/store_sales/*.jsonl"
Q9_RANGES = [(1, 20), (21, 40), (41, 60), (61, 80), (81, 100)]
Q28_BUCKETS = [(0, 5, 8, 459, 57), (6, 10, 90, 2323, 31), (11, 15, 142, 12214, 79), (16, 20, 135, 6071, 38),
               (21, 25, 122, 836, 17), (26, 30, 154, 7326, 7)]


def read(columns: list[tuple[str, str]]) -> dict:
    return {"kind": "read", "name": "ss", "path": SS, "format": "json",
            "schema": [{"name": n, "type": t} for n, t in columns]}


def job(name: str, columns, condition: str, aggregates: list[tuple[str, str, str | None]]) -> dict:
    aggs = [{"name": n, "fn": fn, **({"expr": e} if e else {})} for n, fn, e in aggregates]
    return {"name": name, "operations": [
        read(columns), {"kind": "filter", "name": "f", "input": "ss", "condition": condition},
        {"kind": "aggregate", "name": "a", "input": "f", "group_by": [], "aggregates": aggs},
        {"kind": "send", "name": "out", "input": "a", "transport": "tcp", "host": "127.0.0.1", "port": 0}]}


def wave() -> dict[str, dict]:
    jobs = {}
    for k, (lo, hi) in enumerate(Q9_RANGES, 1):
        jobs[f"q9_b{k}"] = job(f"q9_b{k}", [("ss_quantity", "int64"), ("ss_ext_discount_amt", "decimal(7,2)"),
                                            ("ss_net_paid", "decimal(7,2)")],
                               f"ss_quantity BETWEEN {lo} AND {hi}",
                               [("n", "count_star", None), ("disc", "avg", "ss_ext_discount_amt"),
                                ("paid", "avg", "ss_net_paid")])
    for k, (qlo, qhi, lp, cp, wc) in enumerate(Q28_BUCKETS, 1):
        jobs[f"q28_b{k}"] = job(f"q28_b{k}", [("ss_quantity", "int64"), ("ss_list_price", "decimal(7,2)"),
                                              ("ss_coupon_amt", "decimal(7,2)"), ("ss_wholesale_cost", "decimal(7,2)")],
                                f"ss_quantity BETWEEN {qlo} AND {qhi} AND (ss_list_price BETWEEN {lp} AND {lp + 10} "
                                f"OR ss_coupon_amt BETWEEN {cp} AND {cp + 1000} "
                                f"OR ss_wholesale_cost BETWEEN {wc} AND {wc + 20})",
                                [("lp", "avg", "ss_list_price"), ("cnt", "count", "ss_list_price"),
                                 ("lo", "min", "ss_list_price"), ("hi", "max", "ss_list_price")])
    return jobs


def run_wave(url: str, jobs: dict[str, dict]) -> tuple[float, dict[str, list], dict[str, dict]]:
    """Submit every job at once; the wave's seconds, each job's rows and its last status."""
    answers: dict[str, list] = {}
    statuses: dict[str, dict] = {}
    errors: list[str] = []

    def one(name: str, request: dict) -> None:
        try:
            with Jumpgate(url) as jg:
                answers[name] = jg.run(request, timeout=1800)["out"].to_pylist()
                statuses[name] = jg.last_job.last_status
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{name}: {e}")

    threads = [threading.Thread(target=one, args=item) for item in jobs.items()]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    if errors:
        raise SystemExit("jobs failed:\n" + "\n".join(errors))
    return seconds, answers, statuses


def scan_totals(statuses: dict[str, dict]) -> tuple[int, float, int]:
    """(bytes the scans read, their CPU seconds, scan processes): a shared scan counted once."""
    seen: set[str] = set()
    read_bytes, cpu_ms, processes = 0, 0.0, 0
    for status in statuses.values():
        for nca in status["timeline"]["ncas"].values():
            for stage in nca.get("stages", []):
                if not stage.get("bytes_in") or stage.get("tuples_in") is None:
                    continue
                shared = stage.get("shared_scan")
                if shared is not None:
                    if shared["group"] in seen:
                        continue
                    seen.add(shared["group"])
                read_bytes += stage["bytes_in"]
                cpu_ms += stage.get("cpu_ms", 0.0)
                processes += 1
    return read_bytes, cpu_ms / 1000, processes


def rounded(rows: list) -> list:
    return [{k: round(v, 6) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--overcommit", type=float, default=12.0,
                    help="both servers admit the whole wave at once (11 jobs of 2 threads on 2 cores)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    root = default_data_dir(args.sf)
    print(f"data: {root} (store_sales at sf {args.sf:g}; generated on first use)", flush=True)
    ensure_data(root, ["tpcds/store_sales"], args.sf, progress=True)
    size = sum(p.stat().st_size for p in (root / "tpcds" / "store_sales").glob("*.jsonl"))
    jobs = wave()
    logs = PROJECT / ".jumpgate" / "bench-shared"
    logs.mkdir(parents=True, exist_ok=True)
    common = ["--overcommit", str(args.overcommit)]
    servers = {"alone": LocalServer(root, None, logs / "alone.log", extra_args=common),
               "shared": LocalServer(root, None, logs / "shared.log",
                                     extra_args=[*common, "--shared-scans", "--shared-scan-wait", "2",
                                                 "--shared-scan-linger", "0.2"])}
    results: dict[str, list[dict]] = {m: [] for m in servers}
    try:
        answers = {}
        for mode, srv in servers.items():  # untimed: compiles, the page cache
            _, answers[mode], _ = run_wave(srv.url, jobs)
        if {k: rounded(v) for k, v in answers["alone"].items()} != {k: rounded(v) for k, v in answers["shared"].items()}:
            raise SystemExit("the two modes returned different answers")
        for r in range(args.rounds):
            for mode, srv in servers.items():
                seconds, _, statuses = run_wave(srv.url, jobs)
                read_bytes, cpu_s, processes = scan_totals(statuses)
                results[mode].append({"seconds": seconds, "bytes_read": read_bytes, "scan_cpu_s": cpu_s,
                                      "scan_processes": processes})
                print(f"round {r + 1} {mode:6}: {seconds:6.2f} s, scans read {read_bytes / 2**20:8.1f} MiB "
                      f"in {processes:2} processes, {cpu_s:6.2f} s of CPU", flush=True)
    finally:
        for srv in servers.values():
            srv.stop()

    def med(mode: str, key: str) -> float:
        return statistics.median(x[key] for x in results[mode])

    print(f"\nTPC-DS Q9 + Q28 subqueries, {len(jobs)} jobs at once over store_sales (sf {args.sf:g}, "
          f"{size / 2**20:.0f} MiB of JSON Lines), medians of {args.rounds} rounds:")
    for mode in servers:
        lo, hi = min(x["seconds"] for x in results[mode]), max(x["seconds"] for x in results[mode])
        print(f"  {mode:6}: {med(mode, 'seconds'):6.2f} s ({lo:.2f}-{hi:.2f}), read "
              f"{med(mode, 'bytes_read') / 2**20:8.1f} MiB, scan CPU {med(mode, 'scan_cpu_s'):6.2f} s")
    print(f"  sharing: {med('alone', 'seconds') / med('shared', 'seconds'):.2f}x faster, "
          f"{med('alone', 'bytes_read') / max(1, med('shared', 'bytes_read')):.1f}x fewer bytes read, "
          f"{med('alone', 'scan_cpu_s') / max(1e-9, med('shared', 'scan_cpu_s')):.2f}x less scan CPU")
    if args.json:
        args.json.write_text(json.dumps({"sf": args.sf, "jobs": len(jobs), "bytes": size, "rounds": results}, indent=1))


if __name__ == "__main__":
    main()
