"""UDP framing (docs/udp-transport.md, an addition to the contract): a stream is a sequence of
datagrams, each a 24-byte header (magic `NTU1`, stream id, sequence number, tuple count, flags)
followed by tuples framed as on TCP (a u32 length, then the bytes); the stream ends with an END
datagram, sent several times, carrying the number of data datagrams and of tuples. The switch
aggregator's FLUSH, FINISH, DISCARD and ERROR datagrams use the same header with their flags.
Senders (the C runtime, the switch controller) and receivers (the client, the runtime) follow it."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import StreamError
from .tcp import frame

UDP_MAGIC = b"NTU1"
HEADER = struct.Struct("<4sIQHHI")  # magic, stream id, sequence, tuples, flags, zero
HEADER_SIZE = HEADER.size  # 24
END_PAYLOAD = struct.Struct("<QQ")  # tuples sent, datagrams a switch received (senders write 0)
FINISH_PAYLOAD = struct.Struct("<Q")  # FLUSH datagrams a controller sent
F_END, F_LOSS, F_FLUSH, F_FINISH, F_DISCARD, F_ERROR = 0x1, 0x2, 0x4, 0x8, 0x10, 0x20
DEFAULT_MAX_DATAGRAM = 1472  # a 1500-byte MTU less the IPv4 and UDP headers
MAX_DATAGRAM = 65507
END_COPIES = 3



def pack_header(stream: int, seq: int, count: int = 0, flags: int = 0) -> bytes:
    return HEADER.pack(UDP_MAGIC, stream, seq, count, flags, 0)


def data_datagram(stream: int, seq: int, tuples: list[bytes]) -> bytes:
    """One data datagram carrying `tuples` (each framed with its u32 length)."""
    body = b"".join(frame(t) for t in tuples)
    return pack_header(stream, seq, len(tuples)) + body


def end_datagram(stream: int, datagrams: int, tuples: int, flags: int = 0, received: int = 0) -> bytes:
    return pack_header(stream, datagrams, 0, F_END | flags) + END_PAYLOAD.pack(tuples, received)


@dataclass(frozen=True, slots=True)
class Header:
    stream: int
    seq: int
    count: int
    flags: int


def parse_header(data: bytes | memoryview) -> Header:
    if len(data) < HEADER_SIZE:
        raise StreamError(f"a {len(data)}-byte datagram is shorter than the {HEADER_SIZE}-byte header")
    magic, stream, seq, count, flags, _ = HEADER.unpack_from(data, 0)
    if magic != UDP_MAGIC:
        raise StreamError(f"a datagram with magic {bytes(magic)!r}, not {UDP_MAGIC!r}")
    return Header(stream, seq, count, flags)
