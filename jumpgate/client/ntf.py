"""NTF streams → Arrow, vectorized (contract §2 and §3).

Decoding happens in two steps, neither with Python work per tuple:

1. **Framing.** `scan_stream` finds where each tuple starts. Fixed-size layouts take a pure-numpy
   stride path (every frame is `4 + fixed_size` bytes); variable layouts walk the chain of u32
   length prefixes in the native helper `_ntfscan` (a pure-Python walk is the fallback when the
   extension was not built). Either way the framing is fully checked: header, lengths, end
   marker, count, nothing after the marker.
2. **Columns.** `decode_tuples` gathers every tuple's fixed part into one `(n, fixed_size)` byte
   matrix with a single numpy fancy index over a sliding-window view, reads each field as a
   little-endian column, turns null bits into Arrow validity bitmaps and builds Arrow arrays
   straight from buffers. String bytes are gathered back to back (natively when available, else
   with numpy `repeat`/`arange` indices) under offsets computed by `cumsum`.

`decode_tuples` works on any buffer and start offsets, so several streams can be decoded from one
concatenation; `decode_streams` decodes streams one by one and concatenates the tables without
copying.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import sliding_window_view

from ..contract.errors import StreamError
from ..contract.ntf import NtfField, NtfLayout
from ..contract.tcp import END_MARKER_SIZE, HEADER_SIZE, MAX_TUPLE, parse_stream_header
from ..contract.types import DataType, Kind

try:  # built by setup.py at install; see _ntfscan.c
    from . import _ntfscan
except ImportError:  # pragma: no cover - depends on the build environment
    _ntfscan = None

HAVE_NATIVE = _ntfscan is not None

_INT32_OFFSETS_MAX = 2**31 - 1

_EXPECTED_SIZE = {Kind.BOOLEAN: 1, Kind.INT32: 4, Kind.DATE: 4, Kind.INT64: 8, Kind.FLOAT64: 8,
                  Kind.DECIMAL: 8, Kind.STRING: 8}
_NUMPY = {Kind.INT32: np.dtype("<i4"), Kind.DATE: np.dtype("<i4"), Kind.INT64: np.dtype("<i8"),
          Kind.FLOAT64: np.dtype("<f8"), Kind.DECIMAL: np.dtype("<i8")}


def arrow_type(t: DataType, large_string: bool = False) -> pa.DataType:
    """The Arrow type a contract type decodes to."""
    k = t.kind
    if k is Kind.BOOLEAN:
        return pa.bool_()
    if k is Kind.INT32:
        return pa.int32()
    if k is Kind.INT64:
        return pa.int64()
    if k is Kind.FLOAT64:
        return pa.float64()
    if k is Kind.DECIMAL:
        return pa.decimal128(t.precision, t.scale)
    if k is Kind.DATE:
        return pa.date32()
    if k is Kind.STRING:
        return pa.large_string() if large_string else pa.string()
    raise StreamError(f"no Arrow type for {t}")


def arrow_schema(layout: NtfLayout | dict) -> pa.Schema:
    layout = as_layout(layout)
    return pa.schema([pa.field(f.name, arrow_type(f.type)) for f in layout.fields])


def as_layout(layout: NtfLayout | dict) -> NtfLayout:
    """Accept a layout object or its contract JSON; check that this decoder can read it."""
    if isinstance(layout, dict):
        try:
            layout = NtfLayout.from_json(layout)
        except (KeyError, TypeError, ValueError) as e:
            raise StreamError(f"malformed NTF layout: {e}") from e
    check_layout(layout)
    return layout


def check_layout(layout: NtfLayout) -> None:
    """Reject layouts whose fields fall outside the fixed part or have sizes we cannot read.

    Hand-written layouts (contract §2, the switch aggregator) may place fields anywhere; only
    what would make decoding read the wrong bytes is an error here."""
    if layout.version != 1:
        raise StreamError(f"NTF layout version {layout.version} is not supported (this client reads 1)")
    fs, nb = layout.fixed_size, layout.null_bytes
    if fs < 1 or nb < 0 or nb > fs:
        raise StreamError(f"NTF layout: bad sizes (fixed_size={fs}, null_bytes={nb})")
    names = set()
    for f in layout.fields:
        if f.name in names:
            raise StreamError(f"NTF layout: duplicate field {f.name!r}")
        names.add(f.name)
        want = f.type.ntf_size if f.type.kind is Kind.DECIMAL else _EXPECTED_SIZE.get(f.type.kind)
        if f.size != want:
            raise StreamError(f"NTF layout: field {f.name!r} of type {f.type} has size {f.size}, expected {want}")
        if f.offset < nb or f.offset + f.size > fs:
            raise StreamError(f"NTF layout: field {f.name!r} at {f.offset}+{f.size} is outside "
                              f"the fixed part {nb}..{fs}")
        if not 0 <= f.null_bit < nb * 8:
            raise StreamError(f"NTF layout: field {f.name!r} null bit {f.null_bit} is outside the null vector")
    if layout.variable != any(f.type.kind is Kind.STRING for f in layout.fields):
        raise StreamError("NTF layout: 'variable' disagrees with the presence of string fields")


def as_bytes_array(buffer) -> np.ndarray:
    """A zero-copy uint8 view of any bytes-like object."""
    if isinstance(buffer, np.ndarray):
        if buffer.dtype != np.uint8 or buffer.ndim != 1:
            buffer = buffer.reshape(-1).view(np.uint8)
        return buffer
    return np.frombuffer(buffer, dtype=np.uint8)


# ---------------------------------------------------------------------------------------- framing
@dataclass(frozen=True)
class ScannedStream:
    """One received stream, framing checked: its bytes and where each tuple starts."""

    stream_id: int
    data: np.ndarray  # uint8, the whole stream including header and end marker
    starts: np.ndarray  # int64 offsets into `data` of each tuple's first byte

    @property
    def count(self) -> int:
        return len(self.starts)


def read_header(buf: np.ndarray) -> int:
    """Check the 8-byte stream header; return the stream id."""
    return parse_stream_header(buf[:HEADER_SIZE].tobytes())


def scan_stream(buffer, layout: NtfLayout | dict) -> ScannedStream:
    """Check the framing of one whole stream (contract §3) and find its tuples."""
    layout = as_layout(layout)
    buf = as_bytes_array(buffer)
    stream_id = read_header(buf)
    fs = layout.fixed_size
    if not layout.variable:
        starts = _scan_fixed(buf, fs)
        if starts is None:  # inconsistent: let the exact scan say precisely what is wrong
            starts = scan_frames(buf, HEADER_SIZE, fs, fs)
    else:
        starts = scan_frames(buf, HEADER_SIZE, fs, MAX_TUPLE)
    return ScannedStream(stream_id, buf, starts)


def _scan_fixed(buf: np.ndarray, fs: int) -> np.ndarray | None:
    """Stride path for fixed-size tuples: check all length prefixes and the end marker at once.
    Returns None when the stream is not a clean chain of `fs`-byte tuples."""
    body = len(buf) - HEADER_SIZE - END_MARKER_SIZE
    stride = 4 + fs
    if body < 0 or body % stride:
        return None
    n = body // stride
    lengths = np.ndarray((n,), dtype="<u4", buffer=buf, offset=HEADER_SIZE, strides=(stride,))
    end = HEADER_SIZE + n * stride
    marker = buf[end:end + END_MARKER_SIZE].tobytes()
    length0, count = struct.unpack("<IQ", marker)
    if length0 != 0 or count != n or (n and not np.all(lengths == fs)):
        return None
    return np.arange(n, dtype=np.int64) * stride + (HEADER_SIZE + 4)


def scan_frames(buf: np.ndarray, start: int, min_len: int, max_len: int) -> np.ndarray:
    """Walk the length-prefix chain from `start` to the end marker; int64 tuple start offsets."""
    if _ntfscan is not None:
        try:
            return np.frombuffer(_ntfscan.scan(buf, start, min_len, max_len), dtype=np.int64)
        except ValueError as e:
            raise StreamError(str(e)) from None
    return _scan_frames_py(buf, start, min_len, max_len)


def _scan_frames_py(buf: np.ndarray, start: int, min_len: int, max_len: int) -> np.ndarray:
    """Fallback for a missing native helper: same checks, same messages, one Python step per tuple."""
    data = memoryview(buf).cast("B")
    size, pos, out = len(data), start, []
    unpack = struct.Struct("<I").unpack_from
    while True:
        if size - pos < 4:
            raise StreamError(f"stream ended before its end marker: end of data at byte {size} "
                              f"after {len(out)} tuples")
        (n,) = unpack(data, pos)
        if n == 0:
            if size - pos < 12:
                raise StreamError(f"end marker at byte {pos} is cut short: its u64 tuple count is incomplete")
            (count,) = struct.unpack_from("<Q", data, pos + 4)
            if count != len(out):
                raise StreamError(f"end marker at byte {pos} counts {count} tuples but {len(out)} were received")
            if size - pos != 12:
                raise StreamError(f"{size - pos - 12} bytes follow the end marker at byte {pos} "
                                  "(a zero-length tuple, or data after the end of the stream)")
            return np.array(out, dtype=np.int64)
        if n < min_len or n > max_len:
            if n > MAX_TUPLE:
                raise StreamError(f"tuple {len(out)} at byte {pos}: length {n} is not below 2^31")
            if min_len == max_len:
                raise StreamError(f"tuple {len(out)} at byte {pos}: length {n}, but the layout's "
                                  f"tuples are {min_len} bytes")
            raise StreamError(f"tuple {len(out)} at byte {pos}: length {n} is outside {min_len}..{max_len} "
                              "(the layout's fixed size is the minimum)")
        if size - pos - 4 < n:
            raise StreamError(f"truncated tuple {len(out)}: length prefix at byte {pos} says {n} bytes, "
                              f"only {size - pos - 4} remain")
        out.append(pos + 4)
        pos += 4 + n


# ---------------------------------------------------------------------------------------- columns
def decode_stream(buffer, layout: NtfLayout | dict) -> pa.Table:
    """Decode one whole stream (header, tuples, end marker) into a table."""
    layout = as_layout(layout)
    s = scan_stream(buffer, layout)
    return decode_tuples(s.data, s.starts, layout)


def decode_streams(buffers: Sequence, layout: NtfLayout | dict) -> pa.Table:
    """Decode several whole streams of one destination; rows in the order of the buffers.

    Stream ids must be distinct. The result has one chunk per non-empty stream."""
    layout = as_layout(layout)
    scanned = [scan_stream(b, layout) for b in buffers]
    ids = [s.stream_id for s in scanned]
    if len(set(ids)) != len(ids):
        raise StreamError(f"duplicate stream ids {sorted(ids)}")
    return concat_tables([decode_tuples(s.data, s.starts, layout) for s in scanned], layout)


def concat_tables(tables: Sequence[pa.Table], layout: NtfLayout) -> pa.Table:
    """Concatenate per-stream tables, widening string columns to large_string where any is."""
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return empty_table(layout)
    if len(tables) == 1:
        return tables[0]
    schemas = {t.schema for t in tables}
    if len(schemas) > 1:
        wide = pa.schema([pa.field(f.name, pa.large_string()) if any(
            pa.types.is_large_string(t.schema.field(f.name).type) for t in tables) else f
            for f in tables[0].schema])
        tables = [t.cast(wide) for t in tables]
    return pa.concat_tables(tables)


def empty_table(layout: NtfLayout | dict) -> pa.Table:
    return arrow_schema(layout).empty_table()


def decode_tuples(data, starts, layout: NtfLayout | dict, lengths=None) -> pa.Table:
    """Decode the tuples of `layout` found at `starts` (int64 byte offsets) in `data`.

    `data` may be one stream or the concatenation of several, as long as `starts` points at the
    first byte of each tuple. `lengths` are the tuples' lengths; when omitted they are read from
    the u32 framing prefix just before each tuple (contract §3). Lengths bound string fields: a
    string must lie in its tuple's variable section."""
    layout = as_layout(layout)
    buf = as_bytes_array(data)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    n = len(starts)
    if n == 0:
        return empty_table(layout)
    fs = layout.fixed_size
    if starts.min() < 0 or starts.max() > len(buf) - fs:
        raise StreamError("tuple starts fall outside the data")
    fixed = sliding_window_view(buf, fs)[starts]  # (n, fs): one gather for every fixed part
    tuple_len = None
    if layout.variable:
        if lengths is None:
            if starts.min() < 4:
                raise StreamError("no framing prefix before the first tuple; pass lengths")
            lengths = sliding_window_view(buf, 4)[starts - 4].copy().view("<u4")[:, 0]
        tuple_len = np.ascontiguousarray(lengths, dtype=np.int64)
        if len(tuple_len) != n:
            raise StreamError("starts and lengths differ in length")
        if tuple_len.min() < fs or (starts + tuple_len).max() > len(buf):
            raise StreamError("tuple lengths are shorter than the fixed part or run past the data")
    columns = [_decode_field(f, fixed, buf, starts, tuple_len, fs) for f in layout.fields]
    return pa.Table.from_arrays(columns, schema=pa.schema(
        [pa.field(f.name, c.type) for f, c in zip(layout.fields, columns, strict=True)]))


def _column(fixed: np.ndarray, offset: int, dtype: np.dtype) -> np.ndarray:
    """Field values as a contiguous native array, aligned fast path or byte-copy fallback."""
    k = dtype.itemsize
    if offset % k == 0 and fixed.shape[1] % k == 0:
        col = fixed.view(dtype)[:, offset // k]
    else:
        col = fixed[:, offset:offset + k].copy().view(dtype)[:, 0]
    return np.ascontiguousarray(col, dtype=dtype.newbyteorder("="))


def _validity(fixed: np.ndarray, bit: int) -> tuple[np.ndarray, int]:
    """(valid mask, null count) of the field whose null bit is `bit`."""
    isnull = (fixed[:, bit >> 3] >> (bit & 7)) & 1
    nulls = int(np.count_nonzero(isnull))
    return isnull == 0, nulls


def _bitmap(mask: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(mask, bitorder="little"))


def _decode_field(f: NtfField, fixed: np.ndarray, buf: np.ndarray, starts: np.ndarray,
                  tuple_len: np.ndarray | None, fs: int) -> pa.Array:
    n = len(fixed)
    valid, nulls = _validity(fixed, f.null_bit)
    validity = _bitmap(valid) if nulls else None
    kind = f.type.kind
    if kind is Kind.BOOLEAN:
        values = _bitmap(fixed[:, f.offset] != 0)
        return pa.Array.from_buffers(pa.bool_(), n, [validity, values], null_count=nulls)
    if kind is Kind.STRING:
        return _decode_string(f, fixed, buf, starts, tuple_len, fs, valid, validity, nulls)
    if f.type.is_wide_decimal:
        return _decode_wide_decimal(f, fixed, valid, validity, nulls)
    col = _column(fixed, f.offset, _NUMPY[kind])
    if kind is Kind.DECIMAL:
        limit = 10 ** f.type.precision
        over = valid & ((col >= limit) | (col <= -limit))
        if over.any():
            i = int(np.argmax(over))
            raise StreamError(f"tuple {i}: field {f.name!r} value {int(col[i])} does not fit {f.type}")
        wide = np.empty((n, 2), dtype=np.int64)  # decimal128: little-endian two's complement
        wide[:, 0] = col
        wide[:, 1] = col >> 63
        col = wide
    return pa.Array.from_buffers(arrow_type(f.type), n, [validity, pa.py_buffer(col)], null_count=nulls)


def _decode_wide_decimal(f: NtfField, fixed: np.ndarray, valid: np.ndarray, validity, nulls: int) -> pa.Array:
    """A 16-byte decimal (p > 18): little-endian two's-complement 128 bits, which is Arrow's
    decimal128 buffer as is; values must fit the field's precision (|v| < 10^p)."""
    n = len(fixed)
    lo = _column(fixed, f.offset, np.dtype("<u8"))
    hi = _column(fixed, f.offset + 8, np.dtype("<i8"))
    limit = 10 ** f.type.precision  # compare (hi, lo) with 10^p and -10^p word by word
    hi_p, lo_p = limit >> 64, limit & (2**64 - 1)
    hi_m, lo_m = (-limit) >> 64, (-limit) & (2**64 - 1)
    over = valid & ((hi > hi_p) | ((hi == hi_p) & (lo >= np.uint64(lo_p)))
                    | (hi < hi_m) | ((hi == hi_m) & (lo <= np.uint64(lo_m))))
    if over.any():
        i = int(np.argmax(over))
        v = (int(hi[i]) << 64) | int(lo[i])
        raise StreamError(f"tuple {i}: field {f.name!r} value {v} does not fit {f.type}")
    wide = np.empty((n, 2), dtype=np.int64)
    wide[:, 0] = lo.view(np.int64)
    wide[:, 1] = hi
    return pa.Array.from_buffers(arrow_type(f.type), n, [validity, pa.py_buffer(wide)], null_count=nulls)


def _decode_string(f: NtfField, fixed: np.ndarray, buf: np.ndarray, starts: np.ndarray,
                   tuple_len: np.ndarray, fs: int, valid: np.ndarray, validity, nulls: int) -> pa.Array:
    n = len(fixed)
    off = _column(fixed, f.offset, np.dtype("<u4")).astype(np.int64)
    ln = _column(fixed, f.offset + 4, np.dtype("<u4")).astype(np.int64)
    if nulls:
        ln[~valid] = 0
    bad = (ln > 0) & ((off < fs) | (off + ln > tuple_len))  # an empty string may point anywhere
    if bad.any():
        i = int(np.argmax(bad))
        raise StreamError(f"tuple {i}: string field {f.name!r} (offset {off[i]}, length {ln[i]}) lies "
                          f"outside the tuple's variable section {fs}..{tuple_len[i]}")
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    np.cumsum(ln, out=offsets[1:])
    total = int(offsets[-1])
    chars = gather_ranges(buf, np.where(ln > 0, starts + off, 0), ln, total)
    large = total > _INT32_OFFSETS_MAX
    typ = pa.large_string() if large else pa.string()
    if not large:
        offsets = offsets.astype(np.int32)
    arr = pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(offsets), pa.py_buffer(chars)],
                                null_count=nulls)
    try:
        arr.validate(full=True)  # checks UTF-8
    except pa.ArrowInvalid as e:
        raise StreamError(f"string field {f.name!r}: {e}") from None
    return arr


def gather_ranges(buf: np.ndarray, begin: np.ndarray, length: np.ndarray, total: int) -> np.ndarray:
    """buf[begin[i] : begin[i] + length[i]] for all i, back to back, as one uint8 array."""
    out = np.empty(total, dtype=np.uint8)
    if total == 0:
        return out
    if _ntfscan is not None:
        try:
            _ntfscan.gather(buf, np.ascontiguousarray(begin, dtype=np.int64),
                            np.ascontiguousarray(length, dtype=np.int64), out)
        except ValueError as e:
            raise StreamError(str(e)) from None
        return out
    return gather_ranges_numpy(buf, begin, length, total)


def gather_ranges_numpy(buf: np.ndarray, begin: np.ndarray, length: np.ndarray, total: int) -> np.ndarray:
    """Pure-numpy `gather_ranges`: one index per output byte, built with repeat + arange."""
    dest = np.cumsum(length) - length  # where each range starts in the output
    idx = np.repeat(begin - dest, length)
    idx += np.arange(total, dtype=np.int64)
    return buf[idx]
