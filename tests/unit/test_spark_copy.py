"""`jumpgate.datagen.spark_copy`: Spark's own writer rewrites tables as Snappy Parquet / ORC, once.

A real local Spark (no plugin) rewrites a small JSON Lines table; pyarrow reads the files back and
their metadata says which codec wrote them."""
from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pyspark = pytest.importorskip("pyspark", reason="pip install -e '.[spark]'")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java 17+", allow_module_level=True)

import pyarrow.dataset as ds  # noqa: E402

from jumpgate.datagen import DatagenError  # noqa: E402
from jumpgate.datagen.spark_copy import data_files, spark_copy  # noqa: E402

ROWS = [{"k": i, "price": f"{i}.25", "day": f"2001-01-{1 + i % 28:02d}", "name": f"n{i % 3}"} for i in range(50)]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    src = tmp_path_factory.mktemp("json") / "t"
    src.mkdir()
    # Two files: Spark reads two partitions and writes one file per partition.
    for part, rows in enumerate((ROWS[:25], ROWS[25:])):
        (src / f"part-{part}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    session = (SparkSession.builder.master("local[1]").appName("spark-copy-test")
               .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.files.maxPartitionBytes", "1k").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.sql(f"CREATE TABLE t (k INT, price DECIMAL(7,2), day DATE, name STRING) USING json LOCATION '{src}'")
    yield session
    session.sql("DROP TABLE IF EXISTS t")
    session.stop()


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_writes_snappy_once_and_keeps_the_rows(spark, tmp_path: Path, fmt: str):
    out = tmp_path / fmt
    assert spark_copy(spark, ["t"], out, fmt) == ["t"]
    files = data_files(out / "t")
    assert len(files) >= 2 and all(f.suffix == f".{fmt}" for f in files)
    assert (out / "t" / "_SUCCESS").exists()  # Spark's layout, kept: readers skip it
    if fmt == "parquet":
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(files[0]).metadata
        assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {"SNAPPY"}
        assert "parquet-mr" in meta.created_by  # Spark's writer, not DuckDB's or Arrow's
    else:
        import pyarrow.orc as orc

        assert orc.ORCFile(str(files[0])).compression == "SNAPPY"
    table = ds.dataset([str(f) for f in files], format=fmt).to_table().sort_by("k")
    assert table.column("k").to_pylist() == list(range(50))
    assert table.column("price").to_pylist()[3] == Decimal("3.25")
    assert str(table.column("day").to_pylist()[0]) == "2001-01-01"

    # Idempotent: a second run writes nothing and leaves the files as they were; no temp folder left.
    stamps = {f: f.stat().st_mtime_ns for f in files}
    assert spark_copy(spark, ["t"], out, fmt) == []
    assert {f: f.stat().st_mtime_ns for f in data_files(out / "t")} == stamps
    assert not [p for p in out.iterdir() if p.name.startswith(".") and p.name != ".lock"]

    # A folder that holds another format's copy is refused, not mixed.
    other = "orc" if fmt == "parquet" else "parquet"
    with pytest.raises(DatagenError, match="holds different data"):
        spark_copy(spark, ["t"], out, other)


def test_unknown_format_is_refused(tmp_path: Path):
    with pytest.raises(DatagenError, match="unknown format"):
        spark_copy(None, ["t"], tmp_path, "json")
