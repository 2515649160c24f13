"""What the timeline shows of an NCA's phase: busy and waits per thread, so that a busy NCA with
several threads (whose waits the runtime sums over its threads) does not look idle."""
from __future__ import annotations

from jumpgate.nca.interface import PhaseStats


def test_one_thread():
    st = PhaseStats(wall_ns=100_000_000, wait_in_ns=30_000_000, wait_out_ns=10_000_000)
    assert st.busy_ns == 60_000_000
    j = st.to_json()
    assert (j["wall_ms"], j["busy_ms"], j["wait_input_ms"], j["wait_output_ms"], j["threads"]) == (100, 60, 30, 10, 1)
    assert "cpu_ms" not in j


def test_waits_summed_over_threads_are_shared_out():
    # 4 threads for 100 ms, each waited 30 ms on input: busy 70 ms per thread, not 100 - 120 < 0
    st = PhaseStats(wall_ns=100_000_000, wait_in_ns=120_000_000, threads=4, cpu_ns=270_000_000)
    assert st.busy_ns == 70_000_000
    j = st.to_json()
    assert (j["busy_ms"], j["wait_input_ms"], j["threads"], j["cpu_ms"]) == (70, 30, 4, 270)
