"""NTF writers for tests and fake senders (contract §2 and §3).

`encode_tuple` / `encode_stream` follow the contract rule by rule with `struct`, one Python step per
value: they are the reference the decoder is tested against. `encode_table` writes the same bytes
from a pyarrow table with numpy, fast enough to produce million-row streams for benchmarks and
end-to-end fakes. Neither is used on the client's receive path.
"""
from __future__ import annotations

import datetime as dt
import decimal
import struct
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..contract.ntf import NtfLayout
from ..contract.tcp import end_marker, frame
from ..contract.tcp import stream_header as header
from ..contract.types import Kind
from .ntf import arrow_type, as_layout

__all__ = ["encode_stream", "encode_table", "encode_tuple", "end_marker", "frame", "header"]

EPOCH = dt.date(1970, 1, 1)


def _unscaled(value, scale: int) -> int:
    if isinstance(value, int):
        return value * 10**scale
    q = decimal.Decimal(value).scaleb(scale, decimal.Context(prec=80))  # 38 digits exceed the default 28
    if q != q.to_integral_value():
        raise ValueError(f"{value} has more than {scale} decimal places")
    return int(q)


def encode_tuple(values: Sequence, layout: NtfLayout | dict) -> bytes:
    """One tuple: null vector, fixed fields at their offsets, then string bytes in field order.
    `values` follow the layout's field order; None is NULL. Decimals take Decimal/str/int values,
    dates take datetime.date or days since the epoch."""
    layout = as_layout(layout)
    fixed = bytearray(layout.fixed_size)
    var = bytearray()
    for f, v in zip(layout.fields, values, strict=True):
        if v is None:
            fixed[f.null_bit // 8] |= 1 << (f.null_bit % 8)
            continue
        k, o = f.type.kind, f.offset
        if k is Kind.BOOLEAN:
            fixed[o] = 1 if v else 0
        elif k is Kind.INT32:
            struct.pack_into("<i", fixed, o, v)
        elif k is Kind.DATE:
            struct.pack_into("<i", fixed, o, (v - EPOCH).days if isinstance(v, dt.date) else v)
        elif k is Kind.INT64:
            struct.pack_into("<q", fixed, o, v)
        elif k is Kind.FLOAT64:
            struct.pack_into("<d", fixed, o, v)
        elif k is Kind.DECIMAL and f.type.is_wide_decimal:  # 16 bytes, little-endian two's complement
            fixed[o:o + 16] = _unscaled(v, f.type.scale).to_bytes(16, "little", signed=True)
        elif k is Kind.DECIMAL:
            struct.pack_into("<q", fixed, o, _unscaled(v, f.type.scale))
        elif k is Kind.STRING:
            b = v.encode("utf-8")
            struct.pack_into("<II", fixed, o, layout.fixed_size + len(var), len(b))
            var += b
        else:  # pragma: no cover
            raise ValueError(f"cannot encode {f.type}")
    return bytes(fixed + var)


def encode_stream(rows: Iterable[Sequence], layout: NtfLayout | dict, stream_id: int = 0) -> bytes:
    """A whole stream: header, one frame per row, end marker with the count."""
    layout = as_layout(layout)
    parts = [header(stream_id)]
    n = 0
    for r in rows:
        parts.append(frame(encode_tuple(r, layout)))
        n += 1
    parts.append(end_marker(n))
    return b"".join(parts)


# --------------------------------------------------------------------------- vectorized writer
def _fixed_values(col: pa.Array, kind: Kind, scale: int, wide: bool = False) -> np.ndarray:
    """The little-endian bytes-to-be of a fixed column as a numpy array (zeros where NULL)."""
    if kind is Kind.BOOLEAN:
        return pc.fill_null(col, False).to_numpy(zero_copy_only=False).astype(np.uint8)
    if kind in (Kind.INT32, Kind.DATE):
        return pc.fill_null(col.cast(pa.int32()), 0).to_numpy(zero_copy_only=False).astype("<i4")
    if kind is Kind.INT64:
        return pc.fill_null(col.cast(pa.int64()), 0).to_numpy(zero_copy_only=False).astype("<i8")
    if kind is Kind.FLOAT64:
        return pc.fill_null(col.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False).astype("<f8")
    if kind is Kind.DECIMAL:
        if pa.types.is_decimal(col.type):
            col = col.cast(pa.decimal128(38, scale))
            words = np.frombuffer(col.buffers()[1], dtype="<i8")[col.offset * 2:(col.offset + len(col)) * 2]
            vals = words.reshape(-1, 2).copy() if wide else words[0::2].copy()
        elif wide:
            vals = col.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).astype("<i8")
            vals = np.stack([vals, vals >> 63], axis=1)
        else:  # integers are taken as unscaled values
            vals = col.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).astype("<i8")
        if col.null_count:
            vals[~col.is_valid().to_numpy(zero_copy_only=False)] = 0
        return vals
    raise ValueError(f"not a fixed kind: {kind}")


def encode_table(table: pa.Table, layout: NtfLayout | dict, stream_id: int = 0) -> bytes:
    """Vectorized `encode_stream` of a table whose columns are the layout's fields, by name."""
    layout = as_layout(layout)
    table = table.combine_chunks()
    n, fs = table.num_rows, layout.fixed_size
    fixed = np.zeros((n, fs), dtype=np.uint8)
    var_len = np.zeros(n, dtype=np.int64)
    strings = []  # (field, offset in the variable section, lengths, validity, source offsets, chars)
    for f in layout.fields:
        chunked = table.column(f.name)
        col = chunked.chunk(0) if chunked.num_chunks else pa.array([], arrow_type(f.type))
        valid = col.is_valid().to_numpy(zero_copy_only=False)
        nullbyte = fixed[:, f.null_bit // 8]
        nullbyte |= np.where(valid, 0, 1 << (f.null_bit % 8)).astype(np.uint8)
        if f.type.kind is Kind.STRING:
            col = col.cast(pa.large_string())
            offs = np.frombuffer(col.buffers()[1], dtype="<i8")[col.offset:col.offset + n + 1]
            lens = np.where(valid, np.diff(offs), 0)
            data = np.frombuffer(col.buffers()[2], dtype=np.uint8) if col.buffers()[2] else np.zeros(0, np.uint8)
            strings.append((f, var_len.copy(), lens, valid, offs[:-1], data))
            var_len += lens
        else:
            vals = _fixed_values(col, f.type.kind, f.type.scale, f.type.is_wide_decimal)
            fixed[:, f.offset:f.offset + f.size] = vals.view(np.uint8).reshape(n, f.size)
    tlen = fs + var_len
    frame_start = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(4 + tlen[:-1], out=frame_start[1:])
    frame_start += len(header(0))
    total = int(frame_start[-1] + 4 + tlen[-1]) if n else len(header(0))
    out = np.zeros(total + 12, dtype=np.uint8)
    out[:8] = np.frombuffer(header(stream_id), dtype=np.uint8)
    out[total:] = np.frombuffer(end_marker(n), dtype=np.uint8)
    tstart = frame_start + 4
    for f, var_off, lens, valid, src, data in strings:
        rel = np.where(valid, fs + var_off, 0).astype("<u4")
        fixed[:, f.offset:f.offset + 4] = rel.view(np.uint8).reshape(n, 4)
        fixed[:, f.offset + 4:f.offset + 8] = lens.astype("<u4").view(np.uint8).reshape(n, 4)
        dest = tstart + fs + var_off
        idx_len = int(lens.sum())
        if idx_len:
            first = np.cumsum(lens) - lens
            within = np.arange(idx_len, dtype=np.int64) - np.repeat(first, lens)
            out[np.repeat(dest, lens) + within] = data[np.repeat(src, lens) + within]
    lenbytes = tlen.astype("<u4").view(np.uint8).reshape(n, 4)
    for j in range(4):  # one scatter per byte column keeps the index arrays at n entries
        out[frame_start + j] = lenbytes[:, j]
    for j in range(fs):
        out[tstart + j] = fixed[:, j]
    return out.tobytes()

