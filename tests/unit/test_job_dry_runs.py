"""Dry runs in the job record (runtime/jobdb.py `JobDB.never_ran`, runtime/history.py): the jobs
cancelled before any NCA was set up, which the jobs page hides unless asked; per tenant, an admin
seeing all. A job cancelled while it ran is not one."""
from __future__ import annotations

from pathlib import Path

from jumpgate.runtime.history import HistorySettings, JobHistory
from jumpgate.runtime.jobs import Job, JobState, JobStore
from jumpgate.runtime.timeline import Timeline
from jumpgate.tenancy.tokens import Principal


class Pipeline:
    ncas = ("nca0",)
    stages = (("nca0",),)

    def to_json(self) -> dict:
        return {"ncas": [{"id": "nca0", "implementation": "software.scan_json", "stages": [0]}],
                "stages": [["nca0"]], "edges": [], "decisions": {}}


def test_only_jobs_cancelled_before_they_ran_are_dry_runs(tmp_path: Path):
    history = JobHistory(HistorySettings(tmp_path / "state.db", upkeep_s=0.0), tmp_path / "cache")
    store = JobStore()
    store.journal = history
    try:
        def job(job_id: str, tenant: str) -> Job:
            j = Job(id=job_id, name=job_id, plan=None, pipeline=Pipeline(), timeline=Timeline(), tenant=tenant)
            j.timeline.record("parse", j.timeline.t0, j.timeline.t0 + 1000)
            j.timeline.record("mapping", j.timeline.t0 + 1000, j.timeline.t0 + 2000)
            store.add(j)
            return j

        dry, other = job("dry", "acme"), job("other-tenant", "globex")
        ran, done, waiting = job("ran", "acme"), job("done", "acme"), job("waiting", "acme")
        for j in (dry, other):  # compiled, then deleted (Spark's validation, explain())
            store.transition(j, JobState.CANCELLED, (JobState.COMPILED,))
        for j in (ran, done):
            store.transition(j, JobState.RUNNING, (JobState.COMPILED,))
            j.timeline.end(j.timeline.begin("setup"))
        store.transition(ran, JobState.CANCELLED, (JobState.RUNNING,))  # cancelled while it ran
        store.transition(done, JobState.SUCCEEDED, (JobState.RUNNING,))
        assert waiting.state is JobState.COMPILED  # may still be executed: not a dry run (yet)

        assert history.never_ran(Principal("acme", "user")) == {"dry"}
        assert history.never_ran(Principal("globex", "user")) == {"other-tenant"}
        assert history.never_ran(Principal("root", "admin")) == {"dry", "other-tenant"}
    finally:
        history.close()
