"""The Python client under ordinary use against a real `jumpgate serve`: explain() compiles and
deletes, and four concurrent collect() calls on a one-core server all succeed (the server queues
them, or answers 503 and the client retries)."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from jumpgate.client import Jumpgate
from jumpgate.local_server import LocalServer

from .data import schema_json
from .helpers import read_op

SCHEMA = {c["name"]: c["type"] for c in schema_json()}


def test_explain_a_dataflow_and_a_raw_request(server):
    with Jumpgate(server.url, token="") as jg:
        node = jg.read("t.jsonl", schema=SCHEMA, name="r").filter("a > 1", name="f").project("id", "s", name="p")
        plan = node.explain()
        text = str(plan)
        lines = text.splitlines()
        assert lines[0].startswith(f"Plan of job {plan.job_id} (compiled, not run, deleted)")
        assert "Stages:" in lines and "NCAs:" in lines and "Edges:" in lines and "Operations:" in lines
        nca = plan.ncas[0]
        assert any(ln.strip().startswith(f"{nca['id']}  {nca['implementation']} on {nca['host']}, stage 0: r, f, p")
                   for ln in lines), text
        assert any(" -> out (client): p as ntf over tcp" in ln for ln in lines), text
        assert any(ln.startswith(f"  r -> {nca['implementation']} ({nca['id']}): ") for ln in lines), text
        rejected = [ln for ln in lines if ln.startswith("      rejected ")]
        assert rejected and all("\n" not in ln for ln in rejected)
        assert any(ln.startswith("  out: client endpoint") for ln in lines), text
        assert '"decisions"' in plan.to_json()
        # the compiled job was deleted: it holds nothing, and nothing ran
        assert jg._call("GET", f"/v1/jobs/{plan.job_id}")["state"] == "cancelled"

        raw = {"name": "raw", "operations": [read_op(), {"kind": "send", "name": "out", "input": "r",
                                                          "transport": "tcp", "host": "127.0.0.1", "port": 0}]}
        plan2 = jg.explain(raw)
        assert "  r -> " in str(plan2) and plan2.job_id != plan.job_id
        assert jg._call("GET", f"/v1/jobs/{plan2.job_id}")["state"] == "cancelled"
        assert raw["operations"][1]["port"] == 0  # the caller's request is not changed
    assert not server.children()


@pytest.fixture(scope="module")
def one_core_server(data_root, tmp_path_factory):
    cache = Path(os.environ.get("JUMPGATE_TEST_CACHE") or tmp_path_factory.mktemp("cache1"))
    srv = LocalServer(data_root, cache, tmp_path_factory.mktemp("logs1") / "server.log", cores=1)
    yield srv
    left = srv.children()
    srv.stop()
    assert not left, f"NCA processes left behind: {left}"


def test_four_concurrent_collects_on_one_core(one_core_server, duck, data_root):
    jg = Jumpgate(one_core_server.url, token="")
    node = jg.read("t.jsonl", schema=SCHEMA).filter("a > 1").project("id", "a")
    results: dict[int, object] = {}

    def run(i: int) -> None:
        try:
            results[i] = node.collect(timeout=300)
        except BaseException as e:  # reported below, with the others
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(330)
    jg.close()
    errors = {i: r for i, r in results.items() if isinstance(r, BaseException)}
    assert len(results) == 4 and not errors, errors
    want = duck.sql(f"SELECT count(*) FROM read_json('{data_root / 't.jsonl'}', columns={{a: 'INTEGER', "
                    f"id: 'BIGINT'}}) WHERE a > 1").fetchone()[0]
    for r in results.values():
        assert r.num_rows == want and r.column_names == ["id", "a"]
