"""What the switch can run, and a partial aggregation translated into what its pipeline needs.

The switch (p4/, docs/switch.md) reads one tuple per UDP datagram: the null vector and up to
eight 8-byte fields. Per job it is told which field is the group key, which fields are the (at
most two) summed values and whose NULL flag a count looks at, and in which order the record it
emits holds count and sums. Everything here is checked from the typed plan and the NTF layouts,
so that the operator interface can say precisely why an aggregation does not fit.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...contract.ntf import NtfLayout, generate_ntf
from ...contract.types import Kind
from ...dataflow.expr import Column
from ...dataflow.plan import AggFn, AggMode, Aggregate, LogicalPlan
from . import defs

KEY_KINDS = (Kind.BOOLEAN, Kind.INT32, Kind.INT64, Kind.DATE, Kind.DECIMAL)  # at most 64 bits, exact
SUM_KINDS = (Kind.INT32, Kind.INT64, Kind.DECIMAL)  # sums as 64-bit integers (decimals unscaled)
FUNCTIONS = (AggFn.SUM, AggFn.COUNT, AggFn.COUNT_STAR)  # what its registers compute
# Reasons the operator interface gives, also shown by the support matrix (plugin.py `support`).
PARTIAL_ONLY = "partial aggregation only (the switch's table may emit a group more than once)"
COLUMNS_ONLY = "groups by and sums input columns only, not computed expressions (project them first)"
FIXED_SIZE_ONLY = "reads fixed-size tuples only (no strings): project the strings away before the aggregation"
SUM_AND_COUNT_ONLY = "sum and count only"


@dataclass(frozen=True, slots=True)
class SumSpec:
    word: int  # input field index after the null vector
    int32: bool  # the field is 4 bytes: sign-extend it
    null_bit: int  # its bit in the input null vector


@dataclass(frozen=True, slots=True)
class SwitchQuery:
    """One partial aggregation, as the switch runs it."""

    key_word: int
    key_null_bit: int
    sums: tuple[SumSpec, ...]
    count_null_bit: int | None  # count(x): x's null bit; count_star or no count: None
    out_words: tuple[str, ...]  # per output word after the key: "count", "s0" or "s1"
    in_len: int  # every input tuple's length (fixed layouts only)
    layout: NtfLayout  # what it emits: the contract layout of the partial-state schema

    def out_null(self, what: str) -> int:
        """The output null-vector bit mask (byte 0) of output word `what`, 0 if it is not emitted."""
        return 1 << (1 + self.out_words.index(what)) if what in self.out_words else 0


def wire_null_mask(bit: int | None) -> int:
    """The mask that selects null-vector bit `bit` in the 64-bit field as the P4 parser extracts it
    (bytes in wire order, first byte most significant); 0 for None."""
    if bit is None:
        return 0
    return 1 << (56 - 8 * (bit // 8) + bit % 8)


def operation_reason(plan: LogicalPlan, op: Aggregate) -> str | None:
    """Why the switch cannot run `op` (from the plan alone), or None."""
    if op.mode is not AggMode.PARTIAL:
        return f"{PARTIAL_ONLY}, not {op.mode.value}"
    if len(op.group_by) != 1:
        return f"groups by exactly one key of at most 64 bits, not {len(op.group_by)} keys"
    key = op.group_by[0].expr
    if not isinstance(key, Column):
        return "groups by an input column only, not by a computed expression"
    if key.type.kind not in KEY_KINDS or key.type.is_wide_decimal:
        return f"group keys are integers, dates, booleans or decimals (64 bits, exact), not {key.type}"
    sums = counts = 0
    for a in op.aggregates:
        if a.fn is AggFn.SUM:
            sums += 1
            if not isinstance(a.expr, Column):
                return f"sums input columns only, not an expression ('{a.name}')"
            if a.expr.type.kind not in SUM_KINDS or a.expr.type.is_wide_decimal:
                return f"sums 64-bit integers and decimals only, not {a.expr.type} ('{a.name}')"
        elif a.fn in (AggFn.COUNT, AggFn.COUNT_STAR):
            counts += 1
            if a.fn is AggFn.COUNT and not isinstance(a.expr, Column):
                return f"counts input columns only, not an expression ('{a.name}')"
        elif a.fn not in FUNCTIONS:
            return f"{SUM_AND_COUNT_ONLY}, not {a.fn.value} ('{a.name}')"
    if sums > defs.MAX_SUMS or counts > 1:
        return f"at most {defs.MAX_SUMS} sums and one count, not {sums} sums and {counts} counts"
    return None


def input_reason(layout: NtfLayout, schema) -> str | None:
    """Why the switch's parser cannot read tuples of `layout`, or None."""
    if layout.variable:
        return FIXED_SIZE_ONLY
    if layout.fixed_size > defs.MAX_TUPLE_BYTES or len(layout.fields) > defs.MAX_IN_FIELDS:
        return (f"parses at most {defs.MAX_IN_FIELDS} fields ({defs.MAX_TUPLE_BYTES}-byte tuples), not "
                f"{len(layout.fields)} fields of {layout.fixed_size} bytes: project the columns it needs first")
    if layout != generate_ntf(schema):
        return "reads the contract §2 layout of its input schema only"
    return None


def compile_query(plan: LogicalPlan, op: Aggregate, in_layout: NtfLayout) -> SwitchQuery:
    """The switch's view of `op` over tuples of `in_layout` (both already checked)."""
    def word(col: Column) -> tuple[int, int]:
        f = in_layout.fields[col.index]
        return (f.offset - in_layout.null_bytes) // 8, f.null_bit

    key_word, key_bit = word(op.group_by[0].expr)  # type: ignore[arg-type]
    sums: list[SumSpec] = []
    count_bit: int | None = None
    out: list[str] = []
    for a in op.aggregates:
        if a.fn is AggFn.SUM:
            w, bit = word(a.expr)  # type: ignore[arg-type]
            sums.append(SumSpec(w, a.expr.type.kind is Kind.INT32, bit))  # type: ignore[union-attr]
            out.append(f"s{len(sums) - 1}")
        else:
            count_bit = word(a.expr)[1] if a.fn is AggFn.COUNT else None  # type: ignore[arg-type]
            out.append("count")
    return SwitchQuery(key_word, key_bit, tuple(sums), count_bit, tuple(out), in_layout.fixed_size,
                       generate_ntf(plan.schemas[op.name]))
