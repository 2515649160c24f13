"""The data reduction of the switch's partial aggregation on TPC-DS store_sales (thesis §3.5.6:
"Partial aggregation reduces the output data volume by 43x to 2.29% of the original input stream").

1. Measured: the thesis' job (count rows and sum the sales price per item, the price as a decimal)
   through a real server with the switch MODEL (p4/model, the P4 pipeline's logic on UDP sockets):
   JSON scan -> switch.model -> final aggregation -> client, over UDP; tuples into and out of the
   switch from the job's timeline, and the answer checked against DuckDB.
2. Projected: the same placement rule (CRC-32 of the key's bytes, 64K slots, the first key keeps a
   slot, every later tuple of a colliding key goes downstream) evaluated in numpy for the item
   counts of larger scale factors, with tuples of each item in random order: what the table can
   hold when items outnumber its slots, as at the thesis' scale factor 100 (204,000 items).

    .venv/bin/python bench/switch_reduction.py [--sf 1]
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

from jumpgate.client import Jumpgate  # noqa: E402
from jumpgate.conformance import default_data_dir, ensure_data  # noqa: E402
from jumpgate.local_server import LocalServer  # noqa: E402
from jumpgate.ncas.switch import defs  # noqa: E402
from tests.e2e.test_switch import REQUEST  # noqa: E402


def measured(sf: float) -> dict:
    root = default_data_dir(sf)
    t0 = time.monotonic()
    ensure_data(root, ["tpcds/store_sales"], sf)
    gen = time.monotonic() - t0
    os.environ["JUMPGATE_SWITCH_MODEL"] = "1"
    with LocalServer(root) as srv, Jumpgate(srv.url) as jg:
        t0 = time.monotonic()
        table = jg.run(REQUEST, timeout=1800)["out"]
        wall = time.monotonic() - t0
        status = jg.last_job.status()
    switch = next(n["id"] for n in status["ncas"] if n["implementation"] == "switch.model")
    [phase] = status["timeline"]["ncas"][switch]["stages"]
    import duckdb

    want = duckdb.connect().execute(f"""
        SELECT count(DISTINCT ss_item_sk), count(*), sum(ss_sales_price)
        FROM read_json('{root}/tpcds/store_sales/*.jsonl',
                       columns={{ss_item_sk: 'BIGINT', ss_sales_price: 'DECIMAL(7,2)'}})""").fetchone()
    got = (table.num_rows, sum(table.column("items").to_pylist()),
           sum(v for v in table.column("sales").to_pylist() if v is not None))
    return {"sf": sf, "rows": phase["tuples_in"], "out": phase["tuples_out"], "bypassed": phase["switch_bypassed"],
            "spilled": phase["switch_spilled"], "job_s": wall, "datagen_s": gen, "matches_duckdb": got == tuple(want),
            "items": table.num_rows}


# TPC-DS: items and store_sales rows at scale factors 1, 10, 100
SCALES = {1: (18_000, 2_880_404), 10: (102_000, 28_800_991), 100: (204_000, 287_997_024)}


def projected(items: int, rows_per_item: int, seed: int = 1) -> float:
    """Reduction (tuples in / out) when `items` keys, `rows_per_item` tuples each in random order,
    share the 64K slots under first-come ownership; the flush adds one record per owned slot."""
    slot = np.array([zlib.crc32(int(k).to_bytes(8, "little")) & (defs.TABLE_SLOTS - 1)
                     for k in range(1, items + 1)])
    rng = np.random.default_rng(seed)
    # first arrival of each key: the minimum of its tuples' random arrival times
    first = rng.beta(1, rows_per_item, size=items)
    order = np.lexsort((first, slot))
    owner = np.ones(items, dtype=bool)
    owner[order[1:]] = slot[order[1:]] != slot[order[:-1]]  # the earliest key of each slot owns it
    tuples_in = items * rows_per_item
    # a non-owner's tuples all go downstream (its first arrival was after the owner's, and the
    # owner keeps the slot until the flush); each owner flushes one record
    tuples_out = int((~owner).sum()) * rows_per_item + int(owner.sum())
    return tuples_in / tuples_out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=1.0)
    args = ap.parse_args()
    m = measured(args.sf)
    print(f"measured, TPC-DS store_sales sf {m['sf']:g} ({m['items']:,} items) through the switch model:")
    print(f"  {m['rows']:,} tuples in, {m['out']:,} out: {m['rows'] / m['out']:.1f}x reduction "
          f"({100 * m['out'] / m['rows']:.2f}% of the input); bypassed {m['bypassed']:,}, spilled {m['spilled']:,}")
    print(f"  job {m['job_s']:.1f} s (data generation {m['datagen_s']:.1f} s); answer matches DuckDB: {m['matches_duckdb']}")
    print("projected, same placement (CRC-32, 64K slots, first key keeps its slot), tuples in random order:")
    for sf, (items, rows) in SCALES.items():
        print(f"  sf {sf:>3}: {items:>8,} items, {rows // items:>5,} rows each: {projected(items, rows // items):7.1f}x")
    print("thesis (sf 100, its own aggregator): 43x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
