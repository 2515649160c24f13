"""The value types of the wire contract (contract §1, "Types").

Types are immutable values so they can be compared, hashed and used as keys of generated-code
caches. `parse_type` is the only way text becomes a type.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    BOOLEAN = "boolean"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT64 = "float64"
    DECIMAL = "decimal"
    STRING = "string"
    DATE = "date"


MAX_DECIMAL_PRECISION = 38
# Decimals of at most 18 digits are the contract's v1 decimals: an 8-byte unscaled int64 in NTF.
# Wider ones (19..38 digits, an addition) take 16 bytes: a little-endian two's-complement 128-bit
# unscaled value. v1 requests never name p > 18, so every v1 layout stays byte-identical.
MAX_NARROW_PRECISION = 18
WIDE_DECIMAL_NTF_SIZE = 16

# Bytes a field of each kind takes in the fixed part of an NTF tuple (contract §2).
_NTF_SIZE = {
    Kind.BOOLEAN: 1,
    Kind.INT32: 4,
    Kind.DATE: 4,
    Kind.INT64: 8,
    Kind.FLOAT64: 8,
    Kind.DECIMAL: 8,
    Kind.STRING: 8,
}


@dataclass(frozen=True, slots=True)
class DataType:
    kind: Kind
    precision: int = 0  # decimals only
    scale: int = 0  # decimals only

    def __post_init__(self) -> None:
        if self.kind is Kind.DECIMAL:
            if not 1 <= self.precision <= MAX_DECIMAL_PRECISION:
                raise ValueError(f"decimal precision must be 1..{MAX_DECIMAL_PRECISION}, got {self.precision}")
            if not 0 <= self.scale <= self.precision:
                raise ValueError(f"decimal scale must be 0..precision, got {self.scale}")
        elif self.precision or self.scale:
            raise ValueError(f"{self.kind.value} takes no precision or scale")

    def __str__(self) -> str:
        if self.kind is Kind.DECIMAL:
            return f"decimal({self.precision},{self.scale})"
        return self.kind.value

    @property
    def ntf_size(self) -> int:
        return WIDE_DECIMAL_NTF_SIZE if self.is_wide_decimal else _NTF_SIZE[self.kind]

    @property
    def is_wide_decimal(self) -> bool:
        """A decimal of more than 18 digits: 128-bit unscaled value, 16 bytes in NTF."""
        return self.kind is Kind.DECIMAL and self.precision > MAX_NARROW_PRECISION

    @property
    def is_integer(self) -> bool:
        return self.kind in (Kind.INT32, Kind.INT64)

    @property
    def is_numeric(self) -> bool:
        return self.kind in (Kind.INT32, Kind.INT64, Kind.FLOAT64, Kind.DECIMAL)

    @property
    def is_variable(self) -> bool:
        return self.kind is Kind.STRING


BOOLEAN = DataType(Kind.BOOLEAN)
INT32 = DataType(Kind.INT32)
INT64 = DataType(Kind.INT64)
FLOAT64 = DataType(Kind.FLOAT64)
STRING = DataType(Kind.STRING)
DATE = DataType(Kind.DATE)


def decimal(precision: int, scale: int) -> DataType:
    return DataType(Kind.DECIMAL, precision, scale)


_DECIMAL_RE = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$", re.IGNORECASE)
_SIMPLE = {k.value: DataType(k) for k in Kind if k is not Kind.DECIMAL}


def parse_type(text: str) -> DataType:
    """Parse a contract type name (`int64`, `decimal(12,2)`, ...); raises ValueError with a hint."""
    if not isinstance(text, str):
        raise ValueError(f"a type must be a string, got {type(text).__name__}")
    t = text.strip()
    simple = _SIMPLE.get(t.lower())
    if simple is not None:
        return simple
    m = _DECIMAL_RE.match(t)
    if m:
        return decimal(int(m.group(1)), int(m.group(2)))
    names = ", ".join(sorted(_SIMPLE)) + ", decimal(p,s)"
    raise ValueError(f"unknown type {text!r}; expected one of {names}")


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: DataType


@dataclass(frozen=True, slots=True)
class Schema:
    """An ordered list of uniquely named fields."""

    fields: tuple[Field, ...]
    # Hashed once: schemas and the layouts made from them key the mapper's caches of plugin
    # answers, which otherwise hash them field by field on every question of every job.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for f in self.fields:
            if f.name in seen:
                raise ValueError(f"duplicate column name {f.name!r}")
            seen.add(f.name)
        object.__setattr__(self, "_hash", hash(self.fields))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):  # rebuilt through __init__: a str's hash differs between processes
        return (type(self), (self.fields,))

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def index(self, name: str) -> int:
        for i, f in enumerate(self.fields):
            if f.name == name:
                return i
        raise KeyError(name)

    def get(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def __len__(self) -> int:
        return len(self.fields)

    def __iter__(self):
        return iter(self.fields)
