"""Compile-and-run semantics of generated scan queries, checked against DuckDB.

Each test binds SQL text with the real parser and binder, generates and builds one NCA whose single
project computes many expressions, runs it on a JSON Lines file through the process protocol,
decodes the NTF tuples and compares every value with DuckDB's answer for the same text over the
same file. Data errors (overflow, division by zero, invalid casts) get one small query each.
"""
from __future__ import annotations

import pytest

from .test_codegen_harness import (
    compare_with_duckdb,
    duck_rows,
    duck_sql,
    expect_error,
    needs_runtime,
    run_query,
    scan_ops,
    schema_of,
    write_jsonl,
)

pytestmark = needs_runtime

COLS = {"id": "int64", "i": "int32", "l": "int64", "f": "float64", "d": "decimal(10,2)", "e": "decimal(18,4)",
        "s": "string", "u": "string", "t": "string", "td": "string", "tb": "string", "dt": "date", "b": "boolean"}
SCHEMA = schema_of(COLS)

# Values chosen so that every batched expression is defined on every row (no overflow, no
# division by zero); NULLs everywhere (row 3 has only its id, others miss single fields).
ROWS = [
    {"id": 1, "i": 1, "l": 10, "f": 1.5, "d": "12.34", "e": "1.2345", "s": "hello", "u": "ÀÉÎ straße", "t": "42",
     "td": "1998-12-01", "tb": "true", "dt": "1998-12-01", "b": True},
    {"id": 2, "i": -7, "l": -3, "f": -0.1, "d": "-0.05", "e": "-99.9999", "s": "", "u": "héllo😀x", "t": " 1.5 ",
     "td": " 2000-2-29 ", "tb": "F", "dt": "1969-12-31", "b": False},
    {"id": 3},
    {"id": 4, "i": 2147483647, "l": 3000000000, "f": 1e20, "d": "99999999.99", "e": "12345678901234.5678",
     "s": "abcabc", "u": "Σίσυφος", "t": "-2.5", "td": "0044-03-15 (BC)", "tb": "yes", "dt": "0001-01-01", "b": True},
    {"id": 5, "i": 0, "l": 0, "f": 0.0, "d": "0", "e": "0", "s": "%_", "u": "ǅ İ ı", "t": "1e3", "td": "1583-10-15",
     "tb": "0", "dt": "1900-02-28"},
    {"id": 6, "i": -2147483648, "l": -3000000000, "f": -2.5, "d": "-99999999.99", "e": "-0.0001", "s": "a_c",
     "u": "日本語テキスト", "t": "0.5", "td": "1969-12-31", "tb": "N", "dt": "2000-02-29", "b": False},
    {"id": 7, "i": 100, "l": 7, "f": 2.5, "d": "0.5", "e": "0.5", "s": "Hello World", "u": "ÅÆØ åæø", "t": "-0",
     "td": "2038-01-19", "tb": "T", "dt": "1583-10-15", "b": True},
    {"id": 8, "l": 1, "f": 1e-7, "d": "1.25", "e": "-1.25", "u": "e\u0301", "t": "+17", "dt": "2262-04-11"},
    {"id": 9, "i": 5, "f": 0.30000000000000004, "d": "-1.25", "s": "ab\\c", "u": "ẞ ß", "t": "9007199254740993"},
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_jsonl(tmp_path_factory.mktemp("codegen") / "t.jsonl", ROWS)


def check(data, exprs: dict[str, str], filters=()) -> None:
    n = compare_with_duckdb(data, SCHEMA, list(exprs.items()), filters)
    assert n > 0


# ------------------------------------------------------------------ arithmetic


def test_integer_arithmetic(data):
    check(data, {
        "add": "l + 1", "sub": "l - i", "mul": "l * 3", "rem": "l % 7", "rem_neg": "l % -3", "neg": "-l", "negi": "-i",
        "sq": "l * l", "ii": "i + i", "iprod": "i * i", "mix": "i * 2 - l", "absl": "abs(l)", "div": "l / 4",
        "idiv": "i / 8", "prec": "1 + 2 * 3 - l % 4", "null_lit": "l + NULL",
    })


def test_decimal_arithmetic(data):
    check(data, {
        "add": "d + e", "sub": "d - e", "mul": "CASE WHEN abs(d) < 1000 THEN d * d END", "mul_de": "d * (e % 100)", "mul_int": "d * 2", "add_int": "d + 1", "mul_lit": "e * 3",
        "mul_frac": "d * 2.5", "rem": "d % 3", "neg": "-d", "abs": "abs(d)", "abse": "abs(e)", "div": "d / 4",
        "mixed_float": "d + f", "int_dec": "l * 0.5", "rem_scales": "e % 0.3", "sub_lit": "0.001 - d",
    })


def test_float_arithmetic(data):
    check(data, {
        "add": "f + 1", "sq": "f * f", "sub": "f - 0.5", "neg": "-f", "abs": "abs(f)", "div": "f / 4",
        "rem": "f % 2", "rem_neg": "f % -0.75", "mixed": "f * l", "int_float": "i + f",
    })


# ------------------------------------------------------------------ comparisons and logic


def test_comparisons(data):
    check(data, {
        "gt": "l > 5", "eq_mixed": "l = i", "ne": "l <> 7", "ne2": "l != 7", "str_eq": "s = 'hello'",
        "str_lt": "s < 'b'", "str_cmp": "u > s", "str_ge": "u >= 'Σ'", "date_lt": "dt < DATE '1970-01-01'",
        "date_eq": "dt = DATE '2000-02-29'", "dec_eq": "d = e", "dec_lt": "d < e", "dec_lit": "d > 0.5",
        "dec_int": "d >= l", "float_eq": "f = 1.5", "float_dec": "f < d", "bool_eq": "b = (l > 0)",
        "between": "l BETWEEN 0 AND 10", "not_between": "l NOT BETWEEN 0 AND 10", "null_cmp": "l > NULL",
        "date_between": "dt BETWEEN DATE '1900-01-01' AND DATE '2000-12-31'",
    })


def test_float_special_values_compare_like_duckdb(data):
    # NaN equals itself and sorts above every other value; -0.0 = 0.0 (DuckDB and Spark agree)
    nan, inf = "CAST('nan' AS float64)", "CAST('inf' AS float64)"
    check(data, {
        "nan_eq": f"{nan} = {nan}", "f_lt_nan": f"f < {nan}", "nan_gt": f"{nan} > f", "nan_ge": f"{nan} >= {inf}",
        "nan_le": f"{nan} <= f", "nan_ne": f"f <> {nan}", "inf_gt": f"{inf} > f", "negzero": "-0.0 = f * 0",
        "nan_in": f"{nan} IN (f, {nan})", "nan_str": f"CAST({nan} AS string)", "inf_str": f"CAST(-{inf} AS string)",
        "inf_arith": f"{inf} - {inf} = {nan}", "nan_case": f"CASE WHEN {nan} > 1e308 THEN 'big' ELSE 'small' END",
    })


def test_three_valued_logic(data):
    check(data, {
        "and": "b AND l > 0", "or": "b OR l > 0", "not": "NOT b", "not_cmp": "NOT (l > 5)",
        "and_null": "b AND NULL", "or_null": "b OR NULL", "null_and_false": "NULL AND (l > 1000)",
        "null_or_true": "NULL OR l IS NULL", "nested": "(b OR s IS NULL) AND NOT (f < 0 OR d IS NULL)",
        "chain": "l > 0 AND i > 0 AND f > 0", "any": "l > 5 OR i > 5 OR f > 5",
    })


def test_null_predicates_and_in(data):
    check(data, {
        "isnull": "l IS NULL", "notnull": "s IS NOT NULL", "isnull_expr": "(l + i) IS NULL",
        "in": "l IN (1, 10, 7)", "in_null": "l IN (1, NULL)", "in_match_null": "l IN (10, NULL)",
        "not_in": "l NOT IN (1, 10)", "not_in_null": "l NOT IN (1, NULL)", "in_str": "s IN ('hello', 'a_c')",
        "in_dec": "d IN (12.34, 0.5)", "in_mixed": "i IN (l, 100)", "in_exprs": "l IN (i, i + 3, l * 0 + 10)",
        "in_date": "dt IN (DATE '1998-12-01', DATE '0001-01-01')", "in_float": "f IN (1.5, 2.5)",
    })


def _many(values: list[str], filler: str, n: int = 20) -> str:
    """`values` (which decide the answers) then `n` fillers, `filler` formatted with k = 1..n."""
    return ", ".join(values + [filler.format(k=k) for k in range(1, n + 1)])


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def test_large_in_lists_are_searched_like_duckdb(data):
    # At least SET_MIN constants: one sorted array and a binary search per list (codegen/inset.py)
    # for every type IN supports; NULL items, NOT IN, non-constant items beside the constants,
    # decimals of other scales than the probe's, -0.0 against 0.0, strings by bytes and length.
    strings = [_q(""), _q("hello"), _q("abcabc"), _q("%_"), _q("ab\\c")]
    dates = [f"DATE {_q(d)}" for d in ("1998-12-01", "0001-01-01", "2262-04-11")]
    date_filler = "DATE '1970-02-{k:02d}'"
    check(data, {
        "ints": f"l IN ({_many(['10', '-3', '3000000000'], '{k}0001')})",
        "ints_null": f"l IN ({_many(['7', 'NULL'], '-{k}1')})",
        "ints_not_in": f"l NOT IN ({_many(['10', '1'], '{k}23')})",
        "not_in_null": f"l NOT IN ({_many(['10', 'NULL'], '{k}23')})",
        "int32": f"i IN ({_many(['-7', '2147483647', '-2147483648'], '{k}99')})",
        "int32_exprs": f"i IN ({_many(['l', 'i * 0 + 5', '100'], '{k}99')})",
        "decimals": f"d IN ({_many(['12.34', '-0.050', '1.250', '99999999.99', '3', '1.234'], '{k}.001')})",
        "decimals_wide": f"e IN ({_many(['1.2345', '-0.0001', '12345678901234.5678', '0.50'], '{k}.00001')})",
        "floats": f"f IN ({_many(['1.5', '-0.1', '1e20', '1e-7', '0.30000000000000004'], '{k}.25e3')})",
        "neg_zero": f"f * 0 IN ({_many(['0.0'], '{k}.5')})",
        "strings": f"s IN ({_many(strings, _q('hello{k}'))})",
        "unicode": f"u IN ({_many([_q('ẞ ß'), _q('Σίσυφος'), _q('e')], _q('Σ{k}'))})",
        "strings_not_in": f"s NOT IN ({_many([_q('hello'), 'NULL'], _q('a{k}'))})",
        "dates": f"dt IN ({_many(dates, date_filler, 28)})",
        "booleans": f"b IN ({_many(['TRUE'], 'TRUE')})",
    })


def test_case_and_coalesce(data):
    check(data, {
        "sign": "CASE WHEN l > 0 THEN 'pos' WHEN l < 0 THEN 'neg' ELSE 'zero' END",
        "no_else": "CASE WHEN b THEN l END", "null_cond": "CASE WHEN NULL THEN 1 ELSE 2 END",
        "numeric": "CASE WHEN d > 1 THEN d ELSE e END", "nested": "CASE WHEN l > 0 THEN CASE WHEN i > 0 THEN 1 ELSE 2 END ELSE 3 END",
        "coalesce": "coalesce(s, u, 'none')", "coalesce_num": "coalesce(l, i, -1)", "coalesce_dec": "coalesce(d, e)",
        "coalesce_null": "coalesce(NULL, l)", "case_date": "CASE WHEN b THEN dt END",
    })


def test_lazy_evaluation_never_raises_unneeded_errors(data):
    """Errors in branches that are not needed never happen (DuckDB may evaluate eagerly, so the
    answers are checked against rewritten safe SQL)."""
    exprs = {
        "case": ("CASE WHEN l <> 0 THEN 100 % l ELSE -1 END", None),
        "and": ("l <> 0 AND 100 % l = 1", "CASE WHEN l IS NULL THEN NULL WHEN l = 0 THEN FALSE ELSE 100 % l = 1 END"),
        "or": ("l = 0 OR 100 % l = 1", "CASE WHEN l IS NULL THEN NULL WHEN l = 0 THEN TRUE ELSE 100 % l = 1 END"),
        "coalesce": ("coalesce(id, 5 % (l - l))", "id"),
        "in": ("l IN (0, 100 % l)", "CASE WHEN l IS NULL THEN NULL WHEN l = 0 THEN TRUE ELSE l = 100 % l END"),
        "cast": ("CASE WHEN abs(f) < 1e15 THEN CAST(f AS int64) END", None),
    }
    ops, layout = scan_ops(SCHEMA, data, columns=[("id", "id")] + [(k, v[0]) for k, v in exprs.items()])
    got, err = run_query(ops, layout, [data])
    assert err is None, err
    want = duck_rows(data, SCHEMA, [("id", "id")] + [(k, v[1] or v[0]) for k, v in exprs.items()])
    assert _same(got, want)


def _same(got, want) -> bool:
    from .test_codegen_harness import same_value

    got, want = sorted(got, key=lambda r: r[0]), sorted(want, key=lambda r: r[0])
    assert len(got) == len(want), (got, want)
    for gr, wr in zip(got, want):
        assert all(same_value(g, w) for g, w in zip(gr, wr)), (gr, wr)
    return True


# ------------------------------------------------------------------ casts


def test_casts_between_numbers(data):
    check(data, {
        "l_i32": "CASE WHEN abs(l) < 100000 THEN CAST(l AS int32) END", "i_i64": "CAST(i AS int64)",
        "l_f": "CAST(l AS float64)", "l_dec": "CAST(l AS decimal(18,2))", "i_dec": "CAST(i AS decimal(12,1))",
        "f_int": "CASE WHEN abs(f) < 1e15 THEN CAST(f AS int64) END", "f_i32": "CASE WHEN abs(f) < 1e9 THEN CAST(f AS int32) END",
        "f_dec": "CASE WHEN abs(f) < 1e6 THEN CAST(f AS decimal(10,2)) END", "d_int": "CAST(d AS int64)",
        "e_int": "CAST(e AS int64)", "d_i32": "CAST(d AS int32)", "d_f": "CAST(d AS float64)",
        "e_f": "CAST(e AS float64)", "d_dec_down": "CAST(d AS decimal(12,1))", "e_dec_down": "CAST(e AS decimal(18,2))",
        "d_dec_up": "CAST(d AS decimal(18,6))", "e_dec_0": "CAST(e AS decimal(18,0))", "b_int": "CAST(b AS int64)",
    })


def test_casts_to_string(data):
    check(data, {
        "l": "CAST(l AS string)", "i": "CAST(i AS string)", "d": "CAST(d AS string)", "e": "CAST(e AS string)",
        "f": "CAST(f AS string)", "f3": "CAST(f * 3 AS string)", "fdiv": "CAST(l / 3 AS string)",
        "dt": "CAST(dt AS string)", "b": "CAST(b AS string)", "s": "CAST(s AS string)",
        "concat_len": "length(CAST(d AS string))",
    })


def test_casts_from_string(data):
    check(data, {
        "int": "CAST(t AS int64)", "float": "CAST(t AS float64)", "dec": "CAST(t AS decimal(18,2))",
        "dec0": "CAST(t AS decimal(18,0))", "date": "CAST(td AS date)", "bool": "CAST(tb AS boolean)",
    }, filters=["id <> 9"])
    check(data, {"int32": "CAST(t AS int32)"}, filters=["id NOT IN (9)"])


# ------------------------------------------------------------------ strings and dates


def test_string_functions(data):
    check(data, {
        "len_s": "length(s)", "len_u": "length(u)", "lower_u": "lower(u)", "upper_u": "upper(u)", "lower_s": "lower(s)",
        "upper_s": "upper(s)", "mid": "substr(u, 2, 3)", "from0": "substr(s, 0, 2)", "tail": "substr(s, -2)",
        "back": "substr(s, -3, 2)", "negative_len": "substr(s, 2, -1)", "before_start": "substr(u, -7, 3)",
        "var_start": "substr(u, l)", "var_both": "substr(u, i % 5, l % 4)", "from1": "substr(u, 1)",
        "nested": "upper(substr(lower(u), 2))", "len_upper": "length(upper(u))",
    })


def test_like(data):
    check(data, {
        "prefix": "s LIKE 'a%'", "suffix": "s LIKE '%c'", "one": "s LIKE '_b%'", "uni": "u LIKE '_é%'",
        "not": "s NOT LIKE '%o%'", "any": "s LIKE '%'", "empty": "s LIKE ''", "emoji": "u LIKE '%😀%'",
        "exact": "s LIKE 'hello'", "case": "s LIKE 'HELLO'", "underscores": "u LIKE '___'", "mixed": "s LIKE '%b_b%'",
        "backslash": "s LIKE 'ab\\c'", "percent_lit": "s LIKE '%\\%%'", "uni_one": "u LIKE 'ǅ_İ%'",
    })


def test_dates(data):
    check(data, {
        "y": "year(dt)", "m": "month(dt)", "d": "day(dt)", "str": "CAST(dt AS string)", "dt": "dt",
        "old": "dt < DATE '1970-01-01'", "leap": "month(dt) = 2 AND day(dt) = 29", "y_expr": "year(dt) * 100 + month(dt)",
    })


# ------------------------------------------------------------------ filters and projections


def test_filters_then_project(data):
    check(data, {"s": "s", "x": "l * 2", "u": "upper(u)"}, filters=["l > 0", "s LIKE '%l%' OR s IS NULL"])
    check(data, {"d": "d"}, filters=["d > 0 AND b"])
    check(data, {"id2": "id * 2"}, filters=["l IS NULL OR l < 0"])


def test_filter_keeps_only_true(data):
    # NULL conditions drop the row like FALSE ones
    check(data, {"b": "b"}, filters=["b"])
    check(data, {"l": "l"}, filters=["NOT (l > 5)"])


def test_nested_projects_and_filters(data):
    ops, layout = scan_ops(SCHEMA, data, filters=[], projects=[
        [("id", "id"), ("x", "l * 2 + 1"), ("y", "upper(s)"), ("bad", "l % 0"), ("dd", "d")],
        [("id", "id"), ("x2", "x * 3"), ("yy", "y"), ("both", "CASE WHEN x > 5 THEN x ELSE 0 END"), ("z", "dd + x")],
    ])
    got, err = run_query(ops, layout, [data])
    assert err is None, err  # "bad" is dropped by the second project, so it is never evaluated
    import duckdb

    from .test_codegen_harness import duck_source, same_value

    inner = f"SELECT id, l * 2 + 1 AS x, upper(s) AS y, d AS dd FROM {duck_source(data, SCHEMA)}"
    sql = f"SELECT id, x * 3, y, CASE WHEN x > 5 THEN x ELSE 0 END, dd + x FROM ({inner}) ORDER BY id"
    want = duckdb.connect().execute(sql).fetchall()
    got = sorted(got, key=lambda r: r[0])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert all(same_value(a, b) for a, b in zip(g, w)), (g, w)


def test_project_filter_project_chain(data):
    steps = [("project", [("id", "id"), ("x", "l + i"), ("w", "lower(u)")]), ("filter", "x > 0"),
             ("filter", "w LIKE '%é%' OR x > 100"), ("project", [("id", "id"), ("x", "x"), ("n", "length(w) + x")])]
    ops, layout = scan_ops(SCHEMA, data, steps=steps)
    got, err = run_query(ops, layout, [data])
    assert err is None, err
    want = duck_rows(data, SCHEMA, [("id", "id"), ("x", "l + i"), ("n", "length(lower(u)) + l + i")],
                     ["l + i > 0", "lower(u) LIKE '%é%' OR l + i > 100"])
    assert _same(got, want)


def test_threads_split_the_input(data, tmp_path):
    big = write_jsonl(tmp_path / "big.jsonl", [dict(r, id=r["id"] + 100 * k) for k in range(200) for r in ROWS])
    ops, layout = scan_ops(SCHEMA, big, filters=["l IS NOT NULL"], columns=[("id", "id"), ("x", "l * 3 + i")])
    got, err = run_query(ops, layout, [big], threads=2)
    assert err is None, err
    want = duck_rows(big, SCHEMA, [("id", "id"), ("x", "l * 3 + i")], ["l IS NOT NULL"])
    assert sorted(got) == sorted(want)


# ------------------------------------------------------------------ data errors


ERRORS = [
    ("l + 9223372036854775807", "integer overflow", True),
    ("l * l * l", "integer overflow", True),
    ("i * 9223372036854775807", "integer overflow", True),
    ("-(l - 9223372036854775807 - 11)", "integer overflow in negation", True),
    ("abs(i - 2147483647 - 1 - 9223372034707292161)", "integer overflow in abs", True),
    ("abs(i)", "does not fit int32", False),  # abs keeps int32: abs(-2^31) does not fit
    ("l % 0", "division by zero", False),  # DuckDB 2 fails too; 1.x answers NULL
    ("l % (i - i)", "division by zero", False),  # DuckDB 2 fails too; 1.x answers NULL
    ("f / 0", "division by zero", False),  # DuckDB 2 answers inf here; Spark ANSI and Jumpgate fail
    ("d % 0", "division by zero", False),  # DuckDB 2 fails too; 1.x answers NULL
    ("d * d * d", "decimal overflow", False),  # DuckDB widens to 38 digits; we keep precision <= 18
    ("e * 100000", "decimal overflow", False),
    ("CAST(l AS int32)", "out of range", True),
    ("CAST(f AS int64)", "out of range", True),
    ("CAST(f AS decimal(5,2))", "out of range", True),
    ("CAST(d AS decimal(4,2))", "decimal overflow", True),
    ("CAST(e AS decimal(6,1))", "decimal overflow", True),
    ("CAST(l AS decimal(10,2))", "decimal overflow", True),
    ("CAST(s AS int64)", "invalid value", True),
    ("CAST(u AS float64)", "invalid value", True),
    ("CAST(s AS decimal(10,2))", "invalid value", True),
    ("CAST(s AS date)", "invalid value", True),
    ("CAST(s AS boolean)", "invalid value", True),
    ("CAST(t AS int32)", "out of range", True),
]


@pytest.mark.parametrize("expr,message,duck_fails", ERRORS, ids=[e[0] for e in ERRORS])
def test_data_errors(data, expr, message, duck_fails):
    err = expect_error(data, SCHEMA, columns=[("id", "id"), ("x", expr)], contains=message)
    assert err.get("record"), err  # the runtime adds file and record
    assert "'x'" in err["message"], err  # names the output column
    if duck_fails:
        import duckdb

        from .test_codegen_harness import duck_source

        with pytest.raises(duckdb.Error):
            duckdb.connect().execute(f"SELECT id, {duck_sql(expr)} FROM {duck_source(data, SCHEMA)}").fetchall()


def test_invalid_cast_names_the_value(data):
    err = expect_error(data, SCHEMA, columns=[("x", "CAST(s AS int64)")], contains="invalid value")
    assert "'hello'" in err["message"] and err["record"] == 1, err


def test_error_reports_the_first_failing_record(data):
    err = expect_error(data, SCHEMA, columns=[("x", "100 % l")], contains="division by zero")
    assert err["record"] == 5, err


def test_filter_error_names_the_filter(data):
    err = expect_error(data, SCHEMA, filters=["l % 0 = 1"], contains="division by zero")
    assert "filter 'f0'" in err["message"], err
