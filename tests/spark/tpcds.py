"""TPC-DS for the Spark client's tests and benchmarks: data as JSON Lines, schemas, the 99 queries.

Data and queries come from DuckDB's tpcds extension, from its pip package `duckdb-extension-tpcds`
pinned to the same DuckDB (the project's `tpc` extra: duckdb==1.5.5). The generator runs in a
subprocess; when the venv lacks those exact versions it uses a side install of them
(`pip install --target`, cached under `.jumpgate/tpcds-tools`). DuckDB's own `INSTALL tpcds` (a
download from outside the package registries) is never used.

Layout written under `root/`: `tpcds/<table>/part-NNNNN.jsonl` (large tables split in several files
so a Jumpgate job can read them in parallel), `tpcds/<table>.schema.json` (columns with their
Spark SQL types), `tpcds/queries/qNN.sql`, and `tpcds/.complete` once everything is there.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DUCKDB_VERSION = "1.5.5"
TOOLS_PACKAGES = [f"duckdb=={DUCKDB_VERSION}", f"duckdb-extension-tpcds=={DUCKDB_VERSION}"]
PROJECT = Path(__file__).resolve().parents[2]
DEFAULT_TOOLS = PROJECT / ".jumpgate" / "tpcds-tools"
TARGET_FILE_BYTES = 24 << 20  # split tables into files of about this size

TABLES = ["call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer", "customer_address",
          "customer_demographics", "date_dim", "household_demographics", "income_band", "inventory", "item",
          "promotion", "reason", "ship_mode", "store", "store_returns", "store_sales", "time_dim", "warehouse",
          "web_page", "web_returns", "web_sales", "web_site"]


def ensure_tools(tools: Path = DEFAULT_TOOLS) -> Path:
    """Install the pinned DuckDB + tpcds extension into `tools` (once)."""
    stamp = tools / f".installed-{DUCKDB_VERSION}"
    if stamp.exists():
        return tools
    tools.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target",
                    str(tools), *TOOLS_PACKAGES], check=True)
    stamp.touch()
    return tools


# The generator, run with the side install on sys.path.
_GENERATOR = r'''
import glob, json, os, sys
import duckdb, duckdb_extension_tpcds
sf, out, target = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ext = glob.glob(os.path.join(os.path.dirname(duckdb_extension_tpcds.__file__), "extensions", "*",
                             "tpcds.duckdb_extension"))[0]
con = duckdb.connect()
con.execute(f"LOAD '{ext}'")
con.execute(f"CALL dsdgen(sf={sf})")
def spark_type(t):
    t = t.upper()
    if t.startswith("DECIMAL"): return t
    return {"INTEGER": "INT", "BIGINT": "BIGINT", "DATE": "DATE", "DOUBLE": "DOUBLE", "BOOLEAN": "BOOLEAN"}.get(
        t, "STRING" if ("CHAR" in t or t == "VARCHAR") else t)
os.makedirs(os.path.join(out, "queries"), exist_ok=True)
for (n, q) in con.execute("SELECT query_nr, query FROM tpcds_queries()").fetchall():
    open(os.path.join(out, "queries", f"q{n:02d}.sql"), "w").write(q)
for (table,) in con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall():
    cols = con.execute(f"DESCRIBE {table}").fetchall()
    schema = [{"name": c[0], "type": spark_type(c[1])} for c in cols]
    json.dump({"table": table, "columns": schema}, open(os.path.join(out, f"{table}.schema.json"), "w"), indent=1)
    d = os.path.join(out, table)
    os.makedirs(d, exist_ok=True)
    rows = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    # Estimate the JSON size from a sample, then split into files of about `target` bytes.
    con.execute(f"COPY (SELECT * FROM {table} LIMIT 2000) TO '{d}/sample.tmp' (FORMAT JSON)")
    sample = os.path.getsize(f"{d}/sample.tmp"); os.remove(f"{d}/sample.tmp")
    per_row = sample / max(1, min(rows, 2000))
    parts = max(1, int(per_row * rows / target + 0.5))
    if parts == 1:
        con.execute(f"COPY {table} TO '{d}/part-00000.jsonl' (FORMAT JSON)")
    else:
        con.execute(f"CREATE TEMP TABLE _t AS SELECT *, (row_number() OVER () - 1) % {parts} AS _part FROM {table}")
        cols_sql = ", ".join('"' + c[0] + '"' for c in cols)
        for p in range(parts):
            con.execute(f"COPY (SELECT {cols_sql} FROM _t WHERE _part = {p}) TO '{d}/part-{p:05d}.jsonl' (FORMAT JSON)")
        con.execute("DROP TABLE _t")
    print(table, rows, parts, flush=True)
'''


def venv_has_generator() -> bool:
    """True when this interpreter has duckdb and duckdb-extension-tpcds of the pinned version."""
    try:
        from importlib.metadata import version
        return version("duckdb") == DUCKDB_VERSION and version("duckdb-extension-tpcds") == DUCKDB_VERSION
    except Exception:
        return False


def generate(root: Path, sf: float, tools: Path | None = None) -> Path:
    """Generate TPC-DS at scale factor `sf` under `root/tpcds` (skipped when already complete)."""
    out = Path(root) / "tpcds"
    done = out / ".complete"
    if done.exists() and done.read_text().strip() == str(sf):
        return out
    out.mkdir(parents=True, exist_ok=True)
    if venv_has_generator():
        env = dict(os.environ)
    else:
        tools = ensure_tools(tools or DEFAULT_TOOLS)
        env = dict(os.environ, PYTHONPATH=str(tools), PYTHONNOUSERSITE="1")
    subprocess.run([sys.executable, "-c", _GENERATOR, str(sf), str(out), str(TARGET_FILE_BYTES)], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    done.write_text(str(sf))
    return out


def schemas(tpcds: Path) -> dict[str, list[dict]]:
    return {t: json.loads((tpcds / f"{t}.schema.json").read_text())["columns"] for t in TABLES}


def queries(tpcds: Path) -> dict[int, str]:
    return {int(p.stem[1:]): p.read_text() for p in sorted((tpcds / "queries").glob("q*.sql"))}


def register(spark, tpcds: Path) -> None:
    """Register each table as a JSON Lines table with its explicit schema (DECIMAL, DATE types)."""
    for table, cols in schemas(tpcds).items():
        ddl = ", ".join(f"`{c['name']}` {c['type']}" for c in cols)
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.sql(f"CREATE TABLE {table} ({ddl}) USING json LOCATION '{tpcds / table}'")
