"""A mechanical translation of a dataflow request into DuckDB SQL, to check the suite itself: each
request's hand-written `expected_sql` must agree with what this translation answers, so a mistake
in either shows up before any NCA is blamed for it.

One CTE per operation. A shuffle's first output carries all of its input and the others nothing:
the union of what follows the outputs is then the answer (the partitioned plans in the suite are
correct for any partitioning that keeps equal keys together). Join sides must have distinct
column names (the requests rename columns where a table meets itself). Types are DuckDB's, so
callers compare values, not types.
"""
from __future__ import annotations


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _ref(ref: str, shuffles: set[str]) -> str:
    name, _, rest = ref.partition("[")
    if name in shuffles:
        index = int(rest.rstrip("]"))
        return _q(name) if index == 0 else f"(SELECT * FROM {_q(name)} WHERE false)"
    return _q(name)


def _named(items: list[dict]) -> str:
    return ", ".join(f"{item.get('expr') or _q(item['name'])} AS {_q(item['name'])}" for item in items)


def _read(op: dict) -> str:
    path = op["path"] if isinstance(op["path"], str) else op["path"][0]
    bench, table = path.split("/")[:2]
    return f"SELECT {', '.join(_q(c['name']) for c in op['schema'])} FROM {bench}.{_q(table)}"


def _join(op: dict, shuffles: set[str]) -> str:
    probe, build = _ref(op["probe"], shuffles), _ref(op["build"], shuffles)
    on = [f"({p}) = ({b})" for p, b in zip(op["probe_keys"], op["build_keys"])]
    if op.get("condition"):
        on.append(f"({op['condition']})")
    cols = _named(op["columns"]) if op.get("columns") else "*"
    jtype = op.get("type") or "inner"
    if jtype in ("left_semi", "left_anti"):
        neg = "NOT " if jtype == "left_anti" else ""
        return f"SELECT {cols} FROM {probe} WHERE {neg}EXISTS (SELECT 1 FROM {build} WHERE {' AND '.join(on)})"
    how = "LEFT JOIN" if jtype == "left_outer" else "JOIN"
    return f"SELECT {cols} FROM {probe} {how} {build} ON {' AND '.join(on)}"


def _aggregate(op: dict, shuffles: set[str]) -> str:
    mode = op.get("mode") or "complete"
    groups = op.get("group_by") or []
    items = [f"{g.get('expr') or _q(g['name'])} AS {_q(g['name'])}" for g in groups]
    for a in op.get("aggregates") or []:
        fn, name, expr = a["fn"], a["name"], a.get("expr")
        if mode == "final":
            merge = {"sum": f"sum({_q(name)})", "min": f"min({_q(name)})", "max": f"max({_q(name)})",
                     "count": f"sum({_q(name)})", "count_star": f"sum({_q(name)})",
                     "avg": f"sum({_q(name + '__sum')}) / sum({_q(name + '__count')})"}[fn]
            items.append(f"{merge} AS {_q(name)}")
        elif fn == "avg" and mode == "partial":
            items += [f"sum({expr}) AS {_q(name + '__sum')}", f"count({expr}) AS {_q(name + '__count')}"]
        else:
            call = "count(*)" if fn == "count_star" else f"{fn}({expr})"
            items.append(f"{call} AS {_q(name)}")
    group = f" GROUP BY {', '.join(str(i + 1) for i in range(len(groups)))}" if groups else ""
    return f"SELECT {', '.join(items)} FROM {_ref(op['input'], shuffles)}{group}"


def translate(request: dict) -> dict[str, str]:
    """DuckDB SQL answering each send of `request`, by send name."""
    ops = request["operations"]
    shuffles = {op["name"] for op in ops if op["kind"] == "shuffle"}
    ctes, sends = [], {}
    for op in _topological(ops):
        kind = op["kind"]
        if kind == "send":
            sends[op["name"]] = _ref(op["input"], shuffles)
            continue
        if kind == "read":
            body = _read(op)
        elif kind == "filter":
            body = f"SELECT * FROM {_ref(op['input'], shuffles)} WHERE {op['condition']}"
        elif kind == "project":
            body = f"SELECT {_named(op['columns'])} FROM {_ref(op['input'], shuffles)}"
        elif kind == "join":
            body = _join(op, shuffles)
        elif kind == "aggregate":
            body = _aggregate(op, shuffles)
        elif kind == "shuffle":
            body = f"SELECT * FROM {_ref(op['input'], shuffles)}"
        else:
            raise ValueError(f"unknown operation kind {kind!r}")
        ctes.append(f"{_q(op['name'])} AS ({body})")
    prefix = "WITH " + ",\n".join(ctes) + "\n"
    return {name: f"{prefix}SELECT * FROM {src}" for name, src in sends.items()}


def _topological(ops: list[dict]) -> list[dict]:
    by_name = {op["name"]: op for op in ops}
    done: set[str] = set()
    out: list[dict] = []

    def visit(op: dict) -> None:
        if op["name"] in done:
            return
        for field in ("input", "build", "probe"):
            if isinstance(op.get(field), str):
                visit(by_name[op[field].split("[")[0]])
        done.add(op["name"])
        out.append(op)

    for op in ops:
        visit(op)
    return out


def check_case(case, oracle, data_root) -> list[str]:
    """What is wrong with a case itself: its request must be valid, its expected SQL must give the
    columns and types Jumpgate's type checker gives the sends, and it must agree with `translate`.
    `oracle` is a `jumpgate.conformance.Oracle` over `data_root`."""
    import pyarrow as pa

    from jumpgate.client.ntf import arrow_type
    from jumpgate.conformance.compare import compare_tables
    from jumpgate.dataflow.request import parse_request

    problems = []
    plan = parse_request(case.runnable_request(port=9), data_root)  # any valid port: nothing runs
    sends = {s.name: plan.schemas[s.input.op] for s in plan.sends}
    oracle.load(case.tables)
    con = oracle.con
    reference = translate(case.request)
    for check in case.checks:
        want = con.sql(check.sql).to_arrow_table()
        if want.num_rows == 0:
            problems.append(f"{'+'.join(check.sends)}: expected_sql answers no rows (a weak test)")
        if not check.got_sql:
            schema = sends[check.sends[0]]
            types = [(f.name, arrow_type(f.type)) for f in schema.fields]
            have = list(zip(want.column_names, [f.type for f in want.schema]))
            if types != have:
                problems.append(f"{check.sends[0]}: Jumpgate types {types}, expected_sql gives {have}")
        parts = [con.sql(reference[s]).to_arrow_table() for s in check.sends]
        ref = pa.concat_tables(parts, promote_options="permissive")
        if check.got_sql:
            con.register("got", ref)
            try:
                ref = con.sql(check.got_sql).to_arrow_table()
            finally:
                con.unregister("got")
        diff = compare_tables(con, ref, want, check_types=False, rtol=case.float_rtol, atol=case.float_atol)
        if diff:
            problems.append(f"{'+'.join(check.sends)}: the mechanical translation disagrees: {diff}")
    return problems
