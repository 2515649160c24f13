"""Idle long polls (`GET /v1/jobs/{id}?wait=30`) cost the server no thread: with fifty of them
pending, an unrelated small job still finishes in about its usual time (before, each wait held a
thread of the pool that also runs submits and executes: six of them stalled everyone)."""
from __future__ import annotations

import statistics
import threading
import time

import httpx
import pytest

from jumpgate.client import Jumpgate

from .helpers import filter_project, run_ops

pytestmark = pytest.mark.e2e

WAITERS = 50


SEND = {"kind": "send", "name": "out", "input": "p", "transport": "tcp", "host": "127.0.0.1", "port": 9}


def small_job(url: str) -> float:
    t0 = time.perf_counter()
    run_ops(url, filter_project("a > 0", [("a", "a")]))
    return time.perf_counter() - t0


def test_fifty_idle_long_polls_do_not_stall_an_unrelated_job(server):
    before = statistics.median(small_job(server.url) for _ in range(3))
    with Jumpgate(server.url) as jg:
        idle = jg.submit({"operations": [*filter_project(None, [("a", "a")]), SEND]})  # compiled, never executed
    answered: list[int] = []
    clients = [httpx.Client(base_url=server.url, timeout=60) for _ in range(WAITERS)]

    def wait(client: httpx.Client) -> None:
        answered.append(client.get(f"/v1/jobs/{idle.job_id}", params={"wait": 30}).status_code)
    threads = [threading.Thread(target=wait, args=(c,), daemon=True) for c in clients]
    try:
        for t in threads:
            t.start()
        time.sleep(0.5)  # the waits are pending
        during = statistics.median(small_job(server.url) for _ in range(3))
        assert not answered, "the waits should still be pending"
        assert during < max(3 * before, before + 1.0), f"a small job took {during:.2f} s with {WAITERS} idle " \
                                                       f"long polls pending, {before:.2f} s without"
        httpx.delete(f"{server.url}/v1/jobs/{idle.job_id}")  # ends the job: every wait answers now
        for t in threads:
            t.join(10)
        assert answered == [200] * WAITERS
    finally:
        for c in clients:
            c.close()
