"""The thesis' switch experiment (§3.5.6) end to end: count the rows and sum the sales price per
item over TPC-DS store_sales (here the price as a decimal sum, which the thesis' aggregator could
not do), through the REST API: JSON scan NCA -> switch aggregator (the switch MODEL, p4/model) ->
software final aggregation -> the Python client, every hop over UDP. The mapping must choose the
switch for the partial aggregation by itself, the answer must match DuckDB's, and the switch's
data reduction is reported. A second job whose scan fails mid-stream must clear the switch."""
from __future__ import annotations

import json

import pytest

from jumpgate.client import JobFailed, Jumpgate
from jumpgate.ncas.switch import defs

from .conftest import STORE_SALES_SF, switch_model_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


REQUEST = {"name": "switch store_sales", "operations": [
    {"kind": "read", "name": "ss", "path": "tpcds/store_sales/*.jsonl", "format": "json",
     "schema": [{"name": "ss_item_sk", "type": "int64"}, {"name": "ss_sales_price", "type": "decimal(7,2)"}]},
    {"kind": "aggregate", "name": "partial", "input": "ss", "mode": "partial",
     "group_by": [{"name": "ss_item_sk", "expr": "ss_item_sk"}],
     "aggregates": [{"name": "items", "fn": "count_star"},
                    {"name": "sales", "fn": "sum", "expr": "ss_sales_price"}]},
    {"kind": "aggregate", "name": "final", "input": "partial", "mode": "final",
     "group_by": [{"name": "ss_item_sk"}],
     "aggregates": [{"name": "items", "fn": "count_star"}, {"name": "sales", "fn": "sum"}]},
    {"kind": "send", "name": "out", "input": "final", "transport": "udp", "host": "127.0.0.1", "port": 0}]}


@pytest.fixture(scope="module")
def switch_server(tpcds_root, tmp_path_factory):
    yield from switch_model_server(tpcds_root, tmp_path_factory.mktemp("switch-logs"))


def test_store_sales_through_the_switch_model_matches_duckdb(switch_server, tpcds_root):
    import duckdb

    with Jumpgate(switch_server.url) as jg:
        table = jg.run(REQUEST, timeout=300)["out"]
        status = jg.last_job.status()
    decisions = status["decisions"]
    assert decisions["partial"]["implementation"] == "switch.model"
    assert decisions["ss"]["implementation"] == "software.scan_json"
    assert decisions["final"]["implementation"] == "software.aggregate"
    scan = next(n for n in status["ncas"] if n["implementation"] == "software.scan_json")
    assert scan["operations"] == ["ss"]  # it could have fused the partial aggregation; the switch won

    con = duckdb.connect()
    want = con.execute(f"""
        SELECT ss_item_sk, count(*) AS items, sum(ss_sales_price) AS sales
        FROM read_json('{tpcds_root}/tpcds/store_sales/*.jsonl',
                       columns={{ss_item_sk: 'BIGINT', ss_sales_price: 'DECIMAL(7,2)'}})
        GROUP BY ss_item_sk ORDER BY ss_item_sk""").fetchall()
    got = sorted(zip(*(table.column(c).to_pylist() for c in ("ss_item_sk", "items", "sales")), strict=True))
    assert got == [tuple(r) for r in want]

    switch = next(n["id"] for n in status["ncas"] if n["implementation"] == "switch.model")
    [phase] = status["timeline"]["ncas"][switch]["stages"]
    tuples_in, tuples_out = phase["tuples_in"], phase["tuples_out"]
    assert tuples_in == sum(r[1] for r in want)
    assert tuples_out < tuples_in / 10
    # the scan packed its tuples up to the switch's TUPLES_PER_DATAGRAM per datagram (docs/switch.md):
    # bytes in = datagrams x 24-byte header + tuples x (4-byte length + 24-byte tuple)
    datagrams = (phase["bytes_in"] - tuples_in * (4 + 24)) / 24
    assert tuples_in / defs.TUPLES_PER_DATAGRAM <= datagrams < tuples_in / (defs.TUPLES_PER_DATAGRAM - 1)
    print(f"\nswitch (model) data reduction on TPC-DS store_sales sf {STORE_SALES_SF}: {tuples_in} tuples in, "
          f"{tuples_out} out ({tuples_in / tuples_out:.1f}x; bypassed {phase['switch_bypassed']}, "
          f"spilled {phase['switch_spilled']}); thesis at sf 100: 43x")
    assert json.dumps(status["timeline"])  # the timeline is JSON


def test_a_failing_scan_fails_the_job_and_clears_the_switch(switch_server, tpcds_root, tmp_path):
    bad = json.loads(json.dumps(REQUEST))
    # the prices are decimals; reading them as int64 makes the scan fail on its first row with a cent
    bad["operations"][0]["schema"][1]["type"] = "int64"
    with Jumpgate(switch_server.url) as jg, pytest.raises(JobFailed) as e:
        jg.run(bad, timeout=120)
    assert "ss_sales_price" in json.dumps(e.value.error) and e.value.state == "failed"
    # the switch model was started for the job and stopped with it; a second run works
    assert switch_server.children() == []
