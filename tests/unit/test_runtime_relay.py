"""The runtime's TCP receiver and NTF decoder, through the NTF relay NCA: NTF in on input port 0,
the copy fixture's row function, NTF out on port 0. The copy fixture re-encodes exactly the
contract layout it decodes, so every input tuple must come out byte for byte.
"""
from __future__ import annotations

import random
import socket
import struct
import threading
import time

import pytest

from jumpgate.ncas.software.build import build_nca

from .fixtures.runtime_harness import (
    FIXTURES,
    NcaProcess,
    Receiver,
    encode_tuple,
    stream_bytes,
)


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "nca-cache"
    return build_nca((FIXTURES / "copy_query.c").read_text(), "ntf_relay", cache).path


def tuples(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        row = {"b": rng.random() < 0.5, "i": k, "l": rng.randint(-2**63, 2**63 - 1),
               "f": rng.random(), "d": rng.randint(-10**9, 10**9), "dt": rng.randint(-1000, 30000),
               "s": "é" * rng.choice([0, 3, 40])}
        for name in rng.sample(sorted(row), rng.randint(0, 3)):
            row[name] = None
        out.append(encode_tuple(row))
    return out


def send(port: int, data: bytes, pieces: int = 1, seed: int = 0) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        cuts = sorted(random.Random(seed).sample(range(1, len(data)), min(pieces - 1, len(data) - 1)))
        try:
            for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
                s.sendall(data[a:b])
            # half-close (a stream without end marker then ends), and wait for the relay to close
            # its side, so that it reads everything rather than seeing a reset
            s.shutdown(socket.SHUT_WR)
            s.settimeout(10)
            s.recv(1)
        except OSError:  # the relay hangs up on a broken stream, or exits after the error
            pass


def start(relay, threads: int, expected: int, receiver: Receiver | None) -> NcaProcess:
    nca = NcaProcess(relay, inputs=1)
    assert len(nca.ports) == 1
    dests = [(0, receiver.port, 0, threads)] if receiver else []
    nca.configure(dests=dests, threads=threads, expect=[(0, expected)])
    nca.send("execute 0")
    return nca


def feed(port: int, payloads: list[bytes], pieces: int = 1) -> list[threading.Thread]:
    ts = [threading.Thread(target=send, args=(port, p, pieces, i), daemon=True) for i, p in enumerate(payloads)]
    for t in ts:
        t.start()
    return ts


@pytest.mark.parametrize("threads,nstreams,pieces", [(1, 1, 1), (1, 3, 50), (2, 2, 7), (2, 5, 200)])
def test_relay_passes_tuples_through(relay, threads, nstreams, pieces):
    inputs = [tuples(s, 3000 + 100 * s) for s in range(nstreams)]
    payloads = [stream_bytes(s, ts) for s, ts in enumerate(inputs)]
    r = Receiver()
    nca = start(relay, threads, nstreams, r)
    try:
        for t in feed(nca.ports[0], payloads, pieces):
            t.join()
        ev = nca.event("done")
        streams = r.streams(threads)
        assert [s.stream_id for s in streams] == list(range(threads))
        assert all(s.count == len(s.tuples) for s in streams)
        sent = sorted(t for ts in inputs for t in ts)
        assert sorted(t for s in streams for t in s.tuples) == sent
        assert ev["stats"]["tuples_in"] == ev["stats"]["tuples_out"] == len(sent)
        assert ev["stats"]["bytes_in"] == sum(len(p) for p in payloads)
        assert ev["stats"]["threads"] == threads and 0 < ev["stats"]["cpu_ns"]
        assert nca.close() == 0
    finally:
        nca.kill()
        r.close()


def test_relay_huge_tuple(relay):
    big = encode_tuple({"i": 1, "s": "q" * (5 << 20)})
    small = encode_tuple({"i": 2})
    r = Receiver()
    nca = start(relay, 1, 1, r)
    try:
        feed(nca.ports[0], [stream_bytes(0, [small, big, small])], pieces=40)[0].join()
        nca.event("done")
        [s] = r.streams(1)
        assert s.tuples == [small, big, small]
    finally:
        nca.kill()
        r.close()


def test_relay_empty_streams(relay):
    r = Receiver()
    nca = start(relay, 2, 3, r)
    try:
        for t in feed(nca.ports[0], [stream_bytes(i, []) for i in range(3)]):
            t.join()
        assert nca.event("done")["stats"]["tuples_in"] == 0
        assert [s.count for s in r.streams(2)] == [0, 0]
    finally:
        nca.kill()
        r.close()


BROKEN = [
    (stream_bytes(0, tuples(1, 10), end=False), "closed before the end marker"),
    (stream_bytes(0, tuples(1, 10), count=11), "end marker counts 11 tuples, received 10"),
    (b"NTF2" + bytes(4) + bytes(12), "not NTF1"),
    (stream_bytes(7, []), "stream id 7"),
    (stream_bytes(0, [b"\x00" * 16]), "malformed tuple: tuple shorter"),
    (stream_bytes(0, [bytes(48) + struct.pack("<II", 60, 100) + bytes(8)]), "string field points outside"),
    (b"NTF1" + bytes(4) + struct.pack("<I", 0x80000000), "invalid tuple length"),
    (stream_bytes(0, []) + b"extra", "bytes after the end marker"),
]


@pytest.mark.parametrize("payload,message", BROKEN)
def test_relay_broken_streams(relay, payload, message):
    r = Receiver()
    nca = start(relay, 1, 1, r)
    try:
        feed(nca.ports[0], [payload])
        ev = nca.event("error")
        assert message in ev["message"], ev
        assert nca.wait() == 1
    finally:
        nca.kill()
        r.close()


def test_relay_duplicate_stream_id(relay):
    r = Receiver()
    nca = start(relay, 1, 2, r)
    try:
        feed(nca.ports[0], [stream_bytes(0, []), stream_bytes(0, [])])
        assert "received twice" in nca.event("error")["message"]
    finally:
        nca.kill()
        r.close()


def test_relay_needs_expect(relay):
    nca = NcaProcess(relay, inputs=1)
    try:
        nca.send("execute 0")
        assert "expect" in nca.event("error")["message"]
    finally:
        nca.kill()


def test_no_sockets_or_processes_left_behind(relay):
    """After exit the input port no longer listens and nothing survives in the process group."""
    import os

    nca = NcaProcess(relay, inputs=3)
    ports = nca.ports
    assert len(set(ports)) == 3
    with socket.create_connection(("127.0.0.1", ports[0])):
        pass
    assert nca.close() == 0
    nca.kill()
    with pytest.raises(ProcessLookupError):
        os.killpg(nca.proc.pid, 0)
    for p in ports:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", p), timeout=2).close()


def test_stdin_eof_while_waiting_for_streams(relay):
    r = Receiver()
    nca = start(relay, 2, 2, r)
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        nca.proc.stdin.close()
        nca.wait(timeout=5)
        assert time.monotonic() - t0 < 2
    finally:
        nca.kill()
        r.close()
