"""Wide decimals (19..38 digits, 128-bit unscaled values) in generated scan queries, checked
against DuckDB, whose DECIMAL(38,s) is the same type: reading them from JSON Lines, arithmetic
with wide and narrow operands, comparisons across scales, casts both ways, and the data errors
for results beyond their precision."""
from __future__ import annotations

import pytest

from .test_codegen_harness import compare_with_duckdb, expect_error, needs_runtime, schema_of, write_jsonl

pytestmark = needs_runtime

COLS = {"id": "int64", "w": "decimal(38,2)", "v": "decimal(19,0)", "x": "decimal(25,10)", "d": "decimal(10,2)",
        "e": "decimal(18,4)", "l": "int64", "f": "float64", "t": "string"}
SCHEMA = schema_of(COLS)

BIG = "9" * 36 + ".99"  # the largest decimal(38,2)
ROWS = [
    {"id": 1, "w": "12345678901234567890123.45", "v": "1234567890123456789", "x": "123456789012345.0123456789",
     "d": "12.34", "e": "1.2345", "l": 10, "f": 1.5, "t": "98765432109876543210.125"},
    {"id": 2, "w": "-" + BIG, "v": "-9999999999999999999", "x": "-0.0000000001", "d": "-0.05", "e": "-99.9999",
     "l": -3, "f": -2.5, "t": "-1.005"},
    {"id": 3},
    {"id": 4, "w": BIG, "v": 0, "x": 0, "d": "99999999.99", "e": "12345678901234.5678", "l": 0, "f": 0.0, "t": "0"},
    {"id": 5, "w": 0.5, "v": 7, "x": 1.25, "d": "0.5", "e": "0.5", "l": 7, "f": 1e20, "t": "1e3"},
    {"id": 6, "w": "-0.01", "v": "-1", "x": "-999999999999999.9999999999", "d": "-1.25", "e": "-1.25", "l": -1,
     "f": -0.125, "t": "42"},
    {"id": 7, "w": "999999999999999999.995", "v": "1000000000000000000", "x": "0.00000000005", "d": "1", "e": "2",
     "l": 123456789012, "f": 3.0, "t": "-0.5"},
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_jsonl(tmp_path_factory.mktemp("wide") / "t.jsonl", ROWS)


def check(data, exprs: dict[str, str], filters=()) -> None:
    assert compare_with_duckdb(data, SCHEMA, list(exprs.items()), filters) > 0


def test_wide_columns_read_from_json_lines(data):
    check(data, {"w": "w", "v": "v", "x": "x", "neg": "-w", "abs": "abs(x)"})


def test_wide_arithmetic_with_wide_and_narrow_operands(data):
    check(data, {
        "add_narrow": "CASE WHEN abs(w) < 1e30 THEN w + d END", "sub_wide": "v - x", "add_int": "v + l",
        "mul_narrow": "x * d", "mul_int": "v * 3", "rem": "x % 7", "narrow_only": "d + e",
        "div": "x / 4", "mixed_float": "v + f", "lit": "x + 0.5",
    }, filters=["id <> 4", "id <> 2"])


def test_wide_comparisons_across_scales(data):
    check(data, {
        "lt": "v < x", "lt_wide": "CASE WHEN abs(w) < 1e20 THEN w < x END", "eq": "v = d", "ge": "x >= e", "ne": "w <> 0.5", "wv": "w > v", "lit": "x < 1000",
        "between": "v BETWEEN -5 AND 10", "case": "CASE WHEN x > d THEN x ELSE d END",
        "coalesce": "coalesce(v, l)",
    })
    check(data, {"w": "w"}, filters=["w > d"])


def test_casts_to_and_from_wide(data):
    check(data, {
        "d_wide": "CAST(d AS decimal(30,5))", "e_wide0": "CAST(e AS decimal(20,0))", "l_wide": "CAST(l AS decimal(38,10))",
        "x_narrow": "CASE WHEN abs(x) < 1e6 THEN CAST(x AS decimal(12,3)) END", "x_int": "CAST(x AS int64)",
        "w_float": "CAST(w AS float64)", "x_float": "CAST(x AS float64)", "w_str": "CAST(w AS string)",
        "x_str": "CAST(x AS string)", "t_wide": "CAST(t AS decimal(38,2))", "f_wide": "CAST(f AS decimal(30,3))",
        "w_down": "CASE WHEN abs(w) < 1e30 THEN CAST(w AS decimal(37,1)) END", "x_up": "CAST(x AS decimal(38,12))",
    })


def test_wide_result_beyond_precision_is_a_data_error(data):
    expect_error(data, SCHEMA, [("s", "w + w")], filters=["id = 4"], contains="decimal overflow")
    expect_error(data, SCHEMA, [("s", "w * w")], filters=["id = 1"], contains="decimal overflow")
    expect_error(data, SCHEMA, [("s", "CAST(w AS decimal(20,2))")], filters=["id = 1"], contains="decimal overflow")


def test_json_value_beyond_the_column_precision_is_a_data_error(tmp_path):
    path = write_jsonl(tmp_path / "big.jsonl", [{"id": 1, "w": "1" + "0" * 36}])
    expect_error(path, schema_of({"id": "int64", "w": "decimal(38,2)"}), [("w", "w")], contains="does not fit")
