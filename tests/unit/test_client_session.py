"""The client's job flow (contract §4) against a fake server: httpx.MockTransport for REST, sender
threads writing real NTF streams to the ports the client put in its request."""
from __future__ import annotations

import json
import socket
import threading
import time
from decimal import Decimal

import httpx
import pyarrow as pa
import pytest

import jumpgate.client.session as session_mod
from jumpgate.client import (
    BuilderError,
    ClientError,
    JobFailed,
    JobTimeout,
    Jumpgate,
    RequestRejected,
    StreamError,
)
from jumpgate.client.testing import encode_table, end_marker, header
from jumpgate.contract.ntf import generate_ntf
from jumpgate.contract.types import Field, Schema, parse_type

COLS = [("state", "string"), ("total", "decimal(12,2)"), ("n", "int64")]
LAYOUT = generate_ntf(Schema(tuple(Field(n, parse_type(t)) for n, t in COLS)))


def make_table(n: int, seed: int = 0) -> pa.Table:
    return pa.table({
        "state": pa.array([None if i % 9 == 0 else f"S{(i * 7 + seed) % 50}é" for i in range(n)], pa.string()),
        "total": pa.array([None if i % 4 == 0 else Decimal(i * 3 + seed) / 100 for i in range(n)],
                          pa.decimal128(12, 2)),
        "n": pa.array(range(seed, seed + n), pa.int64()),
    })


class FakeServer:
    """Answers the REST calls and, on execute, sends each destination's table as `streams`
    streams. `mode`: ok | fail | hang | bad_stream (never finishes) | missing_stream."""

    def __init__(self, tables: dict[str, pa.Table], streams: int = 3, mode: str = "ok",
                 one_call: bool = False) -> None:
        """`one_call`: honour `POST /v1/jobs?execute=true` (otherwise ignore it, as a server
        without it would, and answer `compiled`)."""
        self.tables, self.streams, self.mode, self.one_call = tables, streams, mode, one_call
        self.calls: list[tuple[str, str]] = []
        self.request: dict | None = None
        self.state = "none"
        self.senders: list[threading.Thread] = []
        self.interrupt_on_get = False

    def client(self) -> Jumpgate:
        http = httpx.Client(transport=httpx.MockTransport(self.handle), base_url="http://fake")
        return Jumpgate("http://fake", http=http, poll_interval=0.01)

    def handle(self, req: httpx.Request) -> httpx.Response:
        path = req.url.path
        self.calls.append((req.method, path + (f"?{req.url.query.decode()}" if req.url.query else "")))
        if req.method == "POST" and path == "/v1/jobs":
            self.request = json.loads(req.content)
            sends = [op for op in self.request["operations"] if op["kind"] == "send"]
            unknown = [s["name"] for s in sends if s["name"] not in self.tables]
            if unknown:
                return httpx.Response(400, json={"error": {"message": f"unknown send {unknown}",
                                                           "path": "operations[0].input"}})
            self.state = "compiled"
            if self.one_call and req.url.params.get("execute") == "true":
                self.state = "running"
                for op in sends:  # the streams connect before the client has read the answer
                    self._start_senders(op)
            return httpx.Response(201, json={
                "job_id": "j1", "state": self.state, "ncas": [], "stages": [],
                "outputs": {s["name"]: {"layout": LAYOUT.to_json(), "expected_streams": self.streams}
                            for s in sends}})
        if req.method == "POST" and path == "/v1/jobs/j1/execute":
            self.state = "running"
            for op in self.request["operations"]:
                if op["kind"] == "send":
                    self._start_senders(op)
            return httpx.Response(202, json={"job_id": "j1", "state": "running"})
        if req.method == "GET" and path == "/v1/jobs/j1":
            if self.interrupt_on_get:
                self.interrupt_on_get = False
                raise KeyboardInterrupt
            if self.state == "running" and self.mode not in ("hang", "bad_stream") and not any(t.is_alive() for t in self.senders):
                self.state = "failed" if self.mode == "fail" else "succeeded"
            error = None
            if self.state == "failed":
                error = {"message": "line is not a JSON object", "nca": "nca-1", "stage": 0,
                         "file": "sales/part-2.jsonl", "record": 17}
            return httpx.Response(200, json={"job_id": "j1", "state": self.state, "error": error, "timeline": {}})
        if req.method == "DELETE" and path == "/v1/jobs/j1":
            self.state = "cancelled"
            return httpx.Response(200, json={"job_id": "j1", "state": "cancelled"})
        return httpx.Response(404, json={"error": {"message": "no such thing"}})

    def _start_senders(self, op: dict) -> None:
        table = self.tables[op["name"]]
        n = table.num_rows
        bounds = [n * i // max(1, self.streams) for i in range(self.streams + 1)]
        work = []
        for sid in range(self.streams):
            if self.mode == "missing_stream" and sid == self.streams - 1:
                continue
            data = encode_table(table.slice(bounds[sid], bounds[sid + 1] - bounds[sid]), LAYOUT, sid)
            if self.mode == "bad_stream" and sid == 0:
                data = data[:-12]  # no end marker
            # connect now, inside execute: proves the client listens before it calls execute
            work.append((socket.create_connection((op["host"], op["port"]), timeout=5), data))
        for sock, data in work:
            t = threading.Thread(target=self._write, args=(sock, data), daemon=True)
            self.senders.append(t)
            t.start()

    @staticmethod
    def _write(sock: socket.socket, data: bytes) -> None:
        try:
            step = max(1, len(data) // 7)
            for i in range(0, len(data), step):
                sock.sendall(data[i:i + step])
        except OSError:
            pass
        finally:
            sock.close()


def calls_of(server: FakeServer) -> list[str]:
    return [f"{m} {p}" for m, p in server.calls if m != "GET"]


def query(jg: Jumpgate):
    return jg.read("t.jsonl", schema={"state": "string", "total": "decimal(12,2)", "n": "int64"}) \
        .filter("n >= 0")


def test_collect_many_receives_every_destination():
    a, b = make_table(1000, 1), make_table(2500, 2)
    server = FakeServer({"a": a, "b": b})
    with server.client() as jg:
        q = query(jg)
        out = jg.collect_many({"a": q, "b": q.project("state", "total", "n")}, timeout=30)
    assert out["a"].combine_chunks().equals(a) and out["b"].combine_chunks().equals(b)
    # A server that ignores `execute=true` (this one) leaves the job compiled: the client executes.
    assert calls_of(server) == ["POST /v1/jobs?execute=true", "POST /v1/jobs/j1/execute"]
    sends = [op for op in server.request["operations"] if op["kind"] == "send"]
    assert [(s["name"], s["host"], s["transport"]) for s in sends] == [("a", "127.0.0.1", "tcp"),
                                                                         ("b", "127.0.0.1", "tcp")]
    assert all(0 < s["port"] < 65536 for s in sends) and sends[0]["port"] != sends[1]["port"]
    assert jg.last_job.job_id == "j1" and jg.last_job.state == "succeeded"


def test_one_call_compiles_and_runs_when_the_server_can():
    a = make_table(3000, 5)
    server = FakeServer({"a": a}, one_call=True)
    with server.client() as jg:
        out = jg.collect_many({"a": query(jg)}, timeout=30)
    assert out["a"].combine_chunks().equals(a)
    assert calls_of(server) == ["POST /v1/jobs?execute=true"]
    assert jg.last_job.state == "succeeded"


def test_node_collect_and_empty_results():
    server = FakeServer({"out": make_table(0)}, streams=2)
    with server.client() as jg:
        t = query(jg).collect(timeout=30)
    assert t.num_rows == 0 and t.schema == make_table(0).schema


def test_failed_job_raises_with_the_servers_error():
    server = FakeServer({"out": make_table(10)}, mode="fail")
    with server.client() as jg, pytest.raises(JobFailed) as info:
        query(jg).collect(timeout=30)
    e = info.value
    assert (e.nca, e.stage, e.file, e.record) == ("nca-1", 0, "sales/part-2.jsonl", 17)
    assert e.error["message"] == "line is not a JSON object" and e.state == "failed"
    assert "sales/part-2.jsonl:17" in str(e)
    assert "DELETE /v1/jobs/j1" not in calls_of(server)  # the job already ended


def test_timeout_cancels_the_job():
    server = FakeServer({"out": make_table(10)}, mode="hang")
    with server.client() as jg, pytest.raises(JobTimeout):
        query(jg).collect(timeout=0.3)
    assert calls_of(server)[-1] == "DELETE /v1/jobs/j1"


def test_keyboard_interrupt_cancels_the_job():
    server = FakeServer({"out": make_table(10)}, mode="hang")
    server.interrupt_on_get = True
    with server.client() as jg, pytest.raises(KeyboardInterrupt):
        query(jg).collect(timeout=30)
    assert calls_of(server)[-1] == "DELETE /v1/jobs/j1"


def test_broken_stream_cancels_and_raises():
    server = FakeServer({"out": make_table(300)}, mode="bad_stream")
    with server.client() as jg, pytest.raises(StreamError, match="ended before its end marker"):
        query(jg).collect(timeout=30)
    assert calls_of(server)[-1] == "DELETE /v1/jobs/j1"  # noticed while the job was still running


def test_missing_stream_after_success(monkeypatch):
    monkeypatch.setattr(session_mod, "STREAM_GRACE_S", 0.3)
    server = FakeServer({"out": make_table(30)}, mode="missing_stream")
    with server.client() as jg, pytest.raises(StreamError, match="did not end"):
        query(jg).collect(timeout=30)


def test_rejected_request_closes_receivers():
    server = FakeServer({})
    with server.client() as jg, pytest.raises(RequestRejected) as info:
        query(jg).collect(timeout=30)
    assert info.value.status == 400 and info.value.error["path"] == "operations[0].input"
    port = next(op["port"] for op in server.request["operations"] if op["kind"] == "send")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_run_raw_request_with_port_zero():
    t = make_table(123)
    server = FakeServer({"dest": t}, streams=1)
    request = {"name": "raw", "operations": [
        {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json",
         "schema": [{"name": n, "type": ty} for n, ty in COLS]},
        {"kind": "send", "name": "dest", "input": "r", "transport": "tcp", "host": "127.0.0.1", "port": 0}]}
    with server.client() as jg:
        out = jg.run(request, timeout=30)
    assert out["dest"].combine_chunks().equals(t)
    assert request["operations"][1]["port"] == 0  # the caller's dict is not changed
    assert server.request["operations"][1]["port"] > 0


@pytest.mark.parametrize("send,message", [
    ({"name": "dest", "port": 0}, r"operations\[1\]\.host: send 'dest' needs the address this client listens on"),
    ({"name": "dest", "host": "127.0.0.1", "port": "5000"}, r"operations\[1\]\.port: .* not '5000'"),
    ({"name": "dest", "host": "127.0.0.1", "port": 70000}, r"operations\[1\]\.port: .* to 65535, not 70000"),
    ({"host": "127.0.0.1", "port": 0}, r"operations\[1\]\.name: a send needs a name"),
])
def test_run_raw_request_with_a_malformed_send_names_it_before_submitting(send, message):
    """A hand-written request's send without a host, name or usable port: a clear error naming
    the operation, before anything listens or reaches the server (was a KeyError traceback)."""
    server = FakeServer({"dest": make_table(3)}, streams=1)
    request = {"operations": [
        {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json",
         "schema": [{"name": n, "type": ty} for n, ty in COLS]},
        {"kind": "send", "input": "r", "transport": "tcp", **send}]}
    with server.client() as jg, pytest.raises(BuilderError, match=message):
        jg.run(request, timeout=30)
    assert server.request is None


def test_submit_raw_dict_and_job_calls():
    server = FakeServer({"o": make_table(5)}, streams=0)
    with server.client() as jg:
        job = jg.submit({"operations": [{"kind": "send", "name": "o", "input": "x", "transport": "tcp",
                                         "host": "127.0.0.1", "port": 9}]})
        assert job.job_id == "j1" and job.outputs["o"].expected_streams == 0
        assert job.outputs["o"].layout == LAYOUT
        assert job.execute()["state"] == "running"
        assert job.status()["state"] == "succeeded" and job.finished
        assert job.cancel()["state"] == "cancelled"


def test_unreachable_server():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Jumpgate(f"http://127.0.0.1:{port}", http_timeout=2) as jg, pytest.raises(ClientError, match="cannot reach"):
        jg.submit({"operations": []})


def test_header_helpers_roundtrip_through_a_receiver_flow():
    """A zero-row destination fed by hand-written frames (no encoder) decodes to an empty table."""
    from jumpgate.client import Receiver

    with Receiver() as r:
        r.start(1, LAYOUT)
        with socket.create_connection(("127.0.0.1", r.port)) as s:
            s.sendall(header(0) + end_marker(0))
        deadline = time.monotonic() + 5
        while not r.done and time.monotonic() < deadline:
            time.sleep(0.01)
        assert r.table().num_rows == 0
