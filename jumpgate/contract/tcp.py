"""TCP stream framing (contract §3): an 8-byte header (`NTF1`, the u32 stream id), then each tuple
as a u32 length and its bytes, then the end marker: a zero length and the i64 count of tuples.
Every integer is little-endian. Senders and receivers of any language implement exactly this; the
Python client's vectorized scanner (jumpgate.client.ntf) and the C runtime read the same bytes."""
from __future__ import annotations

import struct

from .errors import StreamError

MAGIC = b"NTF1"
HEADER_SIZE = 8
END_MARKER_SIZE = 12
MAX_TUPLE = 2**31 - 1  # a tuple's length is a u32 below 2^31 (contract §3)

_HEADER = struct.Struct("<4sI")
_LENGTH = struct.Struct("<I")
_END = struct.Struct("<IQ")


def stream_header(stream_id: int) -> bytes:
    return _HEADER.pack(MAGIC, stream_id)


def frame(tuple_bytes: bytes) -> bytes:
    return _LENGTH.pack(len(tuple_bytes)) + tuple_bytes


def end_marker(count: int) -> bytes:
    return _END.pack(0, count)


def parse_stream_header(head: bytes) -> int:
    """The stream id of an 8-byte header; StreamError when it is short or not `NTF1`."""
    if len(head) < HEADER_SIZE:
        raise StreamError(f"stream ended inside its header ({len(head)} of {HEADER_SIZE} bytes)")
    magic, stream_id = _HEADER.unpack_from(head, 0)
    if magic != MAGIC:
        raise StreamError(f"bad stream header {bytes(magic)!r}, expected {MAGIC!r}")
    return stream_id
