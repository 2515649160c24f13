"""What an operator sees (docs/operations.md), against a real server with two tenants: a scrape of
GET /metrics after a known set of jobs (3 succeeded, 1 failed, 1 cancelled) with every count
checked exactly, the Grafana dashboard's expressions against that scrape, and the server's log as
JSON lines carrying each job's id."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jumpgate.client import Jumpgate
from jumpgate.client.receiver import Receiver
from jumpgate.local_server import LocalServer, free_port

from .helpers import read_op

pytestmark = pytest.mark.e2e

ROWS = 100
SCHEMA = [{"name": "a", "type": "int64"}, {"name": "s", "type": "string"}]
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "jumpgate.json"


def request(path: str) -> dict:
    return {"name": "metrics-job", "operations": [
        read_op("r", path, SCHEMA),
        {"kind": "project", "name": "p", "input": "r", "columns": [{"name": "v", "expr": "s"}]},
        {"kind": "send", "name": "out", "input": "p", "transport": "tcp", "host": "127.0.0.1", "port": 0}]}


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """A server with tenants acme and globex (and an admin to read every job), JSON logs at INFO,
    after: acme 2 succeeded and 1 failed, globex 1 succeeded and 1 cancelled (compiled, then
    DELETE). Yields the server, the jobs {id: (tenant, state)}, each job's status, and a scrape."""
    root = tmp_path_factory.mktemp("metrics-data")
    for tenant in ("acme", "globex"):
        (root / tenant).mkdir()
        (root / tenant / "t.jsonl").write_text("".join(f'{{"a": {i}, "s": "{tenant}{i}"}}\n' for i in range(ROWS)))
    (root / "acme" / "bad.jsonl").write_text('{"a": 1, "s": "x"}\n{"a": 2, "s": "y"\n')  # not JSON: fails
    work = tmp_path_factory.mktemp("metrics")
    file = work / "tokens.yaml"
    file.write_text("tenants:\n  acme: {read_prefix: acme/}\n  globex: {read_prefix: globex/}\n")
    exe = str(Path(sys.executable).with_name("jumpgate"))
    tok = {name: subprocess.run([exe, "tokens", "add", "--file", str(file), "--tenant", name,
                                 *(["--role", "admin"] if name == "ops" else [])],
                                capture_output=True, text=True, timeout=60, check=True).stdout.strip()
           for name in ("acme", "globex", "ops")}
    srv = LocalServer(root, work / "cache", work / "server.log",
                      extra_args=["--tokens", str(file), "--log-format", "json", "--log-level", "info"])
    try:
        jobs: dict[str, tuple[str, str]] = {}
        with Jumpgate(srv.url, token=tok["acme"]) as acme, Jumpgate(srv.url, token=tok["globex"]) as globex:
            for client, tenant in ((acme, "acme"), (globex, "globex"), (acme, "acme")):
                rows = client.run(request(f"{tenant}/t.jsonl"), timeout=120)["out"]
                assert rows.num_rows == ROWS
                jobs[client.last_job.job_id] = (tenant, "succeeded")
            # Driven step by step: the client's `run` would cancel the job if its stream broke first.
            with Receiver() as rx:
                bad = request("acme/bad.jsonl")
                bad["operations"][-1]["port"] = rx.port
                job = acme.submit(bad)
                rx.start(job.outputs["out"].expected_streams, job.outputs["out"].layout)
                job.execute()
                for _ in range(4):  # at most two minutes
                    if not job.finished:
                        job.status(wait=30)
            jobs[job.job_id] = ("acme", "failed")
            never_run = request("globex/t.jsonl")
            never_run["operations"][-1]["port"] = 9  # compiled, never executed: nothing listens there
            pending = globex.submit(never_run).job_id
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {tok['ops']}"}, timeout=60) as ops:
            assert ops.delete(f"/v1/jobs/{pending}").json()["state"] == "cancelled"
            jobs[pending] = ("globex", "cancelled")
            status = {job: ops.get(f"/v1/jobs/{job}").json() for job in jobs}
        assert {j: s["state"] for j, s in status.items()} == {j: state for j, (_, state) in jobs.items()}
        scrape = httpx.get(f"{srv.url}/metrics", timeout=60)  # no token: Prometheus scrapes it as it is
        assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
        yield srv, jobs, status, scrape.text
    finally:
        srv.stop()


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(scraped: dict, name: str, **labels: str) -> float:
    return scraped.get((name, frozenset(labels.items())), 0.0)


def implementations(status: dict) -> dict[str, str]:
    return {n["id"]: n["implementation"] for n in status["ncas"]}


def test_scrape_counts_jobs_phases_tuples_and_nodes_exactly(ran):
    _, jobs, status, text = ran
    m = samples(text)
    submitted = Counter(tenant for tenant, _ in jobs.values())
    ended = Counter(jobs.values())
    assert submitted == {"acme": 3, "globex": 2} and len(ended) == 4
    for tenant, n in submitted.items():
        assert value(m, "jumpgate_jobs_submitted_total", tenant=tenant) == n
    for (tenant, state), n in ended.items():
        assert value(m, "jumpgate_jobs_finished_total", tenant=tenant, state=state) == n
        assert value(m, "jumpgate_jobs", tenant=tenant, state=state) == n
    assert sum(v for (name, _), v in m.items() if name == "jumpgate_jobs_finished_total") == 5
    assert sum(v for (name, _), v in m.items() if name == "jumpgate_jobs") == 5

    # Every job was parsed and mapped; the four executed set up and were destroyed; the three that
    # succeeded executed to the end (the failed one's execute never ended).
    for phase, n in {"parse": 5, "mapping": 5, "compile": 4, "allocate": 4, "configure": 4, "setup": 4,
                     "destroy": 4, "execute": 3}.items():
        assert value(m, "jumpgate_job_phase_seconds_count", phase=phase) == n, phase
        assert value(m, "jumpgate_job_phase_seconds_bucket", phase=phase, le="+Inf") == n, phase
    stages = Counter(name.removeprefix("stage:") for s in status.values()
                     for name, span in s["timeline"]["phases"].items()
                     if name.startswith("stage:") and "duration_ms" in span)
    assert stages and sum(stages.values()) >= 3
    for stage, n in stages.items():
        assert value(m, "jumpgate_job_stage_seconds_count", stage=stage) == n

    # What each implementation moved, compiled and executed: the jobs' own timelines, summed.
    moved: Counter = Counter()
    cache: Counter = Counter()
    executes: Counter = Counter()
    for s in status.values():
        impl = implementations(s)
        for nid, steps in s["timeline"]["ncas"].items():
            if "cached" in steps.get("compile", {}):
                cache[(impl[nid], "hit" if steps["compile"]["cached"] else "miss")] += 1
            for entry in steps["stages"]:
                if "tuples_in" in entry:
                    executes[impl[nid]] += 1
                    for key in ("tuples_in", "tuples_out", "bytes_in", "bytes_out"):
                        moved[(impl[nid], key)] += entry[key]
    assert moved, "no NCA reported what it moved"
    for (impl, key), n in moved.items():
        kind, direction = key.split("_")
        assert value(m, f"jumpgate_nca_{kind}_total", implementation=impl, direction=direction) == n, (impl, key)
    # What the jobs processed: each succeeded job's scan read the tenant's ROWS lines (the failed
    # one's scan reported nothing: its execute call failed).
    scans = {implementations(s)["nca0"] for s in status.values()}
    assert len(scans) == 1 and value(m, "jumpgate_nca_tuples_total", implementation=scans.pop(),
                                     direction="in") == 3 * ROWS
    assert sum(cache.values()) == sum(len(implementations(s)) for j, s in status.items() if jobs[j][1] != "cancelled")
    for (impl, result), n in cache.items():
        assert value(m, "jumpgate_compile_cache_total", implementation=impl, result=result) == n
    for impl, n in executes.items():
        assert value(m, "jumpgate_nca_step_seconds_count", implementation=impl, step="execute") == n

    # Nodes: this machine, up, nothing held or running once the jobs are done.
    nodes = {dict(labels)["node"] for name, labels in m if name == "jumpgate_node_up"}
    assert nodes and all(value(m, "jumpgate_node_up", node=n) == 1 for n in nodes)
    assert all(value(m, "jumpgate_node_cores_in_use", node=n) == 0 for n in nodes)
    assert all(value(m, "jumpgate_node_cores", node=n) >= 1 for n in nodes)
    assert all(value(m, "jumpgate_ncas_running", node=n) == 0 for n in nodes)
    assert value(m, "jumpgate_ncas_prestarted") >= 0 and ("jumpgate_ncas_prestarted", frozenset()) in m


def expressions(dashboard: dict) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_dashboard_is_importable_and_queries_only_metrics_the_server_has(ran):
    _, _, _, text = ran
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["title"] and dashboard["uid"] and dashboard["schemaVersion"] >= 30
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    graphs = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert graphs and all(p["targets"] and p["title"] and p["gridPos"]["w"] <= 24 for p in graphs)
    scraped = {s.name for family in text_string_to_metric_families(text) for s in family.samples}
    used: set[str] = set()
    for expr in expressions(dashboard):
        names = set(re.findall(r"\bjumpgate_[a-z0-9_]+", expr))
        assert names, expr
        assert names <= scraped, (expr, names - scraped)
        assert expr.count("(") == expr.count(")"), expr
        used |= names
    # every family the server exports is on the dashboard somewhere (`_created`: the timestamps
    # prometheus_client adds to counters and histograms, which the text format lists apart)
    families = {f.name: {s.name for s in f.samples} for f in text_string_to_metric_families(text)
                if not f.name.endswith("_created")}
    assert [f for f, names in families.items() if not names & used] == []


def test_log_is_json_lines_and_a_jobs_lines_carry_its_id(ran):
    srv, jobs, _, _ = ran
    text = srv.log_path.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line parses
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert any(line["logger"].startswith("uvicorn") for line in lines)  # the server's own lines too
    for job, (_, state) in jobs.items():
        mine = [line for line in lines if line.get("job_id") == job]
        assert any(line["message"] == f"job {job} compiled for tenant {jobs[job][0]}" for line in mine), job
        assert any(line["message"].startswith(f"job {job} ") and f"-> {state}" in line["message"]
                   for line in mine), (job, mine)
        # what Jumpgate's runtime logs about a job is tagged with that job, never with another
        for line in lines:
            if line["logger"].startswith("jumpgate.runtime") and job in line["message"]:
                assert line.get("job_id") == job, line


def test_metrics_port_serves_them_apart_from_the_api(tmp_path):
    """`serve --metrics-port`: the scrape on its own port (for a firewall or a network policy to
    treat apart), and no longer on the API's."""
    for attempt in range(5):
        # Two free ports asked for one after the other (this one, then the server's own) can be
        # the same one: then the API cannot bind what the metrics server just took, and the
        # server says so and exits. Another pair is asked for.
        port = free_port()
        try:
            srv = LocalServer(tmp_path, tmp_path / "cache", tmp_path / f"server{attempt}.log",
                              extra_args=["--metrics-port", str(port), "--metrics-host", "127.0.0.1"])
            break
        except RuntimeError as e:
            if "address already in use" not in str(e) or attempt == 4:
                raise
    with srv:
        assert srv.http.get("/metrics").status_code == 404
        scrape = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=60)
        assert scrape.status_code == 200
        assert {f.name for f in text_string_to_metric_families(scrape.text)} >= {"jumpgate_node_up", "jumpgate_jobs"}
