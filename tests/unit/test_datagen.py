"""`jumpgate.datagen`: TPC tables from DuckDB's extensions, written per table with a contract schema."""
from __future__ import annotations

import json
from decimal import Decimal

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("duckdb_extension_tpch")

import pyarrow as pa  # noqa: E402
import pyarrow.dataset as ds  # noqa: E402

from jumpgate.cli import main as cli  # noqa: E402
from jumpgate.datagen import DatagenError, UnsupportedType, contract_type, generate, read_schema  # noqa: E402
from jumpgate.datagen.types import select_expr  # noqa: E402


@pytest.mark.parametrize("duck,contract", [
    ("INTEGER", "int32"), ("BIGINT", "int64"), ("DOUBLE", "float64"), ("VARCHAR", "string"), ("DATE", "date"),
    ("BOOLEAN", "boolean"), ("DECIMAL(15,2)", "decimal(15,2)"), ("DECIMAL(7, 2)", "decimal(7,2)"),
    ("DECIMAL(18,0)", "decimal(18,0)"), ("SMALLINT", "int32"), ("CHAR(10)", "string"), ("FLOAT", "float64"),
])
def test_type_mapping(duck, contract):
    assert contract_type(duck) == contract


@pytest.mark.parametrize("duck", ["DECIMAL(38,2)", "HUGEINT", "TIMESTAMP", "UBIGINT", "INTEGER[]", "BLOB"])
def test_types_without_a_contract_type_fail_loudly(duck):
    with pytest.raises(UnsupportedType):
        contract_type(duck)


def test_columns_are_written_with_the_schema_type():
    assert select_expr("a", "INTEGER", "json") == '"a"'
    assert select_expr("a", "SMALLINT", "parquet") == 'CAST("a" AS INTEGER) AS "a"'
    assert select_expr("p", "DECIMAL(15,2)", "json") == '"p"'  # a JSON number keeps 15 digits exactly
    assert select_expr("p", "DECIMAL(18,2)", "json") == 'CAST("p" AS VARCHAR) AS "p"'
    assert select_expr("p", "DECIMAL(18,2)", "orc") == '"p"'


def test_json_tables_schema_manifest_and_idempotence(tmp_path):
    out = tmp_path / "tpch"
    first = generate("tpch", 0.01, "json", out, tables=["nation", "orders"], rows_per_file=4000, progress=False)
    assert sorted(first.written) == ["nation", "orders"]
    assert sorted(p.name for p in (out / "orders").iterdir()) == ["part-0.jsonl", "part-1.jsonl", "part-2.jsonl",
                                                                  "part-3.jsonl"]
    schema = json.loads((out / "orders.schema.json").read_text())
    assert read_schema(out / "orders") == schema
    assert schema[:4] == [{"name": "o_orderkey", "type": "int64"}, {"name": "o_custkey", "type": "int64"},
                          {"name": "o_orderstatus", "type": "string"}, {"name": "o_totalprice", "type": "decimal(15,2)"}]
    lines = [json.loads(line) for p in sorted((out / "orders").glob("*.jsonl")) for line in p.read_text().splitlines()]
    assert len(lines) == 15000 and len({r["o_orderkey"] for r in lines}) == 15000
    assert isinstance(lines[0]["o_totalprice"], float) and len(lines[0]["o_orderdate"]) == 10  # "YYYY-MM-DD"
    # Decimals are JSON numbers that the contract's reader takes exactly: never more digits than the scale.
    texts = [json.loads(line, parse_float=Decimal) for line in (out / "orders" / "part-0.jsonl").read_text().splitlines()]
    assert all(r["o_totalprice"].as_tuple().exponent >= -2 for r in texts)
    assert json.loads((out / "manifest.json").read_text())["sf"] == 0.01
    assert not [p for p in out.iterdir() if p.name.startswith(".") and p.name != ".lock"]  # no temp dirs left

    again = generate("tpch", 0.01, "json", out, tables=["nation", "orders", "region"], rows_per_file=4000,
                     progress=False)
    assert again.written == ["region"] and {t.name for t in again.tables if t.skipped} == {"nation", "orders"}
    with pytest.raises(DatagenError, match="holds different data"):
        generate("tpch", 0.02, "json", out, tables=["nation"], rows_per_file=4000, progress=False)
    with pytest.raises(DatagenError, match="no table 'nope'"):
        generate("tpch", 0.01, "json", out, tables=["nope"], rows_per_file=4000, progress=False)


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_columnar_files_carry_the_schema_types(tmp_path, fmt):
    out = tmp_path / fmt
    generate("tpch", 0.01, fmt, out, tables=["lineitem"], rows_per_file=20000, progress=False)
    files = sorted((out / "lineitem").glob(f"*.{fmt}"))
    assert len(files) == 4
    table = ds.dataset([str(f) for f in files], format=fmt).to_table()
    assert table.num_rows == 60175
    types = {f.name: f.type for f in table.schema}
    assert types["l_orderkey"] == pa.int64() and types["l_quantity"] == pa.decimal128(15, 2)
    assert types["l_shipdate"] == pa.date32() and pa.types.is_string(types["l_comment"])
    if fmt == "orc":  # as Spark writes ORC: Snappy, and dictionaries for the few-valued strings
        import pyarrow.orc as orc

        f = orc.ORCFile(str(files[0]))
        assert f.compression == "SNAPPY", f.compression
        assert dictionary_encoded(files[0], "l_shipmode") and not dictionary_encoded(files[0], "l_comment")


def dictionary_encoded(path, column: str) -> bool:
    """Whether every stripe of a Snappy ORC file has `column` dictionary-encoded (ColumnEncoding
    kind DICTIONARY or DICTIONARY_V2 in the stripe footers; pyarrow does not say)."""
    import pyarrow.orc as orc

    from .test_orc_native_strings import pb_fields, uvarint

    snappy = pa.Codec("snappy")

    def unframe(b: bytes) -> bytes:  # ORC's compression chunks: 3-byte header (length << 1 | original)
        out, i = b"", 0
        while i < len(b):
            h = int.from_bytes(b[i:i + 3], "little")
            chunk = b[i + 3:i + 3 + (h >> 1)]
            out += chunk if h & 1 else snappy.decompress(chunk, asbytes=True,
                                                         decompressed_size=uvarint(chunk, 0)[0])
            i += 3 + (h >> 1)
        return out

    data = path.read_bytes()
    ps_len = data[-1]
    ps = {f: v for f, v, _ in pb_fields(data[-1 - ps_len:-1])}
    footer = unframe(data[len(data) - 1 - ps_len - ps[1]:len(data) - 1 - ps_len])
    col = orc.ORCFile(str(path)).schema.names.index(column) + 1  # ORC column 0 is the root struct
    kinds = []
    for f, info, _ in pb_fields(footer):
        if f == 3:  # StripeInformation: offset, indexLength, dataLength, footerLength
            si = {f2: v for f2, v, _ in pb_fields(info)}
            at = si.get(1, 0) + si.get(2, 0) + si.get(3, 0)
            encodings = [dict((f3, v) for f3, v, _ in pb_fields(msg))
                         for f2, msg, _ in pb_fields(unframe(data[at:at + si[4]])) if f2 == 2]
            kinds.append(encodings[col].get(1, 0))
    return bool(kinds) and all(k in (1, 3) for k in kinds)


def test_command_line(tmp_path, capsys):
    assert cli(["datagen", "tpcds", "--sf", "0.01", "--format", "json", "--out", str(tmp_path / "ds"),
                "--tables", "store,reason", "--quiet"]) == 0
    assert read_schema(tmp_path / "ds" / "reason")[0] == {"name": "r_reason_sk", "type": "int64"}
    assert cli(["datagen", "tpch", "--sf", "0.01", "--out", str(tmp_path / "ds"), "--quiet"]) == 2
    assert "holds different data" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_a_table_folder_holds_only_data_so_any_engine_reads_it_whole(tmp_path, fmt):
    """`spark.read.parquet("OUT/lineitem")`, DuckDB over `OUT/lineitem/*` and pyarrow.dataset over
    the folder all take every file of the folder as data: the schema file sits beside it."""
    import duckdb

    out = tmp_path / "tpch"
    generate("tpch", 0.01, fmt, out, tables=["nation"], rows_per_file=10, progress=False)
    folder = out / "nation"
    assert (out / "nation.schema.json").is_file()
    reader = "read_parquet" if fmt == "parquet" else "read_json_auto"
    con = duckdb.connect()
    assert con.sql(f"SELECT count(*) FROM {reader}('{folder}/*')").fetchone()[0] == 25
    assert con.sql(f"SELECT count(*) FROM {reader}('{folder}/**')").fetchone()[0] == 25
    dataset_format = "parquet" if fmt == "parquet" else "json"
    table = ds.dataset(str(folder), format=dataset_format).to_table()
    assert table.num_rows == 25 and "n_nationkey" in table.column_names
    assert [c["name"] for c in read_schema(folder)] == ["n_nationkey", "n_name", "n_regionkey", "n_comment"]


def test_a_folder_of_the_earlier_layout_is_still_read_and_skipped(tmp_path):
    """Data written before the schema moved out of the folder (`OUT/<table>/schema.json`) keeps
    working: its schema is read from inside, and a new run skips the table."""
    out = tmp_path / "tpch"
    generate("tpch", 0.01, "json", out, tables=["region"], progress=False)
    schema_text = (out / "region.schema.json").read_text()
    (out / "region.schema.json").rename(out / "region" / "schema.json")  # the earlier layout
    assert read_schema(out / "region")[0] == {"name": "r_regionkey", "type": "int32"}
    again = generate("tpch", 0.01, "json", out, tables=["region"], progress=False)
    assert again.written == [] and not (out / "region.schema.json").exists()
    assert json.loads(schema_text) == read_schema(out / "region")
    with pytest.raises(DatagenError, match="no schema"):
        read_schema(out / "nowhere")
