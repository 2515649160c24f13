"""Jobs outlive the server (docs/operations.md, "Jobs that outlive the server"), against real
server processes: one killed with SIGKILL while a job runs and one waits for cores, restarted on
the same cache and state database; and tenants' past jobs after a restart with tokens."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from jumpgate.client import Jumpgate
from jumpgate.local_server import LocalServer
from jumpgate.runtime.leftovers import OWNER_ENV, ProcessId

from .helpers import read_op

pytestmark = pytest.mark.e2e

SCHEMA = [{"name": "a", "type": "int32"}, {"name": "s", "type": "string"}]
EXE = str(Path(sys.executable).with_name("jumpgate"))


def small(port: int = 0) -> dict:
    return {"name": "small", "operations": [
        read_op("r", "small.jsonl", SCHEMA),
        {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": "127.0.0.1", "port": port}]}


def stalled(jg: Jumpgate, name: str):
    """A job that sends 40 MB to a client that accepts the connection and never reads: it runs
    until something ends it. Returns the job and the listener, where the job connects once it
    runs (it may wait in the run queue)."""
    listener = socket.create_server(("127.0.0.1", 0))
    job = jg.submit({"name": name, "operations": [
        read_op("r", "big.jsonl", SCHEMA),
        {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": "127.0.0.1",
         "port": listener.getsockname()[1]}]})
    job.execute()
    return job, listener


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("durable-data")
    (root / "small.jsonl").write_text("".join(f'{{"a": {i}, "s": "row{i}"}}\n' for i in range(50)))
    (root / "big.jsonl").write_text(('{"a": 1, "s": "' + "x" * 2000 + '"}\n') * 20000)
    return root


def cache_for(tmp: Path) -> Path:
    """The NCA cache: the session's when JUMPGATE_TEST_CACHE names one (builds are slow), else a
    fresh one. Each test's state database is its own either way (--state-db)."""
    shared = os.environ.get("JUMPGATE_TEST_CACHE")
    return Path(shared) if shared else tmp / "cache"


def process_id(pid: int) -> ProcessId:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return ProcessId(pid, int(fields[19]))


def stuck_nca(cache: Path, owner: ProcessId) -> subprocess.Popen:
    """A process that looks like an NCA of `owner` (its executable in the cache, `owner` in its
    environment) and, unlike a real one, ignores the end of its standard input: what the start-up
    sweep is there for. Detached, as a server's NCAs are."""
    exe = cache / "ncas" / "stuck-nca-for-test"
    exe.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(shutil.which("sleep"), exe)
    return subprocess.Popen([str(exe), "300"], stdin=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, OWNER_ENV: str(owner)})


def test_a_killed_server_s_jobs_are_listed_after_a_restart_and_its_leftovers_are_gone(root, tmp_path):
    cache, db = cache_for(tmp_path), tmp_path / "jobs.db"
    args = ["--state-db", str(db), "--overcommit", "1"]  # one core, one job: the next one waits
    first = LocalServer(root, cache, tmp_path / "first.log", cores=1, extra_args=args)
    listeners = []
    try:
        with Jumpgate(first.url) as jg:
            rows = jg.run(small(), timeout=120)["out"]
            assert rows.num_rows == 50
            done = jg.last_job.job_id
            done_status = jg.last_job.status()
            running, listener = stalled(jg, "running")
            listeners.append(listener)
            conn, _ = listener.accept()  # and never read from it
            listeners.append(conn)
            queued, listener = stalled(jg, "queued")  # one core: it waits for the first
            listeners.append(listener)
            assert "queue" in queued.status(), queued.last_status
            assert running.status()["state"] == "running" and "queue" not in running.last_status
        old = process_id(first.proc.pid)
        ncas = [process_id(p) for p in first.children(spares=True)]
        assert ncas, "the running job's NCA runs"
        stuck = stuck_nca(cache, old)
        listeners.append(stuck)  # reaped at the end
        work_root = cache / "jobs" / str(old.pid)
        assert work_root.is_dir()
        os.kill(first.proc.pid, signal.SIGKILL)  # the server only: its NCAs are on their own now
        first.proc.wait(10)

        second = LocalServer(root, cache, tmp_path / "second.log", cores=1, extra_args=args)
        try:
            listed = {j["job_id"]: j for j in second.http.get("/v1/jobs").json()}
            assert {done, running.job_id, queued.job_id} <= set(listed), listed
            assert listed[done]["state"] == "succeeded"
            status = second.http.get(f"/v1/jobs/{done}").json()
            assert status["timeline"] == done_status["timeline"] and status["error"] is None
            assert status["ncas"] == done_status["ncas"] and status["decisions"] == done_status["decisions"]
            for job in (running, queued):
                status = second.http.get(f"/v1/jobs/{job.job_id}").json()
                assert status["state"] == "failed", status
                message = status["error"]["message"]
                assert f"the server stopped (pid {old.pid}) while the job ran; restarted at" in message, message
                assert status["ncas"] and status["decisions"], status  # the pipeline's JSON, as recorded
            # A past job cannot run again nor be cancelled: it is over.
            assert second.http.post(f"/v1/jobs/{queued.job_id}/execute").status_code == 409
            assert second.http.delete(f"/v1/jobs/{running.job_id}").json()["state"] == "failed"
            # No process of the old server is left: its NCAs exited when their standard input
            # closed, and the one that ignores it was stopped by the new server's sweep.
            assert stuck.poll() == -signal.SIGTERM, stuck.returncode
            left = [p.pid for p in ncas if p.alive()]
            assert not left, left
            assert not work_root.exists()
            # The pages show them too.
            page = second.http.get("/ui/jobs").text
            assert all(j in page for j in (done, running.job_id, queued.job_id))
            page = second.http.get(f"/ui/jobs/{running.job_id}")
            assert page.status_code == 200 and f"pid {old.pid}" in page.text and "restarted at" in page.text
            # And new jobs run.
            with Jumpgate(second.url) as jg:
                assert jg.run(small(), timeout=120)["out"].num_rows == 50
                assert jg.last_job.job_id in {j["job_id"] for j in second.http.get("/v1/jobs").json()}
        finally:
            second.stop()
    finally:
        for s in listeners:
            if isinstance(s, subprocess.Popen):
                s.kill()
                s.wait()
            else:
                s.close()
        first.stop()


def test_a_clean_stop_records_every_job_and_the_next_server_changes_none(root, tmp_path):
    cache, db = cache_for(tmp_path), tmp_path / "jobs.db"
    with LocalServer(root, cache, tmp_path / "a.log", extra_args=["--state-db", str(db)]) as first:
        with Jumpgate(first.url) as jg:
            jg.run(small(), timeout=120)
            done = jg.last_job.job_id
            pending = jg.submit(small(port=9)).job_id  # compiled, never executed
    # SIGTERM: the server cancels what is not over and says it stopped.
    with LocalServer(root, cache, tmp_path / "b.log", extra_args=["--state-db", str(db)]) as second:
        listed = {j["job_id"]: j["state"] for j in second.http.get("/v1/jobs").json()}
        assert listed == {done: "succeeded", pending: "cancelled"}, listed
        assert second.http.get(f"/v1/jobs/{pending}").json()["error"] is None  # cancelled at shutdown, not lost


def tokens_cmd(*args: str) -> str:
    return subprocess.run([EXE, "tokens", *args], capture_output=True, text=True, timeout=60, check=True).stdout.strip()


def client(srv: LocalServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"},
                        cookies={"jumpgate_token": token}, timeout=60)


def test_after_a_restart_each_tenant_still_sees_only_its_own_past_jobs(tmp_path):
    root = tmp_path / "data"
    for tenant in ("acme", "globex"):
        (root / tenant).mkdir(parents=True)
        (root / tenant / "t.jsonl").write_text("".join(f'{{"a": {i}, "s": "{tenant}"}}\n' for i in range(20)))
    file = tmp_path / "tokens.yaml"
    tok = {name: tokens_cmd("add", "--file", str(file), "--tenant", name, *(["--role", "admin"] if name == "ops"
                                                                           else []))
           for name in ("acme", "globex", "ops")}
    args = ["--tokens", str(file), "--state-db", str(tmp_path / "jobs.db")]
    cache = cache_for(tmp_path)
    jobs: dict[str, str] = {}
    first = LocalServer(root, cache, tmp_path / "first.log", extra_args=args)
    try:
        for tenant in ("acme", "globex"):
            with Jumpgate(first.url, token=tok[tenant]) as jg:
                request = {"name": tenant, "operations": [
                    read_op("r", f"{tenant}/t.jsonl", SCHEMA),
                    {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": "127.0.0.1",
                     "port": 0}]}
                jg.run(request, timeout=120)
                jobs[tenant] = jg.last_job.job_id
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)
    finally:
        first.stop()
    with LocalServer(root, cache, tmp_path / "second.log", extra_args=args) as second:
        for who, sees in (("acme", {jobs["acme"]}), ("globex", {jobs["globex"]}), ("ops", set(jobs.values()))):
            with client(second, tok[who]) as c:
                assert {j["job_id"] for j in c.get("/v1/jobs").json()} == sees, who
                page = c.get("/ui/jobs").text
                for tenant, job in jobs.items():
                    code = 200 if job in sees else 404
                    status = c.get(f"/v1/jobs/{job}")
                    assert status.status_code == code, (who, job, status.text)
                    if code == 200:
                        assert status.json()["state"] == "succeeded" and status.json()["tenant"] == tenant
                    assert c.get(f"/ui/jobs/{job}").status_code == code, (who, job)
                    assert (job in page) == (job in sees), (who, job)
                    assert c.delete(f"/v1/jobs/{job}").status_code == code, (who, job)
