"""Network tuple format layouts (contract §2; thesis Appendix A.1.6).

A layout is computed in one pass over an output schema: a null vector of ceil(n/64)*8 bytes, then
each field at the next multiple of 8, strings as (u32 offset, u32 length) into the variable section
that follows the fixed part. NCAs whose hardware fixes its own format (the switch aggregator) build
an `NtfLayout` by hand instead; everything downstream reads only the layout.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

from .types import DataType, Field, Schema, parse_type

NTF_VERSION = 1


@dataclass(frozen=True, slots=True)
class NtfField:
    name: str
    type: DataType
    offset: int
    size: int
    null_bit: int

    def to_json(self) -> dict:
        return {"name": self.name, "type": str(self.type), "offset": self.offset,
                "size": self.size, "null_bit": self.null_bit}


@dataclass(frozen=True, slots=True)
class NtfLayout:
    null_bytes: int
    fixed_size: int
    variable: bool
    fields: tuple[NtfField, ...]
    version: int = NTF_VERSION
    _hash: int = dataclasses.field(init=False, repr=False, compare=False)  # hashed once, as Schema is

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.null_bytes, self.fixed_size, self.variable, self.fields,
                                                self.version)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):  # rebuilt through __init__: a str's hash differs between processes
        return (type(self), (self.null_bytes, self.fixed_size, self.variable, self.fields, self.version))

    def to_json(self) -> dict:
        return {"version": self.version, "null_bytes": self.null_bytes, "fixed_size": self.fixed_size,
                "variable": self.variable, "fields": [f.to_json() for f in self.fields]}

    @classmethod
    def from_json(cls, obj: dict) -> NtfLayout:
        fields = tuple(NtfField(f["name"], parse_type(f["type"]), int(f["offset"]), int(f["size"]),
                                int(f["null_bit"])) for f in obj["fields"])
        return cls(int(obj["null_bytes"]), int(obj["fixed_size"]), bool(obj["variable"]), fields,
                   int(obj.get("version", NTF_VERSION)))

    @property
    def schema(self) -> Schema:
        return Schema(tuple(Field(f.name, f.type) for f in self.fields))

    def field(self, name: str) -> NtfField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


def _align8(n: int) -> int:
    return (n + 7) // 8 * 8


@lru_cache(maxsize=4096)
def generate_ntf(schema: Schema) -> NtfLayout:
    """The contract's layout for `schema`, fields in schema order. Remembered (layouts are
    immutable): the mapper asks for the layout of the same schema many times per job."""
    n = len(schema)
    null_bytes = (n + 63) // 64 * 8  # a zero-column schema is rejected at validation
    offset = null_bytes
    fields = []
    for i, f in enumerate(schema.fields):
        offset = _align8(offset)
        size = f.type.ntf_size
        fields.append(NtfField(f.name, f.type, offset, size, i))
        offset += size
    return NtfLayout(null_bytes=null_bytes, fixed_size=_align8(offset),
                     variable=any(f.type.is_variable for f in schema.fields), fields=tuple(fields))
