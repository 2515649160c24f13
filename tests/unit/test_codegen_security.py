"""No text of a request ever appears in generated source (design: "text from a request never
reaches a compiler"): column names, string literals and LIKE patterns become byte arrays, and
identifiers are generated. Hostile names and literals must neither show up nor change the code;
the query must still compile and answer like DuckDB.
"""
from __future__ import annotations

import re

import pytest

from jumpgate.ncas.software.codegen import generate_scan_query

from .test_codegen_harness import compare_with_duckdb, needs_runtime, scan_ops, schema_of, write_jsonl

HOSTILE = [
    "'); system(\"id\"); //",
    "\"; */ #include <stdio.h>",
    "\n#define main exit",
    "??/ trigraph ??= ??' ??(",
    "back\\slash \\x41 \\\\ \\0",
    "*/ /* // comment",
    "%s%n%x printf",
    "tab\tcr\rline\u2028sep",
    "é😀 ÀÉÎ",
]


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def hostile_query(names=HOSTILE):
    schema = schema_of({name: "string" for name in names} | {"id": "int64"})
    cols = [("id", "id")]
    for k, name in enumerate(names):
        cols.append((name + " out", f"{q(name)} = {lit(names[(k + 1) % len(names)])}"))
        cols.append((f"like{k}", f"{q(name)} LIKE {lit('%' + name[:4] + '%')}"))
        cols.append((f"coalesce{k}", f"coalesce({q(name)}, {lit(name)})"))
    filters = [f"{q(names[0])} <> {lit(names[1])} OR {q(names[0])} IS NULL"]
    return schema, filters, cols


def benign_source() -> str:
    """The same query shape with harmless names and literals."""
    schema, filters, cols = hostile_query([f"c{k}" for k in range(len(HOSTILE))])
    return generate_scan_query(*scan_ops(schema, "/data/x.jsonl", filters=filters, columns=cols))


def test_request_text_never_appears_in_source():
    schema, filters, cols = hostile_query()
    ops, layout = scan_ops(schema, "/data/x.jsonl", filters=filters, columns=cols)
    src = generate_scan_query(ops, layout)
    benign = benign_source()
    for h in HOSTILE:
        assert h not in src
        for piece in re.split(r"\s+", h):
            if len(piece) >= 2 and not piece.isalnum():
                # our own code may contain "#include" or "*/"; the request must not add any
                assert src.count(piece) == benign.count(piece), piece
    assert src.isascii(), "non-ASCII request text must be escaped"
    assert "??" not in src, "no trigraph can appear"
    # every backslash starts a \xNN escape
    assert all(re.fullmatch(r"\\x[0-9a-f]{2}", m.group(0)) for m in re.finditer(r"\\.{0,3}", src))
    # every string literal is made only of \xNN escapes or is one of our own fixed texts
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', src):
        body = m.group(1)
        assert re.fullmatch(r"(\\x[0-9a-f]{2})*", body) or body in ("jg.h", "NTF fields are written in host order", ""), body
    # identifiers are generated: no request name shows up as a C identifier either
    assert "system" not in src and "printf" not in src


def test_hostile_source_compiles_warning_free(tmp_path):
    from .test_codegen_golden import compile_seconds

    schema, filters, cols = hostile_query()
    ops, layout = scan_ops(schema, "/data/x.jsonl", filters=filters, columns=cols)
    compile_seconds(generate_scan_query(ops, layout), tmp_path)


@needs_runtime
def test_hostile_names_and_literals_answer_like_duckdb(tmp_path):
    rows = [{"id": 1, **{n: n for n in HOSTILE}}, {"id": 2, **{n: HOSTILE[(k + 1) % len(HOSTILE)] for k, n in enumerate(HOSTILE)}},
            {"id": 3}, {"id": 4, HOSTILE[0]: HOSTILE[1], HOSTILE[3]: "x??/y"}]
    path = write_jsonl(tmp_path / "hostile.jsonl", rows)
    schema, filters, cols = hostile_query()
    n = compare_with_duckdb(path, schema, [c for c in cols if c[0] != "id"], filters)
    assert n == 2  # rows 2 and 4 fail the filter


@pytest.mark.parametrize("name", HOSTILE)
def test_each_hostile_name_alone(name):
    schema = schema_of({name: "string"})
    ops, layout = scan_ops(schema, "/d.jsonl", filters=[f"{q(name)} LIKE {lit(name)}"], columns=[(name, f"upper({q(name)})")])
    src = generate_scan_query(ops, layout)
    assert name not in src and src.isascii() and "??" not in src
