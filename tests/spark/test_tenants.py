"""The Spark plugin against a server with tenants (docs/security.md): its token comes from
`spark.jumpgate.token`; the jobs it runs belong to its tenant, and answers equal Spark's own."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from jumpgate.local_server import LocalServer

from .helpers import check_spark_answer_and_operator

SQL = """
SELECT ss_item_sk, ss_net_profit FROM store_sales WHERE ss_quantity > 90
"""


def test_the_plugin_sends_its_token_and_its_jobs_are_its_tenants(spark, data_root, tmp_path):
    tokens = tmp_path / "tokens.yaml"
    exe = str(Path(sys.executable).with_name("jumpgate"))
    token = subprocess.run([exe, "tokens", "add", "--file", str(tokens), "--tenant", "analytics"],
                           capture_output=True, text=True, check=True).stdout.strip()
    other = subprocess.run([exe, "tokens", "add", "--file", str(tokens), "--tenant", "other"],
                           capture_output=True, text=True, check=True).stdout.strip()
    srv = LocalServer(data_root, tmp_path / "cache", tmp_path / "server.log", extra_args=["--tokens", str(tokens)])
    try:
        run = check_spark_answer_and_operator(spark, SQL, {"scan", "filter"}, **{"spark.jumpgate.url": srv.url,
                                                                                "spark.jumpgate.token": token})
        assert run.metrics["jobs_run"] >= 1
        mine = httpx.get(srv.url + "/v1/jobs", headers={"Authorization": f"Bearer {token}"}).json()
        assert mine and {j["tenant"] for j in mine} == {"analytics"}, mine
        assert httpx.get(srv.url + "/v1/jobs", headers={"Authorization": f"Bearer {other}"}).json() == []
    finally:
        left = srv.children()
        srv.stop()
    assert not left, f"NCA processes left behind: {left}"
