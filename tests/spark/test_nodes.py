"""The Spark plugin against a server whose inventory has two nodes (docs/deploy.md): nothing in
the plugin changes; the jobs' NCAs run on both nodes, and the answers equal Spark's own."""
from __future__ import annotations

import httpx

from jumpgate.local_server import LocalServer

from .helpers import check_spark_answer_and_operator

SQL = """
SELECT ss_item_sk, i_brand_id, ss_net_profit FROM store_sales JOIN item ON ss_item_sk = i_item_sk
WHERE ss_quantity > 80 AND i_category IN ('Music', 'Books')
"""


def test_a_two_node_server_serves_spark_unchanged(spark, data_root, tmp_path):
    inventory = tmp_path / "nodes.yaml"
    inventory.write_text("nodes:\n  - {name: a, address: 127.0.0.2, cores: 1}\n"
                         "  - {name: b, address: 127.0.0.3, cores: 1}\n")
    srv = LocalServer(data_root, tmp_path / "cache", tmp_path / "server.log", extra_args=["--nodes", str(inventory)])
    try:
        run = check_spark_answer_and_operator(spark, SQL, {"scan", "filter", "join"}, **{"spark.jumpgate.url": srv.url})
        jobs = httpx.get(srv.url + "/v1/jobs").json()
        hosts = {n["host"] for j in jobs for n in httpx.get(srv.url + f"/v1/jobs/{j['job_id']}").json()["ncas"]}
        assert hosts == {"a", "b"}, hosts
        assert run.metrics["jobs_run"] >= 1
    finally:
        left = srv.children()
        srv.stop()
    assert not left, f"NCA processes left behind: {left}"
