"""parse_expression: every construct of contract §1, literal typing, and rejection of the rest."""
from __future__ import annotations

import random

import pytest

from jumpgate.contract import types as T
from jumpgate.contract.errors import RequestError
from jumpgate.dataflow.expr import Binary, Case, Cast, Column, Func, InList, IsNull, Like, Literal, Unary
from jumpgate.dataflow.limits import DEFAULT_LIMITS, RequestLimits, RequestTooLarge
from jumpgate.dataflow.parse import parse_expression
from jumpgate.dataflow.sqltext import to_sql

MAX_DEPTH = DEFAULT_LIMITS.max_expression_depth

PATH = "operations[1].condition"


def p(text: str):
    return parse_expression(text, PATH)


def col(name: str) -> Column:
    return Column(name)


def i32(v: int) -> Literal:
    return Literal(v, T.INT32)


# --- constructs --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("a", col("a")),
    ('"a b"', col("a b")),
    ('"Sel""ect"', col('Sel"ect')),
    ("(a)", col("a")),
    ("a + 1", Binary("+", col("a"), i32(1))),
    ("a - b * c", Binary("-", col("a"), Binary("*", col("b"), col("c")))),
    ("a / b % c", Binary("%", Binary("/", col("a"), col("b")), col("c"))),
    ("-a", Unary("neg", col("a"))),
    ("a = 1", Binary("=", col("a"), i32(1))),
    ("a <> 1", Binary("<>", col("a"), i32(1))),
    ("a != 1", Binary("<>", col("a"), i32(1))),
    ("a < 1", Binary("<", col("a"), i32(1))),
    ("a <= 1", Binary("<=", col("a"), i32(1))),
    ("a > 1", Binary(">", col("a"), i32(1))),
    ("a >= 1", Binary(">=", col("a"), i32(1))),
    ("a AND b OR NOT c", Binary("or", Binary("and", col("a"), col("b")), Unary("not", col("c")))),
    ("a and (b or c)", Binary("and", col("a"), Binary("or", col("b"), col("c")))),
    ("a IS NULL", IsNull(col("a"))),
    ("a IS NOT NULL", IsNull(col("a"), negated=True)),
    ("a BETWEEN 1 AND 2", Binary("and", Binary(">=", col("a"), i32(1)), Binary("<=", col("a"), i32(2)))),
    ("a NOT BETWEEN 1 AND 2",
     Unary("not", Binary("and", Binary(">=", col("a"), i32(1)), Binary("<=", col("a"), i32(2))))),
    ("a IN (1, 2)", InList(col("a"), (i32(1), i32(2)))),
    ("a NOT IN (1)", InList(col("a"), (i32(1),), negated=True)),
    ("NOT a IN (1)", InList(col("a"), (i32(1),), negated=True)),
    ("a LIKE 'x%_'", Like(col("a"), "x%_")),
    ("a NOT LIKE 'it''s'", Like(col("a"), "it's", negated=True)),
    ("CASE WHEN a THEN 1 WHEN b THEN 2 ELSE 3 END",
     Case(((col("a"), i32(1)), (col("b"), i32(2))), i32(3))),
    ("CASE WHEN a THEN 1 END", Case(((col("a"), i32(1)),))),
    ("CASE x WHEN 1 THEN 'one' ELSE 'other' END",
     Case(((Binary("=", col("x"), i32(1)), Literal("one", T.STRING)),), Literal("other", T.STRING))),
    ("CAST(a AS int32)", Cast(col("a"), T.INT32)),
    ("cast(a as INTEGER)", Cast(col("a"), T.INT32)),
    ("CAST(a AS int)", Cast(col("a"), T.INT32)),
    ("CAST(a AS int64)", Cast(col("a"), T.INT64)),
    ("CAST(a AS BIGINT)", Cast(col("a"), T.INT64)),
    ("CAST(a AS float64)", Cast(col("a"), T.FLOAT64)),
    ("CAST(a AS DOUBLE)", Cast(col("a"), T.FLOAT64)),
    ("CAST(a AS decimal(12,2))", Cast(col("a"), T.decimal(12, 2))),
    ("CAST(a AS DECIMAL(5))", Cast(col("a"), T.decimal(5, 0))),
    ("CAST(a AS string)", Cast(col("a"), T.STRING)),
    ("CAST(a AS VARCHAR)", Cast(col("a"), T.STRING)),
    ("CAST(a AS TEXT)", Cast(col("a"), T.STRING)),
    ("CAST(a AS boolean)", Cast(col("a"), T.BOOLEAN)),
    ("CAST(a AS date)", Cast(col("a"), T.DATE)),
    ("abs(a)", Func("abs", (col("a"),))),
    ("ABS(a)", Func("abs", (col("a"),))),
    ("coalesce(a, b, 0)", Func("coalesce", (col("a"), col("b"), i32(0)))),
    ("substr(s, 2)", Func("substr", (col("s"), i32(2)))),
    ("substr(s, 2, 3)", Func("substr", (col("s"), i32(2), i32(3)))),
    ("SUBSTRING(s, 2, 3)", Func("substr", (col("s"), i32(2), i32(3)))),
    ("substring(s FROM 2 FOR 3)", Func("substr", (col("s"), i32(2), i32(3)))),
    ("lower(s)", Func("lower", (col("s"),))),
    ("Upper(s)", Func("upper", (col("s"),))),
    ("length(s)", Func("length", (col("s"),))),
    ("year(d)", Func("year", (col("d"),))),
    ("month(d)", Func("month", (col("d"),))),
    ("DAY(d)", Func("day", (col("d"),))),
    ("a\n  + 1", Binary("+", col("a"), i32(1))),
])
def test_construct(text, expected):
    assert p(text) == expected


def test_result_is_unbound():
    e = p("a + b")
    assert e.type is None and e.left.index == -1


# --- literals ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value, dtype", [
    ("42", 42, T.INT32),
    ("2147483647", 2147483647, T.INT32),
    ("2147483648", 2147483648, T.INT64),
    ("-2147483648", -2147483648, T.INT32),
    ("-2147483649", -2147483649, T.INT64),
    ("9223372036854775807", 9223372036854775807, T.INT64),
    ("-9223372036854775808", -9223372036854775808, T.INT64),
    ("9223372036854775808", 9223372036854775808.0, T.FLOAT64),
    ("3.5", 35, T.decimal(2, 1)),
    ("-3.5", -35, T.decimal(2, 1)),
    ("0.05", 5, T.decimal(2, 2)),
    (".5", 5, T.decimal(1, 1)),
    ("5.", 5, T.decimal(1, 0)),
    ("123.4500", 1234500, T.decimal(7, 4)),
    ("123456789012345678.9", 123456789012345678.9, T.FLOAT64),
    ("1e3", 1000.0, T.FLOAT64),
    ("1.5E-3", 0.0015, T.FLOAT64),
    ("-2.5e2", -250.0, T.FLOAT64),
    ("'text'", "text", T.STRING),
    ("'it''s'", "it's", T.STRING),
    ("''", "", T.STRING),
    (r"'C:\new'", "C:\\new", T.STRING),
    ("'é ✓ 日本'", "é ✓ 日本", T.STRING),
    ("DATE '1998-12-01'", 10561, T.DATE),
    ("date '1970-01-01'", 0, T.DATE),
    ("DATE '1969-12-31'", -1, T.DATE),
    ("CAST('2000-02-29' AS date)", 11016, T.DATE),
    ("TRUE", True, T.BOOLEAN),
    ("false", False, T.BOOLEAN),
    ("NULL", None, None),
])
def test_literal(text, value, dtype):
    lit = p(text)
    assert isinstance(lit, Literal)
    assert lit.type == dtype
    assert lit.value == value and type(lit.value) is type(value)


# --- hostile names and strings are data ---------------------------------------------------------

HOSTILE = [
    "'); system(\"id\"); //",
    '"; */ #include <stdio.h>',
    "a\nb",
    "line1\r\nline2\ttab",
    "naïve ü 日本語 🚀",
    "*/ }; abort(); /*",
    "%s%n%x",
    " leading and trailing ",
    "SELECT",
    "--not a comment",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_column_names_survive(name):
    quoted = '"' + name.replace('"', '""') + '"'
    assert p(quoted) == col(name)
    assert p(f"{quoted} = 'x'") == Binary("=", col(name), Literal("x", T.STRING))
    assert to_sql(col(name)) == quoted or to_sql(col(name)) == name


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_strings_survive(text):
    quoted = "'" + text.replace("'", "''") + "'"
    assert p(quoted) == Literal(text, T.STRING)
    assert p(f"a LIKE {quoted}") == Like(col("a"), text)


# --- rejections --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, fragment", [
    ("", "empty expression"),
    ("   ", "empty expression"),
    ("a >> > 3", "syntax error at column 6"),
    ("a +", "syntax error"),
    ("1 2", "unexpected token"),
    ("(", "syntax error"),
    ("a IN (1", "syntax error"),
    ("'abc", "unterminated"),
    ('"abc', "unterminated"),
    ("1;DROP TABLE x", "single expression"),
    ("a; b", "single expression"),
    ("a;", "single expression"),
    ("a, b", "syntax error"),
    ("a b", "unexpected text after the expression near 'b'"),
    ("0x1F", "unexpected text after the expression near 'x1F'"),
    ("(a)(b)", "unexpected text"),
    ("a -- comment", "comments"),
    ("a /* c */ + 1", "comments"),
    ("SELECT 1", "'SELECT'"),
    ("a = (SELECT 1)", "'subquery'"),
    ("a IN (SELECT 1)", "not a subquery"),
    ("a IN 1", "parenthesised list"),
    ("EXISTS (SELECT 1)", "'EXISTS'"),
    ("x::int", "'::'"),
    ("a == 1", "'=='"),
    ("t.a = 1", "qualified"),
    ("*", "'*'"),
    ("a || b", "concatenation"),
    ("a LIKE b", "string literal"),
    ("a LIKE 'x' || 'y'", "string literal"),
    ("a ILIKE 'x'", "ILIKE"),
    ("a LIKE 'x!%' ESCAPE '!'", "ESCAPE"),
    ("a IS TRUE", "IS [NOT] NULL"),
    ("a IS NOT DISTINCT FROM b", "DISTINCT"),
    ("a <=> b", "DISTINCT"),
    ("a BETWEEN SYMMETRIC 1 AND 2", "SYMMETRIC"),
    ("TRY_CAST(a AS int)", "try_cast"),
    ("CAST(a AS int8)", "unsupported type"),
    ("CAST(a AS smallint)", "unsupported type"),
    ("CAST(a AS float)", "unsupported type"),
    ("CAST(a AS timestamp)", "unsupported type"),
    ("CAST(a AS foo)", "unsupported type 'foo'"),
    ("CAST(a AS varchar(10))", "unsupported type"),
    ("CAST(a AS int32[])", "unsupported type"),
    ("CAST(a AS decimal)", "precision and a scale"),
    ("CAST(a AS decimal(39,2))", "precision"),
    ("CAST(a AS decimal(5,6))", "scale"),
    ("CAST(a AS int FORMAT 'x')", "FORMAT"),
    ("nvl(a, 0)", "unsupported function 'nvl'"),
    ("ifnull(a, 0)", "unsupported function 'ifnull'"),
    ("char_length(s)", "unsupported function 'char_length'"),
    ("mod(a, 2)", "unsupported function 'mod'"),
    ("round(a)", "unsupported function 'round'"),
    ("foo(a)", "unsupported function 'foo'"),
    ("date(a)", "unsupported function 'date'"),
    ("left(s, 1)", "unsupported function 'left'"),
    ("if(a, 1, 2)", "unsupported function 'if'"),
    ("count(*)", "unsupported function 'count'"),
    ("abs(a, b)", "too many arguments (2, at most 1)"),
    ("abs()", "syntax error"),
    ("substr(s)", "substr() takes 2 to 3 argument(s), got 1"),
    ("substr(s, 1, 2, 3)", "substr() takes 2 to 3 argument(s)"),
    ("year()", "syntax error"),
    ("length(s, 'utf8')", "length() takes 1 argument(s)"),
    ("a IN ()", "non-empty"),
    ("DATE '1998-13-01'", "invalid date"),
    ("DATE '1998-1-1'", "invalid date"),
    ("CAST('yesterday' AS date)", "invalid date"),
    ("1e999", "out of range"),
    ("1e", "invalid number"),
    ("?", "placeholder"),
    (":x", "placeholder"),
    ("@a", "parameter"),
    ("a & b", "'&'"),
    ("~a", "'~'"),
    ("a DIV b", "DIV"),
    ("INTERVAL '1' DAY", "INTERVAL"),
    ("a[1]", "subscript"),
    ("1.2.3", "'.'"),
    ("CURRENT_DATE", "CURRENT_DATE"),
    ("a\x00b", "NUL"),
])
def test_rejected(text, fragment):
    with pytest.raises(RequestError) as info:
        p(text)
    err = info.value
    assert err.path == PATH
    assert fragment.lower() in err.message.lower(), err.message
    assert "text" in err.context, "the error carries the offending text"


def test_not_a_string():
    with pytest.raises(RequestError, match="must be a string") as info:
        parse_expression(42, PATH)  # type: ignore[arg-type]
    assert info.value.path == PATH


def test_too_deep():
    text = "(" * (MAX_DEPTH + 5) + "a" + ")" * (MAX_DEPTH + 5)
    with pytest.raises(RequestError, match=f"nests {MAX_DEPTH + 5} levels deep.*limit is {MAX_DEPTH} levels"):
        p(text)
    chain = " + ".join(["a"] * (MAX_DEPTH + 5))
    with pytest.raises(RequestError, match=f"nested {MAX_DEPTH + 6} levels deep.*max_expression_depth"):
        p(chain)


def test_very_deep_does_not_crash():
    with pytest.raises(RequestError):
        p("(" * 5000 + "a" + ")" * 5000)
    with pytest.raises(RequestError):
        p("-" * 5000 + "1")
    with pytest.raises(RequestError):
        p("NOT " * 5000 + "a")


def test_too_long():
    with pytest.raises(RequestTooLarge, match="has 80,001 characters; the limit is 80,000") as info:
        parse_expression("a + " * 20000 + "a", PATH, RequestLimits(max_expression_chars=80_000))
    assert info.value.status == 413 and info.value.context["limit"] == "max_expression_chars"


def test_moderate_nesting_is_fine():
    p(" OR ".join(f"a = {i}" for i in range(100)))
    p("a IN (" + ", ".join(str(i) for i in range(5000)) + ")")


def test_syntax_error_mentions_position_on_later_line():
    with pytest.raises(RequestError, match="line 2"):
        p("a +\n  > 3")


# --- fuzz: whatever the input, only RequestError escapes ----------------------------------------

_PIECES = ["a", "b", '"x y"', "1", "2.5", "1e3", "'s'", "''", "(", ")", ",", "+", "-", "*", "/", "%",
           "=", "<>", "!=", "<", ">=", "AND", "OR", "NOT", "IS", "NULL", "IN", "BETWEEN", "LIKE",
           "CASE", "WHEN", "THEN", "ELSE", "END", "CAST", "AS", "int32", "decimal(5,2)", "DATE",
           "'1998-01-01'", "abs", "substr", "coalesce", "year", ";", "--", "/*", "*/", "::", "'",
           '"', "SELECT", "FROM", "@", "?", "$1", "[", "]", "{", "}", "\\", "\n", "TRUE", "ESCAPE"]


def test_fuzz_only_request_errors():
    rng = random.Random(20240601)
    for _ in range(3000):
        text = " ".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 12)))
        try:
            p(text)
        except RequestError as e:
            assert e.path == PATH and e.message


@pytest.mark.parametrize("text", [
    "a + b * c - d",
    "NOT (a AND b) OR c IS NOT NULL",
    "CASE WHEN a > 1 THEN 'x''y' ELSE NULL END",
    "a NOT IN (1, 2.5, -3)",
    "-(a + 1) * -2",
    "CAST(x AS decimal(12,2)) / 3",
    "coalesce(substr(s, 1, 2), lower(\"Mixed Case\"))",
    "d BETWEEN DATE '1998-01-01' AND DATE '1998-12-31'",
    "a - (b - c)",
    "-(-5)",
])
def test_to_sql_round_trips(text):
    tree = p(text)
    assert p(to_sql(tree)) == tree


def test_parsed_trees_are_remembered_by_text_and_limits():
    """A text parsed again is the same (immutable) tree, without parsing; under other limits it is
    checked against those; an error is raised every time with the path it was asked for."""
    text = "a > 1 AND s IN ('x', 'y', 'z') AND d BETWEEN DATE '2000-01-01' AND DATE '2000-12-31'"
    first = parse_expression(text, "operations[0].condition")
    assert parse_expression(text, "operations[7].condition") is first
    tight = RequestLimits(max_in_list=2)
    with pytest.raises(RequestTooLarge):
        parse_expression(text, "x", tight)
    assert parse_expression(text, "y") is first
    for path in ("p1", "p2"):
        with pytest.raises(RequestError) as e:
            parse_expression("a >", path)
        assert e.value.path == path
