"""Render an expression tree back to SQL text, for error messages, EXPLAIN output and pages.

The text is for people: it re-parses to an equivalent tree, but nothing ever compiles it.
Column names that are not plain identifiers are double-quoted (with `""` escapes), strings are
single-quoted (with `''` escapes), and parentheses appear only where precedence needs them.
Casts the binder inserted show up as explicit `CAST(...)`.
"""
from __future__ import annotations

import datetime as _dt
import re

from ..contract.types import Kind
from .expr import Binary, Case, Cast, Column, Expr, Func, InList, IsNull, Like, Literal, Unary

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EPOCH = _dt.date(1970, 1, 1)

# Higher binds tighter.
_PREC = {"or": 1, "and": 2, "not": 3, "=": 4, "<>": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
         "+": 5, "-": 5, "*": 6, "/": 6, "%": 6, "neg": 7}
_PREDICATE = 4
_ATOM = 8


def quote_name(name: str) -> str:
    """A column name as SQL: bare if it is a plain identifier, else double-quoted."""
    if _PLAIN.fullmatch(name):
        return name
    return '"' + name.replace('"', '""') + '"'


def quote_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def to_sql(e: Expr) -> str:
    return _render(e)[0]


def _precedence(e: Expr) -> int:
    if isinstance(e, Binary):
        return _PREC[e.op]
    if isinstance(e, Unary):
        return _PREC[e.op]
    if isinstance(e, (IsNull, InList, Like)):
        return _PREDICATE
    if isinstance(e, Literal) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool) \
            and e.value < 0:
        return _PREC["neg"]
    return _ATOM


def _wrap(e: Expr, min_prec: int) -> str:
    text = to_sql(e)
    return f"({text})" if _precedence(e) < min_prec else text


def _render(e: Expr) -> tuple[str, int]:
    if isinstance(e, Column):
        return quote_name(e.name), _ATOM
    if isinstance(e, Literal):
        return _literal(e), _precedence(e)
    if isinstance(e, Unary):
        p = _PREC[e.op]
        return ("NOT " + _wrap(e.arg, p) if e.op == "not" else "-" + _wrap(e.arg, p + 1)), p
    if isinstance(e, Binary):
        p = _PREC[e.op]
        op = e.op.upper() if e.op in ("and", "or") else e.op
        # Left-associative: the right operand needs parentheses at equal precedence.
        return f"{_wrap(e.left, p)} {op} {_wrap(e.right, p + 1)}", p
    if isinstance(e, IsNull):
        return f"{_wrap(e.arg, _PREDICATE + 1)} IS {'NOT ' if e.negated else ''}NULL", _PREDICATE
    if isinstance(e, InList):
        items = ", ".join(to_sql(i) for i in e.items)
        return f"{_wrap(e.arg, _PREDICATE + 1)} {'NOT ' if e.negated else ''}IN ({items})", _PREDICATE
    if isinstance(e, Like):
        neg = "NOT " if e.negated else ""
        return f"{_wrap(e.arg, _PREDICATE + 1)} {neg}LIKE {quote_string(e.pattern)}", _PREDICATE
    if isinstance(e, Case):
        parts = ["CASE"] + [f"WHEN {to_sql(c)} THEN {to_sql(v)}" for c, v in e.whens]
        if e.else_ is not None:
            parts.append(f"ELSE {to_sql(e.else_)}")
        return " ".join(parts + ["END"]), _ATOM
    if isinstance(e, Cast):
        return f"CAST({to_sql(e.arg)} AS {e.to})", _ATOM
    if isinstance(e, Func):
        return f"{e.name}({', '.join(to_sql(a) for a in e.args)})", _ATOM
    raise TypeError(f"not an expression node: {type(e).__name__}")


def _literal(lit: Literal) -> str:
    v, t = lit.value, lit.type
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if t is not None and t.kind is Kind.DATE and isinstance(v, int):
        return f"DATE '{(_EPOCH + _dt.timedelta(days=v)).isoformat()}'"
    if t is not None and t.kind is Kind.DECIMAL and isinstance(v, int):
        return format_decimal(v, t.scale)
    if isinstance(v, str):
        return quote_string(v)
    if isinstance(v, float):
        text = repr(v)
        return text if ("e" in text or "inf" in text or "nan" in text) else text + "e0"
    return str(v)


def format_decimal(unscaled: int, scale: int) -> str:
    """'-12.50' for (-1250, 2): the exact text of a decimal's unscaled value."""
    sign = "-" if unscaled < 0 else ""
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    if scale == 0:
        return sign + digits
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"
