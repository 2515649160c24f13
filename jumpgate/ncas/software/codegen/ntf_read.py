"""How generated code reads NTF tuples (contract §2) without the runtime's generic decoder: for one
input schema, which fields a batch function reads into its `jg_val` row, at which offsets, null
bits and widths. The join's batch functions and the aggregation NCA's `query_tuples` share it and
the template macro that uses it (ncas/templates/_ntf_decode.c.j2): typed loads at constant
offsets, only the columns some generated function reads, no per-field type dispatch."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ....contract.ntf import generate_ntf
from ....contract.types import Kind, Schema


@dataclass(frozen=True)
class FieldRead:
    """One field of a tuple as the generated code reads it into `row[index]`."""

    index: int
    type: str        # the SQL type, for the comment beside the code
    offset: int      # of the field (a string's offset-length pair) in the fixed part
    null_bit: int    # its null flag: bit null_shift of byte null_byte
    null_byte: int
    null_shift: int
    access: str      # "str", "bool", "i32", "i64" (int64, decimal, float64: 8 bytes), "i128"
    decode: bool     # read into the row; False: a string only bounds-checked


def read_plan(schema: Schema, decode: Sequence[int | bool],
              check: Sequence[int | bool] | None = None) -> tuple[list[FieldRead], int]:
    """The fields of `schema`'s NTF to read (`decode[i]`) or, strings only, to bounds-check
    (`check[i]`), and the layout's fixed size, which a tuple must at least have."""
    layout = generate_ntf(schema)
    fields = []
    for i, f in enumerate(layout.fields):
        string = f.type.kind is Kind.STRING
        if not decode[i] and not (string and check and check[i]):
            continue
        fields.append(FieldRead(index=i, type=str(f.type), offset=f.offset, null_bit=f.null_bit,
                                null_byte=f.null_bit >> 3, null_shift=f.null_bit & 7,
                                access=_access(string, f.size), decode=bool(decode[i])))
    return fields, layout.fixed_size


def _access(string: bool, size: int) -> str:
    if string:
        return "str"
    return {1: "bool", 4: "i32", 8: "i64", 16: "i128"}[size]
