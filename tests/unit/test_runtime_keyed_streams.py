"""Keyed streams (docs/contract.md, "Keyed streams between NCAs") and the receiver's listening
socket, through the NTF relay NCA.

A job's ports are numbers the kernel hands out again as soon as they are free, so a sender left
over from another job can connect to one of them. On a keyed port such a connection must neither
count as one of the job's streams (a silently wrong or hanging job) nor fail the job; and once a
port has all its streams, it stops listening so that nothing can wait in its backlog forever.
"""
from __future__ import annotations

import socket
import struct
import time

import pytest

from jumpgate.ncas.software.build import build_nca

from .fixtures.runtime_harness import FIXTURES, NcaProcess, Receiver, encode_tuple, stream_bytes

KEY = 0x0123456789ABCDEF


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "nca-cache"
    return build_nca((FIXTURES / "copy_query.c").read_text(), "ntf_relay", cache).path


def rows(first: int, n: int) -> list[bytes]:
    return [encode_tuple({"i": first + k, "s": f"row {first + k}"}) for k in range(n)]


def send_all(port: int, data: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(data)
    return s


def test_keyed_port_ignores_strays_and_takes_its_streams(relay):
    r = Receiver()
    nca = NcaProcess(relay, inputs=1)
    try:
        nca.configure(dests=[(0, r.port, 0, 1)], expect=[(0, 2)], keys=[(0, KEY)])
        nca.send("execute 0")
        port = nca.ports[0]
        # What a stale sender of another job would send: a whole, valid NTF1 stream with id 0;
        # then a keyed stream with another key; then one that never sends its header.
        strays = [send_all(port, stream_bytes(0, rows(900, 3))),
                  send_all(port, stream_bytes(1, rows(950, 2), key=KEY ^ 1)),
                  send_all(port, b"NTFK")]
        strays[-1].shutdown(socket.SHUT_WR)
        time.sleep(0.2)
        good = [send_all(port, stream_bytes(i, rows(100 * i, 5 + i), key=KEY)) for i in range(2)]
        done = nca.event("done")
        [out] = r.streams(1)
        assert sorted(out.tuples) == sorted(rows(0, 5) + rows(100, 6))
        assert done["stats"]["tuples_in"] == 11
        ignored = [m for m in nca.logs if "ignored a connection" in m]
        assert len(ignored) == 3, nca.logs
        assert any("no keyed stream header" in m for m in ignored)
        assert any("wrong stream key" in m for m in ignored)
        assert any("connection closed" in m for m in ignored)
        assert nca.close() == 0
        for s in strays + good:
            s.close()
    finally:
        nca.kill()
        r.close()


def test_sender_opens_keyed_streams(relay):
    r = Receiver()
    nca = NcaProcess(relay, inputs=1)
    try:
        nca.configure(dests=[(0, r.port, 3, 1, KEY)], expect=[(0, 1)])
        nca.send("execute 0")
        send_all(nca.ports[0], stream_bytes(0, rows(0, 4))).close()
        nca.event("done")
        [out] = r.streams(1)
        assert out.raw[:16] == b"NTFK" + struct.pack("<IQ", 3, KEY)
        assert (out.stream_id, out.key, out.count, out.tuples) == (3, KEY, 4, rows(0, 4))
    finally:
        nca.kill()
        r.close()


def test_port_stops_listening_once_its_streams_are_in(relay):
    """A connection queued behind the expected streams is refused at once (its sender fails with
    a clear error) instead of sitting unread in the backlog, which used to hang such a job."""
    r = Receiver(read=False)  # the relay blocks on its output, so the phase stays running
    nca = NcaProcess(relay, inputs=1)
    try:
        nca.configure(dests=[(0, r.port, 0, 1)], expect=[(0, 1)])
        nca.send("execute 0")
        first = socket.create_connection(("127.0.0.1", nca.ports[0]))
        late = socket.create_connection(("127.0.0.1", nca.ports[0]))  # in the backlog, after it
        first.sendall(stream_bytes(0, rows(0, 2)))
        late.settimeout(10)
        with pytest.raises(ConnectionResetError):
            late.sendall(stream_bytes(0, []))
            assert late.recv(1) == b""  # a reset may show on the read rather than the write
            raise ConnectionResetError("closed")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", nca.ports[0]), timeout=5).close()
        assert nca.proc.poll() is None
        first.close()
        late.close()
    finally:
        nca.kill()
        r.close()


@pytest.mark.parametrize("line,message", [
    ("key 0 0123", "16 hex digits"),
    ("key 0 0000000000000000", "not zero"),
    ("key 0 01234567zz abcdef", "wrong number of arguments"),
    ("key 3 0123456789abcdef", "no input port 3"),
    ("dest 0 127.0.0.1 9 0 1 key 12", "16 hex digits"),
    ("dest 0 127.0.0.1 9 0 1 tcp key", "unexpected key"),
    ("dest 0 127.0.0.1 9 0 1 udp 0 0 key 0123456789abcdef", "keys are for TCP"),
])
def test_malformed_key_commands(relay, line, message):
    nca = NcaProcess(relay, inputs=1)
    try:
        nca.send(line)
        ev = nca.event("error")
        assert message in ev["message"], ev
        assert nca.wait() != 0
    finally:
        nca.kill()
