"""Shared scans through the real service (docs/shared-scans.md): jobs submitted together over the
same JSON Lines file run their scans as one process that reads the file once; every answer is
DuckDB's; a job whose own expression fails fails alone; a job that reads other files, or a server
without sharing, runs its scans as always."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from jumpgate.client import Jumpgate
from jumpgate.client.errors import JobFailed
from jumpgate.local_server import LocalServer

from .data import duck_view, write_all_types
from .helpers import assert_same_rows, filter_project, read_op

QUERIES = {  # (filter, projection) over t.jsonl, and DuckDB's SQL for it
    "small_a": ("a < 0", [("id", "id"), ("a", "a")], "SELECT id, a FROM t WHERE a < 0"),
    "words": ("s LIKE 'a%'", [("s", "upper(s)"), ("d", "d")], "SELECT upper(s) AS s, d FROM t WHERE s LIKE 'a%'"),
    "dates": (None, [("y", "year(dt)"), ("flag", "flag")], "SELECT year(dt) AS y, flag FROM t"),
}


@pytest.fixture(scope="module")
def sharing_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared")
    write_all_types(root / "t.jsonl", rows=20000, seed=5)
    write_all_types(root / "u.jsonl", rows=1000, seed=6)
    cache = os.environ.get("JUMPGATE_TEST_CACHE")
    # long waits: the jobs' planning and compiles on a busy machine must not outlast them
    srv = LocalServer(root, Path(cache) if cache else tmp_path_factory.mktemp("cache"),
                      tmp_path_factory.mktemp("logs") / "server.log",
                      extra_args=["--shared-scans", "--shared-scan-wait", "5", "--shared-scan-linger", "1"])
    yield srv, root
    left = srv.children()
    srv.stop()
    assert not left, f"NCA processes left behind: {left}"


def run_together(url: str, requests: dict[str, list[dict]]) -> dict[str, object]:
    """Run the requests at the same time, each as its own job; the table, or the exception, and
    the job's last status for each."""
    out: dict[str, object] = {}

    def one(name: str, ops: list[dict]) -> None:
        send = {"kind": "send", "name": "out", "input": ops[-1]["name"], "transport": "tcp",
                "host": "127.0.0.1", "port": 0}
        with Jumpgate(url) as jg:
            try:
                out[name] = (jg.run({"name": name, "operations": ops + [send]}, timeout=300)["out"],
                             jg.last_job.last_status)
            except Exception as e:  # noqa: BLE001 - the test looks at it
                out[name] = (e, jg.last_job.last_status if jg.last_job else None)

    threads = [threading.Thread(target=one, args=item) for item in requests.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return out


def scan_stats(status: dict) -> dict:
    """The stats of the job's scan (its only NCA reading files)."""
    [scan] = [n for n in status["timeline"]["ncas"].values() if n.get("stages") and "shared_scan" in n["stages"][-1]]
    return scan["stages"][-1]


def test_jobs_over_one_file_share_one_read(sharing_server):
    srv, root = sharing_server
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    duck_view(con, "t", root / "t.jsonl")
    requests = {k: filter_project(c, cols) for k, (c, cols, _) in QUERIES.items()}
    requests["by_flag"] = [read_op(), {"kind": "aggregate", "name": "g", "input": "r",
                                       "group_by": [{"name": "flag", "expr": "flag"}],
                                       "aggregates": [{"name": "n", "fn": "count_star"},
                                                      {"name": "sd", "fn": "sum", "expr": "d"}]}]
    sqls = {k: sql for k, (_, _, sql) in QUERIES.items()}
    sqls["by_flag"] = "SELECT flag, count(*) AS n, sum(d) AS sd FROM t GROUP BY flag"
    results = run_together(srv.url, requests)
    groups = set()
    for name, sql in sqls.items():
        got, status = results[name]
        assert not isinstance(got, Exception), (name, got)
        assert_same_rows(con, got, sql)
        stats = scan_stats(status)
        shared = stats["shared_scan"]
        assert shared["members"] == 4 and len(shared["jobs"]) == 4, shared
        assert stats["tuples_out"] == got.num_rows
        assert stats["bytes_in"] == (root / "t.jsonl").stat().st_size  # the file, read once for all
        groups.add(shared["group"])
    assert len(groups) == 1


def test_a_failing_member_fails_its_job_only(sharing_server):
    srv, root = sharing_server
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    duck_view(con, "t", root / "t.jsonl")
    requests = {"ok": filter_project(*QUERIES["small_a"][:2]),
                "bad": filter_project(None, [("b32", "CAST(b AS int32)")])}  # b goes up to 10^12
    results = run_together(srv.url, requests)
    got, status = results["ok"]
    assert not isinstance(got, Exception), got
    assert_same_rows(con, got, QUERIES["small_a"][2])
    assert scan_stats(status)["shared_scan"]["members"] == 2
    error, status = results["bad"]
    assert isinstance(error, JobFailed), error
    assert "int32" in str(error) and "b32" in str(error), error


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_columnar_scans_share_when_their_pruning_is_the_same(sharing_server, fmt):
    """ORC and Parquet scans prune units and prefilter rows by predicates from their own filter:
    two jobs with the same prunable conjunct share, a third pruning by another does not."""
    srv, root = sharing_server
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    duck_view(con, "t", root / "t.jsonl")
    path = root / f"t.{fmt}"
    if not path.exists():
        table = con.sql("SELECT * FROM t").to_arrow_table()
        if fmt == "parquet":
            import pyarrow.parquet as pq
            pq.write_table(table, path, row_group_size=4000)
        else:
            import pyarrow.orc as orc
            orc.write_table(table, str(path), stripe_size=64 * 1024)

    def job(condition: str, columns: list[tuple[str, str]]) -> list[dict]:
        ops = filter_project(condition, columns)
        ops[0].update(path=path.name, format=fmt)
        return ops

    # `id >= 1000` prunes; the other conjuncts compute, which no statistics can rule out
    requests = {"words": job("id >= 1000 AND upper(s) LIKE 'A%'", [("s", "s"), ("id", "id")]),
                "flags": job("id >= 1000 AND x * 2 > 0", [("d", "d")]),
                "other": job("id < 1000", [("id", "id")])}
    results = run_together(srv.url, requests)
    sqls = {"words": "SELECT s, id FROM t WHERE id >= 1000 AND upper(s) LIKE 'A%'",
            "flags": "SELECT d FROM t WHERE id >= 1000 AND x * 2 > 0",
            "other": "SELECT id FROM t WHERE id < 1000"}
    for name, sql in sqls.items():
        got, _ = results[name]
        assert not isinstance(got, Exception), (name, got)
        assert_same_rows(con, got, sql)
    assert scan_stats(results["words"][1])["shared_scan"]["members"] == 2
    assert scan_stats(results["flags"][1])["shared_scan"]["jobs"] == sorted(
        [results["words"][1]["job_id"], results["flags"][1]["job_id"]])
    assert scan_stats_or_none(results["other"][1]) is None


def test_other_files_do_not_share(sharing_server):
    srv, root = sharing_server
    ops_u = filter_project("a > 0", [("id", "id")])
    ops_u[0]["path"] = "u.jsonl"
    results = run_together(srv.url, {"t": filter_project("a > 0", [("id", "id")]), "u": ops_u})
    for name in ("t", "u"):
        got, status = results[name]
        assert not isinstance(got, Exception), (name, got)
        assert scan_stats_or_none(status) is None  # alone: the scan ran as always


def scan_stats_or_none(status: dict) -> dict | None:
    found = [n for n in status["timeline"]["ncas"].values() if n.get("stages") and "shared_scan" in n["stages"][-1]]
    return found[0] if found else None
