"""Golden files of generated C: a handful of representative scan queries, kept in
tests/unit/golden/<case>.c and compared byte for byte by tests/unit/test_codegen_golden.py.

    python -m jumpgate.ncas.software.codegen.golden --update   # rewrite every golden file
    python -m jumpgate.ncas.software.codegen.golden --check    # exit 1 and list the stale ones

Review a diff of these files like a diff of code: it is the code every query of that shape runs.
Cases are SQL text bound by the real parser and binder, so a binder change that alters typed trees
shows up here too.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from ....compiler.ntf import generate_ntf
from ....dataflow.plan import FileFormat, Filter, InputRef, NamedExpr, Operation, Project, Read
from ....dataflow.types import Field, Schema, parse_type
from .scan import generate_scan_query

GOLDEN_DIR = Path(__file__).resolve().parents[4] / "tests" / "unit" / "golden"

ALL_TYPES = {"id": "int64", "i": "int32", "l": "int64", "f": "float64", "d": "decimal(10,2)",
             "e": "decimal(18,4)", "s": "string", "u": "string", "dt": "date", "b": "boolean"}
# Column names and literals that would break out of a C string, comment or line if pasted.
HOSTILE_NAMES = ["'); system(\"id\"); //", "\"; */ #include <stdlib.h>", "\n#define x ??/", "back\\slash ??= é"]


def _schema(cols: dict[str, str]) -> Schema:
    return Schema(tuple(Field(n, parse_type(t)) for n, t in cols.items()))


def scan_chain(cols: dict[str, str], steps: list[tuple[str, object]]) -> tuple[list[Operation], object]:
    """read(cols) then ("filter", text) / ("project", [(name, text)]) steps, bound for real."""
    from ....dataflow.parse import parse_expression
    from ....dataflow.typecheck import bind, bind_named, named_schema

    schema = _schema(cols)
    ops: list[Operation] = [Read("r", ("/data/t.jsonl",), FileFormat.JSON, schema)]
    current = schema
    for i, (kind, arg) in enumerate(steps):
        name, prev = f"{kind}{i}", InputRef(ops[-1].name)
        if kind == "filter":
            ops.append(Filter(name, prev, bind(parse_expression(arg, name), current, name)))
        else:
            named = bind_named([NamedExpr(n, parse_expression(t, name)) for n, t in arg], current, name)
            ops.append(Project(name, prev, named))
            current = named_schema(named)
    return ops, generate_ntf(current)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


CASES: dict[str, Callable[[], tuple]] = {
    "passthrough_all_types": lambda: scan_chain(ALL_TYPES, []),
    "filter_project": lambda: scan_chain(ALL_TYPES, [
        ("filter", "l > 10 AND s LIKE 'ab%'"),
        ("project", [("l1", "l + 1"), ("s", "s"), ("dd", "d * d"), ("de", "d + e"), ("ratio", "f / l")]),
    ]),
    "logic_case_in": lambda: scan_chain(ALL_TYPES, [
        ("project", [("id", "id"),
                     ("band", "CASE WHEN l < 0 THEN 'neg' WHEN l = 0 THEN 'zero' ELSE 'pos' END"),
                     ("anyof", "l IN (1, 2, NULL) OR b"),
                     ("notin", "s NOT IN ('a', 'b')"),
                     ("isnull", "d IS NULL AND NOT b"),
                     ("first", "coalesce(s, u, 'none')"),
                     ("safe", "CASE WHEN l <> 0 THEN 100 % l END")]),
    ]),
    "casts": lambda: scan_chain(ALL_TYPES, [
        ("project", [("a", "CAST(f AS int64)"), ("b2", "CAST(d AS int32)"), ("c", "CAST(s AS decimal(12,3))"),
                     ("d2", "CAST(e AS decimal(10,1))"), ("e2", "CAST(l AS string)"), ("f2", "CAST(f AS string)"),
                     ("g", "CAST(u AS date)"), ("h", "CAST(s AS boolean)"), ("k", "CAST(d AS float64)"),
                     ("m", "CAST(f AS decimal(10,2))"), ("n", "CAST(dt AS string)")]),
    ]),
    "strings_dates": lambda: scan_chain(ALL_TYPES, [
        ("filter", "length(u) > 2"),
        ("project", [("up", "upper(u)"), ("lo", "lower(s)"), ("mid", "substr(u, 2, 3)"), ("tail", "substr(s, -2)"),
                     ("y", "year(dt)"), ("m", "month(dt)"), ("dd", "day(dt)"), ("old", "dt < DATE '1970-01-01'"),
                     ("cmp", "s < u"), ("pat", "u LIKE '_é%'")]),
    ]),
    "nested_projects_cse": lambda: scan_chain(ALL_TYPES, [
        ("project", [("x", "l * 2 + i"), ("y", "upper(s)"), ("unused", "l % 0"), ("dd", "d")]),
        ("filter", "x > 0"),
        ("project", [("x2", "x * x"), ("y", "y"), ("both", "CASE WHEN x > 5 THEN x ELSE dd END")]),
    ]),
    "hostile_names": lambda: scan_chain({**{n: "string" for n in HOSTILE_NAMES}, "id": "int64"}, [
        ("filter", f"{_q(HOSTILE_NAMES[0])} = '\"); system(\"id\"); /* ''quoted'' */'"),
        ("project", [(HOSTILE_NAMES[1], f"{_q(HOSTILE_NAMES[2])} LIKE '%??/%'"),
                     ("n", f"length({_q(HOSTILE_NAMES[3])})"), ("id", "id")]),
    ]),
}


def render_case(name: str) -> str:
    ops, layout = CASES[name]()
    return generate_scan_query(ops, layout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--update", action="store_true", help="rewrite the golden files")
    mode.add_argument("--check", action="store_true", help="exit 1 when a golden file is stale")
    args = ap.parse_args(argv)
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    stale = []
    for name in CASES:
        path = GOLDEN_DIR / f"{name}.c"
        text = render_case(name)
        if args.update:
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                print(f"updated {path}")
        elif not path.exists() or path.read_text() != text:
            stale.append(path)
    known = {f"{n}.c" for n in CASES}
    for extra in sorted(p for p in GOLDEN_DIR.glob("*.c") if p.name not in known):
        if args.update:
            extra.unlink()
            print(f"removed {extra}")
        else:
            stale.append(extra)
    for p in stale:
        print(f"stale: {p}")
    if stale:
        print("run: python -m jumpgate.ncas.software.codegen.golden --update")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
