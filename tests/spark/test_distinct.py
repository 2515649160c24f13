"""`count(DISTINCT x)` in Spark (docs/support-matrix.md says it): Spark plans it with an aggregation
by the keys and x first, which has no DISTINCT, so that one is offloaded like any partial
aggregation, and the answer is Spark's."""
from __future__ import annotations

from .helpers import check_spark_answer_and_operator


def test_a_distinct_count_offloads_its_aggregation_by_the_value(spark):
    run = check_spark_answer_and_operator(
        spark, "SELECT ss_store_sk, count(DISTINCT ss_item_sk) AS n, sum(ss_quantity) AS q FROM store_sales "
               "WHERE ss_quantity > 50 GROUP BY ss_store_sk", {"scan", "filter", "aggregate"})
    assert run.metrics["jobs_run"] >= 1
