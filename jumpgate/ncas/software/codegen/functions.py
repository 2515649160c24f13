"""Scalar functions (contract §1): abs, coalesce, substr, lower, upper, length, year, month, day.

String functions call the runtime's helpers (ncas/runtime/expr_support.c) so that generated files
stay small: length counts code points; substr follows DuckDB (1-based code points, start 0 and
negative starts, negative lengths); lower/upper use Unicode simple case mapping (DuckDB's table).
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING

from ....contract.types import DataType, Kind
from ....dataflow.expr import Func
from .csyntax import CodegenError, CValue, c_zero, or_nulls
from .expr import handles

if TYPE_CHECKING:
    from .expr import ExprCompiler

FuncFn = Callable[["ExprCompiler", Func], CValue]
FUNCS: dict[str, FuncFn] = {}
ARITY = {"abs": (1, 1), "coalesce": (1, 1 << 16), "substr": (2, 3), "lower": (1, 1), "upper": (1, 1),
         "length": (1, 1), "year": (1, 1), "month": (1, 1), "day": (1, 1)}


def function(*names: str):
    def register(fn: FuncFn) -> FuncFn:
        for n in names:
            FUNCS[n] = fn
        return fn
    return register


@handles(Func)
def _func(c: ExprCompiler, e: Func) -> CValue:
    fn = FUNCS.get(e.name)
    if fn is None:
        raise CodegenError(f"no C code generation for function {e.name!r}")
    lo, hi = ARITY[e.name]
    if not lo <= len(e.args) <= hi:
        raise CodegenError(f"{e.name} takes {lo}..{hi} arguments, got {len(e.args)}")
    return fn(c, e)


def _strict_args(c: ExprCompiler, e: Func, kinds: tuple[tuple[Kind, ...], ...]) -> tuple[list[CValue], str] | None:
    """Compile all arguments (NULL in, NULL out); None when the result is NULL for certain."""
    args = [c.compile(a) for a in e.args]
    for v, allowed in zip(args, kinds):
        if v.type.kind not in allowed:
            raise CodegenError(f"{e.name} argument of type {v.type}")
    null = or_nulls(*(v.null for v in args))
    if null == "1":
        c.discard(*args)
        return None
    return args, null


def _call(c: ExprCompiler, t: DataType, null: str, call: str) -> CValue:
    """A helper call that may only run on non-NULL arguments."""
    expr = call if null == "0" else f"{null} ? {c_zero(t)} : {call}"
    return c.body.temp(t, expr, null, const=True)


INTEGERS = (Kind.INT32, Kind.INT64)


@function("abs")
def _abs(c, e):
    got = _strict_args(c, e, ((*INTEGERS, Kind.DECIMAL, Kind.FLOAT64),))
    if got is None:
        return c.null_of(e.type)
    (a,), null = got
    k = a.type.kind
    if k is Kind.FLOAT64:
        return c.body.temp(e.type, f"__builtin_fabs({a.value})", null, const=True)
    if k is Kind.DECIMAL:
        return c.coerce(c.body.temp(a.type, f"{a.value} < 0 ? -{a.value} : {a.value}", null, const=True), e.type)
    out = c.body.temp(e.type, None, null)
    with c.unless_null(null):
        c.fail("integer overflow in abs", f"{a.value} == INT64_MIN")
        c.body.line(f"{out.value} = {a.value} < 0 ? -{a.value} : {a.value};")
        c.check_fits(out.value, e.type)
    return out


@function("coalesce")
def _coalesce(c, e):
    """The first non-NULL argument; later arguments are evaluated only when needed. Each one nests
    in the ELSE of the one before, built in a loop (no recursion on the number of arguments)."""
    r = c.body.result(e.type, null_init="1")
    with ExitStack() as stack:
        for i, arg in enumerate(e.args):
            v = c.coerce(c.compile(arg), e.type)
            if v.never_null or i + 1 == len(e.args):
                c.body.assign(r, v)
                break
            if v.always_null:
                c.discard(v)
                continue
            otherwise = stack.enter_context(c.body.if_else(f"!{v.null}"))
            c.body.assign(r, CValue(v.value, "0", v.type))
            otherwise()
            stack.enter_context(c.branch())
    return r


@function("length")
def _length(c, e):
    got = _strict_args(c, e, ((Kind.STRING,),))
    if got is None:
        return c.null_of(e.type)
    (a,), null = got
    return c.coerce(_call(c, e.type, null, f"jg_utf8_length({a.value})"), e.type)


@function("substr")
def _substr(c, e):
    got = _strict_args(c, e, ((Kind.STRING,), INTEGERS, INTEGERS))
    if got is None:
        return c.null_of(e.type)
    args, null = got
    s, start = args[0], args[1]
    length, has_len = (args[2].value, 1) if len(args) == 3 else ("0", 0)
    return _call(c, e.type, null, f"jg_substr({s.value}, {start.value}, {length}, {has_len})")


@function("lower", "upper")
def _case_map(c, e):
    got = _strict_args(c, e, ((Kind.STRING,),))
    if got is None:
        return c.null_of(e.type)
    (a,), null = got
    return _call(c, e.type, null, f"jg_{e.name}({c.body.ctx}, {a.value})")


@function("year", "month", "day")
def _date_part(c, e):
    got = _strict_args(c, e, ((Kind.DATE,),))
    if got is None:
        return c.null_of(e.type)
    (a,), null = got
    if not e.type.is_integer:
        raise CodegenError(f"{e.name} typed {e.type}")
    out = c.body.temp(e.type, None, null)
    part = {"year": 0, "month": 1, "day": 2}[e.name]
    with c.unless_null(null):
        ymd = f"ymd{c.body.fresh()}"
        c.body.line(f"int64_t {ymd}[3];")
        c.body.line(f"jg_civil_from_days({a.value}, &{ymd}[0], &{ymd}[1], &{ymd}[2]);")
        c.body.line(f"{out.value} = {ymd}[{part}];")
    return out
