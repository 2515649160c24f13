"""What the pages show of a job, made from what the REST API serves: its pipeline's JSON (the
compile answer), its status and timeline; and, for a job this server holds (not one read back from
the job record), the typed request and the pipeline it was compiled to, for what the JSON does not
carry: each operation's expressions, the columns crossing each edge, each NCA's threads.

Plain functions of plain values, so that the pages stay templates and these are tested alone.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

from ..dataflow.expr import Column, Expr
from ..dataflow.plan import (
    AggFn,
    Aggregate,
    Filter,
    Join,
    LogicalPlan,
    NamedExpr,
    Project,
    Read,
    Send,
    Shuffle,
)
from ..dataflow.sqltext import quote_name, to_sql
from . import graph

EXPR_CHARS = 600  # an expression longer than this is cut (the request has it whole)
LABEL_COLUMNS = 6  # columns named on an edge's label; the rest are counted


# ---------------------------------------------------------------------------------- numbers


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def size(n: float | int | None) -> str:
    """Bytes for people: 950 B, 12.3 kB, 4.1 MB, ..."""
    if n is None:
        return ""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return ""  # not reached


def duration(seconds: float | None) -> str:
    """0.42 s, 12.3 s, 4 min 05 s, 2 h 03 min."""
    if seconds is None:
        return ""
    s = max(0.0, float(seconds))
    if s < 10:
        return f"{s:.2f} s"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def job_duration(created: float, finished: float | None, state: str, now: float) -> str:
    """Submit to end; a running job's so far; nothing for one compiled and not (yet) executed."""
    if finished is not None:
        return duration(finished - created)
    if state == "running":
        return duration(now - created) + " so far"
    return ""


def stream_text(streams: int, first: int, expected: int | None) -> str:
    """What an edge carries, in streams (contract §3): "1 stream", "4 streams", or, when its
    destination is fed by other producers too, which of the destination's streams are this
    edge's: "1 of 3 streams (id 2)", "2 of 4 streams (ids 2–3)"."""
    if expected is None or expected == streams:
        return plural(streams, "stream")
    ids = f"id {first}" if streams == 1 else f"ids {first}–{first + streams - 1}"
    return f"{streams:,} of {plural(expected, 'stream')} ({ids})"


def expected_streams(edges: Iterable[dict]) -> dict[tuple[str, int, bool], int]:
    """Per destination (consumer, port, client), the streams arriving there."""
    out: dict[tuple[str, int, bool], int] = {}
    for e in edges:
        key = (e["to"], e.get("to_port", 0), bool(e.get("client")))
        out[key] = out.get(key, 0) + int(e.get("streams", 1))
    return out


def edge_rows(pipeline: dict) -> list[dict]:
    """The edges as the table under the graph shows them: each with its `streams_text`."""
    edges = pipeline.get("edges", ())
    expected = expected_streams(edges)
    return [{**e, "streams_text": stream_text(int(e.get("streams", 1)), int(e.get("first_stream", 0)),
                                              expected.get((e["to"], e.get("to_port", 0), bool(e.get("client")))))}
            for e in edges]


def never_ran(state: str, timeline: dict) -> bool:
    """A dry run: compiled and cancelled before any NCA was set up. Spark's planner compiles each
    candidate to validate it and deletes it at once; `explain()` does the same; and a compiled job
    nobody executes expires cancelled."""
    return state == "cancelled" and "setup" not in (timeline.get("phases") or {})


def rows_sent(pipeline: dict, timeline: dict, progress: dict | None = None) -> int | None:
    """Rows the clients got: the status's `progress.rows_to_clients` where it says, else the
    tuples the NCAs feeding clients sent, by their own counters in the timeline (each NCA once
    however many clients it feeds). None when nothing has been counted."""
    if "setup" not in (timeline.get("phases") or {}):
        return None  # never executed: nothing was sent, nor will be counted
    if isinstance(progress, dict) and isinstance(progress.get("rows_to_clients"), int):
        return progress["rows_to_clients"]
    feeders = {e["from"] for e in pipeline.get("edges", ()) if e.get("client")}
    total, seen = 0, False
    for nid in feeders:
        for st in (timeline.get("ncas") or {}).get(nid, {}).get("stages", ()):
            if isinstance(st.get("tuples_out"), int):
                total += st["tuples_out"]
                seen = True
    return total if seen else None


# ---------------------------------------------------------------------------------- the graph


def threads_of(pipeline_obj: object | None, timeline: dict) -> dict[str, int]:
    """NCA id -> its threads: as the compiler gave them (a held job), else as the NCA reported
    them in its stages (a recorded job that ran)."""
    out: dict[str, int] = {}
    for nid, steps in (timeline.get("ncas") or {}).items():
        used = [st.get("threads") for st in steps.get("stages", ()) if isinstance(st.get("threads"), int)]
        if used:
            out[nid] = max(used)
    for node in getattr(pipeline_obj, "ncas", ()):
        cores = getattr(getattr(node, "resources", None), "cores", None)
        if isinstance(cores, int):
            out[node.id] = cores
    return out


def edge_columns(pipeline: dict, pipeline_obj: object | None) -> list[list[tuple[str, str]] | None]:
    """Per edge of `pipeline["edges"]`, its NTF layout's columns as (name, type): every edge's for
    a held job, the client edges' (from `outputs`) for a recorded one; None where unknown."""
    live = list(getattr(pipeline_obj, "edges", ()))
    outputs = pipeline.get("outputs") or {}
    out: list[list[tuple[str, str]] | None] = []
    for i, e in enumerate(pipeline.get("edges", ())):
        layout = getattr(getattr(live[i], "spec", None), "layout", None) if i < len(live) else None
        if layout is not None:
            out.append([(f.name, str(f.type)) for f in layout.fields])
        elif e.get("client") and isinstance(outputs.get(e["to"]), dict):
            fields = outputs[e["to"]].get("layout", {}).get("fields", ())
            out.append([(f["name"], f["type"]) for f in fields])
        else:
            out.append(None)
    return out


def _columns_label(columns: list[tuple[str, str]] | None) -> str:
    if columns is None:
        return ""
    names = [name for name, _ in columns]
    shown = ", ".join(names[:LABEL_COLUMNS])
    return shown + (f", … (+{len(names) - LABEL_COLUMNS})" if len(names) > LABEL_COLUMNS else "")


def _stages_text(stages: list[int]) -> str:
    return f"stage {stages[0]}" if len(stages) == 1 else "stages " + ", ".join(map(str, stages))


def _nca_node(n: dict, threads: dict[str, int]) -> graph.Node:
    """An NCA's box: id and threads, implementation, operations, host (and stages, when several)."""
    ran = list(n.get("stages") or [0])
    where = f"on {n['host']}" if n.get("host") else "in the network"
    ops = " → ".join(n.get("operations") or []) or "(converter)"
    title = n["id"] + (f" · {plural(threads[n['id']], 'thread')}" if n["id"] in threads else "")
    lines = (title, n.get("implementation", ""), ops, where + ("" if len(ran) == 1 else f" · {_stages_text(ran)}"))
    tip = "\n".join([*lines[:3], where, _stages_text(ran), *([n["placement"]] if n.get("placement") else [])])
    attrs = {"implementation": n.get("implementation", ""), "host": n.get("host") or "",
             "stages": ",".join(map(str, ran)), "threads": str(threads.get(n["id"], ""))}
    return graph.Node(n["id"], lines, max(ran), "converter" if n.get("converter") else "nca", tip, attrs)


def _edge_arrow(e: dict, columns: list[tuple[str, str]] | None, expected: int | None) -> graph.Arrow:
    """An edge's arrow, labelled with the edge and its columns, format and transport, streams."""
    streams = stream_text(int(e.get("streams", 1)), int(e.get("first_stream", 0)), expected)
    how = f"{e.get('format', '')}/{e.get('transport', '')}" + (" keyed" if e.get("keyed") else "")
    label = _columns_label(columns)
    lines = (f"{e.get('edge', '')}: {label}" if label else e.get("edge", ""), how, streams)
    tip = "\n".join([f"{e['from']}[{e.get('from_port', 0)}] → {e['to']}[{e.get('to_port', 0)}]: edge "
                     f"{e.get('edge', '')}", f"{how}, {streams}",
                     *(["columns: " + ", ".join(f"{n} {t}" for n, t in columns)] if columns else [])])
    attrs = {"edge": e.get("edge", ""), "streams": str(e.get("streams", 1)),
             "first-stream": str(e.get("first_stream", 0)), "expected": str(expected or ""),
             "stream-label": streams, "from-port": str(e.get("from_port", 0)), "to-port": str(e.get("to_port", 0))}
    target = ("client:" if e.get("client") else "") + e["to"]
    return graph.Arrow(e["from"], target, lines, tip, attrs)


def graph_parts(pipeline: dict, threads: dict[str, int], columns: list, sends: dict[str, str]
                ) -> tuple[list[graph.Node], list[graph.Arrow], list[str]]:
    """The boxes, arrows and bands of the pipeline (graph.py): an NCA in the band of its last
    stage, a client per send in the last band. `columns`: per edge, its columns (`edge_columns`);
    `sends`: send name -> where it goes ("tcp 127.0.0.1:5000"), for a held job."""
    stages = pipeline.get("stages") or []
    nodes = [_nca_node(n, threads) for n in pipeline.get("ncas", ())]
    edges = pipeline.get("edges", ())
    expected = expected_streams(edges)
    arrows = [_edge_arrow(e, columns[i] if i < len(columns) else None,
                          expected.get((e["to"], e.get("to_port", 0), bool(e.get("client")))))
              for i, e in enumerate(edges)]
    outputs = pipeline.get("outputs") or {}
    clients = list(dict.fromkeys(e["to"] for e in edges if e.get("client")))
    for send in clients:
        want = (outputs.get(send) or {}).get("expected_streams")
        lines = ("client", f"send {send}", sends.get(send, ""),
                 f"expects {plural(want, 'stream')}" if isinstance(want, int) else "")
        nodes.append(graph.Node("client:" + send, tuple(t for t in lines if t), len(stages), "client",
                                attrs={"send": send}))
    return nodes, arrows, [f"stage {i}" for i in range(len(stages))] + (["clients"] if clients else [])


def pipeline_svg(pipeline: dict, threads: dict[str, int], columns: list, sends: dict[str, str]) -> str:
    nodes, arrows, bands = graph_parts(pipeline, threads, columns, sends)
    if not nodes:
        return ""
    return graph.render_svg(nodes, arrows, bands, title=f"{plural(len(pipeline.get('ncas', ())), 'NCA')} in "
                                                        f"{plural(len(pipeline.get('stages', ())), 'stage')}")


# ---------------------------------------------------------------------------------- operations


def sql(e: Expr | None) -> str:
    if e is None:
        return ""
    try:
        text = to_sql(e)
    except RecursionError:  # deeper than the request limits allow: cannot happen, must not fail the page
        return "(too deeply nested to show)"
    return text if len(text) <= EXPR_CHARS else text[: EXPR_CHARS - 1] + "…"


def named(n: NamedExpr) -> str:
    """`a` for a column kept as it is, else `expr AS name`."""
    if isinstance(n.expr, Column) and n.expr.name == n.name:
        return quote_name(n.name)
    return f"{sql(n.expr)} AS {quote_name(n.name)}"


def expressions(op: object) -> list[tuple[str, list[str]]]:
    """What the request asked of one operation, as readable text: (what, [texts])."""
    if isinstance(op, Read):
        files = [os.path.basename(p) for p in op.paths]
        shown = files[:5] + ([f"… {len(files) - 5} more"] if len(files) > 5 else [])
        return [("files", [f"{op.format.value}: " + ", ".join(shown)]),
                ("columns", [", ".join(f"{quote_name(f.name)} {f.type}" for f in op.schema.fields)])]
    if isinstance(op, Filter):
        return [("where", [sql(op.condition)])]
    if isinstance(op, Project):
        return [("select", [named(c) for c in op.columns])]
    if isinstance(op, Join):
        keys = [f"{sql(p)} = {sql(b)}" for p, b in zip(op.probe_keys, op.build_keys)]
        out = [("join", [f"{op.type.value}: probe {op.probe} with build {op.build}"]), ("on", [" AND ".join(keys)])]
        if op.condition is not None:
            out.append(("and", [sql(op.condition)]))
        if op.columns is not None:
            out.append(("select", [named(c) for c in op.columns]))
        return out
    if isinstance(op, Aggregate):
        calls = [("count(*)" if c.fn is AggFn.COUNT_STAR
                  else f"{c.fn.value}({'DISTINCT ' if getattr(c, 'distinct', False) else ''}{sql(c.expr)})")
                 + f" AS {quote_name(c.name)}" for c in op.aggregates]
        out = [("group by", [named(g) for g in op.group_by])] if op.group_by else []
        return out + [("aggregates", calls), ("mode", [op.mode.value])]
    if isinstance(op, Shuffle):
        return [("keys", [sql(k) for k in op.keys]), ("partitions", [str(op.partitions)])]
    if isinstance(op, Send):
        return [("to", [f"{op.transport} {op.host}:{op.port}"])]
    return []


def _plan_op(plan: LogicalPlan | None, name: str) -> object | None:
    if plan is None:
        return None
    try:
        return plan.op(name)
    except KeyError:
        return None


def operations(pipeline: dict, plan: LogicalPlan | None) -> list[dict]:
    """Per operation, in request order: what it asks (its expressions), which implementation
    took it and why, and the others' answers (the page folds those away)."""
    out = []
    for name, d in (pipeline.get("decisions") or {}).items():
        verdicts = d.get("verdicts") or []
        chosen = next((v for v in verdicts if v.get("chosen")), None)
        others = [v for v in verdicts if v is not chosen]
        op = _plan_op(plan, name)
        out.append({"name": name, "kind": getattr(op, "kind", ""), "path": d.get("path") or "",
                    "nca": d.get("nca") or "", "implementation": d.get("implementation"),
                    "reason": chosen.get("reason", "") if chosen else "", "note": d.get("note") or "",
                    "others": others, "could": sum(1 for v in others if v.get("ok")),
                    "expressions": expressions(op) if op is not None else []})
    return out


def sends_of(plan: LogicalPlan | None) -> dict[str, str]:
    return {s.name: f"{s.transport} {s.host}:{s.port}" for s in plan.sends} if plan is not None else {}


# ---------------------------------------------------------------------------------- progress


def progress_rows(progress: object, pipeline: dict) -> list[dict]:
    """The live per-NCA counters of a job's status (`progress.ncas`: tuples and bytes in and out
    so far, the stage, running / waiting / done), in NCA order, those of NCAs the pipeline does not
    name last; [] when there are none, or they are not as expected. A counter that is not a number
    (an NCA that cannot tell while it runs) is None: the page says it is unknown."""
    ncas = progress.get("ncas") if isinstance(progress, dict) else None
    if not isinstance(ncas, dict):
        return []
    impl = {n["id"]: n.get("implementation", "") for n in pipeline.get("ncas", ())}
    order = [n for n in impl if n in ncas] + sorted(str(n) for n in ncas if n not in impl)
    rows = []
    for nid in order:
        c = ncas[nid] if isinstance(ncas[nid], dict) else {}

        def count(key: str, c: dict = c) -> int | float | None:
            v = c.get(key)
            return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        stage = c.get("stage")
        rows.append({"nca": nid, "implementation": impl.get(nid, ""), "state": str(c.get("state") or ""),
                     "stage": stage if isinstance(stage, int) else None,
                     "tuples_in": count("tuples_in"), "bytes_in": count("bytes_in"),
                     "tuples_out": count("tuples_out"), "bytes_out": count("bytes_out")})
    return rows
