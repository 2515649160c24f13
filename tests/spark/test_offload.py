"""The Spark plugin end to end: offloading scan/filter/project, joins and partial aggregation where
the server runs them (fallback with a reason where it does not), EXPLAIN reasons, the threshold and
the boundary score, failures (server down before and during a query), and no leaks."""
from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time

import httpx
import pytest

from jumpgate.local_server import LocalServer

from .helpers import (
    LeakCheck,
    Run,
    check_spark_answer_and_operator,
    jvm,
    listening_ports,
    run_query,
    server_operations,
)

SCAN_FILTER_PROJECT = """
SELECT ss_item_sk, ss_quantity * 2 AS q2, ss_sales_price, ss_net_profit - ss_coupon_amt AS d
FROM store_sales
WHERE ss_quantity BETWEEN 20 AND 40 AND ss_store_sk IN (1, 2, 4) AND ss_sales_price > 10.5
"""


def test_scan_filter_project_offloaded(spark):
    run = check_spark_answer_and_operator(spark, SCAN_FILTER_PROJECT, {"scan", "filter", "project"})
    assert run.metrics["jgRows"] == len(run.rows) > 0
    assert run.metrics["jgBytes"] > 0 and run.metrics["jgTime"] > 0


def test_types_nulls_and_expressions(spark):
    sql = """
    SELECT c_customer_id, c_first_name, c_birth_year, c_birth_month IS NULL AS no_month,
           CASE WHEN c_birth_year < 1950 THEN 'old' WHEN c_birth_year IS NULL THEN NULL ELSE 'young' END AS age,
           coalesce(c_email_address, 'none') AS mail, length(c_last_name) AS ln, substr(c_first_name, 1, 3) AS f3
    FROM customer
    WHERE c_first_name LIKE 'J%' OR c_last_name LIKE '%son' OR c_preferred_cust_flag IS NULL
    """
    check_spark_answer_and_operator(spark, sql, {"scan", "filter", "project"})


def test_dates_and_decimals(spark):
    sql = """
    SELECT d_date_sk, d_date, year(d_date) AS y, month(d_date) AS m, day(d_date) AS dd
    FROM date_dim WHERE d_date BETWEEN DATE '1999-02-01' AND DATE '1999-05-01' AND d_dow <> 3
    """
    check_spark_answer_and_operator(spark, sql, {"scan", "filter", "project"})
    sql2 = """
    SELECT ws_order_number, ws_ext_sales_price * ws_quantity AS amount, ws_net_paid / 2 AS half
    FROM web_sales WHERE ws_ext_sales_price > 100.00 AND ws_net_profit < 0
    """
    check_spark_answer_and_operator(spark, sql2, {"scan", "filter"})


def test_unsupported_expression_stays_in_spark_with_reason(spark):
    sql = "SELECT i_item_id, upper(i_brand) AS b FROM item WHERE i_current_price > 50"
    run = check_spark_answer_and_operator(spark, sql, {"scan", "filter"})
    assert "project" not in run.kinds
    assert "Project: incompatible: upper" in run.report, run.report
    sql = "SELECT i_item_id FROM item WHERE regexp_like(i_brand, 'amalg.*') AND i_current_price > 50"
    run = check_spark_answer_and_operator(spark, sql, {"scan"})
    assert "expression regexp_like is not supported" in run.report, run.report


def test_explain_extended_shows_offload_and_reasons(spark):
    df = spark.sql("SELECT i_item_id, upper(i_brand) FROM item WHERE i_current_price > 50")
    text = spark._jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "extended")
    assert "JumpgateExec [Scan json item -> Filter]" in text, text
    assert "== Extended Information (Jumpgate) ==" in text and "Kept in Spark:" in text, text


def test_operator_switches(spark):
    run = check_spark_answer_and_operator(spark, SCAN_FILTER_PROJECT, {"scan"},
                                          **{"spark.jumpgate.filter.enabled": "false"})
    assert run.kinds == {"scan"}
    assert "spark.jumpgate.filter.enabled is false" in run.report
    run = check_spark_answer_and_operator(spark, SCAN_FILTER_PROJECT, None,
                                          **{"spark.jumpgate.scan.json.enabled": "false"})
    assert not run.offloaded and "spark.jumpgate.scan.json.enabled is false" in run.report


def test_threshold_heuristic(spark):
    run = check_spark_answer_and_operator(spark, SCAN_FILTER_PROJECT, None, **{
        "spark.jumpgate.threshold.enabled": "true", "spark.jumpgate.threshold": "10g"})
    assert not run.offloaded and "below the offload threshold" in run.report, run.report
    run = check_spark_answer_and_operator(spark, SCAN_FILTER_PROJECT, {"scan", "filter", "project"}, **{
        "spark.jumpgate.threshold.enabled": "true", "spark.jumpgate.threshold": "1m"})


PLANNING_COUNTERS = ("planningRuns", "planningSkipped", "scansConverted", "samplesRead", "capabilityLookups")


def _planning_work(spark, sql: str, expect: set[str] | None, **settings: str) -> tuple[Run, dict[str, int]]:
    stats = jvm(spark).JumpgateStats
    before = {c: int(getattr(stats, c)()) for c in PLANNING_COUNTERS}
    run = check_spark_answer_and_operator(spark, sql, expect, **settings)
    return run, {c: int(getattr(stats, c)()) - before[c] for c in PLANNING_COUNTERS}


def test_below_threshold_planning_does_no_work(spark):
    """Adaptive execution re-plans a query after every stage, and the planner runs each time. When
    no file scan of the plan reaches the threshold, no candidate could pass it: the planner must not
    convert scans (list files, sample JSON, estimate rows), translate expressions or ask the server
    (GET /v1/ncas), yet every node kept in Spark still says why (the threshold). Above the threshold
    the same query is planned in full, and a file's sample is read once, not on every re-plan."""
    sql = """
    SELECT d_year, i_brand, sum(ss_ext_sales_price) AS s FROM store_sales
    JOIN date_dim ON ss_sold_date_sk = d_date_sk JOIN item ON ss_item_sk = i_item_sk
    WHERE d_moy = 11 AND i_manager_id = 1 GROUP BY d_year, i_brand
    """
    on = {"spark.jumpgate.threshold.enabled": "true"}
    run, work = _planning_work(spark, sql, None, **on, **{"spark.jumpgate.threshold": "10g"})
    assert not run.offloaded
    assert work["planningRuns"] >= 2, work  # the first plan and adaptive re-plans
    assert work["planningSkipped"] == work["planningRuns"], work
    assert work["scansConverted"] == work["samplesRead"] == work["capabilityLookups"] == 0, work
    kept = run.report.split("Kept in Spark:\n", 1)[1].splitlines()
    assert any(line.startswith("  Scan json ") and "store_sales: " in line for line in kept), run.report
    assert all("below the offload threshold: largest input" in line for line in kept), run.report

    run, work = _planning_work(spark, sql, {"scan"}, **on, **{"spark.jumpgate.threshold": "1m"})
    # (a re-plan whose only scan left is item, 1 MB, is still skipped)
    assert work["planningSkipped"] < work["planningRuns"] and work["scansConverted"] >= 3, work
    assert work["samplesRead"] <= 3, work  # at most the largest file of each of the three tables
    run, work = _planning_work(spark, sql, {"scan"}, **on, **{"spark.jumpgate.threshold": "1m"})
    assert work["scansConverted"] >= 3 and work["samplesRead"] == 0, work


def test_score_rejects_candidates_that_reduce_little(spark, data_root):
    """The score weighs a candidate's file bytes against the NTF bytes it is estimated to send back.
    customer_address is mostly strings: as NTF a row is only about 1.6 times shorter than its JSON
    line, so with a required reduction of 3 per boundary a scan of all of it stays in Spark, while
    a selective filter with a narrow projection is offloaded. The estimate (a sample of the file:
    bytes per line, string sizes) must be close to what Jumpgate really sends."""
    strict = {"spark.jumpgate.scoring.enabled": "true", "spark.jumpgate.scoring.minReductionPerBoundary": "3"}
    sql = "SELECT * FROM customer_address"
    run = check_spark_answer_and_operator(spark, sql, None, **strict)
    assert not run.offloaded and "not worth it" in run.report, run.report
    estimated = float(re.search(r"\((\d+\.\d+)x\) over 1 boundary", run.report).group(1))
    run = check_spark_answer_and_operator(spark, sql, {"scan"})  # offloaded anyway, to compare
    read = sum(f.stat().st_size for f in (data_root / "tpcds" / "customer_address").glob("*.jsonl"))
    real = read / run.metrics["jgBytes"]
    assert real < 3 and abs(estimated - real) / real < 0.2, (estimated, real)
    check_spark_answer_and_operator(spark, SCAN_FILTER_PROJECT, {"scan", "filter", "project"}, **strict)


def _offloads_or_explains(spark, url, sql, kind):
    """Offloaded where GET /v1/ncas says the server runs `kind`; else kept in Spark with the reason."""
    run = check_spark_answer_and_operator(spark, sql, {"scan"})
    if kind in server_operations(url):
        assert kind in run.kinds, run.report
    else:
        assert kind not in run.kinds
        assert f"no NCA on the server runs '{kind}'" in run.report, run.report
    return run


def test_broadcast_join(spark, jg_server):
    sql = """
    SELECT ss_item_sk, ss_sales_price, d_date FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk
    WHERE d_year = 2000 AND d_moy = 3 AND ss_quantity > 50
    """
    _offloads_or_explains(spark, jg_server.url, sql, "join")


def test_partial_aggregation(spark, jg_server):
    sql = """
    SELECT ss_store_sk, count(*) AS n, sum(ss_quantity) AS q, sum(ss_net_paid) AS paid,
           avg(ss_sales_price) AS avgp, min(ss_list_price) AS lo, max(ss_list_price) AS hi, count(ss_customer_sk) AS c
    FROM store_sales WHERE ss_quantity > 10 GROUP BY ss_store_sk
    """
    _offloads_or_explains(spark, jg_server.url, sql, "aggregate")


def test_partial_aggregation_of_decimals_buffered_beyond_18_digits(spark, jg_server):
    """Spark buffers a sum of decimal(p,s) in decimal(p+10,s) and an average's sum likewise: from p = 9
    on that is a wide decimal (more than 18 digits), which Jumpgate sums in 38 digits and hands back
    16 bytes wide. Before wide decimals these partial aggregates stayed in Spark ("NTF decimals have
    at most 18 digits"); now they run on Jumpgate, and negative values, NULLs and groups whose sums
    pass 18 digits come out as Spark's."""
    sql = """
    SELECT ss_store_sk, sum(CAST(ss_net_paid AS decimal(12,2))) AS paid,
           sum(CAST(ss_net_profit AS decimal(15,2)) * 1000000000) AS big,
           avg(CAST(ss_sales_price AS decimal(15,2))) AS avgp, count(*) AS n
    FROM store_sales WHERE ss_quantity > 10 GROUP BY ss_store_sk
    """
    run = _offloads_or_explains(spark, jg_server.url, sql, "aggregate")
    assert "at most 18 digits" not in run.report, run.report
    # some group's sum really needs more than 18 digits (the * 10^9 above), and some is negative
    big = [r["big"] for r in run.rows if r["big"] is not None]
    assert any(abs(v) >= 10 ** 16 for v in big) and any(v < 0 for v in big), big[:5]


def test_server_unreachable_at_planning(spark):
    dead = "http://127.0.0.1:9"
    run = check_spark_answer_and_operator(spark, SCAN_FILTER_PROJECT, None, **{"spark.jumpgate.url": dead})
    assert not run.offloaded and "unreachable" in run.report, run.report


def test_server_unreachable_at_run_time_falls_back(spark):
    """Planning does not ask the server (no dry run), so the job fails at run time: the subtree runs
    in Spark, a warning is logged, the fallback is counted, and the answer is right."""
    before = jvm(spark).JumpgateStats.fallbacks()
    leaks = LeakCheck(spark)
    run = check_spark_answer_and_operator(spark, SCAN_FILTER_PROJECT, None, allow_fallback=True, **{
        "spark.jumpgate.url": "http://127.0.0.1:9", "spark.jumpgate.validateAtPlanning": "false"})
    assert run.offloaded  # planned for Jumpgate ...
    assert run.metrics["fallbacks"] == 1 and run.metrics["jgJobs"] == 0  # ... but ran in Spark
    assert jvm(spark).JumpgateStats.fallbacks() == before + 1
    leaks.assert_none_left()


def test_jumpgate_down_mid_query(spark, data_root, tmp_path):
    """Kill the server (and its NCAs) while the query's first Jumpgate job is running: every
    subtree that had not finished on Jumpgate runs in Spark and the answer is still right."""
    sql = """
    SELECT count(*), sum(x) FROM (
      SELECT ss_quantity AS x FROM store_sales WHERE ss_quantity > 5
      UNION ALL SELECT cs_quantity AS x FROM catalog_sales WHERE cs_quantity > 5
      UNION ALL SELECT ws_quantity AS x FROM web_sales WHERE ws_quantity > 5) t
    """
    expected = run_query(spark, sql, enabled=False).rows
    leaks = LeakCheck(spark)
    srv = LocalServer(data_root, tmp_path / "cache", tmp_path / "server.log")
    killed = threading.Event()
    killed_mid_job = threading.Event()

    def killer():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed.is_set():
            try:
                jobs = httpx.get(srv.url + "/v1/jobs", timeout=2).json()
                if any(j["state"] == "running" for j in jobs):
                    # SIGKILL the server and its NCAs (one process group) in the middle of the job
                    os.killpg(srv.proc.pid, signal.SIGKILL)
                    killed_mid_job.set()
                    killed.set()
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.005)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    try:
        run = run_query(spark, sql, enabled=True, **{"spark.jumpgate.url": srv.url})
    finally:
        killed.set()
        t.join(5)
        srv.stop()
    assert killed_mid_job.is_set(), "the server was not killed while a job of the query ran"
    assert run.rows == expected
    assert run.metrics["fallbacks_run"] >= 1, run.report
    leaks.assert_none_left()  # the failed jobs' listeners, readers and buffers are gone


def test_no_leaked_sockets_or_threads(spark):
    leaks = LeakCheck(spark)
    check_spark_answer_and_operator(spark, SCAN_FILTER_PROJECT, {"scan", "filter", "project"})
    leaks.assert_none_left()
    # A LIMIT leaves partitions unread: they are released when the SQL execution ends.
    run = run_query(spark, SCAN_FILTER_PROJECT + " LIMIT 3", enabled=True)
    assert len(run.rows) == 3 and run.metrics["jobs_run"] >= 1, run.report
    leaks.assert_none_left()


def test_stray_connections_to_a_destination_are_ignored(spark):
    """A port is a number the kernel hands out again: a sender left over from another job may
    connect to a destination's port. While the query runs, connect to every port the plugin opens,
    once with a wrong header and once sending nothing: the job must still get its real streams
    (no fallback) and the answer must be right."""
    pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    before = listening_ports(pid)
    stop = threading.Event()
    hit: set[int] = set()
    strays: list[socket.socket] = []

    def intruder():
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            for port in listening_ports(pid) - before - hit:
                hit.add(port)
                for payload in (b"HTTP/1.1 GET /\r\n", b""):
                    try:
                        s = socket.create_connection(("127.0.0.1", port), timeout=1)
                        s.sendall(payload)
                        strays.append(s)
                    except OSError:
                        pass
            time.sleep(0.002)

    t = threading.Thread(target=intruder, daemon=True)
    t.start()
    try:
        run = check_spark_answer_and_operator(spark, SCAN_FILTER_PROJECT, {"scan", "filter", "project"})
    finally:
        stop.set()
        t.join(5)
        for s in strays:
            s.close()
    assert hit and strays, "no destination port was seen while the query ran"
    assert run.metrics["jgRows"] == len(run.rows)


def test_one_file_job_spreads_over_tasks_with_a_shuffle(spark, jg_server):
    """A job over a single file (store_returns) sends its rows to two Spark partitions through a
    shuffle NCA when the server runs one; otherwise one partition."""
    sql = "SELECT sr_item_sk, sr_return_amt FROM store_returns WHERE sr_return_quantity > 10"
    run = check_spark_answer_and_operator(spark, sql, {"scan", "filter", "project"}, **{
        "spark.jumpgate.shuffle.spreadMinBytes": "1m", "spark.jumpgate.maxStreams": "2"})
    jobs = httpx.get(jg_server.url + "/v1/jobs").json()
    last = httpx.get(jg_server.url + f"/v1/jobs/{jobs[-1]['job_id']}").json()
    ops = {op for nca in last["ncas"] for op in nca["operations"]}
    if "shuffle" in server_operations(jg_server.url):
        assert "spread_g0" in ops, last["ncas"]
    else:
        assert "spread_g0" not in ops
    assert run.metrics["jgRows"] == len(run.rows)


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_columnar_file_scans(spark, data_root, jg_server, fmt):
    """ORC and Parquet tables (written by Spark under the data root) offload where the server has a
    scan NCA for the format, and stay in Spark with the server's reason where it has none."""
    path = data_root / "spark-small" / fmt
    if not (path / "_SUCCESS").exists():
        spark.conf.set("spark.jumpgate.enabled", "false")
        try:
            spark.sql("SELECT ss_item_sk, ss_quantity, ss_sales_price, ss_store_sk, ss_net_profit FROM store_sales "
                      "WHERE ss_store_sk < 5").repartition(2).write.mode("overwrite").format(fmt).save(str(path))
        finally:
            spark.conf.set("spark.jumpgate.enabled", "true")
    spark.sql(f"CREATE OR REPLACE TEMP VIEW small_{fmt} AS SELECT * FROM {fmt}.`{path}`")
    sql = f"SELECT ss_item_sk, ss_quantity * 2 AS q, ss_sales_price FROM small_{fmt} WHERE ss_quantity > 50"
    has_nca = any(n["name"].endswith(f"scan_{fmt}") for n in httpx.get(jg_server.url + "/v1/ncas").json())
    run = check_spark_answer_and_operator(spark, sql, {"scan", "filter", "project"} if has_nca else None)
    if not has_nca:
        assert not run.offloaded and "rejected by Jumpgate" in run.report, run.report
