"""The pages people read, over plain HTTP: jobs, and for one job its pipeline graph, decisions and
timeline; the live part a running job's page fetches; dry runs hidden from the list until asked
for; pages of the list. (tests/e2e/test_browser.py drives the same pages in a real browser.)"""
from __future__ import annotations

import re

import pytest

from jumpgate.client import Jumpgate

from .helpers import filter_project, run_ops

pytestmark = pytest.mark.e2e


def test_job_page_shows_pipeline_decisions_and_timeline(server):
    run_ops(server.url, filter_project("a > 0", [("id", "id")]))
    jobs = server.http.get("/v1/jobs").json()
    job_id = jobs[-1]["job_id"]
    index = server.http.get("/ui/jobs")
    assert index.status_code == 200 and job_id in index.text
    assert "software.scan_json" in index.text  # the implementations' table
    page = server.http.get(f"/ui/jobs/{job_id}")
    assert page.status_code == 200
    text = page.text
    assert "Staged networked pipeline" in text and "nca0" in text
    assert "stage 0" in text and "tuples in" in text  # the Gantt rows carry the NCA's own counters
    assert "software.scan_json" in text and "✓" in text  # the decision and its verdict
    assert "<code>a &gt; 0</code>" in text and "<code>id</code>" in text  # what the filter and projection ask
    assert server.http.get("/ui/jobs/nope").status_code == 404


def test_the_graph_has_a_box_per_nca_and_an_arrow_per_edge(server):
    with Jumpgate(server.url) as jg:
        jg.run({"name": "graph", "operations": [*filter_project("a > 0", [("id", "id")]), {
            "kind": "send", "name": "out", "input": "p", "transport": "tcp", "host": "127.0.0.1", "port": 0}]},
            timeout=600)
        answer = jg.last_job.answer
    text = server.http.get(f"/ui/jobs/{answer['job_id']}").text
    svg = text[text.index("<svg"):text.index("</svg>")]
    assert sorted(re.findall(r'<g class="node (?:nca|converter)" data-id="([^"]+)"', svg)) == \
        sorted(n["id"] for n in answer["ncas"])
    edges = re.findall(r'<g class="edge" data-from="([^"]+)" data-to="([^"]+)"', svg)
    assert len(edges) == len(answer["edges"])
    assert re.findall(r'data-stream-label="([^"]+)"', svg) == ["1 stream"] * len(answer["edges"])
    assert "0..0" not in text and "streams</th>" in text  # the edge table says "1 stream" too


def test_the_live_part_of_a_job_page(server):
    run_ops(server.url, filter_project("a > 0", [("id", "id")]))
    job_id = server.http.get("/v1/jobs").json()[-1]["job_id"]
    live = server.http.get(f"/ui/jobs/{job_id}/live", params={"wait": 5})  # ended: answers at once
    assert live.status_code == 200 and live.headers["cache-control"] == "no-store"
    assert live.text.startswith(f'<div id="live" data-state="succeeded" data-src="/ui/jobs/{job_id}/live?wait=1">')
    assert "rows to clients" in live.text and "refreshes itself" not in live.text
    assert "<script>" not in server.http.get(f"/ui/jobs/{job_id}").text  # an ended job's page does not poll
    assert server.http.get(f"/ui/jobs/{job_id}/live", params={"wait": "soon"}).status_code == 200
    assert server.http.get("/ui/jobs/nope/live").status_code == 404


def test_dry_runs_are_hidden_until_asked_for_and_the_list_has_pages(server):
    with Jumpgate(server.url) as jg:
        dry = jg.explain({"name": "validate", "operations": [*filter_project("a > 1", [("id", "id")]), {
            "kind": "send", "name": "out", "input": "p", "transport": "tcp", "host": "127.0.0.1", "port": 9}]})
    assert server.http.get(f"/v1/jobs/{dry.job_id}").json()["state"] == "cancelled"
    hidden = server.http.get("/ui/jobs").text
    assert dry.job_id not in hidden and "show dry runs" in hidden
    shown = server.http.get("/ui/jobs", params={"dry": 1}).text
    assert f'<tr class="job dry-run" data-id="{dry.job_id}">' in shown and "hide dry runs" in shown
    assert server.http.get(f"/ui/jobs/{dry.job_id}").status_code == 200  # its page is there all the same

    run_ops(server.url, filter_project("a > 0", [("id", "id")]))
    newest = [j["job_id"] for j in reversed(server.http.get("/v1/jobs").json())]
    first = server.http.get("/ui/jobs", params={"per": 1, "dry": 1}).text
    assert re.findall(r'<tr class="job[^"]*" data-id="([^"]+)"', first) == newest[:1]
    assert 'id="older" href="/ui/jobs?page=2&amp;per=1&amp;dry=1"' in first and 'id="newer"' not in first
    second = server.http.get("/ui/jobs", params={"page": 2, "per": 1, "dry": 1}).text
    assert re.findall(r'<tr class="job[^"]*" data-id="([^"]+)"', second) == newest[1:2]
    assert 'id="newer" href="/ui/jobs?per=1&amp;dry=1"' in second
    beyond = server.http.get("/ui/jobs", params={"page": 10**6, "per": 1, "dry": 1}).text  # the last page
    assert re.findall(r'<tr class="job[^"]*" data-id="([^"]+)"', beyond) == newest[-1:]
    for odd in ({"page": "x"}, {"per": "0"}, {"per": "-5", "page": "-1"}, {"dry": "maybe"}):
        assert server.http.get("/ui/jobs", params=odd).status_code == 200, odd
