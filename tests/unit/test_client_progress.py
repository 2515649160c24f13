"""The client's progress display and callback (client/progress.py) against a fake server whose
status answers carry a scripted `progress` object (docs/contract.md §4, "Live progress")."""
from __future__ import annotations

import io

import httpx
import pytest
from rich.console import Console

from jumpgate.client import BuilderError, ProgressUpdate, RichProgress
from jumpgate.client.progress import describe, update_from_status

from .test_client_session import FakeServer, make_table, query


def live(rows: int | None, tuples: int | None, stage: int | None = 0, state: str = "running") -> dict:
    nca = {"state": state, "stage": stage, "tuples_in": tuples, "bytes_in": None if tuples is None else tuples * 10,
           "tuples_out": rows, "bytes_out": None if rows is None else rows * 20}
    return {"final": False, "updated_ms": 1.0, "stage": stage, "stages": 1, "ncas": {"nca0": nca},
            "rows_to_clients": rows}


# the status answers while the job runs: NCAs being built and started, then two live readings
SCRIPT = [live(None, None, stage=None, state="waiting"), live(100, 150), live(500, 800)]


class ProgressServer(FakeServer):
    """Answers the first status polls from SCRIPT (running), then as FakeServer does, with the
    final progress: every row sent."""

    def __init__(self, tables, **kw) -> None:
        super().__init__(tables, **kw)
        self.gets = 0

    def handle(self, req: httpx.Request) -> httpx.Response:
        if req.method == "GET" and req.url.path == "/v1/jobs/j1" and self.state == "running":
            self.gets += 1
            if self.gets <= len(SCRIPT):
                self.calls.append((req.method, req.url.path))
                return httpx.Response(200, json={"job_id": "j1", "state": "running", "error": None, "timeline": {},
                                                 "progress": SCRIPT[self.gets - 1]})
        answer = super().handle(req)
        if req.method == "GET" and answer.status_code == 200:
            rows = sum(t.num_rows for t in self.tables.values())
            body = answer.json()
            body["progress"] = {**live(rows, rows, stage=None, state="done"), "final": True}
            return httpx.Response(200, json=body)
        return answer


def test_a_progress_callback_sees_compile_start_live_rows_and_the_end():
    table = make_table(1000)
    server = ProgressServer({"out": table}, streams=2)
    updates: list[ProgressUpdate] = []
    with server.client() as jg:
        got = query(jg).collect(timeout=30, progress=updates.append)
    assert got.num_rows == 1000
    steps = [u.step for u in updates]
    assert steps[:3] == ["compiling", "starting", "starting"], steps  # compile, execute, NCAs starting
    running = [u for u in updates if u.step == "running"]
    assert [(u.rows, u.tuples_in, u.bytes_in) for u in running] == [(100, 150, 1500), (500, 800, 8000)]
    assert all(u.job_id == "j1" and u.stage == 0 and u.stages == 1 for u in running)
    assert steps[-1] == "done" and steps.count("done") == 1
    last = updates[-1]
    assert last.rows == 1000 and last.progress["final"] is True and last.state == "succeeded"
    assert last.bytes_received > 1000 * 8  # every stream's bytes, counted by the receivers
    assert all(a.elapsed_s <= b.elapsed_s for a, b in zip(updates, updates[1:]))


def test_collect_many_and_run_take_progress_too():
    server = ProgressServer({"a": make_table(10), "b": make_table(20, 1)})
    seen: list[str] = []
    with server.client() as jg:
        q = query(jg)
        out = jg.collect_many({"a": q, "b": q}, timeout=30, progress=lambda u: seen.append(u.step))
    assert out["b"].num_rows == 20 and seen[0] == "compiling" and seen[-1] == "done"
    server = ProgressServer({"out": make_table(10)})
    seen.clear()
    with server.client() as jg:
        request = {"operations": [
            {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json",
             "schema": [{"name": "n", "type": "int64"}]},
            {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": "127.0.0.1", "port": 0}]}
        assert jg.run(request, timeout=30, progress=lambda u: seen.append(u.step))["out"].num_rows == 10
    assert seen[0] == "compiling" and seen[-1] == "done"


def test_to_pandas_takes_progress(monkeypatch):
    import jumpgate.client.session as session_mod

    monkeypatch.setattr(session_mod, "to_pandas", lambda table, **options: table)  # no pandas needed
    server = ProgressServer({"out": make_table(10)})
    seen: list[str] = []
    with server.client() as jg:
        assert jg.to_pandas(query(jg), timeout=30, progress=lambda u: seen.append(u.step)).num_rows == 10
    assert seen[0] == "compiling" and seen[-1] == "done"


def test_a_rich_display_shows_the_rows_so_far():
    out = io.StringIO()
    server = ProgressServer({"out": make_table(1000)}, streams=2)
    with server.client() as jg:
        query(jg).collect(timeout=30, progress=RichProgress(Console(file=out, force_terminal=True, width=200),
                                                             transient=False))
    text = out.getvalue()
    assert "job j1: done: 1,000 rows sent, 1,000 tuples in (10.0 KB)" in text, text


def test_progress_true_uses_a_rich_display_on_stderr(capsys):
    server = ProgressServer({"out": make_table(50)})
    with server.client() as jg:
        assert query(jg).collect(timeout=30, progress=True).num_rows == 50


def test_a_callback_that_raises_cancels_the_job_and_a_bad_progress_is_refused_first():
    server = ProgressServer({"out": make_table(1000)})

    def stop_at_rows(u: ProgressUpdate) -> None:
        if u.rows:
            raise KeyboardInterrupt

    with server.client() as jg:
        with pytest.raises(KeyboardInterrupt):
            query(jg).collect(timeout=30, progress=stop_at_rows)
    assert ("DELETE", "/v1/jobs/j1") in server.calls
    server = ProgressServer({"out": make_table(10)})
    with server.client() as jg:
        with pytest.raises(BuilderError, match="progress must be"):
            query(jg).collect(timeout=30, progress="yes")
    assert server.calls == []


def test_descriptions_say_what_happens_and_the_counts_so_far():
    def d(status: dict, received: int = 0) -> str:
        return describe(update_from_status(status, elapsed_s=1.0, bytes_received=received))

    assert describe(ProgressUpdate(step="compiling", elapsed_s=0.0)) == "compiling the request ..."
    assert d({"job_id": "j", "state": "running", "queue": {"position": 1}}) == "job j: waiting for cores ..."
    assert d({"job_id": "j", "state": "running", "progress": SCRIPT[0]}).startswith(
        "job j: building and starting its NCAs")
    assert d({"job_id": "j", "state": "running", "progress": live(1234, 5678)}, 2_500_000) == (
        "job j: stage 1/1: 1,234 rows sent, 5,678 tuples in (56.8 KB), 2.5 MB received")
    # an NCA that cannot report: its counts are unknown, and so are the sums
    unknown = live(None, None)
    assert d({"job_id": "j", "state": "running", "progress": unknown}) == "job j: stage 1/1"
    assert d({"job_id": "j", "state": "succeeded", "progress": live(7, 7, stage=None, state="done")}) == (
        "job j: succeeded, receiving the last bytes: 7 rows sent, 7 tuples in (70 B)")
    # a server without live progress (an older one): the client still says what it can
    assert d({"job_id": "j", "state": "running"}).startswith("job j: building and starting")
