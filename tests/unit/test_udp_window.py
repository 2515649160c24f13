"""The version 2 UDP sender's window (ncas/runtime/udp_window.c, docs/udp-transport.md "Version 2")
on its own: udp_window.c built as a shared object and driven through ctypes with a clock of the
test's, so that what is sent again, when, and when a stream gives up are checked exactly."""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

from jumpgate.ncas.software.toolchain import runtime_dir

MS = 1_000_000
HEADER = 24


class Slot(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("sent_ns", ctypes.c_uint64), ("len", ctypes.c_uint32),
                ("tries", ctypes.c_uint16), ("timeouts", ctypes.c_uint16), ("sacked", ctypes.c_uint8)]


class Window(ctypes.Structure):
    _fields_ = [("ring", ctypes.c_void_p), ("ring_bytes", ctypes.c_uint64), ("slot", ctypes.POINTER(Slot)),
                ("nslots", ctypes.c_uint64), ("base", ctypes.c_uint64), ("next", ctypes.c_uint64),
                ("head", ctypes.c_uint64), ("tail", ctypes.c_uint64), ("skip", ctypes.c_uint64),
                ("end_seq", ctypes.c_uint64), ("has_end", ctypes.c_int), ("done", ctypes.c_int),
                ("high", ctypes.c_uint64), ("srtt", ctypes.c_uint64), ("rttvar", ctypes.c_uint64),
                ("rto", ctypes.c_uint64), ("rto_min", ctypes.c_uint64), ("rto_max", ctypes.c_uint64),
                ("max_tries", ctypes.c_uint), ("rtt_sampled", ctypes.c_int), ("sent", ctypes.c_uint64),
                ("retransmitted", ctypes.c_uint64), ("max_inflight", ctypes.c_uint64)]


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> ctypes.CDLL:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (gcc or cc) to build ncas/runtime/udp_window.c")
    so = tmp_path_factory.mktemp("udpwin") / "libudpwin.so"
    subprocess.run([cc, "-std=c11", "-O2", "-shared", "-fPIC", "-D_GNU_SOURCE", f"-I{runtime_dir()}",
                    str(runtime_dir() / "udp_window.c"), "-o", str(so)], check=True, capture_output=True)
    lib = ctypes.CDLL(str(so))
    w = ctypes.POINTER(Window)
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    lib.jg_win_init.argtypes = [w, u64, u64, u64, ctypes.c_uint]
    lib.jg_win_reserve.argtypes = [w, u32]
    lib.jg_win_reserve.restype = ctypes.c_void_p
    lib.jg_win_commit.argtypes = [w, u32, ctypes.c_int, u64]
    lib.jg_win_commit.restype = u64
    lib.jg_win_datagram.argtypes = [w, u64, ctypes.POINTER(u32)]
    lib.jg_win_datagram.restype = ctypes.c_void_p
    lib.jg_win_resent.argtypes = [w, u64, u64, ctypes.c_int]
    lib.jg_win_ack.argtypes = [w, u64, ctypes.c_int, ctypes.c_char_p, u32, u64, u64, ctypes.POINTER(u64),
                               ctypes.c_int]
    lib.jg_win_sack.argtypes = [w, u64, u64, u64, ctypes.POINTER(u64), ctypes.c_int]
    lib.jg_win_limit.argtypes = [w, u64]
    lib.jg_win_due.argtypes = [w, u64, ctypes.POINTER(u64), ctypes.c_int, ctypes.POINTER(u64)]
    lib.jg_win_rto.argtypes = [w, ctypes.c_uint]
    lib.jg_win_rto.restype = u64
    lib.jg_win_free.argtypes = [w]
    # the struct as ctypes lays it out must be the C one: the slot ring's stride is checked below
    assert ctypes.sizeof(Slot) == 32
    return lib


class Win:
    """A window and the test's clock."""

    def __init__(self, lib: ctypes.CDLL, window_bytes: int = 1 << 16, rto_min_ms: int = 10, rto_max_ms: int = 1000,
                 max_tries: int = 4) -> None:
        self.lib, self.w, self.now = lib, Window(), 0
        assert lib.jg_win_init(ctypes.byref(self.w), window_bytes, rto_min_ms * MS, rto_max_ms * MS, max_tries) == 0

    def send(self, n: int = 1, size: int = 100, end: bool = False) -> list[int]:
        """n datagrams of `size` bytes, each numbered in its first 8 bytes; [] once the window is full."""
        seqs = []
        for _ in range(n):
            p = self.lib.jg_win_reserve(ctypes.byref(self.w), size)
            if not p:
                break
            seq = self.w.next
            ctypes.memmove(p, seq.to_bytes(8, "little") + bytes(size - 8), size)
            seqs.append(self.lib.jg_win_commit(ctypes.byref(self.w), size, int(end), self.now))
        return seqs

    def ack(self, cum: int, arrived: tuple[int, ...] = (), end: bool = False, rtt: int = 0) -> list[int] | None:
        """An ACK; `rtt`: the round trip its echoed timestamp measures (0: none)."""
        later = [q - cum - 1 for q in arrived]
        report = bytearray((max(later) // 8 + 1) if later else 0)
        for b in later:
            report[b // 8] |= 1 << (b % 8)
        out = (ctypes.c_uint64 * 256)()
        n = self.lib.jg_win_ack(ctypes.byref(self.w), cum, int(end), bytes(report), len(report), rtt, self.now,
                                out, 256)
        return None if n < 0 else list(out[:n])

    def sack(self, seq: int, rtt: int = 0) -> list[int] | None:
        """A receipt (flag SACK): datagram `seq` alone arrived. What to send again, or None when
        the receipt is refused."""
        out = (ctypes.c_uint64 * 256)()
        n = self.lib.jg_win_sack(ctypes.byref(self.w), seq, rtt, self.now, out, 256)
        return None if n < 0 else list(out[:n])

    def limit(self, datagrams: int) -> None:
        self.lib.jg_win_limit(ctypes.byref(self.w), datagrams)

    def due(self, limit: int = 256) -> list[int] | int:
        """The datagrams due for a repeat, or the one that used up its tries (as an int)."""
        out, failed = (ctypes.c_uint64 * limit)(), ctypes.c_uint64()
        n = self.lib.jg_win_due(ctypes.byref(self.w), self.now, out, limit, ctypes.byref(failed))
        return failed.value if n < 0 else list(out[:n])

    def resend(self, seqs: list[int], timeout: bool) -> None:
        for q in seqs:
            self.lib.jg_win_resent(ctypes.byref(self.w), q, self.now, int(timeout))

    def datagram(self, seq: int) -> bytes | None:
        n = ctypes.c_uint32()
        p = self.lib.jg_win_datagram(ctypes.byref(self.w), seq, ctypes.byref(n))
        return ctypes.string_at(p, n.value) if p else None

    def close(self) -> None:
        self.lib.jg_win_free(ctypes.byref(self.w))


@pytest.fixture
def win(lib):
    w = Win(lib)
    yield w
    w.close()


def test_the_window_is_bounded_in_bytes_and_acknowledgements_free_it(win):
    sent = win.send(1000, size=1000)
    assert sent == list(range(65))  # 65,536 bytes hold 65 datagrams of 1,000
    assert win.send(1, size=1000) == []
    assert win.send(1, size=500) == [65]  # but the 536 bytes left hold a smaller one
    assert win.ack(10) == [] and win.w.base == 10
    assert win.send(20, size=1000) == list(range(66, 76))  # 10,000 bytes freed; the ring wraps
    for q in (0, 9):
        assert win.datagram(q) is None  # acknowledged: gone
    for q in (10, 64, 65, 75):
        assert int.from_bytes(win.datagram(q)[:8], "little") == q  # the bytes survive the wrap


def test_a_gap_is_sent_again_once_enough_later_datagrams_arrived(win):
    win.send(20)
    win.now = 1 * MS
    assert win.ack(5, (6, 7)) == []  # 5 missing, but only two later ones arrived: maybe reordered
    assert win.ack(5, (6, 7, 8, 9, 12)) == [5]  # 10 and 11 are missing too, but only 12 came after them
    win.resend([5], timeout=False)
    win.now = 2 * MS
    # the next ACK, sent before the repeat arrived, reports 5 missing again: not repeated twice
    assert win.ack(5, (6, 7, 8, 9, 12, 13, 14)) == [10, 11]
    win.resend([10, 11], timeout=False)
    assert win.w.retransmitted == 3 and win.w.sent == 23
    win.now += win.w.rto
    assert win.ack(5, (6, 7, 8, 9, 12, 13, 14)) == [5, 10, 11]  # a timeout later: the repeats were lost too


def test_a_stale_ack_frees_nothing_new_and_repeats_nothing(win):
    win.send(20)
    win.now = 1 * MS
    assert win.ack(8) == []
    assert win.ack(3, (7, 8, 9, 10)) == []  # overtaken by the one above (reordered on the way back)
    assert win.w.base == 8


def test_unacknowledged_datagrams_are_repeated_on_a_backed_off_timer_then_the_stream_gives_up(win):
    win.send(3)
    rto = win.w.rto
    win.now = rto - 1
    assert win.due() == []
    win.now = rto
    assert win.due() == [0, 1, 2]
    win.resend([0, 1, 2], timeout=True)
    win.now += 2 * rto - 1
    assert win.due() == []  # the second timeout is twice the first
    win.now += 1
    assert win.due() == [0, 1, 2]
    win.resend([0, 1, 2], timeout=True)
    win.now += 4 * rto
    win.resend(win.due(), timeout=True)
    win.now += 8 * rto
    assert win.due() == 0  # max_tries (4) timeouts of datagram 0: the stream fails, naming it


def test_repeats_for_gap_reports_do_not_use_up_the_tries(win):
    win.send(10)
    for _ in range(10):  # the receiver is alive and keeps reporting 0 missing
        win.now += 1000 * MS
        assert win.ack(0, tuple(range(1, 10))) == [0]
        win.resend([0], timeout=False)
    assert win.due() == []  # reported just now, and never timed out


def test_the_timeout_follows_the_measured_round_trip(lib):
    w = Win(lib, rto_min_ms=1, rto_max_ms=1000)
    try:
        for _ in range(20):
            w.send(1)
            w.now += 2 * MS
            w.ack(w.w.next)
        assert 2 * MS <= w.w.srtt <= 2 * MS + MS // 10
        assert 2 * MS <= w.w.rto < 4 * MS  # srtt + 4 * rttvar, which shrinks as the samples agree
        assert w.lib.jg_win_rto(ctypes.byref(w.w), 30) == 1000 * MS  # backed off, up to rto_max
    finally:
        w.close()


def test_while_gaps_are_repaired_only_echoed_timestamps_measure_the_round_trip(lib):
    """After a gap is filled the cumulative number jumps over datagrams that arrived long before:
    their age is no round trip. Without an echo nothing is measured then; with one, the echo is."""
    w = Win(lib, rto_min_ms=1, rto_max_ms=1000)
    try:
        w.send(100)
        w.now = 500 * MS
        w.ack(10, (12, 13, 14))  # a gap at 10 (and 11)
        w.ack(50)  # filled: 10 .. 49 acknowledged at once, the newest sent 500 ms ago
        assert not w.w.rtt_sampled and w.w.rto == 200 * MS  # still the initial timeout
        w.now += MS
        w.ack(60, (62, 63, 64, 65), rtt=3 * MS)  # gaps again, but the echo says 3 ms
        assert w.w.srtt == 3 * MS and w.w.rto < 20 * MS
    finally:
        w.close()


def test_only_a_limited_burst_is_repeated_per_look(win):
    win.send(50)
    win.now = win.w.rto
    assert win.due(limit=8) == list(range(8))  # many due at once: slow rather than lossy


def test_the_end_is_acknowledged_only_at_its_number(win):
    win.send(5)
    [end] = win.send(1, size=40, end=True)
    assert end == 5 and win.w.has_end
    win.now = 1 * MS
    assert win.ack(5) == [] and not win.w.done  # all data, but not the END
    assert win.ack(4, end=True) is None  # an END acknowledged at another number: never sent so
    assert win.ack(5, end=True) == [] and win.w.done and win.w.base == 6
    assert win.due() == []


def test_acknowledgements_of_what_was_never_sent_are_refused(win):
    win.send(3)
    assert win.ack(4) is None
    assert win.ack(1, end=True) is None  # no END was sent


# ------------------------------------------------------------------ receipts (flag SACK): a switch


def test_receipts_move_the_base_over_every_acknowledged_datagram_at_it(win):
    """A switch acknowledges datagram by datagram: a receipt marks one, and the base moves only
    over a run of acknowledged datagrams at it, freeing them."""
    win.send(10)
    win.now = 1 * MS
    assert win.sack(2) == [] and win.w.base == 0  # 0 and 1 not yet
    assert win.sack(1) == [] and win.w.base == 0
    assert win.sack(0) == [] and win.w.base == 3  # 0, 1, 2: a run at the base
    assert win.datagram(2) is None and win.datagram(3) is not None
    assert win.sack(1) == [] and win.sack(2) == [] and win.w.base == 3  # repeats' receipts: harmless
    assert win.sack(5) == [] and win.sack(4) == [] and win.w.base == 3
    assert win.sack(3) == [] and win.w.base == 6


def test_a_receipt_gap_is_repeated_once_three_later_datagrams_are_acknowledged(win):
    win.send(12)
    win.now = 1 * MS
    assert win.sack(1) == [] and win.sack(2) == []  # 0 missing, but maybe only reordered
    assert win.sack(3) == [0]  # three later ones: 0 goes again at once
    win.resend([0], timeout=False)
    win.now = 2 * MS
    assert win.sack(4) == []  # its repeat is in flight: not again before a timeout
    assert win.sack(6) == [] and win.sack(7) == [] and win.sack(8) == [5]  # the same rule for 5
    win.resend([5], timeout=False)
    win.now += win.w.rto
    assert win.sack(9) == [0, 5]  # a timeout after their repeats, still missing: again
    win.resend([0, 5], timeout=False)
    assert win.sack(0) == [] and win.w.base == 5  # the repeat arrived: 0 .. 4 acknowledged
    # receipts stop the timers of what they acknowledge; what none covers times out as ever
    assert win.due() == [10, 11]


def test_receipts_of_what_was_never_sent_or_of_the_end_are_refused(win):
    win.send(3)
    assert win.sack(3) is None  # never sent
    win.send(1, size=40, end=True)
    assert win.sack(3) is None  # the END: its answer is a cumulative ACK with END
    for q in (0, 1, 2):
        assert win.sack(q) == []
    assert win.w.base == 3 and not win.w.done
    assert win.ack(3, end=True) == [] and win.w.done and win.w.base == 4


def test_a_receipt_measures_the_round_trip_of_the_copy_it_echoes(lib):
    w = Win(lib, rto_min_ms=1, rto_max_ms=1000)
    try:
        w.send(4)
        w.now = 500 * MS
        w.sack(1, rtt=3 * MS)  # the echo, not the 500 ms since datagram 1 was sent
        assert w.w.srtt == 3 * MS and w.w.rto < 20 * MS
    finally:
        w.close()


def test_the_window_can_be_limited_to_a_number_of_datagrams(win):
    """Towards a switch's ring of 64 sequence numbers per stream: datagram s + 64 leaves only once
    s has been acknowledged (udp_window.h, jg_win_limit)."""
    win.limit(64)
    assert win.send(100, size=50) == list(range(64))  # 3,200 bytes: the bytes would hold far more
    win.now = 1 * MS
    assert win.sack(1) == [] and win.send(1, size=50) == []  # 0 still in flight: 64 is its cell's next user
    assert win.sack(0) == [] and win.send(5, size=50) == [64, 65]  # 0 and 1 acknowledged: two more
    win.limit(0)  # lifted: the byte bound alone (a cumulative receiver)
    assert len(win.send(2000, size=50)) == 1310 - 64
    win.limit(1 << 40)  # never more than the window's slots
    assert win.w.max_inflight == win.w.nslots
