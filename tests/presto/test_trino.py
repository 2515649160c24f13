"""The Trino connector against a real Trino 476 and a real Jumpgate server (see conftest.py)."""
from __future__ import annotations

import decimal
import math
import time

import pytest

from .conftest import FORMATS, TABLES, query


def normalize(rows):
    """Rows comparable across engines: numbers as floats rounded to 9 significant digits, sorted."""
    def norm(v):
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, (int, float, decimal.Decimal)):
            f = float(v)
            return 0.0 if f == 0 else round(f, 8 - int(math.floor(math.log10(abs(f)))))
        return v
    return sorted((tuple(norm(v) for v in r) for r in rows), key=repr)


def test_catalog_listing(conn):
    schemas = {r[0] for r in query(conn, "SHOW SCHEMAS FROM jumpgate")}
    assert {f"tpch_{f}" for f in FORMATS} <= schemas, schemas
    assert "information_schema" in schemas
    for fmt in FORMATS:
        tables = sorted(r[0] for r in query(conn, f"SHOW TABLES FROM jumpgate.tpch_{fmt}"))
        assert tables == TABLES
    cols = query(conn, "DESCRIBE jumpgate.tpch_parquet.lineitem")
    types = {r[0]: r[1] for r in cols}
    assert types["l_orderkey"] == "bigint" and types["l_quantity"] == "decimal(15,2)"
    assert types["l_shipdate"] == "date" and types["l_comment"] == "varchar"
    rows = query(conn, "SELECT table_name, count(*) FROM jumpgate.information_schema.columns "
                       "WHERE table_schema = 'tpch_orc' GROUP BY table_name")
    assert dict(rows) == {"customer": 8, "lineitem": 16, "nation": 4, "orders": 9, "part": 9, "partsupp": 5,
                          "region": 3, "supplier": 7}


SCAN_FILTER = ("SELECT l_orderkey, l_linenumber, l_extendedprice, l_discount, l_shipdate, l_shipmode FROM {t}lineitem "
               "WHERE l_shipdate >= DATE '1995-01-01' AND l_quantity < 5 AND l_shipmode IN ('AIR', 'MAIL')")


@pytest.mark.parametrize("fmt", FORMATS)
def test_scan_filter_equals_duckdb(conn, duck, fmt):
    t0 = time.monotonic()
    got = query(conn, SCAN_FILTER.format(t=f"jumpgate.tpch_{fmt}."))
    took = time.monotonic() - t0
    want = duck.execute(SCAN_FILTER.format(t="")).fetchall()
    assert len(got) == len(want) > 1000
    assert normalize(got) == normalize(want)
    print(f"scan+filter over {fmt}: {len(got)} rows in {took:.2f} s")


AGG = ("SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice * (1 - l_discount)), count(*), "
       "min(l_shipdate), max(l_comment) FROM {t}lineitem WHERE l_shipdate <= DATE '1998-09-02' "
       "GROUP BY l_returnflag, l_linestatus")


@pytest.mark.parametrize("fmt", FORMATS)
def test_aggregation_equals_duckdb(conn, duck, fmt):
    got = query(conn, AGG.format(t=f"jumpgate.tpch_{fmt}."))
    want = duck.execute(AGG.format(t="")).fetchall()
    assert normalize(got) == normalize(want)


def explain(conn, sql: str) -> str:
    return "\n".join(r[0] for r in query(conn, "EXPLAIN " + sql))


def test_explain_shows_pushdown(conn):
    plan = explain(conn, SCAN_FILTER.format(t="jumpgate.tpch_json."))
    assert "pushed filter=" in plan and "l_shipmode" in plan, plan
    plan = explain(conn, AGG.format(t="jumpgate.tpch_json."))
    assert "pushed aggregation=" in plan and "sum(" in plan, plan
    plan = explain(conn, "SELECT n_name, r_name FROM jumpgate.tpch_orc.nation JOIN jumpgate.tpch_orc.region "
                         "ON n_regionkey = r_regionkey WHERE r_name = 'ASIA'")
    assert "pushed join=[inner" in plan and "r_name" in plan, plan
    # Not pushed, with the reason: a LIMIT (no such operation in the contract).
    plan = explain(conn, "SELECT l_orderkey FROM jumpgate.tpch_json.lineitem LIMIT 5")
    assert "not pushed=" in plan and "limit" in plan, plan
    # The switches: with pushdown off nothing is pushed, and the plan says why.
    plan = explain(conn, SCAN_FILTER.format(t="jumpgate_nopush.tpch_json."))
    assert "pushed filter=" not in plan and "jumpgate.pushdown.enabled=false" in plan, plan


def test_pushdown_off_gives_the_same_answer(conn):
    on = query(conn, AGG.format(t="jumpgate.tpch_parquet."))
    off = query(conn, AGG.format(t="jumpgate_nopush.tpch_parquet."))
    assert normalize(on) == normalize(off)
    # Nothing pushed and no column read: the job sends a row count's worth of tuples.
    assert query(conn, "SELECT count(*) FROM jumpgate_nopush.tpch_json.orders") == [(150_000,)]


def test_python_client_query(conn):
    """The `trino` Python client: a listing and a query, values typed as Python values."""
    cur = conn.cursor()
    cur.execute("SELECT n_name, r_name FROM jumpgate.tpch_orc.nation JOIN jumpgate.tpch_orc.region "
                "ON n_regionkey = r_regionkey WHERE r_name = 'ASIA' ORDER BY n_name")
    rows = cur.fetchall()
    assert [r[0] for r in rows] == ["CHINA", "INDIA", "INDONESIA", "JAPAN", "VIETNAM"]
    assert [d[0] for d in cur.description] == ["n_name", "r_name"]


def test_stopped_server_gives_a_clear_error(conn, trino):
    """The `jumpgate_down` catalog points where no server listens: listing still works (it reads the
    data root), a query fails naming the server and the job."""
    assert "lineitem" in {r[0] for r in query(conn, "SHOW TABLES FROM jumpgate_down.tpch_json")}
    with pytest.raises(Exception) as e:
        query(conn, "SELECT count(*) FROM jumpgate_down.tpch_json.nation WHERE n_nationkey > 3")
    msg = str(e.value)
    assert "unreachable" in msg and "Jumpgate job" in msg and "tpch_json.nation" in msg, msg
