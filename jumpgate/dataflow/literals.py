"""Literal text → typed `Literal` values (contract §1, "Types"), independent of any SQL parser.

- An integer is int32 if it fits, else int64, else float64.
- A number with a point and no exponent is decimal(p,s): s digits after the point, p the
  significant digits (at least s, at least 1); beyond 18 digits it is float64.
- A number with an exponent is float64; one that overflows float64 is an error.
- A date is strict 'YYYY-MM-DD' text, stored as days since 1970-01-01.
"""
from __future__ import annotations

import datetime as _dt
import re

from ..contract import types as T
from .expr import Literal

EPOCH = _dt.date(1970, 1, 1)
INT32_RANGE = (-(2**31), 2**31 - 1)
INT64_RANGE = (-(2**63), 2**63 - 1)

_INTEGER = re.compile(r"\d+")
_DECIMAL = re.compile(r"(\d*)\.(\d*)")
_FLOAT = re.compile(r"(\d+\.?\d*|\.\d+)[eE][+-]?\d+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def integer_literal(v: int) -> Literal:
    """ValueError for an integer beyond float64's range (it would be infinite)."""
    if INT32_RANGE[0] <= v <= INT32_RANGE[1]:
        return Literal(v, T.INT32)
    if INT64_RANGE[0] <= v <= INT64_RANGE[1]:
        return Literal(v, T.INT64)
    try:
        return Literal(float(v), T.FLOAT64)
    except OverflowError:
        raise ValueError(f"number {_abbreviated(v)} is out of range for float64") from None


def _abbreviated(v: int | str) -> str:
    text = str(v)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text):,} digits)"


def number_literal(text: str, negative: bool = False) -> Literal:
    """The literal for unsigned number text (with a leading minus if `negative`); ValueError if
    the text is not a number."""
    sign = -1 if negative else 1
    if _INTEGER.fullmatch(text):
        if len(text.lstrip("0")) > _FLOAT64_DIGITS:  # also spares int() a huge conversion
            raise ValueError(f"number {_abbreviated(text)} is out of range for float64")
        return integer_literal(sign * int(text))
    m = _DECIMAL.fullmatch(text)
    if m and (m.group(1) or m.group(2)):
        whole, frac = m.group(1), m.group(2)
        precision = max(len((whole + frac).lstrip("0")), len(frac), 1)
        if precision > T.MAX_NARROW_PRECISION:  # a literal stays a v1 decimal; longer ones are float64
            return Literal(sign * _finite(text), T.FLOAT64)
        return Literal(sign * int(whole + frac or "0"), T.decimal(precision, len(frac)))
    if _FLOAT.fullmatch(text):
        return Literal(sign * _finite(text), T.FLOAT64)
    raise ValueError(f"invalid number {text!r}")


_FLOAT64_DIGITS = 309  # an integer with more digits exceeds float64's largest value (~1.8e308)


def _finite(text: str) -> float:
    value = float(text)
    if value == float("inf"):
        raise ValueError(f"number {_abbreviated(text)} is out of range for float64")
    return value


def negate_literal(lit: Literal) -> Literal:
    """-lit for a non-NULL numeric literal, retyped where the range demands it."""
    v = -lit.value  # type: ignore[operator]
    if lit.type is not None and lit.type.is_integer:
        return integer_literal(v)
    return Literal(v, lit.type)


def parse_date(text: str) -> int | None:
    """Days since 1970-01-01 of a strict 'YYYY-MM-DD' string, or None if it is not a valid date."""
    if not _DATE.fullmatch(text):
        return None
    try:
        return (_dt.date.fromisoformat(text) - EPOCH).days
    except ValueError:
        return None
