"""Jobs that outlive the server (runtime/jobdb.py, runtime/history.py, runtime/leftovers.py): the
records, pruning by count and age, a dead server's jobs ended with the reason, tenants, and what
a dead server leaves on the machine (processes, work directories). The restart of a real server
is tests/e2e/test_durable_jobs.py."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from jumpgate.runtime.history import HistorySettings, JobHistory
from jumpgate.runtime.jobdb import JobDB
from jumpgate.runtime.jobs import Job, JobState, JobStore
from jumpgate.runtime.leftovers import (
    OWNER_ENV,
    OWNER_FILE,
    ProcessId,
    boot_id,
    orphans,
    remove_dead_work_roots,
    stop_orphans,
    this_process,
)
from jumpgate.runtime.timeline import Timeline
from jumpgate.tenancy.tokens import Principal

DAY = 86400.0


class Pipeline:
    """What a job's record needs of a pipeline: its JSON and its NCAs and stages."""

    ncas = ("nca0", "nca1")
    stages = (("nca0", "nca1"),)

    def to_json(self) -> dict:
        return {"ncas": [{"id": n, "implementation": "software.scan_json"} for n in self.ncas],
                "stages": [list(s) for s in self.stages],
                "decisions": {"r": {"implementation": "software.scan_json", "verdicts": []}}}


def job(job_id: str, tenant: str = "default", state: JobState = JobState.COMPILED, created: float | None = None,
        finished: float | None = None) -> Job:
    j = Job(id=job_id, name=f"job {job_id}", plan=None, pipeline=Pipeline(), timeline=Timeline(), tenant=tenant,
            state=state)
    if created is not None:
        j.created = created
    j.finished = finished if finished is not None else (j.created if state.terminal else None)
    return j


def dead_process() -> ProcessId:
    p = subprocess.Popen(["true"])
    p.wait()
    return ProcessId(p.pid, 1)


def settings(tmp_path: Path, **kw) -> HistorySettings:
    return HistorySettings(tmp_path / "state.db", **{"upkeep_s": 0.0, **kw})


def states(db: JobDB) -> dict[str, str]:
    return {s.id: s.state.value for s, _ in db.summaries(None)}


# ---------------------------------------------------------------- records and pruning


def test_a_job_is_recorded_at_submit_at_each_change_and_with_its_timeline_at_the_end(tmp_path):
    history = JobHistory(settings(tmp_path), tmp_path / "cache")
    store = JobStore()
    store.journal = history
    j = job("a1")
    j.timeline.record("parse", j.timeline.t0, j.timeline.t0 + 1_000_000)
    store.add(j)
    stored = history.get("a1")
    assert stored.state is JobState.COMPILED and stored.pipeline == Pipeline().to_json()
    assert set(stored.timeline["phases"]) == {"parse"}
    store.transition(j, JobState.RUNNING, (JobState.COMPILED,))
    assert history.get("a1").state is JobState.RUNNING
    span = j.timeline.begin("execute")
    j.timeline.end(span)
    j.error = {"message": "boom", "nca": "nca1"}
    store.transition(j, JobState.FAILED, (JobState.RUNNING,))
    stored = history.get("a1")
    assert stored.state is JobState.FAILED and stored.error == j.error and stored.finished == j.finished
    assert stored.status_json() == j.status_json()  # what GET /v1/jobs/{id} answers, the same
    history.close()


def test_pruning_keeps_the_newest_ended_jobs_and_none_older_than_the_age_limit(tmp_path):
    db = JobDB(tmp_path / "state.db")
    server = db.register("h", "b", 1, 1, 0.0)
    now = time.time()
    for i in range(6):  # ended a0..a5, a5 newest
        db.insert(server, job(f"a{i}", state=JobState.SUCCEEDED, created=now - 100 + i))
    db.insert(server, job("old", state=JobState.FAILED, created=now - 40 * DAY, finished=now - 40 * DAY))
    db.insert(server, job("live", state=JobState.RUNNING, created=now - 50 * DAY))  # never pruned
    assert db.prune(keep_jobs=0, keep_days=30, now=now) == 1
    assert set(states(db)) == {"a0", "a1", "a2", "a3", "a4", "a5", "live"}
    assert db.prune(keep_jobs=2, keep_days=0, now=now) == 4
    assert set(states(db)) == {"a4", "a5", "live"}
    # A job's JSON goes with it.
    assert db._db.execute("SELECT COUNT(*) FROM pipelines").fetchone()[0] == 3
    assert db._db.execute("SELECT COUNT(*) FROM timelines").fetchone()[0] == 3
    assert db.prune(keep_jobs=0, keep_days=0, now=now + 1000 * DAY) == 0  # 0: no limit
    db.close()


def test_the_server_prunes_at_start_and_then_periodically(tmp_path):
    db = JobDB(tmp_path / "state.db")
    server = db.register("h", "b", 1, 1, 0.0)
    now = time.time()
    for i in range(5):
        db.insert(server, job(f"s{i}", state=JobState.SUCCEEDED, created=now - 10 + i))
    db.insert(server, job("ancient", state=JobState.SUCCEEDED, created=now - 9 * DAY, finished=now - 9 * DAY))
    db.close()
    history = JobHistory(settings(tmp_path, keep_jobs=3, keep_days=7, upkeep_s=0.1), tmp_path / "cache")
    try:
        assert set(states(history.db)) == {"s2", "s3", "s4"}
        for i in range(5, 8):
            history.job_added(job(f"s{i}", state=JobState.SUCCEEDED, created=now + i))
        deadline = time.monotonic() + 10
        while len(states(history.db)) > 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(states(history.db)) == {"s5", "s6", "s7"}
    finally:
        history.close()


# ---------------------------------------------------------------- a dead server's jobs


def test_a_dead_server_s_unfinished_jobs_end_saying_why_and_a_live_one_s_are_left_alone(tmp_path):
    db = JobDB(tmp_path / "state.db")
    gone = dead_process()
    me = this_process()
    dead = db.register(socket.gethostname(), boot_id(), gone.pid, gone.ticks, time.time() - 60)
    live = db.register(socket.gethostname(), boot_id(), me.pid, me.ticks, time.time())  # another service here
    db.insert(dead, job("ran", state=JobState.RUNNING))
    db.insert(dead, job("compiled", state=JobState.COMPILED))
    db.insert(dead, job("done", state=JobState.SUCCEEDED))
    db.insert(live, job("theirs", state=JobState.RUNNING))
    db.close()

    history = JobHistory(settings(tmp_path), tmp_path / "cache")
    try:
        ran = history.get("ran")
        assert ran.state is JobState.FAILED and ran.finished is not None and ran.server_pid == gone.pid
        assert ran.error["message"].startswith(f"the server stopped (pid {gone.pid}) while the job ran; restarted at ")
        compiled = history.get("compiled")
        assert compiled.state is JobState.CANCELLED
        assert f"the server stopped (pid {gone.pid}) before the job was executed" in compiled.error["message"]
        done = history.get("done")
        assert done.state is JobState.SUCCEEDED and done.error is None
        # The live server answers for its own jobs: not listed here, nor changed.
        assert history.get("theirs") is None
        listed = {s.id: s.state for s in history.summaries(Principal("default", "admin"), [])}
        assert listed == {"ran": JobState.FAILED, "compiled": JobState.CANCELLED, "done": JobState.SUCCEEDED}
        assert states(history.db)["theirs"] == "running"
        assert {s.id for s in history.db.unstopped()} == {live, history.server}
    finally:
        history.close()


def test_a_tenant_lists_its_own_jobs_an_admin_all_and_live_jobs_override_their_records(tmp_path):
    history = JobHistory(settings(tmp_path), tmp_path / "cache")
    try:
        a, b = job("a", tenant="acme", created=1.0), job("b", tenant="globex", created=2.0)
        for j in (a, b):
            history.job_added(j)
        a.state = JobState.RUNNING  # the live object is newer than its record
        c = job("c", tenant="acme", created=3.0)  # live, not recorded (yet)
        acme, admin = Principal("acme", "user"), Principal("ops", "admin")
        assert [(s.id, s.state) for s in history.summaries(acme, [a, b, c])] == [
            ("a", JobState.RUNNING), ("c", JobState.COMPILED)]
        assert [s.id for s in history.summaries(admin, [a, b, c])] == ["a", "b", "c"]
        assert [s.id for s in history.summaries(Principal("globex", "user"), [])] == ["b"]
    finally:
        history.close()


# ---------------------------------------------------------------- leftovers on the machine


def fake_nca(cache: Path, env: dict[str, str], detach: bool = False) -> subprocess.Popen | int:
    """A process whose executable is in the cache (as an NCA's is) and that ignores the end of its
    standard input. `detach`: its parent exits at once, so init adopts it (as when a server dies);
    then its pid is returned."""
    exe = cache / "ncas" / "fake-nca"
    if not exe.exists():
        exe.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shutil.which("sleep"), exe)
    env = {**{k: v for k, v in os.environ.items() if k != OWNER_ENV}, **env}  # this process's mark: only if given
    if not detach:
        return subprocess.Popen([str(exe), "300"], env=env, start_new_session=True)
    out = subprocess.run(["sh", "-c", f'"{exe}" 300 >/dev/null 2>&1 & echo $!'], env=env, capture_output=True,
                         text=True, start_new_session=True, check=True)
    return int(out.stdout)


def test_the_sweep_stops_a_dead_server_s_ncas_and_no_live_server_s(tmp_path):
    cache = tmp_path / "cache"
    orphan = fake_nca(cache, {OWNER_ENV: str(dead_process())})
    mine = fake_nca(cache, {OWNER_ENV: str(this_process())})  # this process is a live server's
    unmarked_child = fake_nca(cache, {})  # an older server's: its parent (this process) lives
    adopted = fake_nca(cache, {}, detach=True)
    try:
        time.sleep(0.2)  # the detached one's shell has exited
        with open(f"/proc/{adopted}/stat") as f:
            adopted_by_init = f.read().rsplit(")", 1)[1].split()[1] == "1"
        found = {o.pid for o in orphans(cache)}
        assert orphan.pid in found and mine.pid not in found and unmarked_child.pid not in found
        assert (adopted in found) == adopted_by_init  # a subreaper may adopt it instead of init
        stopped = {o.pid for o in stop_orphans(cache)}
        assert stopped == found
        assert orphan.wait(5) == -signal.SIGTERM
        assert mine.poll() is None and unmarked_child.poll() is None
        assert not orphans(tmp_path / "elsewhere")  # only this cache's processes are looked at
    finally:
        for p in (orphan, mine, unmarked_child):
            p.kill()
            p.wait()
        try:
            os.kill(adopted, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_work_roots_of_dead_servers_go_and_live_ones_stay(tmp_path):
    cache = tmp_path / "cache"
    jobs = cache / "jobs"
    gone = dead_process()
    dead_unmarked = jobs / str(gone.pid)  # an older server's: no .owner, no such process
    me = this_process()
    mine = jobs / str(me.pid)
    reused = jobs / str(os.getppid())  # a live pid, but the directory is older than its process
    marked_dead = jobs / "999999999"
    for d in (dead_unmarked, mine, reused, marked_dead):
        (d / "somejob").mkdir(parents=True)
    (mine / OWNER_FILE).write_text(str(me))
    (marked_dead / OWNER_FILE).write_text(str(gone))
    os.utime(reused, (0, 0))
    (jobs / "not-a-pid").mkdir()
    removed = set(remove_dead_work_roots(cache))
    assert removed == {dead_unmarked, reused, marked_dead}
    assert mine.is_dir() and (jobs / "not-a-pid").is_dir()


def test_a_newer_schema_is_refused(tmp_path):
    import sqlite3

    from jumpgate.runtime.jobdb import StateDbError

    path = tmp_path / "state.db"
    with sqlite3.connect(path) as c:
        c.execute("PRAGMA user_version = 99")
    with pytest.raises(StateDbError, match="newer Jumpgate"):
        JobDB(path)
