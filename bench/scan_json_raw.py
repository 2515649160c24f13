"""How close is the JSON Lines scan NCA to simdjson's raw parsing speed?

Measures on a generated lineitem-like JSON Lines file, one thread each:
  (a) simdjson alone (bench/simdjson_raw.cpp): the same chunking and iterate_many, every field of
      every object converted by its JSON kind;
  (b) the scan NCA running bench/scan_filter_query.c (filter + projection), driven through the
      process protocol, writing NTF over loopback TCP to a receiver that only counts bytes.
Prints GB/s (10^9 bytes of input per second) of both and the ratio (goal: >= 0.6). For an honest
reading of (b), which converts 5 of 16 fields, it also runs
  (c) the scan NCA with bench/scan_all_columns_query.c: all 16 columns converted, no output.

    .venv/bin/python bench/scan_json_raw.py                 # 1 GB file
    .venv/bin/python bench/scan_json_raw.py --size 300M     # quicker
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jumpgate.ncas.software.build import build_nca  # noqa: E402

BENCH = Path(__file__).resolve().parent
FLAGS = ["-O2", "-march=x86-64-v2", "-mpclmul", "-std=c++17"]  # as the runtime's Makefile


def parse_size(text: str) -> int:
    units = {"K": 10**3, "M": 10**6, "G": 10**9}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def generate(path: Path, size: int) -> None:
    """Lineitem-like rows; ~330 bytes a line. Tails are pre-rendered and reused: parsing cost does
    not depend on whether values repeat, and generating 1 GB stays a matter of seconds."""
    rng = random.Random(42)
    flags, modes = "ANR", ["TRUCK", "MAIL", "SHIP", "AIR", "RAIL", "FOB", "REG AIR"]
    instr = ["DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"]
    words = "carefully final deposits sleep quickly furiously regular ideas haggle blithely".split()

    def date(lo: int, hi: int) -> str:
        y, d = divmod(rng.randint(lo, hi), 365)
        m, d = divmod(d, 28)
        return f"{1992 + y}-{min(m, 11) + 1:02d}-{d + 1:02d}"

    tails = []
    for _ in range(20000):
        qty = rng.randint(1, 50)
        tails.append(
            f'"l_partkey": {rng.randint(1, 200000)}, "l_suppkey": {rng.randint(1, 10000)}, '
            f'"l_linenumber": {rng.randint(1, 7)}, "l_quantity": {qty}, '
            f'"l_extendedprice": {qty * rng.randint(90000, 200000) / 100:.2f}, '
            f'"l_discount": {rng.randint(0, 10) / 100:.2f}, "l_tax": {rng.randint(0, 8) / 100:.2f}, '
            f'"l_returnflag": "{rng.choice(flags)}", "l_linestatus": "{rng.choice("OF")}", '
            f'"l_shipdate": "{date(0, 2500)}", "l_commitdate": "{date(0, 2500)}", '
            f'"l_receiptdate": "{date(0, 2500)}", "l_shipinstruct": "{rng.choice(instr)}", '
            f'"l_shipmode": "{rng.choice(modes)}", '
            f'"l_comment": "{" ".join(rng.choice(words) for _ in range(rng.randint(2, 6)))}"}}\n')
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    written, key = 0, 1
    with open(tmp, "w") as f:
        while written < size:
            block = "".join(f'{{"l_orderkey": {key + i}, {tails[(key + i) % len(tails)]}' for i in range(10000))
            key += 10000
            f.write(block)
            written += len(block)
    tmp.rename(path)


def build_raw(cache: Path) -> Path:
    src = BENCH / "simdjson_raw.cpp"
    digest = hashlib.sha256(src.read_bytes() + " ".join(FLAGS).encode()).hexdigest()[:16]
    exe = cache / f"simdjson_raw-{digest}"
    if not exe.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["g++", *FLAGS, str(src), "-lsimdjson", "-o", str(exe)], check=True)
    return exe


def run_raw(exe: Path, data: Path) -> dict:
    return json.loads(subprocess.run([str(exe), str(data)], check=True, capture_output=True, text=True).stdout)


def run_scan(exe: Path, data: Path, threads: int, outputs: bool = True) -> dict:
    """One scan through the process protocol into a byte-counting loopback receiver."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(threads)
    received = []
    dest = f"dest 0 127.0.0.1 {srv.getsockname()[1]} 0 {threads}\n" if outputs else ""

    def drain() -> None:
        conns = [srv.accept()[0] for _ in range(threads)]
        buf = bytearray(4 << 20)
        for c in conns:  # sequential is fine: the NCA's workers each block only on their own socket
            n = 0
            while k := c.recv_into(buf):
                n += k
            received.append(n)
            c.close()

    t = threading.Thread(target=drain, daemon=True)
    if outputs:
        t.start()
    proc = subprocess.Popen([str(exe), "--bind", "127.0.0.1", "--inputs", "0"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    try:
        assert json.loads(proc.stdout.readline())["event"] == "ready"
        t0 = time.perf_counter()
        proc.stdin.write(f"threads {threads}\nfile {data}\n{dest}execute 0\n".encode())
        proc.stdin.flush()
        while (ev := json.loads(proc.stdout.readline()))["event"] == "log":
            pass
        elapsed = time.perf_counter() - t0
        assert ev["event"] == "done", ev
        if outputs:
            t.join(30)
            assert sum(received) == ev["stats"]["bytes_out"]
        return {**ev["stats"], "seconds_outside": elapsed}
    finally:
        proc.stdin.close()
        proc.wait(10)
        srv.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1G", help="input size, e.g. 1G (default), 300M")
    ap.add_argument("--data", type=Path, help="JSON Lines file to use/create (default under /tmp)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/jumpgate-bench/cache"))
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the best counts")
    ap.add_argument("--threads", type=int, default=1, help="scan NCA threads (the comparison uses 1)")
    args = ap.parse_args()
    size = parse_size(args.size)
    data = args.data or Path(f"/tmp/jumpgate-bench/lineitem-{args.size}.jsonl")
    if not data.exists():
        t0 = time.perf_counter()
        generate(data, size)
        print(f"generated {data} ({data.stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - t0:.1f} s")
    nbytes = data.stat().st_size
    raw_exe = build_raw(args.cache)
    nca = build_nca((BENCH / "scan_filter_query.c").read_text(), "scan_json", args.cache)
    full = build_nca((BENCH / "scan_all_columns_query.c").read_text(), "scan_json", args.cache)
    print(f"scan NCA built in {nca.seconds * 1000:.0f} ms (cached: {nca.cached})")
    run_raw(raw_exe, data)  # warm the page cache
    raw = min((run_raw(raw_exe, data) for _ in range(args.repeat)), key=lambda r: r["seconds"])
    scans = [run_scan(nca.path, data, args.threads) for _ in range(args.repeat)]
    scan = min(scans, key=lambda s: s["wall_ns"])
    every = min((run_scan(full.path, data, args.threads, outputs=False) for _ in range(args.repeat)),
                key=lambda s: s["wall_ns"])
    every_gbs = nbytes / (every["wall_ns"] / 1e9) / 1e9
    raw_gbs = nbytes / raw["seconds"] / 1e9
    scan_gbs = nbytes / (scan["wall_ns"] / 1e9) / 1e9
    print(f"input            {nbytes / 1e9:.3f} GB, {raw['docs']} lines")
    print(f"simdjson raw     {raw_gbs:.3f} GB/s  ({raw['seconds']:.3f} s, every field of every line)")
    print(f"scan NCA ({args.threads} thr) {scan_gbs:.3f} GB/s  ({scan['wall_ns'] / 1e9:.3f} s; "
          f"{scan['tuples_out']} tuples, {scan['bytes_out'] / 1e6:.1f} MB out; "
          f"wait_in {scan['wait_in_ns'] / 1e9:.3f} s, wait_out {scan['wait_out_ns'] / 1e9:.3f} s)")
    print(f"ratio            {scan_gbs / raw_gbs:.2f}  (goal >= 0.6)")
    print(f"scan NCA, all 16 columns converted, no output: {every_gbs:.3f} GB/s "
          f"({every['wall_ns'] / 1e9:.3f} s), ratio {every_gbs / raw_gbs:.2f}")


if __name__ == "__main__":
    main()
