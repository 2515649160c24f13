"""The data reduction of the switch's partial aggregation on TPC-DS store_sales (thesis §3.5.6:
"Partial aggregation reduces the output data volume by 43x to 2.29% of the original input stream",
that is tuples into the switch over tuples out of it; here the same ratio, with bytes alongside:
the switch's UDP payload in (datagrams of up to JG_TUPLES_PER_DATAGRAM tuples, docs/switch.md) over
its payload out).

1. Measured, sf 1 and sf 10: the thesis' job (count rows and sum the sales price per item, the price
   as a decimal) through a real server with the switch MODEL (p4/model, the P4 pipeline's logic on
   UDP sockets): JSON scan -> switch.model -> final aggregation -> client, over UDP; tuples into and
   out of the switch from the job's timeline (out = bypassed + spilled + flushed slots), and the
   answer checked against DuckDB.
2. Measured, sf 100's item count (204,000 items) on a sample: sf 100 is 288 M rows (~150 GB of JSON
   here); the sample is sf 10's 28.8 M rows (every column) with each row's item moved to item +
   102,000 for half of the rows (by a hash of ticket and item), which keeps TPC-DS's item distribution (its six-item
   revision pattern, 102,000 being a multiple of 6) over sf 100's 204,000 items, at a tenth of sf
   100's rows per item. Same code path as 1. The reduction at sf 100's full 1,411 rows per item
   follows from the same run: each item held in the table costs one flushed record whatever its
   rows, every bypassed or spilled tuple costs one record, so it is
   (k * in) / (flushed + k * (bypassed + spilled)) with k = 287,997,024 / sample rows.
3. Projected (no server; --project-only runs just this), uniform rows per item in random order:
   the old design (one table of 64K slots, CRC-32, the first key keeps its slot) and this one
   (JG_WAYS ways of JG_WAY_SLOTS slots, a key takes the first way with room) for the item counts
   of sf 1, 10 and 100.

4. Replayed (--replay; after 2): the sample's item keys, in the order the scan reads them and
   sorted, against the table's placement (CRC-32 of rotated bytes, WAYS x 2^BITS) under three
   policies when a key misses in every way: the new key goes downstream (the design), the last
   way's entry is evicted downstream and the new key takes its slot, or the entry with the
   smallest count among the key's ways is evicted (an upper bound: a pipeline cannot compare
   them). A C replay (REPLAY_C below) of the keys alone: records out = misses + evictions +
   occupied slots.

    .venv/bin/python bench/switch_reduction.py [--sf 1 10 100s] [--project-only] [--replay]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jumpgate.client import JobFailed, Jumpgate  # noqa: E402
from jumpgate.conformance import default_data_dir, ensure_data  # noqa: E402
from jumpgate.local_server import LocalServer  # noqa: E402
from jumpgate.ncas.switch import defs  # noqa: E402
from tests.e2e.test_switch import REQUEST  # noqa: E402

# TPC-DS: items and store_sales rows at scale factors 1, 10, 100
SCALES = {1: (18_000, 2_880_404), 10: (102_000, 28_800_991), 100: (204_000, 287_997_024)}


def sample_sf100(out: Path) -> Path:
    """sf 10's store_sales with half of each item's rows moved to item + 102,000: sf 100's items.
    Every column is kept: a scan of the two columns alone runs faster than the model forwards."""
    root = out / "sf100-item-sample"
    target = root / "tpcds" / "store_sales"
    src = default_data_dir(10)
    ensure_data(src, ["tpcds/store_sales"], 10)
    files = sorted((src / "tpcds" / "store_sales").glob("*.jsonl"))
    if len(list(target.glob("*.jsonl"))) == len(files):
        return root
    import duckdb

    target.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    for f in files:
        con.execute(f"""
            COPY (SELECT * REPLACE (ss_item_sk + CASE WHEN hash(ss_ticket_number, ss_item_sk) % 2 = 1
                                                      THEN 102000 ELSE 0 END AS ss_item_sk)
                  FROM read_json('{f}'))
            TO '{target / f.name}.tmp' (FORMAT JSON)""")
        os.replace(f"{target / f.name}.tmp", target / f.name)
    return root


def measured(root: Path, label: str, attempts: int = 3) -> dict:
    """The job through a server with the switch model. The model is one thread without flow control
    (docs/switch.md, "Known limits"): a scan of small JSON rows can outrun it by more than its
    receive buffer holds, and the job then fails with UDP loss; such a run is repeated."""
    os.environ["JUMPGATE_SWITCH_MODEL"] = "1"
    for attempt in range(1, attempts + 1):
        with LocalServer(root) as srv, Jumpgate(srv.url) as jg:
            t0 = time.monotonic()
            try:
                table = jg.run(REQUEST, timeout=3600)["out"]
            except JobFailed as e:
                if "UDP loss" not in str(e) or attempt == attempts:
                    raise
                print(f"  (attempt {attempt}: {e}; again)")
                continue
            wall = time.monotonic() - t0
            status = jg.last_job.status()
            break
    switch = next(n["id"] for n in status["ncas"] if n["implementation"] == "switch.model")
    [phase] = status["timeline"]["ncas"][switch]["stages"]
    import duckdb

    want = duckdb.connect().execute(f"""
        SELECT count(DISTINCT ss_item_sk), count(*), sum(ss_sales_price)
        FROM read_json('{root}/tpcds/store_sales/*.jsonl',
                       columns={{ss_item_sk: 'BIGINT', ss_sales_price: 'DECIMAL(7,2)'}})""").fetchone()
    got = (table.num_rows, sum(table.column("items").to_pylist()),
           sum(v for v in table.column("sales").to_pylist() if v is not None))
    return {"label": label, "rows": phase["tuples_in"], "out": phase["tuples_out"],
            "bytes_in": phase["bytes_in"], "bytes_out": phase["bytes_out"],
            "bypassed": phase["switch_bypassed"], "spilled": phase["switch_spilled"],
            "slots": phase["switch_slots"], "flush_ms": phase["switch_flush_ms"], "job_s": wall,
            "matches_duckdb": got == tuple(want), "items": table.num_rows, "attempts": attempt}


def report(m: dict) -> None:
    flushed = m["out"] - m["bypassed"] - m["spilled"]
    print(f"measured, {m['label']} ({m['items']:,} items) through the switch model ({m['slots']:,} slots):")
    print(f"  {m['rows']:,} tuples in, {m['out']:,} out: {m['rows'] / m['out']:.1f}x reduction "
          f"({100 * m['out'] / m['rows']:.2f}% of the input; bytes {m['bytes_in'] / m['bytes_out']:.1f}x); "
          f"flushed {flushed:,}, bypassed {m['bypassed']:,}, spilled {m['spilled']:,}")
    print(f"  job {m['job_s']:.1f} s (flush {m['flush_ms']:.0f} ms, attempt {m['attempts']}); "
          f"answer matches DuckDB: {m['matches_duckdb']}")


def first_come(items: int, rows_per_item: int, ways: int, way_slots: int, seed: int = 1) -> float:
    """Reduction (tuples in / out) for `items` keys 1..items (8 little-endian bytes, as the tuples
    carry ss_item_sk), `rows_per_item` tuples each in random order: way w's slot is the CRC-32 of
    the key's bytes rotated left by w bytes; a key takes the first way whose slot is free and keeps
    it until the flush; a key with no room sends every tuple downstream."""
    keys = [int(k).to_bytes(8, "little") for k in range(1, items + 1)]
    slot = np.array([[zlib.crc32(b[w:] + b[:w]) & (way_slots - 1) for w in range(ways)] for b in keys])
    taken = np.zeros((ways, way_slots), dtype=bool)
    held = 0
    for i in np.random.default_rng(seed).permutation(items):  # the order of first arrivals
        for w in range(ways):
            if not taken[w, slot[i, w]]:
                taken[w, slot[i, w]] = True
                held += 1
                break
    return items * rows_per_item / (held + (items - held) * rows_per_item)


REPLAY_C = r"""/* Replays a stream of int64 keys against the switch's table and counts the records it emits.
 * policy 0: first key keeps its slot (the implemented design); 1: on a miss in every way, evict
 * the last way's entry (it goes downstream as a partial) and put the new key there; 2: evict the
 * candidate with the smallest count among the ways (an upper bound: a pipeline cannot compare). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static uint32_t T[256];
static uint32_t crc(const uint8_t *p) { uint32_t c = ~0u; for (int i = 0; i < 8; i++) c = T[(c ^ p[i]) & 255] ^ (c >> 8); return ~c; }
int main(int argc, char **argv) {
  for (uint32_t i = 0; i < 256; i++) { uint32_t c = i; for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1; T[i] = c; }
  FILE *f = fopen(argv[1], "rb"); int policy = atoi(argv[2]), ways = atoi(argv[3]), bits = atoi(argv[4]);
  fseek(f, 0, SEEK_END); long n = ftell(f) / 8; fseek(f, 0, SEEK_SET);
  int64_t *keys = malloc(n * 8); if (fread(keys, 8, n, f) != (size_t)n) return 1;
  uint32_t m = 1u << bits; int64_t *K = calloc((size_t)ways * m, 8); uint32_t *C = calloc((size_t)ways * m, 4);
  long out = 0;
  for (long t = 0; t < n; t++) {
    uint8_t b[8], r[8]; memcpy(b, &keys[t], 8);
    uint32_t idx[16]; int done = 0;
    for (int w = 0; w < ways && !done; w++) {
      for (int i = 0; i < 8; i++) r[i] = b[(i + w) % 8];
      idx[w] = crc(r) & (m - 1);
      size_t s = (size_t)w * m + idx[w];
      if (C[s] && K[s] == keys[t]) { C[s]++; done = 1; }
      else if (!C[s]) { K[s] = keys[t]; C[s] = 1; done = 1; }
    }
    if (done) continue;
    if (policy == 0) { out++; continue; }
    int v = ways - 1;
    if (policy == 2) for (int w = 0; w < ways; w++) if (C[(size_t)w * m + idx[w]] < C[(size_t)v * m + idx[v]]) v = w;
    size_t s = (size_t)v * m + idx[v];
    out++; /* the evicted entry's partial */
    K[s] = keys[t]; C[s] = 1;
  }
  for (size_t s = 0; s < (size_t)ways * m; s++) out += C[s] != 0;
  printf("%ld in, %ld out: %.1fx\n", n, out, (double)n / out);
  return 0;
}
"""


def replay(root: Path, cache: Path) -> None:
    import subprocess

    import duckdb

    cache.mkdir(parents=True, exist_ok=True)
    exe = cache / "switch_replay"
    (cache / "switch_replay.c").write_text(REPLAY_C)
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(cache / "switch_replay.c")], check=True)
    keys = duckdb.connect().execute(f"""
        SELECT ss_item_sk FROM read_json('{root}/tpcds/store_sales/*.jsonl', columns={{ss_item_sk: 'BIGINT'}})
        """).fetchnumpy()["ss_item_sk"]
    keys = np.asarray(keys, dtype=np.int64)
    orders = {"scan order": cache / "keys_scan.bin", "sorted": cache / "keys_sorted.bin"}
    keys.tofile(orders["scan order"])
    np.sort(keys).tofile(orders["sorted"])
    print(f"replayed, the sf 100 item sample's {len(keys):,} keys (records out = misses + evictions + occupied):")
    for ways, bits in ((defs.WAYS, defs.SLOT_BITS), (defs.WAYS, defs.SLOT_BITS - 2), (1, 16)):
        for order, path in orders.items():
            res = []
            for policy in (0, 1, 2):
                out = subprocess.run([str(exe), str(path), str(policy), str(ways), str(bits)], check=True,
                                     capture_output=True, text=True).stdout.split(": ")[-1].strip()
                res.append(out)
            print(f"  {ways} x {1 << bits:>6,} slots, {order:>10}: first key keeps its slot {res[0]:>7}, "
                  f"evict the last way's entry {res[1]:>7}, evict the smallest count {res[2]:>7}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", nargs="*", default=["1"], help="1, 10 (generated when missing), 100s (the sample)")
    ap.add_argument("--project-only", action="store_true")
    ap.add_argument("--replay", action="store_true", help="replay the sf 100 item sample's keys (see 4.)")
    args = ap.parse_args()
    if args.replay:
        replay(sample_sf100(default_data_dir(10).parent), Path("/tmp") / "jumpgate-switch-replay")
        return 0
    if not args.project_only:
        for sf in args.sf:
            if sf == "100s":
                t0 = time.monotonic()
                root = sample_sf100(default_data_dir(10).parent)
                print(f"(sf 100 item sample ready in {time.monotonic() - t0:.0f} s: {root})")
                m = measured(root, "sf 100's items, sample of sf 10's rows")
                report(m)
                k = SCALES[100][1] / m["rows"]
                flushed = m["out"] - m["bypassed"] - m["spilled"]
                full = k * m["rows"] / (flushed + k * (m["bypassed"] + m["spilled"]))
                print(f"  at sf 100's rows ({k:.1f}x the sample's per item): {full:.1f}x")
            else:
                t0 = time.monotonic()
                root = default_data_dir(float(sf))
                ensure_data(root, ["tpcds/store_sales"], float(sf))
                print(f"(sf {sf} data ready in {time.monotonic() - t0:.0f} s)")
                report(measured(root, f"TPC-DS store_sales sf {sf}"))
    print("projected, uniform rows per item in random order, first key keeps its slot:")
    for sf, (items, rows) in SCALES.items():
        old = first_come(items, rows // items, 1, 65536)
        new = first_come(items, rows // items, defs.WAYS, defs.WAY_SLOTS)
        print(f"  sf {sf:>3}: {items:>8,} items, {rows // items:>5,} rows each: old (1 x 64K slots) {old:7.1f}x, "
              f"new ({defs.WAYS} ways x {defs.WAY_SLOTS // 1024}K slots) {new:7.1f}x")
    print("thesis (sf 100, its own aggregator): 43x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
