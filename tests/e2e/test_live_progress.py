"""Live progress (docs/contract.md §4, "Live progress"): while a job runs, `GET /v1/jobs/{id}`
reports each NCA's tuples and bytes so far, read from the running NCA processes, not only the
`done` stats at the end; once the job has ended, the same object holds the NCAs' own totals.

Each job sends ~40 MB of rows to a client that reads slowly (sockets of our own, read a little at a
time), so the NCA sending to it runs for seconds, held back by the client, and the status is polled
meanwhile; then the client drains the rest at full speed. The NCA kinds: a JSON scan, a Parquet scan
and a hash join's probe (its input from a scan over the network, or fused with it)."""
from __future__ import annotations

import os
import socket
import threading
import time

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jumpgate.client import Jumpgate
from jumpgate.client.progress import ProgressUpdate

pytestmark = pytest.mark.e2e

BIG = "live_progress.jsonl"
BIG_PARQUET = "live_progress.parquet"
KEYS = "live_progress_keys.jsonl"
ROWS = 20000  # tuples of ~2 KB: far more than the socket buffers on both sides hold
SCHEMA = [{"name": "a", "type": "int32"}, {"name": "s", "type": "string"}]


def send(input: str, port: int) -> dict:
    return {"kind": "send", "name": "o", "input": input, "transport": "tcp", "host": "127.0.0.1", "port": port}


def request(port: int, kind: str = "json") -> dict:
    if kind == "parquet":
        return {"operations": [{"kind": "read", "name": "r", "path": BIG_PARQUET, "format": "parquet",
                                "schema": SCHEMA}, send("r", port)]}
    scan = {"kind": "read", "name": "r", "path": BIG, "format": "json", "schema": SCHEMA}
    if kind == "join":
        keys = {"kind": "read", "name": "k", "path": KEYS, "format": "json", "schema": [{"name": "k", "type": "int32"}]}
        join = {"kind": "join", "name": "j", "build": "k", "probe": "r", "build_keys": ["k"], "probe_keys": ["a"],
                "type": "inner"}
        return {"operations": [scan, keys, join, send("j", port)]}
    return {"operations": [scan, send("r", port)]}


@pytest.fixture(scope="module")
def big(data_root):
    (data_root / BIG).write_text("".join(f'{{"a": {i}, "s": "{"x" * 2000}"}}\n' for i in range(ROWS)))
    (data_root / KEYS).write_text("".join(f'{{"k": {i}}}\n' for i in range(ROWS)))
    pq.write_table(pa.table({"a": pa.array(range(ROWS), pa.int32()), "s": ["x" * 2000] * ROWS}),
                   data_root / BIG_PARQUET, row_group_size=500)
    yield BIG
    for name in (BIG, KEYS, BIG_PARQUET):
        os.remove(data_root / name)


class SlowClient:
    """Accepts the job's streams and reads each 32 KB every 20 ms (steadily: the NCA's
    client-stall check never trips) until told to drain."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(120)
        self.port = self.listener.getsockname()[1]
        self.fast = threading.Event()
        self.threads: list[threading.Thread] = []

    def accept(self, streams: int) -> None:
        def accept_all():
            for _ in range(streams):
                conn, _ = self.listener.accept()
                t = threading.Thread(target=self._read, args=(conn,), daemon=True)
                self.threads.append(t)
                t.start()

        t = threading.Thread(target=accept_all, daemon=True)
        self.threads.append(t)
        t.start()

    def _read(self, conn: socket.socket) -> None:
        with conn:
            while conn.recv(1 << 20 if self.fast.is_set() else 32 << 10):
                if not self.fast.is_set():
                    time.sleep(0.02)

    def close(self) -> None:
        self.fast.set()
        for t in self.threads:
            t.join(60)
        self.listener.close()


@pytest.mark.parametrize("kind", ["json", "parquet", "join"])
def test_a_running_jobs_status_reports_growing_counters_then_its_totals(server, big, kind):
    with Jumpgate(server.url) as jg:  # builds the NCAs first, so the job below runs at once
        assert jg.run(request(0, kind), timeout=300)["o"].num_rows == ROWS
    client = SlowClient()
    http = httpx.Client(base_url=server.url, timeout=60)
    try:
        job = http.post("/v1/jobs", json=request(client.port, kind)).json()
        jid = job["job_id"]
        client.accept(job["outputs"]["o"]["expected_streams"])
        [sender] = {e["from"] for e in job["edges"] if e["client"]}  # the NCA that sends to the client
        before = http.get(f"/v1/jobs/{jid}").json()["progress"]
        assert before["ncas"][sender] == {"state": "waiting", "stage": None, "tuples_in": 0, "bytes_in": 0,
                                          "tuples_out": 0, "bytes_out": 0}
        http.post(f"/v1/jobs/{jid}/execute").raise_for_status()
        seen: list[dict] = []  # the sender's progress while the job was running
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = http.get(f"/v1/jobs/{jid}").json()
            if status["state"] != "running":
                break
            progress = status["progress"]
            nca = progress["ncas"][sender]
            if nca["state"] == "running" and nca["tuples_out"]:
                assert progress["final"] is False and progress["stage"] == nca["stage"]
                assert progress["rows_to_clients"] == nca["tuples_out"]
                seen.append(nca)
                if len(seen) >= 2 and seen[-1]["tuples_out"] > seen[0]["tuples_out"]:
                    break
            time.sleep(0.3)
        assert status["state"] == "running", "the job ended before its progress was seen growing"
        assert len(seen) >= 2, seen
        first, last = seen[0], seen[-1]
        assert 0 < first["tuples_out"] < last["tuples_out"] < ROWS, seen
        assert 0 < first["tuples_in"] <= last["tuples_in"] and 0 < first["bytes_in"] <= last["bytes_in"], seen
        assert 0 < last["bytes_out"] and last["tuples_out"] <= last["tuples_in"], seen
        assert status["progress"]["updated_ms"] > 0
        client.fast.set()  # now drain: the job ends
        status = http.get(f"/v1/jobs/{jid}", params={"wait": 30}).json()
        assert status["state"] == "succeeded", status["error"]
        final = status["progress"]
        assert final["final"] is True and final["stage"] is None and final["rows_to_clients"] == ROWS
        for nid, nca in final["ncas"].items():
            stages = status["timeline"]["ncas"][nid]["stages"]
            assert nca == {"state": "done", "stage": stages[-1]["stage"],
                           **{k: sum(s[k] for s in stages) for k in ("tuples_in", "bytes_in", "tuples_out",
                                                                     "bytes_out")}}
        assert final["ncas"][sender]["tuples_out"] == ROWS
    finally:
        http.close()
        client.close()


def test_the_clients_progress_callback_sees_compile_then_rows(server, big):
    updates: list[ProgressUpdate] = []
    with Jumpgate(server.url) as jg:
        table = jg.run(request(0), timeout=300, progress=updates.append)["o"]
    assert table.num_rows == ROWS
    steps = [u.step for u in updates]
    assert steps[0] == "compiling" and steps[-1] == "done", steps
    assert updates[-1].rows == ROWS and updates[-1].bytes_received > 40_000_000, updates[-1]
    assert updates[-1].job_id and updates[-1].progress["final"] is True
