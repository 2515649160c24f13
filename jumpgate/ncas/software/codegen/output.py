"""Writing one output tuple in an NTF layout (contract §2) from evaluated values.

Shared by every software NCA template that emits tuples (scan, join probe, aggregation,
shuffle). The layout (jumpgate.contract.ntf) decides offsets; this module only follows it.
"""
from __future__ import annotations

from collections.abc import Sequence

from ....contract.ntf import NtfLayout
from ....contract.types import Kind
from .csyntax import CodegenError, CValue, FunctionBody, same_representation

_SIZES = {Kind.BOOLEAN: 1, Kind.INT32: 4, Kind.DATE: 4, Kind.INT64: 8, Kind.DECIMAL: 8, Kind.FLOAT64: 8,
          Kind.STRING: 8}
MAX_TUPLE = 2**31 - 1  # contract §3: 1 <= L < 2^31


def _store(kind: Kind, value: str, offset: int, wide: bool = False) -> str:
    if wide:  # a wide decimal: 16 bytes, little-endian two's complement (x86-64's own order)
        return f"{{ const __int128 w = {value}; __builtin_memcpy(o + {offset}, &w, 16); }}"
    if kind is Kind.BOOLEAN:
        return f"o[{offset}] = (uint8_t)({value} != 0);"
    if kind in (Kind.INT32, Kind.DATE):
        return f"{{ const int32_t w = (int32_t){value}; __builtin_memcpy(o + {offset}, &w, 4); }}"
    if kind in (Kind.INT64, Kind.DECIMAL):
        return f"{{ const int64_t w = {value}; __builtin_memcpy(o + {offset}, &w, 8); }}"
    if kind is Kind.FLOAT64:
        return f"{{ const double w = {value}; __builtin_memcpy(o + {offset}, &w, 8); }}"
    if kind is Kind.STRING:
        return (f"{{ const jg_str w = {value}; const uint32_t h[2] = {{pos, w.n}}; "
                f"__builtin_memcpy(o + {offset}, h, 8); __builtin_memcpy(o + pos, w.p, w.n); pos += w.n; }}")
    raise CodegenError(f"no NTF encoding for {kind.value}")


def check_layout(layout: NtfLayout, count: int) -> None:
    if len(layout.fields) != count:
        raise CodegenError(f"NTF layout has {len(layout.fields)} fields for {count} output values")
    for f in layout.fields:
        if f.size != (f.type.ntf_size if f.type.kind is Kind.DECIMAL else _SIZES[f.type.kind]) or f.offset % 8 or f.offset + f.size > layout.fixed_size:
            raise CodegenError(f"NTF field at offset {f.offset} is not a contract layout field")
        if not 0 <= f.null_bit < layout.null_bytes * 8 or f.offset < layout.null_bytes:
            raise CodegenError(f"NTF field at offset {f.offset} has a bad null bit or overlaps the null vector")


def emit_tuple(body: FunctionBody, values: Sequence[CValue], layout: NtfLayout, ports: int = 1,
               fail=None, port: str = "0") -> None:
    """Reserve one tuple on output port 0 (and copy it to ports 1.. when `ports` > 1), then write
    the null vector, every fixed field and the variable section (strings in field order).

    `values[i]` must already have field i's representation; `fail(message, cond)` reports a data
    error (defaults to `body.fail`). `port` is a C expression of the port to write instead of 0
    (a shuffle's computed port; then `ports` must be 1)."""
    if port != "0" and ports != 1:
        raise CodegenError("emit_tuple writes one computed port or copies to every port, not both")
    check_layout(layout, len(values))
    fail = fail or body.fail
    fixed = layout.fixed_size
    var_terms = []
    for f, v in zip(layout.fields, values):
        if not same_representation(v.type, f.type):
            raise CodegenError(f"value of type {v.type} for NTF field of type {f.type}")
        if f.type.kind is Kind.STRING and not v.always_null:
            var_terms.append(f"{v.value}.n" if v.never_null else f"({v.null} ? 0 : {v.value}.n)")
    body.comment(f"output tuple: {len(values)} fields, fixed part {fixed} bytes")
    if var_terms:
        body.line(f"const uint64_t len = {fixed}u + " + " + ".join(f"(uint64_t){t}" for t in var_terms) + ";")
        fail("output tuple longer than 2^31 - 1 bytes", f"len > {MAX_TUPLE}u")
        body.line(f"uint8_t *const o = jg_emit(jg_output(ctx, {port}), (uint32_t)len);")
        body.line(f"uint32_t pos = {fixed}u;")
    else:
        body.line(f"const uint32_t len = {fixed}u;")
        body.line(f"uint8_t *const o = jg_emit(jg_output(ctx, {port}), len);")
    for i, (f, v) in enumerate(zip(layout.fields, values)):
        bit = f"o[{f.null_bit // 8}] |= {1 << (f.null_bit % 8)}u;"
        store = _store(f.type.kind, v.value, f.offset, f.type.is_wide_decimal)
        body.comment(f"field {i}: {f.type} at offset {f.offset}, null bit {f.null_bit}")
        if v.always_null:
            body.line(bit)
        elif v.never_null:
            body.line(store)
        else:
            body.line(f"if ({v.null}) {bit} else {store}")
    if ports > 1:
        body.line(f"for (int p = 1; p < {ports}; p++) "
                  "__builtin_memcpy(jg_emit(jg_output(ctx, p), (uint32_t)len), o, (uint32_t)len);")
