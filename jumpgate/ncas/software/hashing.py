"""jg_hash v1 in Python: the reference implementation of the key hash that the shuffle, join and
aggregation NCAs compute in C (ncas/runtime/jg_hash.h; specified in docs/hashing.md). Other
systems use it to know which shuffle output a row goes to.

Values are hashed by what they are in the contract's type system:

- without `types`, by their Python type: None, bool, int (int32, int64, a date's days, a
  decimal's unscaled value), float, str (or UTF-8 bytes), and `datetime.date` (its days since
  1970-01-01). A `decimal.Decimal` needs its key's type, because a decimal hashes by its unscaled
  value at the key's scale (1.5 as decimal(10,2) is 150);
- with `types` (contract type names or `DataType`s, one per key), each value is first read as
  that type, so an `int` for a float64 key hashes as the float, and a `Decimal` or numeric string
  for a decimal key hashes by its unscaled value. This is what a receiver of a shuffle's output
  does: it knows each key's type from the request.

    >>> partition(["alpha", 42], 4, types=["string", "int64"])
    2
"""
from __future__ import annotations

import datetime as dt
import decimal as _decimal
import math
import struct
from collections.abc import Iterable, Sequence

MASK = (1 << 64) - 1
SEED = 0x9E3779B97F4A7C15
NULL = 0x5BD1E9955BD1E995
CANONICAL_NAN = 0x7FF8000000000000
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
EPOCH = dt.date(1970, 1, 1)


def fmix64(k: int) -> int:
    k &= MASK
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & MASK
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & MASK
    k ^= k >> 33
    return k


def hash_int(x: int) -> int:
    """boolean, int32, int64, date (days), decimal (unscaled): by value as a signed 64-bit int."""
    if not -(2**63) <= x < 2**63:
        raise OverflowError(f"{x} does not fit a signed 64-bit integer")
    return fmix64(x & MASK)


def hash_float(x: float) -> int:
    if math.isnan(x):
        bits = CANONICAL_NAN
    else:
        bits = struct.unpack("<Q", struct.pack("<d", 0.0 if x == 0.0 else x))[0]
    return fmix64(bits)


def hash_bytes(data: bytes) -> int:
    """A string by its UTF-8 bytes: FNV-1a-64, then fmix64."""
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK
    return fmix64(h)


def _unscaled(value: object, scale: int) -> int:
    """A decimal key value (Decimal, int, numeric str) as its unscaled integer at `scale`; it must
    be exact at that scale (a key's values always are)."""
    if isinstance(value, bool) or not isinstance(value, (_decimal.Decimal, int, str)):
        raise TypeError(f"cannot read {type(value).__name__} as a decimal")
    d = _decimal.Decimal(value).scaleb(scale, _decimal.Context(prec=60))
    if d != d.to_integral_value():
        raise ValueError(f"{value} has more than {scale} decimal places")
    return int(d)


def _days(value: object) -> int:
    if isinstance(value, dt.datetime):
        raise TypeError("a date key takes datetime.date or days, not datetime.datetime")
    if isinstance(value, dt.date):
        return (value - EPOCH).days
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"cannot read {type(value).__name__} as a date")


def _kind_and_scale(t: object) -> tuple[str, int]:
    from ...contract.types import DataType, parse_type

    dtype = t if isinstance(t, DataType) else parse_type(str(t))
    return dtype.kind.value, dtype.scale


def value_hash(value: object, key_type: object = None) -> int:
    """The hash v(x) of one key value; `key_type` (a contract type name or DataType) says how to
    read it, else the Python type decides (see the module docstring)."""
    if value is None:
        return NULL
    if key_type is not None:
        kind, scale = _kind_and_scale(key_type)
        if kind == "float64":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"cannot read {value!r} as float64")
            return hash_float(float(value))
        if kind == "string":
            if not isinstance(value, (str, bytes)):
                raise TypeError(f"cannot read {value!r} as string")
            return hash_bytes(value.encode() if isinstance(value, str) else value)
        if kind == "date":
            return hash_int(_days(value))
        if kind == "decimal":
            return hash_int(_unscaled(value, scale))
        if kind == "boolean" and not isinstance(value, bool):
            raise TypeError(f"cannot read {value!r} as boolean")
        if kind in ("int32", "int64") and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"cannot read {value!r} as {kind}")
        return hash_int(int(value))  # type: ignore[call-overload]
    if isinstance(value, bool | int):
        return hash_int(int(value))
    if isinstance(value, float):
        return hash_float(value)
    if isinstance(value, str | bytes):
        return hash_bytes(value.encode() if isinstance(value, str) else value)
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return hash_int(_days(value))
    if isinstance(value, _decimal.Decimal):
        raise TypeError("a Decimal key needs its type (decimal(p,s)): it hashes by its unscaled value")
    raise TypeError(f"cannot hash {type(value).__name__}")


def combine(h: int, v: int) -> int:
    """One step of the row hash: fold value hash `v` into `h`."""
    return fmix64(h ^ ((v + SEED + (h << 6) + (h >> 2)) & MASK))


def row_hash(values: Iterable[object], types: Sequence[object] | None = None) -> int:
    """The hash of a row's key values, in key order."""
    values = list(values)
    if types is not None and len(types) != len(values):
        raise ValueError(f"{len(values)} key values but {len(types)} types")
    h = SEED
    for i, v in enumerate(values):
        h = combine(h, value_hash(v, None if types is None else types[i]))
    return h


def partition(values: Iterable[object], partitions: int, types: Sequence[object] | None = None) -> int:
    """Which of a shuffle's `partitions` outputs a row with these key values goes to."""
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ValueError(f"partitions must be an integer >= 1, got {partitions!r}")
    return row_hash(values, types) % partitions
