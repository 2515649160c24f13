"""The `aggregate` operation: modes, partial states and result types (contract §1).

Result types (complete and final mode): `sum` of an integer is int64, of decimal(p,s) is
decimal(18,s) (decimal(38,s) when p > 18: a wide decimal), of float64 is float64; `count` and `count_star` are int64; `min`/`max` keep the
input type (every type is orderable: false < true, strings by bytes, dates by day); `avg` is
float64 for every numeric input, decimals included (as in DuckDB; an exact decimal average would
need a division rule the contract does not have).

Partial mode emits the state: `sum`/`min`/`max` under the aggregate's name with its result type,
`count`/`count_star` as int64, `avg` as `NAME__sum` (float64, or the decimal sum type above for a decimal input)
and `NAME__count` (int64).

Final mode merges partial rows. Aggregates are matched to their state columns purely by name
(`NAME`, or `NAME__sum` and `NAME__count` for avg). An `expr` is optional and, if given, is not
evaluated: it is the partial side's expression, so one aggregate list can serve both halves of a
split aggregation (as the Python client sends it). Its `AggregateCall.expr` is the bound state
column (`NAME__sum` for avg; a code generator finds `NAME__count` by name in the input schema).
A `group_by` entry may omit `expr` in final mode: it then means the input column of that name.
The output equals complete mode's.

DISTINCT (an addition to the contract): in complete mode an aggregate's `expr` may start with
`DISTINCT` (`count`, `sum`, `avg`, `min`, `max`), as in SQL's `count(DISTINCT x)`: the aggregate then
takes each distinct non-NULL value once. All the DISTINCT aggregates of one operation take the same
expression (as Spark plans them without an expand step); the compiler runs it as an aggregation by
the group keys and that expression, then one by the group keys (compiler/distinct.py). Partial and
final mode reject it: a partial state of a distinct count would have to carry the values.
"""
from __future__ import annotations

import re

from ..contract import types as T
from ..contract.errors import RequestError
from ..contract.types import DataType, Field, Kind, Schema
from .expr import Column, Expr
from .jsonshape import at, check_column_name, check_keys, clip, expect_object, get_list, json_type, show
from .opbind import RawOp, bind_expr, choice, parse_named
from .plan import AggFn, AggMode, Aggregate, AggregateCall, InputRef
from .sqltext import to_sql
from .typecheck import bind_named

# `DISTINCT x` as an aggregate's expression: the keyword, then the expression.
_DISTINCT = re.compile(r"\s*distinct\b(.*)", re.IGNORECASE | re.DOTALL)
DISTINCT_FUNCTIONS = (AggFn.COUNT, AggFn.SUM, AggFn.AVG, AggFn.MIN, AggFn.MAX)
NUMERIC_ONLY = (AggFn.SUM, AggFn.AVG)  # the aggregates that take numeric expressions only


def sum_type(t: DataType) -> DataType:
    """decimal(18,s) for a narrow decimal (v1, unchanged), decimal(38,s) for a wide one."""
    if t.kind is Kind.DECIMAL:
        p = T.MAX_DECIMAL_PRECISION if t.is_wide_decimal else T.MAX_NARROW_PRECISION
        return T.decimal(p, t.scale)
    return T.FLOAT64 if t == T.FLOAT64 else T.INT64


def result_type(fn: AggFn, t: DataType | None) -> DataType:
    """The complete-mode (and final-mode) output type of `fn` over an input of type `t`."""
    if fn in (AggFn.COUNT, AggFn.COUNT_STAR):
        return T.INT64
    if fn is AggFn.AVG:
        return T.FLOAT64
    if fn is AggFn.SUM:
        return sum_type(t)  # type: ignore[arg-type]
    return t  # type: ignore[return-value]


def partial_fields(name: str, fn: AggFn, t: DataType | None) -> list[Field]:
    """The partial-state columns an aggregate emits in partial mode."""
    if fn is AggFn.AVG:
        state = sum_type(t) if t is not None and t.kind is Kind.DECIMAL else T.FLOAT64  # type: ignore[arg-type]
        return [Field(name + "__sum", state), Field(name + "__count", T.INT64)]
    return [Field(name, result_type(fn, t))]


def bind_aggregate(op: RawOp, ref: InputRef, schema: Schema) -> tuple[Aggregate, Schema]:
    mode = choice(op.obj, "mode", op.path, AggMode, default="complete")
    group_items = get_list(op.obj, "group_by", op.path, required=False, nonempty=False)
    agg_items = get_list(op.obj, "aggregates", op.path, required=False, nonempty=False)
    if not group_items and not agg_items:
        raise RequestError("an aggregate needs at least one 'group_by' or 'aggregates' entry", op.at("aggregates"))
    final = mode is AggMode.FINAL
    groups = bind_named(parse_named(group_items, op.at("group_by"), expr_required=not final, limits=op.limits),
                        schema, op.at("group_by"))
    out: list[Field] = [Field(g.name, g.expr.type) for g in groups]  # type: ignore[arg-type]
    taken = {g.name: op.at("group_by") + f"[{i}].name" for i, g in enumerate(groups)}
    calls = []
    distinct_at: str | None = None  # the path of the first DISTINCT aggregate
    for j, item in enumerate(agg_items):
        jpath = op.at("aggregates") + f"[{j}]"
        obj = expect_object(item, jpath, "an aggregate")
        check_keys(obj, jpath, ["name", "fn"], ["expr"], "an aggregate")
        name = check_column_name(obj["name"], at(jpath, "name"))
        fn = choice(obj, "fn", jpath, AggFn)
        _check_distinct(obj, fn, mode, jpath)
        if final:
            call, fields = _final_call(obj, name, fn, schema, jpath)
        else:
            call, t = _input_call(obj, name, fn, schema, jpath, op)
            fields = partial_fields(name, fn, t) if mode is AggMode.PARTIAL else [Field(name, result_type(fn, t))]
        if call.distinct:
            first = next((c for c in calls if c.distinct), None)
            if first is not None and first.expr != call.expr:
                raise RequestError(f"{fn.value}(DISTINCT …) over a second expression is not supported: every "
                                   f"DISTINCT aggregate of one operation takes the same expression ({distinct_at} "
                                   f"takes {clip(to_sql(first.expr))}); aggregate each in an operation of its own "
                                   "and join them", at(jpath, "expr"), clip(str(obj.get("expr"))))
            distinct_at = distinct_at or at(jpath, "expr")
        for f in fields:
            if f.name in taken:
                raise RequestError(f"duplicate output column {show(f.name)} (also at {taken[f.name]})",
                                   at(jpath, "name"), f.name)
            taken[f.name] = at(jpath, "name")
        out.extend(fields)
        calls.append(call)
    return Aggregate(op.name, ref, groups, tuple(calls), mode), Schema(tuple(out))


def _input_call(obj: dict, name: str, fn: AggFn, schema: Schema, path: str,
                op: RawOp) -> tuple[AggregateCall, DataType | None]:
    """An aggregate over an expression of the input (complete and partial mode)."""
    text = obj.get("expr")
    if fn is AggFn.COUNT_STAR:
        if text is not None:
            raise RequestError("count_star counts rows and takes no 'expr'", at(path, "expr"), clip(str(text)))
        return AggregateCall(name, fn, None), None
    if text is None:
        raise RequestError(f"missing field 'expr': {fn.value} needs an expression", at(path, "expr"))
    distinct = _DISTINCT.fullmatch(text) if isinstance(text, str) else None
    expr = bind_expr(distinct.group(1) if distinct else text, schema, at(path, "expr"), op.limits)
    if fn in NUMERIC_ONLY and not expr.type.is_numeric:  # type: ignore[union-attr]
        raise RequestError(f"{fn.value} needs a numeric expression, got {expr.type}", at(path, "expr"), clip(text))
    return AggregateCall(name, fn, expr, distinct=distinct is not None), expr.type


def _check_distinct(obj: dict, fn: AggFn, mode: AggMode, path: str) -> None:
    """A DISTINCT aggregate is one of DISTINCT_FUNCTIONS in complete mode (the module docstring)."""
    text = obj.get("expr")
    if not (isinstance(text, str) and _DISTINCT.fullmatch(text)):
        return
    if fn not in DISTINCT_FUNCTIONS:
        raise RequestError(f"{fn.value} takes no DISTINCT (it counts rows): use count with DISTINCT and an expression",
                           at(path, "expr"), clip(text))
    if mode is not AggMode.COMPLETE:
        raise RequestError(f"{fn.value}(DISTINCT …) is not supported in {mode.value} mode: a partial state would "
                           "have to carry every distinct value; use mode 'complete'", at(path, "expr"), clip(text))


def _final_call(obj: dict, name: str, fn: AggFn, schema: Schema, path: str) -> tuple[AggregateCall, list[Field]]:
    """An aggregate merging the partial state column(s) named after it."""
    # A given `expr` is the partial side's expression: not evaluated here (see the module docstring).
    if obj.get("expr") is not None and not isinstance(obj["expr"], str):
        raise RequestError(f"'expr' must be a string, got {json_type(obj['expr'])}", at(path, "expr"))
    if fn is AggFn.AVG:
        total = _state_column(name + "__sum", schema, path, fn, lambda t: t.is_numeric, "numeric")
        _state_column(name + "__count", schema, path, fn, lambda t: t.is_integer, "an integer")
        return AggregateCall(name, fn, total), [Field(name, T.FLOAT64)]
    if fn in (AggFn.COUNT, AggFn.COUNT_STAR):
        state = _state_column(name, schema, path, fn, lambda t: t.is_integer, "an integer")
    elif fn is AggFn.SUM:
        state = _state_column(name, schema, path, fn, lambda t: t.is_numeric, "numeric")
    else:
        state = _state_column(name, schema, path, fn, lambda t: True, "any type")
    return AggregateCall(name, fn, state), [Field(name, result_type(fn, state.type))]


def _state_column(column: str, schema: Schema, path: str, fn: AggFn, ok, want: str) -> Expr:
    f = schema.get(column)
    if f is None:
        raise RequestError(f"final {fn.value} needs the partial-state column {show(column)} in its "
                           f"input; the input has: {', '.join(map(repr, schema.names[:20]))}",
                           at(path, "name"), column)
    if not ok(f.type):
        raise RequestError(f"partial-state column {show(column)} of a final {fn.value} must be {want}, "
                           f"got {f.type}", at(path, "name"), column)
    return Column(f.name, schema.index(column), f.type)


__all__ = ["bind_aggregate", "partial_fields", "result_type", "sum_type"]
