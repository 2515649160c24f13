"""Jobs on disk: one SQLite file (WAL) that outlives the server (runtime/history.py uses it;
docs/operations.md, "Jobs that outlive the server").

`servers`: every server that used the file, with what identifies its process exactly (host, boot,
pid, start ticks) and when it started and stopped; a row that never got its `stopped` is a server
that died, or one still running. `jobs`: a small row per job, written at submit and at each state
change, holding what a listing needs (state, times, counts), so listing thousands of past jobs
never reads their JSON. `pipelines`: the pipeline's JSON (the compile answer), written once at
submit; it is all a past job's page and status need (the live `StagedPipeline` and `LogicalPlan`
cannot be rebuilt from it, and need not be). `timelines`: written at submit (parse, mapping) and
when the job ends. The JSON is in tables of its own because SQLite rewrites a whole row when one
column changes: with a pipeline of tens of kilobytes in the row, each state change cost ten times
as much.

One connection, used behind a lock: writes are a few per job and small, and WAL lets other
processes (a second server on the same file, `sqlite3` in an operator's shell) read meanwhile.
`synchronous=NORMAL` in WAL mode loses nothing when the process is killed, only, perhaps, the last
transactions when the machine loses power. A write that fails is logged and never fails the job.
"""
from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .jobs import Job, JobState, runtime_filter_status
from .progress import progress_json

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
TERMINAL = tuple(s.value for s in JobState if s.terminal)

SCHEMA = """
CREATE TABLE IF NOT EXISTS servers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,        -- the machine's name
    boot TEXT NOT NULL,        -- its boot id: start ticks mean something within one boot only
    pid INTEGER NOT NULL,
    ticks INTEGER NOT NULL,    -- the process's start time, clock ticks since boot
    started REAL NOT NULL,
    stopped REAL               -- NULL: running, or died without saying so
);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    server INTEGER NOT NULL,   -- servers.id of the server that compiled it
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    state TEXT NOT NULL,
    created REAL NOT NULL,
    finished REAL,
    ncas INTEGER NOT NULL,
    stages INTEGER NOT NULL,
    error TEXT                 -- JSON, or NULL
);
CREATE TABLE IF NOT EXISTS pipelines (  -- the compile answer (ncas, stages, outputs, edges, decisions, search)
    id TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS timelines (  -- at submit its parse and mapping, at the end all of it
    id TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_by_created ON jobs (created);
CREATE INDEX IF NOT EXISTS jobs_by_tenant ON jobs (tenant, created);
CREATE INDEX IF NOT EXISTS jobs_by_server ON jobs (server, state);
"""


class StateDbError(RuntimeError):
    """The file cannot be used (written by a newer Jumpgate, not a database, not writable)."""


@dataclass(frozen=True)
class ServerRow:
    id: int
    host: str
    boot: str
    pid: int
    ticks: int
    started: float


@dataclass(frozen=True)
class JobSummary:
    """A line of a job listing, for a live job or a stored one alike."""

    id: str
    name: str
    tenant: str
    state: JobState
    created: float
    finished: float | None
    ncas: int
    stages: int

    @staticmethod
    def of(job: Job) -> JobSummary:
        pipeline = job.pipeline
        return JobSummary(job.id, job.name, job.tenant, job.state, job.created, job.finished,
                          len(getattr(pipeline, "ncas", ())), len(getattr(pipeline, "stages", ())))

    def to_json(self) -> dict:
        return {"job_id": self.id, "name": self.name, "state": self.state.value, "tenant": self.tenant,
                "created": self.created, "finished": self.finished}


@dataclass(frozen=True)
class StoredJob:
    """A job as the file has it: what `GET /v1/jobs/{id}` and the job's page show, for a job of a
    server that is gone (or one this server no longer holds in memory). It cannot run or change."""

    id: str
    name: str
    tenant: str
    state: JobState
    created: float
    finished: float | None
    error: dict | None
    pipeline: dict
    timeline: dict
    server_pid: int  # the server that compiled it, and when that one started
    server_started: float

    def status_json(self) -> dict:  # the same keys as Job.status_json
        answer = {"job_id": self.id, "name": self.name, "state": self.state.value, "tenant": self.tenant,
                  "error": self.error, "timeline": self.timeline,
                  "progress": progress_json(self.pipeline, self.timeline, None, final=self.state.terminal)}
        filters = runtime_filter_status(self.pipeline, {}, self.timeline or {})
        if filters:
            answer["runtime_filters"] = filters
        return answer

    def pipeline_json(self) -> dict:
        return self.pipeline


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


class JobDB:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._closed = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Owner only, as the token file: records hold tenants' job names, paths and addresses.
            # SQLite gives its -wal and -shm files the database file's mode.
            os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
            # autocommit (isolation_level=None): each statement is its own transaction unless
            # `_transaction` groups several; `timeout`: how long to wait for another process's write.
            self._db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")  # a job's JSON goes with it (pruning)
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StateDbError(f"{self.path} was written by a newer Jumpgate (schema {version}; this one "
                                   f"knows {SCHEMA_VERSION})")
            with self._lock:
                self._db.executescript("BEGIN;" + SCHEMA + f"PRAGMA user_version={SCHEMA_VERSION};COMMIT;")
        except (sqlite3.Error, OSError) as e:
            raise StateDbError(f"the job state database {self.path}: {e}") from None

    @contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        """The connection, for one thread at a time."""
        with self._lock:
            yield self._db

    @contextmanager
    def _transaction(self, mode: str = "DEFERRED") -> Iterator[sqlite3.Connection]:
        """The connection for one thread, in one transaction: committed, or rolled back when the
        block raises. IMMEDIATE takes the file's write lock at once, for a read followed by writes
        that another process must not come between."""
        with self._lock:
            self._db.execute(f"BEGIN {mode}")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._db.close()

    # ---------------------------------------------------------------- servers

    def register(self, host: str, boot: str, pid: int, ticks: int, started: float) -> int:
        with self._locked() as db:
            cur = db.execute("INSERT INTO servers (host, boot, pid, ticks, started) VALUES (?, ?, ?, ?, ?)",
                             (host, boot, pid, ticks, started))
            return int(cur.lastrowid)

    def stop_server(self, server: int, at: float) -> None:
        with self._locked() as db:
            db.execute("UPDATE servers SET stopped = ? WHERE id = ? AND stopped IS NULL", (at, server))

    def unstopped(self) -> list[ServerRow]:
        """Servers that never said they stopped: running, or dead."""
        with self._locked() as db:
            rows = db.execute("SELECT id, host, boot, pid, ticks, started FROM servers WHERE stopped IS NULL")
            return [ServerRow(*r) for r in rows.fetchall()]

    def end_server(self, server: ServerRow, running: dict, compiled: dict, at: float) -> list[str]:
        """A dead server's jobs end: `running` ones fail and `compiled` ones are cancelled with
        these errors; the server is marked stopped. The ids of the jobs ended."""
        with self._transaction("IMMEDIATE") as db:
            ids = [r[0] for r in db.execute("SELECT id FROM jobs WHERE server = ? AND state IN (?, ?)",
                                            (server.id, JobState.RUNNING.value, JobState.COMPILED.value))]
            for old, new, error in ((JobState.RUNNING, JobState.FAILED, running),
                                    (JobState.COMPILED, JobState.CANCELLED, compiled)):
                db.execute("UPDATE jobs SET state = ?, error = ?, finished = ? WHERE server = ? AND state = ?",
                           (new.value, _dumps(error), at, server.id, old.value))
            db.execute("UPDATE servers SET stopped = ? WHERE id = ?", (at, server.id))
        return ids

    # ---------------------------------------------------------------- writes

    def insert(self, server: int, job: Job) -> None:
        """The job as compiled (its pipeline's JSON: the compile answer)."""
        if self._closed:  # a job compiled as the server shuts down: nothing is written any more
            return
        pipeline = job.pipeline_json()
        row = (job.id, server, job.tenant, job.name or "", job.state.value, job.created, job.finished,
               len(pipeline.get("ncas", ())), len(pipeline.get("stages", ())),
               _dumps(job.error) if job.error is not None else None)
        pipeline_text, timeline_text = _dumps(pipeline), _dumps(job.timeline.to_json())
        try:
            with self._transaction() as db:
                db.execute("INSERT INTO jobs (id, server, tenant, name, state, created, finished, ncas, stages, "
                           "error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
                db.execute("INSERT INTO pipelines (id, json) VALUES (?, ?)", (job.id, pipeline_text))
                db.execute("INSERT INTO timelines (id, json) VALUES (?, ?)", (job.id, timeline_text))
        except sqlite3.Error:
            log.exception("recording job %s in %s failed", job.id, self.path, extra={"job_id": job.id})

    def update(self, job: Job) -> None:
        """The job's state as it is now (not as a caller saw it: when two threads change it, the
        last write has the latest state), with its error, and its timeline once it ended."""
        if self._closed:  # a job that ended as the server shut down (its cancel timed out)
            return
        state = job.state
        timeline = _dumps(job.timeline.to_json()) if state.terminal else None
        error = _dumps(job.error) if job.error is not None else None
        try:
            with self._transaction() as db:
                db.execute("UPDATE jobs SET state = ?, error = ?, finished = ? WHERE id = ?",
                           (state.value, error, job.finished, job.id))
                if timeline is not None:
                    db.execute("UPDATE timelines SET json = ? WHERE id = ?", (timeline, job.id))
        except sqlite3.Error:
            log.exception("recording job %s's state (%s) in %s failed", job.id, state.value, self.path,
                          extra={"job_id": job.id})

    # ---------------------------------------------------------------- reads

    def get(self, job_id: str) -> tuple[StoredJob, int] | None:
        """The job and the id of its server; None when the file has no such job."""
        with self._locked() as db:
            row = db.execute("SELECT j.id, j.name, j.tenant, j.state, j.created, j.finished, j.error, p.json, "
                             "t.json, s.pid, s.started, j.server FROM jobs j JOIN servers s ON s.id = j.server "
                             "LEFT JOIN pipelines p ON p.id = j.id LEFT JOIN timelines t ON t.id = j.id "
                             "WHERE j.id = ?", (job_id,)).fetchone()
        if row is None:
            return None
        jid, name, tenant, state, created, finished, error, pipeline, timeline, pid, started, server = row
        job = StoredJob(jid, name, tenant, JobState(state), created, finished,
                        json.loads(error) if error else None, json.loads(pipeline) if pipeline else {},
                        json.loads(timeline) if timeline else {}, pid, started)
        return job, server

    def summaries(self, tenant: str | None) -> list[tuple[JobSummary, int]]:
        """Every job (of `tenant` only, unless None), oldest first, with its server's id."""
        query = "SELECT id, name, tenant, state, created, finished, ncas, stages, server FROM jobs"
        args: tuple = ()
        if tenant is not None:
            query, args = query + " WHERE tenant = ?", (tenant,)
        with self._locked() as db:
            rows = db.execute(query + " ORDER BY created, id", args).fetchall()
        return [(JobSummary(r[0], r[1], r[2], JobState(r[3]), r[4], r[5], r[6], r[7]), r[8]) for r in rows]

    def never_ran(self, tenant: str | None) -> set[str]:
        """Ids of the cancelled jobs (of `tenant` only, unless None) whose timeline has no `setup`:
        cancelled before any NCA was set up, as dry runs are (compiled to see the plan, then
        deleted). Reads the timelines of cancelled jobs only: a dry run's is a few hundred bytes."""
        query = ("SELECT j.id FROM jobs j JOIN timelines t ON t.id = j.id "
                 "WHERE j.state = ? AND instr(t.json, '\"setup\":') = 0")
        args: tuple = (JobState.CANCELLED.value,)
        if tenant is not None:
            query, args = query + " AND j.tenant = ?", (*args, tenant)
        with self._locked() as db:
            return {r[0] for r in db.execute(query, args).fetchall()}

    # ---------------------------------------------------------------- pruning

    def prune(self, keep_jobs: int, keep_days: float, now: float | None = None, spare: int | None = None) -> int:
        """Delete ended jobs that ended more than `keep_days` ago, and beyond the newest
        `keep_jobs` ended ones (0: no limit of that kind); jobs not ended are never deleted. Then
        servers without jobs that stopped, except `spare` (this one). The number of jobs deleted."""
        now = time.time() if now is None else now
        marks = ",".join("?" * len(TERMINAL))
        deleted = 0
        with self._transaction("IMMEDIATE") as db:
            if keep_days > 0:
                deleted += db.execute(f"DELETE FROM jobs WHERE state IN ({marks}) AND COALESCE(finished, created) < ?",
                                      (*TERMINAL, now - keep_days * 86400.0)).rowcount
            if keep_jobs > 0:
                deleted += db.execute(f"DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE state IN ({marks}) "
                                      "ORDER BY created DESC, id DESC LIMIT -1 OFFSET ?)",
                                      (*TERMINAL, keep_jobs)).rowcount
            db.execute("DELETE FROM servers WHERE stopped IS NOT NULL AND id IS NOT ? "
                       "AND id NOT IN (SELECT DISTINCT server FROM jobs)", (spare,))
        return deleted
