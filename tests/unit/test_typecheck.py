"""The binder: contract §1 type rules, inserted casts, NULL typing, and type errors."""
from __future__ import annotations

import pytest

from jumpgate.contract import types as T
from jumpgate.contract.errors import RequestError
from jumpgate.contract.types import Field, Schema
from jumpgate.dataflow.expr import Binary, Case, Cast, Column, Func, InList, Literal, Unary, walk
from jumpgate.dataflow.parse import parse_expression
from jumpgate.dataflow.plan import NamedExpr
from jumpgate.dataflow.typecheck import (
    bind,
    bind_named,
    cast_to,
    check_bound,
    common_type,
    named_schema,
)

PATH = "operations[3].condition"
D = T.decimal

SCHEMA = Schema(tuple(Field(n, t) for n, t in [
    ("i", T.INT32), ("l", T.INT64), ("f", T.FLOAT64), ("d", D(12, 2)), ("d4", D(10, 4)),
    ("s", T.STRING), ("dt", T.DATE), ("b", T.BOOLEAN), ("Name", T.STRING), ("x", T.INT32),
    ("X", T.INT64), ("big", D(18, 10)), ("'); system(\"id\"); //", T.INT32),
]))


def b(text: str, schema=SCHEMA):
    tree = bind(parse_expression(text, PATH), schema, PATH)
    check_bound(tree, schema)
    return tree


def col(name: str) -> Column:
    i = SCHEMA.index(name)
    return Column(name, i, SCHEMA.fields[i].type)


def err(text: str, schema=SCHEMA) -> RequestError:
    with pytest.raises(RequestError) as info:
        bind(parse_expression(text, PATH), schema, PATH)
    assert info.value.path == PATH
    assert info.value.context.get("text")
    return info.value


# --- result types ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, dtype", [
    # integer arithmetic is int64
    ("i + i", T.INT64), ("i - l", T.INT64), ("i * 2", T.INT64), ("l % i", T.INT64), ("-i", T.INT64),
    # division is float64
    ("i / i", T.FLOAT64), ("d / d", T.FLOAT64), ("d / 2", T.FLOAT64), ("f / i", T.FLOAT64),
    # float64 with anything
    ("f + i", T.FLOAT64), ("d * f", T.FLOAT64), ("f - 1.5", T.FLOAT64), ("-f", T.FLOAT64),
    # decimals: + - keep the larger scale, precision max(int digits) + scale + 1
    ("d + d", D(13, 2)), ("d - d4", D(15, 4)), ("d + i", D(13, 2)), ("d + l", D(18, 2)),
    ("d + 1", D(13, 2)), ("d + 0.5", D(13, 2)), ("d4 - 0.00001", D(12, 5)),
    # * adds scales, precision p1+p2+1 capped at 18
    ("d * d", D(18, 4)), ("d * 2", D(14, 2)), ("d * i", D(18, 2)), ("d4 * 0.5", D(12, 5)),
    ("big * d4", D(18, 14)),  # scale 14 fits, precision capped
    ("big * big", T.FLOAT64),  # scale 20 > 18
    ("d % d4", D(10, 4)), ("-d", D(12, 2)),  # %: min(int digits) + scale
    # comparisons and logic
    ("i = l", T.BOOLEAN), ("d < d4", T.BOOLEAN), ("i > 2.5", T.BOOLEAN), ("f <> d", T.BOOLEAN),
    ("s = 'x'", T.BOOLEAN), ("dt >= DATE '1998-01-01'", T.BOOLEAN), ("dt < '1998-01-01'", T.BOOLEAN),
    ("b = TRUE", T.BOOLEAN), ("b AND NOT b OR b", T.BOOLEAN), ("s IS NULL", T.BOOLEAN),
    ("i IN (1, 2, 3)", T.BOOLEAN), ("s LIKE 'a%'", T.BOOLEAN), ("i BETWEEN 1 AND l", T.BOOLEAN),
    # functions
    ("abs(i)", T.INT32), ("abs(d)", D(12, 2)), ("abs(f)", T.FLOAT64), ("coalesce(i, l)", T.INT64),
    ("coalesce(d, 0)", D(12, 2)), ("coalesce(d, d4)", D(14, 4)), ("coalesce(s, 'none')", T.STRING),
    ("substr(s, 1, 2)", T.STRING), ("substr(s, l)", T.STRING), ("lower(s)", T.STRING),
    ("upper(s)", T.STRING), ("length(s)", T.INT64), ("year(dt)", T.INT64), ("month(dt)", T.INT64),
    ("day(dt)", T.INT64), ("year('2000-01-01')", T.INT64),
    # CASE: common type of the branches
    ("CASE WHEN b THEN i ELSE l END", T.INT64), ("CASE WHEN b THEN 1 ELSE 2.5 END", D(11, 1)),
    ("CASE WHEN b THEN d ELSE f END", T.FLOAT64), ("CASE WHEN b THEN s END", T.STRING),
    ("CASE WHEN b THEN NULL ELSE dt END", T.DATE), ("CASE i WHEN 1 THEN 'a' ELSE 'b' END", T.STRING),
    # casts
    ("CAST(i AS string)", T.STRING), ("CAST(s AS decimal(5,1))", D(5, 1)), ("CAST(s AS date)", T.DATE),
    ("CAST(dt AS string)", T.STRING), ("CAST(b AS string)", T.STRING), ("CAST(s AS boolean)", T.BOOLEAN),
    ("CAST(b AS int32)", T.INT32), ("CAST(b AS int64)", T.INT64), ("CAST(f AS int32)", T.INT32),
    ("CAST(d AS float64)", T.FLOAT64), ("CAST(i AS decimal(3,1))", D(3, 1)), ("CAST(i AS int32)", T.INT32),
    # NULL takes its context's type; alone it is boolean
    ("NULL", T.BOOLEAN), ("NULL IS NULL", T.BOOLEAN), ("i + NULL", T.INT64), ("NULL / NULL", T.FLOAT64),
    ("coalesce(NULL, s)", T.STRING), ("CAST(NULL AS date)", T.DATE), ("-NULL", T.INT64),
    # names
    ('"\'); system(""id""); //" + 1', T.INT64), ("name = 'x'", T.BOOLEAN), ("NAME IS NULL", T.BOOLEAN),
])
def test_result_type(text, dtype):
    assert b(text).type == dtype


# --- inserted casts ----------------------------------------------------------------------------

def test_integer_arithmetic_casts_int32_to_int64():
    assert b("i + l") == Binary("+", Cast(col("i"), T.INT64, T.INT64), col("l"), T.INT64)
    assert b("i * 2") == Binary("*", Cast(col("i"), T.INT64, T.INT64), Literal(2, T.INT64), T.INT64)


def test_division_casts_to_float64():
    e = b("i / d")
    assert e == Binary("/", Cast(col("i"), T.FLOAT64, T.FLOAT64), Cast(col("d"), T.FLOAT64, T.FLOAT64),
                       T.FLOAT64)
    assert b("d / 4") == Binary("/", Cast(col("d"), T.FLOAT64, T.FLOAT64), Literal(4.0, T.FLOAT64), T.FLOAT64)


def test_integer_meets_decimal():
    assert b("d + i") == Binary("+", col("d"), Cast(col("i"), D(10, 0), D(10, 0)), D(13, 2))
    assert b("d + l").right == Cast(col("l"), D(18, 0), D(18, 0))
    # literal integers become narrow decimal literals, no Cast node
    assert b("d * 25").right == Literal(25, D(2, 0))


def test_decimals_keep_their_own_scale():
    e = b("d - d4")
    assert e.left == col("d") and e.right == col("d4")  # the generator rescales exactly
    e = b("d < 0.5")
    assert e == Binary("<", col("d"), Literal(5, D(1, 1)), T.BOOLEAN)


def test_comparison_widening():
    assert b("i = l") == Binary("=", Cast(col("i"), T.INT64, T.INT64), col("l"), T.BOOLEAN)
    assert b("i = 1") == Binary("=", col("i"), Literal(1, T.INT32), T.BOOLEAN)  # no needless casts
    assert b("i = 3000000000").left == Cast(col("i"), T.INT64, T.INT64)
    assert b("i < f").left == Cast(col("i"), T.FLOAT64, T.FLOAT64)
    assert b("i < 1e3") == Binary("<", Cast(col("i"), T.FLOAT64, T.FLOAT64), Literal(1000.0, T.FLOAT64),
                                  T.BOOLEAN)
    assert b("l > 2.5") == Binary(">", Cast(col("l"), D(18, 0), D(18, 0)), Literal(25, D(2, 1)), T.BOOLEAN)


def test_string_literal_compared_with_date_is_a_date():
    assert b("dt < '1998-12-01'") == Binary("<", col("dt"), Literal(10561, T.DATE), T.BOOLEAN)
    assert b("'1998-12-01' > dt").left == Literal(10561, T.DATE)
    e = b("dt IN ('1970-01-01', DATE '1970-01-02')")
    assert e.items == (Literal(0, T.DATE), Literal(1, T.DATE))
    e = b("dt BETWEEN '1998-01-01' AND '1998-12-31'")
    assert all(n.type == T.DATE for n in walk(e) if isinstance(n, Literal))


def test_in_list_casts_items():
    e = b("i IN (1, 3000000000, NULL)")
    assert e == InList(Cast(col("i"), T.INT64, T.INT64),
                       (Literal(1, T.INT64), Literal(3000000000, T.INT64), Literal(None, T.INT64)), False, T.BOOLEAN)
    e = b("d IN (1, 2.50, i)")
    assert e.arg == col("d")
    assert e.items == (Literal(1, D(1, 0)), Literal(250, D(3, 2)), Cast(col("i"), D(10, 0), D(10, 0)))
    assert b("s NOT IN ('a', NULL)").items[1] == Literal(None, T.STRING)


def test_case_branches_get_one_type():
    e = b("CASE WHEN b THEN i WHEN NOT b THEN 2.5 ELSE NULL END")
    assert isinstance(e, Case) and e.type == D(11, 1)
    assert e.whens[0][1] == Cast(col("i"), D(11, 1), D(11, 1))
    assert e.whens[1][1] == Literal(25, D(11, 1))
    assert e.else_ == Literal(None, D(11, 1))
    simple = b("CASE i WHEN 1 THEN 'one' END")
    assert simple.whens[0][0] == Binary("=", col("i"), Literal(1, T.INT32), T.BOOLEAN)


def test_coalesce_and_substr_casts():
    e = b("coalesce(i, l, 0)")
    assert e == Func("coalesce", (Cast(col("i"), T.INT64, T.INT64), col("l"), Literal(0, T.INT64)), T.INT64)
    e = b("substr(s, i, 2)")
    assert e.args == (col("s"), Cast(col("i"), T.INT64, T.INT64), Literal(2, T.INT64))


def test_unary_minus_of_int32_is_int64():
    assert b("-i") == Unary("neg", Cast(col("i"), T.INT64, T.INT64), T.INT64)


def test_cast_to_same_type_disappears_and_null_cast_is_typed_null():
    assert b("CAST(i AS int32)") == col("i")
    assert b("CAST(NULL AS decimal(5,2))") == Literal(None, D(5, 2))


def test_column_binding():
    assert b('"\'); system(""id""); //"') == col("'); system(\"id\"); //")
    assert b("name") == col("Name")  # unique case-insensitive match
    assert b("x") == col("x") and b("X") == col("X")  # exact matches win


def test_every_node_is_typed_for_a_big_expression():
    text = ("CASE WHEN i BETWEEN 1 AND 10 AND s LIKE 'a%' THEN d * 2 + coalesce(d4, 0) "
            "WHEN dt < '2000-01-01' OR b IS NULL THEN -abs(d) ELSE NULL END > 3 "
            "AND l NOT IN (1, 2, i) AND length(lower(substr(s, 1))) % 2 = 0 AND f / i > 0.5")
    tree = b(text)
    assert all(n.type is not None for n in walk(tree))


# --- errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, fragment", [
    ("nope = 1", "unknown column 'nope'"),
    ("xx + 1", "the input has: 'i', 'l'"),
    ("s + 1", "operator '+' needs numeric operands, got string and int32"),
    ("dt + 1", "needs numeric operands, got date and int32"),
    ("b * 2", "needs numeric operands"),
    ("-s", "unary minus needs a numeric operand, got string"),
    ("s = 1", "cannot compare string with int32"),
    ("dt = i", "cannot compare date with int32"),
    ("b = 1", "cannot compare boolean with int32"),
    ("dt = s", "cannot compare date with string"),
    ("i IN (1, 'a')", "cannot compare int32 with string"),
    ("dt = '1998-02-30'", "invalid date '1998-02-30'"),
    ("dt = 'yesterday'", "invalid date"),
    ("i AND b", "AND needs boolean operands, got int32"),
    ("b OR s", "OR needs boolean operands, got string"),
    ("NOT i", "NOT needs a boolean operand, got int32"),
    ("i LIKE 'a%'", "LIKE needs a string operand, got int32"),
    ("CASE WHEN i THEN 1 END", "CASE WHEN condition must be boolean, got int32"),
    ("CASE WHEN b THEN 1 ELSE 'x' END", "CASE branches have incompatible types int32 and string"),
    ("coalesce(s, 1)", "coalesce() arguments have incompatible types string and int32"),
    ("abs(s)", "abs() needs a numeric argument, got string"),
    ("substr(i, 1)", "substr() needs a string as first argument, got int32"),
    ("substr(s, 1.5)", "substr() start and length must be integers"),
    ("lower(i)", "lower() needs a string argument, got int32"),
    ("length(dt)", "length() needs a string argument, got date"),
    ("year(s)", "year() needs a date argument, got string"),
    ("month(i)", "month() needs a date argument, got int32"),
    ("CAST(dt AS int32)", "cannot CAST date to int32"),
    ("CAST(i AS date)", "cannot CAST int32 to date"),
    ("CAST(f AS boolean)", "cannot CAST float64 to boolean"),
    ("CAST(b AS float64)", "cannot CAST boolean to float64"),
    ("CAST(b AS date)", "cannot CAST boolean to date"),
])
def test_type_errors(text, fragment):
    e = err(text)
    assert fragment in e.message, e.message


def test_error_names_the_offending_sub_expression():
    e = err("i > 1 AND (s + 1 > 2)")
    assert e.context["text"] == "s + 1"


def test_ambiguous_and_case_insensitive_errors():
    fields = (Field("k", T.INT32), Field("k", T.INT64))  # probe + build columns of a join
    with pytest.raises(RequestError, match="ambiguous"):
        bind(parse_expression("k = 1", PATH), fields, PATH)
    two = Schema((Field("Ab", T.INT32), Field("aB", T.INT32)))
    with pytest.raises(RequestError, match="case-sensitive"):
        bind(parse_expression("ab", PATH), two, PATH)


def test_hand_built_untyped_literals_are_inferred():
    tree = bind(Binary("+", Column("i"), Literal(5)), SCHEMA, PATH)
    assert tree.right == Literal(5, T.INT64) and tree.type == T.INT64


# --- helpers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("a, c, expected", [
    (T.INT32, T.INT32, T.INT32), (T.INT32, T.INT64, T.INT64), (T.INT64, T.FLOAT64, T.FLOAT64),
    (T.INT32, D(5, 2), D(12, 2)), (T.INT64, D(5, 2), D(18, 2)), (D(12, 2), D(10, 4), D(14, 4)),
    (D(18, 0), D(18, 18), D(18, 18)), (D(5, 2), T.FLOAT64, T.FLOAT64), (T.STRING, T.STRING, T.STRING),
    (T.STRING, T.INT32, None), (T.DATE, T.STRING, None), (T.BOOLEAN, T.INT32, None), (T.DATE, T.DATE, T.DATE),
])
def test_common_type(a, c, expected):
    assert common_type(a, c) == expected
    assert common_type(c, a) == expected


def test_cast_to_folds_exact_literals_only():
    assert cast_to(Literal(3, T.INT32), D(5, 2)) == Literal(300, D(5, 2))
    assert cast_to(Literal(125, D(3, 2)), T.FLOAT64) == Literal(1.25, T.FLOAT64)
    assert cast_to(Literal(125, D(3, 2)), D(5, 1)) == Cast(Literal(125, D(3, 2)), D(5, 1), D(5, 1))  # rounds
    assert cast_to(Literal(10**6, T.INT32), D(5, 0)) == Cast(Literal(10**6, T.INT32), D(5, 0), D(5, 0))
    assert cast_to(Literal(None), T.DATE) == Literal(None, T.DATE)


def test_bind_named_paths_and_schema():
    items = [NamedExpr("total", parse_expression("d * 2", "p")), NamedExpr("name", parse_expression("s", "p"))]
    bound = bind_named(items, SCHEMA, "operations[2].columns")
    assert named_schema(bound) == Schema((Field("total", D(14, 2)), Field("name", T.STRING)))
    bad = [NamedExpr("ok", parse_expression("i", "p")), NamedExpr("bad", parse_expression("s * 2", "p"))]
    with pytest.raises(RequestError) as info:
        bind_named(bad, SCHEMA, "operations[2].columns")
    assert info.value.path == "operations[2].columns[1].expr"
