"""Receive the NTF streams of one `send` destination over UDP (docs/udp-transport.md).

The UDP transport is an addition to the contract: a stream is a sequence of datagrams, each a
24-byte header (magic `NTU1`, stream id, sequence number, tuple count, flags) followed by
length-prefixed tuples exactly as in TCP framing; the stream ends with an END datagram (sent
several times) that carries the number of data datagrams and of tuples. A `UdpReceiver` has the
interface of the TCP `Receiver`: it binds as soon as it is made, `start(expected_streams, layout)`
begins reading, `table()` decodes.

Version 2 streams (magic `NTU2`, which NCAs send to a `send` that says `"udp_version": 2`, as
`Jumpgate.run` does) are acknowledged: the receiver answers the address a stream's datagrams come
from with ACK datagrams (what arrived in order, and a report of what arrived past a gap), and the
sender repeats what is missing until its END is acknowledged, so loss is survived. The receiver
acknowledges whenever it has read its socket dry and every ACK_EVERY datagrams in between; after
its streams are complete it keeps answering until `close()`, since a sender whose final ACK was
lost repeats its END. Acknowledgements that reach it (flag ACK, a switch's receipts with SACK too)
are not data and are ignored: only senders act on them.

In version 1 loss is a failure, never a silent gap: a duplicate datagram is dropped, and a stream
whose END has arrived but some of whose datagrams have not fails after `grace` seconds, naming the
stream and the first missing sequence number (in version 2 the sender repeats them instead). A lost
END is found with `senders_done()` (the client calls it when the job has succeeded, i.e. every
sender has sent its END, and in version 2 had it acknowledged): a stream still without END `grace`
seconds later, once the socket has been read dry, has failed. One thread reads the socket; each
datagram's tuples are appended to its stream's buffer, and decoding reuses the TCP path
(`ntf.scan_stream`) on each stream's bytes.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from array import array
from dataclasses import dataclass, field

import pyarrow as pa

from ..contract.errors import StreamError
from ..contract.ntf import NtfLayout
from ..contract.readiness import wait_readable
from ..contract.tcp import end_marker, stream_header
from ..contract.udp import (
    ACK_REPORT_MAX,
    END_PAYLOAD,
    F_ACK,
    F_END,
    F_LOSS,
    F_RETX,
    HEADER_SIZE,
    MAX_DATAGRAM,
    Header,
    ack_datagram,
    parse_header,
)
from .ntf import as_layout, concat_tables, decode_tuples, empty_table, scan_stream

# The datagram format is the contract's (jumpgate.contract.udp); these are the receiver's settings.
SOCKET_RCVBUF = 64 << 20
POLL_S = 0.2
DEFAULT_GRACE_S = 2.0
ACK_EVERY = 256  # version 2: acknowledge at least every this many datagrams read in a row


# ------------------------------------------------------------------ one stream's state
@dataclass
class _Stream:
    payload: bytearray = field(default_factory=bytearray)  # the data datagrams' tuples, as they arrived
    # where each datagram's tuples start in payload, and its number: a stream whose datagrams came
    # out of order (reordered, repeated after a loss) is put back in the sender's order to decode
    starts: array = field(default_factory=lambda: array("Q"))
    seqs: array = field(default_factory=lambda: array("Q"))
    shuffled: bool = False
    seen: bytearray = field(default_factory=bytearray)  # one byte per sequence number
    datagrams: int = 0
    tuples: int = 0
    duplicates: int = 0
    end: tuple[int, int] | None = None  # (datagrams, tuples) from END
    end_at: float = 0.0
    complete: bool = False
    version: int = 0  # 0 until the first datagram, then 1 or 2
    # version 2 (acknowledged): data datagrams 0 .. cum-1 arrived; 1 + the highest that did; where
    # the stream comes from (where ACKs go)
    cum: int = 0
    high: int = 0
    peer: tuple | None = None
    stamp: int = 0  # the timestamp of its latest datagram, echoed in ACKs

    def in_order(self) -> bytes:
        """The tuples in the order the sender numbered their datagrams."""
        if not self.shuffled:
            return bytes(self.payload)
        ends = [*self.starts[1:], len(self.payload)]
        order = sorted(range(len(self.seqs)), key=self.seqs.__getitem__)
        view = memoryview(self.payload)
        return b"".join(view[self.starts[i]:ends[i]] for i in order)


class UdpReceiver:
    """Listen at (host, port) for the UDP streams of one destination."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, name: str = "out",
                 grace: float = DEFAULT_GRACE_S) -> None:
        self.name = name
        self.host = host
        self.grace = grace
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            try:  # root may exceed rmem_max; others get what the kernel allows
                self._sock.setsockopt(socket.SOL_SOCKET, 33, SOCKET_RCVBUF)  # SO_RCVBUFFORCE
            except OSError:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_RCVBUF)
            self._sock.bind((host, port))
        except OSError:
            self._sock.close()
            raise
        self.port: int = self._sock.getsockname()[1]
        self.expected = 0
        self.layout: NtfLayout | None = None
        self.bytes_received = 0
        self._streams: dict[int, _Stream] = {}
        self._errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._ended = 0
        self._senders_done: float | None = None  # monotonic time of senders_done()
        self._to_ack: dict[int, _Stream] = {}  # version 2 streams with something to acknowledge
        self.acks_sent = 0
        self.gap_reports = 0  # ACKs that reported missing datagrams

    # ------------------------------------------------------------------ life cycle
    def start(self, expected_streams: int, layout: NtfLayout | dict) -> None:
        if expected_streams < 0:
            raise StreamError(f"expected_streams must be >= 0, got {expected_streams}")
        self.expected = expected_streams
        self.layout = as_layout(layout)
        self._streams = {i: _Stream() for i in range(expected_streams)}
        if expected_streams == 0:
            self._done.set()
            return
        self._thread = threading.Thread(target=self._read_loop, name=f"jg-udp-{self.name}", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def senders_done(self) -> None:
        """Every sender has finished (the job succeeded): their ENDs have been sent, so one that
        has not arrived `grace` seconds from now, with nothing left unread, was lost."""
        if self._senders_done is None:
            self._senders_done = time.monotonic()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def error(self) -> str | None:
        with self._lock:
            return "; ".join(self._errors) if self._errors else None

    @property
    def ended(self) -> int:
        return self._ended

    @property
    def bytes_so_far(self) -> int:
        """Bytes read so far (for a progress display): every datagram counts as it comes."""
        return self.bytes_received

    @property
    def duplicates(self) -> int:
        return sum(s.duplicates for s in self._streams.values())

    @property
    def datagrams(self) -> int:
        """Distinct data datagrams received, over all streams."""
        return sum(s.datagrams for s in self._streams.values())

    def stats(self) -> dict[str, int]:
        """The receiver's counters: distinct data datagrams, duplicates dropped, and (version 2)
        acknowledgements sent and those of them that reported missing datagrams."""
        return {"datagrams": self.datagrams, "duplicates": self.duplicates, "acks": self.acks_sent,
                "gap_reports": self.gap_reports}

    def close(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=2 * POLL_S + 1)
        try:
            self._sock.close()
        except OSError:
            pass
        self._done.set()

    def __enter__(self) -> UdpReceiver:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ results
    def table(self) -> pa.Table:
        """Decode what was received, streams in stream-id order. Raises StreamError on failure."""
        if self.layout is None:
            raise StreamError(f"receiver {self.name!r} was never started")
        if self.error:
            raise StreamError(f"destination {self.name!r}: {self.error}")
        if self._ended != self.expected:
            raise StreamError(f"destination {self.name!r}: {self._ended} of {self.expected} streams ended")
        tables = []
        for sid, s in sorted(self._streams.items()):
            # the tuples of a stream, framed as one TCP stream (contract §3), decode on the TCP path
            data = stream_header(sid) + s.in_order() + end_marker(s.tuples)
            scanned = scan_stream(data, self.layout)
            tables.append(decode_tuples(scanned.data, scanned.starts, self.layout))
        return concat_tables(tables, self.layout) if tables else empty_table(self.layout)

    # ------------------------------------------------------------------ the reader
    def _fail(self, message: str) -> None:
        with self._lock:
            self._errors.append(message)
        self._stop.set()
        self._done.set()

    def _read_loop(self) -> None:
        buf = bytearray(MAX_DATAGRAM + 1)
        view = memoryview(buf)
        try:
            while not self._stop.is_set():
                ready = wait_readable(self._sock, POLL_S)
                if ready:
                    read = 0
                    while True:  # drain what is queued before looking at the clock again
                        try:
                            n, addr = self._sock.recvfrom_into(buf, 0, socket.MSG_DONTWAIT)
                        except BlockingIOError:
                            break
                        if self._done.is_set():
                            self._linger(view[:n], addr)
                            continue
                        self.bytes_received += n
                        self._datagram(view[:n], addr)
                        read += 1
                        if read % ACK_EVERY == 0:
                            self._send_acks()
                    self._send_acks()  # the socket is dry: the senders may be waiting for room
                if not self._done.is_set():
                    self._check_grace()  # here the socket has just been found empty
        except StreamError as e:
            self._fail(str(e))
        except OSError as e:
            if not self._stop.is_set():
                self._fail(f"receiving: {e}")

    def _linger(self, d: memoryview, addr: tuple) -> None:
        """After the streams are complete: answer anything of a version 2 stream with its final
        ACK (its sender's last one may have been lost); nothing else matters any more."""
        try:
            h = parse_header(d)
        except StreamError:
            return
        s = self._streams.get(h.stream)
        if s is not None and h.version == 2 and s.version == 2 and s.complete:
            s.peer, s.stamp = addr, h.stamp
            self._to_ack[h.stream] = s

    def _send_acks(self) -> None:
        for sid, s in self._to_ack.items():
            if s.peer is None:
                continue
            complete = s.complete and s.end is not None
            cum = s.end[0] if complete and s.end is not None else s.cum
            last = min(s.high, cum + 1 + 8 * ACK_REPORT_MAX)
            arrived = [] if complete else [q for q in range(cum + 1, last) if s.seen[q]]
            try:
                self._sock.sendto(ack_datagram(sid, cum, arrived, complete, s.stamp), s.peer)
            except OSError:
                continue  # a lost ACK is harmless: the next one says more
            self.acks_sent += 1
            self.gap_reports += bool(arrived)
        self._to_ack.clear()

    def _datagram(self, d: memoryview, addr: tuple | None = None) -> None:
        h = parse_header(d)
        if h.version == 2 and h.flags & F_ACK:
            # an acknowledgement (cumulative, or a switch's receipt flagged SACK) travels from a
            # receiver to a sender; this side only receives, so it carries nothing for it
            return
        if h.stream >= self.expected:
            raise StreamError(f"stream id {h.stream} is not below expected_streams={self.expected}")
        s = self._streams[h.stream]
        if s.version != h.version:
            if s.version:
                raise StreamError(f"stream {h.stream}: a version {h.version} datagram on a version {s.version} stream")
            s.version = h.version
        v2 = h.version == 2
        if v2:  # ACKs go where the stream comes from, echoing its latest timestamp
            s.peer, s.stamp = addr, h.stamp
            self._to_ack[h.stream] = s
        if h.flags & F_END:
            self._end(h, s, d)
            return
        if h.flags & ~(F_RETX if v2 else 0):
            raise StreamError(f"stream {h.stream}: datagram {h.seq} has unexpected flags {h.flags:#x}")
        if h.seq >= len(s.seen):
            s.seen.extend(bytes(max(h.seq + 1 - len(s.seen), len(s.seen))))
        if s.seen[h.seq]:
            s.duplicates += 1
            return
        if s.end is not None and h.seq >= s.end[0]:
            raise StreamError(f"stream {h.stream}: datagram {h.seq} arrived after END said {s.end[0]} were sent")
        body = d[HEADER_SIZE:]
        pos, n = 0, len(body)
        for i in range(h.count):  # framing: exactly `count` whole tuples
            if n - pos < 4:
                raise StreamError(f"stream {h.stream}: datagram {h.seq} ends inside tuple {i} of {h.count}")
            (length,) = struct.unpack_from("<I", body, pos)
            if length == 0 or n - pos - 4 < length:
                raise StreamError(f"stream {h.stream}: datagram {h.seq}: tuple {i} has a bad length {length}")
            pos += 4 + length
        if pos != n:
            raise StreamError(f"stream {h.stream}: datagram {h.seq} has {n - pos} bytes after its {h.count} tuples")
        s.seen[h.seq] = 1
        s.shuffled = s.shuffled or (len(s.seqs) > 0 and h.seq < s.seqs[-1])
        s.starts.append(len(s.payload))
        s.seqs.append(h.seq)
        s.payload += body
        s.datagrams += 1
        s.tuples += h.count
        if v2:
            s.high = max(s.high, h.seq + 1)
            while s.cum < len(s.seen) and s.seen[s.cum]:
                s.cum += 1
        self._check_stream(h.stream, s)

    def _end(self, h: Header, s: _Stream, d: memoryview) -> None:
        if len(d) < HEADER_SIZE + END_PAYLOAD.size:
            raise StreamError(f"stream {h.stream}: END datagram of {len(d)} bytes")
        tuples, _ = END_PAYLOAD.unpack_from(d, HEADER_SIZE)
        if h.flags & F_LOSS:
            raise StreamError(f"stream {h.stream}: the sender reports UDP loss upstream of it")
        if s.end is not None:
            if s.end != (h.seq, tuples):
                raise StreamError(f"stream {h.stream}: two END datagrams disagree")
            return
        if h.version == 2 and h.seq < s.high:
            raise StreamError(f"stream {h.stream}: END says {h.seq} datagrams were sent, but datagram {s.high - 1} "
                              "arrived")
        s.end = (h.seq, tuples)
        s.end_at = time.monotonic()
        self._check_stream(h.stream, s)

    def _check_stream(self, sid: int, s: _Stream) -> None:
        if s.end is None or s.complete or s.datagrams < s.end[0]:
            return
        if s.tuples != s.end[1]:
            raise StreamError(f"stream {sid}: END counts {s.end[1]} tuples, received {s.tuples}")
        s.complete = True
        with self._lock:
            self._ended += 1
            if self._ended == self.expected:
                self._done.set()

    def _check_grace(self) -> None:
        now = time.monotonic()
        done = self._senders_done
        for sid, s in self._streams.items():
            if s.end is None and done is not None and now - done > self.grace:
                raise StreamError(f"stream {sid}: no END datagram: its senders finished {now - done:.1f} s ago and "
                                  f"everything that arrived has been read ({s.datagrams} data datagrams, "
                                  f"{s.tuples} tuples received); the END was lost (UDP loss)")
            # version 2: the sender repeats what is missing until its senders are done
            waited = now - (s.end_at if s.version != 2 else max(s.end_at, done or now))
            if s.end is not None and not s.complete and waited > self.grace:
                missing = next(i for i in range(s.end[0]) if i >= len(s.seen) or not s.seen[i])
                raise StreamError(f"stream {sid}: UDP loss: {s.datagrams} of {s.end[0]} datagrams arrived "
                                  f"(first missing: {missing})")
