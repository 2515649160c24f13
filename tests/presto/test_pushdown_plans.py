"""What the connector pushes beyond plain filters and aggregations, against a real Trino 476 and a
real Jumpgate server (see conftest.py): the average of a decimal (computed by Jumpgate as sum and
count, divided by Trino), conditions over a pushed aggregation (HAVING), Trino's dynamic filters
in the job's scans, and scans under a pushed join that read only the columns used above them."""
from __future__ import annotations

import decimal

import pytest

from .conftest import query
from .test_trino import explain, normalize


def exact(rows):
    return sorted(rows, key=repr)


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_avg_of_decimals_is_pushed_and_rounds_as_trino_does(conn, fmt):
    # c_acctbal is decimal(15,2) and negative for about a tenth of the customers: the quotient's
    # rounding (half up, away from zero) shows in the last digit.
    sql = "SELECT c_mktsegment, avg(c_acctbal), min(c_acctbal), count(*) FROM {c}.tpch_{fmt}.customer " \
          "WHERE c_acctbal < 100 GROUP BY c_mktsegment"
    plan = explain(conn, sql.format(c="jumpgate", fmt=fmt))
    assert "pushed aggregation=" in plan and "sum(" in plan and "count(" in plan, plan
    assert "aggregation (" not in plan, plan  # no refusal noted
    got = query(conn, sql.format(c="jumpgate", fmt=fmt))
    want = query(conn, sql.format(c="jumpgate_nopush", fmt=fmt))  # Trino's own avg over the same rows
    assert exact(got) == exact(want)
    assert all(isinstance(r[1], decimal.Decimal) and r[1].as_tuple().exponent == -2 for r in got), got
    assert any(r[1] < 0 for r in query(conn, "SELECT c_nationkey, avg(c_acctbal) FROM jumpgate.tpch_json.customer "
                                             "WHERE c_acctbal < 0 GROUP BY c_nationkey"))
    # No rows: avg is NULL (sum NULL, count 0), as Trino's own.
    assert query(conn, f"SELECT avg(c_acctbal) FROM jumpgate.tpch_{fmt}.customer WHERE c_custkey < 0") == [(None,)]


def test_a_refused_aggregation_shows_its_reason_in_explain(conn):
    plan = explain(conn, "SELECT l_returnflag, approx_distinct(l_suppkey) FROM jumpgate.tpch_json.lineitem GROUP BY 1")
    assert "not pushed=" in plan and "aggregation (approx_distinct(bigint) has no contract aggregate" in plan, plan


def test_having_is_pushed_with_the_aggregation(conn, duck):
    sql = ("SELECT l_orderkey, sum(l_quantity) FROM {t}lineitem GROUP BY l_orderkey "
           "HAVING sum(l_quantity) > 250 AND count(*) >= 5")
    plan = explain(conn, sql.format(t="jumpgate.tpch_parquet."))
    assert "pushed aggregation=" in plan and "having" in plan, plan
    got = query(conn, sql.format(t="jumpgate.tpch_parquet."))
    want = duck.execute(sql.format(t="")).fetchall()
    assert got and normalize(got) == normalize(want)


def query_with_id(conn, sql: str) -> tuple[list, str]:
    """The query's rows and its Trino query id (the Jumpgate jobs' names carry it)."""
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return cur.fetchall(), cur.query_id
    finally:
        cur.close()


def jobs_of(jg_server, query_id: str) -> list[dict]:
    """The Jumpgate jobs one Trino query ran (the connector names them trino-<query id>-<scan>)."""
    http = jg_server.http
    return [http.get(f"/v1/jobs/{j['job_id']}").json() for j in http.get("/v1/jobs").json()
            if j["name"].startswith(f"trino-trino-{query_id}-")]


def test_runtime_filters_and_column_pruning_narrow_the_join_scans(conn, duck, jg_server):
    """TPC-H Q18's shape: the orders of large quantity (a pushed aggregation with HAVING) joined
    with a pushed three-way join, all in one job. The aggregation's few order keys are that join's
    build side; its runtime filter goes through the three-way join's keys to the lineitem scan
    probing it, so that scan sends a small share of lineitem; and each scan under the join reads
    only the columns used above it."""
    sql = ("SELECT c_name, o_orderkey, o_totalprice, sum(l_quantity) FROM {t}customer, {t}orders, {t}lineitem "
           "WHERE o_orderkey IN (SELECT l_orderkey FROM {t}lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300) "
           "AND c_custkey = o_custkey AND o_orderkey = l_orderkey GROUP BY c_name, o_orderkey, o_totalprice")
    plan = explain(conn, sql.format(t="jumpgate.tpch_parquet."))
    # Trino sums decimal(12,2) in decimal(38,2), and so does Jumpgate: over the input cast to that wide decimal
    assert ("pushed aggregation=[group by [g0:=\"l_orderkey\"], [a0:=sum(CAST(\"l_quantity\" AS decimal(38,2)))], "
            "having") in plan, plan
    got, qid = query_with_id(conn, sql.format(t="jumpgate.tpch_parquet."))
    want = duck.execute(sql.format(t="")).fetchall()
    assert got and normalize(got) == normalize(want)
    [job] = jobs_of(jg_server, qid)
    scans = [n for n in job["ncas"] if n["implementation"].startswith("software.scan")]
    under = [n for n in scans if n["operations"][-1].startswith("columns_")]
    assert len(scans) == 4 and len(under) == 3, scans  # read, [filter], then the columns used above
    lineitem_total = duck.execute("SELECT count(*) FROM lineitem").fetchone()[0]
    stages = {nid: v["stages"] for nid, v in job["timeline"]["ncas"].items()}
    [lineitem] = [n for n in under if sum(s["tuples_in"] for s in stages[n["id"]]) == lineitem_total]
    filters = [f for f in job["runtime_filters"] if lineitem["id"] in f["to"]]
    assert any(f["rows_removed"] > 0.9 * lineitem_total for f in filters), filters
    assert sum(s["tuples_out"] for s in stages[lineitem["id"]]) < 0.05 * lineitem_total


@pytest.mark.parametrize("fmt", ["json", "orc"])
def test_streamed_and_buffered_destinations_give_the_same_rows(conn, duck, fmt):
    """Many rows over two destinations (no aggregation pushed: lineitem's rows go to Trino), read as
    they arrive (the default) and read once the streams ended (jumpgate.streaming=false)."""
    sql = ("SELECT l_orderkey, l_linenumber, l_comment FROM {t}lineitem WHERE l_quantity > 10")
    streamed = query(conn, sql.format(t=f"jumpgate.tpch_{fmt}."))
    buffered = query(conn, sql.format(t=f"jumpgate_buffered.tpch_{fmt}."))
    want = duck.execute(sql.format(t="")).fetchall()
    assert len(streamed) == len(want) > 100_000
    assert exact(streamed) == exact(buffered) == exact([tuple(r) for r in want])


def test_a_self_join_is_pushed_with_one_side_renamed_and_the_smaller_side_built(conn, duck, jg_server):
    """Two nations (TPC-H Q7's shape): the second one's columns are renamed in its scan, so the
    contract's join, which outputs both sides' columns by name, takes it; and the filtered supplier
    side, written first, is the build side of its join with the larger lineitem."""
    sql = ("SELECT n1.n_name, n2.n_name, count(*), sum(l_quantity) FROM {t}supplier, {t}lineitem, {t}orders, {t}customer, "
           "{t}nation n1, {t}nation n2 WHERE s_suppkey = l_suppkey AND o_orderkey = l_orderkey AND c_custkey = o_custkey "
           "AND s_nationkey = n1.n_nationkey AND c_nationkey = n2.n_nationkey AND s_acctbal > 9000 "
           "AND n1.n_name IN ('FRANCE', 'GERMANY') AND n2.n_name IN ('FRANCE', 'GERMANY') GROUP BY 1, 2")
    plan = explain(conn, sql.format(t="jumpgate.tpch_parquet."))
    assert "renamed=[" in plan and "n_name AS n_name_2" in plan, plan
    assert "(tpch_parquet.lineitem) WITH (tpch_parquet.supplier pushed filter" in plan, plan
    got, qid = query_with_id(conn, sql.format(t="jumpgate.tpch_parquet."))
    want = duck.execute(sql.format(t="")).fetchall()
    assert got and normalize(got) == normalize(want)
    jobs = jobs_of(jg_server, qid)
    assert len(jobs) == 1, [j["ncas"] for j in jobs]  # the whole join is one job
    assert sum(n["implementation"].endswith("hash_join") for n in jobs[0]["ncas"]) == 5


def test_a_right_outer_join_is_pushed_as_a_left_outer_join_the_other_way_round(conn, duck):
    sql = ("SELECT c_custkey, o_orderkey, o_totalprice FROM {t}orders RIGHT JOIN {t}customer "
           "ON o_custkey = c_custkey AND o_totalprice > 400000 WHERE c_custkey < 2000")
    plan = explain(conn, sql.format(t="jumpgate.tpch_parquet."))
    assert "pushed join=[left_outer (tpch_parquet.customer" in plan and "WITH (tpch_parquet.orders" in plan, plan
    got = query(conn, sql.format(t="jumpgate.tpch_parquet."))
    want = duck.execute(sql.format(t="")).fetchall()
    assert any(r[1] is None for r in got) and any(r[1] is not None for r in got), got[:5]
    assert normalize(got) == normalize(want)


def test_a_refused_join_shows_its_reason_in_explain(conn, duck):
    sql = "SELECT n_name, r_name FROM {t}nation FULL JOIN {t}region ON n_regionkey = r_regionkey AND r_name = 'ASIA'"
    plan = explain(conn, sql.format(t="jumpgate.tpch_parquet."))
    assert "pushed join=" not in plan, plan
    assert "not pushed=[join with tpch_parquet.region (FULL_OUTER joins (the contract has inner, left semi/anti" in plan, plan
    assert normalize(query(conn, sql.format(t="jumpgate.tpch_parquet."))) == normalize(duck.execute(sql.format(t="")).fetchall())


def test_a_join_over_a_pushed_aggregation_filters_the_aggregated_scan(conn, duck, jg_server):
    """TPC-H Q4's shape as Trino plans it: the quarter's orders joined with lineitem's distinct
    order keys (a pushed aggregation). The join is pushed with the aggregation under it in the same
    job, orders is built, and its keys reach lineitem's scan as a runtime filter through the
    aggregation's group key, so the scan aggregates the rows of the quarter's orders only."""
    sql = ("SELECT o_orderpriority, count(*) FROM {t}orders WHERE o_orderdate >= DATE '1993-07-01' "
           "AND o_orderdate < DATE '1993-10-01' AND EXISTS (SELECT * FROM {t}lineitem WHERE l_orderkey = o_orderkey "
           "AND l_commitdate < l_receiptdate) GROUP BY o_orderpriority ORDER BY o_orderpriority")
    plan = explain(conn, sql.format(t="jumpgate.tpch_parquet."))
    assert "pushed join=[inner (tpch_parquet.lineitem pushed filter=" in plan, plan
    assert 'pushed aggregation=[group by [g0:="l_orderkey"], []]) WITH (tpch_parquet.orders' in plan, plan
    got, qid = query_with_id(conn, sql.format(t="jumpgate.tpch_parquet."))
    want = duck.execute(sql.format(t="")).fetchall()
    assert got and normalize(got) == normalize(want)
    [job] = jobs_of(jg_server, qid)
    [rf] = job["runtime_filters"]
    assert rf["handed"] and rf["rows_removed"] > 0, rf
    [scan] = rf["to"]
    [stage] = job["timeline"]["ncas"][scan]["stages"]
    quarter_lines = duck.execute("SELECT count(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey WHERE "
                                 "o_orderdate >= DATE '1993-07-01' AND o_orderdate < DATE '1993-10-01' "
                                 "AND l_commitdate < l_receiptdate").fetchone()[0]
    # the scan aggregated the quarter's lines (2.3% of lineitem) and the few others its Bloom
    # filter let through, not the 63% of lineitem that pass its own filter
    kept = stage["rf_rows_tested"] - stage["rf_rows_removed"]
    assert quarter_lines <= kept < 0.1 * stage["rf_rows_tested"], stage
