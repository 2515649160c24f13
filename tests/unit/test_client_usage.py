"""The client under ordinary use: 503 retries (against a stand-in HTTP server that answers 503
with Retry-After, then succeeds), readable reprs, to_pandas with and without pandas, and the
plan text of explain() from a recorded compile answer (the real server: tests/e2e/test_client_usage.py)."""
from __future__ import annotations

import json
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa
import pytest

import jumpgate.client.frames as frames
import jumpgate.client.session as session_mod
from jumpgate.client import BuilderError, Jumpgate, MissingDependency, Plan, RequestRejected, to_pandas
from jumpgate.client.session import retry_after_seconds


class Stand503:
    """An HTTP server on loopback: the first `busy` POSTs answer 503 with `retry_after` (None:
    no header), then 201 with a compile answer. Records when each request came."""

    def __init__(self, busy: int, retry_after: str | None = "1") -> None:
        self.busy, self.retry_after = busy, retry_after
        self.times: list[float] = []
        self.paths: list[str] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.times.append(time.monotonic())
                outer.paths.append(self.path)
                if len([p for p in outer.paths if p == self.path]) <= outer.busy:
                    hdr = {} if outer.retry_after is None else {"Retry-After": outer.retry_after}
                    self._send(503, {"error": {"message": "no free cores"}}, hdr)
                elif self.path.endswith("/execute"):
                    self._send(202, {"job_id": "j1", "state": "running"})
                else:
                    self._send(201, {"job_id": "j1", "state": "compiled", "ncas": [], "stages": [], "outputs": {}})

            def do_DELETE(self):
                outer.paths.append("DELETE " + self.path)
                self._send(200, {"job_id": "j1", "state": "cancelled"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Stand503:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


REQ = {"operations": [{"kind": "read", "name": "r", "path": "t.jsonl", "format": "json",
                       "schema": [{"name": "a", "type": "int32"}]}]}


# ------------------------------------------------------------------ retries
def test_retry_after_parsing():
    assert retry_after_seconds(None) == session_mod.DEFAULT_RETRY_AFTER_S
    assert retry_after_seconds("") == session_mod.DEFAULT_RETRY_AFTER_S
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("0.5") == 0.5
    assert retry_after_seconds("-3") == 0.0
    assert retry_after_seconds("3600") == session_mod.MAX_RETRY_WAIT_S  # capped per wait
    assert retry_after_seconds("soon") == session_mod.DEFAULT_RETRY_AFTER_S
    assert retry_after_seconds("nan") == session_mod.DEFAULT_RETRY_AFTER_S
    now = 1_700_000_000.0
    assert retry_after_seconds("Tue, 14 Nov 2023 22:13:23 GMT", now=now) == pytest.approx(3.0)


def test_submit_retries_503_honouring_retry_after():
    with Stand503(busy=2, retry_after="0.4") as srv, Jumpgate(srv.url, token="") as jg:
        t0 = time.monotonic()
        job = jg.submit(REQ)
        took = time.monotonic() - t0
    assert job.job_id == "j1"
    assert len(srv.times) == 3
    gaps = [b - a for a, b in zip(srv.times, srv.times[1:])]
    jitter = 1 + session_mod.RETRY_JITTER
    for g in gaps:  # never earlier than Retry-After, and at most its jittered value (+ slack)
        assert 0.4 <= g <= 0.4 * jitter + 0.3, gaps
    assert took < 2 * 0.4 * jitter + 1.0


def test_execute_retries_503_and_default_wait_without_header():
    with Stand503(busy=1, retry_after=None) as srv, Jumpgate(srv.url, token="") as jg:
        srv.busy = 0
        job = jg.submit(REQ)
        srv.busy = 1
        t0 = time.monotonic()
        job.execute()
        took = time.monotonic() - t0
    assert srv.paths == ["/v1/jobs", "/v1/jobs/j1/execute", "/v1/jobs/j1/execute"]
    assert session_mod.DEFAULT_RETRY_AFTER_S <= took <= session_mod.DEFAULT_RETRY_AFTER_S * 1.2 + 0.5
    assert job.state == "running"


def test_total_retry_time_is_bounded_then_the_error_says_how_long():
    with Stand503(busy=10_000, retry_after="0.3") as srv, Jumpgate(srv.url, token="", retry_for=1.0) as jg:
        t0 = time.monotonic()
        with pytest.raises(RequestRejected) as ei:
            jg.submit(REQ)
        took = time.monotonic() - t0
    assert 1.0 <= took < 1.6, took
    e = ei.value
    assert e.status == 503 and e.retries >= 2 and 1.0 <= e.retried_for < 1.6
    assert "no free cores" in str(e) and f"retrying {e.retries} times" in str(e) and "retry_for" in str(e)


def test_a_long_retry_after_is_cut_to_the_budget():
    with Stand503(busy=10_000, retry_after="30") as srv, Jumpgate(srv.url, token="", retry_for=0.5) as jg:
        t0 = time.monotonic()
        with pytest.raises(RequestRejected) as ei:
            jg.submit(REQ)
    assert time.monotonic() - t0 < 1.2
    assert ei.value.retries == 1


def test_retry_for_zero_does_not_retry_and_other_errors_are_not_retried():
    with Stand503(busy=1) as srv, Jumpgate(srv.url, token="", retry_for=0) as jg:
        with pytest.raises(RequestRejected) as ei:
            jg.submit(REQ)
    assert len(srv.times) == 1 and ei.value.retries == 0 and "retrying" not in str(ei.value)
    with pytest.raises(BuilderError):
        Jumpgate("http://127.0.0.1:1", retry_for=-1)


def test_status_calls_are_not_retried():
    """Only submit and execute retry; a 503 elsewhere is raised at once."""
    with Stand503(busy=5) as srv, Jumpgate(srv.url, token="") as jg:
        t0 = time.monotonic()
        with pytest.raises(RequestRejected):
            jg._call("POST", "/v1/other", {})
        took = time.monotonic() - t0
    assert took < 0.5 and len(srv.times) == 1


# ------------------------------------------------------------------ repr
def test_reprs():
    jg = Jumpgate("http://127.0.0.1:8470/", token="s3cr3t-token")
    try:
        assert repr(jg) == "<Jumpgate http://127.0.0.1:8470 token=set>"
        assert "s3cr3t" not in repr(jg) and "s3cr3t" not in str(jg)
        t = jg.read("t.jsonl", schema={"a": "int32", "id": "int64", "s": "string"})
        assert repr(t.filter("a > 1").project("id", "s")) == \
            "<Dataflow read('t.jsonl') -> filter(a > 1) -> project(id, s)>"
        u = jg.read("u.jsonl", schema={"k": "int32", "v": "int64"}, name="u")
        j = t.join(u, on=[("a", "k")], columns={"id": "id", "v": "v"}).aggregate("id", total="sum(v)", n="count(*)")
        assert repr(j) == ("<Dataflow read('t.jsonl') -> join(read('u.jsonl') as u on a=k) -> "
                           "aggregate(by id; total=sum(v), n=count(*))>")
        sh = t.shuffle("a", 4, name="sh")
        assert repr(sh[2]) == "<Dataflow read('t.jsonl') -> shuffle(a; 4)[2] as sh[2]>"
        assert repr(t.project(total="a + id").send("10.0.0.1", 5000)) == \
            "<Send read('t.jsonl') -> project(total=a + id) -> send(tcp://10.0.0.1:5000)>"
        deep = t
        for i in range(500):  # no recursion, and a bounded length
            deep = deep.filter(f"a > {i}")
        r = repr(deep)
        assert r.startswith("<Dataflow read('t.jsonl') -> filter(a > 0)") and "... 489 more ..." in r
        assert r.endswith("filter(a > 499)>") and len(r) < 400
        assert "…" in repr(t.filter("a > 1 AND " * 20 + "a < 2"))
    finally:
        jg.close()
    anon = Jumpgate("http://h:1", token="")
    assert repr(anon) == "<Jumpgate http://h:1 token=none>"
    job = session_mod.Job(anon, {"job_id": "abc", "state": "compiled", "outputs": {}})
    assert repr(job) == "<Job abc state=compiled>"
    anon.close()


# ------------------------------------------------------------------ to_pandas
@pytest.fixture
def no_pandas(monkeypatch):
    """As if pandas were not installed (pyarrow itself must not see a broken pandas, so the
    client's import is what fails)."""
    def import_module(name: str):
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(frames, "importlib", types.SimpleNamespace(import_module=import_module))


def test_to_pandas_without_pandas_names_the_extra(no_pandas):
    with pytest.raises(MissingDependency) as ei:
        to_pandas(pa.table({"a": [1, 2]}))
    assert "pip install 'jumpgate[pandas]'" in str(ei.value)
    assert isinstance(ei.value, ImportError)
    jg = Jumpgate("http://127.0.0.1:1", token="")
    node = jg.read("t.jsonl", schema={"a": "int32"})
    with pytest.raises(MissingDependency):  # checked before anything is sent (the URL is dead)
        node.to_pandas()
    jg.close()


def test_to_pandas_with_pandas():
    pd = pytest.importorskip("pandas")
    df = to_pandas(pa.table({"a": [1, 2], "s": ["x", None]}))
    assert isinstance(df, pd.DataFrame) and list(df["a"]) == [1, 2] and df["s"].isna().tolist() == [False, True]
    with pytest.raises(TypeError):
        to_pandas([1, 2])


# ------------------------------------------------------------------ plan text
ANSWER = {
    "job_id": "j9", "state": "compiled",
    "ncas": [{"id": "nca0", "implementation": "software.scan_json", "operations": ["r", "f"], "stages": [0],
              "converter": False, "host": "local"},
             {"id": "nca1", "implementation": "switch.model", "operations": ["g"], "stages": [1],
              "converter": False, "host": None}],
    "stages": [["nca0"], ["nca1"]],
    "edges": [{"from": "nca0", "from_port": 0, "to": "nca1", "to_port": 0, "client": False, "edge": "f",
               "format": "ntf", "transport": "udp", "streams": 2, "keyed": False},
              {"from": "nca1", "from_port": 0, "to": "out", "to_port": 0, "client": True, "edge": "g",
               "format": "ntf", "transport": "tcp", "streams": 1, "keyed": False}],
    "decisions": {
        "r": {"implementation": "software.scan_json", "nca": "nca0", "verdicts": [
            {"implementation": "software.scan_orc", "ok": False, "reason": "reads only orc files,\n  not json",
             "chosen": False},
            {"implementation": "software.scan_json", "ok": True, "reason": "takes (r, f)", "chosen": True}]},
        "out": {"implementation": None, "nca": None, "verdicts": [], "note": "client endpoint: receives g"},
    },
    "search": {"cost_text": "2 NCA instances"},
}


def test_plan_text():
    text = str(Plan(ANSWER, {}))
    lines = text.splitlines()
    assert lines[0] == "Plan of job j9 (compiled, not run, deleted): 2 NCA instances"
    assert "  0: nca0" in lines and "  1: nca1" in lines
    assert "  nca0  software.scan_json on local, stage 0: r, f" in lines
    assert "  nca1  switch.model in the network, stage 1: g" in lines
    assert "  nca0:0 -> nca1:0: f as ntf over udp, 2 streams" in lines
    assert "  nca1:0 -> out (client): g as ntf over tcp, 1 stream" in lines
    assert "  r -> software.scan_json (nca0): takes (r, f)" in lines
    assert "      rejected software.scan_orc: reads only orc files, not json" in lines  # folded to one line
    assert "  out: client endpoint: receives g" in lines
    assert json.loads(Plan(ANSWER, {}).to_json()) == ANSWER
    assert repr(Plan(ANSWER, {})) == "<Plan 2 NCA(s), 2 stage(s), 2 edge(s)>"


def test_explain_deletes_the_compiled_job():
    with Stand503(busy=1, retry_after="0.1") as srv, Jumpgate(srv.url, token="") as jg:
        plan = jg.explain(jg.read("t.jsonl", schema={"a": "int32"}).filter("a > 1"))
    assert srv.paths == ["/v1/jobs", "/v1/jobs", "DELETE /v1/jobs/j1"]
    assert plan.job_id == "j1"
    sends = [op for op in plan.request["operations"] if op["kind"] == "send"]
    assert sends and sends[0]["port"] > 0
