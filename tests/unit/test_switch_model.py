"""The switch MODEL (p4/model/switch_model.c) against the pipeline docs/switch.md specifies: jobs
configured through the controller classes exactly as the plugin configures them, datagrams sent
as a scan and the controller send them, the records received as the final aggregation would
receive them. The records of a job must add up to the exact aggregation whatever happens on the
way: keys that find no room in any way, NULL keys and values, int32 values, values too large for a
slot, sums that would leave a slot's range (the value spills), counts of nullable columns."""
from __future__ import annotations

import random
import re
import socket
import struct
import zlib
from pathlib import Path

import pytest

from jumpgate.client.testing import encode_tuple
from jumpgate.client.udp import UdpReceiver
from jumpgate.contract import udp
from jumpgate.ncas.switch import defs
from jumpgate.ncas.switch.backends import ModelBackend
from jumpgate.ncas.switch.controller import JobSlots, RegisterWrite, StreamCounters

from .fixtures.switch_harness import ModelJob, bind, exact, merge_partials, partial_request

UDP_SEGMENT = 103  # <netinet/udp.h>: send a run of datagrams of this size in one call (UDP GSO)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    backend = ModelBackend()
    backend.open(tmp_path_factory.mktemp("switch-cache"))
    yield backend
    backend.close()
    assert backend.proc is None


def run_job(model, plan, rows_by_stream: dict[int, list[tuple]], slots: JobSlots,
            per_datagram: dict[int, int] | None = None):
    """Configure, send every stream's rows (`per_datagram[stream]` tuples per datagram, default 1)
    and END, flush, return (records table, job, notices)."""
    dst = UdpReceiver()
    job = ModelJob(model, plan, slots, dst)
    dst.start(1, job.query.layout)
    try:
        for stream, rows in rows_by_stream.items():
            job.send_rows(rows, stream, (per_datagram or {}).get(stream, 1))
            job.end(stream, len(rows))
        notices = {}
        while len(notices) < len(rows_by_stream):
            h, data = job.notice()
            assert h.flags & udp.F_END, h
            tuples, received = udp.END_PAYLOAD.unpack_from(data, udp.HEADER_SIZE)
            notices[h.stream] = (h.seq, tuples, received)
        job.flush()
        assert dst.wait(10), dst.error
        return dst.table(), job, notices
    finally:
        dst.close()
        job.close()


@pytest.mark.parametrize("per_datagram", [1, defs.TUPLES_PER_DATAGRAM], ids=["1-per-datagram", "N-per-datagram"])
def test_records_add_up_to_the_exact_aggregation(model, per_datagram):
    """512 slots in each of 7 ways for 8000 keys (many find no room), NULL keys and values, int32
    values both signs, values beyond 2^30 (no slot's sum takes them) and near 2^29 (a slot's sum
    cannot take them all): both spill; count of a nullable column. Sent one tuple per datagram, and
    several: stream 0 `per_datagram`, stream 5 one fewer (1 at least), each ending on a short
    datagram; every datagram's bypassed and spilled tuples leave in one record datagram."""
    rng = random.Random(7)
    plan = bind(partial_request({"g": "int64", "x": "int32", "b": "int64"}, "g",
                                [{"name": "n", "fn": "count", "expr": "x"},
                                 {"name": "sx", "fn": "sum", "expr": "x"},
                                 {"name": "sb", "fn": "sum", "expr": "b"}]))
    rows = []
    for _ in range(30000):
        g = None if rng.random() < 0.01 else rng.randrange(8000) - 4000
        x = None if rng.random() < 0.1 else rng.randrange(-2**29, 2**29)
        r = rng.random()
        b = (None if r < 0.05 else rng.choice([2**62, -2**63, 2**30, -2**30]) if r < 0.07
             else rng.randrange(2**28, 2**29) * rng.choice([1, -1]) if r < 0.5 else rng.randrange(-1000, 1000))
        rows.append((g, x, b))
    streams = {0: rows[:18001], 5: rows[18001:]}
    sizes = {0: per_datagram, 5: max(1, per_datagram - 1)}
    slots = JobSlots(job=3, base=1536, size=512, tag=0xBEEF)
    table, job, notices = run_job(model, plan, streams, slots, sizes)
    datagrams = {s: -(-len(r) // sizes[s]) for s, r in streams.items()}
    assert notices == {s: (datagrams[s], len(r), datagrams[s]) for s, r in streams.items()}  # received: datagrams
    got = merge_partials(table, "g", ["n", "sx", "sb"], {"n": "count", "sx": "sum", "sb": "sum"})
    assert got == exact(rows, 0, [("n", "count", 1), ("sx", "sum", 1), ("sb", "sum", 2)])
    out, records, tuples, bypassed, spilled = (job.register(r, 3)[0]
                                               for r in ("out_seq", "records", "tuples", "bypassed", "spilled"))
    assert table.num_rows == records and tuples == len(rows)
    # a datagram's records leave together: fewer output datagrams than records when several per datagram
    assert (out == records) if per_datagram == 1 else (out < records)
    assert bypassed > 400 and spilled > 100  # no room and NULL keys; huge values and sums out of range
    occupied = table.num_rows - bypassed - spilled
    assert 0 < occupied <= defs.WAYS * 512
    assert all(v == 0 for r in defs.SLOT_REGISTERS for v in job.register(r, 1536, 512)), "flush clears the block"


def way_index(key: int, way: int, slots: JobSlots) -> int:
    """docs/switch.md: way w's slot is base | (CRC-32 of the key's 8 bytes rotated left by w) & mask."""
    b = key.to_bytes(8, "little", signed=True)
    return slots.base | (zlib.crc32(b[way:] + b[:way]) & slots.mask)


def test_a_key_takes_the_first_way_with_room_and_the_slot_is_crc32_of_its_bytes(model):
    plan = bind(partial_request({"k": "int64", "v": "decimal(7,2)"}, "k",
                                [{"name": "c", "fn": "count_star"}, {"name": "s", "fn": "sum", "expr": "v"}]))
    slots = JobSlots(job=1, base=512, size=512, tag=77)
    job = ModelJob(model, plan, slots, None)
    try:
        for k in (0, 1, 123456789, -5):
            job.send_rows([(k, 150), (k, 1)])
            b = k.to_bytes(8, "little", signed=True)
            idx = way_index(k, 0, slots)
            assert job.register("kl0", idx) == [int.from_bytes(b[:4], "big") ^ 77]  # first four wire bytes
            assert job.register("kh0", idx) == [int.from_bytes(b[4:], "big")]  # the last four wire bytes
            assert job.register("cn0", idx) == [2]  # the count
            assert job.register("s0_0", idx) == [15100 + defs.SUM_BIAS]  # decimal(7,2): 150 + 1 -> 15100
        # a key whose way-0 slot another key holds goes to way 1
        taken = next(k for k in range(1000, 10**6) if way_index(k, 0, slots) == way_index(1, 0, slots))
        job.send_rows([(taken, 2)])
        assert job.register("kh1", way_index(taken, 1, slots)) == [0]  # an int64 below 2^32: its last four are 0
        assert job.register("cn1", way_index(taken, 1, slots)) == [1]
        assert job.register("s0_1", way_index(taken, 1, slots)) == [200 + defs.SUM_BIAS]
        job.flush(discard=True)
        job.end()
        job.notice()  # the END notice comes after every FLUSH before it
        assert all(v == 0 for r in defs.SLOT_REGISTERS for v in job.register(r, 512, 512))
    finally:
        job.close()


def test_a_count_spills_at_its_limit_and_the_slot_counts_on_from_zero(model):
    """cn<w> (the count, a register of its own after kh<w>, docs/switch.md) spills at
    JG_COUNT_SPILL: the tuple that finds it there leaves a spill record carrying the count with its
    own, the slot starts again from 0 and keeps the key and the sums."""
    plan = bind(partial_request({"k": "int64", "v": "int64"}, "k",
                                [{"name": "c", "fn": "count_star"}, {"name": "s", "fn": "sum", "expr": "v"}]))
    slots = JobSlots(job=6, base=3072, size=512, tag=4242)
    dst = UdpReceiver()
    job = ModelJob(model, plan, slots, dst)
    dst.start(1, job.query.layout)
    try:
        idx = way_index(11, 0, slots)
        job.send_rows([(11, 5)])  # claims way 0's slot: count 1
        assert job.register("cn0", idx) == [1]
        model.write_registers([RegisterWrite("cn0", idx, defs.COUNT_SPILL - 1)])
        job.send_rows([(11, 6)])  # counted: the limit reached, nothing spills yet
        assert job.register("cn0", idx) == [defs.COUNT_SPILL]
        job.send_rows([(11, 7)])  # at the limit: the count spills with this tuple's
        assert job.register("cn0", idx) == [0]
        job.end(tuples=3)
        job.notice()
        job.flush()
        assert dst.wait(10), dst.error
        rows = sorted((r["k"], r["c"], r["s"]) for r in dst.table().to_pylist())
        assert rows == [(11, 0, 18), (11, defs.COUNT_SPILL + 1, None)]  # flushed slot; spill record (sum NULL)
        assert job.register("spilled", slots.job) == [1]
    finally:
        dst.close()
        job.close()


def test_a_block_another_job_left_is_cleared_before_use(model):
    """Slots another job left behind (its server died before clearing them) hold keys stored with
    that job's tag, which this job would flush as keys of its own: the plugin clears a block not
    known to be clear (a FLUSH with DISCARD of every slot) before the job uses it (docs/switch.md)."""
    plan = bind(partial_request({"k": "int64", "v": "int64"}, "k", [{"name": "s", "fn": "sum", "expr": "v"}]))
    slots = JobSlots(job=4, base=2048, size=512, tag=1001)
    idx = way_index(9, 0, slots)
    for reg, value in (("kl0", int.from_bytes((9).to_bytes(8, "little")[:4], "big") ^ 999), ("cn0", 7),
                       ("s0_0", 500 + defs.SUM_BIAS), ("kl3", 5), ("s1_6", 1)):
        model.write_registers([RegisterWrite(reg, idx, value)])
    dst = UdpReceiver()
    job = ModelJob(model, plan, slots, dst)
    dst.start(1, job.query.layout)
    try:
        job.flush(discard=True)  # what SwitchInstance.configure does for a block not known clear
        job.end()
        job.notice()  # after every FLUSH
        model.write_registers(StreamCounters.reset(slots.job))  # count this job's FLUSHes from here
        job.seq.clear()
        job.send_rows([(9, 1), (9, 2)])
        job.end()
        job.notice()
        job.flush()
        assert dst.wait(10), dst.error
        assert dst.table().to_pylist() == [{"k": 9, "s": 3}]
    finally:
        dst.close()
        job.close()


def test_end_notice_counts_what_arrived_and_bad_datagrams_are_reported(model):
    plan = bind(partial_request({"k": "int64", "v": "int64"}, "k", [{"name": "s", "fn": "sum", "expr": "v"}]))
    job = ModelJob(model, plan, JobSlots(job=5, base=2560, size=512, tag=5), None)
    try:
        job.send_rows([(1, 1)] * 7, stream=2)
        job.seq[2] += 3  # the sender says it sent 10: three were "lost"
        job.end(stream=2)
        h, data = job.notice()
        assert (h.stream, h.seq, h.flags) == (2, 10, udp.F_END)
        assert udp.END_PAYLOAD.unpack_from(data, udp.HEADER_SIZE) == (10, 7)
        t = job.in_layout.fixed_size
        job.send_raw(udp.data_datagram(0, 0, [b"\0" * (t + 8)]))  # not the job's tuple length
        h, _ = job.notice()
        assert h.flags & udp.F_ERROR
        n = defs.TUPLES_PER_DATAGRAM
        job.send_raw(udp.data_datagram(0, 1, [b"\0" * t] * (n + 1)))  # more tuples than a datagram may carry
        h, _ = job.notice()
        assert h.flags & udp.F_ERROR and h.count == n + 1
        job.send_raw(udp.pack_header(0, 2, 2) + udp.frame(b"\0" * t))  # says 2 tuples, carries 1
        h, _ = job.notice()
        assert h.flags & udp.F_ERROR
        assert job.register("received", 5 * defs.MAX_STREAMS)[0] == 0  # none of them counted
        # the right size in all, but the second tuple's length prefix is wrong: the datagram was
        # counted on its first pass, and the second pass finds it
        job.send_raw(udp.pack_header(0, 3, 2) + udp.frame(b"\0" * t) + struct.pack("<I", t + 8) + b"\0" * t)
        h, _ = job.notice()
        assert h.flags & udp.F_ERROR and h.count == 2
        assert job.register("received", 5 * defs.MAX_STREAMS)[0] == 1
        assert job.register("tuples", 5)[0] == 7 + 1  # stream 2's seven, and the first tuple of that one
    finally:
        job.close()


def test_finish_reports_lost_flushes(model):
    plan = bind(partial_request({"k": "int64", "v": "int64"}, "k", [{"name": "s", "fn": "sum", "expr": "v"}]))
    dst = UdpReceiver()
    job = ModelJob(model, plan, JobSlots(job=6, base=3072, size=512, tag=6), dst)
    dst.start(1, job.query.layout)
    try:
        job.send_raw(udp.pack_header(0, 0, 0, udp.F_FINISH) + udp.FINISH_PAYLOAD.pack(5))  # 5 sent, 0 arrived
        assert dst.wait(5)
        assert "loss upstream" in (dst.error or "")
    finally:
        dst.close()
        job.close()


def test_coalesced_runs_of_datagrams_are_cut_into_their_datagrams(model):
    """A sender's GSO runs (out_udp.c sends one-tuple datagrams towards a switch that way) reach
    the model coalesced (UDP_GRO, docs/switch.md "Running it"): every datagram of a run counts,
    the END that ends a run as its shorter last segment included."""
    plan = bind(partial_request({"k": "int64", "v": "int64"}, "k", [{"name": "s", "fn": "sum", "expr": "v"}]))
    dst = UdpReceiver()
    job = ModelJob(model, plan, JobSlots(job=7, base=3584, size=512, tag=7), dst)
    dst.start(1, job.query.layout)
    rows = [(i % 300, i) for i in range(1000)]
    dgrams = [udp.data_datagram(0, i, [encode_tuple(r, job.in_layout)]) for i, r in enumerate(rows)]
    dgrams.append(udp.end_datagram(0, len(rows), len(rows)))
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for at in range(0, len(dgrams), 64):  # 64 per send; the last run: 40 datagrams and the END
                run = dgrams[at:at + 64]
                s.sendmsg([b"".join(run)], [(socket.SOL_UDP, UDP_SEGMENT, struct.pack("=H", len(run[0])))],
                           0, (job.host, job.port))
        h, data = job.notice()
        assert (h.flags, h.seq) == (udp.F_END, 1000)
        assert udp.END_PAYLOAD.unpack_from(data, udp.HEADER_SIZE) == (1000, 1000)  # every datagram counted
        job.flush()
        assert dst.wait(10), dst.error
        got = merge_partials(dst.table(), "k", ["s"], {"s": "sum"})
        assert got == exact(rows, 0, [("s", "sum", 1)])
    finally:
        dst.close()
        job.close()


def test_one_datagram_of_keys_that_hit_claim_and_go_on(model):
    """One datagram of TUPLES_PER_DATAGRAM tuples, a pass each (docs/switch.md, "Several tuples per
    datagram"): a key that holds a slot (hit), a new key (claims one), a key whose slot is taken in
    every way (no room: bypass) and a NULL key (bypass). The datagram is counted once, every tuple
    once; its two bypasses leave in one output datagram of two records, the newest first."""
    n = defs.TUPLES_PER_DATAGRAM
    assert n >= 4, "this test needs room for four kinds of tuple in one datagram"
    plan = bind(partial_request({"k": "int64", "v": "int64"}, "k",
                                [{"name": "c", "fn": "count_star"}, {"name": "s", "fn": "sum", "expr": "v"}]))
    slots = JobSlots(job=8, base=4096, size=512, tag=0x5EED)
    hit, claim, full = 11, 22, 33
    for w in range(defs.WAYS):  # another key (a first half no key of this test has) holds `full`'s slot in every way
        model.write_registers([RegisterWrite(f"kl{w}", way_index(full, w, slots), 0x0BADCAFE)])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
        out.bind(("127.0.0.1", 0))
        out.settimeout(5)
        job = ModelJob(model, plan, slots, out.getsockname()[1])
        try:
            job.send_rows([(hit, 1)])  # one datagram, no record: nothing leaves
            rows = [(hit, 2), (claim, 3), (full, 4), (None, 5)] + [(hit, 100 + i) for i in range(n - 4)]
            job.send_rows(rows, per_datagram=n)
            job.end(tuples=1 + n)
            h, data = job.notice()
            assert udp.END_PAYLOAD.unpack_from(data, udp.HEADER_SIZE) == (1 + n, 2)  # tuples sent, datagrams received
            data = out.recv(2048)
            h = udp.parse_header(data)
            assert (h.seq, h.count, h.flags) == (0, 2, 0)
            layout = job.query.layout
            body = data[udp.HEADER_SIZE:]
            size = 4 + layout.fixed_size
            assert len(body) == 2 * size
            recs = [(int.from_bytes(body[i * size + 4:i * size + 5], "little"),
                     *struct.unpack_from("<qqq", body, i * size + 12)) for i in range(2)]
            # (null vector byte 0, key, count, sum): the NULL key's record first (pushed last)
            assert recs == [(1, 0, 1, 5), (0, full, 1, 4)]
            counters = {r: job.register(r, 8)[0] for r in defs.JOB_REGISTERS}
            assert counters == {"out_seq": 1, "flushed": 0, "bypassed": 2, "spilled": 0, "tuples": 1 + n, "records": 2}
            assert job.register("received", 8 * defs.MAX_STREAMS)[0] == 2
            i0 = way_index(hit, 0, slots)
            assert job.register("cn0", i0) == [n - 2]  # the hit key: 1 + 1 + (n - 4) tuples
            assert job.register("s0_0", i0) == [1 + 2 + sum(100 + i for i in range(n - 4)) + defs.SUM_BIAS]
            assert job.register("cn0", way_index(claim, 0, slots)) == [1]  # claimed by its one tuple
            job.flush(discard=True)
            job.end(tuples=1 + n)
            job.notice()
        finally:
            job.close()


@pytest.mark.parametrize("per_datagram", [1, defs.TUPLES_PER_DATAGRAM], ids=["1-per-datagram", "N-per-datagram"])
def test_coalesced_runs_of_multi_tuple_datagrams(model, per_datagram):
    """GSO runs of datagrams of `per_datagram` tuples (as out_udp.c sends them towards the switch),
    then a short last datagram and the END: the model cuts every run into its datagrams and every
    datagram into its tuples."""
    plan = bind(partial_request({"k": "int64", "v": "int64"}, "k", [{"name": "s", "fn": "sum", "expr": "v"}]))
    dst = UdpReceiver()
    job = ModelJob(model, plan, JobSlots(job=9, base=4608, size=512, tag=9), dst)
    dst.start(1, job.query.layout)
    rows = [(i % 300, i) for i in range(64 * per_datagram * 3 + per_datagram - 1 if per_datagram > 1 else 1000)]
    cut = [rows[i:i + per_datagram] for i in range(0, len(rows), per_datagram)]
    dgrams = [udp.data_datagram(0, i, [encode_tuple(r, job.in_layout) for r in part]) for i, part in enumerate(cut)]
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            full = [d for d in dgrams if len(d) == len(dgrams[0])]
            for at in range(0, len(full), 64):
                run = full[at:at + 64]
                s.sendmsg([b"".join(run)], [(socket.SOL_UDP, UDP_SEGMENT, struct.pack("=H", len(run[0])))],
                           0, (job.host, job.port))
            for d in dgrams[len(full):]:  # the short last one
                s.sendto(d, (job.host, job.port))
        job.end(tuples=len(rows))
        h, data = job.notice()
        assert udp.END_PAYLOAD.unpack_from(data, udp.HEADER_SIZE) == (len(rows), len(dgrams))
        assert job.register("tuples", 9)[0] == len(rows)
        job.flush()
        assert dst.wait(10), dst.error
        got = merge_partials(dst.table(), "k", ["s"], {"s": "sum"})
        assert got == exact(rows, 0, [("s", "sum", 1)])
    finally:
        dst.close()
        job.close()


# ------------------------------------------------------------------ version 2 (acknowledged) input streams


def _v2_plan():
    return bind(partial_request({"k": "int64", "v": "int64"}, "k",
                                [{"name": "c", "fn": "count_star"}, {"name": "s", "fn": "sum", "expr": "v"}]))


def test_version_2_duplicates_reordering_and_repeats_are_each_added_once(model):
    """docs/udp-transport.md, "A switch in a version 2 path": the ring `seen` takes each datagram
    once, in whatever order and however often it comes (the network's duplicates, the sender's
    repeats flagged RETX), and every copy gets a receipt echoing its timestamp. The sender keeps at
    most 64 datagrams in flight, so each block of 64 is mixed up within itself here."""
    rng = random.Random(11)
    rows = [(rng.randrange(300), rng.randrange(-1000, 1000)) for _ in range(2000)]
    n = defs.TUPLES_PER_DATAGRAM
    dst = UdpReceiver()
    job = ModelJob(model, _v2_plan(), JobSlots(job=9, base=4608, size=512, tag=99), dst)
    dst.start(1, job.query.layout)
    try:
        datagrams = job.datagrams_v2(rows, stream=3, per_datagram=n)
        copies: list[tuple[int, bytes]] = []
        for block in range(0, len(datagrams), defs.SEEN):
            sent = [(q, datagrams[q]) for q in range(block, min(block + defs.SEEN, len(datagrams)))]
            dups = [(q, d) for q, d in sent if rng.random() < 0.2]  # the network's copies
            repeats = [(q, _retx(d, stamp=10_000 + q)) for q, d in sent if rng.random() < 0.2]  # the sender's
            mixed = sent + dups + repeats
            rng.shuffle(mixed)
            copies += mixed
        for _, d in copies:
            job.send_raw(d)
        answers = job.answers(len(copies))
        assert all(h.flags == udp.F_ACK | udp.F_SACK and h.version == 2 and h.stream == 3 and h.count == 0
                   for h in answers)
        # one receipt per copy, taken or dropped, each echoing the timestamp of its own copy
        assert sorted((h.seq, h.stamp) for h in answers) == sorted(
            (q, udp.parse_header(d).stamp) for q, d in copies)
        job.send_raw(udp.end_datagram(3, len(datagrams), len(rows), version=2))
        [answer] = job.answers(1)
        assert (answer.flags, answer.seq, answer.stream) == (udp.F_ACK | udp.F_END, len(datagrams), 3)
        h, data = job.notice()
        assert h.version == 2 and udp.END_PAYLOAD.unpack_from(data, udp.HEADER_SIZE) == (len(rows), len(datagrams))
        assert job.register("received", 9 * defs.MAX_STREAMS + 3) == [len(datagrams)]  # taken once each
        assert job.register("repeats", 9) == [len(copies) - len(datagrams)]
        assert job.register("tuples", 9) == [len(rows)]
        job.flush()
        assert dst.wait(10), dst.error
        got = merge_partials(dst.table(), "k", ["c", "s"], {"c": "count_star", "s": "sum"})
        assert got == exact(rows, 0, [("c", "count_star", None), ("s", "sum", 1)])
    finally:
        dst.close()
        job.close()


def _retx(datagram: bytes, stamp: int) -> bytes:
    """The sender's repeat of a version 2 datagram: flagged RETX, stamped anew."""
    h = udp.parse_header(datagram)
    return udp.pack_header(h.stream, h.seq, h.count, h.flags | udp.F_RETX, 2, stamp) + datagram[udp.HEADER_SIZE:]


def test_version_2_end_is_answered_only_once_every_datagram_was_taken(model):
    """An END whose datagrams have not all been taken goes to the controller with what was taken
    and gets no answer, so its sender repeats it (and the missing datagrams); once they came, the
    repeated END is answered with ACK and END at its number, which ends the sender's stream."""
    rows = [(k, k) for k in range(10)]
    job = ModelJob(model, _v2_plan(), JobSlots(job=10, base=5120, size=512, tag=3), None)
    try:
        datagrams = job.datagrams_v2(rows, stream=0)
        for q in (0, 1, 2, 4, 5, 6, 7, 8, 9):  # 3 lost on the way
            job.send_raw(datagrams[q])
        assert {h.seq for h in job.answers(9)} == set(range(10)) - {3}
        end = udp.end_datagram(0, 10, 10, version=2)
        job.send_raw(end)
        h, data = job.notice()
        assert udp.END_PAYLOAD.unpack_from(data, udp.HEADER_SIZE) == (10, 9)  # nine taken
        job.send_raw(_retx(datagrams[3], stamp=77))
        [receipt] = job.answers(1)
        assert (receipt.seq, receipt.stamp, receipt.flags) == (3, 77, udp.F_ACK | udp.F_SACK)
        job.send_raw(end)  # no answer came: the sender repeats its END
        [answer] = job.answers(1)  # the first END got none, or this would be it
        assert (answer.seq, answer.flags) == (10, udp.F_ACK | udp.F_END)
        h, data = job.notice()  # each copy of the END goes to the controller, with what was taken by then
        assert udp.END_PAYLOAD.unpack_from(data, udp.HEADER_SIZE) == (10, 10)
        assert job.register("tuples", 10) == [10] and job.register("repeats", 10) == [0]
    finally:
        job.close()


def test_the_ring_starts_empty_for_each_job_and_version_1_streams_are_as_before(model):
    """A job configured on a job number another used finds the ring reset (SeenRing.reset at
    configure): its datagram 0 is taken, not dropped as the other job's. Version 1 streams have no
    ring and no receipts: a duplicate is counted, and the END's count shows it (loss detection)."""
    slots = JobSlots(job=11, base=5632, size=512, tag=4)
    for _ in range(2):
        job = ModelJob(model, _v2_plan(), slots, None)
        try:
            job.send_raw(job.datagrams_v2([(1, 1)], stream=0)[0])
            [receipt] = job.answers(1)
            assert receipt.seq == 0 and job.register("received", 11 * defs.MAX_STREAMS) == [1]
            assert job.register("repeats", 11) == [0]
        finally:
            job.close()
    job = ModelJob(model, _v2_plan(), slots, None)
    try:
        job.send_rows([(1, 1)], stream=1)
        job.seq[1] = 0
        job.send_rows([(1, 1)], stream=1)  # the network's duplicate of a version 1 datagram
        job.end(stream=1)
        h, data = job.notice()
        assert h.version == 1 and udp.END_PAYLOAD.unpack_from(data, udp.HEADER_SIZE) == (1, 2)
        job.sender.settimeout(0.3)
        with pytest.raises(TimeoutError):
            job.sender.recv(2048)  # nothing answers a version 1 sender
    finally:
        job.close()


def test_a_repeat_held_back_past_a_later_pass_over_its_cell_is_not_taken_again(model):
    """A reordered datagram s is repeated by its sender; the first copy arrives, is taken and
    receipted, the window moves on and s + 64 takes s's cell; then the network releases the repeat.
    It must be dropped (its mark is older than the cell's), or `received` passes the END's number
    and the END is never answered. The same holds for a repeat held back over several passes, and
    across the 16-bit marks' wrap (a stream of more than 2^22 datagrams)."""
    rows = [(k % 7, 1) for k in range(200 * defs.TUPLES_PER_DATAGRAM)]
    job = ModelJob(model, _v2_plan(), JobSlots(job=13, base=6656, size=512, tag=8), None)
    try:
        datagrams = job.datagrams_v2(rows, stream=1, per_datagram=defs.TUPLES_PER_DATAGRAM)
        late = {5: _retx(datagrams[5], stamp=5), 6: _retx(datagrams[6], stamp=6)}
        for q in range(0, 5 + defs.SEEN + 1):  # up to s + 64 for s = 5
            job.send_raw(datagrams[q])
        job.send_raw(late[5])  # past one later pass
        for q in range(5 + defs.SEEN + 1, 6 + 2 * defs.SEEN + 1):  # up to 6 + 128
            job.send_raw(datagrams[q])
        job.send_raw(late[6])  # past two
        sent = 6 + 2 * defs.SEEN + 1
        for q in range(sent, len(datagrams)):
            job.send_raw(datagrams[q])
        assert len(job.answers(len(datagrams) + 2)) == len(datagrams) + 2
        assert job.register("received", 13 * defs.MAX_STREAMS + 1) == [len(datagrams)]
        assert job.register("repeats", 13) == [2]
        job.send_raw(udp.end_datagram(1, len(datagrams), len(rows), version=2))
        [answer] = job.answers(1)
        assert (answer.flags, answer.seq) == (udp.F_ACK | udp.F_END, len(datagrams))
        # across the 16-bit marks' wrap (datagram 2^22 of a stream): pass 65535's mark is 65535 and
        # the next pass's 0, which is newer; a repeat from pass 65535 after it is older. The cell
        # holds pass 65534's mark, as a stream that came this far left it.
        payload = datagrams[0][udp.HEADER_SIZE:]
        before, after = (0xFFFE << defs.SEEN_BITS) + 3, (0xFFFF << defs.SEEN_BITS) + 3
        assert (defs.seen_mark(before), defs.seen_mark(after)) == (0xFFFF, 0)
        job.backend.write_registers([RegisterWrite("seen", defs.seen_cell(13, 2, before), 0xFFFE)])
        for seq in (before, after, before):
            job.send_raw(udp.pack_header(2, seq, defs.TUPLES_PER_DATAGRAM, 0, 2, 1) + payload)
        job.answers(3)
        assert job.register("received", 13 * defs.MAX_STREAMS + 2) == [2]
        assert job.register("repeats", 13) == [3]
        assert job.register("seen", defs.seen_cell(13, 2, after)) == [0]
    finally:
        job.close()


def test_the_ring_marks_and_the_flags_as_the_p4_constants_say(model):
    """The ring's cell and mark (jumpgate_defs.p4, read by the plugin as defs.seen_cell and
    defs.seen_mark) are the model's, and the version 2 constants the P4 programs would read (the
    little-endian flags byte-swapped, as JG_F_END and the others) are the transport's (jg_udp.h)."""
    job = ModelJob(model, _v2_plan(), JobSlots(job=12, base=6144, size=512, tag=6), None)
    try:
        rows = [(k, k) for k in range(200)]
        datagrams = job.datagrams_v2(rows, stream=2)
        for q in (0, 63, 64, 70, 199):
            job.send_raw(datagrams[q])
        job.answers(5)
        for q in (64, 70, 199):  # 64 took cell 0 from 0: a later number, another mark
            assert job.register("seen", defs.seen_cell(12, 2, q)) == [defs.seen_mark(q)]
        assert job.register("seen", defs.seen_cell(12, 2, 63)) == [defs.seen_mark(63)] == [1]  # the first pass
    finally:
        job.close()
    d = defs.read_defs()
    header = (Path(defs.__file__).resolve().parents[3] / "ncas" / "runtime" / "jg_udp.h").read_text()
    wire = {m.group(1): int(m.group(2), 16) for m in re.finditer(r"#define JG_UDP_F_(\w+) (0x[0-9a-fA-F]+)u", header)}
    for name in ("RETX", "ACK", "SACK"):
        assert d[f"JG_F_{name}"] == (wire[name] & 0xFF) << 8 | wire[name] >> 8, name
    assert d["JG_UDP_MAGIC2_BE"].to_bytes(4, "big") == udp.UDP_MAGIC_V2
    assert defs.SEEN == udp.SACK_WINDOW == int(re.search(r"JG_UDP_SACK_WINDOW (\d+)u", header).group(1))
