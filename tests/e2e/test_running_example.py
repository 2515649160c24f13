"""The thesis' running example (Figures 3.2, 3.4, A.1) end to end through REST: two scans, a join
built before it is probed, an aggregation and a shuffle to two client endpoints."""
from __future__ import annotations

import pytest

from jumpgate.client import Jumpgate
from jumpgate.examples import running_example, write_data
from jumpgate.ncas.software.hashing import partition

pytestmark = pytest.mark.e2e


def test_running_example_matches_duckdb_and_the_thesis_pipeline(server, data_root, duck):
    write_data(data_root, sales=200_000)
    with Jumpgate(server.url) as jg:
        parts = running_example(jg).collect(timeout=300)
        job = jg.last_job
    # The staged networked pipeline of thesis Figure 3.2: the stores side feeds the join's build in
    # stage 0; the sales scan, the join's probe, the aggregation and the shuffle run in stage 1.
    ncas = {n["id"]: n for n in job.ncas}
    by_op = {op: n["id"] for n in job.ncas for op in n["operations"]}
    assert ncas[by_op["read_stores"]]["operations"] == ["read_stores", "project_stores"]
    assert ncas[by_op["read_sales"]]["operations"] == ["read_sales", "filter_sales", "project_sales"]
    join = by_op["join"]
    assert ncas[join]["stages"] == [0, 1]
    assert job.stages[0] == sorted([by_op["read_stores"], join])
    assert set(job.stages[1]) == {by_op["read_sales"], join, by_op["agg"], by_op["shuffle"]}

    want = duck.sql(f"""
        SELECT st.state, sum(s.price) AS total_price
        FROM read_json('{data_root}/sales.jsonl', columns={{'sale_id': 'BIGINT', 'item_id': 'INTEGER',
                       'store_id': 'INTEGER', 'price': 'DECIMAL(10,2)'}}) s
        JOIN read_json('{data_root}/stores.jsonl', columns={{'store_id': 'INTEGER', 'state': 'VARCHAR'}}) st
          ON s.store_id = st.store_id
        WHERE s.item_id = 100 GROUP BY st.state""").fetchall()
    got = [tuple(r.values()) for p in parts for r in p.to_pylist()]
    assert sorted(got, key=str) == sorted(want, key=str)
    assert len(want) > 5
    for i, p in enumerate(parts):  # each state went to the output docs/hashing.md says
        for state in p.column("state").to_pylist():
            assert partition([state], 2) == i
