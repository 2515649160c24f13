"""Arithmetic `+ - * / %` (contract §1 "Arithmetic").

int64 results are overflow-checked (`__builtin_*_overflow`); decimals are scaled int64: `+ - %`
rescale both operands to the result scale (checked), `*` multiplies the unscaled values in
__int128 (result scale = sum of scales), and every decimal result is checked against its
precision (|v| < 10^p). When an operand or the result is a wide decimal (p > 18), the same steps
run in __int128 (`_wide_decimal`), with 128-bit overflow checks and the result checked against
10^p before it is narrowed to int64 when its type is narrow. `/` is float64 only (the binder casts). Division or remainder by zero is
a data error, for float64 too; otherwise float64 is IEEE.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ....contract.types import DataType, Kind
from ....dataflow.expr import Binary
from .csyntax import CodegenError, CValue, c_int, c_int128, or_nulls

if TYPE_CHECKING:
    from .expr import ExprCompiler

_OVERFLOW_BUILTIN = {"+": "__builtin_add_overflow", "-": "__builtin_sub_overflow", "*": "__builtin_mul_overflow"}
_OP_NAME = {"+": "addition", "-": "subtraction", "*": "multiplication", "/": "division", "%": "remainder"}


def arithmetic(c: ExprCompiler, e: Binary) -> CValue:
    a = c.compile(e.left)
    b = c.compile(e.right)
    t = e.type
    null = or_nulls(a.null, b.null)
    if null == "1":
        c.discard(a, b)
        return c.null_of(t)
    if t.kind is Kind.FLOAT64:
        return _float(c, e.op, a, b, t, null)
    if t.is_integer:
        return _integer(c, e.op, a, b, t, null)
    if t.kind is Kind.DECIMAL:
        return _decimal(c, e.op, a, b, t, null)
    raise CodegenError(f"arithmetic {e.op!r} with result type {t}")


def _require(a: CValue, b: CValue, ok, what: str) -> None:
    if not (ok(a.type) and ok(b.type)):
        raise CodegenError(f"{what} with operands {a.type} and {b.type} (the binder must cast)")


def _float(c: ExprCompiler, op: str, a: CValue, b: CValue, t: DataType, null: str) -> CValue:
    _require(a, b, lambda x: x.kind is Kind.FLOAT64, f"float64 {op!r}")
    if op in ("+", "-", "*"):
        return c.body.temp(t, f"{a.value} {op} {b.value}", null, const=True)
    out = c.body.temp(t, None, null)
    with c.unless_null(null):
        c.fail("division by zero", f"{b.value} == 0.0")
        expr = f"{a.value} / {b.value}" if op == "/" else f"__builtin_fmod({a.value}, {b.value})"
        c.body.line(f"{out.value} = {expr};")
    return out


def _integer(c: ExprCompiler, op: str, a: CValue, b: CValue, t: DataType, null: str) -> CValue:
    _require(a, b, lambda x: x.is_integer, f"integer {op!r}")
    out = c.body.temp(t, None, null)
    with c.unless_null(null):
        if op in _OVERFLOW_BUILTIN:
            c.fail(f"integer overflow in {_OP_NAME[op]}",
                   f"{_OVERFLOW_BUILTIN[op]}({a.value}, {b.value}, &{out.value})")
        elif op == "%":
            c.fail("division by zero", f"{b.value} == 0")
            # INT64_MIN % -1 is 0 mathematically (and undefined behaviour in C)
            c.body.line(f"{out.value} = {b.value} == -1 ? 0 : {a.value} % {b.value};")
        else:
            raise CodegenError(f"integer {op!r} (the binder makes / float64)")
        c.check_fits(out.value, t)
    return out


def _scale(v: CValue) -> int:
    return v.type.scale if v.type.kind is Kind.DECIMAL else 0


def _upscaled(c: ExprCompiler, v: CValue, to: int, t: DataType) -> str:
    """`v` at scale `to` (>= its own), overflow-checked; call inside a non-NULL guard."""
    k = to - _scale(v)
    if k < 0:
        raise CodegenError(f"decimal result scale {to} is below an operand's scale {_scale(v)}")
    if k == 0:
        return v.value
    name = f"u{c.body.fresh()}"
    c.body.line(f"int64_t {name};")
    c.fail(f"decimal overflow: result does not fit {t}",
           f"__builtin_mul_overflow({v.value}, {c_int(10 ** k)}, &{name})")
    return name


def _wide_decimal(c: ExprCompiler, op: str, a: CValue, b: CValue, t: DataType, null: str) -> CValue:
    """Decimal arithmetic in __int128: operands rescaled to the result scale (checked), the
    operation overflow-checked, the result checked against t's precision (then narrowed to
    int64 when t has at most 18 digits)."""
    overflow = f"decimal overflow: result does not fit {t}"
    wide_t = t if t.is_wide_decimal else DataType(Kind.DECIMAL, 38, t.scale)
    w = c.body.temp(wide_t, None, null)
    with c.unless_null(null):
        if op == "*":
            product_scale = _scale(a) + _scale(b)
            p = f"p{c.body.fresh()}"
            c.body.line(f"__int128 {p};")
            c.fail(overflow, f"__builtin_mul_overflow((__int128){a.value}, (__int128){b.value}, &{p})")
            if product_scale == t.scale:
                c.body.line(f"{w.value} = {p};")
            else:
                c.fail(overflow, f"jg_dec128_rescale({p}, {product_scale}, {t.scale}, 38, &{w.value})")
        elif op in ("+", "-", "%"):
            x, y = (_wide_upscaled(c, v, t.scale, overflow) for v in (a, b))
            if op == "%":
                c.fail("division by zero", f"{y} == 0")
                c.body.line(f"{w.value} = {y} == -1 ? 0 : {x} % {y};")
            else:
                c.fail(overflow, f"{_OVERFLOW_BUILTIN[op]}({x}, {y}, &{w.value})")
        else:
            raise CodegenError(f"decimal {op!r} (the binder makes / float64)")
        lim = c_int128(10 ** t.precision)
        c.fail(overflow, f"{w.value} <= -{lim} || {w.value} >= {lim}")
    if t.is_wide_decimal:
        return w
    return c.body.temp(t, f"(int64_t){w.value}", w.null, const=True)  # checked above: it fits


def _wide_upscaled(c: ExprCompiler, v: CValue, to: int, overflow: str) -> str:
    """`v` as __int128 at scale `to` (>= its own), overflow-checked; inside a non-NULL guard."""
    k = to - _scale(v)
    if k < 0:
        raise CodegenError(f"decimal result scale {to} is below an operand's scale {_scale(v)}")
    name = f"u{c.body.fresh()}"
    c.body.line(f"__int128 {name} = (__int128){v.value};")
    if k:
        c.fail(overflow, f"__builtin_mul_overflow({name}, {c_int128(10 ** k)}, &{name})")
    return name


def _decimal(c: ExprCompiler, op: str, a: CValue, b: CValue, t: DataType, null: str) -> CValue:
    _require(a, b, lambda x: x.kind is Kind.DECIMAL or x.is_integer, f"decimal {op!r}")
    if any(x.is_wide_decimal for x in (a.type, b.type, t)):
        return _wide_decimal(c, op, a, b, t, null)
    out = c.body.temp(t, None, null)
    with c.unless_null(null):
        if op == "*":
            w = f"w{c.body.fresh()}"
            c.body.line(f"const __int128 {w} = (__int128){a.value} * {b.value};")
            product_scale = _scale(a) + _scale(b)
            if product_scale == t.scale:
                lim = c_int(10 ** t.precision)
                c.fail(f"decimal overflow: result does not fit {t}", f"{w} <= -{lim} || {w} >= {lim}")
                c.body.line(f"{out.value} = (int64_t){w};")
            else:
                c.fail(f"decimal overflow: result does not fit {t}",
                       f"jg_dec_rescale({w}, {product_scale}, {t.scale}, {t.precision}, &{out.value})")
            return out
        if op not in ("+", "-", "%"):
            raise CodegenError(f"decimal {op!r} (the binder makes / float64)")
        x = _upscaled(c, a, t.scale, t)
        y = _upscaled(c, b, t.scale, t)
        if op == "%":
            c.fail("division by zero", f"{y} == 0")
            c.body.line(f"{out.value} = {y} == -1 ? 0 : {x} % {y};")
        else:
            c.fail(f"decimal overflow: result does not fit {t}",
                   f"{_OVERFLOW_BUILTIN[op]}({x}, {y}, &{out.value})")
        c.check_fits(out.value, t)
    return out
