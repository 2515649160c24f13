"""The request language as a catalogue: types, expression constructs, functions, aggregates and
modes, and what is not in it. The support matrix (docs/support-matrix.md, `python -m
jumpgate.matrix`) lists each item per NCA implementation and per client from it, and NCA plugins
name these items in their `Support` (jumpgate/nca/support.py).

Everything is taken from the code that defines the language where it is a table there: the types
from `contract.types.Kind`, the operators from `expr`'s operator tuples, the functions from
`expr.FUNCTIONS`, the aggregates and modes from `plan.AggFn`/`AggMode` and `aggregates`, the
constructs the parser names when it rejects them from `parse`. What is prose here (the syntax of
each construct, an example) is checked against the parser and the binder by
tests/unit/test_support_matrix.py: every example parses and binds, every parser construct is listed.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..contract.types import DataType, Kind, decimal
from .aggregates import DISTINCT_FUNCTIONS, NUMERIC_ONLY, result_type
from .expr import (
    ARITHMETIC_OPS,
    COMPARISON_OPS,
    FUNCTIONS,
    LOGICAL_OPS,
    Binary,
    Case,
    Cast,
    Column,
    Func,
    InList,
    IsNull,
    Like,
    Literal,
    Unary,
)
from .parse import _CONSTRUCT_NAMES
from .plan import AggFn, AggMode

# --- types -------------------------------------------------------------------------------------

TYPES: tuple[str, ...] = tuple(k.value for k in Kind)  # the kinds; `decimal` stands for decimal(p,s)


def type_label(kind: str) -> str:
    return "decimal(p,s)" if kind == Kind.DECIMAL.value else kind


# --- expression constructs ---------------------------------------------------------------------


@dataclass(frozen=True)
class Construct:
    """One construct of contract §1 "Expressions": `id` (what `Support.expressions` keys), how it
    is written, an example over EXAMPLE_SCHEMA, and the typed tree node it becomes (with the
    operators of that node it covers), which is what a code generator has to handle."""

    id: str
    syntax: str
    example: str
    node: type
    ops: tuple[str, ...] = ()


EXAMPLE_SCHEMA = (("i", "int64"), ("d", "decimal(12,2)"), ("f", "float64"), ("s", "string"), ("dt", "date"),
                  ("b", "boolean"))

CONSTRUCTS: tuple[Construct, ...] = (
    Construct("column", 'a column name, or a double-quoted one (`"a b"`)', "i", Column),
    Construct("literal", "`42`, `3.5`, `1e3`, `'text'`, `DATE '1998-12-01'`, `TRUE`, `FALSE`, `NULL`",
              "DATE '1998-12-01'", Literal),
    Construct("arithmetic", " ".join(f"`{op}`" for op in ARITHMETIC_OPS), "i * 2 + d / 3 - i % 7", Binary,
              ARITHMETIC_OPS),
    Construct("negation", "`-x`", "-d", Unary, ("neg",)),
    Construct("comparison", " ".join(f"`{op}`" for op in COMPARISON_OPS) + " `!=`", "i <> 3 AND s >= 'b'", Binary,
              COMPARISON_OPS),
    Construct("logic", "`AND` `OR` `NOT` (three-valued)", "NOT b OR (i > 1 AND f < 2)", Binary,
              (*LOGICAL_OPS, "not")),
    Construct("is_null", "`IS [NOT] NULL`", "s IS NOT NULL", IsNull),
    Construct("between", "`[NOT] BETWEEN a AND b` (as `>=` and `<=`)", "dt BETWEEN '1995-01-01' AND '1995-12-31'",
              Binary, ("<=", ">=")),
    Construct("in", "`[NOT] IN (list)`", "i NOT IN (1, 2, 3)", InList),
    Construct("like", "`[NOT] LIKE 'pattern'` (`%`, `_`; no escape character)", "s LIKE 'ab%'", Like),
    Construct("case", "`CASE [x] WHEN ... THEN ... [ELSE ...] END`", "CASE WHEN i > 0 THEN 'pos' ELSE 'neg' END", Case),
    Construct("cast", "`CAST(e AS type)` with a contract type name", "CAST(s AS decimal(10,2))", Cast),
    Construct("function", "a function call (below)", "abs(i)", Func),
)


@dataclass(frozen=True)
class Function:
    name: str
    signature: str
    result: str
    example: str


FUNCTION_DOCS = {  # name -> (signature, result, example); the names are expr.FUNCTIONS (tested)
    "abs": ("abs(numeric)", "its argument's type", "abs(d)"),
    "coalesce": ("coalesce(v1, v2, ...)", "the arguments' common type", "coalesce(s, 'none')"),
    "substr": ("substr(string, start[, length])", "string: 1-based, in code points (`substring` too)", "substr(s, 2, 3)"),
    "lower": ("lower(string)", "string: Unicode simple case mapping", "lower(s)"),
    "upper": ("upper(string)", "string: Unicode simple case mapping", "upper(s)"),
    "length": ("length(string)", "int64: code points", "length(s)"),
    "year": ("year(date)", "int64", "year(dt)"),
    "month": ("month(date)", "int64", "month(dt)"),
    "day": ("day(date)", "int64", "day(dt)"),
}
FUNCTION_LIST: tuple[Function, ...] = tuple(Function(n, *FUNCTION_DOCS[n]) for n in FUNCTIONS)


# --- aggregates --------------------------------------------------------------------------------

AGGREGATES: tuple[str, ...] = tuple(fn.value for fn in AggFn)
MODES: tuple[str, ...] = tuple(m.value for m in AggMode)
DISTINCT_AGGREGATES: tuple[str, ...] = tuple(fn.value for fn in DISTINCT_FUNCTIONS)
DISTINCT_ID = "distinct"  # the `Support.aggregates` key of `fn(DISTINCT x)`


def aggregate_inputs(fn: str) -> tuple[str, str]:
    """(what `fn` takes, what it gives in complete mode), from dataflow/aggregates.py's rules."""
    f = AggFn(fn)
    if f is AggFn.COUNT_STAR:
        return "no expression: counts rows", str(result_type(f, None))
    numeric = (Kind.INT32, Kind.INT64, Kind.FLOAT64, Kind.DECIMAL)
    kinds = numeric if f in NUMERIC_ONLY else tuple(Kind)
    pairs = [(t, result_type(f, t)) for t in (decimal(12, 2) if k is Kind.DECIMAL else DataType(k) for k in kinds)]
    if all(a == b for a, b in pairs):
        gives = "the input's type"
    else:
        gives = ", ".join(sorted({"decimal(18,s)" if r.kind is Kind.DECIMAL else str(r) for _, r in pairs}))
    return ("numbers" if f in NUMERIC_ONLY else "any type"), gives


# --- what is not in the language ---------------------------------------------------------------

NOT_IN_LANGUAGE: tuple[str, ...] = tuple(sorted(set(_CONSTRUCT_NAMES.values()) - {"bare word", "command"})) + (
    "other functions",)

__all__ = ["AGGREGATES", "CONSTRUCTS", "Construct", "DISTINCT_AGGREGATES", "DISTINCT_ID", "EXAMPLE_SCHEMA",
           "FUNCTION_LIST", "Function", "MODES", "NOT_IN_LANGUAGE", "TYPES", "aggregate_inputs", "type_label"]
