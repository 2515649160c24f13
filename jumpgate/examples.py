"""The README's example job: generate a small sales table as JSON Lines, ask Jumpgate for the big
sales of one item, and print what came back and where the time went."""
from __future__ import annotations

import json
import random
import time
from datetime import date, timedelta
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from .client import Jumpgate

STATES = ["CA", "NY", "TX", "WA", "BC", "ON", "QC", "FL"]
SCHEMA = {"sale_id": "int64", "item_id": "int32", "store_id": "int32", "state": "string",
          "price": "decimal(10,2)", "quantity": "int32", "sold_on": "date"}


def write_sales(path: Path, rows: int, seed: int = 42) -> None:
    rnd = random.Random(seed)
    start = date(2024, 1, 1)
    with open(path, "w") as f:
        for i in range(rows):
            rec = {"sale_id": i, "item_id": rnd.randint(1, 200), "store_id": rnd.randint(1, 50),
                   "state": rnd.choice(STATES), "price": f"{rnd.randint(100, 99999) / 100:.2f}",
                   "quantity": rnd.randint(1, 12), "sold_on": (start + timedelta(days=rnd.randint(0, 365))).isoformat()}
            if rnd.random() < 0.02:
                del rec["state"]  # a missing field reads as NULL
            f.write(json.dumps(rec) + "\n")


def _wait_for_server(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"no Jumpgate server answers at {url}")
        time.sleep(0.2)


def run_example(url: str, data_root: Path, rows: int = 100_000) -> int:
    console = Console()
    data_root.mkdir(parents=True, exist_ok=True)
    path = data_root / "sales.jsonl"
    if not path.exists() or path.stat().st_size == 0:
        console.print(f"writing {rows:,} sales to {path}")
        write_sales(path, rows)
    _wait_for_server(url)
    with Jumpgate(url) as jg:
        sales = jg.read("sales.jsonl", format="json", schema=SCHEMA)
        query = (sales.filter("item_id = 100 AND price * quantity > 500 AND sold_on >= DATE '2024-06-01'")
                 .project(sale_id="sale_id", state="coalesce(state, '??')", revenue="price * quantity",
                          month="month(sold_on)"))
        t0 = time.perf_counter()
        result = query.collect(timeout=300)
        seconds = time.perf_counter() - t0
        status = jg.last_job.status()
    table = Table(title=f"item 100, big sales since June: {result.num_rows} rows in {seconds * 1000:.0f} ms")
    for name in result.column_names:
        table.add_column(name)
    for row in result.slice(0, 10).to_pylist():
        table.add_row(*(str(v) for v in row.values()))
    console.print(table)
    timeline = status["timeline"]
    for nca, info in timeline["ncas"].items():
        for st in info.get("stages", []):
            console.print(f"{nca}: {st['tuples_in']:,} rows in, {st['tuples_out']:,} out, "
                          f"busy {st['busy_ms']:.1f} ms, waiting on output {st['wait_output_ms']:.1f} ms "
                          f"(compile {info['compile']['duration_ms']:.0f} ms, "
                          f"{'cached' if info['compile'].get('cached') else 'built'})")
    return 0
