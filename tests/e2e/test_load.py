"""A bounded load test (docs/security.md, the run queue): 16 concurrent clients of two tenants submit
400 small jobs to a server whose cores fit two at a time. Every answer is right, none is refused
(503: the jobs wait their turn instead), the tenants share the server fairly (when one tenant has
finished all of its jobs, the other has finished at least 80% of its own), and afterwards nothing
is left: no NCA process, no open file or socket of the server beyond what it had, its memory about
where it was. p50 and p99 job latency are printed."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from jumpgate.client import Jumpgate
from jumpgate.local_server import LocalServer

from .helpers import read_op

pytestmark = pytest.mark.e2e

CLIENTS_PER_TENANT = 8
JOBS_PER_TENANT = 200
SCHEMA = [{"name": "a", "type": "int64"}]


def job(port_host: str, literal: int) -> dict:
    return {"name": "load", "operations": [
        read_op("r", "load.jsonl", SCHEMA),
        {"kind": "filter", "name": "f", "input": "r", "condition": f"a % 10 = {literal % 10}"},
        {"kind": "send", "name": "out", "input": "f", "transport": "tcp", "host": port_host, "port": 0}]}


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_sixteen_clients_of_two_tenants_400_jobs_fair_and_clean(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "load.jsonl").write_text("".join(f'{{"a": {i}}}\n' for i in range(1000)))
    tokens = tmp_path / "tokens.yaml"
    exe = str(Path(sys.executable).with_name("jumpgate"))
    token = {t: subprocess.run([exe, "tokens", "add", "--file", str(tokens), "--tenant", t], capture_output=True,
                               text=True, check=True).stdout.strip() for t in ("blue", "green")}
    cache = os.environ.get("JUMPGATE_TEST_CACHE")
    srv = LocalServer(root, Path(cache) if cache else tmp_path / "cache", tmp_path / "server.log",
                      extra_args=["--tokens", str(tokens), "--warm-ncas", "0", "--overcommit", "1"], cores=2)
    try:
        with Jumpgate(srv.url, token=token["blue"]) as warm:  # compile once; the baseline after it
            warm.run(job("127.0.0.1", 0), timeout=120)
        time.sleep(0.5)
        rss0, fds0 = rss_kb(srv.proc.pid), open_fds(srv.proc.pid)
        forkers0 = len(srv.fork_servers())

        latencies: list[float] = []
        done = {"blue": 0, "green": 0}
        at_first_finish: dict[str, int] = {}
        errors: list[str] = []
        lock = threading.Lock()

        refused: list[int] = []  # 503s seen by the clients (their retries would hide them otherwise)

        def count(response: httpx.Response) -> None:
            if response.status_code == 503:
                refused.append(1)

        def client(tenant: str, jobs: range) -> None:
            http = httpx.Client(base_url=srv.url, timeout=300, event_hooks={"response": [count]})
            with http, Jumpgate(srv.url, token=token[tenant], http=http) as jg:
                for i in jobs:
                    t0 = time.perf_counter()
                    try:
                        rows = jg.run(job("127.0.0.1", i), timeout=300)["out"].column("a").to_pylist()
                    except Exception as e:  # noqa: BLE001 - every failure is reported below
                        with lock:
                            errors.append(f"{tenant} job {i}: {type(e).__name__}: {e}")
                        continue
                    with lock:
                        latencies.append(time.perf_counter() - t0)
                        if sorted(rows) != list(range(i % 10, 1000, 10)):
                            errors.append(f"{tenant} job {i}: wrong rows")
                        done[tenant] += 1
                        if done[tenant] == JOBS_PER_TENANT and not at_first_finish:
                            at_first_finish.update(done)

        per = JOBS_PER_TENANT // CLIENTS_PER_TENANT
        threads = [threading.Thread(target=client, args=(t, range(c * per, (c + 1) * per)))
                   for c in range(CLIENTS_PER_TENANT) for t in ("blue", "green")]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        wall = time.perf_counter() - t0
        assert not errors, errors[:5]
        assert not refused, f"{len(refused)} answers were 503"
        assert done == {"blue": JOBS_PER_TENANT, "green": JOBS_PER_TENANT}
        q = statistics.quantiles(latencies, n=100)
        print(f"\n400 jobs, 16 clients, 2 tenants: {wall:.1f} s, {400 / wall:.0f} jobs/s; latency p50 "
              f"{q[49] * 1000:.0f} ms, p99 {q[98] * 1000:.0f} ms; when the first tenant finished: {at_first_finish}")
        slower = min(at_first_finish.values())
        assert slower >= 0.8 * JOBS_PER_TENANT, f"unfair: {at_first_finish}"

        deadline = time.monotonic() + 10
        while srv.children() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert srv.children() == []
        time.sleep(0.5)
        # Each binary's fork server (one per distinct query here, at most --fork-servers) holds one
        # socket of the server's; nothing else may stay open.
        forkers = len(srv.fork_servers())
        assert forkers <= 16 and open_fds(srv.proc.pid) <= fds0 + 2 + forkers - forkers0, \
            (fds0, open_fds(srv.proc.pid), forkers0, forkers)
        rss1 = rss_kb(srv.proc.pid)
        print(f"server RSS {rss0 / 1024:.0f} MB before, {rss1 / 1024:.0f} MB after")
        assert rss1 < rss0 * 1.5 + 20 * 1024, (rss0, rss1)
    finally:
        srv.stop()
