"""Jobs that outlive the server (docs/operations.md, "Jobs that outlive the server").

The service's side of the job database (runtime/jobdb.py): the job store tells it of each job
added and each state change (`JobJournal`), and it answers for the jobs the store no longer holds:
those of servers that are gone, and this server's own that it evicted from memory.

When a server starts it first cleans up after the ones that died on this machine: the NCA
processes they left (runtime/leftovers.py), their work directories (`cache/jobs/<pid>`), and their
jobs that were not over: a `running` job (queued ones too) fails and a `compiled` one is
cancelled, saying which server stopped and when this one found out. Then it prunes old records.
It does all of that again every `upkeep_s` seconds, for a server that dies while this one runs.

A server answers for its own jobs and for those of servers that are gone, not for the jobs of
another live server that shares the file (a blue-green restart, tests on one cache): that server
answers for them, and what this one could show would be a stale snapshot.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..tenancy.tokens import Principal
from .jobdb import JobDB, JobSummary, ServerRow, StoredJob
from .jobs import Job
from .leftovers import ProcessId, boot_id, claim, mark_this_process, remove_dead_work_roots, stop_orphans

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HistorySettings:
    path: Path  # the SQLite file
    keep_jobs: int = 10_000  # ended jobs kept, the newest; 0 = no limit
    keep_days: float = 30.0  # ended jobs older than this are deleted; 0 = no limit
    upkeep_s: float = 600.0  # how often the cleanup and pruning run again; 0 = at start only


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


class JobHistory:
    def __init__(self, settings: HistorySettings, cache_dir: Path) -> None:
        self.settings = settings
        self.cache_dir = Path(cache_dir)
        self.me = mark_this_process()  # before any NCA starts: each inherits the mark
        self.host = socket.gethostname()
        self.boot = boot_id()
        self.started = time.time()
        self.db = JobDB(settings.path)
        self.server = self.db.register(self.host, self.boot, self.me.pid, self.me.ticks, self.started)
        self._closed = threading.Event()
        self._lock = threading.Lock()  # one upkeep at a time
        self.upkeep(restart=True)
        self._thread: threading.Thread | None = None
        if settings.upkeep_s > 0:
            self._thread = threading.Thread(target=self._loop, name="job-history", daemon=True)
            self._thread.start()

    def claim(self, work_root: Path) -> None:
        """`work_root` is this server's: no later server takes it for a dead one's."""
        claim(work_root, self.me)

    def close(self) -> None:
        """This server stops: its record says so (its jobs ended already), and nothing more is
        written."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._thread is not None:
            self._thread.join(10)
        with self._lock:
            self.db.stop_server(self.server, time.time())
            self.db.close()

    # ---------------------------------------------------------------- the journal (JobStore)

    def job_added(self, job: Job) -> None:
        self.db.insert(self.server, job)

    def job_changed(self, job: Job) -> None:
        self.db.update(job)

    # ---------------------------------------------------------------- reads

    def get(self, job_id: str) -> StoredJob | None:
        found = self.db.get(job_id)
        if found is None:
            return None
        job, server = found
        return None if server in self._other_live_servers() else job

    def summaries(self, who: Principal, live: list[Job]) -> list[JobSummary]:
        """The jobs `who` may see, oldest first: the live ones as they are now, and the recorded
        ones of this server and of servers that are gone."""
        hidden = self._other_live_servers()
        merged = {s.id: s for s, server in self.db.summaries(None if who.admin else who.tenant)
                  if server not in hidden}
        merged.update((j.id, JobSummary.of(j)) for j in live if who.may_see(j.tenant))
        return sorted(merged.values(), key=lambda s: (s.created, s.id))

    def never_ran(self, who: Principal) -> set[str]:
        """Recorded jobs `who` may see that were cancelled before they ran (JobDB.never_ran): the
        pages hide these dry runs unless asked."""
        return self.db.never_ran(None if who.admin else who.tenant)

    def _alive(self, server: ServerRow) -> bool:
        if server.host != self.host:
            return True  # another machine's (a shared file system): it cannot be checked from here
        return server.boot == self.boot and ProcessId(server.pid, server.ticks).alive()

    def _other_live_servers(self) -> set[int]:
        return {s.id for s in self.db.unstopped() if s.id != self.server and self._alive(s)}

    # ---------------------------------------------------------------- upkeep

    def upkeep(self, restart: bool = False) -> None:
        """Clean up after dead servers of this machine and prune old records (module docstring)."""
        with self._lock:
            if self._closed.is_set():
                return
            stop_orphans(self.cache_dir)  # first: their work directories go next
            remove_dead_work_roots(self.cache_dir)
            now = time.time()
            found = (f"restarted at {_when(now)}" if restart
                     else f"noticed at {_when(now)} by the server pid {self.me.pid}")
            for server in self.db.unstopped():
                if server.id == self.server or self._alive(server):
                    continue
                running = {"message": f"the server stopped (pid {server.pid}) while the job ran; {found}",
                           "server_pid": server.pid}
                compiled = {"message": f"the server stopped (pid {server.pid}) before the job was executed; {found}",
                            "server_pid": server.pid}
                ended = self.db.end_server(server, running, compiled, now)
                log.warning("the server pid %d (started %s) stopped without a clean shutdown; %s", server.pid,
                            _when(server.started), f"its jobs that were not over failed or were cancelled: "
                            f"{', '.join(ended)}" if ended else "none of its jobs was running")
            pruned = self.db.prune(self.settings.keep_jobs, self.settings.keep_days, now, spare=self.server)
            if pruned:
                log.info("pruned %d old job records from %s", pruned, self.db.path)

    def _loop(self) -> None:
        while not self._closed.wait(self.settings.upkeep_s):
            try:
                self.upkeep()
            except Exception:  # noqa: BLE001 - the next round may succeed; the server must go on
                log.exception("cleaning up after dead servers and pruning job records failed")
