"""The lossy UDP relay (jumpgate/deploy/udp_relay.py) that the UDP loss tests and bench/udp_send.py
put on the path of UDP streams: it drops, duplicates and reorders datagrams in both directions as
its seeded generators decide, and its report says exactly what it did."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

from jumpgate.deploy.udp_relay import Faults, RelayProcess

N = 3000


def numbered(i: int) -> bytes:
    return i.to_bytes(4, "little") + bytes(28)


def drain(sock: socket.socket, into: list[int], echo: bool = False) -> None:
    """Read numbered datagrams until none came for half a second (answering each, with `echo`)."""
    sock.settimeout(0.5)
    while True:
        try:
            data, addr = sock.recvfrom(64)
        except TimeoutError:
            return
        into.append(int.from_bytes(data[:4], "little"))
        if echo:
            sock.sendto(data, addr)


def through(faults: Faults, echo: bool = False) -> tuple[list[int], list[int], dict]:
    """N numbered datagrams from one sender through a relay to a receiver (which, with `echo`,
    answers each to where it came from): what the receiver got, what came back, the report."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        for s in (rx, tx):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        rx.bind(("127.0.0.1", 0))
        with RelayProcess(rx.getsockname(), faults) as relay:
            got: list[int] = []
            back: list[int] = []
            reader = threading.Thread(target=drain, args=(rx, got, echo))
            reader.start()
            for i in range(N):
                tx.sendto(numbered(i), ("127.0.0.1", relay.port))
                if i % 100 == 99:
                    time.sleep(0.005)  # the relay is a Python process: give it time to keep up
            reader.join()
            if echo:
                drain(tx, back)
            report = relay.stop()
    return got, back, report


def test_a_clean_relay_forwards_everything_in_order():
    got, _, report = through(Faults())
    assert got == list(range(N))
    assert report["forward"] == {"received": N, "forwarded": N, "dropped": 0, "duplicated": 0, "reordered": 0}


def test_loss_duplication_and_reordering_happen_as_reported():
    got, _, report = through(Faults(loss=0.05, dup=0.02, reorder=0.02, depth=3, seed=11))
    f = report["forward"]
    assert f["received"] == N
    assert f["dropped"] == N - len(set(got))
    assert f["duplicated"] == len(got) - len(set(got))
    assert f["forwarded"] == len(got)
    assert 0.03 * N < f["dropped"] < 0.07 * N and f["duplicated"] > 0.01 * N and f["reordered"] > 0.01 * N
    late = sum(1 for a, b in zip(got, got[1:]) if b < a)  # one arrived after a later one
    assert late >= f["reordered"] // 2


def test_the_same_seed_makes_the_same_choices():
    one, _, _ = through(Faults(loss=0.05, seed=3))
    two, _, _ = through(Faults(loss=0.05, seed=3))
    other, _, _ = through(Faults(loss=0.05, seed=4))
    assert set(one) == set(two) != set(other)


def test_answers_go_back_to_the_sender_through_the_same_faults():
    got, back, report = through(Faults(loss=0.05, seed=5), echo=True)
    b = report["back"]
    assert b["received"] == len(got) and b["forwarded"] == len(back) == len(got) - b["dropped"]
    assert 0.03 * len(got) < b["dropped"] < 0.07 * len(got)
    assert report["senders"] == 1


@pytest.mark.parametrize("args,message", [
    (["--loss", "1.5"], "loss must be a probability in [0, 1)"),
    (["--depth", "0"], "depth must be an integer in 1..1000"),
    (["--target", "nowhere"], "--target must be HOST:PORT"),
])
def test_bad_arguments_are_refused_saying_which(args, message):
    argv = [sys.executable, "-m", "jumpgate.deploy.udp_relay", "--target", "127.0.0.1:9", *args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and message in r.stderr


def test_faults_from_a_setting_are_checked():
    assert Faults.from_json({"loss": 0.01, "seed": 2}) == Faults(loss=0.01, seed=2)
    with pytest.raises(ValueError, match="unknown keys drop"):
        Faults.from_json({"drop": 0.1})
    with pytest.raises(ValueError, match="dup must be a probability"):
        Faults.from_json({"dup": True})
