"""`POST /v1/jobs?execute=true` (docs/contract.md, REST additions): compile and run in one call
for a client that already listens. The job runs without a second call, its streams may reach the
receiver before the client has read the layouts, and a request that does not compile leaves no job."""
from __future__ import annotations

import pytest

from jumpgate.client.receiver import Receiver

from .data import duck_view
from .helpers import read_op

pytestmark = pytest.mark.e2e


def request(port: int, condition: str = "a >= 3") -> dict:
    return {"name": "one-call", "operations": [
        read_op(), {"kind": "filter", "name": "f", "input": "r", "condition": condition},
        {"kind": "project", "name": "p", "input": "f", "columns": [{"name": "a", "expr": "a"}]},
        {"kind": "send", "name": "out", "input": "p", "transport": "tcp", "host": "127.0.0.1", "port": port}]}


def test_one_call_compiles_and_runs_the_job(server, duck, data_root):
    with Receiver() as rx:
        r = server.http.post("/v1/jobs", params={"execute": "true"}, json=request(rx.port))
        assert r.status_code == 201, r.text
        answer = r.json()
        assert answer["state"] in ("running", "succeeded"), answer["state"]
        # Only now does the client read the layout: the NCAs may have sent already.
        out = answer["outputs"]["out"]
        rx.start(out["expected_streams"], out["layout"])
        assert rx.wait(60), "the streams never ended"
        assert rx.error is None, rx.error
        got = sorted(rx.table().column("a").to_pylist())
    status = server.http.get(f"/v1/jobs/{answer['job_id']}", params={"wait": 30}).json()
    assert status["state"] == "succeeded", status
    duck_view(duck, "t", data_root / "t.jsonl")
    want = sorted(v for (v,) in duck.execute("SELECT a FROM t WHERE a >= 3").fetchall())
    assert got == want and got
    # Executing it again is refused: it ran.
    again = server.http.post(f"/v1/jobs/{answer['job_id']}/execute")
    assert again.status_code == 409, again.text


def test_without_the_parameter_the_job_waits_compiled(server):
    with Receiver() as rx:
        r = server.http.post("/v1/jobs", json=request(rx.port))
        assert r.status_code == 201 and r.json()["state"] == "compiled", r.text
        assert server.http.delete(f"/v1/jobs/{r.json()['job_id']}").json()["state"] == "cancelled"


def test_a_request_that_does_not_compile_leaves_no_job(server):
    before = {j["job_id"] for j in server.http.get("/v1/jobs").json()}
    r = server.http.post("/v1/jobs", params={"execute": "true"}, json=request(9, condition="nosuch > 1"))
    assert r.status_code == 400, r.text
    assert r.json()["error"]["path"] == "operations[1].condition"
    assert {j["job_id"] for j in server.http.get("/v1/jobs").json()} == before


def test_execute_must_be_a_boolean(server):
    r = server.http.post("/v1/jobs", params={"execute": "soon"}, json=request(9))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["path"] == "query.execute"
