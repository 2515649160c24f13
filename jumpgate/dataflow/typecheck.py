"""The binder: resolve columns, type every node and make every conversion an explicit `Cast`.

`bind(expr, schema, path)` turns a parsed tree into one that satisfies every invariant listed in
`jumpgate.dataflow.expr`. The rules are contract §1, "Types"; where the contract is silent:

- Column names match exactly; failing that, by a unique case-insensitive match (quoted or not).
- An integer meets a decimal as decimal(10,0) (int32) or decimal(18,0) (int64); an integer
  *literal* as decimal(digits,0), so `price * 2` stays narrow.
- Decimal results: `+ -` scale max(s1,s2), precision max(p1-s1,p2-s2)+scale+1; `*` scale s1+s2,
  precision p1+p2+1 (float64 if the scale would exceed 18); `%` scale max(s1,s2), precision
  min(p1-s1,p2-s2)+scale. Precision is capped at 18 when both operands have at most 18 digits
  (the v1 rule, unchanged), at 38 when one is a wide decimal (p > 18, an addition); values that
  do not fit are data errors.
- Unary minus of an integer is int64, like all integer arithmetic. `abs` keeps its argument's type.
- Comparisons (and IN, which is a chain of `=`) bring integers to int64 when they differ, integers
  to decimal when meeting a decimal (two decimals keep their own precision and scale), anything to
  float64 when meeting a float64. A string literal meeting a date is a date literal.
- CASE branches, coalesce arguments and join keys get one exact common type (`common_type`);
  two decimals unite as decimal(max integer digits + max scale, max scale), capped at 18 (38 when
  one of them is wide).
- NULL takes the type of its context; with no context (`NULL IS NULL`, all-NULL CASE) it is boolean.
- substr's start and length are cast to int64; length/year/month/day return int64.
- Literal conversions that are exact (int to a wider number, decimal to float64, string to date)
  are folded into the literal instead of a Cast node.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Context, Decimal

from ..contract import types as T
from ..contract.errors import RequestError
from ..contract.types import DataType, Field, Kind, Schema
from .expr import (
    ARITHMETIC_OPS,
    COMPARISON_OPS,
    LOGICAL_OPS,
    Binary,
    Case,
    Cast,
    Column,
    Expr,
    Func,
    InList,
    IsNull,
    Like,
    Literal,
    Unary,
    depth,
    walk,
)
from .jsonshape import clip
from .limits import ensure_stack_for
from .literals import integer_literal, parse_date
from .plan import NamedExpr
from .sqltext import to_sql

Fields = Schema | Sequence[Field]

_FRAMES_PER_LEVEL = 6  # the binder's (and to_sql's, for its messages) frames per tree level, with room
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_MAXP = T.MAX_NARROW_PRECISION


def _cap(*types: DataType) -> int:
    """The precision cap of a decimal result: 18 between narrow decimals (v1), 38 with a wide one."""
    return T.MAX_DECIMAL_PRECISION if any(t.is_wide_decimal for t in types) else T.MAX_NARROW_PRECISION


# --- public helpers ----------------------------------------------------------------------------

def bind(expr: Expr, schema: Fields, path: str) -> Expr:
    """Bind an expression against the fields it is evaluated on; raises RequestError at `path`.
    The binder recurses on the tree, whose depth the parser bounded (dataflow/limits.py)."""
    ensure_stack_for(depth(expr), _FRAMES_PER_LEVEL)
    return _settle(_Binder(tuple(schema), path).bind(expr), T.BOOLEAN)


def bind_named(exprs: Iterable[NamedExpr], schema: Fields, path_prefix: str) -> tuple[NamedExpr, ...]:
    """Bind `[{name, expr}]` entries; the error path of entry i is `{path_prefix}[i].expr`."""
    return tuple(NamedExpr(n.name, bind(n.expr, schema, f"{path_prefix}[{i}].expr"))
                 for i, n in enumerate(exprs))


def named_schema(exprs: Iterable[NamedExpr]) -> Schema:
    """The schema of bound named expressions (names must be unique)."""
    return Schema(tuple(Field(n.name, n.expr.type) for n in exprs))  # type: ignore[arg-type]


def common_type(a: DataType, b: DataType) -> DataType | None:
    """The one type both `a` and `b` convert to exactly (CASE, coalesce, join keys), or None."""
    if a == b:
        return a
    if not (a.is_numeric and b.is_numeric):
        return None
    if T.FLOAT64 in (a, b):
        return T.FLOAT64
    if a.is_integer and b.is_integer:
        return T.INT64
    da, db = _as_decimal(a), _as_decimal(b)
    scale = max(da.scale, db.scale)
    digits = max(da.precision - da.scale, db.precision - db.scale)
    return T.decimal(min(digits + scale, _cap(da, db)), scale)


def cast_to(e: Expr, to: DataType) -> Expr:
    """`e` converted to `to`: unchanged if it already has that type, a typed NULL, a converted
    literal when the conversion is exact, else an explicit Cast node."""
    if _is_null(e):
        return Literal(None, to)
    if e.type == to:
        return e
    if isinstance(e, Literal):
        folded = _convert_literal(e, to)
        if folded is not None:
            return folded
    return Cast(e, to, to)


def check_bound(e: Expr, schema: Fields) -> None:
    """Assert the invariants of `jumpgate.dataflow.expr` on a bound tree (tests, code generators)."""
    fields = tuple(schema)
    for n in walk(e):
        if n.type is None:
            raise AssertionError(f"untyped node {n!r}")
        if isinstance(n, Column) and not (0 <= n.index < len(fields) and fields[n.index].type == n.type):
            raise AssertionError(f"column {n.name!r} bound to a wrong index or type")
        if isinstance(n, Binary):
            lt, rt = n.left.type, n.right.type
            both_decimal = _same_or_decimals(lt, rt)
            if n.op in LOGICAL_OPS and not (lt == rt == T.BOOLEAN):
                raise AssertionError(f"{n.op} of non-booleans")
            if n.op == "/" and not (lt == rt == T.FLOAT64):
                raise AssertionError("/ of non-float64 operands")
            if n.op in COMPARISON_OPS + ("+", "-", "%", "*") and lt != rt and not both_decimal:
                raise AssertionError(f"{n.op} of {lt} and {rt}")
            if n.op in ("+", "-", "*", "%") and lt is not None and lt.is_integer and lt != T.INT64:
                raise AssertionError("integer arithmetic must be int64")
        if isinstance(n, InList) and any(not _same_or_decimals(i.type, n.arg.type) for i in n.items):
            raise AssertionError("IN item of another type than the probe")
        if isinstance(n, Like) and n.arg.type != T.STRING:
            raise AssertionError("LIKE of a non-string")
        if isinstance(n, Cast) and n.type != n.to:
            raise AssertionError("Cast.type differs from Cast.to")
        if isinstance(n, Unary) and n.op == "not" and n.arg.type != T.BOOLEAN:
            raise AssertionError("NOT of a non-boolean")
        if isinstance(n, Case) and any(c.type != T.BOOLEAN for c, _ in n.whens):
            raise AssertionError("CASE condition not boolean")
        if isinstance(n, Case) and any(v.type != n.type for v in _case_values(n)):
            raise AssertionError("CASE branch of another type than the CASE")


# --- the binder --------------------------------------------------------------------------------

class _Binder:
    def __init__(self, fields: tuple[Field, ...], path: str) -> None:
        self.fields = fields
        self.path = path

    def error(self, message: str, node: Expr) -> RequestError:
        return RequestError(message, self.path, clip(to_sql(node)))

    def bind(self, e: Expr) -> Expr:
        method = getattr(self, "_" + type(e).__name__.lower(), None)
        if method is None:
            raise TypeError(f"not an expression node: {type(e).__name__}")
        return method(e)

    # leaves

    def _column(self, e: Column) -> Expr:
        exact = [i for i, f in enumerate(self.fields) if f.name == e.name]
        if not exact:
            exact = [i for i, f in enumerate(self.fields) if f.name.lower() == e.name.lower()]
            if len(exact) > 1:
                names = ", ".join(repr(self.fields[i].name) for i in exact)
                raise self.error(f"unknown column {e.name!r}; names are case-sensitive, did you mean "
                                 f"one of {names}?", e)
        if not exact:
            raise self.error(f"unknown column {e.name!r}; the input has: {_names(self.fields)}", e)
        if len(exact) > 1:
            raise self.error(f"column name {e.name!r} is ambiguous: it appears {len(exact)} times in "
                             "the input (e.g. on both sides of a join)", e)
        f = self.fields[exact[0]]
        return Column(f.name, exact[0], f.type)

    def _literal(self, e: Literal) -> Expr:
        if e.type is not None or e.value is None:
            return e
        v = e.value  # a hand-built untyped literal: infer as the parser would
        if isinstance(v, bool):
            return Literal(v, T.BOOLEAN)
        if isinstance(v, int):
            return integer_literal(v)
        if isinstance(v, float):
            return Literal(v, T.FLOAT64)
        if isinstance(v, str):
            return Literal(v, T.STRING)
        raise self.error(f"unsupported literal value {v!r}", e)

    # operators

    def _unary(self, e: Unary) -> Expr:
        arg = self.bind(e.arg)
        if e.op == "not":
            arg = self.need(arg, T.BOOLEAN, "NOT needs a boolean operand", e)
            return Unary("not", arg, T.BOOLEAN)
        if e.op != "neg":
            raise self.error(f"unknown unary operator {e.op!r}", e)
        arg = _settle(arg, T.INT64)
        if not arg.type.is_numeric:  # type: ignore[union-attr]
            raise self.error(f"unary minus needs a numeric operand, got {arg.type}", e)
        if arg.type.is_integer:  # type: ignore[union-attr]
            arg = cast_to(arg, T.INT64)
        return Unary("neg", arg, arg.type)

    def _binary(self, e: Binary) -> Expr:
        op = "<>" if e.op == "!=" else e.op
        left, right = self.bind(e.left), self.bind(e.right)
        if op in LOGICAL_OPS:
            msg = f"{op.upper()} needs boolean operands"
            left = self.need(left, T.BOOLEAN, msg, e)
            right = self.need(right, T.BOOLEAN, msg, e)
            return Binary(op, left, right, T.BOOLEAN)
        if op in COMPARISON_OPS:
            left, right = self.comparable([left, right], e)
            return Binary(op, left, right, T.BOOLEAN)
        if op in ARITHMETIC_OPS:
            return self.arithmetic(op, left, right, e)
        raise self.error(f"unknown operator {e.op!r}", e)

    def arithmetic(self, op: str, left: Expr, right: Expr, e: Expr) -> Expr:
        default = T.FLOAT64 if op == "/" else T.INT64
        left = _settle(left, right.type if right.type is not None and right.type.is_numeric else default)
        right = _settle(right, left.type if left.type.is_numeric else default)  # type: ignore[union-attr]
        lt, rt = left.type, right.type
        if not (lt.is_numeric and rt.is_numeric):  # type: ignore[union-attr]
            raise self.error(f"operator {op!r} needs numeric operands, got {lt} and {rt}", e)
        if op == "/" or T.FLOAT64 in (lt, rt):
            return Binary(op, cast_to(left, T.FLOAT64), cast_to(right, T.FLOAT64), T.FLOAT64)
        if lt.is_integer and rt.is_integer:  # type: ignore[union-attr]
            return Binary(op, cast_to(left, T.INT64), cast_to(right, T.INT64), T.INT64)
        left, right = _to_decimal(left), _to_decimal(right)
        lt, rt = left.type, right.type
        p1, s1, p2, s2 = lt.precision, lt.scale, rt.precision, rt.scale  # type: ignore[union-attr]
        cap = _cap(lt, rt)  # type: ignore[arg-type]
        if op == "*":
            if s1 + s2 > cap:
                return Binary(op, cast_to(left, T.FLOAT64), cast_to(right, T.FLOAT64), T.FLOAT64)
            result = T.decimal(min(p1 + p2 + 1, cap), s1 + s2)
        elif op == "%":
            scale = max(s1, s2)
            result = T.decimal(max(min(min(p1 - s1, p2 - s2) + scale, cap), 1), scale)
        else:
            scale = max(s1, s2)
            result = T.decimal(min(max(p1 - s1, p2 - s2) + scale + 1, cap), scale)
        return Binary(op, left, right, result)

    def _isnull(self, e: IsNull) -> Expr:
        return IsNull(_settle(self.bind(e.arg), T.BOOLEAN), e.negated, T.BOOLEAN)

    def _inlist(self, e: InList) -> Expr:
        arg, *items = self.comparable([self.bind(x) for x in (e.arg, *e.items)], e)
        return InList(arg, tuple(items), e.negated, T.BOOLEAN)

    def _like(self, e: Like) -> Expr:
        arg = self.need(self.bind(e.arg), T.STRING, "LIKE needs a string operand", e)
        return Like(arg, e.pattern, e.negated, T.BOOLEAN)

    def _case(self, e: Case) -> Expr:
        conds = [self.need(self.bind(c), T.BOOLEAN, "a CASE WHEN condition must be boolean", e)
                 for c, _ in e.whens]
        values = [self.bind(v) for _, v in e.whens]
        if e.else_ is not None:
            values.append(self.bind(e.else_))
        values, t = self.union(values, "CASE branches", e)
        whens = tuple(zip(conds, values[: len(conds)], strict=True))
        else_ = values[-1] if e.else_ is not None else None
        return Case(whens, else_, t)

    def _cast(self, e: Cast) -> Expr:
        arg = self.bind(e.arg)
        if _is_null(arg):
            return Literal(None, e.to)
        src, dst = arg.type, e.to
        if not _castable(src, dst):  # type: ignore[arg-type]
            raise self.error(f"cannot CAST {src} to {dst}", e)
        return cast_to(arg, dst)

    def _func(self, e: Func) -> Expr:
        args = [self.bind(a) for a in e.args]
        name = e.name.lower()
        if name == "substring":
            name = "substr"
        arity = {"coalesce": (1, None), "substr": (2, 3)}.get(name, (1, 1))
        if len(args) < arity[0] or (arity[1] is not None and len(args) > arity[1]):
            raise self.error(f"wrong number of arguments to {name}()", e)
        if name == "abs":
            arg = _settle(args[0], T.INT64)
            if not arg.type.is_numeric:  # type: ignore[union-attr]
                raise self.error(f"abs() needs a numeric argument, got {arg.type}", e)
            return Func("abs", (arg,), arg.type)
        if name == "coalesce":
            values, t = self.union(args, "coalesce() arguments", e)
            return Func("coalesce", tuple(values), t)
        if name == "substr":
            s = self.need(args[0], T.STRING, "substr() needs a string as first argument", e)
            rest = []
            for a in args[1:]:
                a = _settle(a, T.INT64)
                if not a.type.is_integer:  # type: ignore[union-attr]
                    raise self.error(f"substr() start and length must be integers, got {a.type}", e)
                rest.append(cast_to(a, T.INT64))
            return Func("substr", (s, *rest), T.STRING)
        if name in ("lower", "upper", "length"):
            s = self.need(args[0], T.STRING, f"{name}() needs a string argument", e)
            return Func(name, (s,), T.INT64 if name == "length" else T.STRING)
        if name in ("year", "month", "day"):
            d = args[0]
            if isinstance(d, Literal) and d.type == T.STRING:
                d = self.date_literal(d, e)
            d = self.need(d, T.DATE, f"{name}() needs a date argument", e)
            return Func(name, (d,), T.INT64)
        raise self.error(f"unknown function {e.name!r}", e)

    # type unification

    def need(self, e: Expr, t: DataType, message: str, node: Expr) -> Expr:
        e = _settle(e, t)
        if e.type != t:
            raise self.error(f"{message}, got {e.type}", node)
        return e

    def date_literal(self, lit: Literal, node: Expr) -> Literal:
        days = parse_date(lit.value) if isinstance(lit.value, str) else None
        if days is None:
            raise self.error(f"invalid date {lit.value!r}; expected 'YYYY-MM-DD'", node)
        return Literal(days, T.DATE)

    def _dates_from_strings(self, exprs: list[Expr], node: Expr) -> list[Expr]:
        """String literals among date operands are date literals."""
        if not any(x.type == T.DATE for x in exprs):
            return exprs
        return [self.date_literal(x, node) if isinstance(x, Literal) and x.type == T.STRING
                and x.value is not None else x for x in exprs]

    def comparable(self, exprs: list[Expr], node: Expr) -> list[Expr]:
        """Operands of `=`-like comparisons (and IN): one type, except decimals keep their own."""
        exprs = self._dates_from_strings(exprs, node)
        typed = [x.type for x in exprs if not _is_null(x)]
        if not typed:
            return [Literal(None, T.BOOLEAN) for _ in exprs]
        first = typed[0]
        if all(t.is_numeric for t in typed):  # type: ignore[union-attr]
            if T.FLOAT64 in typed:
                return [cast_to(x, T.FLOAT64) for x in exprs]
            decimals = [t for t in typed if t.kind is Kind.DECIMAL]  # type: ignore[union-attr]
            if decimals:
                return [Literal(None, decimals[0]) if _is_null(x) else _to_decimal(x) for x in exprs]
            target = first if all(t == first for t in typed) else T.INT64
            return [cast_to(x, target) for x in exprs]  # type: ignore[arg-type]
        for t in typed:
            if t != first:
                raise self.error(f"cannot compare {first} with {t}", node)
        return [cast_to(x, first) for x in exprs]  # type: ignore[arg-type]

    def union(self, exprs: list[Expr], what: str, node: Expr) -> tuple[list[Expr], DataType]:
        """Values that must all have one exact type (CASE branches, coalesce arguments)."""
        exprs = self._dates_from_strings(exprs, node)
        typed = [x.type for x in exprs if not _is_null(x)]
        if not typed:
            return [Literal(None, T.BOOLEAN) for _ in exprs], T.BOOLEAN
        result: DataType = typed[0]  # type: ignore[assignment]
        for t in typed[1:]:
            common = common_type(result, t)  # type: ignore[arg-type]
            if common is None:
                raise self.error(f"{what} have incompatible types {result} and {t}", node)
            result = common
        return [cast_to(x, result) for x in exprs], result


# --- small pure helpers ------------------------------------------------------------------------

def _is_null(e: Expr) -> bool:
    return isinstance(e, Literal) and e.type is None


def _settle(e: Expr, t: DataType) -> Expr:
    """Give an untyped NULL the type `t`; leave everything else alone."""
    return Literal(None, t) if _is_null(e) else e


def _names(fields: Sequence[Field], limit: int = 20) -> str:
    names = [repr(f.name) for f in fields[:limit]]
    more = f", ... ({len(fields) - limit} more)" if len(fields) > limit else ""
    return (", ".join(names) + more) if names else "(no columns)"


def _as_decimal(t: DataType) -> DataType:
    if t == T.INT32:
        return T.decimal(10, 0)
    if t == T.INT64:
        return T.decimal(18, 0)
    return t


def _to_decimal(e: Expr) -> Expr:
    """An integer operand meeting a decimal: literals as decimal(digits,0), others widened."""
    if not e.type.is_integer:  # type: ignore[union-attr]
        return e
    if isinstance(e, Literal) and isinstance(e.value, int) and len(str(abs(e.value))) <= _MAXP:
        return Literal(e.value, T.decimal(len(str(abs(e.value))), 0))
    return cast_to(e, _as_decimal(e.type))  # type: ignore[arg-type]


def _fits_decimal(unscaled: int, t: DataType) -> bool:
    return abs(unscaled) < 10**t.precision


def _convert_literal(lit: Literal, to: DataType) -> Literal | None:
    """`lit` as a literal of type `to` when the conversion is exact and obvious, else None."""
    v, src = lit.value, lit.type
    if v is None:
        return Literal(None, to)
    if src is None or isinstance(v, bool):
        return None
    if src.is_integer and to.is_integer:
        limit = _INT32_MAX if to == T.INT32 else _INT64_MAX
        return Literal(v, to) if -limit - 1 <= v <= limit else None  # type: ignore[operator]
    if src.is_integer and to == T.FLOAT64:
        return Literal(float(v), to)  # type: ignore[arg-type]
    if src.is_integer and to.kind is Kind.DECIMAL:
        unscaled = v * 10**to.scale  # type: ignore[operator]
        return Literal(unscaled, to) if _fits_decimal(unscaled, to) else None
    if src.kind is Kind.DECIMAL and to == T.FLOAT64:
        return Literal(float(Decimal(v).scaleb(-src.scale, Context(prec=80))), to)  # type: ignore[arg-type]
    if src.kind is Kind.DECIMAL and to.kind is Kind.DECIMAL and to.scale >= src.scale:
        unscaled = v * 10 ** (to.scale - src.scale)  # type: ignore[operator]
        return Literal(unscaled, to) if _fits_decimal(unscaled, to) else None
    if src == T.STRING and to == T.DATE:
        days = parse_date(v)  # type: ignore[arg-type]
        return Literal(days, to) if days is not None else None
    return None


def _castable(src: DataType, dst: DataType) -> bool:
    """Contract CASTs: numeric<->numeric, numeric<->string, string<->date, boolean<->string,
    boolean->integer; and any type to itself."""
    if src == dst or (src.is_numeric and dst.is_numeric):
        return True
    if (src.is_numeric and dst == T.STRING) or (src == T.STRING and dst.is_numeric):
        return True
    pairs = {(Kind.STRING, Kind.DATE), (Kind.DATE, Kind.STRING), (Kind.BOOLEAN, Kind.STRING),
             (Kind.STRING, Kind.BOOLEAN), (Kind.BOOLEAN, Kind.INT32), (Kind.BOOLEAN, Kind.INT64)}
    return (src.kind, dst.kind) in pairs


def _same_or_decimals(a: DataType | None, b: DataType | None) -> bool:
    return a == b or (a is not None and b is not None and a.kind is b.kind is Kind.DECIMAL)


def _case_values(c: Case) -> list[Expr]:
    return [v for _, v in c.whens] + ([c.else_] if c.else_ is not None else [])


__all__ = ["bind", "bind_named", "named_schema", "common_type", "cast_to", "check_bound"]
