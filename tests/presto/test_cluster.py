"""The connector in a Trino cluster of two nodes (the coordinator, which also runs tasks, and a
worker), against a real Jumpgate server: a scan's job is started by the first of its splits that a
node reads, with all of its destinations in that node's JVM, so every split of one scan must run
on one node. Several scans of two splits each: each ran exactly one job, and the answers are
DuckDB's."""
from __future__ import annotations

import json
import time
import urllib.request

import pytest

from . import trino_server
from .conftest import jumpgate_catalog, query
from .test_pushdown_plans import jobs_of
from .test_trino import normalize


@pytest.fixture(scope="module")
def cluster(plugin_dir, jg_server, data_root, tmp_path_factory):
    catalogs = {"jumpgate": jumpgate_catalog(jg_server.url, data_root)}
    coordinator = trino_server.TrinoServer(tmp_path_factory.mktemp("coordinator"), catalogs, {"jumpgate": plugin_dir})
    worker = None
    try:
        worker = trino_server.TrinoServer(tmp_path_factory.mktemp("worker"), catalogs, {"jumpgate": plugin_dir},
                                          coordinator=coordinator.url)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the worker announces itself to the coordinator
            req = urllib.request.Request(coordinator.url + "/v1/node", headers={"X-Trino-User": "t"})
            with urllib.request.urlopen(req, timeout=5) as r:
                if len(json.load(r)) >= 1:  # /v1/node lists the nodes other than the coordinator
                    break
            time.sleep(1)
        else:
            pytest.fail("the worker did not join the coordinator: " + worker.log_tail())
        yield coordinator
    finally:
        if worker:
            worker.stop()
        coordinator.stop()


def test_every_split_of_a_scan_runs_on_one_node_and_starts_one_job(cluster, jg_server, duck):
    dbapi = pytest.importorskip("trino.dbapi")
    conn = dbapi.connect(host="127.0.0.1", port=cluster.port, user="cluster-test", catalog="jumpgate", schema="tpch_parquet")
    # Scans with a filter only: two destinations each (jumpgate.max-streams), so two splits, which
    # Trino would spread over both nodes; Trino aggregates what they return.
    sql = "SELECT count(*), sum(l_quantity), max(l_shipdate) FROM {t}lineitem WHERE l_shipdate > DATE '{day}'"
    for day in ("1992-06-01", "1993-06-01", "1994-06-01", "1995-06-01", "1996-06-01", "1997-06-01"):
        cur = conn.cursor()
        cur.execute(sql.format(t="", day=day))
        got = cur.fetchall()
        qid = cur.query_id
        cur.close()
        assert normalize(got) == normalize(duck.execute(sql.format(t="", day=day)).fetchall())
        jobs = jobs_of(jg_server, qid)
        assert len(jobs) == 1, [j["job_id"] for j in jobs]  # not one per node that read a split
        assert jobs[0]["state"] == "succeeded", jobs[0]
    plan = "\n".join(r[0] for r in query(conn, "EXPLAIN ANALYZE " + sql.format(t="", day="1995-01-01")))
    assert "pushed filter=" in plan, plan
