"""Shuffles and read fan-outs end to end: a real server, real NCA processes, the Python client,
DuckDB as the oracle.

For every shuffle: (a) the union of its outputs is DuckDB's answer, (b) every row arrived at the
output that the Python reference of jg_hash v1 names (docs/hashing.md), (c) rows with equal keys
never split across outputs. Plans cover the scan with a fused shuffle, the standalone shuffle NCA
and the NTF filter/project NCA (with and without a fused shuffle) after a read's fan-out.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pytest

from jumpgate.client import Jumpgate
from jumpgate.ncas.software import hashing

from .helpers import assert_same_rows

pytestmark = pytest.mark.e2e

# (name, contract type, DuckDB type)
COLUMNS = [("id", "int64", "BIGINT"), ("a", "int32", "INTEGER"), ("s", "string", "VARCHAR"),
           ("x", "float64", "DOUBLE"), ("d", "decimal(12,2)", "DECIMAL(12,2)"), ("dt", "date", "DATE"),
           ("flag", "boolean", "BOOLEAN")]
TYPES = {n: t for n, t, _ in COLUMNS}
WORDS = ["alpha", "Alpha", "ALPHA", "beta", "Beta", "naïve", "NAÏVE", "日本語", "", "O'Neil", "ÀÉÎ straße",
         "àéî straße", "tab\there", "🎉 party"]
ROWS = 3000


def write_data(path: Path, rows: int = ROWS, seed: int = 5) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            def maybe(v, p=0.1):
                return None if rng.random() < p else v
            rec = {"id": i, "a": maybe(rng.randint(-5, 5)), "s": maybe(rng.choice(WORDS)),
                   "x": maybe(rng.choice([0.0, -0.0, 1.5, -1.5, 2.25, 1e300])),
                   "d": maybe(rng.choice(["0.00", "-0.01", "1.50", "12345.67", "-99.99"])),
                   "dt": maybe(rng.choice(["1970-01-01", "1969-12-31", "2024-02-29", "2000-01-01"])),
                   "flag": maybe(rng.random() < 0.5)}
            rec = {k: v for k, v in rec.items() if v is not None or rng.random() < 0.5}
            f.write(json.dumps(rec, ensure_ascii=rng.random() < 0.5) + "\n")


@pytest.fixture(scope="module")
def shuffle_data(data_root) -> Path:
    path = data_root / "shuffle.jsonl"
    if not path.exists():
        write_data(path)
    return path


@pytest.fixture
def sduck(duck, shuffle_data):
    cols = ", ".join(f"'{n}': '{t}'" for n, _, t in COLUMNS)
    duck.execute(f"CREATE OR REPLACE VIEW t AS SELECT * FROM read_json('{shuffle_data}', "
                 f"format='newline_delimited', columns={{{cols}}})")
    return duck


def read_op(name: str = "r") -> dict:
    return {"kind": "read", "name": name, "path": "shuffle.jsonl", "format": "json",
            "schema": [{"name": n, "type": t} for n, t, _ in COLUMNS]}


def shuffle_ops(source: str, keys: list[str], partitions: int, name: str = "sh") -> list[dict]:
    return [{"kind": "shuffle", "name": name, "input": source, "keys": keys, "partitions": partitions},
            *({"kind": "send", "name": f"{name}_{i}", "input": f"{name}[{i}]", "transport": "tcp",
               "host": "127.0.0.1", "port": 0} for i in range(partitions))]


def send_op(name: str, source: str) -> dict:
    return {"kind": "send", "name": name, "input": source, "transport": "tcp", "host": "127.0.0.1", "port": 0}


def run(url: str, ops: list[dict]) -> tuple[dict[str, pa.Table], list[dict]]:
    with Jumpgate(url) as jg:
        out = jg.run({"name": "shuffle-e2e", "operations": ops}, timeout=600)
        return out, jg.last_job.ncas


def check_shuffle(con, parts: list[pa.Table], sql: str, key_fn, key_types: list[str]) -> None:
    """(a) the union is DuckDB's answer to `sql`; (b) each row is where the reference hash says;
    (c) equal keys never split."""
    assert_same_rows(con, pa.concat_tables(parts), sql)
    homes: dict[tuple, set[int]] = {}
    for p, table in enumerate(parts):
        for row in table.to_pylist():
            keys = key_fn(row)
            assert hashing.partition(keys, len(parts), key_types) == p, (row, keys)
            homes.setdefault(_group_key(keys), set()).add(p)
    split = {k: v for k, v in homes.items() if len(v) > 1}
    assert not split, f"equal keys split across outputs: {split}"
    if len(parts) > 1:
        assert sum(1 for t in parts if t.num_rows) > 1, "everything went to one output"


def _group_key(keys: list) -> tuple:
    """Keys as SQL groups them: -0.0 is 0.0."""
    return tuple(k + 0.0 if isinstance(k, float) else k for k in keys)


def columns(*names: str):
    return lambda row: [row[n] for n in names]


def implementations(ncas: list[dict]) -> list[tuple[str, list[str]]]:
    return [(n["implementation"], n["operations"]) for n in ncas]


# ------------------------------------------------------------------ scan with a fused shuffle


@pytest.mark.parametrize("partitions", [2, 3])
def test_read_filter_shuffle_multi_column_keys(server, sduck, partitions):
    ops = [read_op(), {"kind": "filter", "name": "f", "input": "r", "condition": "a <> 0 OR a IS NULL"},
           *shuffle_ops("f", ["s", "a"], partitions)]
    out, ncas = run(server.url, ops)
    assert implementations(ncas) == [("software.scan_json", ["r", "f", "sh"])]  # one NCA: the shuffle fused
    parts = [out[f"sh_{i}"] for i in range(partitions)]
    check_shuffle(sduck, parts, "SELECT * FROM t WHERE a <> 0 OR a IS NULL", columns("s", "a"),
                  ["string", "int32"])


def test_null_float_decimal_date_keys(server, sduck):
    out, _ = run(server.url, [read_op(), *shuffle_ops("r", ["x", "d", "dt", "flag"], 3)])
    check_shuffle(sduck, [out[f"sh_{i}"] for i in range(3)], "SELECT * FROM t", columns("x", "d", "dt", "flag"),
                  ["float64", "decimal(12,2)", "date", "boolean"])


def test_expression_keys(server, sduck):
    out, _ = run(server.url, [read_op(), *shuffle_ops("r", ["lower(s)", "a % 2", "CAST(d AS float64) > 0"], 3)])

    def key_fn(row):
        a = row["a"]
        return [None if row["s"] is None else row["s"].lower(),
                None if a is None else (abs(a) % 2) * (1 if a >= 0 else -1),
                None if row["d"] is None else row["d"] > 0]

    check_shuffle(sduck, [out[f"sh_{i}"] for i in range(3)], "SELECT * FROM t", key_fn,
                  ["string", "int64", "boolean"])


def test_int32_key_and_its_int64_cast_partition_alike(server):
    ops = [read_op(), *shuffle_ops("r", ["a"], 3, "s32"), *shuffle_ops("r", ["CAST(a AS int64)"], 3, "s64")]
    out, _ = run(server.url, ops)
    for i in range(3):
        assert sorted(out[f"s32_{i}"].column("id").to_pylist()) == sorted(out[f"s64_{i}"].column("id").to_pylist())


def test_one_partition(server, sduck):
    out, _ = run(server.url, [read_op(), *shuffle_ops("r", ["s"], 1)])
    check_shuffle(sduck, [out["sh_0"]], "SELECT * FROM t", columns("s"), ["string"])


def test_builder_shuffle(server, sduck):
    with Jumpgate(server.url) as jg:
        node = jg.read("shuffle.jsonl", schema={n: t for n, t, _ in COLUMNS}).filter("flag").shuffle(["d", "s"], 2)
        parts = node.collect(timeout=600)
    check_shuffle(sduck, parts, "SELECT * FROM t WHERE flag", columns("d", "s"), ["decimal(12,2)", "string"])


# ------------------------------------------------------------------ fan-out: NTF NCAs


def test_fan_out_two_filters(server, sduck):
    ops = [read_op(), {"kind": "filter", "name": "f1", "input": "r", "condition": "a > 0"},
           {"kind": "filter", "name": "f2", "input": "r", "condition": "s LIKE '%a%'"},
           {"kind": "project", "name": "p2", "input": "f2",
            "columns": [{"name": "id", "expr": "id"}, {"name": "u", "expr": "upper(s)"},
                        {"name": "d2", "expr": "d * 2"}]},
           send_op("pos", "f1"), send_op("likes", "p2")]
    out, ncas = run(server.url, ops)
    assert implementations(ncas) == [("software.scan_json", ["r"]), ("software.ntf_filter_project", ["f1"]),
                                     ("software.ntf_filter_project", ["f2", "p2"])]
    assert_same_rows(sduck, out["pos"], "SELECT * FROM t WHERE a > 0")
    assert_same_rows(sduck, out["likes"], "SELECT id, upper(s) AS u, d * 2 AS d2 FROM t WHERE s LIKE '%a%'")


def test_fan_out_to_the_shuffle_nca(server, sduck):
    """The read feeds a shuffle and a filter: the scan cannot fuse either, so the standalone
    shuffle NCA forwards the scan's tuples."""
    ops = [read_op(), *shuffle_ops("r", ["s", "dt"], 3),
           {"kind": "filter", "name": "f", "input": "r", "condition": "x IS NULL"}, send_op("nox", "f")]
    out, ncas = run(server.url, ops)
    got = implementations(ncas)
    assert ("software.shuffle", ["sh"]) in got and ("software.ntf_filter_project", ["f"]) in got
    check_shuffle(sduck, [out[f"sh_{i}"] for i in range(3)], "SELECT * FROM t", columns("s", "dt"),
                  ["string", "date"])
    assert_same_rows(sduck, out["nox"], "SELECT * FROM t WHERE x IS NULL")


def test_fan_out_filter_project_shuffle(server, sduck):
    """A branch of a fan-out that projects and then shuffles: one NTF filter/project NCA that
    re-encodes and hashes the projected key."""
    ops = [read_op(), {"kind": "project", "name": "p", "input": "r",
                       "columns": [{"name": "k", "expr": "coalesce(lower(s), '?')"}, {"name": "id", "expr": "id"}]},
           *shuffle_ops("p", ["k"], 2), send_op("all", "r")]
    out, ncas = run(server.url, ops)
    assert ("software.ntf_filter_project", ["p", "sh"]) in implementations(ncas)
    check_shuffle(sduck, [out["sh_0"], out["sh_1"]], "SELECT coalesce(lower(s), '?') AS k, id FROM t",
                  columns("k"), ["string"])
    assert_same_rows(sduck, out["all"], "SELECT * FROM t")


# ------------------------------------------------------------------ a larger file (several scan threads)


@pytest.mark.slow
def test_large_file_scan_threads_and_standalone_shuffle(server, duck, data_root):
    """500k rows (about 38 MB): the scan may run two threads (when two cores are free), each
    sending its own stream to every output; the standalone shuffle then reads two streams."""
    path = data_root / "shuffle_big.jsonl"
    if not path.exists():
        duck.execute(f"""
            COPY (SELECT i AS id,
                         CASE WHEN i % 11 = 0 THEN NULL ELSE (i * 7919) % 201 - 100 END::INTEGER AS a,
                         CASE WHEN i % 19 = 0 THEN NULL ELSE 'item-' || (i % 977) || repeat('z', i % 61) END AS s,
                         CASE WHEN i % 13 = 0 THEN NULL ELSE ((i * 104729) % 1003) / 8.0 - 60 END::DOUBLE AS x
                  FROM range(500000) t(i)) TO '{path}' (FORMAT json)""")
    schema = [{"name": "id", "type": "int64"}, {"name": "a", "type": "int32"}, {"name": "s", "type": "string"},
              {"name": "x", "type": "float64"}]
    read = {"kind": "read", "name": "r", "path": path.name, "format": "json", "schema": schema}
    duck.execute(f"CREATE OR REPLACE VIEW big AS SELECT * FROM read_json('{path}', format='newline_delimited', "
                 "columns={'id': 'BIGINT', 'a': 'INTEGER', 's': 'VARCHAR', 'x': 'DOUBLE'})")
    # fused: read -> filter -> shuffle in the scan
    ops = [read, {"kind": "filter", "name": "f", "input": "r", "condition": "x > -50"},
           *shuffle_ops("f", ["s", "a"], 3)]
    out, _ = run(server.url, ops)
    check_shuffle(duck, [out[f"sh_{i}"] for i in range(3)], "SELECT * FROM big WHERE x > -50", columns("s", "a"),
                  ["string", "int32"])
    # standalone: the read also feeds a send, the shuffle NCA reads the scan's streams
    ops = [read, *shuffle_ops("r", ["x"], 2), send_op("all", "r")]
    out, ncas = run(server.url, ops)
    assert ("software.shuffle", ["sh"]) in implementations(ncas)
    check_shuffle(duck, [out["sh_0"], out["sh_1"]], "SELECT * FROM big", columns("x"), ["float64"])
    assert out["all"].num_rows == 500_000
