"""Parquet and ORC copies of tables written by Spark's own writer, Snappy-compressed: the files a
Spark user has, for benchmarks that compare Spark with and without Jumpgate over them.

`jumpgate datagen` writes Parquet with DuckDB and ORC with pyarrow, tuned to look like Spark's. Here
Spark itself rewrites tables it already reads (e.g. the JSON Lines copy of TPC-DS) with
`df.write.option("compression", "snappy").parquet(...)` / `.orc(...)`: its row group and stripe
sizes, its one file per input partition, its physical types for decimals and dates, its
`_SUCCESS` marker and hidden `.crc` files, which any reader of the folder must skip.

Idempotent as `generate` is: each table is written into a hidden temporary folder and renamed to
`OUT/<table>` when whole, so an existing folder is complete and skipped; `OUT/manifest.json` names
the format, the codec and Spark's version, and a folder written otherwise is refused rather than
reused. The same lock file serialises concurrent writers.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .generate import DatagenError, _check_manifest, _locked

SPARK_FORMATS = ("parquet", "orc")
CODEC = "snappy"  # the default of spark.sql.parquet.compression.codec and spark.sql.orc.compression.codec
# Bump when what is written changes (options, layout): a copy written before is then refused.
SPARK_COPY_VERSION = 1


def spark_copy(spark: Any, tables: Sequence[str], out: Path | str, fmt: str) -> list[str]:
    """Write each of `tables` (names the session resolves) to `out/<table>` in `fmt` (`parquet` or
    `orc`) with Spark's writer and Snappy; returns the tables written (those already there are
    skipped). `spark` is a pyspark SparkSession; it reads the tables with whatever it has
    configured, so a caller that has a plugin rewriting scans may want it off meanwhile."""
    if fmt not in SPARK_FORMATS:
        raise DatagenError(f"unknown format {fmt!r}; expected one of {', '.join(SPARK_FORMATS)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with _locked(out):
        _check_manifest(out, {"format": fmt, "compression": CODEC, "writer": f"spark-{spark.version}",
                              "spark_copy_version": SPARK_COPY_VERSION})
        for table in tables:
            final = out / table
            if final.is_dir():
                continue
            tmp = out / f".{table}.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                # The codec is given explicitly: a session whose default codec was changed still
                # writes what a Spark user gets by default.
                spark.table(table).write.mode("overwrite").option("compression", CODEC).format(fmt).save(str(tmp))
                os.rename(tmp, final)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            written.append(table)
    return written


def data_files(table_dir: Path | str) -> list[Path]:
    """The data files of a folder Spark wrote, as Spark's file index lists them: names starting
    with `_` (`_SUCCESS`) or `.` (checksums) are not data."""
    return sorted(p for p in Path(table_dir).iterdir() if p.is_file() and not p.name.startswith(("_", ".")))
