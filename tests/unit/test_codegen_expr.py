"""Unit tests of the C generators themselves: dispatch, validation, CSE, escaping, and that every
construct (built directly as typed trees, including casts the binder does not offer) compiles
warning-free with gcc -O2 -Wall -Wextra -std=c11."""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass

import pytest

from jumpgate.contract.ntf import generate_ntf
from jumpgate.contract.types import (
    BOOLEAN,
    DATE,
    FLOAT64,
    INT32,
    INT64,
    STRING,
    DataType,
    Field,
    Kind,
    Schema,
    decimal,
)
from jumpgate.dataflow.expr import Binary, Case, Cast, Column, Func, InList, IsNull, Like, Literal, Unary
from jumpgate.dataflow.plan import FileFormat, Filter, InputRef, NamedExpr, Project, Read, Shuffle
from jumpgate.ncas.software.codegen import CodegenError, generate_scan_query
from jumpgate.ncas.software.codegen.casts import CASTS
from jumpgate.ncas.software.codegen.csyntax import c_bytes, c_double, c_int

from .test_codegen_golden import compile_seconds
from .test_codegen_harness import needs_runtime, run_query, scan_ops, schema_of, write_jsonl

DEC = decimal(10, 2)
TYPES = {"b": BOOLEAN, "i": INT32, "l": INT64, "f": FLOAT64, "d": DEC, "s": STRING, "dt": DATE}
SCHEMA = Schema(tuple(Field(n, t) for n, t in TYPES.items()))
COL = {n: Column(n, k, t) for k, (n, t) in enumerate(TYPES.items())}
gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")


def query(*exprs, filters=(), ports=1) -> str:
    read = Read("r", ("/x.jsonl",), FileFormat.JSON, SCHEMA)
    ops, prev = [read], "r"
    for k, cond in enumerate(filters):
        ops.append(Filter(f"f{k}", InputRef(prev), cond))
        prev = f"f{k}"
    cols = tuple(NamedExpr(f"c{k}", e) for k, e in enumerate(exprs))
    ops.append(Project("p", InputRef(prev), cols))
    layout = generate_ntf(Schema(tuple(Field(c.name, c.expr.type or INT64) for c in cols)))
    return generate_scan_query(ops, layout, ports=ports)


# ------------------------------------------------------------------ escaping


def test_c_bytes_escapes_every_byte():
    assert c_bytes(b"") == '""'
    assert c_bytes(b"a\"\\\n?") == '"\\x61\\x22\\x5c\\x0a\\x3f"'
    long = c_bytes(bytes(range(40)))
    assert long.count('"') == 6 and "\n" in long


def test_constants():
    assert c_int(-1) == "(-INT64_C(1))" and c_int(-(2**63)) == "INT64_MIN" and c_int(5) == "INT64_C(5)"
    with pytest.raises(CodegenError):
        c_int(2**63)
    assert c_double(1.5) == "1.5" and c_double(-0.0) == "(-0.0)" and c_double(1e20) == "1e+20"
    assert c_double(5e-324) == "0x0.0000000000001p-1022" and c_double(0.1) == "0.1"
    assert "inf" in c_double(float("inf")) and "nan" in c_double(float("nan"))


# ------------------------------------------------------------------ validation


@dataclass(frozen=True)
class Mystery:
    type: DataType = INT64


def test_unknown_node_fails_loudly():
    with pytest.raises(CodegenError, match="Mystery"):
        query(Mystery())


def test_unbound_nodes_fail():
    with pytest.raises(CodegenError, match="unbound"):
        query(Binary("+", COL["l"], COL["l"], None))
    with pytest.raises(CodegenError, match="outside"):
        query(Column("l", -1, INT64))


def test_type_mismatches_fail():
    with pytest.raises(CodegenError):
        query(Binary("+", COL["l"], COL["f"], INT64))  # the binder must cast
    with pytest.raises(CodegenError):
        query(Binary("<", COL["s"], COL["l"], BOOLEAN))
    with pytest.raises(CodegenError):
        query(Cast(COL["dt"], FLOAT64, FLOAT64))
    with pytest.raises(CodegenError):
        query(Func("nosuch", (COL["l"],), INT64))
    with pytest.raises(CodegenError):
        query(Column("l", 2, STRING))


def test_chain_and_layout_are_checked():
    read = Read("r", ("/x",), FileFormat.JSON, SCHEMA)
    layout = generate_ntf(SCHEMA)
    assert "query_row" in generate_scan_query([read], layout)
    with pytest.raises(CodegenError, match="starts with"):
        generate_scan_query([Filter("f", InputRef("r"), COL["b"])], layout)
    with pytest.raises(CodegenError, match="previous"):
        generate_scan_query([read, Filter("f", InputRef("other"), COL["b"])], layout)
    with pytest.raises(CodegenError, match="filter and project"):
        generate_scan_query([read, Shuffle("s", InputRef("r"), (COL["l"],), 2)], layout)
    with pytest.raises(CodegenError, match="layout"):
        generate_scan_query([read], generate_ntf(Schema(SCHEMA.fields[:3])))


# ------------------------------------------------------------------ structure of generated code


def test_common_subexpressions_are_evaluated_once():
    a = Binary("+", COL["l"], Literal(1, INT64), INT64)
    src = query(Binary("*", a, a, INT64), Binary("-", a, Literal(2, INT64), INT64))
    assert src.count("__builtin_add_overflow") == 1


def test_subexpression_first_met_in_a_branch_is_memoised():
    up = Func("upper", (COL["s"],), STRING)
    src = query(Case(((COL["b"], up),), None, STRING), up, Func("length", (up,), INT64))
    assert re.search(r"int d\d+ = 0;", src), "a done flag"
    assert src.count("jg_upper(") == 2  # code at two sites, run at most once per row


def test_in_items_do_not_leak_out_of_their_branch():
    item = Binary("+", COL["l"], Literal(1, INT64), INT64)
    src = query(InList(COL["l"], (item, Literal(3, INT64)), False, BOOLEAN), item)
    assert src.count("__builtin_add_overflow") == 2  # the IN's copy is not visible outside


def test_dropped_projection_columns_are_never_evaluated():
    read = Read("r", ("/x",), FileFormat.JSON, SCHEMA)
    bad = Binary("%", COL["l"], Literal(0, INT64), INT64)
    p1 = Project("p1", InputRef("r"), (NamedExpr("x", COL["l"]), NamedExpr("bad", bad)))
    p2 = Project("p2", InputRef("p1"), (NamedExpr("x", Column("x", 0, INT64)),))
    src = generate_scan_query([read, p1, p2], generate_ntf(Schema((Field("x", INT64),))))
    assert " % " not in src and ".ncolumns = 1" in src


def test_only_used_columns_are_parsed():
    src = query(COL["s"], filters=[Binary(">", COL["l"], Literal(0, INT64), BOOLEAN)])
    assert ".ncolumns = 2" in src
    assert "input column 2, int64" in src and "input column 5, string" in src


def test_several_output_ports_get_every_tuple():
    src = query(COL["l"], ports=3)
    assert ".noutputs = 3" in src and "jg_output(ctx, p)" in src


# ------------------------------------------------------------------ everything compiles cleanly


def every_construct():
    n, i, f, d, s, dt, b = (COL[k] for k in ("l", "i", "f", "d", "s", "dt", "b"))
    one = Literal(1, INT64)
    out = [
        Unary("neg", n, INT64), Unary("neg", d, DEC), Unary("neg", f, FLOAT64), Unary("not", b, BOOLEAN),
        Binary("%", n, one, INT64), Binary("%", d, Literal(3, DEC), DEC), Binary("%", f, f, FLOAT64),
        Binary("/", f, f, FLOAT64), Binary("*", d, d, decimal(18, 4)), Binary("*", d, d, decimal(18, 3)),
        Binary("-", d, Literal(5, decimal(3, 3)), decimal(14, 3)), Binary("+", i, i, INT32),
        Binary("=", d, Literal(5, decimal(3, 3)), BOOLEAN), Binary("<", s, Literal("x", STRING), BOOLEAN),
        Binary(">=", f, f, BOOLEAN), Binary("<>", dt, dt, BOOLEAN),
        Binary("and", b, Literal(None, BOOLEAN), BOOLEAN), Binary("or", Literal(None, BOOLEAN), b, BOOLEAN),
        IsNull(n, False, BOOLEAN), IsNull(Binary("+", n, one, INT64), True, BOOLEAN), IsNull(Literal(None, INT64), False, BOOLEAN),
        InList(s, (Literal("a", STRING), Literal(None, STRING)), True, BOOLEAN), InList(Literal(None, INT64), (n,), False, BOOLEAN),
        Like(s, "a%_é", False, BOOLEAN), Like(Literal(None, STRING), "x", True, BOOLEAN),
        Case(((b, n),), None, INT64), Case(((Literal(None, BOOLEAN), s),), Literal("z", STRING), STRING),
        Func("coalesce", (Literal(None, DEC), d, Literal(0, DEC)), DEC), Func("coalesce", (n,), INT64),
        Func("abs", (i,), INT32), Func("abs", (d,), DEC), Func("abs", (f,), FLOAT64),
        Func("substr", (s, one), STRING), Func("substr", (s, one, i), STRING), Func("lower", (s,), STRING),
        Func("length", (Literal(None, STRING),), INT64), Func("year", (dt,), INT64), Func("day", (dt,), INT32),
        Binary("+", n, Literal(None, INT64), INT64), Func("upper", (Literal("ß", STRING),), STRING),
        Literal(-(2**63), INT64), Literal(float("inf"), FLOAT64), Literal(True, BOOLEAN), Literal(None, DATE),
        Literal(-5, DATE), Literal(-12345, DEC), Literal("", STRING),
    ]
    # every cast the generator knows, from a column and from a constant
    for (src_kind, dst_kind) in CASTS:
        src = next(c for c in COL.values() if c.type.kind is src_kind) if src_kind is not Kind.INT32 else i
        to = {Kind.DECIMAL: decimal(12, 3), Kind.INT32: INT32, Kind.INT64: INT64, Kind.FLOAT64: FLOAT64,
              Kind.STRING: STRING, Kind.DATE: DATE, Kind.BOOLEAN: BOOLEAN}[dst_kind]
        out.append(Cast(src, to, to))
    out += [Cast(d, decimal(10, 2), decimal(10, 2)), Cast(d, decimal(5, 2), decimal(5, 2)), Cast(d, decimal(10, 0), decimal(10, 0)),
            Cast(Literal(None, STRING), INT64, INT64), Cast(d, INT32, INT32)]
    return out


@gcc
def test_every_construct_compiles_warning_free(tmp_path):
    exprs = every_construct()
    src = query(*exprs, filters=[Binary(">", COL["l"], Literal(0, INT64), BOOLEAN), COL["b"]])
    seconds = compile_seconds(src, tmp_path)
    assert seconds < 1.0  # a deliberately huge query (~100 columns); typical ones take < 0.1 s


@gcc
@pytest.mark.parametrize("k", range(len(every_construct())))
def test_each_construct_alone_compiles_warning_free(k, tmp_path):
    # alone, a construct's values may go unused in ways the big query hides (-Wunused-*)
    compile_seconds(query(every_construct()[k]), tmp_path, repeat=1)


# ------------------------------------------------------------------ casts the binder does not offer


@needs_runtime
def test_direct_casts_run(tmp_path):
    """Casts the generator supports beyond the binder's menu, checked by value."""
    rows = [{"l": 2, "f": 0.5, "d": "-2.50", "b": True, "s": "yes"}, {"l": 0, "f": 0.0, "d": "0", "b": False, "s": "0"}, {}]
    path = write_jsonl(tmp_path / "c.jsonl", rows)
    schema = schema_of({"l": "int64", "f": "float64", "d": "decimal(10,2)", "b": "boolean", "s": "string"})
    read = Read("r", (str(path),), FileFormat.JSON, schema)
    cols = {"l_b": Cast(Column("l", 0, INT64), BOOLEAN, BOOLEAN), "f_b": Cast(Column("f", 1, FLOAT64), BOOLEAN, BOOLEAN),
            "d_b": Cast(Column("d", 2, DEC), BOOLEAN, BOOLEAN), "b_d": Cast(Column("b", 3, BOOLEAN), decimal(5, 2), decimal(5, 2)),
            "b_f": Cast(Column("b", 3, BOOLEAN), FLOAT64, FLOAT64), "s_b": Cast(Column("s", 4, STRING), BOOLEAN, BOOLEAN)}
    p = Project("p", InputRef("r"), tuple(NamedExpr(n, e) for n, e in cols.items()))
    layout = generate_ntf(Schema(tuple(Field(n, e.type) for n, e in cols.items())))
    got, err = run_query([read, p], layout, [path])
    assert err is None, err
    import decimal as pydec

    assert got == [(True, True, True, pydec.Decimal("1.00"), 1.0, True),
                   (False, False, False, pydec.Decimal("0.00"), 0.0, False),
                   (None, None, None, None, None, None)]


@needs_runtime
def test_memoised_and_shared_subexpressions_answer_correctly(tmp_path):
    from .test_codegen_harness import compare_with_duckdb

    rows = [{"id": k, "l": k - 3, "s": ["ab", "Éx", None, "q"][k % 4], "b": [True, False, None][k % 3]} for k in range(12)]
    path = write_jsonl(tmp_path / "m.jsonl", rows)
    schema = schema_of({"id": "int64", "l": "int64", "s": "string", "b": "boolean"})
    compare_with_duckdb(path, schema, [
        ("a", "CASE WHEN b THEN upper(s) END"), ("b2", "upper(s)"), ("c", "length(upper(s)) + (l + 1) * (l + 1)"),
        ("d", "coalesce(upper(s), lower(s))"), ("e", "CASE WHEN l > 0 THEN l + 1 ELSE -(l + 1) END"),
        ("f", "l IN (l + 1 - 1, 2)"), ("g", "(l + 1) IS NULL OR b"),
    ], filters=["l + 1 > -5"])
    ops, layout = scan_ops(schema, path, columns=[("x", "upper(s)")])
    assert run_query(ops, layout, [path])[1] is None


def test_cse_tells_negative_zero_and_booleans_apart():
    f = COL["f"]
    src = query(Binary("*", f, Literal(0.0, FLOAT64), FLOAT64), Binary("*", f, Literal(-0.0, FLOAT64), FLOAT64),
                Binary("*", f, Literal(0.0, FLOAT64), FLOAT64))
    assert src.count("* 0.0;") == 1 and src.count("* (-0.0);") == 1
