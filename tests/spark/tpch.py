"""TPC-H for the Spark client's tests: the 22 queries (DuckDB's text of them) and the eight tables
as JSON Lines, Parquet and ORC under the test data root, written by `jumpgate datagen` (DuckDB's
tpch extension from its pip package) and registered in Spark as one database per format
(`tpch_json`, `tpch_parquet`, `tpch_orc`), so the queries' plain table names resolve there."""
from __future__ import annotations

from pathlib import Path

from jumpgate import datagen

TABLES = ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]
FORMATS = ["json", "parquet", "orc"]
EXTENSIONS = {"json": "jsonl", "parquet": "parquet", "orc": "orc"}
# Several files for the big tables, so a job reads them in parallel and Spark gets several partitions.
ROWS_PER_FILE = 200_000
# Contract types (datagen's schema files) -> Spark SQL types.
SPARK_TYPES = {"boolean": "BOOLEAN", "int32": "INT", "int64": "BIGINT", "float64": "DOUBLE", "string": "STRING",
               "date": "DATE"}


def generate(root: Path, sf: float) -> Path:
    """Write TPC-H at `sf` in every format under `root/tpch/<format>/` (skips what is there)."""
    out = root / "tpch"
    for fmt in FORMATS:
        datagen.generate("tpch", sf, fmt, out / fmt, rows_per_file=ROWS_PER_FILE, progress=False)
    return out


def queries() -> dict[int, str]:
    con = datagen.connect(datagen.BENCHMARKS["tpch"])
    try:
        return {int(n): q.strip().rstrip(";") for n, q in con.execute("SELECT query_nr, query FROM tpch_queries()")
                .fetchall()}
    finally:
        con.close()


def spark_type(contract: str) -> str:
    return SPARK_TYPES.get(contract, contract.upper())  # decimal(p,s) reads the same in both


def register(spark, tpch: Path) -> None:
    """One database per format, each with the eight tables over that format's files (the glob
    filter keeps out the schema.json that data written before datagen moved it sits beside)."""
    for fmt in FORMATS:
        db = f"tpch_{fmt}"
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
        for table in TABLES:
            d = tpch / fmt / table
            cols = datagen.read_schema(d)
            ddl = ", ".join(f"`{c['name']}` {spark_type(c['type'])}" for c in cols)
            spark.sql(f"DROP TABLE IF EXISTS {db}.{table}")
            spark.sql(f"CREATE TABLE {db}.{table} ({ddl}) USING {fmt} "
                      f"OPTIONS (pathGlobFilter '*.{EXTENSIONS[fmt]}') LOCATION '{d}'")
