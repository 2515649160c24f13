"""Filter/project requests over REST against a real server, each answer compared with DuckDB on
the same file: every type, NULLs everywhere, every expression construct of contract §1."""
from __future__ import annotations

import json
from decimal import Decimal

import pytest

from .data import HOSTILE_I, HOSTILE_S, duck_view
from .helpers import assert_same_rows, filter_project, run_ops

pytestmark = pytest.mark.e2e


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


ALL = [("id", "id"), ("a", "a"), ("b", "b"), ("x", "x"), ("d", "d"), ("s", "s"), ("dt", "dt"),
       ("flag", "flag"), ("hs", q(HOSTILE_S)), ("hi", q(HOSTILE_I))]

# (case id, condition or None, [(output name, expression)]); the same text is valid DuckDB SQL.
CASES = [
    ("all_columns", None, ALL),
    ("int_compare", "a > 10", ALL),
    ("int64_arith", "b IS NOT NULL", [("id", "id"), ("b3", "b * 3 - 7"), ("bm", "b % 1000"), ("neg", "-b")]),
    ("int_div_and_mod", "a <> 0", [("id", "id"), ("q", "b / a"), ("m", "a % 7"), ("sum", "a + 2147483647")]),  # 64-bit: DuckDB's int32 would overflow
    ("float_math", "x < 0.5", [("id", "id"), ("y", "x * 2 + 1"), ("z", "x / 3"), ("ab", "abs(x)")]),
    ("decimal_cmp_arith", "d >= 100.50", [("id", "id"), ("d2", "d * 2"), ("dp", "d + 1.5"), ("da", "d - a"),
                                           ("dd", "d * d"), ("dabs", "abs(d)")]),
    ("dates", "dt >= DATE '2000-01-01' AND dt < DATE '2010-01-01'",
     [("id", "id"), ("dt", "dt"), ("y", "year(dt)"), ("m", "month(dt)"), ("dd", "day(dt)")]),
    ("dates_before_1970", "dt < DATE '1970-01-01'", [("id", "id"), ("y", "year(dt)"), ("m", "month(dt)"),
                                                     ("dd", "day(dt)")]),
    ("like", "s LIKE 'ab%' OR s LIKE '_e%' OR s NOT LIKE '%a_'", [("id", "id"), ("s", "s")]),
    ("like_unicode_and_specials", "s LIKE '%ß%' OR s LIKE 'x%y%' OR s LIKE 'na_ve%'", [("s", "s")]),
    ("is_null_or", "s IS NULL OR x < 0.5", [("id", "id"), ("x", "x"), ("s", "s")]),
    ("three_valued_logic", "NOT (flag AND a > 0) OR (flag IS NULL AND d IS NOT NULL)",
     [("id", "id"), ("f", "flag"), ("t", "flag OR a > 0"), ("u", "flag AND NOT (a < 0)")]),
    ("case_when", None, [("id", "id"), ("sign", "CASE WHEN a > 0 THEN 'pos' WHEN a < 0 THEN 'neg' ELSE 'zero' END"),
                         ("nul", "CASE WHEN flag THEN d END"), ("simple", "CASE a WHEN 1 THEN 'one' ELSE s END")]),
    ("in_lists", "a IN (1, 2, 3, 500, -7) OR s NOT IN ('abc', 'ab', 'zeta')", [("id", "id"), ("a", "a"), ("s", "s"),
                                                                             ("n", "a IN (1, NULL)")]),
    ("between", "a BETWEEN -10 AND 10 OR x NOT BETWEEN -900 AND 900", [("id", "id"), ("a", "a"), ("x", "x")]),
    ("strings", "s IS NOT NULL", [("id", "id"), ("lo", "lower(s)"), ("up", "upper(s)"), ("len", "length(s)"),
                                  ("sub", "substr(s, 2, 3)"), ("tail", "substr(s, -2)"), ("cmp", "s > 'beta'")]),
    ("coalesce", None, [("id", "id"), ("a0", "coalesce(a, 0)"), ("s0", "coalesce(s, 'none')"),
                        ("d0", "coalesce(d, 0.5)")]),
    ("casts", None, [("id", "id"), ("as", "CAST(a AS VARCHAR)"), ("df", "CAST(d AS DOUBLE)"),
                     ("ds", "CAST(dt AS VARCHAR)"), ("ad", "CAST(a AS DECIMAL(12,2))"), ("xi", "CAST(x AS BIGINT)")]),
    ("hostile_names", f"{q(HOSTILE_S)} LIKE '%system%' OR {q(HOSTILE_I)} > 2",
     [("h1", q(HOSTILE_S)), ("h2", q(HOSTILE_I)), ("lit", "'\"); exit(1); /*'")]),
    ("empty_result", "a > 100000", [("id", "id"), ("s", "s")]),
    ("string_equality_unicode", "s = 'naïve' OR s = '日本語' OR s = 'O''Neil'", [("id", "id"), ("s", "s")]),
]


# Where DuckDB's SQL differs from the contract's semantics, the oracle's spelling of an expression.
DUCK_SPELLING = {"a + 2147483647": "CAST(a AS BIGINT) + 2147483647"}


@pytest.mark.parametrize("case_id,cond,cols", CASES, ids=[c[0] for c in CASES])
def test_filter_project_matches_duckdb(server, duck, data_root, case_id, cond, cols):
    duck_view(duck, "t", data_root / "t.jsonl")
    got = run_ops(server.url, filter_project(cond, cols))
    sql = (f"SELECT {', '.join(f'{DUCK_SPELLING.get(e, e)} AS {q(n)}' for n, e in cols)} FROM t"
           + (f" WHERE {cond}" if cond else ""))
    assert_same_rows(duck, got, sql)


def test_two_reads_two_sends_one_job(server, duck, data_root):
    from jumpgate.client import Jumpgate

    from .helpers import read_op

    duck_view(duck, "t", data_root / "t.jsonl")
    ops = [read_op("r1"), {"kind": "filter", "name": "f1", "input": "r1", "condition": "a > 0"},
           {"kind": "project", "name": "p1", "input": "f1", "columns": [{"name": "id", "expr": "id"}]},
           read_op("r2"), {"kind": "filter", "name": "f2", "input": "r2", "condition": "a <= 0"},
           {"kind": "project", "name": "p2", "input": "f2", "columns": [{"name": "s", "expr": "s"}]}]
    sends = [{"kind": "send", "name": n, "input": i, "transport": "tcp", "host": "127.0.0.1", "port": 0}
             for n, i in (("pos", "p1"), ("neg", "p2"))]
    with Jumpgate(server.url) as jg:
        out = jg.run({"operations": ops + sends}, timeout=300)
        assert len(jg.last_job.ncas) == 2
    assert_same_rows(duck, out["pos"], "SELECT id FROM t WHERE a > 0")
    assert_same_rows(duck, out["neg"], "SELECT s FROM t WHERE a <= 0")


def _in_values(present: list[str], fake, n: int = 10_000) -> str:
    """`n` values for an IN list: those of the file (so rows match), then made-up ones."""
    values = present[: n // 2]
    return ", ".join(values + [fake(k) for k in range(n - len(values))])


def test_ten_thousand_value_in_lists_match_duckdb(server, duck, data_root):
    """IN lists of 10,000 values of each type IN supports (sorted arrays searched in the generated
    C, codegen/inset.py), with NULL, NOT IN and one as the filter, compared with DuckDB."""
    rows = [json.loads(line) for line in (data_root / "t.jsonl").read_text(encoding="utf-8").splitlines()]

    def seen(col: str, fmt) -> list[str]:
        """Every other distinct value of the column in the file: the rest must not match."""
        return sorted({fmt(r[col]) for r in rows if r.get(col) is not None})[::2]

    def s_lit(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    ints = _in_values(seen("a", str), lambda k: str(2000 + k)) + ", NULL"
    bigs = _in_values(seen("b", str), lambda k: str(10**13 + k))
    decimals = _in_values(seen("d", lambda v: f"{Decimal(str(v)):.2f}"), lambda k: f"{k}.005")
    floats = _in_values(seen("x", lambda v: f"{float(v):.17e}"), lambda k: f"{k}.125e7")
    strings = _in_values(seen("s", s_lit), lambda k: s_lit(f"w{k}"))
    dates = _in_values(seen("dt", lambda v: f"DATE '{v}'"),
                       lambda k: f"DATE '{2100 + k // 336}-{k // 28 % 12 + 1:02d}-{k % 28 + 1:02d}'")
    cond = f"a IN ({ints}) OR a IS NULL"
    cols = [("id", "id"), ("a", "a"), ("in_b", f"b IN ({bigs})"), ("in_d", f"d IN ({decimals})"),
            ("in_x", f"x IN ({floats})"), ("not_in_s", f"s NOT IN ({strings})"), ("in_dt", f"dt IN ({dates})")]
    duck_view(duck, "t", data_root / "t.jsonl")
    got = run_ops(server.url, filter_project(cond, cols))
    sql = f"SELECT {', '.join(f'{e} AS {q(n)}' for n, e in cols)} FROM t WHERE {cond}"
    assert_same_rows(duck, got, sql)
    assert 0 < got.num_rows < len(rows)
    for name in ("in_b", "in_d", "in_x", "in_dt", "not_in_s"):  # each list decides some rows both ways
        values = got.column(name).to_pylist()
        assert True in values and False in values, name
