"""UDP loss survived, end to end (docs/udp-transport.md, "Version 2"): a real server whose software
NCAs talk UDP to each other (JUMPGATE_NCA_TRANSPORT=udp) through a lossy relay in front of every
UDP input (JUMPGATE_UDP_RELAY), and a client whose receiver sits behind a relay of its own. The
job (TPC-DS store_sales: a partial aggregation in the JSON scan, the final one in the aggregation
NCA, every row a group of its own) crosses two lossy UDP edges: scan -> aggregation, aggregation ->
client. At 1% and 5% loss, with 1% duplication and reordering both ways, the answer must equal
DuckDB's, and the job's stats must show what was sent again."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from jumpgate.client import Jumpgate
from jumpgate.client.udp import UdpReceiver
from jumpgate.deploy.udp_relay import Faults, RelayProcess
from jumpgate.local_server import LocalServer

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

COLUMNS = ("ss_ticket_number", "ss_item_sk", "items", "sales")
REQUEST = {"name": "store_sales over lossy UDP", "operations": [
    {"kind": "read", "name": "ss", "path": "tpcds/store_sales/*.jsonl", "format": "json",
     "schema": [{"name": "ss_ticket_number", "type": "int64"}, {"name": "ss_item_sk", "type": "int64"},
                {"name": "ss_sales_price", "type": "decimal(7,2)"}]},
    {"kind": "aggregate", "name": "partial", "input": "ss", "mode": "partial",
     "group_by": [{"name": "ss_ticket_number", "expr": "ss_ticket_number"}, {"name": "ss_item_sk", "expr": "ss_item_sk"}],
     "aggregates": [{"name": "items", "fn": "count_star"}, {"name": "sales", "fn": "sum", "expr": "ss_sales_price"}]},
    {"kind": "aggregate", "name": "final", "input": "partial", "mode": "final",
     "group_by": [{"name": "ss_ticket_number"}, {"name": "ss_item_sk"}],
     "aggregates": [{"name": "items", "fn": "count_star"}, {"name": "sales", "fn": "sum"}]},
    {"kind": "send", "name": "out", "input": "final", "transport": "udp", "host": "127.0.0.1", "port": 0}]}


@pytest.fixture(scope="module")
def want(tpcds_root) -> list[tuple]:
    import duckdb

    con = duckdb.connect()
    try:
        return [tuple(r) for r in con.execute(f"""
            SELECT ss_ticket_number, ss_item_sk, count(*), sum(ss_sales_price)
            FROM read_json('{tpcds_root}/tpcds/store_sales/*.jsonl',
                           columns={{ss_ticket_number: 'BIGINT', ss_item_sk: 'BIGINT', ss_sales_price: 'DECIMAL(7,2)'}})
            GROUP BY ALL ORDER BY ALL""").fetchall()]
    finally:
        con.close()


def run_behind_relay(jg: Jumpgate, faults: Faults, timeout: float = 300) -> tuple:
    """Run REQUEST with the client's UDP receiver behind a lossy relay: what Jumpgate.run does,
    with the relay's port in the send. Returns (rows, job status, receiver stats, relay report)."""
    request = json.loads(json.dumps(REQUEST))
    receiver = UdpReceiver("127.0.0.1", 0, name="out")
    relay = RelayProcess(("127.0.0.1", receiver.port), faults)
    try:
        send = request["operations"][-1]
        send["port"], send["udp_version"] = relay.port, 2
        job = jg.submit(request)
        out = job.outputs["out"]
        receiver.start(out.expected_streams, out.layout)
        job.execute()
        deadline = time.monotonic() + timeout
        while not job.finished:
            assert time.monotonic() < deadline, f"job {job.job_id} did not finish within {timeout} s"
            assert receiver.error is None, receiver.error
            job.status(wait=1.0)
        job.raise_if_failed()
        receiver.senders_done()
        assert receiver.wait(30), receiver.error
        table = receiver.table()
        rows = sorted(zip(*(table.column(c).to_pylist() for c in COLUMNS), strict=True))
        return rows, job.status(), receiver.stats(), relay.stop()
    finally:
        relay.stop()
        receiver.close()


@pytest.mark.parametrize("loss", [0.01, 0.05])
def test_answers_over_lossy_udp_edges_equal_duckdbs_and_the_repeats_are_reported(tpcds_root, want, loss, tmp_path):
    faults = Faults(loss=loss, dup=0.01, reorder=0.01, depth=3, seed=int(loss * 1000))
    env = {"JUMPGATE_NCA_TRANSPORT": "udp",
           "JUMPGATE_UDP_RELAY": json.dumps({"loss": loss, "dup": 0.01, "reorder": 0.01, "depth": 3, "seed": 17})}
    import os

    cache = os.environ.get("JUMPGATE_TEST_CACHE")
    srv = LocalServer(tpcds_root, Path(cache) if cache else None, tmp_path / "server.log", env=env)
    try:
        with Jumpgate(srv.url) as jg:
            rows, status, client, relay = run_behind_relay(jg, faults)
        assert rows == want
        impl = {n["id"]: n["implementation"] for n in status["ncas"]}
        stages = {nid: n["stages"][0] for nid, n in status["timeline"]["ncas"].items()}
        [scan] = [nid for nid, i in impl.items() if i == "software.scan_json"]
        [agg] = [nid for nid, i in impl.items() if i == "software.aggregate"]
        s, a = stages[scan], stages[agg]
        # scan -> aggregation: UDP through the server's relay; the scan repeated what was lost
        assert s["udp_retransmitted"] > 0 and 0 < s["udp_retransmitted_share"] < 0.5
        assert s["udp_retransmitted_share"] == pytest.approx(s["udp_retransmitted"] / s["udp_sent"], abs=1e-5)
        assert a["udp_received"] >= s["udp_sent"] * (1 - 2 * loss) and a["udp_gap_reports"] > 0
        assert a["tuples_in"] == s["tuples_out"]
        # aggregation -> client: through the client's relay
        assert a["udp_retransmitted"] > 0 and a["tuples_out"] == len(want)
        assert client["gap_reports"] > 0 and relay["forward"]["dropped"] > 0 and relay["back"]["received"] > 0
        print(f"\nloss {loss:.0%}: scan -> aggregation {s['udp_sent']} datagrams, {s['udp_retransmitted']} repeats "
              f"({s['udp_retransmitted_share']:.1%}); aggregation -> client {a['udp_sent']}, "
              f"{a['udp_retransmitted']} ({a['udp_retransmitted_share']:.1%}); client: {client}")
    finally:
        left = srv.children()
        srv.stop()
    assert not left, f"processes left behind (NCAs or relays): {left}"
