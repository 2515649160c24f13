"""Five TPC-H query bottoms end to end: Jumpgate against DuckDB (one thread and all threads) and
against pyarrow (its file reader plus pyarrow.compute), on the same files.

Queries: Q1 (lineitem filter + group by with sums/avgs/count), Q3 (customer ⋈ orders ⋈ lineitem,
filters, aggregation, top 10), Q6 (filter + global sum), Q12 (lineitem ⋈ orders, CASE sums), Q14
(lineitem ⋈ part, conditional sum, ratio). Jumpgate runs each bottom with the aggregation complete
inside it (the conformance suite's requests, jumpgate/conformance/requests, with Q3's partial/final
pair folded into one complete aggregate), so the client receives the small final result; the top
that is left (ORDER BY, LIMIT, Q14's division) runs on the received Arrow table and is timed.
DuckDB runs the whole TPC-H query over views on the same files (`SET threads = 1`, and all
threads); pyarrow reads only the needed columns (for JSON: `pyarrow.json.read_json` with an
explicit schema, ignoring other fields) and computes with pyarrow.compute / group_by / join.

Times are end to end: for Jumpgate from submit to the last row received and decoded (plus the top);
for DuckDB from `execute` to the Arrow result; for pyarrow from the first read to the answer. Every
engine first runs each query once (that run is Jumpgate's cold compile: the server starts on an
empty NCA cache with the NCA runtime prebuilt, so it compiles each query's NCAs then; it also puts
the files in the page cache for everyone), then the three answers are compared (floats to a
relative 1e-9), then `--runs` rounds run the engines in turn, and medians are reported with the
ratios engine/Jumpgate (> 1: Jumpgate is faster). CPU seconds are reported next to wall time (for
Jumpgate: the server, its reaped NCA processes and the client), because on a loaded machine an
engine's threads do not get the cores its wall time assumes. Where the goal is not met (Jumpgate
at least as fast as DuckDB with one thread by CPU time and with all threads by wall time), or with
--timelines everywhere, the timeline of Jumpgate's median run (GET /v1/jobs/{id}) is
printed: per NCA its setup, and per stage its threads, wall, busy and waits per thread, tuples in
and out. A Jumpgate job that fails or outlives --job-timeout is reported and re-run (--retries).
`--alt-cores N` adds a second server with `--cores N` as another engine, to measure the thread
assignment in the same run; `--no-rf-engine` adds one with `--no-runtime-filters` (engine
jg-no-rf), to measure the runtime filters from joins' build sides to their probe sides' scans;
`--no-fork-engine` one with `--fork-servers 0` (engine jg-no-fork), every NCA process exec'ed
instead of forked from its binary's loaded copy (docs/nca-process-protocol.md, "Fork servers").

Formats: `--format json` (JSON Lines), `orc`, `parquet`; several may be given. ORC and Parquet run
DuckDB on the Parquet copy (DuckDB reads no ORC) and pyarrow on the format itself. A format whose
scan NCA the server does not have is reported and skipped. Data is generated once with
`jumpgate datagen` under --data-dir (tpch-sf<SF>-<format>/tpch/<table>/).

    .venv/bin/python bench/tpch_bottoms.py                        # JSON Lines, SF 1, 5 runs
    .venv/bin/python bench/tpch_bottoms.py --format json,parquet,orc --runs 3
    .venv/bin/python bench/tpch_bottoms.py --queries q6,q14 --no-pyarrow --jg-cores 4
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import datetime as dt
import json
import math
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jumpgate.agent.fork_server import is_fork_server  # noqa: E402
from jumpgate.client import Jumpgate  # noqa: E402
from jumpgate.client.errors import ClientError, RequestRejected  # noqa: E402
from jumpgate.datagen.generate import read_schema  # noqa: E402
from jumpgate.local_server import LocalServer  # noqa: E402

REQUESTS = ROOT / "jumpgate" / "conformance" / "requests"
EXT = {"json": "jsonl", "parquet": "parquet", "orc": "orc"}
TABLES = ("lineitem", "orders", "customer", "part")
DUCK_TYPES = {"boolean": "BOOLEAN", "int32": "INTEGER", "int64": "BIGINT", "float64": "DOUBLE",
              "string": "VARCHAR", "date": "DATE"}
ENGINES = ("jumpgate", "duckdb-1T", "duckdb-all", "pyarrow")


def D(text: str) -> pa.Scalar:
    return pa.scalar(Decimal(text), pa.decimal128(15, 2))


def day(text: str) -> pa.Scalar:
    return pa.scalar(dt.date.fromisoformat(text), pa.date32())


# ------------------------------------------------------------------ data


def ensure_data(data_dir: Path, sf: float, fmt: str) -> Path:
    """The data root of one format (idempotent: jumpgate datagen skips complete tables)."""
    from jumpgate.datagen import generate

    root = data_dir / f"tpch-sf{sf:g}-{fmt}"
    (root / "tpch").mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    result = generate("tpch", sf, fmt, root / "tpch", tables=list(TABLES), progress=False)
    if result.written:
        print(f"generated {', '.join(result.written)} as {fmt} in {time.perf_counter() - t0:.0f} s under {root}")
    return root


def table_schema(root: Path, table: str) -> list[dict]:
    return read_schema(root / "tpch" / table)


def table_files(root: Path, table: str, fmt: str) -> list[str]:
    return sorted(str(p) for p in (root / "tpch" / table).glob(f"*.{EXT[fmt]}"))


def duck_type(t: str) -> str:
    if t.startswith("decimal("):
        return t.upper()
    return DUCK_TYPES[t]


# ------------------------------------------------------------------ the three engines' readers


class ArrowReader:
    """Reads the needed columns of a table with pyarrow, typed as its schema file says."""

    def __init__(self, root: Path, fmt: str) -> None:
        self.root, self.fmt = root, fmt
        self.types = {t: {c["name"]: c["type"] for c in table_schema(root, t)} for t in TABLES}

    @staticmethod
    def arrow_type(t: str) -> pa.DataType:
        if t.startswith("decimal("):
            p, s = t[8:-1].split(",")
            return pa.decimal128(int(p), int(s))
        return {"int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(), "string": pa.string(),
                "boolean": pa.bool_(), "date": pa.date32()}[t]

    def read(self, table: str, columns: list[str]) -> pa.Table:
        files = table_files(self.root, table, self.fmt)
        types = self.types[table]
        if self.fmt == "json":
            import pyarrow.json as pj

            # The JSON reader cannot parse "YYYY-MM-DD" into date32: read dates as strings, then cast.
            schema = pa.schema([(c, pa.string() if types[c] == "date" else self.arrow_type(types[c]))
                                for c in columns])
            opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
            t = pa.concat_tables([pj.read_json(f, parse_options=opts) for f in files])
            for i, c in enumerate(columns):
                if types[c] == "date":
                    t = t.set_column(i, c, pc.cast(t[c], pa.date32()))
            return t
        import pyarrow.dataset as ds

        t = ds.dataset(files, format=self.fmt).to_table(columns=columns)
        for i, c in enumerate(columns):  # ORC has no decimal(15,2) -> keep the contract's types
            want = self.arrow_type(types[c])
            if t.schema.field(c).type != want:
                t = t.set_column(i, c, pc.cast(t[c], want))
        return t


def duck_connect(root: Path, fmt: str, threads: int | None):
    """A DuckDB connection with one view per table over the files (Parquet for ORC and Parquet)."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {threads or os.cpu_count() or 1}")
    for t in TABLES:
        if fmt == "json":
            cols = ", ".join(f"'{c['name']}': '{duck_type(c['type'])}'" for c in table_schema(root, t))
            src = (f"read_json('{root}/tpch/{t}/*.jsonl', format='newline_delimited', "
                   f"columns={{{cols}}})")
        else:
            src = f"read_parquet('{root}/tpch/{t}/*.parquet')"
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM {src}")
    return con


# ------------------------------------------------------------------ the queries


def conformance_request(name: str) -> dict:
    return json.loads((REQUESTS / f"{name}.json").read_text())["request"]


def sort(table: pa.Table, keys: list[tuple[str, str]]) -> pa.Table:
    return table.sort_by(keys)


@dataclass
class Query:
    name: str
    title: str
    request: dict  # the Jumpgate request (JSON Lines paths; adapted per format)
    top: Callable[[pa.Table], pa.Table]  # what the client does with what it receives
    sql: str  # the whole query, for DuckDB
    arrow: Callable[[ArrowReader], pa.Table]
    columns: list[str]  # the answer's columns, in order, for every engine


def q03_request() -> dict:
    """tpch_q03 with its partial + final aggregates folded into one complete aggregate."""
    req = conformance_request("tpch_q03")
    ops = [op for op in req["operations"] if op["name"] != "final"]
    for op in ops:
        if op["name"] == "partial":
            op["name"] = "revenue_by_order"
            op.pop("mode")
        if op["kind"] == "send":
            op["input"] = "revenue_by_order"
    req["operations"], req["name"] = ops, "tpch_q03_complete"
    return req


def arrow_q1(r: ArrowReader) -> pa.Table:
    li = r.read("lineitem", ["l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag",
                             "l_linestatus", "l_shipdate"])
    li = li.filter(pc.less_equal(li["l_shipdate"], day("1998-09-02")))
    disc_price = pc.multiply(li["l_extendedprice"], pc.subtract(D("1"), li["l_discount"]))
    disc_price = pc.cast(disc_price, pa.decimal128(20, 4))  # (32,4) times (16,2) would exceed 38 digits
    t = pa.table({
        "l_returnflag": li["l_returnflag"], "l_linestatus": li["l_linestatus"],
        "qty": li["l_quantity"], "price": li["l_extendedprice"], "disc_price": disc_price,
        "charge": pc.multiply(disc_price, pc.add(D("1"), li["l_tax"])),
        # pyarrow's mean of a decimal keeps the input's scale: average as float64, as the others do
        "qty_f": pc.cast(li["l_quantity"], pa.float64()), "price_f": pc.cast(li["l_extendedprice"], pa.float64()),
        "disc_f": pc.cast(li["l_discount"], pa.float64()),
    })
    g = t.group_by(["l_returnflag", "l_linestatus"]).aggregate(
        [("qty", "sum"), ("price", "sum"), ("disc_price", "sum"), ("charge", "sum"), ("qty_f", "mean"),
         ("price_f", "mean"), ("disc_f", "mean"), ("qty", "count")])
    g = sort(g, [("l_returnflag", "ascending"), ("l_linestatus", "ascending")])
    return g.select(["l_returnflag", "l_linestatus", "qty_sum", "price_sum", "disc_price_sum", "charge_sum",
                     "qty_f_mean", "price_f_mean", "disc_f_mean", "qty_count"])


def arrow_q3(r: ArrowReader) -> pa.Table:
    cust = r.read("customer", ["c_custkey", "c_mktsegment"])
    cust = cust.filter(pc.equal(cust["c_mktsegment"], "BUILDING")).select(["c_custkey"])
    orders = r.read("orders", ["o_orderkey", "o_custkey", "o_orderdate", "o_shippriority"])
    orders = orders.filter(pc.less(orders["o_orderdate"], day("1995-03-15")))
    co = orders.join(cust, keys="o_custkey", right_keys="c_custkey", join_type="inner")
    li = r.read("lineitem", ["l_orderkey", "l_extendedprice", "l_discount", "l_shipdate"])
    li = li.filter(pc.greater(li["l_shipdate"], day("1995-03-15")))
    li = pa.table({"l_orderkey": li["l_orderkey"],
                   "rev": pc.multiply(li["l_extendedprice"], pc.subtract(D("1"), li["l_discount"]))})
    j = li.join(co.select(["o_orderkey", "o_orderdate", "o_shippriority"]), keys="l_orderkey",
                right_keys="o_orderkey", join_type="inner")
    g = j.group_by(["l_orderkey", "o_orderdate", "o_shippriority"]).aggregate([("rev", "sum")])
    g = sort(g, [("rev_sum", "descending"), ("o_orderdate", "ascending")]).slice(0, 10)
    return g.select(["l_orderkey", "rev_sum", "o_orderdate", "o_shippriority"])


def arrow_q6(r: ArrowReader) -> pa.Table:
    li = r.read("lineitem", ["l_extendedprice", "l_discount", "l_quantity", "l_shipdate"])
    mask = pc.and_(pc.and_(pc.greater_equal(li["l_shipdate"], day("1994-01-01")),
                           pc.less(li["l_shipdate"], day("1995-01-01"))),
                   pc.and_(pc.and_(pc.greater_equal(li["l_discount"], D("0.05")),
                                   pc.less_equal(li["l_discount"], D("0.07"))),
                           pc.less(li["l_quantity"], D("24"))))
    li = li.filter(mask)
    return pa.table({"revenue": [pc.sum(pc.multiply(li["l_extendedprice"], li["l_discount"])).as_py()]})


def arrow_q12(r: ArrowReader) -> pa.Table:
    li = r.read("lineitem", ["l_orderkey", "l_shipmode", "l_commitdate", "l_receiptdate", "l_shipdate"])
    mask = pc.and_(pc.and_(pc.is_in(li["l_shipmode"], pa.array(["MAIL", "SHIP"])),
                           pc.less(li["l_commitdate"], li["l_receiptdate"])),
                   pc.and_(pc.less(li["l_shipdate"], li["l_commitdate"]),
                           pc.and_(pc.greater_equal(li["l_receiptdate"], day("1994-01-01")),
                                   pc.less(li["l_receiptdate"], day("1995-01-01")))))
    li = li.filter(mask).select(["l_orderkey", "l_shipmode"])
    orders = r.read("orders", ["o_orderkey", "o_orderpriority"])
    j = li.join(orders, keys="l_orderkey", right_keys="o_orderkey", join_type="inner")
    high = pc.is_in(j["o_orderpriority"], pa.array(["1-URGENT", "2-HIGH"]))
    t = pa.table({"l_shipmode": j["l_shipmode"], "high": pc.cast(high, pa.int64()),
                  "low": pc.cast(pc.invert(high), pa.int64())})
    g = t.group_by("l_shipmode").aggregate([("high", "sum"), ("low", "sum")])
    return sort(g, [("l_shipmode", "ascending")]).select(["l_shipmode", "high_sum", "low_sum"])


def arrow_q14(r: ArrowReader) -> pa.Table:
    li = r.read("lineitem", ["l_partkey", "l_extendedprice", "l_discount", "l_shipdate"])
    li = li.filter(pc.and_(pc.greater_equal(li["l_shipdate"], day("1995-09-01")),
                           pc.less(li["l_shipdate"], day("1995-10-01"))))
    li = pa.table({"l_partkey": li["l_partkey"],
                   "rev": pc.multiply(li["l_extendedprice"], pc.subtract(D("1"), li["l_discount"]))})
    part = r.read("part", ["p_partkey", "p_type"])
    j = li.join(part, keys="l_partkey", right_keys="p_partkey", join_type="inner")
    promo = pc.sum(pc.if_else(pc.starts_with(j["p_type"], "PROMO"), j["rev"],
                              pa.scalar(Decimal(0), j["rev"].type))).as_py()
    total = pc.sum(j["rev"]).as_py()
    return pa.table({"promo_revenue": [100.0 * float(promo) / float(total)]})


def jg_q14_top(t: pa.Table) -> pa.Table:
    promo, total = t["promo_revenue"][0].as_py(), t["total_revenue"][0].as_py()
    return pa.table({"promo_revenue": [100.0 * float(promo) / float(total)]})


QUERIES = [
    Query("q1", "lineitem filter, group by, 4 sums, 3 avgs, count", conformance_request("tpch_q01_complete"),
          lambda t: sort(t, [("l_returnflag", "ascending"), ("l_linestatus", "ascending")]),
          """SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
                    sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
                    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
                    avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc,
                    count(*) AS count_order
             FROM lineitem WHERE l_shipdate <= DATE '1998-09-02'
             GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
          arrow_q1, ["l_returnflag", "l_linestatus", "sum_qty", "sum_base_price", "sum_disc_price", "sum_charge",
                     "avg_qty", "avg_price", "avg_disc", "count_order"]),
    Query("q3", "customer ⋈ orders ⋈ lineitem, group by order, top 10", q03_request(),
          lambda t: sort(t, [("revenue", "descending"), ("o_orderdate", "ascending")]).slice(0, 10)
          .select(["l_orderkey", "revenue", "o_orderdate", "o_shippriority"]),
          """SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, o_shippriority
             FROM customer, orders, lineitem
             WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
               AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
             GROUP BY l_orderkey, o_orderdate, o_shippriority ORDER BY revenue DESC, o_orderdate LIMIT 10""",
          arrow_q3, ["l_orderkey", "revenue", "o_orderdate", "o_shippriority"]),
    Query("q6", "lineitem filter, global sum", conformance_request("tpch_q06"), lambda t: t,
          """SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
             WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
               AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND l_quantity < 24""",
          arrow_q6, ["revenue"]),
    Query("q12", "lineitem ⋈ orders, CASE sums by ship mode", conformance_request("tpch_q12"),
          lambda t: sort(t, [("l_shipmode", "ascending")]),
          """SELECT l_shipmode,
                    sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END)
                      AS high_line_count,
                    sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END)
                      AS low_line_count
             FROM orders, lineitem
             WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP')
               AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
               AND l_receiptdate >= DATE '1994-01-01' AND l_receiptdate < DATE '1995-01-01'
             GROUP BY l_shipmode ORDER BY l_shipmode""",
          arrow_q12, ["l_shipmode", "high_line_count", "low_line_count"]),
    Query("q14", "lineitem ⋈ part, conditional sum, ratio", conformance_request("tpch_q14"), jg_q14_top,
          """SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount) ELSE 0 END)
                    / sum(l_extendedprice * (1 - l_discount)) AS promo_revenue
             FROM lineitem, part
             WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'""",
          arrow_q14, ["promo_revenue"]),
]


def request_for(q: Query, fmt: str) -> dict:
    req = copy.deepcopy(q.request)
    for op in req["operations"]:
        if op["kind"] == "read":
            op["format"] = fmt
            op["path"] = op["path"].replace(".jsonl", "." + EXT[fmt])
        if op["kind"] == "send":
            op["host"], op["port"] = "127.0.0.1", 0
    return req


# ------------------------------------------------------------------ running and comparing

TICK = os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _stat_times(pid: int) -> int:
    """utime + stime + cutime + cstime of `pid`, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15])


def server_cpu(pid: int) -> float:
    """CPU seconds of the server and of its reaped children (the NCA processes, which are waited
    for when a job's NCAs are destroyed, before the job ends): utime, stime, cutime, cstime. NCA
    processes forked by a fork server (docs/nca-process-protocol.md) are its children, not the
    server's: each fork server's own time (the forks) and its reaped children's are added."""
    total = _stat_times(pid)
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():  # a child is listed under the thread that started it
        try:
            children += (task / "children").read_text().split()
        except OSError:  # the thread has ended
            pass
    for child in children:
        try:
            if is_fork_server(Path(f"/proc/{child}/cmdline").read_bytes()):
                total += _stat_times(int(child))
        except OSError:  # ended meanwhile: a fork server is only stopped with the server
            pass
    return total / TICK


@dataclass
class Run:
    seconds: float
    cpu: float  # CPU seconds of every process involved (all threads)
    answer: pa.Table
    timeline: dict | None = None


@dataclass
class Results:
    first: dict[str, float] = field(default_factory=dict)
    runs: dict[str, list[Run]] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)  # engine -> errors of failed runs

    def median(self, engine: str) -> float:
        return statistics.median(r.seconds for r in self.runs[engine])

    def median_cpu(self, engine: str) -> float:
        return statistics.median(r.cpu for r in self.runs[engine])


def normalized(table: pa.Table, columns: list[str]) -> list[tuple]:
    if table.num_columns != len(columns):
        raise AssertionError(f"{table.num_columns} columns, expected {len(columns)}: {table.column_names}")
    return [tuple(row.values()) for row in table.rename_columns(columns).to_pylist()]


def same(a: object, b: object) -> bool:
    if isinstance(a, (int, float, Decimal)) and isinstance(b, (int, float, Decimal)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def compare(q: Query, answers: dict[str, pa.Table]) -> list[str]:
    """Differences of every engine's answer from DuckDB's (empty when all agree)."""
    ref = normalized(answers["duckdb-1T"], q.columns)
    problems = []
    for engine, table in answers.items():
        rows = normalized(table, q.columns)
        if len(rows) != len(ref):
            problems.append(f"{engine}: {len(rows)} rows, DuckDB {len(ref)}")
            continue
        for i, (r, e) in enumerate(zip(rows, ref)):
            bad = [q.columns[k] for k, (x, y) in enumerate(zip(r, e)) if not same(x, y)]
            if bad:
                problems.append(f"{engine}: row {i} differs in {', '.join(bad)}: {r} vs DuckDB {e}")
                break
    return problems


class Bench:
    def __init__(self, fmt: str, root: Path, duck_root: Path, servers: dict[str, tuple[Jumpgate, int]],
                 args) -> None:
        self.fmt, self.root, self.servers, self.args = fmt, root, servers, args
        duck_fmt = "json" if fmt == "json" else "parquet"
        self.duck = {"duckdb-1T": duck_connect(duck_root, duck_fmt, 1),
                     "duckdb-all": duck_connect(duck_root, duck_fmt, None)}
        self.reader = ArrowReader(root, fmt)

    def engines(self) -> list[str]:
        return list(self.servers) + [e for e in ENGINES[1:] if e != "pyarrow" or not self.args.no_pyarrow]

    def peers(self) -> list[str]:
        return [e for e in self.engines() if e != "jumpgate"]

    def run(self, engine: str, q: Query) -> Run:
        c0 = self_cpu()
        if engine in self.servers:
            jg, pid = self.servers[engine]
            req = request_for(q, self.fmt)
            s0 = server_cpu(pid)
            t0 = time.perf_counter()
            out = jg.run(req, timeout=self.args.job_timeout)["out"]
            answer = q.top(out)
            seconds = time.perf_counter() - t0
            cpu = self_cpu() - c0 + server_cpu(pid) - s0
            job = jg.last_job
            tl = {"status": job.last_status, "compile": job.answer, "received": out.num_rows}
            return Run(seconds, cpu, answer, tl)
        if engine == "pyarrow":
            t0 = time.perf_counter()
            answer = q.arrow(self.reader)
            return Run(time.perf_counter() - t0, self_cpu() - c0, answer)
        con = self.duck[engine]
        t0 = time.perf_counter()
        result = con.execute(q.sql)
        answer = result.to_arrow_table() if hasattr(result, "to_arrow_table") else result.fetch_arrow_table()
        return Run(time.perf_counter() - t0, self_cpu() - c0, answer)

    def run_retrying(self, engine: str, q: Query, res: Results) -> Run:
        """A Jumpgate job that fails or hangs (a timeout cancels it) is reported and run again,
        up to --retries times per query and engine."""
        while True:
            try:
                return self.run(engine, q)
            except RequestRejected:
                raise
            except ClientError as e:
                res.failures.setdefault(engine, []).append(f"{type(e).__name__}: {str(e)[:300]}")
                print(f"  {q.name} {engine}: FAILED ({type(e).__name__}: {str(e)[:300]})", flush=True)
                if engine not in self.servers or len(res.failures[engine]) > self.args.retries:
                    raise

    def query(self, q: Query) -> Results:
        res = Results()
        first: dict[str, Run] = {}
        for e in self.engines():
            first[e] = self.run_retrying(e, q, res)
            res.first[e] = first[e].seconds
        problems = compare(q, {e: r.answer for e, r in first.items()})
        if problems:
            raise SystemExit(f"{q.name} ({self.fmt}): the engines disagree:\n  " + "\n  ".join(problems))
        res.runs = {e: [] for e in self.engines()}
        for _ in range(self.args.runs):
            for e in self.engines():  # interleaved: load changes on a shared machine hit every engine alike
                res.runs[e].append(self.run_retrying(e, q, res))
        return res


# ------------------------------------------------------------------ the timeline


def nca_threads(compile_answer: dict) -> dict[str, int]:
    """Threads per NCA as the compile answer shows them: the streams its outputs open (one per
    worker thread for every software NCA's output port)."""
    out: dict[str, int] = {}
    for e in compile_answer.get("edges", []):
        out[e["from"]] = max(out.get(e["from"], 0), int(e.get("streams") or 1))
    return out


def print_timeline(run: Run) -> None:
    tl = run.timeline or {}
    status, answer = tl.get("status", {}), tl.get("compile", {})
    phases, ncas = status["timeline"]["phases"], status["timeline"]["ncas"]
    threads = nca_threads(answer)
    impl = {n["id"]: (n["implementation"], n["operations"]) for n in answer.get("ncas", [])}
    exe = phases.get("execute", {})
    setup = phases.get("setup", {}).get("duration_ms", 0.0)
    after = run.seconds * 1000 - exe.get("end_ms", 0.0)
    print(f"    end to end {run.seconds * 1000:7.0f} ms (CPU {run.cpu * 1000:.0f} ms) = compile+setup "
          f"{exe.get('start_ms', 0):.0f} ms (setup {setup:.0f}) + execute {exe.get('duration_ms', 0):.0f} ms + "
          f"client after execute (poll, streams' end, decode, top) {after:.0f} ms; {tl.get('received')} rows received")
    for s in sorted(k for k in phases if k.startswith("stage:")):
        print(f"    {s}: {phases[s]['duration_ms']:7.0f} ms")
    steps = [f"{nid} " + "/".join(f"{ncas[nid][k]['duration_ms']:.0f}" for k in ("compile", "allocate", "configure")
                                  if k in ncas[nid]) for nid in sorted(ncas)]
    print(f"    setup per NCA, compile/allocate/configure ms: {', '.join(steps)}")
    for nid in sorted(ncas, key=lambda n: int(n[3:]) if n[3:].isdigit() else 0):
        name, ops = impl.get(nid, ("?", []))
        for st in ncas[nid].get("stages", []):
            # The timeline gives busy and waits per thread (averaged over the NCA's threads). Busy
            # includes time the worker was runnable but not running (a loaded machine).
            n = st.get("threads", threads.get(nid, 1))
            wall, busy = st["wall_ms"], st["busy_ms"]
            win, wout = st["wait_input_ms"], st["wait_output_ms"]
            rate = st["tuples_in"] / wall * 1e3 / 1e6 if wall > 0 else 0
            mb = st["bytes_in"] / wall * 1e3 / 1e6 if wall > 0 else 0
            extra = {k: v for k, v in st.items() if k.startswith(("agg_", "build_", "skipped"))}
            print(f"    {nid} {name:<22} {'+'.join(ops):<24} stage {st['stage']} thr {n}: wall {wall:6.0f} ms, "
                  f"per thread busy {busy:6.0f} ({100 * busy / wall if wall else 0:3.0f}%) wait_in {win:6.0f} "
                  f"wait_out {wout:5.0f}; in {st['tuples_in']:>9,} t {st['bytes_in'] / 1e6:7.1f} MB "
                  f"({rate:5.2f} Mt/s, {mb:6.1f} MB/s) out {st['tuples_out']:>9,} t"
                  + (f" {extra}" if extra else ""))


# ------------------------------------------------------------------ main


def scan_nca_available(jg: Jumpgate, fmt: str) -> str | None:
    """None when the server has a scan NCA for `fmt`, else why not."""
    ncas = jg.ncas()
    for n in ncas:
        if n.get("error") or "read" not in (n.get("operations") or ()):
            continue
        formats = n.get("formats") or (["json"] if "json" in n.get("name", "") else [])
        if fmt in formats:
            return None
    problems = [f"{n['name']}: {n['error']}" for n in ncas if n.get("error")]
    return f"no registered NCA reads {fmt}" + (f" (plugins that failed to load: {'; '.join(problems)})"
                                               if problems else "")


def prepared_cache(base: Path, fmt: str) -> tempfile.TemporaryDirectory:
    """An empty NCA cache (so the first run compiles every query's NCAs) sharing a prebuilt runtime."""
    from jumpgate.ncas.software.build import ensure_arrow_drivers, ensure_runtime

    runtime = ensure_runtime(base)
    if fmt != "json":
        try:
            ensure_arrow_drivers(runtime)
        except Exception as e:  # the format is then skipped or its jobs fail with the reason
            print(f"note: the ORC/Parquet drivers do not build: {e}")
    tmp = tempfile.TemporaryDirectory(prefix="jg-bench-cache-")
    os.symlink(runtime, Path(tmp.name, runtime.name))
    return tmp


def goal_lost(res: Results) -> list[str]:
    """What the goal misses: Jumpgate at least DuckDB's speed with one thread by CPU time (the work
    each does, whatever the machine's load) and with all threads by wall time (what a user waits)."""
    jg = res.median_cpu("jumpgate"), res.median("jumpgate")
    return ([] if res.median_cpu("duckdb-1T") >= jg[0] else ["DuckDB with one thread by CPU time"]) + \
           ([] if res.median("duckdb-all") >= jg[1] else ["DuckDB with all threads by wall time"])


def verdict(q: Query, res: Results) -> str:
    wall = {e: res.median(e) / res.median("jumpgate") for e in ENGINES if e in res.runs and e != "jumpgate"}
    text = (f"CPU: duckdb-1T/JG {res.median_cpu('duckdb-1T') / res.median_cpu('jumpgate'):.2f}; wall: "
            + ", ".join(f"{e}/JG {r:.2f}" for e, r in wall.items()))
    lost = goal_lost(res)
    if not lost:
        return f"{q.name}: goal met, as fast as DuckDB with one thread by CPU and all threads by wall time ({text})"
    return f"{q.name}: goal NOT met, Jumpgate is slower than {' and '.join(lost)} ({text})"


def table(title: str, engines: list[str], peers: list[str], rows: list[tuple[str, dict, float | None]]) -> None:
    print(title)
    print(f"{'query':<6}" + "".join(f"{e:>12}" for e in engines) + "".join(f"{e + '/JG':>14}" for e in peers)
          + (f"{'JG cold':>9}" if rows and rows[0][2] is not None else ""))
    for name, med, cold in rows:
        print(f"{name:<6}" + "".join(f"{med[e]:11.2f}s" for e in engines)
              + "".join(f"{med[e] / med['jumpgate']:14.2f}" for e in peers)
              + (f"{cold:8.2f}s" if cold is not None else ""))


def run_format(fmt: str, args, wanted: list[Query], summary: list[str]) -> None:
    root = ensure_data(args.data_dir, args.sf, fmt)
    duck_root = root if fmt == "json" else ensure_data(args.data_dir, args.sf, "parquet")
    with contextlib.ExitStack() as stack:
        cache = Path(stack.enter_context(prepared_cache(args.cache, fmt)))
        srv = stack.enter_context(LocalServer(root, cache_dir=cache, cores=args.jg_cores,
                                              log_path=cache / "server.log"))
        jg = stack.enter_context(Jumpgate(srv.url))
        why = scan_nca_available(jg, fmt)
        if why:
            print(f"\n[{fmt}] skipped: {why}")
            summary.append(f"{fmt}: skipped ({why})")
            return
        servers = {"jumpgate": (jg, srv.proc.pid)}
        if args.alt_cores:
            alt = stack.enter_context(LocalServer(root, cache_dir=cache, cores=args.alt_cores,
                                                  log_path=cache / "server-alt.log"))
            servers[f"jg-cores{args.alt_cores}"] = (stack.enter_context(Jumpgate(alt.url)), alt.proc.pid)
        variants = ([("jg-no-rf", "--no-runtime-filters")] if args.no_rf_engine else []) + \
                   ([("jg-no-fork", "--fork-servers", "0")] if args.no_fork_engine else [])
        for name, *extra in variants:  # the same server with one feature off, to measure it in the same run
            off = stack.enter_context(LocalServer(root, cache_dir=cache, cores=args.jg_cores,
                                                  log_path=cache / f"server-{name}.log", extra_args=extra))
            servers[name] = (stack.enter_context(Jumpgate(off.url)), off.proc.pid)
        bench = Bench(fmt, root, duck_root, servers, args)
        print(f"\n[{fmt}] data {root}; DuckDB reads {'JSON Lines' if fmt == 'json' else 'the Parquet copy'}; "
              f"Jumpgate server --cores {args.jg_cores or os.cpu_count()}; medians of {args.runs} runs", flush=True)
        results: dict[str, Results] = {}
        for q in wanted:
            try:
                results[q.name] = res = bench.query(q)
            except RequestRejected as e:
                print(f"  {q.name}: Jumpgate rejected the request: {e}")
                summary.append(f"{fmt} {q.name}: rejected by Jumpgate ({e})")
                continue
            print(f"  {q.name} done: " + ", ".join(f"{e} {res.median(e):.2f} s" for e in bench.engines())
                  + f" (load {os.getloadavg()[0]:.2f})", flush=True)
        engines, peers = bench.engines(), bench.peers()
        table(f"\n[{fmt}] SF {args.sf:g}: median wall seconds end to end; X/JG = X's time / Jumpgate's (> 1: "
              f"Jumpgate faster); JG cold = Jumpgate's first run, compiling its NCAs", engines, peers,
              [(n, {e: r.median(e) for e in engines}, r.first["jumpgate"]) for n, r in results.items()])
        table(f"\n[{fmt}] median CPU seconds (all threads; Jumpgate: server + NCA processes + client), "
              f"the work done whatever the machine's load", engines, peers,
              [(n, {e: r.median_cpu(e) for e in engines}, None) for n, r in results.items()])
        print()
        for q in wanted:
            if q.name in results:
                line = verdict(q, results[q.name])
                for e, errors in results[q.name].failures.items():
                    line += f"; {e} FAILED {len(errors)} run(s) (re-run): {' | '.join(errors)}"
                print("  " + line)
                summary.append(f"{fmt} {line}")
        for q in wanted:
            if q.name not in results:
                continue
            res = results[q.name]
            if args.timelines or goal_lost(res):
                for e in servers:
                    runs = sorted(res.runs[e], key=lambda r: r.seconds)
                    print(f"\n  [{fmt}] {q.name} {e} timeline of the median run ({q.title}):")
                    print_timeline(runs[len(runs) // 2])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--format", default="json", help="json, orc, parquet, comma-separated (default json)")
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=5, help="timed runs of every engine per query (median)")
    ap.add_argument("--queries", default=",".join(q.name for q in QUERIES))
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/jumpgate-bench"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/jumpgate-bench/cache"),
                    help="where the NCA runtime is built once (queries compile into a fresh cache)")
    ap.add_argument("--no-pyarrow", action="store_true", help="skip pyarrow (the slowest engine)")
    ap.add_argument("--jg-cores", type=int, help="the server's --cores (default: this machine's)")
    ap.add_argument("--alt-cores", type=int, help="also run a second server with this --cores, as engine "
                    "jg-coresN, to measure the thread assignment")
    ap.add_argument("--no-rf-engine", action="store_true",
                    help="also run a second server with --no-runtime-filters, as engine jg-no-rf, to measure "
                         "the runtime filters (docs/runtime-filters.md) in the same run")
    ap.add_argument("--no-fork-engine", action="store_true",
                    help="also run a second server with --fork-servers 0, as engine jg-no-fork, to measure the fork "
                         "servers (docs/nca-process-protocol.md) in the same run")
    ap.add_argument("--job-timeout", type=float, default=300, help="seconds before a Jumpgate job counts as "
                    "hung and is cancelled (default 300)")
    ap.add_argument("--retries", type=int, default=2, help="failed or hung Jumpgate runs re-run per query")
    ap.add_argument("--timelines", action="store_true", help="print every query's Jumpgate timeline "
                    "(default: only where Jumpgate does not beat both DuckDB runs)")
    args = ap.parse_args()
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    for f in formats:
        if f not in EXT:
            ap.error(f"unknown format {f!r}")
    names = [n.strip().lower() for n in args.queries.split(",") if n.strip()]
    unknown = sorted(set(names) - {q.name for q in QUERIES})
    if unknown:
        ap.error(f"unknown queries {', '.join(unknown)} (known: {', '.join(q.name for q in QUERIES)})")
    wanted = [q for q in QUERIES if q.name in names]
    print(f"TPC-H SF {args.sf:g} bottoms, end to end; {os.cpu_count()} cores; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
    summary: list[str] = []
    for fmt in formats:
        run_format(fmt, args, wanted, summary)
    print(f"\nload average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
