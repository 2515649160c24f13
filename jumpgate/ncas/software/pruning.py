"""Statistics pruning for the columnar scans (ORC stripes, Parquet row groups).

From the filters of a scan chain — bound to the read's columns by `plan_scan`, so projections in
between are already substituted away — take the top-level conjuncts of the simple forms

    column <op> literal      (=, <>, <, <=, >, >=, either side; BETWEEN arrives as two of these)
    column [NOT] IN (...)    (only IN: NOT IN rules out nothing a min/max can show)
    column IS [NOT] NULL
    boolean column, NOT boolean column

where `column` may be wrapped in an exact widening cast (int32 -> int64, integer -> decimal,
decimal -> decimal of a larger scale), and turn them into predicates on the column in its own
representation: booleans 0/1, integers, dates as days, decimals as unscaled integers at the
column's scale (a literal that is not representable there tightens the bound: `d < 0.055` on a
decimal(12,2) becomes `d < 6`), float64 as floats, strings as bytes. Anything else contributes
nothing: pruning only ever skips data that cannot produce a row, so leaving a conjunct out is
always safe.

The driver receives them as `param prune.N "COLUMN OP VALUE..."` (docs/nca-process-protocol.md)
and skips every unit whose statistics show that some predicate cannot be TRUE on any of its rows.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from urllib.parse import quote

from ...contract.types import DataType, Kind
from ...dataflow.expr import Binary, Cast, Column, Expr, InList, IsNull, Literal, Unary
from ...dataflow.plan import Filter, Operation, Project, Read
from .codegen.scan import plan_scan

PARAM_PREFIX = "prune."
_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"=": "<>", "<>": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_INT64 = (-(2**63), 2**63 - 1)
_INTEGER_KINDS = (Kind.BOOLEAN, Kind.INT32, Kind.INT64, Kind.DATE, Kind.DECIMAL)


@dataclass(frozen=True)
class PrunePredicate:
    """`column op values` on a read column, values in the column's representation."""

    column: str
    op: str  # = <> < <= > >= in isnull notnull
    values: tuple[int | float | str, ...] = ()

    def param_value(self) -> str:
        """The `prune.N` value: tokens separated by spaces, each percent-encoded."""
        toks = [self.column, self.op] + [repr(v) if isinstance(v, float) else str(v) for v in self.values]
        return " ".join(quote(t, safe="") for t in toks)


def scan_prefix(ops: Sequence[Operation]) -> list[Operation]:
    """The read and the filters and projections right after it (what runs before any fused
    aggregate or shuffle)."""
    out: list[Operation] = []
    for op in ops:
        if out and not isinstance(op, (Filter, Project)):
            break
        out.append(op)
    return out


def conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op == "and":
        return conjuncts(e.left) + conjuncts(e.right)
    return [e]


def prune_predicates(ops: Sequence[Operation]) -> list[PrunePredicate]:
    """The pruning predicates of a scan chain (read, filters, projections, then anything)."""
    prefix = scan_prefix(ops)
    if not prefix or not isinstance(prefix[0], Read):
        return []
    plan = plan_scan(prefix)
    out: list[PrunePredicate] = []
    for _, cond in plan.filters:
        for c in conjuncts(cond):
            p = predicate(c)
            if p is not None and p not in out:
                out.append(p)
    return out


def prune_params(ops: Sequence[Operation]) -> dict[str, str]:
    return {f"{PARAM_PREFIX}{i}": p.param_value() for i, p in enumerate(prune_predicates(ops))}


# ------------------------------------------------------------------ one conjunct


def predicate(e: Expr) -> PrunePredicate | None:
    """The pruning predicate of one conjunct, or None when it is not of a simple form."""
    if isinstance(e, Column) and e.type is not None and e.type.kind is Kind.BOOLEAN:
        return PrunePredicate(e.name, "=", (1,))
    if isinstance(e, Unary) and e.op == "not":
        a = e.arg
        if isinstance(a, Column) and a.type is not None and a.type.kind is Kind.BOOLEAN:
            return PrunePredicate(a.name, "=", (0,))
        if isinstance(a, Binary) and a.op in _NEGATE:  # NOT (x < 5): TRUE exactly when x >= 5 is
            return predicate(Binary(_NEGATE[a.op], a.left, a.right, a.type))
        if isinstance(a, IsNull):
            return predicate(IsNull(a.arg, not a.negated, a.type))
        return None
    if isinstance(e, IsNull):
        col = _column(e.arg)
        return PrunePredicate(col.name, "notnull" if e.negated else "isnull") if col is not None else None
    if isinstance(e, InList) and not e.negated:
        col = _column(e.arg)
        if col is None:
            return None
        values = []
        for item in e.items:
            lit = _literal(item)
            if lit is None:
                return None
            if lit is _NULL:
                continue  # x IN (NULL, ...) is never TRUE because of the NULL
            v = _in_domain(lit, col.type, "=")
            if v is not None:
                values.append(v[1])
        # no representable item: never TRUE, but say nothing rather than reason about it here
        return PrunePredicate(col.name, "in", tuple(dict.fromkeys(values))) if values else None
    if isinstance(e, Binary) and e.op in _FLIP:
        op, left, right = e.op, e.left, e.right
        if _column(left) is None:
            op, left, right = _FLIP[op], right, left
        col, lit = _column(left), _literal(right)
        if col is None or lit is None or lit is _NULL:
            return None
        v = _in_domain(lit, col.type, op)
        return PrunePredicate(col.name, v[0], (v[1],)) if v is not None else None
    return None


_NULL = object()


def _column(e: Expr) -> Column | None:
    """The read column under `e` when `e` is the column or an exact, order-preserving widening of
    it (comparing the column itself with the literal then means the same)."""
    if isinstance(e, Column) and e.type is not None:
        return e
    if isinstance(e, Cast) and isinstance(e.arg, Column) and e.arg.type is not None and _widens(e.arg.type, e.to):
        return e.arg
    return None


def _widens(src: DataType, dst: DataType) -> bool:
    if src.kind is Kind.INT32 and dst.kind is Kind.INT64:
        return True
    if src.is_integer and dst.kind is Kind.DECIMAL:
        return True
    return src.kind is Kind.DECIMAL and dst.kind is Kind.DECIMAL and dst.scale >= src.scale


def _literal(e: Expr):
    """A literal's exact value: Fraction for numbers, bool, str, date days as Fraction; _NULL for
    NULL; None when `e` is not a literal we understand."""
    if isinstance(e, Cast) and isinstance(e.arg, Literal):
        inner = _literal(e.arg)
        if inner is None or inner is _NULL or isinstance(inner, str):
            return inner if inner is _NULL else None
        return inner if e.to.is_numeric and e.to.kind is not Kind.FLOAT64 else None
    if not isinstance(e, Literal) or e.type is None:
        return None
    v, t = e.value, e.type
    if v is None:
        return _NULL
    if t.kind is Kind.STRING:
        return v if isinstance(v, str) and "\0" not in v else None
    if t.kind is Kind.BOOLEAN:
        return Fraction(int(bool(v)))
    if t.kind is Kind.DECIMAL:
        return Fraction(int(v), 10**t.scale)
    if t.kind is Kind.FLOAT64:
        return Fraction(v) if isinstance(v, (int, float)) and math.isfinite(v) else None
    return Fraction(int(v))  # integers, dates (days)


def _in_domain(lit, t: DataType, op: str) -> tuple[str, int | float | str] | None:
    """(op, value) of `column op lit` restated on the column's representation, or None."""
    if t.kind is Kind.STRING:
        return (op, lit) if isinstance(lit, str) else None
    if isinstance(lit, str):
        return None
    if t.kind is Kind.FLOAT64:
        f = float(lit)
        # only when the float is the literal exactly: the comparison is then the same
        return (op, f) if math.isfinite(f) and Fraction(f) == lit else None
    if t.kind not in _INTEGER_KINDS or t.is_wide_decimal:  # wide decimals (128 bits): no pruning yet
        return None
    b = lit * 10**t.scale if t.kind is Kind.DECIMAL else lit
    if op in ("=", "<>"):
        if b.denominator != 1:
            return None
        v = int(b)
    elif op in ("<", ">="):
        v = math.ceil(b)  # x < 5.5 <=> x < 6; x >= 5.5 <=> x >= 6
    else:
        v = math.floor(b)  # x <= 5.5 <=> x <= 5; x > 5.5 <=> x > 5
    if not _INT64[0] <= v <= _INT64[1]:
        return None
    return op, v
