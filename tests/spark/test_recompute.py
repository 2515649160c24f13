"""Spark computes a partition more than once, and a Jumpgate output must serve every such read:
a range partitioner samples its input in a job of its own before the shuffle map stage reads it
again, a failed task is retried, a partition is read again after its buffer was released. None of
these may fail a query (the plugin re-runs the job, or runs Spark's own plan for the partition), and
each says what it did in the plugin's counters."""
from __future__ import annotations

from jumpgate.local_server import LocalServer

from .helpers import LeakCheck, check_spark_answer_and_operator, jvm, normalize, run_query

SELECTIVE = "SELECT ss_item_sk, ss_ticket_number, ss_net_profit FROM store_sales WHERE ss_quantity > 90"


def _counters(spark) -> dict[str, int]:
    s = jvm(spark).JumpgateStats
    return {"jobs": int(s.jobs()), "reruns": int(s.reruns()), "rereads": int(s.rereads()),
            "fallbacks": int(s.fallbacks())}


def _delta(spark, before: dict[str, int]) -> dict[str, int]:
    return {k: v - before[k] for k, v in _counters(spark).items()}


def test_output_read_twice_by_a_range_partitioner(spark):
    """ORDER BY over an offloaded scan: the range partitioner's sampling job and then the shuffle
    map stage both read the Jumpgate output (TPC-H Q20's failure). Both reads come from the buffer."""
    leaks = LeakCheck(spark)
    before = _counters(spark)
    run = check_spark_answer_and_operator(spark, SELECTIVE + " ORDER BY ss_net_profit, ss_item_sk, ss_ticket_number",
                                          {"scan", "filter", "project"}, ordered=True)
    d = _delta(spark, before)
    assert d["rereads"] >= 1, f"no partition was read twice: {d}\n{run.report}"
    assert d["reruns"] == 0 and d["fallbacks"] == 0, d
    leaks.assert_none_left()  # released when the SQL execution ended


def test_retried_task_reads_its_partition_again(spark):
    """A task that fails half-way through its Jumpgate partition is retried (local[2,2]) and reads
    the whole partition again from the buffer."""
    from pyspark import TaskContext

    def fail_first_attempt(x):
        ctx = TaskContext.get()
        if ctx.attemptNumber() == 0 and ctx.partitionId() == 0 and x is not None and x % 7 == 3:
            raise RuntimeError("injected failure of a task's first attempt")
        return x

    spark.udf.register("jg_fail_first_attempt", fail_first_attempt, "bigint")
    sql = "SELECT jg_fail_first_attempt(ss_item_sk) AS k, ss_net_profit FROM store_sales WHERE ss_quantity > 90"
    expected = run_query(spark, sql, enabled=False).rows
    before = _counters(spark)
    run = run_query(spark, sql, enabled=True)
    d = _delta(spark, before)
    assert normalize(run.rows, False) == normalize(expected, False)
    assert run.offloaded and d["jobs"] == 1, run.report
    assert d["rereads"] >= 1 and d["reruns"] == 0 and d["fallbacks"] == 0, d


def _to_rdd(spark, sql: str):
    """The RDD of a query's plan, outside any SQL execution (as `Dataset.rdd` users get it): its
    Jumpgate jobs run now, and nothing but the RDD's own reads release their buffers."""
    spark.conf.set("spark.jumpgate.enabled", "true")
    qe = spark.sql(sql)._jdf.queryExecution()
    return qe, qe.toRdd()


def test_partition_read_after_its_buffer_was_released_reruns_the_job(spark):
    expected = len(run_query(spark, SELECTIVE, enabled=False).rows)
    leaks = LeakCheck(spark)
    before = _counters(spark)
    _, rdd = _to_rdd(spark, SELECTIVE)
    assert _delta(spark, before)["jobs"] == 1
    assert rdd.count() == expected  # each task releases the partition it read
    assert _delta(spark, before)["reruns"] == 0
    assert rdd.count() == expected  # the buffers are gone: one re-run serves every partition
    d = _delta(spark, before)
    assert d["reruns"] == 1 and d["fallbacks"] == 0, d
    reasons = [str(r) for r in jvm(spark).JumpgateStats.rerunReasons()]
    assert "is not buffered in this executor" in reasons[-1], reasons[-1]
    leaks.assert_none_left()


def test_partition_read_after_jumpgate_is_gone_runs_in_spark(spark, data_root, tmp_path):
    """The buffers are gone and so is the server: each partition runs Spark's own plan over the
    files of its group, and the answer is the same."""
    expected = len(run_query(spark, SELECTIVE, enabled=False).rows)
    srv = LocalServer(data_root, tmp_path / "cache", tmp_path / "server.log")
    url = spark.conf.get("spark.jumpgate.url")
    try:
        spark.conf.set("spark.jumpgate.url", srv.url)
        before = _counters(spark)
        _, rdd = _to_rdd(spark, SELECTIVE)
        assert rdd.count() == expected
    finally:
        spark.conf.set("spark.jumpgate.url", url)
        srv.stop()
    partitions = rdd.getNumPartitions()
    assert rdd.count() == expected
    d = _delta(spark, before)
    assert d["jobs"] == 1 and d["reruns"] >= 1 and d["fallbacks"] == partitions, d
    assert rdd.count() == expected  # and again: nothing was left half-released


def test_fragment_with_a_broadcast_join_is_rerun(spark):
    """A fragment whose Spark plan cannot run one partition on its own (its broadcast join's build
    side is a job of its own) is still served after its buffers were released: by a re-run."""
    sql = ("SELECT ss_item_sk, i_brand_id, ss_net_profit FROM store_sales JOIN item ON ss_item_sk = i_item_sk "
           "WHERE ss_quantity > 90 AND i_category = 'Music'")
    expected = len(run_query(spark, sql, enabled=False).rows)
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # one plain plan, whose RDD is read twice below
    try:
        before = _counters(spark)
        qe, rdd = _to_rdd(spark, sql)
        offloaded = [str(s) for s in jvm(spark).JumpgateTesting.offloaded(qe)]
        first, second = rdd.count(), rdd.count()
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
    assert any("join" in o for o in offloaded), offloaded
    assert first == second == expected
    d = _delta(spark, before)
    assert d["reruns"] >= 1 and d["fallbacks"] == 0, d
