"""The 22 TPC-H queries (DuckDB's text of them) at SF 0.1 over the `jumpgate` catalog, in JSON Lines,
Parquet and ORC, each equal to DuckDB's answer over the same data; and, over Parquet, equal to
Trino's own `tpch` connector.

The exact oracle is DuckDB's dbgen at the same scale factor, the generator that wrote the files.
Trino's `tpch` connector generates the same keys, numbers, dates and names, but other free text
(addresses, comments) and types prices as double: against it, address and comment output columns
are left out, doubles compared to 1e-6, and Q13 (which counts orders by a LIKE over o_comment) is a
strict expected failure."""
from __future__ import annotations

import datetime
import decimal

import pytest

from .conftest import FORMATS, query

QUERIES = range(1, 23)
PUSHED: dict[str, dict[int, bool]] = {fmt: {} for fmt in FORMATS}
JOINED: dict[str, dict[int, bool]] = {fmt: {} for fmt in FORMATS}
# Queries whose plan pushes a filter or an aggregation into Jumpgate, per format, out of 22 (a margin
# below what was measured when this was written, for planner changes).
MIN_PUSHED = 15


@pytest.fixture(scope="session")
def tpch_queries():
    from jumpgate import datagen
    con = datagen.connect(datagen.BENCHMARKS["tpch"])
    try:
        return {int(n): q.strip().rstrip(";") for n, q in con.execute("SELECT query_nr, query FROM tpch_queries()").fetchall()}
    finally:
        con.close()


def trino_sql(n: int, sql: str) -> str:
    """DuckDB's text in Trino's dialect: Q15 groups by an output alias, which Trino does not allow."""
    if n == 15:
        fixed = sql.replace("GROUP BY\n        supplier_no", "GROUP BY\n        l_suppkey")
        assert fixed != sql, "Q15's text changed: update trino_sql"
        return fixed
    return sql


def exact_key(row):
    """The columns that both engines give exactly (text, integers, dates), for ordering ties."""
    return tuple(repr(v) for v in row if isinstance(v, (str, int, datetime.date)) and not isinstance(v, bool))


def same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float, decimal.Decimal)) and isinstance(b, (int, float, decimal.Decimal)):
        fa, fb = float(a), float(b)
        # Trino rounds avg(decimal) to the input's scale; DuckDB gives a double.
        tol = 1e-9 * max(abs(fa), abs(fb), 1.0)
        for v in (a, b):
            if isinstance(v, decimal.Decimal):
                tol = max(tol, 0.5 * 10.0 ** v.as_tuple().exponent + 1e-12)
        return abs(fa - fb) <= tol
    return a == b


def assert_same(got, want, ordered: bool, what: str):
    assert len(got) == len(want), f"{what}: {len(got)} rows, DuckDB has {len(want)}"
    if not ordered:
        got, want = sorted(got, key=exact_key), sorted(want, key=exact_key)
    for i, (g, w) in enumerate(zip(got, want)):
        assert len(g) == len(w) and all(same(x, y) for x, y in zip(g, w)), f"{what}: row {i}: {g} != DuckDB's {w}"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("n", QUERIES, ids=[f"q{n:02d}" for n in QUERIES])
def test_tpch_query(trino, duck, tpch_queries, fmt, n):
    from trino import dbapi
    conn = dbapi.connect(host="127.0.0.1", port=trino.port, user="jumpgate-tests", catalog="jumpgate",
                         schema=f"tpch_{fmt}", request_timeout=600)
    try:
        sql = trino_sql(n, tpch_queries[n])
        plan = "\n".join(r[0] for r in query(conn, "EXPLAIN " + sql))
        PUSHED[fmt][n] = "pushed filter=" in plan or "pushed aggregation=" in plan
        JOINED[fmt][n] = "pushed join=" in plan
        got = query(conn, sql)
    finally:
        conn.close()
    want = duck.execute(tpch_queries[n]).fetchall()
    # Ordered where the ORDER BY decides the order fully: compare as sets where it leaves ties.
    assert_same(got, want, False, f"q{n:02d} over {fmt}")


@pytest.mark.parametrize("fmt", FORMATS)
def test_tpch_queries_were_pushed_down(fmt):
    results = PUSHED[fmt]
    if len(results) < len(QUERIES):
        pytest.skip(f"only {len(results)} of {len(QUERIES)} TPC-H queries over {fmt} ran")
    pushed = sorted(n for n, p in results.items() if p)
    assert len(pushed) >= MIN_PUSHED, f"{fmt}: only queries {pushed} pushed anything into Jumpgate"
    joined = sorted(n for n, p in JOINED[fmt].items() if p)
    print(f"TPC-H over {fmt}: {len(pushed)} of 22 queries pushed a filter or an aggregation into Jumpgate: {pushed}; "
          f"{len(joined)} pushed a join: {joined}")


# Where the two generators differ: free text (addresses, comments) is drawn differently, so output
# columns of those are left out of the comparison, and a query that filters on such text differs.
TPCH_CONNECTOR_DIFFERS = {
    13: "o_comment texts differ between the generators (NOT LIKE '%special%requests%' counts other orders)",
}
FREE_TEXT = ("address", "comment")


@pytest.mark.parametrize("n", QUERIES, ids=[f"q{n:02d}" for n in QUERIES])
def test_tpch_equals_trino_tpch_connector(trino, tpch_queries, request, n):
    """The jumpgate catalog (Parquet) against Trino's own `tpch` connector at SF 0.1 (schema
    `sf0.1`, standard column names): same keys, numbers, dates and names, so the same answers, up
    to the connector's doubles where dbgen has decimals, and but for free-text columns."""
    if n in TPCH_CONNECTOR_DIFFERS:
        request.applymarker(pytest.mark.xfail(reason=TPCH_CONNECTOR_DIFFERS[n], strict=True))
    from trino import dbapi
    sql = trino_sql(n, tpch_queries[n])
    answers = []
    for catalog, schema in (("jumpgate", "tpch_parquet"), ("tpch", "sf0.1")):
        conn = dbapi.connect(host="127.0.0.1", port=trino.port, user="jumpgate-tests", catalog=catalog, schema=schema,
                             request_timeout=600)
        cur = conn.cursor()
        try:
            cur.execute(sql)
            rows = cur.fetchall()
            keep = [i for i, d in enumerate(cur.description) if not d[0].endswith(FREE_TEXT)]
            answers.append([tuple(r[i] for i in keep) for r in rows])
        finally:
            cur.close()
            conn.close()
    got, want = answers
    assert len(got) == len(want), f"q{n:02d}: {len(got)} rows, the tpch connector has {len(want)}"
    got, want = sorted(got, key=exact_key), sorted(want, key=exact_key)
    for i, (g, w) in enumerate(zip(got, want)):
        ok = all(same(x, y) or (isinstance(y, float) and abs(float(x) - y) <= 1e-6 * max(abs(y), 1.0))
                 for x, y in zip(g, w))
        assert ok, f"q{n:02d}: row {i}: {g} != the tpch connector's {w}"
