"""Comparing what arrived with DuckDB's answer, inside DuckDB (fast for a million rows).

Column names and types must match exactly (Arrow types, with string flavours unified). Values:
float64 columns within a relative tolerance, everything else exactly, NULL equal to NULL. Row
order is ignored unless the case is ordered: both sides are sorted by every column (exact columns
first, then float columns) and compared row by row; without float columns the comparison is a
multiset one (EXCEPT ALL both ways).
"""
from __future__ import annotations

import pyarrow as pa

SHOW_ROWS = 5


def _norm(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t) or t == getattr(pa, "string_view", lambda: None)():
        return pa.string()
    return t


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def compare_tables(con, got: pa.Table, want: pa.Table, *, ordered: bool = False, rtol: float = 1e-9,
                   atol: float = 1e-9, check_types: bool = True) -> str | None:
    """None when `got` matches `want`, else what differs (with a few example rows)."""
    if got.column_names != want.column_names:
        return f"columns {got.column_names}, expected {want.column_names}"
    if check_types:
        wrong = [f"{n}: {_norm(g.type)} (expected {_norm(w.type)})"
                 for n, g, w in zip(got.column_names, got.schema, want.schema) if _norm(g.type) != _norm(w.type)]
        if wrong:
            return "column types differ: " + "; ".join(wrong)
    if got.num_rows != want.num_rows:
        return f"{got.num_rows} rows, expected {want.num_rows}" + _sample(con, got, want)
    floats = [n for n, f in zip(want.column_names, want.schema) if pa.types.is_floating(f.type)]
    if not floats and not ordered:
        return _multiset(con, got, want)
    return _rowwise(con, got, want, floats, ordered, rtol, atol)


def _registered(con, **tables: pa.Table):
    class _Reg:
        def __enter__(self):
            for k, v in tables.items():
                con.register(k, v)

        def __exit__(self, *exc):
            for k in tables:
                con.unregister(k)
    return _Reg()


def _multiset(con, got: pa.Table, want: pa.Table) -> str | None:
    """Count each distinct row on both sides in one hash aggregation (several times faster than
    EXCEPT ALL both ways); rows whose counts differ are the difference."""
    cols = ", ".join(_q(n) for n in want.column_names)
    sql = (f"SELECT {cols}, sum(jg_side) AS jg_diff FROM (SELECT *, 1 AS jg_side FROM jg_got UNION ALL "
           f"SELECT *, -1 AS jg_side FROM jg_want) GROUP BY {cols} HAVING sum(jg_side) <> 0 "
           f"ORDER BY jg_diff LIMIT {2 * SHOW_ROWS}")
    with _registered(con, jg_got=got, jg_want=want):
        bad = con.execute(sql).fetchall()
    if not bad:
        return None
    lost = [r[:-1] if r[-1] == -1 else (*r[:-1], f"x{-r[-1]}") for r in bad if r[-1] < 0][:SHOW_ROWS]
    extra = [r[:-1] if r[-1] == 1 else (*r[:-1], f"x{r[-1]}") for r in bad if r[-1] > 0][:SHOW_ROWS]
    return f"rows differ: unexpected {extra}; missing {lost}"


def _rowwise(con, got: pa.Table, want: pa.Table, floats: list[str], ordered: bool, rtol: float,
             atol: float) -> str | None:
    names = want.column_names
    exact = [n for n in names if n not in floats]
    if ordered:
        got = got.append_column("jg_rn", pa.array(range(got.num_rows), pa.int64()))
        want = want.append_column("jg_rn", pa.array(range(want.num_rows), pa.int64()))
        number = "SELECT * FROM {t}"
    else:
        order = ", ".join(f"{_q(n)} NULLS FIRST" for n in exact + floats)
        number = f"SELECT *, row_number() OVER (ORDER BY {order}) AS jg_rn FROM {{t}}"
    tests = [f"g.{_q(n)} IS DISTINCT FROM w.{_q(n)}" for n in exact]
    for n in floats:
        g, w = f"g.{_q(n)}", f"w.{_q(n)}"
        same = (f"(({g} IS NULL AND {w} IS NULL) OR (isnan({g}) AND isnan({w})) OR {g} = {w} OR "
                f"abs({g} - {w}) <= {rtol!r} * greatest(abs({g}), abs({w})) + {atol!r})")
        tests.append(f"NOT coalesce({same}, false)")
    sql = (f"WITH g AS ({number.format(t='jg_got')}), w AS ({number.format(t='jg_want')}) "
           f"SELECT g.jg_rn, {', '.join(f'g.{_q(n)}' for n in names)}, '|', {', '.join(f'w.{_q(n)}' for n in names)} "
           f"FROM g JOIN w USING (jg_rn) WHERE {' OR '.join(tests)} ORDER BY g.jg_rn LIMIT {SHOW_ROWS}")
    with _registered(con, jg_got=got, jg_want=want):
        bad = con.execute(sql).fetchall()
    if not bad:
        return None
    k = len(names)
    lines = [f"row {r[0]}: got {r[1:1 + k]}, expected {r[2 + k:]}" for r in bad]
    how = "in order" if ordered else "after sorting both sides"
    return f"values differ ({how}; float64 within rtol {rtol:g}): " + "; ".join(lines)


def _sample(con, got: pa.Table, want: pa.Table) -> str:
    """A few rows on each side that the other lacks, to make a count mismatch readable."""
    try:
        diff = _multiset(con, got, want)
    except Exception:  # the sample is only a hint; the count mismatch is the error
        return ""
    return f"; {diff}" if diff else ""


def disjoint_keys(con, tables: dict[str, pa.Table], keys: list[str]) -> str | None:
    """None when no value of `keys` occurs in two of `tables` (a shuffle's outputs), else which."""
    names = list(tables)
    cols = ", ".join(_q(k) for k in keys)
    parts = " UNION ALL ".join(f"SELECT DISTINCT {cols}, {i} AS jg_out FROM jg_t{i}" for i in range(len(names)))
    sql = (f"SELECT {cols}, list(jg_out ORDER BY jg_out) FROM ({parts}) GROUP BY ALL "
           f"HAVING count(*) > 1 LIMIT {SHOW_ROWS}")
    with _registered(con, **{f"jg_t{i}": tables[n] for i, n in enumerate(names)}):
        bad = con.execute(sql).fetchall()
    if not bad:
        return None
    shown = "; ".join(f"{r[:-1]} in {[names[i] for i in r[-1]]}" for r in bad)
    return f"rows with equal keys ({', '.join(keys)}) went to different outputs: {shown}"
