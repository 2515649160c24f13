"""The pages people read: jobs, and for one job its pipeline, decisions and timeline."""
from __future__ import annotations

import pytest

from .helpers import filter_project, run_ops

pytestmark = pytest.mark.e2e


def test_job_page_shows_pipeline_decisions_and_timeline(server):
    run_ops(server.url, filter_project("a > 0", [("id", "id")]))
    jobs = server.http.get("/v1/jobs").json()
    job_id = jobs[-1]["job_id"]
    index = server.http.get("/ui/jobs")
    assert index.status_code == 200 and job_id in index.text and "software.scan_json" in index.text
    page = server.http.get(f"/ui/jobs/{job_id}")
    assert page.status_code == 200
    text = page.text
    assert "Staged networked pipeline" in text and "nca0" in text
    assert "stage 0" in text and "tuples in" in text  # the Gantt rows carry the NCA's own counters
    assert "software.scan_json" in text and "✓" in text  # the decision and its verdict
    assert server.http.get("/ui/jobs/nope").status_code == 404
