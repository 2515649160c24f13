"""The switch aggregator behind a lossy path, end to end (docs/udp-transport.md, "A switch in a
version 2 path"): the thesis' job (count and sum of the sales price per item over TPC-DS
store_sales) through the switch MODEL with a lossy relay between the JSON scan and the switch
(JUMPGATE_SWITCH_RELAY: datagrams dropped, duplicated and reordered both ways, the switch's receipts
included). The scan sends version 2 (acknowledged) streams to the switch, which takes each datagram
once (its ring of sequence numbers) and answers every one with a receipt; the scan repeats what is
lost. At 1% and 5% loss with 1% duplication and reordering the answer must equal DuckDB's, the
scan's stats must show its repeats and the switch's the datagrams it dropped as taken before, and
no process may be left behind (the relay included)."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from jumpgate.client import Jumpgate
from jumpgate.local_server import LocalServer

from .conftest import switch_model_server
from .test_switch import REQUEST

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def want(tpcds_root) -> list[tuple]:
    import duckdb

    con = duckdb.connect()
    try:
        return [tuple(r) for r in con.execute(f"""
            SELECT ss_item_sk, count(*) AS items, sum(ss_sales_price) AS sales
            FROM read_json('{tpcds_root}/tpcds/store_sales/*.jsonl',
                           columns={{ss_item_sk: 'BIGINT', ss_sales_price: 'DECIMAL(7,2)'}})
            GROUP BY ss_item_sk ORDER BY ss_item_sk""").fetchall()]
    finally:
        con.close()


@pytest.fixture(params=[0.01, 0.05], ids=["loss-1%", "loss-5%"])
def lossy(request, tpcds_root, tmp_path) -> Iterator[tuple[float, LocalServer]]:
    """A server whose switch model has a lossy relay in front (1% duplication and reordering, and
    `loss`); afterwards no process of it may be left (switch_model_server checks)."""
    loss = request.param
    faults = {"loss": loss, "dup": 0.01, "reorder": 0.01, "depth": 3, "seed": int(loss * 1000) + 3}
    for srv in switch_model_server(tpcds_root, tmp_path, {"JUMPGATE_SWITCH_RELAY": json.dumps(faults)}):
        yield loss, srv


def test_the_switch_survives_loss_duplication_and_reordering_before_it(lossy, want):
    loss, srv = lossy
    with Jumpgate(srv.url) as jg:
        table = jg.run(REQUEST, timeout=300)["out"]
        status = jg.last_job.status()
    got = sorted(zip(*(table.column(c).to_pylist() for c in ("ss_item_sk", "items", "sales")), strict=True))
    assert got == want

    impl = {n["id"]: n["implementation"] for n in status["ncas"]}
    assert sorted(impl.values()) == ["software.aggregate", "software.scan_json", "switch.model"]
    stages = {nid: n["stages"][0] for nid, n in status["timeline"]["ncas"].items()}
    scan = next(stages[i] for i, name in impl.items() if name == "software.scan_json")
    switch = next(stages[i] for i, name in impl.items() if name == "switch.model")
    # the scan repeated what the relay dropped (datagrams, or the receipts that say they came)
    assert scan["udp_retransmitted"] > 0 and 0 < scan["udp_retransmitted_share"] < 0.5
    assert scan["udp_retransmitted_share"] == pytest.approx(scan["udp_retransmitted"] / scan["udp_sent"], abs=1e-5)
    # every tuple added once: what the switch took is what the scan sent, the rest it dropped
    assert switch["tuples_in"] == scan["tuples_out"] == sum(r[1] for r in want)
    datagrams = switch["switch_taken"]
    assert switch["bytes_in"] == datagrams * 24 + switch["tuples_in"] * (4 + 24)
    assert switch["switch_repeats"] > 0  # the relay's duplicates, and repeats of receipted datagrams
    # each of the scan's data datagrams taken exactly once: what it sent less its repeats and its
    # streams' ENDs (one per stream, 1 .. 64 streams)
    assert 1 <= scan["udp_sent"] - scan["udp_retransmitted"] - datagrams <= 64
    # and what arrived more than once dropped: at most every copy sent, plus the relay's duplicates
    assert datagrams + switch["switch_repeats"] <= scan["udp_sent"] * (1 + 0.02)
    print(f"\nloss {loss:.0%} before the switch: the scan sent {scan['udp_sent']} datagrams, "
          f"{scan['udp_retransmitted']} of them repeats ({scan['udp_retransmitted_share']:.1%}); the switch "
          f"took {datagrams} and dropped {switch['switch_repeats']} as taken before")
