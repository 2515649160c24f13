"""CAST(e AS type): one small function per (from kind, to kind).

Semantics (checked against DuckDB in tests/unit/test_codegen_semantics.py):
- int -> int: range-checked; float64 -> int: round half to even, then range-checked;
  decimal -> int: round half away from zero; int/decimal/boolean -> float64: exact conversion
  (decimal: unscaled / 10^s);
- float64 -> decimal: value * 10^s rounded half away from zero (as DuckDB does), precision-checked;
  decimal -> decimal: rescale, rounding half away from zero when the scale shrinks, precision-checked;
- string -> number/date/boolean: parsed by the runtime's helpers (surrounding spaces allowed
  for numbers and dates); invalid text is a data error quoting the value;
- number/date/boolean -> string: the jg_format_* helpers (float64 as DuckDB prints it: shortest
  round-trip, `1.5`, `0.1`, `1e+20`); boolean -> 'true'/'false';
- int/decimal/float64 -> boolean: non-zero is TRUE.
Wide decimals (p > 18, held as __int128) take the same rules through the jg_dec128_* helpers
(jg.h); a cast between a wide and a narrow decimal goes through 128 bits and is checked against
the target's precision before it is narrowed.

A cast the table below does not name is a CodegenError (the binder should have rejected it).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ....contract.types import BOOLEAN, INT64, DataType, Kind
from ....dataflow.expr import Cast
from .csyntax import CodegenError, CValue, c_double, c_int, c_int128, c_zero
from .expr import handles

if TYPE_CHECKING:
    from .expr import ExprCompiler

CastFn = Callable[["ExprCompiler", CValue, DataType], CValue]
CASTS: dict[tuple[Kind, Kind], CastFn] = {}
INTS = (Kind.INT32, Kind.INT64)


def casts(pairs):
    def register(fn: CastFn) -> CastFn:
        for p in pairs:
            CASTS[p] = fn
        return fn
    return register


@handles(Cast)
def _cast(c: ExprCompiler, e: Cast) -> CValue:
    a = c.compile(e.arg)
    to = e.to
    if e.type is not None and e.type != to:
        raise CodegenError(f"CAST to {to} typed {e.type}")
    if a.always_null:
        c.discard(a)
        return c.null_of(to)
    fn = CASTS.get((a.type.kind, to.kind))
    if fn is None:
        raise CodegenError(f"no cast from {a.type} to {to}")
    return fn(c, a, to)


def _pure(c: ExprCompiler, a: CValue, to: DataType, expr: str) -> CValue:
    return c.body.temp(to, expr, a.null, const=True)


def _guarded_call(c: ExprCompiler, a: CValue, to: DataType, call: str) -> CValue:
    """`call` may only run for a non-NULL operand (it reads string bytes or allocates)."""
    expr = call if a.never_null else f"{a.null} ? {c_zero(to)} : {call}"
    return c.body.temp(to, expr, a.null, const=True)


# ------------------------------------------------------------------ identities and integers


@casts([(k, k) for k in (Kind.BOOLEAN, Kind.INT32, Kind.INT64, Kind.FLOAT64, Kind.STRING, Kind.DATE)]
       + [(Kind.INT32, Kind.INT64)])
def _identity(c, a, to):
    return CValue(a.value, a.null, to)


@casts([(Kind.INT64, Kind.INT32)])
def _to_int32(c, a, to):
    out = c.body.temp(to, a.value, a.null, const=True)
    with c.unless_null(a.null):
        c.check_fits(out.value, to, f"value out of range for {to}")
    return out


@casts([(k, Kind.BOOLEAN) for k in (*INTS, Kind.DECIMAL)])
def _int_to_bool(c, a, to):
    return _pure(c, a, to, f"{a.value} != 0")


@casts([(k, Kind.FLOAT64) for k in (*INTS, Kind.BOOLEAN)])
def _int_to_float(c, a, to):
    return _pure(c, a, to, f"(double){a.value}")


@casts([(k, Kind.DECIMAL) for k in (*INTS, Kind.BOOLEAN)])
def _int_to_decimal(c, a, to):
    out = c.body.temp(to, None, a.null)
    if to.is_wide_decimal:
        with c.unless_null(a.null):
            c.fail(f"decimal overflow: value does not fit {to}",
                   f"__builtin_mul_overflow((__int128){a.value}, {c_int128(10 ** to.scale)}, &{out.value})")
            c.check_fits(out.value, to)
        return out
    with c.unless_null(a.null):
        c.fail(f"decimal overflow: value does not fit {to}",
               f"__builtin_mul_overflow({a.value}, {c_int(10 ** to.scale)}, &{out.value})")
        c.check_fits(out.value, to)
    return out


@casts([(Kind.BOOLEAN, k) for k in INTS])
def _bool_to_int(c, a, to):
    return _pure(c, a, to, f"(int64_t){a.value}")


# ------------------------------------------------------------------ float64


@casts([(Kind.FLOAT64, k) for k in INTS])
def _float_to_int(c, a, to):
    out = c.body.temp(to, None, a.null)
    with c.unless_null(a.null):
        r = f"r{c.body.fresh()}"
        c.body.line(f"const double {r} = jg_round_even({a.value});")
        if to.kind is Kind.INT32:
            ok = f"{r} >= -2147483648.0 && {r} <= 2147483647.0"
        else:
            ok = f"{r} >= -9223372036854775808.0 && {r} < 9223372036854775808.0"
        c.fail(f"float64 value out of range for {to}", f"!({ok})")
        c.body.line(f"{out.value} = (int64_t){r};")
    return out


@casts([(Kind.FLOAT64, Kind.BOOLEAN)])
def _float_to_bool(c, a, to):
    return _pure(c, a, to, f"{a.value} != 0.0")


@casts([(Kind.FLOAT64, Kind.DECIMAL)])
def _float_to_decimal(c, a, to):
    out = c.body.temp(to, None, a.null)
    fn = "jg_float_to_dec128" if to.is_wide_decimal else "jg_float_to_dec"
    with c.unless_null(a.null):
        c.fail(f"float64 value out of range for {to}",
               f"{fn}({a.value}, {to.precision}, {to.scale}, &{out.value})")
    return out


# ------------------------------------------------------------------ decimal


@casts([(Kind.DECIMAL, Kind.DECIMAL)])
def _decimal_to_decimal(c, a, to):
    s = a.type.scale
    if a.type.is_wide_decimal or to.is_wide_decimal:
        return _wide_decimal_to_decimal(c, a, to)
    if s == to.scale:
        if to.precision >= a.type.precision:
            return CValue(a.value, a.null, to)
        out = c.body.temp(to, a.value, a.null, const=True)
        with c.unless_null(a.null):
            c.check_fits(out.value, to)
        return out
    out = c.body.temp(to, None, a.null)
    with c.unless_null(a.null):
        if to.scale > s:
            c.fail(f"decimal overflow: value does not fit {to}",
                   f"__builtin_mul_overflow({a.value}, {c_int(10 ** (to.scale - s))}, &{out.value})")
            c.check_fits(out.value, to)
        else:
            c.fail(f"decimal overflow: value does not fit {to}",
                   f"jg_dec_rescale({a.value}, {s}, {to.scale}, {to.precision}, &{out.value})")
    return out


def _wide_decimal_to_decimal(c, a, to):
    """Either side wide: same scale and no narrowing is free (C widens exactly); otherwise
    rescale in 128 bits (half away from zero), check t's precision, then narrow if needed."""
    if a.type.scale == to.scale and to.precision >= a.type.precision:
        return CValue(a.value, a.null, to)
    if a.type.scale == to.scale and not to.is_wide_decimal:
        return c.narrowed(a, to)
    out = c.body.temp(to, None, a.null)
    with c.unless_null(a.null):
        if to.is_wide_decimal:
            c.fail(f"decimal overflow: value does not fit {to}",
                   f"jg_dec128_rescale({a.value}, {a.type.scale}, {to.scale}, {to.precision}, &{out.value})")
        else:
            w = f"w{c.body.fresh()}"
            c.body.line(f"__int128 {w};")
            c.fail(f"decimal overflow: value does not fit {to}",
                   f"jg_dec128_rescale({a.value}, {a.type.scale}, {to.scale}, {to.precision}, &{w})")
            c.body.line(f"{out.value} = (int64_t){w};")
    return out


@casts([(Kind.DECIMAL, k) for k in INTS])
def _decimal_to_int(c, a, to):
    if a.type.is_wide_decimal:
        out = c.body.temp(to, None, a.null)
        with c.unless_null(a.null):
            w = f"w{c.body.fresh()}"
            c.body.line(f"__int128 {w};")
            # dividing by 10^s rounds half away from zero and cannot overflow
            c.body.line(f"(void)jg_dec128_rescale({a.value}, {a.type.scale}, 0, 38, &{w});")
            c.fail(f"value out of range for {to}", f"{w} < INT64_MIN || {w} > INT64_MAX")
            c.body.line(f"{out.value} = (int64_t){w};")
            c.check_fits(out.value, to, f"value out of range for {to}")
        return out
    if a.type.scale == 0:
        return _to_int32(c, a, to) if to.kind is Kind.INT32 else CValue(a.value, a.null, to)
    out = c.body.temp(to, None, a.null)
    with c.unless_null(a.null):
        # |v| < 10^18 always fits int64 after dividing by 10^s: the call cannot fail
        c.body.line(f"(void)jg_dec_rescale({a.value}, {a.type.scale}, 0, 18, &{out.value});")
        c.check_fits(out.value, to, f"value out of range for {to}")
    return out


@casts([(Kind.DECIMAL, Kind.FLOAT64)])
def _decimal_to_float(c, a, to):
    if a.type.is_wide_decimal:
        return _pure(c, a, to, f"jg_dec128_to_double({a.value}, {a.type.scale})")
    if a.type.scale == 0:
        return _pure(c, a, to, f"(double){a.value}")
    return _pure(c, a, to, f"(double){a.value} / {c_double(10.0 ** a.type.scale)}")


# ------------------------------------------------------------------ to string


@casts([(k, Kind.STRING) for k in INTS])
def _int_to_string(c, a, to):
    return _guarded_call(c, a, to, f"jg_format_int64({c.body.ctx}, {a.value})")


@casts([(Kind.DECIMAL, Kind.STRING)])
def _decimal_to_string(c, a, to):
    fn = "jg_format_decimal128" if a.type.is_wide_decimal else "jg_format_decimal"
    return _guarded_call(c, a, to, f"{fn}({c.body.ctx}, {a.value}, {a.type.scale})")


@casts([(Kind.FLOAT64, Kind.STRING)])
def _float_to_string(c, a, to):
    return _guarded_call(c, a, to, f"jg_format_float64({c.body.ctx}, {a.value})")


@casts([(Kind.DATE, Kind.STRING)])
def _date_to_string(c, a, to):
    return _guarded_call(c, a, to, f"jg_format_date({c.body.ctx}, {a.value})")


@casts([(Kind.BOOLEAN, Kind.STRING)])
def _bool_to_string(c, a, to):
    yes, no = c.str_literal(b"true"), c.str_literal(b"false")
    return _pure(c, a, to, f"{a.value} ? {yes} : {no}")


# ------------------------------------------------------------------ from string


def _parse(c: ExprCompiler, a: CValue, to: DataType, call: str, result_type: DataType) -> CValue:
    """`call` fills &out and returns non-zero for text that is not a valid `to`."""
    out = c.body.temp(result_type, None, a.null)
    with c.unless_null(a.null):
        c.body.fail_text(f"invalid value for CAST to {to} in {c.where}:", a.value,
                         call.replace("OUT", f"&{out.value}"), note=f"invalid text for {to}")
    return out


@casts([(Kind.STRING, k) for k in INTS])
def _string_to_int(c, a, to):
    out = _parse(c, a, to, f"jg_parse_int64({a.value}.p, {a.value}.n, OUT)", to)
    if to.kind is Kind.INT32:
        with c.unless_null(a.null):
            c.body.fail_text(f"value out of range for CAST to {to} in {c.where}:", a.value,
                             f"{out.value} < INT32_MIN || {out.value} > INT32_MAX", note="out of range for int32")
    return out


@casts([(Kind.STRING, Kind.FLOAT64)])
def _string_to_float(c, a, to):
    return _parse(c, a, to, f"jg_parse_float64({a.value}.p, {a.value}.n, OUT)", to)


@casts([(Kind.STRING, Kind.DECIMAL)])
def _string_to_decimal(c, a, to):
    fn = "jg_parse_decimal128" if to.is_wide_decimal else "jg_parse_decimal"
    return _parse(c, a, to, f"{fn}({a.value}.p, {a.value}.n, {to.precision}, {to.scale}, OUT)", to)


@casts([(Kind.STRING, Kind.DATE)])
def _string_to_date(c, a, to):
    return _parse(c, a, to, f"jg_parse_date({a.value}.p, {a.value}.n, OUT)", to)


@casts([(Kind.STRING, Kind.BOOLEAN)])
def _string_to_bool(c, a, to):
    # parsed into an int64 temporary, then used as a boolean
    v = _parse(c, a, to, f"jg_parse_bool({a.value}.p, {a.value}.n, OUT)", INT64)
    return c.body.temp(BOOLEAN, f"(int){v.value}", v.null, const=True)
