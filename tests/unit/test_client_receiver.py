"""The TCP receiver (contract §3) over real loopback sockets, with sender threads writing frames."""
from __future__ import annotations

import random
import socket
import threading
import time
from decimal import Decimal

import pyarrow as pa
import pytest

from jumpgate.client import Receiver, StreamError
from jumpgate.client.testing import encode_stream, end_marker, frame, header
from jumpgate.contract.ntf import generate_ntf
from jumpgate.contract.types import Field, Schema, parse_type

LAYOUT = generate_ntf(Schema(tuple(Field(n, parse_type(t)) for n, t in
                                   [("id", "int64"), ("name", "string"), ("price", "decimal(10,2)")])))


def rows(start: int, n: int) -> list[tuple]:
    return [(i, None if i % 7 == 0 else f"row-{i}-ü" * (i % 4), None if i % 5 == 0 else i * 3) for i in
            range(start, start + n)]


def table_of(rs: list[tuple]) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rs], pa.int64()),
                     "name": pa.array([r[1] for r in rs], pa.string()),
                     "price": pa.array([None if r[2] is None else Decimal(r[2]) for r in rs], pa.decimal128(10, 2))})


def send(port: int, data: bytes, *, chunks: int = 1, delay: float = 0.0, seed: int = 0,
         close: bool = True) -> socket.socket | None:
    """Write `data` to 127.0.0.1:port in `chunks` writes split at random places (mid-frame too).
    A receiver that already failed may refuse the connection: that is fine here."""
    try:
        s = socket.create_connection(("127.0.0.1", port))
    except ConnectionRefusedError:
        return None
    cuts = sorted(random.Random(seed).sample(range(1, len(data)), min(chunks - 1, len(data) - 1)))
    try:
        for a, b in zip([0] + cuts, cuts + [len(data)], strict=True):
            s.sendall(data[a:b])
            if delay:
                time.sleep(delay)
    except OSError:  # the receiver may hang up on a broken stream
        close = True
    finally:
        if close:
            s.close()
    return s


def run_senders(port: int, payloads: list[bytes], **kw) -> list[threading.Thread]:
    threads = [threading.Thread(target=send, args=(port, p), kwargs={**kw, "seed": i}, daemon=True)
               for i, p in enumerate(payloads)]
    for t in threads:
        t.start()
    return threads


@pytest.fixture
def receiver():
    r = Receiver("127.0.0.1", 0, name="dest")
    yield r
    r.close()


def test_several_streams_at_once_in_batched_writes(receiver):
    assert receiver.port > 0
    parts = {2: rows(200, 50), 0: rows(0, 120), 1: rows(120, 80)}
    receiver.start(3, LAYOUT)
    threads = run_senders(receiver.port, [encode_stream(parts[i], LAYOUT, i) for i in (2, 0, 1)],
                          chunks=9, delay=0.002)
    assert receiver.wait(10)
    for t in threads:
        t.join(5)
    assert receiver.error is None and receiver.ended == 3
    got = receiver.table()  # stream-id order, one chunk per stream
    assert got.combine_chunks().equals(table_of(parts[0] + parts[1] + parts[2]))


def test_stream_larger_than_the_initial_buffer(receiver):
    big = rows(0, 300_000)
    data = encode_stream(big, LAYOUT, 0)
    assert len(data) > 8 << 20  # forces the receive buffer to grow
    receiver.start(1, LAYOUT)
    run_senders(receiver.port, [data], chunks=50)
    assert receiver.wait(30), receiver.error
    assert receiver.table().column("id").to_pylist() == list(range(300_000))
    assert receiver.bytes_received == len(data)


def test_one_byte_at_a_time(receiver):
    data = encode_stream(rows(0, 6), LAYOUT, 0)
    receiver.start(1, LAYOUT)
    run_senders(receiver.port, [data], chunks=len(data))
    assert receiver.wait(10)
    assert receiver.table().combine_chunks().equals(table_of(rows(0, 6)))


def test_senders_may_connect_before_start(receiver):
    """The socket listens from construction on, so connections queue until start()."""
    data = encode_stream(rows(0, 3), LAYOUT, 0)
    threads = run_senders(receiver.port, [data])
    for t in threads:
        t.join(5)
    receiver.start(1, LAYOUT)
    assert receiver.wait(10) and receiver.error is None
    assert receiver.table().num_rows == 3


def test_zero_rows_and_zero_streams(receiver):
    receiver.start(2, LAYOUT)
    run_senders(receiver.port, [header(0) + end_marker(0), header(1) + end_marker(0)])
    assert receiver.wait(10)
    t = receiver.table()
    assert t.num_rows == 0 and t.schema.names == ["id", "name", "price"]
    r = Receiver()
    r.start(0, LAYOUT)
    assert r.done and r.table().num_rows == 0
    r.close()


@pytest.mark.parametrize("payloads, message", [
    ([b"NTF1" + (0).to_bytes(4, "little") + end_marker(0), header(0) + end_marker(0)], "arrived twice"),
    ([header(0) + end_marker(0), header(5) + end_marker(0)], "not below expected_streams=2"),
    ([b"XXXX" + bytes(4) + end_marker(0), header(1) + end_marker(0)], "bad stream header"),
    ([header(0) + frame(bytes(32)) + frame(bytes(32))[:20], header(1) + end_marker(0)], "truncated tuple 1"),
    ([header(0) + frame(bytes(32)), header(1) + end_marker(0)], "ended before its end marker"),
    ([header(0) + frame(bytes(32)) + end_marker(2), header(1) + end_marker(0)], "counts 2 tuples but 1"),
])
def test_broken_streams_fail_the_destination(receiver, payloads, message):
    receiver.start(2, LAYOUT)
    run_senders(receiver.port, payloads)
    assert receiver.wait(10)
    deadline = time.monotonic() + 5
    while receiver.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert message in (receiver.error or "")
    with pytest.raises(StreamError, match=message):
        receiver.table()


def test_sender_that_dies_mid_stream(receiver):
    receiver.start(1, LAYOUT)
    data = encode_stream(rows(0, 100), LAYOUT, 0)
    run_senders(receiver.port, [data[: len(data) // 2]], chunks=3)
    assert receiver.wait(10)
    assert "truncated tuple" in receiver.error or "end marker" in receiver.error


def test_close_stops_waiting_readers_and_accept(receiver):
    receiver.start(2, LAYOUT)
    stuck = send(receiver.port, header(0) + frame(bytes(32)), close=False)  # never finishes
    time.sleep(0.1)
    assert not receiver.done
    t0 = time.monotonic()
    receiver.close()
    assert time.monotonic() - t0 < 3
    assert receiver.done
    stuck.close()
    with pytest.raises(StreamError, match="0 of 2 streams ended"):
        receiver.table()


def test_surplus_connection_is_refused(receiver):
    receiver.start(1, LAYOUT)
    run_senders(receiver.port, [header(0) + end_marker(0)])
    assert receiver.wait(10)
    time.sleep(0.3)  # the accept loop closes the listener after the last expected stream
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", receiver.port), timeout=2).close()


def test_table_before_start_is_an_error():
    with Receiver() as r, pytest.raises(StreamError, match="never started"):
        r.table()
