"""A client that takes no data fails its job in seconds (docs/nca-process-protocol.md, "Client
destinations"), not after the stall watchdog's 300 s: one that listens and never accepts (the
kernel completes the handshake and takes bytes into the connection's receive buffer until it is
full) and one that accepts and never reads. The job's NCA processes are gone at once, and another
client's job waiting for the cores gets them. A client that reads a large result is never failed,
even while its process is busy elsewhere. The server keeps its default `--stall-timeout` (300 s)."""
from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from jumpgate.client import Jumpgate
from jumpgate.local_server import LocalServer

from .helpers import read_op

pytestmark = pytest.mark.e2e

BIG = "client_stall.jsonl"
ROWS = 20000  # tuples of ~2 KB: ~40 MB, far more than the socket buffers on both sides hold
SCHEMA = [{"name": "a", "type": "int32"}, {"name": "s", "type": "string"}]


def big_request(port: int) -> dict:
    return {"operations": [
        {"kind": "read", "name": "r", "path": BIG, "format": "json", "schema": SCHEMA},
        {"kind": "send", "name": "o", "input": "r", "transport": "tcp", "host": "127.0.0.1", "port": port}]}


@pytest.fixture(scope="module")
def big(data_root):
    (data_root / BIG).write_text("".join(f'{{"a": {i}, "s": "{"x" * 2000}"}}\n' for i in range(ROWS)))
    yield BIG
    os.remove(data_root / BIG)


@pytest.fixture(scope="module")
def one_core(data_root, tmp_path_factory):
    """A server with one core and one thread per core, so that a second job waits while the first
    holds it; every other setting its default (the stall watchdog's 300 s among them)."""
    cache = Path(os.environ.get("JUMPGATE_TEST_CACHE") or tmp_path_factory.mktemp("cache"))
    srv = LocalServer(data_root, cache, tmp_path_factory.mktemp("logs") / "server.log", cores=1,
                      extra_args=["--overcommit", "1"])
    yield srv
    left = srv.children()
    srv.stop()
    assert not left, f"NCA processes left behind: {left}"


def test_a_client_reading_a_large_result_is_not_failed(one_core, big):
    """~40 MB to the Python client's receivers while a thread of the same process keeps the GIL
    busy: they still read continuously, and the job succeeds. (Also builds the NCA the next tests
    run, so that their time is the stall's, not a compile's.)"""
    stop = threading.Event()

    def hog():
        while not stop.is_set():
            sum(range(10000))

    t = threading.Thread(target=hog, daemon=True)
    t.start()
    try:
        with Jumpgate(one_core.url) as jg:
            table = jg.run(big_request(0), timeout=300)["o"]
    finally:
        stop.set()
        t.join()
    assert table.num_rows == ROWS and sorted(table.column("a").to_pylist()) == list(range(ROWS))
    assert set(table.column("s").to_pylist()) == {"x" * 2000}


@pytest.mark.parametrize("client", ["never accepts", "accepts and never reads"])
def test_a_client_that_takes_no_data_fails_its_job_in_seconds(one_core, big, client):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(60)
    port = listener.getsockname()[1]
    conn = None
    other: dict = {}

    def other_client():  # reads normally: its job waits for the only core, then must succeed
        try:
            with Jumpgate(one_core.url) as jg:
                other["table"] = jg.run({"operations": [read_op(), {
                    "kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": "127.0.0.1",
                    "port": 0}]}, timeout=120)["out"]
        except Exception as e:  # reported below
            other["error"] = e
        other["done"] = time.monotonic()

    try:
        with Jumpgate(one_core.url) as jg:
            job = jg.submit(big_request(port))
            started = time.monotonic()
            job.execute()
            if client == "accepts and never reads":
                conn, _ = listener.accept()
            time.sleep(1.0)
            status = job.status()
            assert status["state"] == "running", status
            pids = set(one_core.children())
            assert pids, "the job's NCA should be running"
            waiting = threading.Thread(target=other_client)
            waiting.start()
            while status["state"] == "running":
                status = job.status(wait=30)
            failed = time.monotonic()
        took = failed - started
        assert status["state"] == "failed", status
        err = status["error"]
        assert err["message"] == (f"the client at 127.0.0.1:{port} took no data for 10 s: it is not reading (or "
                                  "never accepted the connection) [output port 0, stream 0]"), err
        assert err["nca"] == "nca0" and err["stage"] == 0 and "stalled" not in err, err
        setup = status["timeline"]["phases"]["setup"]["duration_ms"] / 1000
        assert 10 <= took - setup < 15, (took, setup)
        deadline = time.monotonic() + 5
        while pids & set(one_core.children()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pids & set(one_core.children()), "the failed job's NCA processes must be gone"
        waiting.join(120)
        assert "error" not in other, other.get("error")
        assert other["table"].num_rows == 5000
        assert other["done"] >= failed - 0.5, "the other job should have waited for the only core"
        assert other["done"] - failed < 30, "the other job should have got the core at once"
    finally:
        if conn is not None:
            conn.close()
        listener.close()
