"""Receive the NTF streams of one `send` destination over TCP (contract §3).

A `Receiver` binds and listens as soon as it is made, so its port can go into the request before
the job is submitted (the client chooses its own ports). `start(expected_streams, layout)` then
accepts exactly that many connections, one reader thread each. A reader pulls bytes into a
growing numpy buffer with large `recv_into` calls until the sender closes, then checks the header
and scans the framing natively (`ntf.scan_stream`): nothing per tuple happens in Python.

Everything a stream does wrong (bad header, duplicate or out-of-range stream id, EOF before the end
marker, count mismatch, too many connections) becomes the receiver's `error`; the session polls it
next to the job state and cancels the job early.
"""
from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pyarrow as pa

from ..contract.errors import StreamError
from ..contract.ntf import NtfLayout
from ..contract.readiness import wait_readable
from ..contract.tcp import HEADER_SIZE
from .ntf import (
    ScannedStream,
    as_layout,
    concat_tables,
    decode_tuples,
    empty_table,
    read_header,
    scan_stream,
)

RECV_CHUNK = 4 << 20  # keep at least this much free space for each recv_into
INITIAL_BUFFER = 8 << 20
SOCKET_RCVBUF = 4 << 20
POLL_S = 0.2  # how often blocked threads look at the stop flag


class GrowingBuffer:
    """A numpy byte buffer filled by `recv_into`, doubled when the free space runs low."""

    def __init__(self, capacity: int = INITIAL_BUFFER) -> None:
        self._buf = np.empty(capacity, dtype=np.uint8)
        self.size = 0

    def free_view(self, at_least: int = RECV_CHUNK) -> memoryview:
        if len(self._buf) - self.size < at_least:
            grown = np.empty(max(2 * len(self._buf), self.size + at_least), dtype=np.uint8)
            grown[:self.size] = self._buf[:self.size]
            self._buf = grown
        return memoryview(self._buf)[self.size:]

    def data(self) -> np.ndarray:
        return self._buf[:self.size]


class Receiver:
    """Listen at (host, port) for the streams of one destination."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, name: str = "out", backlog: int = 128) -> None:
        self.name = name
        self.host = host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_RCVBUF)  # inherited
            self._sock.bind((host, port))
            self._sock.listen(backlog)
        except OSError:
            self._sock.close()
            raise
        self.port: int = self._sock.getsockname()[1]
        self.expected = 0
        self.layout: NtfLayout | None = None
        self.streams: dict[int, ScannedStream] = {}
        self.bytes_received = 0
        self._errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._ended = 0
        self._claimed: set[int] = set()
        self._reading: list[GrowingBuffer] = []  # the streams still being read (bytes_so_far)

    # ------------------------------------------------------------------ life cycle
    def start(self, expected_streams: int, layout: NtfLayout | dict) -> None:
        """Begin accepting `expected_streams` connections (the socket is already listening)."""
        if expected_streams < 0:
            raise StreamError(f"expected_streams must be >= 0, got {expected_streams}")
        self.expected = expected_streams
        self.layout = as_layout(layout)
        if expected_streams == 0:
            self._close_listener()
            self._done.set()
            return
        t = threading.Thread(target=self._accept_loop, name=f"jg-accept-{self.name}", daemon=True)
        with self._lock:
            self._threads.append(t)
        t.start()

    def wait(self, timeout: float | None = None) -> bool:
        """True when every stream ended or the receiver failed."""
        return self._done.wait(timeout)

    def senders_done(self) -> None:
        """Every sender has finished (the job succeeded). Nothing to do over TCP: a stream cut
        short ends without its end marker, which fails it (UdpReceiver needs this notice)."""

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
        """Bytes read so far, streams still under way included (for a progress display)."""
        with self._lock:
            return self.bytes_received + sum(b.size for b in self._reading)

    def close(self) -> None:
        """Stop everything: listener, readers. Safe to call more than once, from any thread."""
        self._stop.set()
        self._close_listener()
        with self._lock:
            conns = list(self._conns)
            threads = list(self._threads)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in threads:
            if t is not threading.current_thread():
                t.join(timeout=2 * POLL_S + 1)
        for c in conns:
            c.close()
        self._done.set()

    def __enter__(self) -> Receiver:
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
        if len(self.streams) != self.expected:
            raise StreamError(f"destination {self.name!r}: {len(self.streams)} of {self.expected} "
                              "streams ended")
        tables = [decode_tuples(s.data, s.starts, self.layout) for _, s in sorted(self.streams.items())]
        return concat_tables(tables, self.layout) if tables else empty_table(self.layout)

    # ------------------------------------------------------------------ threads
    def _fail(self, message: str) -> None:
        with self._lock:
            self._errors.append(message)
        self._stop.set()
        self._done.set()

    def _close_listener(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def _accept_loop(self) -> None:
        accepted = 0
        try:
            while accepted < self.expected and not self._stop.is_set():
                ready = wait_readable(self._sock, POLL_S)
                if not ready:
                    continue
                conn, peer = self._sock.accept()
                accepted += 1
                t = threading.Thread(target=self._read_stream, args=(conn, peer),
                                     name=f"jg-recv-{self.name}-{accepted}", daemon=True)
                with self._lock:
                    self._conns.append(conn)
                    self._threads.append(t)
                t.start()
        except (OSError, ValueError) as e:
            if not self._stop.is_set():
                self._fail(f"accept failed: {e}")
        finally:
            self._close_listener()  # a surplus sender is refused, not silently ignored

    def _read_stream(self, conn: socket.socket, peer) -> None:
        buf = GrowingBuffer()
        conn.settimeout(POLL_S)
        stream_id = None
        with self._lock:
            self._reading.append(buf)
        try:
            while True:
                if self._stop.is_set():
                    return
                try:
                    n = conn.recv_into(buf.free_view())
                except TimeoutError:
                    continue
                if n == 0:
                    break
                buf.size += n
                if stream_id is None and buf.size >= HEADER_SIZE:
                    stream_id = self._claim(buf.data())  # fail fast, before buffering a bad stream
            if self._stop.is_set():  # EOF because close() shut the socket down: not the sender's end
                return
            data = buf.data()
            if stream_id is None:
                stream_id = self._claim(data)  # raises: the stream ended inside its header
            scanned = scan_stream(data, self.layout)
            with self._lock:
                self.streams[stream_id] = scanned
                self.bytes_received += len(data)
                self._reading.remove(buf)
                self._ended += 1
                if self._ended == self.expected:
                    self._done.set()
        except StreamError as e:
            self._fail(f"stream from {peer[0]}:{peer[1]}: {e}")
        except OSError as e:
            if not self._stop.is_set():
                self._fail(f"stream from {peer[0]}:{peer[1]}: {e}")
        finally:
            conn.close()
            with self._lock:
                if any(b is buf for b in self._reading):  # a stream that did not end well
                    self._reading.remove(buf)

    def _claim(self, data: np.ndarray) -> int:
        """Check the header; reserve its stream id (distinct, below expected_streams)."""
        stream_id = read_header(data)
        if stream_id >= self.expected:
            raise StreamError(f"stream id {stream_id} is not below expected_streams={self.expected}")
        with self._lock:
            if stream_id in self._claimed:
                raise StreamError(f"stream id {stream_id} arrived twice")
            self._claimed.add(stream_id)
        return stream_id


def wait_all(receivers, timeout: float | None) -> bool:
    """Wait until every receiver is done (or failed); False on timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for r in receivers:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not r.wait(left):
            return False
    return True
