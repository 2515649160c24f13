"""DISTINCT aggregates end to end (`count(DISTINCT x)`, dataflow/aggregates.py): the compiler runs
them as an aggregation by the keys and the value, then one by the keys (compiler/distinct.py);
every answer compared with DuckDB's over the same file."""
from __future__ import annotations

import pytest

from jumpgate.client import Jumpgate, RequestRejected

from .data import ALL_TYPES, duck_view
from .helpers import read_op
from .test_aggregate import agg, assert_same_groups, run

pytestmark = pytest.mark.e2e


@pytest.fixture
def t(duck, data_root):
    duck_view(duck, "t", data_root / "t.jsonl")
    return duck


MIXED = [("nd", "count", "DISTINCT a"), ("sd", "sum", "distinct a"), ("ad", "avg", "DISTINCT a"),
         ("mnd", "min", "DISTINCT a"), ("mxd", "max", "DISTINCT a"),
         ("n", "count_star", None), ("cb", "count", "b"), ("sb", "sum", "b"), ("sdd", "sum", "d"),
         ("ax", "avg", "x"), ("add", "avg", "d"), ("mns", "min", "s"), ("mxdt", "max", "dt")]
DUCK_MIXED = ("count(DISTINCT a) AS nd, sum(DISTINCT a)::BIGINT AS sd, avg(DISTINCT a) AS ad, min(DISTINCT a) AS mnd, "
              "max(DISTINCT a) AS mxd, count(*) AS n, count(b) AS cb, sum(b)::BIGINT AS sb, "
              "sum(d)::DECIMAL(18,2) AS sdd, avg(x) AS ax, avg(d) AS add, min(s) AS mns, max(dt) AS mxdt")


def test_distinct_and_plain_aggregates_by_a_key(server, t):
    """Every DISTINCT function over one value, beside plain ones of every kind (their states are
    merged over the distinct values' groups), NULLs in the key and in the values."""
    table, job = run(server.url, [read_op(), agg("g", "r", [("s", "s")], MIXED)])
    assert table.column_names == ["s"] + [n for n, _, _ in MIXED]
    ops = [op for n in job.ncas for op in n["operations"]]
    assert "g__distinct" in ops and "g" in ops
    assert_same_groups(t, table, f"SELECT s, {DUCK_MIXED} FROM t GROUP BY s", ["s"])


def test_a_distinct_expression_and_several_keys(server, t):
    table, _ = run(server.url, [read_op(), agg("g", "r", [("flag", "flag"), ("a3", "a % 3")],
                                               [("n", "count", "DISTINCT (b % 100) * 2"), ("c", "count_star", None)])])
    assert_same_groups(t, table, "SELECT flag, a % 3 AS a3, count(DISTINCT (b % 100) * 2) AS n, count(*) AS c "
                                 "FROM t GROUP BY flag, a % 3", ["flag", "a3"])


def test_global_distinct_counts_and_no_rows(server, t):
    """Without keys one row, also over no rows: the distinct count and the plain count are 0, the
    others NULL (the plain count comes out of a sum of counts, which alone would be NULL)."""
    aggs = [("nd", "count", "DISTINCT s"), ("n", "count_star", None), ("cb", "count", "b"), ("ad", "avg", "d")]
    table, _ = run(server.url, [read_op(), agg("g", "r", [], aggs)])
    assert_same_groups(t, table, "SELECT count(DISTINCT s) AS nd, count(*) AS n, count(b) AS cb, avg(d) AS ad "
                                 "FROM t", [])
    table, _ = run(server.url, [read_op(), {"kind": "filter", "name": "none", "input": "r", "condition": "FALSE"},
                                agg("g", "none", [], aggs)])
    assert table.to_pylist() == [{"nd": 0, "n": 0, "cb": 0, "ad": None}]


def test_the_python_client_says_it_as_in_sql(server, t):
    with Jumpgate(server.url) as jg:
        src = jg.read("t.jsonl", schema=[(n, ty) for n, ty, _ in ALL_TYPES])
        table = src.aggregate(["flag"], n="count(DISTINCT s)", hi="max(DISTINCT s)", total="sum(b)").collect()
    assert_same_groups(t, table, "SELECT flag, count(DISTINCT s) AS n, max(DISTINCT s) AS hi, "
                                 "sum(b)::BIGINT AS total FROM t GROUP BY flag", ["flag"])


@pytest.mark.parametrize("aggregates,mode,message", [
    ([("n", "count", "DISTINCT a")], "partial", "count(DISTINCT …) is not supported in partial mode"),
    ([("n", "count", "DISTINCT a"), ("m", "count", "DISTINCT b")], "complete",
     "count(DISTINCT …) over a second expression is not supported"),
])
def test_what_is_not_supported_is_named_with_its_path(server, aggregates, mode, message):
    with Jumpgate(server.url) as jg, pytest.raises(RequestRejected) as e:
        jg.run({"operations": [read_op(), agg("g", "r", [("s", "s")], aggregates, mode=mode),
                               {"kind": "send", "name": "out", "input": "g", "transport": "tcp",
                                "host": "127.0.0.1", "port": 0}]}, timeout=60)
    assert message in str(e.value)
    assert f"operations[1].aggregates[{len(aggregates) - 1}].expr" in str(e.value)
