"""The connector in a Trino cluster of two nodes (the coordinator, which also runs tasks, and a
worker), against a real Jumpgate server: a scan's job is started by the first of its splits that a
node reads, with all of its destinations in that node's JVM, so every split of one scan must run
on one node. Several scans of three splits each: each ran exactly one job, which succeeded, and the
answers are DuckDB's."""
from __future__ import annotations

import time

import pytest

from . import trino_server
from .conftest import jumpgate_catalog, query
from .test_pushdown_plans import jobs_of
from .test_trino import normalize


@pytest.fixture(scope="module")
def cluster(plugin_dir, jg_server, data_root, tmp_path_factory):
    # as many splits per scan as the table has files (3 for lineitem), for Trino to spread
    catalogs = {"jumpgate": jumpgate_catalog(jg_server.url, data_root, **{"jumpgate.max-streams": "8"})}
    coordinator = trino_server.TrinoServer(tmp_path_factory.mktemp("coordinator"), catalogs, {"jumpgate": plugin_dir})
    worker = None
    try:
        worker = trino_server.TrinoServer(tmp_path_factory.mktemp("worker"), catalogs, {"jumpgate": plugin_dir},
                                          coordinator=coordinator.url)
        # Until the coordinator schedules on the worker: it is listed among the active nodes
        # (announced, with its catalogs), not only known to discovery.
        dbapi = pytest.importorskip("trino.dbapi")
        conn = dbapi.connect(host="127.0.0.1", port=coordinator.port, user="cluster-test")
        deadline = time.monotonic() + 120
        while len(query(conn, "SELECT node_id FROM system.runtime.nodes WHERE state = 'active'")) < 2:
            if time.monotonic() > deadline:
                pytest.fail("the worker did not join the coordinator: " + worker.log_tail())
            time.sleep(1)
        yield coordinator
    finally:
        if worker:
            worker.stop()
        coordinator.stop()


def test_every_split_of_a_scan_runs_on_one_node_and_starts_one_job(cluster, jg_server, duck):
    dbapi = pytest.importorskip("trino.dbapi")
    conn = dbapi.connect(host="127.0.0.1", port=cluster.port, user="cluster-test", catalog="jumpgate", schema="tpch_parquet")
    # Scans with a filter only, whose rows Trino returns: a split per file (lineitem has three),
    # which Trino spreads over both nodes unless they are pinned to one (each node would start
    # the scan's job: found, two jobs per scan, before the splits were pinned).
    sql = ("SELECT l_orderkey, l_linenumber, l_quantity FROM {t}lineitem "
           "WHERE l_shipdate BETWEEN DATE '{day}' AND DATE '{day}' + INTERVAL '60' DAY")
    for day in ("1992-06-01", "1993-06-01", "1994-06-01", "1995-06-01", "1996-06-01", "1997-06-01"):
        cur = conn.cursor()
        cur.execute(sql.format(t="", day=day))
        got = cur.fetchall()
        qid = cur.query_id
        cur.close()
        assert normalize(got) == normalize(duck.execute(sql.format(t="", day=day)).fetchall())
        jobs = jobs_of(jg_server, qid)
        assert len(jobs) == 1, [j["job_id"] for j in jobs]  # not one per node that read a split
        # All its output was read, so it is left to end by itself (its teardown may still run)
        deadline = time.monotonic() + 20
        while (state := jg_server.http.get(f"/v1/jobs/{jobs[0]['job_id']}").json()["state"]) == "running":
            assert time.monotonic() < deadline, "the job did not end"
            time.sleep(0.1)
        assert state == "succeeded", state
