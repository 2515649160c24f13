"""Two small tables and a join over them, for the tests of jobs spread over nodes: `l` (k, v) with
keys in 0..keys-1, `r` (rk, w) with every `step`-th key, each written where a test wants it, and
the join run through a server and checked against DuckDB over the same files."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from jumpgate.client import Jumpgate

from .helpers import assert_same_rows, read_op

SCHEMA_L = [{"name": "k", "type": "int64"}, {"name": "v", "type": "int64"}]
SCHEMA_R = [{"name": "rk", "type": "int64"}, {"name": "w", "type": "string"}]
JOIN = [read_op("l", "l.jsonl", SCHEMA_L), read_op("r", "r.jsonl", SCHEMA_R),
        {"kind": "join", "name": "j", "build": "r", "probe": "l", "build_keys": ["rk"], "probe_keys": ["k"],
         "type": "inner"},
        {"kind": "send", "name": "out", "input": "j", "transport": "tcp", "host": "127.0.0.1", "port": 0}]


def write_tables(l_dir: Path, r_dir: Path, rows: int, keys: int, step: int, seed: int) -> None:
    rnd = random.Random(seed)
    with open(l_dir / "l.jsonl", "w") as f:
        for i in range(rows):
            f.write(json.dumps({"k": rnd.randrange(keys), "v": i}) + "\n")
    with open(r_dir / "r.jsonl", "w") as f:
        for k in range(0, keys, step):
            f.write(json.dumps({"rk": k, "w": f"w{k}"}) + "\n")


def run_join(url: str, l_dir: Path, r_dir: Path):
    """Run the join through the server at `url`; check its rows against DuckDB; return the job."""
    duckdb = pytest.importorskip("duckdb")
    with Jumpgate(url) as jg:
        got = jg.run({"name": "join-over-nodes", "operations": JOIN}, timeout=120)["out"]
        job = jg.last_job
    con = duckdb.connect()
    con.execute(f"CREATE VIEW l AS SELECT * FROM read_json('{l_dir}/l.jsonl', columns={{k: 'BIGINT', v: 'BIGINT'}})")
    con.execute(f"CREATE VIEW r AS SELECT * FROM read_json('{r_dir}/r.jsonl', columns={{rk: 'BIGINT', w: 'VARCHAR'}})")
    assert_same_rows(con, got, "SELECT l.*, r.* FROM l JOIN r ON k = rk")
    return job
