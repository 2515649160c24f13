"""The Python client's UDP receiver (jumpgate.client.udp) against docs/udp-transport.md: tuples of
several streams decoded as the TCP path decodes them, reordering tolerated, duplicates dropped,
and every loss or inconsistency a failure that names the stream."""
from __future__ import annotations

import random
import socket
import time

import pytest

from jumpgate.client.errors import StreamError
from jumpgate.client.testing import encode_tuple
from jumpgate.client.udp import UdpReceiver
from jumpgate.contract import udp
from jumpgate.contract.ntf import generate_ntf
from jumpgate.contract.types import Field, Schema, parse_type

LAYOUT = generate_ntf(Schema((Field("k", parse_type("int64")), Field("s", parse_type("string")))))


def stream(sid: int, rows: list[tuple], per: int) -> list[bytes]:
    ts = [encode_tuple(r, LAYOUT) for r in rows]
    out = [udp.data_datagram(sid, i, ts[a:a + per]) for i, a in enumerate(range(0, len(ts), per))]
    return out + [udp.end_datagram(sid, len(out), len(ts))] * udp.END_COPIES


def run(dgrams: list[bytes], expected: int, grace: float = 0.3) -> UdpReceiver:
    r = UdpReceiver(grace=grace)
    r.start(expected, LAYOUT)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for d in dgrams:
            s.sendto(d, ("127.0.0.1", r.port))
    r.wait(5)
    r.close()
    return r


def test_streams_reordered_and_duplicated_decode_exactly():
    rows = {sid: [(sid * 1000 + i, "x" * (i % 5) or None) for i in range(400)] for sid in range(3)}
    dgrams = [d for sid, rs in rows.items() for d in stream(sid, rs, 7)]
    data = [d for d in dgrams if not udp.parse_header(d).flags]
    ends = [d for d in dgrams if udp.parse_header(d).flags]
    random.Random(1).shuffle(data)
    r = run(data[:40] + data[:40] + ends[:1] + data[40:] + ends, 3)  # an END before the rest: reordered
    assert r.error is None and r.ended == 3 and r.duplicates == 40
    t = r.table()
    assert sorted(zip(t.column("k").to_pylist(), t.column("s").to_pylist())) == sorted(
        row for rs in rows.values() for row in rs)


def test_no_streams_is_done_at_once():
    r = UdpReceiver()
    r.start(0, LAYOUT)
    assert r.done and r.table().num_rows == 0
    r.close()


@pytest.mark.parametrize("mangle,message", [
    (lambda d: d[:3] + d[4:], "stream 0: UDP loss: 9 of 10 datagrams arrived (first missing: 3)"),
    (lambda d: d[:10] + [udp.end_datagram(0, 10, 55)], "stream 0: END counts 55 tuples, received 50"),
    (lambda d: d[:10] + [udp.end_datagram(0, 10, 50, flags=udp.F_LOSS)], "reports UDP loss upstream"),
    (lambda d: d + [udp.end_datagram(0, 11, 50)], None),  # a late disagreeing END after completion: ignored
    (lambda d: [udp.end_datagram(0, 10, 50), udp.end_datagram(0, 9, 50)] + d, "two END datagrams disagree"),
    (lambda d: [udp.data_datagram(5, 0, [b"z" * 24])] + d, "stream id 5 is not below expected_streams=1"),
    (lambda d: [b"NTF1" + d[0][4:]] + d[1:], "not b'NTU1'"),
    (lambda d: [d[0] + b"\0\0"] + d[1:], "2 bytes after its 5 tuples"),
    (lambda d: [udp.pack_header(0, 0, 1, 0x40)] + d, "unexpected flags 0x40"),
])
def test_broken_streams_fail_naming_the_stream(mangle, message):
    rows = [(i, None) for i in range(50)]
    r = run(mangle(stream(0, rows, 5)), 1)
    if message is None:
        assert r.error is None and r.table().num_rows == 50
    else:
        assert r.error and message in r.error, r.error
        with pytest.raises(StreamError):
            r.table()


def test_a_lost_end_fails_soon_after_the_senders_are_done():
    """The client calls `senders_done()` when the job has succeeded: a stream still without END
    then fails the grace period later; the complete stream next to it is not affected."""
    rows = [(i, None) for i in range(50)]
    r = UdpReceiver(grace=0.3)
    r.start(2, LAYOUT)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for d in stream(0, rows, 5) + stream(1, rows, 5)[:-udp.END_COPIES]:
                s.sendto(d, ("127.0.0.1", r.port))
        assert not r.wait(0.5)  # without the notice it waits (the session's timeout ends that)
        t0 = time.monotonic()
        r.senders_done()
        assert r.wait(5)
        assert 0.3 <= time.monotonic() - t0 < 3
        assert r.error and r.error.startswith("stream 1: no END datagram: its senders finished ")
        assert "(10 data datagrams, 50 tuples received); the END was lost (UDP loss)" in r.error
    finally:
        r.close()


def test_acknowledgements_that_reach_the_receiver_are_ignored():
    """Only senders act on ACKs (docs/udp-transport.md): a receipt (ACK with SACK) or a cumulative
    ACK that strays to the receiver, even with a stream id it does not expect, is no data and fails
    nothing."""
    rows = [(i, "r") for i in range(20)]
    strays = [udp.receipt_datagram(0, 3, echo=9), udp.receipt_datagram(7, 0), udp.ack_datagram(0, 5, (7,))]
    r = run(strays + stream(0, rows, 4), 1)
    assert r.error is None and r.ended == 1
    assert sorted(r.table().column("k").to_pylist()) == list(range(20))
