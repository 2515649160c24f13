"""Failures: a Jumpgate server killed in mid-query fails the query with a clear message naming the
job, and leaves no receiver thread or listening socket in Trino. (A server stopped before a query:
test_trino.py::test_stopped_server_gives_a_clear_error.)"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from . import trino_server


def jvm_state(pid: int) -> tuple[list[str], set[int]]:
    """Names of the Trino JVM's Jumpgate threads, and the ports it listens on."""
    jcmd = trino_server.JAVA_HOME / "bin" / "jcmd"
    out = subprocess.run([str(jcmd), str(pid), "Thread.print"], capture_output=True, text=True, timeout=60).stdout
    threads = [line.split('"')[1] for line in out.splitlines() if line.startswith('"jumpgate-')]
    if shutil.which("ss") is None:
        pytest.skip("needs ss (iproute2) to list the JVM's listening sockets")
    ss = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
    ports = {int(line.split()[3].rsplit(":", 1)[1]) for line in ss.splitlines() if f"pid={pid}," in line}
    return threads, ports


def test_server_killed_mid_query(trino, victim_server):
    from trino import dbapi
    conn = dbapi.connect(host="127.0.0.1", port=trino.port, user="jumpgate-tests", catalog="jumpgate_victim",
                         schema="tpch_json", request_timeout=600)
    before_threads, before_ports = jvm_state(trino.proc.pid)
    outcome: dict = {}

    def run():
        cur = conn.cursor()
        try:
            # Four scans of lineitem in JSON Lines (four jobs): a few seconds of work for the NCAs.
            scan = "SELECT l_extendedprice AS p FROM lineitem WHERE l_comment LIKE '%a%'"
            cur.execute(f"SELECT count(*), sum(p) FROM ({' UNION ALL '.join([scan] * 4)})")
            outcome["rows"] = cur.fetchall()
        except Exception as e:  # noqa: BLE001 - the error is what this test checks
            outcome["error"] = e

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not victim_server.children() and t.is_alive():
        time.sleep(0.005)
    if not t.is_alive():
        pytest.skip(f"the query ended before its job's NCAs could be seen ({outcome}); nothing to kill")
    os.killpg(victim_server.proc.pid, signal.SIGKILL)
    victim_server.proc.wait(10)
    t.join(120)
    assert not t.is_alive(), "the query did not end after its Jumpgate server was killed"
    assert "error" in outcome, f"the query succeeded after its server was killed: {outcome}"
    msg = str(outcome["error"])
    assert "Jumpgate job" in msg and "tpch_json.lineitem" in msg, msg
    print(f"killed mid-query: {msg}")
    # No leftovers: the job's watcher and receiver threads end, its listening sockets close.
    deadline = time.monotonic() + 30
    while True:
        threads, ports = jvm_state(trino.proc.pid)
        left_threads = [n for n in threads if n not in before_threads and not n.startswith("jumpgate-trino-reaper")]
        left_ports = ports - before_ports
        if (not left_threads and not left_ports) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert not left_threads, f"threads left in Trino: {left_threads}"
    assert not left_ports, f"listening sockets left in Trino: {left_ports}"
    conn.close()
