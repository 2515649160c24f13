"""The thesis' running example (Figures 3.2, 3.4 and A.1), end to end: total sales of one item per
store state. Two scans, a join, an aggregation and a shuffle to two client endpoints:

    sales  = read(sales).filter(item_id = 100).project(store_id, price)
    stores = read(stores).project(store_id, state)
    agg    = sales.join(stores, on=store_id).project(price, state).aggregate(sum(price) by state)
    s      = agg.shuffle(state, 2);  s[0].send(...);  s[1].send(...)

`jumpgate example` generates the data, runs it against a server and prints the result, the
staged networked pipeline Jumpgate chose and where the time went.
"""
from __future__ import annotations

import json
import random
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from .client import Jumpgate
from .client.builder import Dataflow

STATES = ["CA", "NY", "TX", "WA", "BC", "ON", "QC", "FL", "OR", "MA"]
SALES_SCHEMA = {"sale_id": "int64", "item_id": "int32", "store_id": "int32", "price": "decimal(10,2)"}
STORES_SCHEMA = {"store_id": "int32", "state": "string"}


MARKER = ".jumpgate-example"  # beside the files the example wrote: whose they are


class NotOurData(ValueError):
    """The data root holds a file of the example's name that the example did not write."""


def check_ours(root: Path) -> None:
    """Refuse a data root where `sales.jsonl` or `stores.jsonl` exists but was not written by the
    example (a user's own data of the same name must never be overwritten)."""
    ours = set((root / MARKER).read_text().split()) if (root / MARKER).exists() else set()
    for name in ("sales.jsonl", "stores.jsonl"):
        if (root / name).exists() and name not in ours:
            raise NotOurData(f"{root / name} exists and was not written by `jumpgate example`: it is left alone; "
                             "give the example a directory of its own (--data-root)")


def write_data(root: Path, sales: int, stores: int = 400, seed: int = 42) -> None:
    """The example's two tables; never over files it did not write (NotOurData)."""
    rnd = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    check_ours(root)
    (root / MARKER).write_text("sales.jsonl\nstores.jsonl\n")
    with open(root / "stores.jsonl", "w") as f:
        for s in range(1, stores + 1):
            rec = {"store_id": s, "state": rnd.choice(STATES)}
            if rnd.random() < 0.02:
                rec["state"] = None  # NULL group key
            f.write(json.dumps(rec) + "\n")
    with open(root / "sales.jsonl", "w") as f:
        for i in range(sales):
            rec = {"sale_id": i, "item_id": rnd.randint(1, 200), "store_id": rnd.randint(1, stores + 10),
                   "price": f"{rnd.randint(100, 99999) / 100:.2f}"}
            f.write(json.dumps(rec) + "\n")


def running_example(jg: Jumpgate, item: int = 100) -> Dataflow:
    """The example as a builder program, shuffled into two outputs by state."""
    sales = (jg.read("sales.jsonl", format="json", schema=SALES_SCHEMA, name="read_sales")
             .filter(f"item_id = {item}", name="filter_sales").project("store_id", "price", name="project_sales"))
    stores = jg.read("stores.jsonl", format="json", schema=STORES_SCHEMA, name="read_stores") \
        .project("store_id", "state", name="project_stores")
    joined = sales.join(stores, on=["store_id"], columns=[("price", "price"), ("state", "state")], name="join")
    agg = joined.aggregate(group_by=["state"], total_price="sum(price)", name="agg")
    return agg.shuffle(["state"], 2, name="shuffle")


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


def run_example(url: str, data_root: Path, rows: int = 1_000_000) -> int:
    console = Console(width=max(Console().width, 120))
    try:
        check_ours(data_root)
    except NotOurData as e:
        console.print(f"[red]{e}[/red]")
        return 2
    if not all((data_root / f).exists() for f in ("sales.jsonl", "stores.jsonl")):
        console.print(f"writing {rows:,} sales and 400 stores to {data_root}")
        write_data(data_root, rows)
    _wait_for_server(url)
    with Jumpgate(url) as jg:
        shuffle = running_example(jg)
        t0 = time.perf_counter()
        parts = shuffle.collect(timeout=600)
        seconds = time.perf_counter() - t0
        job = jg.last_job
        status = job.status()
    table = Table(title=f"total sales of item 100 per state ({seconds * 1000:.0f} ms, submit to last row)")
    for col in ("endpoint", "state", "total_price"):
        table.add_column(col)
    for i, part in enumerate(parts):
        for row in sorted(part.to_pylist(), key=lambda r: r["state"] or ""):
            table.add_row(f"shuffle[{i}]", str(row["state"]), str(row["total_price"]))
    console.print(table)
    console.print("staged networked pipeline:")
    ncas = {n["id"]: n for n in job.ncas}
    for s, ids in enumerate(job.stages):
        console.print(f"  stage {s}: " + ";  ".join(
            f"{i} {ncas[i]['implementation']} ({' → '.join(ncas[i]['operations'])})"
            + (f" on {ncas[i]['host']}" if ncas[i].get("host") else "") for i in ids))
    for nca, info in sorted(status["timeline"]["ncas"].items()):
        for st in info.get("stages", []):
            console.print(f"  {nca} stage {st['stage']}: {st['tuples_in']:,} tuples in, {st['tuples_out']:,} out, "
                          f"busy {st['busy_ms']:.1f} ms, waiting on input {st['wait_input_ms']:.1f} ms")
    console.print(f"see {url}/ui/jobs/{job.job_id} for the pipeline, decisions and timeline")
    return 0
