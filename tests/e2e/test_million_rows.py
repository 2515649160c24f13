"""A file of one million rows, end to end, compared with DuckDB."""
from __future__ import annotations

import pytest

from .data import duck_view
from .helpers import assert_same_rows, filter_project, run_ops

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BIG_TYPES = [("id", "int64", "BIGINT"), ("a", "int32", "INTEGER"), ("x", "float64", "DOUBLE"),
             ("d", "decimal(12,2)", "DECIMAL(12,2)"), ("s", "string", "VARCHAR"), ("dt", "date", "DATE"),
             ("flag", "boolean", "BOOLEAN")]


@pytest.fixture(scope="module")
def big_file(data_root, duck_module):
    path = data_root / "big.jsonl"
    # DuckDB writes the file (fast); NULLs in every column, strings of varying length.
    duck_module.execute(f"""
        COPY (SELECT i AS id,
                     CASE WHEN i % 11 = 0 THEN NULL ELSE (i * 7919) % 2001 - 1000 END::INTEGER AS a,
                     CASE WHEN i % 13 = 0 THEN NULL ELSE ((i * 104729) % 1000003) / 1000.0 END::DOUBLE AS x,
                     CASE WHEN i % 17 = 0 THEN NULL ELSE ((i * 31) % 10000000) / 100.0 END::DECIMAL(12,2) AS d,
                     CASE WHEN i % 19 = 0 THEN NULL ELSE 'item-' || (i % 977) || repeat('z', i % 7) END AS s,
                     CASE WHEN i % 23 = 0 THEN NULL ELSE DATE '1990-01-01' + (i % 12000)::INTEGER END AS dt,
                     CASE WHEN i % 29 = 0 THEN NULL ELSE i % 3 = 0 END AS flag
              FROM range(1000000) t(i)) TO '{path}' (FORMAT json)""")
    return path


@pytest.fixture(scope="module")
def duck_module():
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    yield con
    con.close()


def test_million_rows_filter_project(server, duck_module, big_file):
    duck_view(duck_module, "big", big_file, BIG_TYPES)
    cols = [("id", "id"), ("a2", "a * 2"), ("x", "x"), ("d", "d"), ("s", "upper(s)"), ("y", "year(dt)"), ("flag", "flag")]
    cond = "(a > -500 OR s LIKE 'item-1%') AND (flag IS NULL OR NOT flag)"
    ops = filter_project(cond, cols)
    ops[0] = {**ops[0], "path": big_file.name, "schema": [{"name": n, "type": t} for n, t, _ in BIG_TYPES]}
    got = run_ops(server.url, ops)
    assert got.num_rows > 400_000
    sql = f"SELECT {', '.join(f'{e} AS {n}' for n, e in cols)} FROM big WHERE {cond}"
    assert_same_rows(duck_module, got, sql)
