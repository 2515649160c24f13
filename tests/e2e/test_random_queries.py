"""Differential tests: random requests (random_queries.py) through a real server and its NCAs, over
JSON Lines, Parquet and ORC, against DuckDB over the same rows.

Each case must end in one of three ways: the rows DuckDB gives (as a multiset; floats within
1e-9 relative, as summation order differs); a 4xx naming the operation at fault
(`operations[i]...`), for a request the language does not take (a decimal wider than 18 digits, say);
or a failed job whose error is a data error (overflow, a value out of range, division by zero:
docs/semantics.md) naming the operation and the file. Never a crash of an NCA or of the control
plane, a hang, or a different answer. The session's server fixture checks that no NCA process is
left behind after all of them."""
from __future__ import annotations

import datetime as dt
import decimal
import math

import pytest

from jumpgate.client import JobFailed, Jumpgate, RequestRejected
from jumpgate.ncas.software.arrow_cpp import unavailable_reason

from .random_queries import Case, aggregate_case, duck_sql, join_case, scan_case, write_table

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(unavailable_reason() is not None, reason=f"Arrow C++: {unavailable_reason()}")]

# Cases per kind: each compiles its own NCAs (1-2 s), so the suite runs a few; raise them when hunting.
SCAN_CASES, AGGREGATE_CASES, JOIN_CASES = 40, 25, 15
DATA_ERRORS = ("overflow", "out of range", "does not fit", "division by zero")
CRASHES = ("exited before", "control-plane", "signal", "Traceback", "NCA process")


@pytest.fixture(scope="module")
def env(server, data_root):
    import duckdb

    write_table(data_root)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{data_root / 'random' / 't.parquet'}')")
    with Jumpgate(server.url) as jg:
        yield jg, con
    con.close()


def _key(v):
    """Sort key of a value: NULL first, numbers by value (-0.0 with 0.0), then strings and dates."""
    if v is None:
        return (0, 0)
    if isinstance(v, (bool, int, float, decimal.Decimal)):
        f = float(v)
        return (1, 0.0 if f == 0 else float(f"{f:.9e}"))
    if isinstance(v, dt.date):
        return (3, v.isoformat())
    return (2, str(v))


def _same(a, b) -> bool:
    """Equal values; numbers by value (an int32 sum is an int in one engine and a Decimal in the
    other), floats within 1e-9 relative; a boolean only equals a boolean."""
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a is b if a is None or b is None else (type(a) is type(b) and a == b)
    numbers = (int, float, decimal.Decimal)
    if isinstance(a, numbers) and isinstance(b, numbers):
        if isinstance(a, float) or isinstance(b, float):
            x, y = float(a), float(b)
            return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
        return a == b
    return type(a) is type(b) and a == b


def _names(case: Case) -> set[str]:
    """The operations' names and the columns and aggregates they name."""
    names = set()
    for op in case.ops:
        names.add(op["name"])
        for key in ("columns", "aggregates", "group_by"):
            names.update(c["name"] for c in op.get(key, ()))
    return names


def _rows(rows) -> list[tuple]:
    return sorted((tuple(r) for r in rows), key=lambda r: tuple(_key(v) for v in r))


def check(env, case: Case) -> None:
    jg, con = env
    try:
        want = _rows(con.execute(duck_sql(case.sql)).fetchall())
    except Exception:  # DuckDB evaluates some branches Jumpgate does not reach; nothing to compare
        want = None
    try:
        got_table = jg.run({"name": "random", "operations": case.ops}, timeout=120)["out"]
    except RequestRejected as e:
        assert 400 <= e.status < 500, case.describe()
        assert str(e.error.get("path", "")).startswith("operations["), (e.error, case.describe())
        return
    except JobFailed as e:
        message = str(e)
        assert not any(c in message for c in CRASHES), (message, case.describe())
        assert any(k in message for k in DATA_ERRORS), (message, case.describe())
        # where: the file (a value of a record), else the operation or aggregate (a sum's total)
        where = e.file.endswith(case.ops[0]["path"]) if e.file else any(f"'{n}'" in message for n in _names(case))
        assert where, (e.error, case.describe())
        return
    if want is None:
        return
    got = _rows(tuple(r.values()) for r in got_table.to_pylist())
    assert len(got) == len(want), (len(got), len(want), case.describe())
    for g, w in zip(got, want, strict=True):
        assert len(g) == len(w) and all(_same(a, b) for a, b in zip(g, w)), (g, w, case.describe())


@pytest.mark.parametrize("seed", range(SCAN_CASES))
def test_random_filter_and_projection(env, seed):
    check(env, scan_case(seed))


@pytest.mark.parametrize("seed", range(AGGREGATE_CASES))
def test_random_aggregation(env, seed):
    check(env, aggregate_case(seed))


@pytest.mark.parametrize("seed", range(JOIN_CASES))
def test_random_join(env, seed):
    check(env, join_case(seed))
