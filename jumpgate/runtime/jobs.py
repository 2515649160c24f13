"""Jobs and the job store (contract §4 states: compiled, running, succeeded, failed, cancelled)."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from ..contract.errors import JobStateError, UnknownJob
from ..dataflow.plan import LogicalPlan
from .progress import LiveReadings, progress_json
from .timeline import Timeline

log = logging.getLogger(__name__)


class JobState(StrEnum):
    COMPILED = "compiled"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


@dataclass
class Job:
    id: str
    name: str
    plan: LogicalPlan
    pipeline: object  # jumpgate.compiler.pipeline.StagedPipeline
    timeline: Timeline
    state: JobState = JobState.COMPILED
    error: dict | None = None
    created: float = field(default_factory=time.time)
    finished: float | None = None
    runner: object | None = None  # jumpgate.runtime.executor.JobRunner once executed
    tenant: str = "default"  # who submitted it (docs/security.md): only they and admins see it
    done: threading.Event = field(default_factory=threading.Event)
    # Called once when the job ends (from the thread that ends it): how a waiting request is
    # woken without holding a thread while it waits.
    _on_done: list[Callable[[], None]] = field(default_factory=list, repr=False)
    _done_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _pipeline_json: dict | None = field(default=None, repr=False)
    # the running phases' counters, which the executor reads from the NCAs (runtime/progress.py)
    live: LiveReadings = field(default_factory=LiveReadings, repr=False)
    # per runtime filter id, what the executor handed over (runtime/executor.py, docs/runtime-filters.md)
    runtime_filters: dict[str, dict] = field(default_factory=dict, repr=False)

    def on_done(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the job ends: at once if it has."""
        with self._done_lock:
            if not self.done.is_set():
                self._on_done.append(callback)
                return
        callback()

    def forget(self, callback: Callable[[], None]) -> None:
        with self._done_lock:
            if callback in self._on_done:
                self._on_done.remove(callback)

    def mark_done(self) -> None:
        with self._done_lock:
            self.done.set()
            callbacks, self._on_done = self._on_done, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # noqa: BLE001 - one waiter's failure must not stop the others
                log.exception("a callback at the end of job %s failed", self.id)

    def status_json(self) -> dict:
        timeline = self.timeline.to_json()
        final = self.state.terminal
        progress = progress_json(self.pipeline_json(), timeline, None if final else self.live, final=final,
                                 t0_ns=self.timeline.t0)
        answer = {"job_id": self.id, "name": self.name, "state": self.state.value, "tenant": self.tenant,
                  "error": self.error, "timeline": timeline, "progress": progress}
        filters = runtime_filter_status(self.pipeline_json(), self.runtime_filters, timeline)
        if filters:
            answer["runtime_filters"] = filters
        return answer

    def pipeline_json(self) -> dict:
        """The compile answer's pipeline (ncas, stages, decisions, ...). Made once: the pipeline
        never changes after submit, and the answer, every status poll and the job's record all
        need it. Callers must not modify it."""
        if self._pipeline_json is None:
            self._pipeline_json = self.pipeline.to_json()
        return self._pipeline_json


def runtime_filter_status(pipeline: dict, handed: dict[str, dict], timeline: dict) -> list[dict]:
    """Per runtime filter the compile answer `pipeline` planned (docs/runtime-filters.md): what was
    handed over (`handed`, `bytes`, `build_rows`: what the executor recorded, absent before its
    probe stage and in a job's record), and the rows its scans tested and removed as they reported
    them (summed over the scans, each counting all its filters)."""
    out = []
    ncas = timeline.get("ncas", {})
    for f in pipeline.get("runtime_filters", ()):
        if not f.get("planned"):
            continue
        removed = tested = 0
        for nid in f.get("to", ()):
            for entry in ncas.get(nid, {}).get("stages", ()):
                removed += int(entry.get("rf_rows_removed", 0))
                tested += int(entry.get("rf_rows_tested", 0))
        out.append({"id": f["id"], "join": f["join"], "read": f["read"], "from": f["from"], "to": f["to"],
                    **handed.get(f["id"], {}), "rows_tested": tested, "rows_removed": removed})
    return out


class JobObserver(Protocol):
    """Told of every job added and every state change (runtime/metrics.py), under the store's
    lock: whoever sees a job's new state sees what the observer made of it."""

    def job_added(self, job: Job) -> None: ...

    def job_changed(self, job: Job, old: JobState) -> None: ...


class JobJournal(Protocol):
    """Keeps jobs beyond the process (runtime/history.py). Told of every job added and every
    state change outside the store's lock (a write may wait for the disk) but before a job's end
    wakes its waiters, so a client that saw a job end finds that end recorded."""

    def job_added(self, job: Job) -> None: ...

    def job_changed(self, job: Job) -> None: ...


class JobStore:
    """In-memory store. Finished jobs are kept (newest `keep` of them) so clients can read their
    status and timeline after the fact. Every change is logged (INFO) with the job's id."""

    def __init__(self, keep: int = 1000, observer: JobObserver | None = None) -> None:
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self.keep = keep
        self.observer = observer
        self.journal: JobJournal | None = None

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex[:16]

    def add(self, job: Job) -> None:
        with self._lock:
            self._jobs[job.id] = job
            self._evict()
            if self.observer is not None:
                self._tell(self.observer.job_added, job)
        if self.journal is not None:
            self._tell(self.journal.job_added, job)
        log.info("job %s compiled for tenant %s", job.id, job.tenant, extra={"job_id": job.id})

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise UnknownJob(f"no job {job_id!r}")
        return job

    def all(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def transition(self, job: Job, to: JobState, allowed_from: tuple[JobState, ...]) -> None:
        with self._lock:
            if job.state not in allowed_from:
                raise JobStateError(f"job {job.id} is {job.state.value}, cannot become {to.value}",
                                    state=job.state.value)
            old, job.state = job.state, to
            if to.terminal:
                job.finished = time.time()
            if self.observer is not None:
                self._tell(self.observer.job_changed, job, old)
        error = f": {job.error.get('message')}" if to is JobState.FAILED and job.error else ""
        log.info("job %s %s -> %s%s", job.id, old.value, to.value, error, extra={"job_id": job.id})
        if self.journal is not None:
            self._tell(self.journal.job_changed, job)
        if to.terminal:
            job.mark_done()

    @staticmethod
    def _tell(event: Callable[..., None], *args: object) -> None:
        try:
            event(*args)
        except Exception:  # noqa: BLE001 - metrics must never fail a job or its state change
            log.exception("the job observer failed (%s)", event.__name__)

    def _evict(self) -> None:
        finished = [j for j in self._jobs.values() if j.state.terminal]
        for job in finished[: max(0, len(finished) - self.keep)]:
            self._jobs.pop(job.id, None)


async def until_done(job: Job, timeout: float) -> None:
    """Wait for the job's end, or `timeout` seconds, without holding a thread: a future the job's
    end resolves, so any number of idle waits (the REST API's long polls, the pages' live part)
    cost the server nothing (threads are for work)."""
    loop = asyncio.get_running_loop()
    ended = loop.create_future()

    def wake() -> None:
        loop.call_soon_threadsafe(lambda: ended.done() or ended.set_result(None))
    job.on_done(wake)
    try:
        await asyncio.wait_for(ended, timeout)
    except TimeoutError:
        pass
    finally:
        job.forget(wake)
