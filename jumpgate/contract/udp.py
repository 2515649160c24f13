"""UDP framing (docs/udp-transport.md, an addition to the contract): a stream is a sequence of
datagrams, each a 24-byte header (magic `NTU1`, stream id, sequence number, tuple count, flags)
followed by tuples framed as on TCP (a u32 length, then the bytes); the stream ends with an END
datagram, sent several times, carrying the number of data datagrams and of tuples. The switch
aggregator's FLUSH, FINISH, DISCARD and ERROR datagrams use the same header with their flags.
Senders (the C runtime, the switch controller) and receivers (the client, the runtime) follow it.

Version 2 (magic `NTU2`) is the same stream acknowledged: the receiver sends ACK datagrams back to
the sender's address (a cumulative number and a report of what arrived past it), and the sender
repeats what is reported missing or stays unacknowledged, flagged RETX, and its END until that is
acknowledged (ncas/runtime/jg_udp.h has the layout)."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import StreamError
from .tcp import frame

UDP_MAGIC = b"NTU1"
UDP_MAGIC_V2 = b"NTU2"  # acknowledged streams
MAGICS = {1: UDP_MAGIC, 2: UDP_MAGIC_V2}  # the versions this side takes
HEADER = struct.Struct("<4sIQHHI")  # magic, stream id, sequence, tuples, flags, zero (version 2: timestamp)
HEADER_SIZE = HEADER.size  # 24
END_PAYLOAD = struct.Struct("<QQ")  # tuples sent, datagrams a switch received (senders write 0)
FINISH_PAYLOAD = struct.Struct("<Q")  # FLUSH datagrams a controller sent
F_END, F_LOSS, F_FLUSH, F_FINISH, F_DISCARD, F_ERROR = 0x1, 0x2, 0x4, 0x8, 0x10, 0x20
F_RETX, F_ACK = 0x40, 0x80  # version 2: a repeated datagram; an acknowledgement (receiver to sender)
# Version 2, with ACK: a receipt, "datagram `seq` has arrived" (not "all below it"): header only, the
# copy's timestamp echoed. The switch acknowledges so (a pipeline cannot compute a cumulative number
# over gaps); only senders act on it, receivers never see it.
F_SACK = 0x100
SACK_WINDOW = 64  # datagrams a sender keeps in flight towards a receiver that answers with receipts
DEFAULT_MAX_DATAGRAM = 1472  # a 1500-byte MTU less the IPv4 and UDP headers
MAX_DATAGRAM = 65507
END_COPIES = 3  # version 1; a version 2 END is sent once and repeated until acknowledged
ACK_REPORT_MAX = 1024  # gap-report bytes at most: 8192 datagrams past the cumulative number


def pack_header(stream: int, seq: int, count: int = 0, flags: int = 0, version: int = 1, stamp: int = 0) -> bytes:
    """`stamp`: version 2's timestamp field (the header's last 4 bytes, 0 in version 1)."""
    return HEADER.pack(MAGICS[version], stream, seq, count, flags, stamp)


def data_datagram(stream: int, seq: int, tuples: list[bytes], version: int = 1, flags: int = 0,
                  stamp: int = 0) -> bytes:
    """One data datagram carrying `tuples` (each framed with its u32 length)."""
    body = b"".join(frame(t) for t in tuples)
    return pack_header(stream, seq, len(tuples), flags, version, stamp) + body


def end_datagram(stream: int, datagrams: int, tuples: int, flags: int = 0, received: int = 0,
                 version: int = 1) -> bytes:
    return pack_header(stream, datagrams, 0, F_END | flags, version) + END_PAYLOAD.pack(tuples, received)


def receipt_datagram(stream: int, seq: int, echo: int = 0) -> bytes:
    """A version 2 receipt: data datagram `seq` of the stream has arrived (ACK with SACK, header
    only), echoing the timestamp `echo` of the copy that did."""
    return pack_header(stream, seq, 0, F_ACK | F_SACK, 2, echo)


def ack_datagram(stream: int, cum: int, arrived: list[int] | tuple[int, ...] = (), complete: bool = False,
                 echo: int = 0) -> bytes:
    """A version 2 ACK: data datagrams 0 .. cum-1 all arrived, and of the later ones those in
    `arrived` (the gap report covers cum+1 .. cum+8*ACK_REPORT_MAX); `complete`: the END too, and
    the stream is whole; `echo`: the timestamp of the stream's latest datagram (its sender measures
    the round trip with it)."""
    later = sorted(q - cum - 1 for q in arrived if cum < q <= cum + 8 * ACK_REPORT_MAX)
    report = bytearray((later[-1] // 8 + 1) if later else 0)
    for bit in later:
        report[bit // 8] |= 1 << (bit % 8)
    flags = F_ACK | (F_END if complete else 0)
    return pack_header(stream, cum, len(report), flags, 2, echo) + bytes(report)


@dataclass(frozen=True, slots=True)
class Header:
    stream: int
    seq: int
    count: int
    flags: int
    version: int = 1
    stamp: int = 0  # version 2: the sender's timestamp, or in an ACK its echo


def parse_header(data: bytes | memoryview) -> Header:
    if len(data) < HEADER_SIZE:
        raise StreamError(f"a {len(data)}-byte datagram is shorter than the {HEADER_SIZE}-byte header")
    magic, stream, seq, count, flags, stamp = HEADER.unpack_from(data, 0)
    magic = bytes(magic)
    version = next((v for v, m in MAGICS.items() if m == magic), None)
    if version is None:
        if magic[:3] == b"NTU" and magic[3:].isdigit():
            raise StreamError(f"a datagram of UDP transport version {magic[3:].decode()} (magic {magic!r}): "
                              f"this side takes versions {' and '.join(map(str, MAGICS))}")
        raise StreamError(f"a datagram with magic {magic!r}, not {UDP_MAGIC!r} or {UDP_MAGIC_V2!r}")
    return Header(stream, seq, count, flags, version, stamp if version == 2 else 0)


def parse_ack(data: bytes | memoryview) -> tuple[Header, list[int]]:
    """A version 2 ACK's header and the datagrams its gap report says arrived."""
    h = parse_header(data)
    if h.version != 2 or not h.flags & F_ACK or len(data) != HEADER_SIZE + h.count or h.count > ACK_REPORT_MAX:
        raise StreamError(f"a {len(data)}-byte datagram that is not a version 2 acknowledgement")
    report = bytes(data[HEADER_SIZE:])
    return h, [h.seq + 1 + 8 * j + i for j, b in enumerate(report) for i in range(8) if b >> i & 1]
