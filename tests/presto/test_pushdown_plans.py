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


def jobs_of(jg_server, query_id: str) -> list[dict]:
    """The Jumpgate jobs one Trino query ran (the connector names them trino-<query id>-<scan>)."""
    http = jg_server.http
    return [http.get(f"/v1/jobs/{j['job_id']}").json() for j in http.get("/v1/jobs").json()
            if j["name"].startswith(f"trino-trino-{query_id}-")]


def test_dynamic_filters_and_column_pruning_narrow_the_join_scans(conn, duck, jg_server):
    """TPC-H Q18's shape: the orders of large quantity (a pushed aggregation with HAVING) filter a
    pushed three-way join through Trino's dynamic filter on o_orderkey; the connector copies it to
    l_orderkey through the join's keys, so neither orders' nor lineitem's scan sends more than the
    matching rows, and each scan under the join reads only the columns used above it."""
    sql = ("SELECT c_name, o_orderkey, o_totalprice, sum(l_quantity) FROM {t}customer, {t}orders, {t}lineitem "
           "WHERE o_orderkey IN (SELECT l_orderkey FROM {t}lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300) "
           "AND c_custkey = o_custkey AND o_orderkey = l_orderkey GROUP BY c_name, o_orderkey, o_totalprice")
    cur = conn.cursor()
    cur.execute(sql.format(t="jumpgate.tpch_parquet."))
    got = cur.fetchall()
    qid = cur.query_id
    cur.close()
    want = duck.execute(sql.format(t="")).fetchall()
    assert got and normalize(got) == normalize(want)
    (join_job,) = [j for j in jobs_of(jg_server, qid) if any(n["implementation"].endswith("hash_join") for n in j["ncas"])]
    lineitem_rows = duck.execute(sql.format(t="").replace("c_name, o_orderkey, o_totalprice, sum(l_quantity)", "count(*)")
                                 .split(" GROUP BY c_name")[0]).fetchone()[0]
    assert join_job["progress"]["rows_to_clients"] == lineitem_rows
    scans = [n for n in join_job["ncas"] if n["implementation"].startswith("software.scan")]
    assert len(scans) == 3
    for n in scans:  # read, [filter], then the columns the join and the output use
        assert n["operations"][-1].startswith("columns_"), n
    outs = {nid: sum(s["tuples_out"] for s in v["stages"]) for nid, v in join_job["timeline"]["ncas"].items()}
    ins = {nid: sum(s["tuples_in"] for s in v["stages"]) for nid, v in join_job["timeline"]["ncas"].items()}
    lineitem_total = duck.execute("SELECT count(*) FROM lineitem").fetchone()[0]
    orders_total = duck.execute("SELECT count(*) FROM orders").fetchone()[0]
    for n in scans:
        if ins[n["id"]] in (lineitem_total, orders_total):  # the two scans the dynamic filter reaches
            assert outs[n["id"]] <= lineitem_rows, (n, outs[n["id"]])


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
    cur = conn.cursor()
    cur.execute(sql.format(t="jumpgate.tpch_parquet."))
    got = cur.fetchall()
    qid = cur.query_id
    cur.close()
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
