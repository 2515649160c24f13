"""Helpers of the codegen tests (no tests here): bind SQL text into a scan chain, generate and build
the NCA, run it through the process protocol (the runtime tests' `run_scan`), decode its NTF output
by its layout with a small struct-based decoder, and ask DuckDB the same question over the file.
"""
from __future__ import annotations

import atexit
import decimal
import functools
import json
import math
import re
import shutil
import struct
import tempfile
from pathlib import Path

import pytest

from jumpgate.contract.ntf import NtfLayout, generate_ntf
from jumpgate.contract.types import Field, Kind, Schema, parse_type
from jumpgate.dataflow.plan import FileFormat, Filter, InputRef, NamedExpr, Project, Read
from jumpgate.ncas.software.codegen import generate_scan_query
from jumpgate.ncas.software.codegen.messages import message_params

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "ncas" / "runtime"


# ------------------------------------------------------------------ building queries


def schema_of(cols: dict[str, str]) -> Schema:
    return Schema(tuple(Field(n, parse_type(t)) for n, t in cols.items()))


def bind_text(text: str, schema: Schema):
    from jumpgate.dataflow.parse import parse_expression
    from jumpgate.dataflow.typecheck import bind

    return bind(parse_expression(text, "test"), schema, "test")


def scan_ops(schema: Schema, path: Path | str, filters=(), columns=None, projects=None, steps=None):
    """read -> filters -> project(columns) (or several projects), or read -> any `steps`
    [("filter", text) | ("project", [(name, text)])]; returns (ops, layout)."""
    from jumpgate.dataflow.typecheck import bind_named, named_schema

    if steps is None:
        steps = [("filter", f) for f in filters]
        steps += [("project", cols) for cols in (projects or ([columns] if columns is not None else []))]
    ops, current = [Read("r", (str(path),), FileFormat.JSON, schema)], schema
    for i, (kind, arg) in enumerate(steps):
        name, prev = f"{kind[0]}{i}", InputRef(ops[-1].name)
        if kind == "filter":
            ops.append(Filter(name, prev, bind_text(arg, current)))
        else:
            cols = list(arg.items()) if isinstance(arg, dict) else arg
            named = bind_named([NamedExpr(n, _parsed(e)) for n, e in cols], current, name)
            ops.append(Project(name, prev, named))
            current = named_schema(named)
    return ops, generate_ntf(current)


def _parsed(text: str):
    from jumpgate.dataflow.parse import parse_expression

    return parse_expression(text, "test")


# ------------------------------------------------------------------ building and running NCAs


def runtime_missing() -> str | None:
    """Why NCAs cannot be built here, or None."""
    if not (RUNTIME / "Makefile").is_file():
        return "ncas/runtime/Makefile does not exist yet"
    try:
        import jumpgate.ncas.software.build  # noqa: F401
    except ImportError as e:
        return f"jumpgate.ncas.software.build is not importable: {e}"
    if shutil.which("g++") is None or shutil.which("make") is None:
        return "no C/C++ toolchain"
    return None


needs_runtime = pytest.mark.skipif(runtime_missing() is not None, reason=str(runtime_missing()))


@functools.cache
def cache_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="jg-codegen-test-"))
    atexit.register(shutil.rmtree, path, True)
    return path


def build(source: str) -> Path:
    from jumpgate.ncas.software.build import build_nca

    return Path(build_nca(source, "scan_json", cache_dir()).path)


def decode(t: bytes, layout: NtfLayout) -> tuple:
    """Contract §2: null vector, fixed fields at their offsets, strings in the variable part."""
    assert len(t) >= layout.fixed_size
    row, var_end = [], layout.fixed_size
    for f in layout.fields:
        raw = t[f.offset:f.offset + f.size]
        if t[f.null_bit // 8] >> (f.null_bit % 8) & 1:
            assert raw == bytes(f.size), "a NULL field's bytes must be zero"
            row.append(None)
            continue
        k = f.type.kind
        if k is Kind.BOOLEAN:
            assert raw[0] in (0, 1)
            row.append(bool(raw[0]))
        elif k in (Kind.INT32, Kind.DATE):
            row.append(struct.unpack("<i", raw)[0])
        elif k is Kind.INT64:
            row.append(struct.unpack("<q", raw)[0])
        elif k is Kind.DECIMAL and f.type.is_wide_decimal:  # 16 bytes, two's complement
            row.append(decimal.Decimal(int.from_bytes(raw, "little", signed=True)).scaleb(
                -f.type.scale, decimal.Context(prec=40)))  # the default 28 digits would round
        elif k is Kind.DECIMAL:
            row.append(decimal.Decimal(struct.unpack("<q", raw)[0]).scaleb(-f.type.scale))
        elif k is Kind.FLOAT64:
            row.append(struct.unpack("<d", raw)[0])
        else:
            off, n = struct.unpack("<II", raw)
            assert off == var_end, "strings follow each other in field order"
            var_end += n
            row.append(t[off:off + n].decode("utf-8"))
    assert var_end == len(t), "tuple length is fixed_size plus the string bytes"
    return tuple(row)


def run_query(ops, layout: NtfLayout, files: list[Path], threads: int = 1) -> tuple[list[tuple] | None, dict | None]:
    """Generate, build and run the scan; (decoded rows, None) or (None, the error event)."""
    from .fixtures.runtime_harness import run_scan

    source = generate_scan_query(ops, layout)  # its error messages go with the configuration, as ProcessNca's
    event, streams, _ = run_scan(build(source), files, threads=threads, params=message_params(source))
    if event["event"] != "done":
        return None, event
    tuples = [t for s in streams for t in s.tuples]
    assert len(tuples) == event["stats"]["tuples_out"], event
    return [decode(t, layout) for t in tuples], None


# ------------------------------------------------------------------ DuckDB, the oracle

_DUCK_TYPES = {"boolean": "BOOLEAN", "int32": "INTEGER", "int64": "BIGINT", "float64": "DOUBLE",
               "string": "VARCHAR", "date": "DATE"}


def duck_type(t: str) -> str:
    return _DUCK_TYPES.get(t.lower(), t.upper())


def duck_sql(text: str) -> str:
    """Our expression text as DuckDB SQL: only CAST type names differ."""
    return re.sub(r"\bAS\s+(int32|int64|float64|string)\b", lambda m: "AS " + duck_type(m.group(1)), text,
                  flags=re.IGNORECASE)


def duck_source(path: Path, schema: Schema) -> str:
    """The file as a DuckDB relation. int32 columns are read as BIGINT: our integer arithmetic is
    64-bit (contract §1), DuckDB's INTEGER arithmetic is 32-bit."""
    def typ(t) -> str:
        return "BIGINT" if t.kind is Kind.INT32 else duck_type(str(t))

    cols = ", ".join(f"'{_sql_str(f.name)}': '{typ(f.type)}'" for f in schema.fields)
    return f"read_json('{path}', format='newline_delimited', columns={{{cols}}})"


def _sql_str(text: str) -> str:
    return text.replace("'", "''")


def duck_rows(path: Path, schema: Schema, columns: list[tuple[str, str]], filters=(), types=None) -> list[tuple]:
    """SELECT the expressions (dates as days since 1970, like NTF) FROM the file WHERE filters."""
    import duckdb

    sel = []
    for i, (_, text) in enumerate(columns):
        e = f"({duck_sql(text)})"
        if types is not None and types[i].kind is Kind.DATE:
            e = f"({e} - DATE '1970-01-01')"
        sel.append(e)
    where = " AND ".join(f"({duck_sql(f)})" for f in filters) or "TRUE"
    sql = f"SELECT {', '.join(sel)} FROM {duck_source(path, schema)} WHERE {where}"
    con = duckdb.connect()
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def same_value(got, want) -> bool:
    if got is None or want is None:
        return got is None and want is None
    if isinstance(want, float) or isinstance(got, float):
        g, w = float(got), float(want)
        if math.isnan(g) or math.isnan(w):
            return math.isnan(g) and math.isnan(w)
        return g == w and math.copysign(1, g) == math.copysign(1, w) if g == 0 else g == w
    if isinstance(want, decimal.Decimal) or isinstance(got, decimal.Decimal):
        return decimal.Decimal(got) == decimal.Decimal(want)
    return got == want


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def compare_with_duckdb(path: Path, schema: Schema, columns: list[tuple[str, str]], filters=(),
                        key: str = "id") -> int:
    """Run `SELECT key, columns FROM file WHERE filters` on the NCA and in DuckDB and assert the
    same rows (ordered by key). Returns the number of rows compared."""
    cols = [(key, key)] + list(columns)
    ops, layout = scan_ops(schema, path, filters=filters, columns=cols)
    got, err = run_query(ops, layout, [path])
    assert err is None, f"NCA failed: {err}"
    want = duck_rows(path, schema, cols, filters, [f.type for f in layout.fields])
    got, want = sorted(got, key=lambda r: r[0]), sorted(want, key=lambda r: r[0])
    assert [r[0] for r in got] == [r[0] for r in want], "different rows pass the filters"
    problems = []
    for g, w in zip(got, want):
        for (name, text), gv, wv in zip(cols[1:], g[1:], w[1:]):
            if not same_value(gv, wv):
                problems.append(f"{name} = {text!r} at {key}={g[0]}: NCA {gv!r}, DuckDB {wv!r}")
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems[:40])
    return len(got)


def expect_error(path: Path, schema: Schema, columns=(), filters=(), contains: str = "") -> dict:
    cols = list(columns) or [("id", "id")]
    ops, layout = scan_ops(schema, path, filters=filters, columns=cols)
    rows, err = run_query(ops, layout, [path])
    assert err is not None, f"expected a data error ({contains}), got rows {rows}"
    assert contains.lower() in err.get("message", "").lower(), err
    return err
