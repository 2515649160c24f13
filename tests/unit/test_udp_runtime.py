"""The C runtime's UDP transport (docs/udp-transport.md) over loopback: the NTF relay with the copy
fixture (which re-encodes exactly the layout it decodes) receiving UDP (--udp-inputs) and sending
UDP (`dest ... udp`), checked byte for byte by the Python client's UdpReceiver; and every way a
stream can go wrong failing the phase with a message that names the stream."""
from __future__ import annotations

import json
import random
import socket
import struct
import time

import pytest

from jumpgate.client.udp import UdpReceiver
from jumpgate.contract import udp
from jumpgate.contract.ntf import NtfLayout
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

UDP_SEGMENT = 103  # <netinet/udp.h>: send a run of datagrams of this size in one call (UDP GSO)
COPY_LAYOUT = NtfLayout.from_json({"null_bytes": 8, "fixed_size": COPY_FIXED, "variable": True, "fields": [
    {"name": n, "type": "decimal(10,2)" if t == "decimal" else t, "offset": o,
     "size": 1 if t == "boolean" else 4 if t in ("int32", "date") else 8, "null_bit": i}
    for i, (n, t, o) in enumerate(COPY_FIELDS)]})


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "nca-cache"
    return build_nca((FIXTURES / "copy_query.c").read_text(), "ntf_relay", cache).path


def tuples(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    return [encode_tuple({"i": k, "l": rng.randint(-2**63, 2**63 - 1), "s": "é" * rng.choice([0, 3, 40]),
                          "d": None if rng.random() < 0.2 else rng.randint(-10**9, 10**9)}) for k in range(n)]


def datagrams(stream: int, ts: list[bytes], per: int) -> list[bytes]:
    out = [udp.data_datagram(stream, i, ts[a:a + per]) for i, a in enumerate(range(0, len(ts), per))]
    return out + [udp.end_datagram(stream, len(out), len(ts))] * 3


def start_relay(relay, expected: int, dest: tuple[int, int, int] | None, threads: int = 1,
                params: dict | None = None) -> NcaProcess:
    """A relay receiving UDP on input port 0; `dest` = (udp port, max bytes, max tuples)."""
    nca = NcaProcess(relay, inputs=1, extra_args=("--udp-inputs", "0"))
    lines = [f"threads {threads}", f"expect 0 {expected}"]
    lines += [f"param {k} {v}" for k, v in (params or {}).items()]
    if dest:
        lines.append(f"dest 0 127.0.0.1 {dest[0]} 0 {threads} udp {dest[1]} {dest[2]}")
    nca.send(*lines, "execute 0")
    return nca


def send(port: int, dgrams: list[bytes]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for d in dgrams:
            s.sendto(d, ("127.0.0.1", port))


@pytest.mark.parametrize("threads,streams,per,max_bytes,max_tuples", [
    (1, 1, 10, 0, 0), (2, 3, 1, 0, 1), (2, 4, 25, 700, 0), (1, 2, 7, 65507, 3)])
def test_udp_in_and_out_pass_tuples_through(relay, threads, streams, per, max_bytes, max_tuples):
    inputs = {s: tuples(s, 2000 + 300 * s) for s in range(streams)}
    out = UdpReceiver()
    out.start(threads, COPY_LAYOUT)
    nca = start_relay(relay, streams, (out.port, max_bytes, max_tuples), threads)
    try:
        for s, ts in inputs.items():
            send(nca.ports[0], datagrams(s, ts, per))
        done = nca.event("done")
        assert out.wait(10), out.error
        assert done["stats"]["tuples_in"] == done["stats"]["tuples_out"] == sum(map(len, inputs.values()))
        got = out.table()
        key = ("i", "l", "s", "d")
        sent = sorted(tuple(decode_tuple(t)[k] for k in key) for ts in inputs.values() for t in ts)
        rows = sorted(zip(*(got.column(k).to_pylist() for k in key), strict=True))
        assert [(i, v, s, d if d is None else int(d.scaleb(2))) for i, v, s, d in rows] == sent
        if max_tuples == 1:
            assert out.datagrams == got.num_rows  # one tuple per datagram, as towards a switch
        if max_bytes:
            assert out.datagrams >= sum(len(t) + 4 for ts in inputs.values() for t in ts) / (max_bytes - 24)
    finally:
        out.close()
        nca.kill()


def test_coalesced_runs_of_datagrams_are_cut_into_their_datagrams(relay):
    """GSO runs (as out_udp.c and the switch model send equal-size datagrams) reach the input
    coalesced (UDP_GRO): each datagram of a run counts, a run's shorter last one (the END) too."""
    rng = random.Random(2)
    ts = [encode_tuple({"i": k, "l": rng.randint(-2**63, 2**63 - 1), "s": "ab", "d": None}) for k in range(1000)]
    dgrams = datagrams(0, ts, 1)[:-2]  # one END copy: it ends the last run
    nca = start_relay(relay, 1, None)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for at in range(0, len(dgrams), 64):
                run = dgrams[at:at + 64]
                s.sendmsg([b"".join(run)], [(socket.SOL_UDP, UDP_SEGMENT, struct.pack("=H", len(run[0])))],
                           0, ("127.0.0.1", nca.ports[0]))
        done = nca.event("done")
        assert done["stats"]["tuples_in"] == 1000
    finally:
        nca.kill()


def test_duplicates_are_dropped(relay):
    ts = tuples(1, 500)
    out = UdpReceiver()
    out.start(1, COPY_LAYOUT)
    nca = start_relay(relay, 1, (out.port, 0, 0))
    try:
        dg = datagrams(0, ts, 5)
        send(nca.ports[0], dg[:50] + dg[:50] + dg[50:])
        done = nca.event("done")
        assert done["stats"]["tuples_in"] == 500
        assert out.wait(10) and out.table().num_rows == 500
    finally:
        out.close()
        nca.kill()


@pytest.mark.parametrize("mangle,message", [
    (lambda dg: dg[:5] + dg[6:], "UDP loss: 99 of 100 datagrams arrived (first missing: 5)"),
    (lambda dg: dg[:100] + [udp.end_datagram(0, 100, 999)], "END counts 999 tuples, received 500"),
    (lambda dg: dg[:100] + [udp.end_datagram(0, 100, 500, flags=udp.F_LOSS)], "reports UDP loss upstream"),
    (lambda dg: [b"XXXX" + dg[0][4:]] + dg[1:], "that is not NTU1"),
    (lambda dg: [udp.data_datagram(7, 0, [b"x" * 64])] + dg, "UDP stream id 7, but 1 streams are expected"),
    (lambda dg: [dg[0][:-3]] + dg[1:], "datagram 0 is malformed"),
    (lambda dg: dg[:100] + [udp.data_datagram(0, 100, [b"y" * 64])] + dg[100:], "101 data datagrams arrived, but END says 100"),
])
def test_broken_streams_fail_the_phase(relay, mangle, message):
    nca = start_relay(relay, 1, None, params={"udp.grace_ms": 200})
    try:
        send(nca.ports[0], mangle(datagrams(0, tuples(2, 500), 5)))
        ev = nca.event()
        assert ev["event"] == "error" and message in ev["message"], ev
        assert ev["message"].startswith("input port 0")
    finally:
        nca.kill()


def test_a_tuple_larger_than_a_datagram_fails_the_sender(tmp_path, relay):
    ops, layout = scan_chain({"s": "string"}, [])
    scan = build_nca(generate_scan_query(ops, layout), "scan_json", tmp_path.parent / "nca-cache").path
    (tmp_path / "t.jsonl").write_text(json.dumps({"s": "x" * 3000}) + "\n")
    out = UdpReceiver()
    nca = NcaProcess(scan)
    try:
        nca.send(f"file {tmp_path / 't.jsonl'}", f"dest 0 127.0.0.1 {out.port} 0 1 udp 1472 0", "execute 0")
        ev = nca.event()
        assert ev["event"] == "error" and "does not fit a UDP datagram of 1472 bytes" in ev["message"]
    finally:
        out.close()
        nca.kill()


def test_scan_sends_one_tuple_per_datagram_towards_a_switch(tmp_path):
    ops, layout = scan_chain({"k": "int64", "v": "decimal(7,2)"}, [])
    scan = build_nca(generate_scan_query(ops, layout), "scan_json", tmp_path.parent / "nca-cache").path
    rows = [{"k": i % 97, "v": f"{i}.25"} for i in range(3000)]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = UdpReceiver()
    out.start(2, layout)
    nca = NcaProcess(scan)
    try:
        nca.send("threads 2", f"file {tmp_path / 't.jsonl'}", f"dest 0 127.0.0.1 {out.port} 0 2 udp 0 1", "execute 0")
        done = nca.event("done")
        assert out.wait(10), out.error
        t = out.table()
        assert t.num_rows == out.datagrams == done["stats"]["tuples_out"] == 3000
        assert sorted(t.column("k").to_pylist()) == sorted(r["k"] for r in rows)
    finally:
        out.close()
        nca.kill()


def test_without_dpdk_in_the_binary_the_param_is_an_error(relay):
    nca = NcaProcess(relay, inputs=1, extra_args=("--udp-inputs", "0"))
    try:
        nca.send("param udp.dpdk -l%200", "expect 0 1", "execute 0")
        ev = nca.event()
        assert ev["event"] == "error" and "built without DPDK" in ev["message"]
    finally:
        nca.kill()


def test_a_stream_whose_end_was_lost_fails_after_the_idle_timeout(relay):
    """Every copy of stream 1's END dropped on purpose: the phase fails `udp.idle_ms` after the
    stream's last datagram, naming the port and the stream, instead of waiting for ever."""
    nca = start_relay(relay, 2, None, params={"udp.idle_ms": 400})
    try:
        d0, d1 = datagrams(0, tuples(3, 200), 5), datagrams(1, tuples(4, 300), 5)
        send(nca.ports[0], d0 + d1[:-3])  # stream 0 complete; stream 1 without its END
        t0 = time.monotonic()
        ev = nca.event(timeout=30)
        waited = time.monotonic() - t0
        assert ev["event"] == "error", ev
        assert ev["message"].startswith("input port 0 stream 1: no END datagram: nothing arrived for "), ev
        assert "after datagram 59 (60 data datagrams, 300 tuples received)" in ev["message"]
        assert 0.3 <= waited < 10
    finally:
        nca.kill()


def test_a_stream_of_which_nothing_arrived_fails_once_the_others_are_done(relay):
    nca = start_relay(relay, 3, None, params={"udp.idle_ms": 300})
    try:
        send(nca.ports[0], datagrams(0, tuples(5, 50), 5) + datagrams(2, tuples(6, 50), 5))
        ev = nca.event(timeout=30)
        assert ev["event"] == "error", ev
        assert ev["message"].startswith("input port 0 stream 1: no datagram arrived (not even END)"), ev
    finally:
        nca.kill()


def test_quiet_senders_within_the_idle_timeout_are_not_taken_for_lost_ones(relay):
    """The clock starts with a stream's first datagram (a sender may be slow to start: a switch
    sends nothing before its flush) and restarts with each one."""
    ts = tuples(7, 100)
    nca = start_relay(relay, 1, None, params={"udp.idle_ms": 500})
    try:
        time.sleep(1.0)  # twice the idle timeout before the first datagram
        dg = datagrams(0, ts, 10)
        for d in dg[:-3]:
            send(nca.ports[0], [d])
            time.sleep(0.15)  # 10 gaps of 150 ms: 1.5 s in all, each well within the timeout
        send(nca.ports[0], dg[-3:])
        done = nca.event("done", timeout=30)
        assert done["stats"]["tuples_in"] == 100
    finally:
        nca.kill()


def test_a_lost_end_fails_soon_after_the_senders_finished(relay):
    """`senders_done` (the control plane: every sender of the port finished, ENDs sent): a stream
    still without END fails the grace period later, not the idle timeout (60 s here) later."""
    nca = start_relay(relay, 2, None, params={"udp.idle_ms": 60000, "udp.grace_ms": 300})
    try:
        d0, d1 = datagrams(0, tuples(3, 200), 5), datagrams(1, tuples(4, 300), 5)
        send(nca.ports[0], d0 + d1[:-3])  # stream 1 without its END
        t0 = time.monotonic()
        nca.send("senders_done 0")
        ev = nca.event(timeout=30)
        waited = time.monotonic() - t0
        assert ev["event"] == "error", ev
        assert ev["message"].startswith("input port 0 stream 1: no END datagram: its senders finished "), ev
        assert "(60 data datagrams, 300 tuples received); the END was lost (UDP loss)" in ev["message"]
        assert 0.3 <= waited < 5
    finally:
        nca.kill()


def test_a_receiver_behind_its_senders_is_not_failed_for_their_notice(relay):
    """The END at the back of a full socket buffer: the notice is older than the grace period
    before the receiver even starts reading, but a stream fails only once the socket has been read
    dry without its END; here the END is there, and the phase completes."""
    ts = tuples(9, 6000)
    nca = NcaProcess(relay, inputs=1, extra_args=("--udp-inputs", "0"))
    try:
        nca.send("threads 1", "expect 0 1", "param udp.grace_ms 200")
        send(nca.ports[0], datagrams(0, ts, 1))  # queued unread: no phase runs yet
        nca.send("senders_done 0")
        time.sleep(0.5)  # the notice is now older than the grace period
        nca.send("execute 0")
        done = nca.event("done", timeout=30)
        assert done["stats"]["tuples_in"] == 6000
    finally:
        nca.kill()
