"""jg_hash v1 in Python: the reference implementation of the key hash that the shuffle, join and
aggregation NCAs compute in C (ncas/runtime/jg_hash.h; specified in docs/hashing.md). Other
systems use it to know which shuffle output a row goes to."""
from __future__ import annotations

import math
import struct
from collections.abc import Iterable

MASK = (1 << 64) - 1
SEED = 0x9E3779B97F4A7C15
NULL = 0x5BD1E9955BD1E995


def fmix64(k: int) -> int:
    k &= MASK
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & MASK
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & MASK
    k ^= k >> 33
    return k


def value_hash(value: object) -> int:
    """The hash of one key value: None, bool, int (int32, int64, date days, decimal unscaled),
    float, or str."""
    if value is None:
        return NULL
    if isinstance(value, bool | int):
        return fmix64(int(value) & MASK)
    if isinstance(value, float):
        if math.isnan(value):
            bits = 0x7FF8000000000000
        else:
            bits = struct.unpack("<Q", struct.pack("<d", 0.0 if value == 0.0 else value))[0]
        return fmix64(bits)
    if isinstance(value, str | bytes):
        data = value.encode() if isinstance(value, str) else value
        h = 0xCBF29CE484222325
        for b in data:
            h = ((h ^ b) * 0x100000001B3) & MASK
        return fmix64(h)
    raise TypeError(f"cannot hash {type(value).__name__}")


def row_hash(values: Iterable[object]) -> int:
    h = SEED
    for v in values:
        h = fmix64(h ^ ((value_hash(v) + SEED + (h << 6) + (h >> 2)) & MASK))
    return h


def partition(values: Iterable[object], partitions: int) -> int:
    return row_hash(values) % partitions
