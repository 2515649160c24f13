"""Version 2 of the UDP transport (docs/udp-transport.md, "Version 2"): acknowledged streams whose
senders repeat what is lost. The C runtime's senders and receivers (the NTF relay with the copy
fixture, the JSON scan) and the Python client's UdpReceiver over loopback, through the lossy relay
(jumpgate/deploy/udp_relay.py) where loss is wanted; datagrams written by hand where the exact
acknowledgements are checked; and every way a version 2 stream can really be lost failing in
bounded time with a message naming the stream, the datagram and the peer."""
from __future__ import annotations

import json
import random
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from jumpgate.client.udp import UdpReceiver
from jumpgate.contract import udp
from jumpgate.contract.ntf import NtfLayout
from jumpgate.deploy.udp_relay import Faults, RelayProcess
from jumpgate.ncas.software.build import build_nca
from jumpgate.ncas.software.codegen import generate_scan_query
from jumpgate.ncas.software.codegen.golden import scan_chain

from .fixtures.runtime_harness import (
    COPY_FIELDS,
    COPY_FIXED,
    FIXTURES,
    NcaProcess,
    decode_tuple,
    encode_tuple,
)

COPY_LAYOUT = NtfLayout.from_json({"null_bytes": 8, "fixed_size": COPY_FIXED, "variable": True, "fields": [
    {"name": n, "type": "decimal(10,2)" if t == "decimal" else t, "offset": o,
     "size": 1 if t == "boolean" else 4 if t in ("int32", "date") else 8, "null_bit": i}
    for i, (n, t, o) in enumerate(COPY_FIELDS)]})


@pytest.fixture(scope="module")
def copy_nca(tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "nca-cache"
    return build_nca((FIXTURES / "copy_query.c").read_text(), "ntf_relay", cache).path


@pytest.fixture(scope="module")
def scan_nca(tmp_path_factory):
    ops, layout = scan_chain({"k": "int64", "v": "decimal(7,2)"}, [])
    return build_nca(generate_scan_query(ops, layout), "scan_json", tmp_path_factory.getbasetemp() / "nca-cache").path


def tuples(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    return [encode_tuple({"i": seed * 100_000 + k, "l": rng.randint(-2**63, 2**63 - 1), "s": "é" * rng.choice([0, 3, 40]),
                          "d": None if rng.random() < 0.2 else rng.randint(-10**9, 10**9)}) for k in range(n)]


def v1_stream(stream: int, ts: list[bytes], per: int) -> list[bytes]:
    out = [udp.data_datagram(stream, i, ts[a:a + per]) for i, a in enumerate(range(0, len(ts), per))]
    return out + [udp.end_datagram(stream, len(out), len(ts))] * udp.END_COPIES


def send_all(port: int, dgrams: list[bytes], sock: socket.socket | None = None) -> None:
    s = sock or socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for d in dgrams:
            s.sendto(d, ("127.0.0.1", port))
    finally:
        if sock is None:
            s.close()


def copy_relay(binary, expected: int, threads: int, dest: int | None, params: dict | None = None) -> NcaProcess:
    """The copy NCA receiving UDP on input port 0 (`expected` streams), sending version 2 to `dest`."""
    nca = NcaProcess(binary, inputs=1, extra_args=("--udp-inputs", "0"))
    lines = [f"threads {threads}", f"expect 0 {expected}", *(f"param {k} {v}" for k, v in (params or {}).items())]
    if dest is not None:
        lines.append(f"dest 0 127.0.0.1 {dest} 0 {threads} udp 0 0 v2")
    nca.send(*lines, "execute 0")
    return nca


@pytest.mark.parametrize("loss", [0.01, 0.05])
def test_nca_to_nca_to_the_client_through_lossy_relays_loses_nothing(copy_nca, loss):
    """Python -> copy NCA A -(relay)-> copy NCA B -(relay)-> UdpReceiver; both relays drop `loss`,
    duplicate 1% and reorder 1% of the datagrams both ways. Every tuple arrives exactly once, and
    the counters say what was repaired."""
    inputs = {s: tuples(s, 6000) for s in range(2)}
    faults = Faults(loss=loss, dup=0.01, reorder=0.01, depth=3, seed=int(loss * 100))
    out = UdpReceiver()
    out.start(2, COPY_LAYOUT)
    relays: list[RelayProcess] = []
    ncas: list[NcaProcess] = []
    try:
        relays.append(RelayProcess(("127.0.0.1", out.port), faults))
        ncas.append(copy_relay(copy_nca, 2, 2, relays[-1].port))  # B
        relays.append(RelayProcess(("127.0.0.1", ncas[-1].ports[0]), faults))
        ncas.append(copy_relay(copy_nca, 2, 2, relays[-1].port))  # A
        a, b = ncas[1], ncas[0]
        for s, ts in inputs.items():
            send_all(a.ports[0], v1_stream(s, ts, 7))
        done_a, done_b = a.event("done", timeout=120), b.event("done", timeout=120)
        assert out.wait(30), out.error
        got = out.table()
        sent = sorted(decode_tuple(t)["i"] for ts in inputs.values() for t in ts)
        assert sorted(got.column("i").to_pylist()) == sent
        sa, sb = done_a["stats"], done_b["stats"]
        assert sa["tuples_out"] == sb["tuples_in"] == sb["tuples_out"] == len(sent)
        for stats in (sa, sb):  # every hop lost datagrams, and its sender repeated them
            assert stats["udp_retransmitted"] > 0
            assert stats["udp_retransmitted_share"] == pytest.approx(stats["udp_retransmitted"] / stats["udp_sent"],
                                                                     abs=1e-5)
        assert sb["udp_gap_reports"] > 0 and sb["udp_acks"] > 0 and sb["udp_duplicates"] > 0
        assert out.stats()["gap_reports"] > 0
        reports = [r.stop() for r in relays]
        assert all(r["forward"]["dropped"] > 0 and r["back"]["received"] > 0 for r in reports)
    finally:
        for r in relays:
            r.stop()
        for n in ncas:
            n.kill()
        out.close()


def test_a_scan_sends_one_tuple_per_datagram_to_the_client_through_loss(tmp_path, scan_nca):
    """The JSON scan (C sender) straight to the client's UdpReceiver through the relay at 5% loss."""
    rows = [{"k": i, "v": f"{i}.25"} for i in range(4000)]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, layout = scan_chain({"k": "int64", "v": "decimal(7,2)"}, [])
    out = UdpReceiver()
    out.start(2, layout)
    relay = RelayProcess(("127.0.0.1", out.port), Faults(loss=0.05, dup=0.01, reorder=0.01, seed=9))
    nca = NcaProcess(scan_nca)
    try:
        nca.send("threads 2", f"file {tmp_path / 't.jsonl'}", f"dest 0 127.0.0.1 {relay.port} 0 2 udp 0 1 v2",
                 "execute 0")
        done = nca.event("done", timeout=120)
        assert out.wait(30), out.error
        assert sorted(out.table().column("k").to_pylist()) == list(range(4000))
        assert done["stats"]["udp_retransmitted"] > 0 and out.datagrams == 4000
    finally:
        relay.stop()
        nca.kill()
        out.close()


def read_acks(sock: socket.socket, quiet: float = 0.3) -> list[tuple[udp.Header, list[int]]]:
    """The ACKs that arrive on `sock` until it has been quiet for `quiet` seconds."""
    acks = []
    sock.settimeout(quiet)
    while True:
        try:
            acks.append(udp.parse_ack(sock.recv(4096)))
        except TimeoutError:
            return acks


def test_the_runtime_acknowledges_reports_gaps_and_answers_a_repeated_end_after_the_phase(copy_nca):
    ts = tuples(3, 40)
    data = [udp.data_datagram(0, i, ts[4 * i:4 * i + 4], version=2) for i in range(10)]
    end = udp.end_datagram(0, 10, 40, version=2)
    nca = copy_relay(copy_nca, 1, 1, None)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            send_all(nca.ports[0], [d for i, d in enumerate(data) if i not in (3, 7)], s)
            h, arrived = read_acks(s)[-1]
            assert (h.seq, arrived, h.flags) == (3, [4, 5, 6, 8, 9], udp.F_ACK)  # 0-2 in order; 3 and 7 missing
            send_all(nca.ports[0], [data[3][:18] + bytes([udp.F_RETX, 0]) + data[3][20:], data[7], end], s)
            h, arrived = read_acks(s)[-1]
            assert (h.seq, arrived, h.flags) == (10, [], udp.F_ACK | udp.F_END)  # complete
            done = nca.event("done")
            assert done["stats"]["tuples_in"] == 40 and done["stats"]["udp_gap_reports"] >= 1
            send_all(nca.ports[0], [end], s)  # as if our final ACK had been lost: the phase is over
            h, _ = read_acks(s)[-1]
            assert (h.seq, h.flags) == (10, udp.F_ACK | udp.F_END)
        finally:
            nca.kill()


def test_a_version_2_stream_whose_sender_stopped_fails_after_the_idle_timeout_not_the_grace(copy_nca):
    ts = tuples(4, 40)
    data = [udp.data_datagram(0, i, ts[4 * i:4 * i + 4], version=2) for i in range(10)]
    nca = copy_relay(copy_nca, 1, 1, None, {"udp.grace_ms": 100, "udp.idle_ms": 800})
    try:
        t0 = time.monotonic()
        send_all(nca.ports[0], data[:5] + data[6:] + [udp.end_datagram(0, 10, 40, version=2)])
        ev = nca.event(timeout=30)
        waited = time.monotonic() - t0
        assert ev["event"] == "error", ev
        assert ev["message"].startswith("input port 0 stream 0: UDP loss: 9 of 10 datagrams arrived (first missing: 5) "
                                        "and nothing more for "), ev
        assert "the sender stopped repeating them (param udp.idle_ms)" in ev["message"]
        assert 0.7 <= waited < 10  # the idle timeout, not the 100 ms grace: the sender might still repeat it
    finally:
        nca.kill()


@pytest.mark.parametrize("dgrams,message", [
    ([b"NTU3" + udp.data_datagram(0, 0, [b"x" * 64])[4:]],
     "input port 0: a datagram of UDP transport version 3 (magic NTU3) arrived; this receiver takes versions 1 and 2"),
    ([udp.data_datagram(0, 0, [b"x" * 64]), udp.data_datagram(0, 1, [b"x" * 64], version=2)],
     "input port 0 stream 0: a version 2 datagram on a version 1 stream"),
    ([udp.data_datagram(0, 0, [b"x" * 64], version=2, flags=udp.F_FLUSH)],
     "input port 0 stream 0: datagram with unexpected flags 0x4"),
])
def test_what_a_receiver_cannot_take_fails_the_phase_saying_so(copy_nca, dgrams, message):
    nca = copy_relay(copy_nca, 1, 1, None)
    try:
        send_all(nca.ports[0], dgrams)
        ev = nca.event()
        assert ev["event"] == "error" and message in ev["message"], ev
    finally:
        nca.kill()


def test_acknowledgements_that_reach_the_runtimes_receiver_are_ignored(copy_nca):
    """An ACK travels from a receiver to a sender; one that reaches a receiver (a switch's receipt
    sent astray, an ACK looped back) is nobody's data: the stream it names, or one beyond the
    expected streams, goes on and completes as if it had not come (as the client's UdpReceiver
    does), and nothing answers it."""
    ts = tuples(5, 40)
    data = [udp.data_datagram(0, i, ts[4 * i:4 * i + 4], version=2) for i in range(10)]
    strays = [udp.receipt_datagram(0, 3, echo=7), udp.ack_datagram(0, 10, [], complete=True),
              udp.ack_datagram(0, 2, [4, 5]), udp.receipt_datagram(9, 0)]  # stream 9: not expected
    nca = copy_relay(copy_nca, 1, 1, None)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            send_all(nca.ports[0], strays[:2] + data[:5] + strays[2:] + data[5:], s)
            h, arrived = read_acks(s)[-1]
            assert (h.seq, arrived, h.flags) == (10, [], udp.F_ACK)  # its own ACK, of its data alone
            send_all(nca.ports[0], [udp.end_datagram(0, 10, 40, version=2)], s)
            done = nca.event("done")
            assert done["stats"]["tuples_in"] == 40 and done["stats"]["udp_received"] == 11
            acks = read_acks(s)
            assert acks and acks[-1][0].flags == udp.F_ACK | udp.F_END
            send_all(nca.ports[0], strays, s)  # after the phase (linger): still nothing to answer
            assert read_acks(s) == []
        finally:
            nca.kill()


def test_a_sender_whose_receiver_never_acknowledges_gives_up_naming_stream_datagram_and_peer(tmp_path, scan_nca):
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"k": i, "v": "1.00"}) + "\n" for i in range(100)))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # takes datagrams, answers nothing
        silent.bind(("127.0.0.1", 0))
        port = silent.getsockname()[1]
        nca = NcaProcess(scan_nca)
        try:
            t0 = time.monotonic()
            nca.send(f"file {tmp_path / 't.jsonl'}", "param udp.rto_min_ms 5", "param udp.rto_max_ms 20",
                     "param udp.max_tries 4", f"dest 0 127.0.0.1 {port} 0 1 udp 0 0 v2", "execute 0")
            ev = nca.event(timeout=30)
            assert ev["event"] == "error", ev
            assert ev["message"].startswith(f"output port 0: UDP stream 0 to 127.0.0.1:{port}: datagram 0 timed out 4 "
                                            "times without an acknowledgement"), ev
            assert time.monotonic() - t0 < 10
        finally:
            nca.kill()


def test_a_sender_whose_receiver_is_gone_fails_at_once(tmp_path, scan_nca):
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"k": i, "v": "1.00"}) + "\n" for i in range(100)))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    nca = NcaProcess(scan_nca)  # the port is closed: the kernel answers with port unreachable
    try:
        t0 = time.monotonic()
        nca.send(f"file {tmp_path / 't.jsonl'}", f"dest 0 127.0.0.1 {port} 0 1 udp 0 0 v2", "execute 0")
        ev = nca.event(timeout=30)
        assert ev["event"] == "error", ev
        assert f"UDP stream 0 to 127.0.0.1:{port}: the receiver is gone (Connection refused)" in ev["message"]
        assert time.monotonic() - t0 < 5
    finally:
        nca.kill()


def test_a_sender_waits_for_a_receiver_that_is_behind_and_ends_only_once_acknowledged(tmp_path, scan_nca):
    """Flow control: a receiver that does not read for a second. The sender keeps at most its
    window in flight (here 131,072 bytes) instead of flooding it, its phase is not done before the
    receiver has everything, and then nothing is missing."""
    _, layout = scan_chain({"k": "int64", "v": "decimal(7,2)"}, [])
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"k": i, "v": "1.00"}) + "\n" for i in range(20000)))
    lines = [f"file {tmp_path / 't.jsonl'}", "param udp.window_bytes 131072"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as late:
        late.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        late.bind(("127.0.0.1", 0))  # bound but not read: what a receiver that is behind looks like
        scan = NcaProcess(scan_nca)
        try:
            scan.send(*lines, f"dest 0 127.0.0.1 {late.getsockname()[1]} 0 1 udp 0 1 v2", "execute 0")
            time.sleep(1.0)
            assert scan.events.empty()  # not done: nothing was acknowledged
            late.setblocking(False)
            backlog = 0
            while True:
                try:
                    backlog += len(late.recv(2048))
                except BlockingIOError:
                    break
            # the window's datagrams and the repeats of its first ones, not the stream's 1 MB
            assert 0 < backlog <= 2 * 131072
        finally:
            scan.kill()
    out = UdpReceiver()  # bound now, reading only from start() on
    scan = NcaProcess(scan_nca)
    try:
        scan.send(*lines, f"dest 0 127.0.0.1 {out.port} 0 1 udp 0 1 v2", "execute 0")
        time.sleep(1.0)
        assert scan.events.empty()
        out.start(1, layout)
        done = scan.event("done", timeout=60)
        assert out.wait(10) and sorted(out.table().column("k").to_pylist()) == list(range(20000))
        assert done["stats"]["wait_out_ns"] >= 0.9e9  # it waited for the receiver, and lost nothing
    finally:
        scan.kill()
        out.close()


def test_dpdk_sends_version_1_only(tmp_path, scan_nca):
    (tmp_path / "t.jsonl").write_text(json.dumps({"k": 1, "v": "1.00"}) + "\n")
    nca = NcaProcess(scan_nca)
    try:
        nca.send(f"file {tmp_path / 't.jsonl'}", "param udp.dpdk -l%200", "dest 0 127.0.0.1 9 0 1 udp 0 0 v2",
                 "execute 0")
        ev = nca.event()
        assert ev["event"] == "error" and "asks for UDP version 2 (acknowledged), which DPDK" in ev["message"], ev
    finally:
        nca.kill()


# ------------------------------------------------------------------ the client's receiver

def test_the_client_receiver_acknowledges_reports_gaps_and_answers_after_it_is_done():
    from jumpgate.client.testing import encode_tuple as client_tuple
    from jumpgate.contract.ntf import generate_ntf
    from jumpgate.contract.types import Field, Schema, parse_type

    layout = generate_ntf(Schema((Field("k", parse_type("int64")),)))
    data = [udp.data_datagram(0, i, [client_tuple((i,), layout)], version=2) for i in range(10)]
    end = udp.end_datagram(0, 10, 10, version=2)
    r = UdpReceiver()
    r.start(1, layout)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            send_all(r.port, [d for i, d in enumerate(data) if i != 2], s)
            h, arrived = read_acks(s)[-1]
            assert (h.seq, arrived) == (2, [3, 4, 5, 6, 7, 8, 9])
            send_all(r.port, [data[2], data[2], end], s)  # the repeat twice (a duplicate), then the END
            h, _ = read_acks(s)[-1]
            assert h.flags == udp.F_ACK | udp.F_END and h.seq == 10
            assert r.wait(5) and r.error is None and r.table().column("k").to_pylist() == list(range(10))
            send_all(r.port, [end], s)  # done, but a sender whose final ACK was lost still hears it again
            assert read_acks(s)[-1][0].flags == udp.F_ACK | udp.F_END
            assert r.stats() == {"datagrams": 10, "duplicates": 1, "acks": r.acks_sent, "gap_reports": r.gap_reports}
            assert r.gap_reports >= 1
        finally:
            r.close()


def _datagrams(sock: socket.socket, within: float = 10.0, quiet: float = 0.1) -> list[tuple[udp.Header, bytes, tuple]]:
    """What arrives on `sock`: the first datagram within `within` seconds, then every one until
    none has come for `quiet` seconds."""
    out = []
    sock.settimeout(within)
    while True:
        try:
            data, addr = sock.recvfrom(2048)
        except TimeoutError:
            return out
        out.append((udp.parse_header(data), data, addr))
        sock.settimeout(quiet)


def _first_64(sock: socket.socket) -> list[tuple[udp.Header, bytes, tuple]]:
    """A stream's datagrams while nothing answers: until datagrams 0 .. 63 have all come (and
    repeats of them, at the initial retransmission timeout of 200 ms), then for half a second."""
    got: list[tuple[udp.Header, bytes, tuple]] = []
    deadline = time.monotonic() + 20
    while len({h.seq for h, _, _ in got}) < 64 and time.monotonic() < deadline:
        got += _datagrams(sock, 1.0, 0.05)
    return got + _datagrams(sock, 0.5, 0.5)


@contextmanager
def _scan_towards_a_socket(tmp_path, scan_nca) -> Iterator[tuple[socket.socket, NcaProcess]]:
    """The JSON scan NCA over 2,000 rows (an int64 key and a decimal), and a UDP socket on loopback
    standing in for its receiver (the test sends the scan's `dest` line to it); the scan is killed
    and the socket closed afterwards."""
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"k": i, "v": "1.00"}) + "\n" for i in range(2000)))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind(("127.0.0.1", 0))
        scan = NcaProcess(scan_nca)
        try:
            yield sock, scan
        finally:
            scan.kill()


def test_a_sender_keeps_64_datagrams_in_flight_towards_a_receiver_that_answers_with_receipts(tmp_path, scan_nca):
    """Towards a switch (docs/udp-transport.md, "A switch in a version 2 path"): its ring of 64
    sequence numbers per stream holds only while datagram s + 64 leaves after s was acknowledged,
    and its endpoint says so (`dest ... v2 window 64`). The stream starts within it, before the
    receiver has said anything: with no answer, only datagrams 0 .. 63 come (and their repeats).
    Receipts (SACK), one per datagram, keep it there; the END answer ends the stream, and every
    tuple came."""
    with _scan_towards_a_socket(tmp_path, scan_nca) as (switch, scan):
        scan.send(f"file {tmp_path / 't.jsonl'}", "param udp.rto_min_ms 50",
                  f"dest 0 127.0.0.1 {switch.getsockname()[1]} 0 1 udp 0 4 v2 window 64", "execute 0")
        first = _first_64(switch)
        assert {h.seq for h, _, _ in first} == set(range(64))  # the whole bound, and no more
        taken: dict[int, bytes] = {}
        pending = first
        end = None
        while end is None or len(taken) < end.seq:
            highest_receipted = max(taken, default=-1)
            for h, data, addr in pending:
                if h.flags & udp.F_END:
                    end = h
                    continue
                # a datagram leaves only once the one 64 before it was acknowledged
                assert h.seq < 64 or h.seq - 64 in taken, h.seq
                assert h.seq <= highest_receipted + 64
                taken[h.seq] = data
                switch.sendto(udp.receipt_datagram(h.stream, h.seq, h.stamp), addr)
            pending = [] if end is not None and len(taken) == end.seq else _datagrams(switch)
            assert pending or (end is not None and len(taken) == end.seq), "the sender stopped"
        switch.sendto(udp.ack_datagram(0, end.seq, complete=True), first[0][2])  # the END answer
        done = scan.event("done", timeout=30)
        assert done["stats"]["tuples_out"] == 2000
        got = sorted(k for data in taken.values() for k in _keys(data))
        assert got == list(range(2000))


def _keys(datagram: bytes) -> list[int]:
    """The int64 key (first field) of each tuple of a data datagram of the scan's layout."""
    h = udp.parse_header(datagram)
    at, out = udp.HEADER_SIZE, []
    for _ in range(h.count):
        n = int.from_bytes(datagram[at:at + 4], "little")
        out.append(int.from_bytes(datagram[at + 4 + 8:at + 4 + 16], "little", signed=True))
        at += 4 + n
    return out


def test_a_receiver_that_announces_no_bound_gets_the_whole_window_from_the_first_datagram(tmp_path, scan_nca):
    """A receiver that tracks the whole stream (the runtime's, the client's) announces no bound:
    nothing holds the sender to 64 datagrams until it hears from the receiver, so all 500 of the
    stream's data datagrams (36 KB, far within udp.window_bytes) leave before any ACK."""
    with _scan_towards_a_socket(tmp_path, scan_nca) as (receiver, scan):
        scan.send(f"file {tmp_path / 't.jsonl'}", "param udp.rto_min_ms 1000",
                  f"dest 0 127.0.0.1 {receiver.getsockname()[1]} 0 1 udp 0 4 v2", "execute 0")
        first = _datagrams(receiver, 10, 0.5)  # no answer: what left before the first timeout
        data = {h.seq for h, _, _ in first if not h.flags & udp.F_END}
        assert data == set(range(500))
        assert not any(h.flags & udp.F_RETX for h, _, _ in first)  # first copies, not the timer's repeats


def test_a_receipt_from_a_receiver_that_announced_no_bound_fails_the_stream(tmp_path, scan_nca):
    """Receipts come from a ring of sequence numbers (a switch) that deduplicates only while the
    sender keeps its bound; a receiver that sends them without having announced one may already
    have taken a repeat twice, so the stream fails naming the misconfiguration."""
    with _scan_towards_a_socket(tmp_path, scan_nca) as (switch, scan):
        scan.send(f"file {tmp_path / 't.jsonl'}", "param udp.rto_min_ms 1000",
                  f"dest 0 127.0.0.1 {switch.getsockname()[1]} 0 1 udp 0 4 v2", "execute 0")
        h, _, addr = _datagrams(switch, 10, 0.3)[0]
        switch.sendto(udp.receipt_datagram(h.stream, h.seq, h.stamp), addr)
        ev = scan.event(timeout=30)
        assert ev["event"] == "error", ev
        assert (f"the receiver sent a receipt (SACK) for datagram {h.seq} but announced no bound on datagrams "
                "in flight (dest ... v2 window N") in ev["message"], ev
