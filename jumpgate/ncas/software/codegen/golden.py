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

from ....contract.ntf import generate_ntf
from ....contract.types import Field, Schema, parse_type
from ....dataflow.plan import FileFormat, Filter, InputRef, NamedExpr, Operation, Project, Read
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


def join_chain(probe_cols: dict[str, str], build_cols: dict[str, str], join: dict,
               steps: list[tuple[str, object]] = ()) -> tuple[list[Operation], Schema, Schema, object]:
    """join(build "b", probe "p") with the request fields in `join` (build_keys, probe_keys, type,
    condition, columns), then filter/project steps as in scan_chain, bound by the real binders.
    Returns (ops, probe schema, build schema, output layout)."""
    from ....dataflow.opbind import RawOp, bind_join
    from ....dataflow.parse import parse_expression
    from ....dataflow.typecheck import bind, bind_named, named_schema

    probe, build = _schema(probe_cols), _schema(build_cols)
    obj = {"kind": "join", "name": "j", "build": "b", "probe": "p", **join}
    j, current = bind_join(RawOp(0, "join", "j", obj), InputRef("b"), InputRef("p"), build, probe)
    ops: list[Operation] = [j]
    for i, (kind, arg) in enumerate(steps):
        name, prev = f"{kind}{i}", InputRef(ops[-1].name)
        if kind == "filter":
            ops.append(Filter(name, prev, bind(parse_expression(arg, name), current, name)))
        else:
            named = bind_named([NamedExpr(n, parse_expression(t, name)) for n, t in arg], current, name)
            ops.append(Project(name, prev, named))
            current = named_schema(named)
    return ops, probe, build, generate_ntf(current)


def _join_case(*args, **kw) -> str:
    from .join import generate_join_query

    return generate_join_query(*join_chain(*args, **kw))


def _shuffle_case(cols: dict[str, str], steps: list[tuple[str, object]], keys: list[str], partitions: int,
                  relay: bool = False) -> str:
    """scan_chain(cols, steps) then a shuffle on `keys`: fused into the scan, or (`relay`) the
    steps and the shuffle over NTF input on the ntf_relay driver (codegen/shuffle.py)."""
    from ....dataflow.parse import parse_expression
    from ....dataflow.plan import Shuffle
    from ....dataflow.typecheck import bind
    from .shuffle import generate_relay_query, generate_scan_shuffle_query

    ops, layout = scan_chain(cols, steps)
    bound = tuple(bind(parse_expression(k, "sh"), layout.schema, "sh") for k in keys)
    ops.append(Shuffle("sh", InputRef(ops[-1].name), bound, partitions))
    if not relay:
        return generate_scan_shuffle_query(ops, layout)
    read = ops[0]
    return generate_relay_query(ops[1:], read.schema, generate_ntf(read.schema), layout)


def _agg_case(cols: dict[str, str], steps: list[tuple[str, object]], agg: dict, after: list[tuple[str, object]] = (),
              ntf: bool = False) -> str:
    """scan_chain(cols, steps), then an aggregate (`agg` holds the request's group_by, aggregates
    and mode, bound by the real binder), then filter/project steps over its groups: fused into
    the scan, or (`ntf`) the aggregate and what follows over NTF input (codegen/aggregate.py)."""
    from ....dataflow.aggregates import bind_aggregate
    from ....dataflow.opbind import RawOp
    from ....dataflow.parse import parse_expression
    from ....dataflow.typecheck import bind, bind_named, named_schema
    from .aggregate import generate_aggregate_query

    ops, layout = scan_chain(cols, steps)
    a, current = bind_aggregate(RawOp(0, "aggregate", "a", {"kind": "aggregate", "name": "a", **agg}),
                                InputRef(ops[-1].name), layout.schema)
    ops.append(a)
    for i, (kind, arg) in enumerate(after):
        name, prev = f"{kind}{i}", InputRef(ops[-1].name)
        if kind == "filter":
            ops.append(Filter(name, prev, bind(parse_expression(arg, name), current, name)))
        else:
            named = bind_named([NamedExpr(n, parse_expression(t, name)) for n, t in arg], current, name)
            ops.append(Project(name, prev, named))
            current = named_schema(named)
    if ntf:
        return generate_aggregate_query(ops[len(ops) - len(after) - 1:], generate_ntf(current), layout.schema)
    return generate_aggregate_query(ops, generate_ntf(current))


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
    # 20 constants and more: sorted arrays searched by binary search (codegen/inset.py)
    "in_sorted_arrays": lambda: scan_chain(ALL_TYPES, [
        ("filter", "l IN (" + ", ".join(str(v) for v in range(40, -40, -4)) + ", NULL)"),
        ("project", [("id", "id"),
                     ("dec", "d IN (" + ", ".join(f"{v}.5" for v in range(20)) + ", 1.255, 7)"),
                     ("str", "s NOT IN (" + ", ".join(f"'w{v}'" for v in range(20, 0, -1)) + ", '', 'it''s')"),
                     ("flt", "f IN (" + ", ".join(f"{v}.25" for v in range(-10, 10)) + ", -0.0, 0.0, 1e300)"),
                     ("day", "dt IN (" + ", ".join(f"DATE '2001-01-{v:02d}'" for v in range(1, 21)) + ", DATE '1969-12-31')"),
                     ("mix", "i IN (" + ", ".join(str(v) for v in range(20)) + ", l, i * 2)")]),
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
    # hash join (codegen/join.py): multi-column keys of mixed types with casts and a computed key,
    # an extra condition over both sides, then a fused filter and projection
    "join_inner_multikey_fused": lambda: _join_case(
        {"id": "int64", "k": "int32", "s": "string", "d": "decimal(10,2)", "dt": "date"},
        {"bk": "int64", "bs": "string", "bd": "decimal(12,3)", "w": "float64", "bdt": "date"},
        {"build_keys": ["bk", "lower(bs)", "bd"], "probe_keys": ["k", "s", "d"], "condition": "dt > bdt"},
        [("filter", "w > 0"), ("project", [("id", "id"), ("w2", "w * 2"), ("bs", "upper(bs)")])]),
    "join_left_outer_hostile": lambda: _join_case(
        {HOSTILE_NAMES[0]: "string", "id": "int64"}, {HOSTILE_NAMES[1]: "string", HOSTILE_NAMES[2]: "int64"},
        {"build_keys": [_q(HOSTILE_NAMES[1])], "probe_keys": [_q(HOSTILE_NAMES[0])], "type": "left_outer",
         "condition": f"{_q(HOSTILE_NAMES[2])} <> 3 OR {_q(HOSTILE_NAMES[0])} LIKE '%*/%'",
         "columns": [{"name": HOSTILE_NAMES[3], "expr": f"coalesce({_q(HOSTILE_NAMES[1])}, '\"); x(); //')"},
                     {"name": "id", "expr": "id"}]}),
    "join_left_anti_float_key": lambda: _join_case(
        {"x": "float64", "b": "boolean"}, {"y": "float64", "z": "int32"},
        {"build_keys": ["y", "z > 0"], "probe_keys": ["x", "b"], "type": "left_anti"}),
    # shuffles (codegen/shuffle.py): fused into a scan, and over NTF input forwarding the raw
    # tuple (filters only) or re-encoding it (after a projection)
    "shuffle_scan_every_key_type": lambda: _shuffle_case(
        ALL_TYPES, [("filter", "l > 0")], ["lower(s)", "i", "l", "f", "d", "dt", "b", "e * 2"], 4),
    "shuffle_relay_forward": lambda: _shuffle_case(ALL_TYPES, [("filter", "s IS NOT NULL")], ["s", "dt"], 3,
                                                   relay=True),
    "shuffle_relay_project_hostile": lambda: _shuffle_case(
        {**{n: "string" for n in HOSTILE_NAMES}, "id": "int64"},
        [("project", [(HOSTILE_NAMES[1], f"coalesce({_q(HOSTILE_NAMES[0])}, '*/ ??/')"), ("id", "id")])],
        [_q(HOSTILE_NAMES[1]), "id % 7"], 2, relay=True),
    # aggregations (codegen/aggregate.py): a partial aggregation fused into a scan after a filter,
    # keys of several types, every function; a final aggregation over NTF with a HAVING filter and
    # a projection of its groups; a global aggregation with hostile names
    "agg_scan_partial": lambda: _agg_case(ALL_TYPES, [("filter", "l > 10")], {
        "mode": "partial", "group_by": [{"name": "s", "expr": "s"}, {"name": "y", "expr": "year(dt)"},
                                        {"name": "f", "expr": "f"}],
        "aggregates": [{"name": "n", "fn": "count_star"}, {"name": "c", "fn": "count", "expr": "u"},
                       {"name": "sd", "fn": "sum", "expr": "d"}, {"name": "sf", "fn": "sum", "expr": "f * 2"},
                       {"name": "mn", "fn": "min", "expr": "u"}, {"name": "mx", "fn": "max", "expr": "f"},
                       {"name": "al", "fn": "avg", "expr": "l"}]}),
    "agg_final_having": lambda: _agg_case(
        {"k": "int64", "b": "boolean", "n": "int64", "sd": "decimal(18,2)", "mx": "string", "av__sum": "float64",
         "av__count": "int64"}, [],
        {"mode": "final", "group_by": [{"name": "k"}, {"name": "b"}],
         "aggregates": [{"name": "n", "fn": "count_star"}, {"name": "sd", "fn": "sum"}, {"name": "mx", "fn": "max"},
                        {"name": "av", "fn": "avg"}]},
        [("filter", "n > 10 AND sd IS NOT NULL"), ("project", [("k", "k"), ("mean", "sd / n"), ("av", "av"),
                                                              ("mx", "upper(mx)")])], ntf=True),
    "agg_global_hostile": lambda: _agg_case({**{n: "string" for n in HOSTILE_NAMES}, "id": "int64"}, [], {
        "group_by": [], "aggregates": [{"name": HOSTILE_NAMES[0], "fn": "max", "expr": _q(HOSTILE_NAMES[1])},
                                       {"name": HOSTILE_NAMES[2], "fn": "sum", "expr": "id"}]},
        [("filter", f"{_q(HOSTILE_NAMES[0])} <> '*/ ??/'")]),
}


def render_case(name: str) -> str:
    case = CASES[name]()
    if isinstance(case, str):  # cases of other NCA kinds render themselves
        return case
    ops, layout = case
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
