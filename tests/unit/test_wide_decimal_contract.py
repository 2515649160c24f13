"""Wide decimals (19..38 digits) in the contract: the type, its 16-byte NTF field, the binder's
result types (v1 rules unchanged between narrow decimals), the Python client's decoder and the
test encoder. v1 layouts (no decimal of more than 18 digits) stay byte-identical."""
from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from jumpgate.client import StreamError, decode_stream
from jumpgate.client.testing import encode_stream, encode_table, end_marker, frame, header
from jumpgate.contract.ntf import generate_ntf
from jumpgate.contract.types import Field, Schema, decimal, parse_type
from jumpgate.dataflow.aggregates import partial_fields, result_type, sum_type
from jumpgate.dataflow.plan import AggFn

from .test_codegen_harness import bind_text, schema_of


def layout_of(cols: list[tuple[str, str]]):
    return generate_ntf(Schema(tuple(Field(n, parse_type(t)) for n, t in cols)))


@pytest.mark.parametrize("text,size,wide", [("decimal(18,2)", 8, False), ("decimal(19,0)", 16, True),
                                            ("decimal(38,38)", 16, True), ("decimal(1,0)", 8, False)])
def test_type_range_and_ntf_size(text, size, wide):
    t = parse_type(text)
    assert (t.ntf_size, t.is_wide_decimal, str(t)) == (size, wide, text)


@pytest.mark.parametrize("text", ["decimal(39,2)", "decimal(0,0)", "decimal(20,21)"])
def test_out_of_range_decimals_are_refused(text):
    with pytest.raises(ValueError, match="precision|scale"):
        parse_type(text)


def test_layout_offsets_align_the_16_byte_field_to_8():
    layout = layout_of([("b", "boolean"), ("w", "decimal(38,2)"), ("i", "int32"), ("n", "decimal(18,2)"),
                        ("v", "decimal(19,0)"), ("s", "string")])
    assert [(f.offset, f.size) for f in layout.fields] == [(8, 1), (16, 16), (32, 4), (40, 8), (48, 16), (64, 8)]
    assert layout.fixed_size == 72
    assert layout.to_json()["fields"][1] == {"name": "w", "type": "decimal(38,2)", "offset": 16, "size": 16,
                                             "null_bit": 1}


def test_v1_layouts_are_unchanged():
    layout = layout_of([("d", "decimal(18,4)"), ("x", "decimal(12,2)"), ("i", "int32")])
    assert [(f.offset, f.size) for f in layout.fields] == [(8, 8), (16, 8), (24, 4)] and layout.fixed_size == 32


def test_binder_result_types():
    schema = schema_of({"w": "decimal(38,2)", "v": "decimal(20,0)", "d": "decimal(10,2)", "e": "decimal(18,4)",
                        "l": "int64"})
    types = {t: str(bind_text(t, schema).type) for t in
             ["d + e", "d * e", "d * d", "w + d", "v * d", "v + l", "w * e", "v - 1", "w / 2", "v % d",
              "CASE WHEN l > 0 THEN v ELSE d END"]}
    assert types == {
        "d + e": "decimal(18,4)", "d * e": "decimal(18,6)", "d * d": "decimal(18,4)",  # v1 caps at 18
        "w + d": "decimal(38,2)", "v * d": "decimal(31,2)", "v + l": "decimal(21,0)", "w * e": "decimal(38,6)",
        "v - 1": "decimal(21,0)", "w / 2": "float64", "v % d": "decimal(10,2)",
        "CASE WHEN l > 0 THEN v ELSE d END": "decimal(22,2)",
    }


def test_aggregate_types():
    assert sum_type(decimal(15, 2)) == decimal(18, 2)  # v1: unchanged
    assert sum_type(decimal(25, 2)) == decimal(38, 2)
    assert result_type(AggFn.MIN, decimal(25, 2)) == decimal(25, 2)
    assert result_type(AggFn.AVG, decimal(25, 2)) == parse_type("float64")
    assert [str(f.type) for f in partial_fields("a", AggFn.AVG, decimal(30, 4))] == ["decimal(38,4)", "int64"]


WIDE_ROWS = [(Decimal("-" + "9" * 36 + ".99"), Decimal("1234567890123456789"), 1),
             (None, Decimal("-1"), None), (Decimal("0.01"), None, 7), (Decimal("170141183460469231731687303.71"),
                                                                        Decimal("-9999999999999999999"), -3)]
WIDE_COLS = [("w", "decimal(38,2)"), ("v", "decimal(19,0)"), ("i", "int64")]


def test_client_decodes_wide_fields_as_decimals():
    layout = layout_of(WIDE_COLS)
    table = decode_stream(encode_stream(WIDE_ROWS, layout), layout)
    assert table.schema.field("w").type == pa.decimal128(38, 2)
    assert [tuple(r.values()) for r in table.to_pylist()] == WIDE_ROWS
    assert all(isinstance(v, Decimal) for v in table.column("w").to_pylist() if v is not None)


def test_vectorized_encoder_writes_wide_fields():
    layout = layout_of(WIDE_COLS)
    table = decode_stream(encode_stream(WIDE_ROWS, layout), layout)
    assert encode_table(table, layout) == encode_stream(WIDE_ROWS, layout)


@pytest.mark.parametrize("value", [10**38, -(10**38), 2**127 - 1, -(2**127)])
def test_client_rejects_wide_values_beyond_the_precision(value):
    layout = layout_of([("w", "decimal(38,2)")])
    body = bytes(8) + value.to_bytes(16, "little", signed=True)
    with pytest.raises(StreamError, match="does not fit decimal"):
        decode_stream(header(0) + frame(body) + end_marker(1), layout)


def test_client_accepts_the_largest_wide_values():
    layout = layout_of([("w", "decimal(38,0)")])
    rows = [(Decimal(10**38 - 1),), (Decimal(-(10**38) + 1),)]
    assert decode_stream(encode_stream(rows, layout), layout).column("w").to_pylist() == [r[0] for r in rows]
