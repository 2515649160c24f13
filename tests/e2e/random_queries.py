"""Random requests for the differential tests (test_random_queries.py): typed expression trees
in the request language, each with the DuckDB SQL that means the same, over one table of every
type with NULLs, extreme integers, -0.0, non-ASCII strings and dates far from today.

A case is a pure function of its seed, so a failing case is reproduced by its test id alone.
Expressions mix every operator and function of the language (docs/support-matrix.md) at random
depths, with literals chosen near the edges (int32 and int64 limits, 1e308, 99999999.99), so
overflow, division by zero and out-of-range casts happen often: those must end the job with a
data error naming where, never a crash or a wrong answer."""
from __future__ import annotations

import datetime as dt
import decimal
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

COLUMNS = [("i", "int32", pa.int32()), ("l", "int64", pa.int64()), ("f", "float64", pa.float64()),
           ("d", "decimal(12,2)", pa.decimal128(12, 2)), ("s", "string", pa.string()),
           ("dt", "date", pa.date32()), ("b", "boolean", pa.bool_())]
WORDS = ["alpha", "Beta", "", "naïve", "日本語", "a%b", "under_score", "x" * 30, "ÄÖÜ", "quote'd"]
FILES = {"json": "random/t.jsonl", "parquet": "random/t.parquet", "orc": "random/t.orc"}
INTS = [0, 1, -1, 7, 2**31, 2**62, -(2**62), 2**63 - 1]
LIKE_PATTERNS = ["a%", "%a%", "_eta", "%", "", "x%x", "%_%", "日%", "%é%"]


def write_table(root: Path, rows: int = 3000, seed: int = 5) -> None:
    """random/t.jsonl and the same rows as random/t.parquet and random/t.orc (written by pyarrow
    from the same Python values, so that -0.0 and every NULL are the same in all three)."""
    rnd = random.Random(seed)
    values: dict[str, list] = {name: [] for name, _, _ in COLUMNS}
    for _ in range(rows):
        def null() -> bool:
            return rnd.random() < 0.1
        values["i"].append(None if null() else rnd.randint(-2**31, 2**31 - 1))
        values["l"].append(None if null() else rnd.choice([0, 1, -1, 2**63 - 1, -2**63, rnd.randint(-10**12, 10**12)]))
        values["f"].append(None if null() else rnd.choice([0.0, -0.0, 1.5, -2.25, 1e300, -1e-300, rnd.uniform(-1e6, 1e6)]))
        values["d"].append(None if null() else decimal.Decimal(rnd.randint(-10**10, 10**10)).scaleb(-2))
        values["s"].append(None if null() else rnd.choice(WORDS))
        values["dt"].append(None if null() else dt.date(rnd.randint(1900, 2100), rnd.randint(1, 12), rnd.randint(1, 28)))
        values["b"].append(None if null() else rnd.random() < 0.5)
    (root / "random").mkdir(parents=True, exist_ok=True)
    with open(root / FILES["json"], "w", encoding="utf-8") as out:
        for k in range(rows):
            record = {name: values[name][k] for name, _, _ in COLUMNS}
            record["d"] = None if record["d"] is None else str(record["d"])
            record["dt"] = None if record["dt"] is None else record["dt"].isoformat()
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    table = pa.table(values, schema=pa.schema([(name, arrow) for name, _, arrow in COLUMNS]))
    pq.write_table(table, root / FILES["parquet"], row_group_size=1000)
    orc.write_table(table, root / FILES["orc"], stripe_size=64 * 1024)


def schema_json() -> list[dict]:
    return [{"name": name, "type": t} for name, t, _ in COLUMNS]


@dataclass(frozen=True)
class Case:
    kind: str  # "scan", "aggregate" or "join"
    fmt: str
    ops: list[dict]
    sql: str  # over a DuckDB view `t` of the table

    def describe(self) -> str:
        return f"{self.kind} over {self.fmt}: {self.sql}"


class Expressions:
    """Typed expression texts: `of(kind)` returns a text of that contract type ("int", "float",
    "dec", "str", "date", "bool"), in a syntax that the request language and DuckDB read alike
    (CAST names are mapped for DuckDB by `duck_sql`). The grammar is two tables: each kind's
    leaves, and its forms over sub-expressions (`e(kind)`, one level deeper)."""

    def __init__(self, rnd: random.Random, max_depth: int = 3) -> None:
        self.rnd = rnd
        self.max_depth = max_depth
        r = rnd
        self.leaves: dict[str, Callable[[], str]] = {
            "int": lambda: r.choice(["i", "l", self._int()]),
            "float": lambda: r.choice(["f", "1.5", "-0.0", "1e308"]),
            "dec": lambda: r.choice(["d", "1.25", "-0.01", "99999999.99"]),
            "str": lambda: r.choice(["s", "'alpha'", "''", "'日本'", "'it''s'"]),
            "date": lambda: r.choice(["dt", "DATE '2000-02-29'", "DATE '1970-01-01'", "CAST('1999-12-31' AS date)"]),
            "bool": lambda: r.choice(["b", "true", "false", "s IS NULL", "l IS NOT NULL"]),
        }
        Form = Callable[[Callable[[str], str]], str]
        self.forms: dict[str, list[Form]] = {
            "int": [
                lambda e: f"({e('int')} {r.choice('+-*%')} {e('int')})",
                lambda e: f"(-{e('int')})",
                lambda e: f"abs({e('int')})",
                lambda e: f"length({e('str')})",
                lambda e: f"{r.choice(['year', 'month', 'day'])}({e('date')})",
                lambda e: f"CASE WHEN {e('bool')} THEN {e('int')} ELSE {e('int')} END",
                lambda e: f"coalesce({e('int')}, {e('int')})",
                lambda e: f"CAST({e(r.choice(['float', 'dec', 'int']))} AS int64)",
                lambda e: f"CAST({e('int')} AS int32)",
            ],
            "float": [
                lambda e: f"({e(r.choice(['int', 'float', 'dec']))} / {e(r.choice(['int', 'float', 'dec']))})",
                lambda e: f"({e('float')} {r.choice('+-*')} {e(r.choice(['int', 'float']))})",
                lambda e: f"CAST({e(r.choice(['int', 'dec']))} AS float64)",
                lambda e: f"abs({e('float')})",
            ],
            "dec": [
                lambda e: f"({e('dec')} {r.choice('+-')} {e(r.choice(['dec', 'int']))})",
                lambda e: f"({e('dec')} * {r.choice(['d', '2', '0.5', '3.125'])})",
                lambda e: f"CAST({e(r.choice(['int', 'dec', 'float']))} AS decimal({r.randint(1, 18)},{r.randint(0, 4)}))",
                lambda e: f"({e('dec')} % {r.choice(['d', '3', '0.07'])})",
            ],
            "str": [
                lambda e: (f"substr({e('str')}, {r.choice(['1', '2', '0', '-1', '-3', '100', 'i % 5'])}"
                           f"{r.choice(['', ', 2', ', 0', ', -1', ', 100'])})"),
                lambda e: f"{r.choice(['lower', 'upper'])}({e('str')})",
                lambda e: f"coalesce({e('str')}, {e('str')})",
                lambda e: f"CASE WHEN {e('bool')} THEN {e('str')} ELSE {e('str')} END",
            ],
            "date": [lambda e: f"coalesce({e('date')}, DATE '2001-01-01')"],
            "bool": [
                self._compare,
                lambda e: f"({e('bool')} {r.choice(['AND', 'OR'])} {e('bool')})",
                lambda e: f"(NOT {e('bool')})",
                lambda e: f"({e('str')} {r.choice(['LIKE', 'NOT LIKE'])} '{r.choice(LIKE_PATTERNS)}')",
                lambda e: f"({e('int')} {r.choice(['IN', 'NOT IN'])} ({', '.join(self._int() for _ in range(r.randint(1, 5)))}))",
                lambda e: f"({e('int')} BETWEEN {self._int()} AND {self._int()})",
                lambda e: f"({e(r.choice(['int', 'str', 'date']))} IS {r.choice(['', 'NOT '])}NULL)",
                lambda e: f"({e('str')} IN ('alpha', 'Beta', '', NULL))",
            ],
        }

    def of(self, kind: str, depth: int = 0) -> str:
        if depth > self.max_depth or self.rnd.random() < 0.3:
            return self.leaves[kind]()
        forms = self.forms[kind]
        form = forms[0] if len(forms) == 1 else self.rnd.choice(forms)  # one form: taken without a draw
        return form(lambda sub: self.of(sub, depth + 1))

    def _int(self) -> str:
        return str(self.rnd.choice(INTS + [self.rnd.randint(-1000, 1000)]))

    def _compare(self, e: Callable[[str], str]) -> str:
        kind = self.rnd.choice(["int", "float", "dec", "str", "date", "int"])
        return f"({e(kind)} {self.rnd.choice(['=', '<>', '<', '<=', '>', '>='])} {e(kind)})"


def duck_sql(sql: str) -> str:
    return sql.replace("float64", "DOUBLE").replace("int64", "BIGINT").replace("int32", "INTEGER")


def _read(name: str, fmt: str) -> dict:
    return {"kind": "read", "name": name, "path": FILES[fmt], "format": fmt, "schema": schema_json()}


def _send(source: str) -> dict:
    return {"kind": "send", "name": "out", "input": source, "transport": "tcp", "host": "127.0.0.1", "port": 0}


def scan_case(seed: int) -> Case:
    """A filter and a projection of 1-3 expressions of any type."""
    rnd = random.Random(seed)
    fmt = rnd.choice(sorted(FILES))
    ex = Expressions(rnd)
    cond = ex.of("bool")
    exprs = [ex.of(rnd.choice(["int", "float", "dec", "str", "date", "bool"])) for _ in range(rnd.randint(1, 3))]
    ops = [_read("r", fmt), {"kind": "filter", "name": "f", "input": "r", "condition": cond},
           {"kind": "project", "name": "p", "input": "f",
            "columns": [{"name": f"c{j}", "expr": e} for j, e in enumerate(exprs)]}, _send("p")]
    return Case("scan", fmt, ops, f"SELECT {', '.join(exprs)} FROM t WHERE {cond}")


def aggregate_case(seed: int) -> Case:
    """A filter, then 0-2 group keys and 1-3 aggregates of any function over expressions."""
    rnd = random.Random(seed)
    fmt = rnd.choice(sorted(FILES))
    ex = Expressions(rnd)
    keys = [ex.of(rnd.choice(["int", "str", "date", "bool", "dec"])) for _ in range(rnd.randint(0, 2))]
    aggs: list[tuple[str, str | None]] = []
    for _ in range(rnd.randint(1, 3)):
        fn = rnd.choice(["sum", "count", "count_star", "min", "max", "avg"])
        kind = rnd.choice(["int", "dec", "float"]) if fn in ("sum", "avg") else rnd.choice(["int", "str", "date", "dec", "float"])
        aggs.append((fn, None if fn == "count_star" else ex.of(kind)))
    cond = ex.of("bool")
    ops = [_read("r", fmt), {"kind": "filter", "name": "f", "input": "r", "condition": cond},
           {"kind": "aggregate", "name": "a", "input": "f",
            "group_by": [{"name": f"k{j}", "expr": k} for j, k in enumerate(keys)],
            "aggregates": [{"name": f"a{j}", "fn": fn, **({"expr": e} if e else {})} for j, (fn, e) in enumerate(aggs)]},
           _send("a")]
    select = keys + ["count(*)" if fn == "count_star" else f"{fn}({e})" for fn, e in aggs]
    sql = f"SELECT {', '.join(select)} FROM t WHERE {cond}" + (f" GROUP BY {', '.join(keys)}" if keys else "")
    return Case("aggregate", fmt, ops, sql)


def join_case(seed: int) -> Case:
    """The table joined with itself on expressions of one type, each side filtered, any join type."""
    rnd = random.Random(seed)
    fmt = rnd.choice(sorted(FILES))
    ex = Expressions(rnd)
    join_type = rnd.choice(["inner", "left_semi", "left_anti", "left_outer"])
    kind = rnd.choice(["int", "str", "date"])
    build_key, probe_key = ex.of(kind), ex.of(kind)
    build_cond, probe_cond = ex.of("bool"), ex.of("bool")
    ops = [_read("rb", fmt), {"kind": "filter", "name": "bf", "input": "rb", "condition": build_cond},
           {"kind": "project", "name": "bp", "input": "bf", "columns": [{"name": "bk", "expr": build_key},
                                                                         {"name": "bs", "expr": "s"}]},
           _read("rp", fmt), {"kind": "filter", "name": "pf", "input": "rp", "condition": probe_cond},
           {"kind": "project", "name": "pp", "input": "pf", "columns": [{"name": "pk", "expr": probe_key},
                                                                         {"name": "pl", "expr": "l"}]},
           {"kind": "join", "name": "j", "build": "bp", "probe": "pp", "build_keys": ["bk"], "probe_keys": ["pk"],
            "type": join_type}, _send("j")]
    b = f"(SELECT {build_key} AS bk, s AS bs FROM t WHERE {build_cond})"
    p = f"(SELECT {probe_key} AS pk, l AS pl FROM t WHERE {probe_cond})"
    sql = {"inner": f"SELECT pk, pl, bk, bs FROM {p} p JOIN {b} b ON pk = bk",
           "left_outer": f"SELECT pk, pl, bk, bs FROM {p} p LEFT JOIN {b} b ON pk = bk",
           "left_semi": f"SELECT pk, pl FROM {p} p WHERE EXISTS (SELECT 1 FROM {b} b WHERE pk = bk)",
           "left_anti": f"SELECT pk, pl FROM {p} p WHERE NOT EXISTS (SELECT 1 FROM {b} b WHERE pk = bk)"}[join_type]
    return Case("join", fmt, ops, sql)
