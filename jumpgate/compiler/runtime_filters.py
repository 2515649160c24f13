"""Runtime filters: from each hash join's build side to the scans feeding its probe side
(docs/runtime-filters.md).

A join's build phase ends a stage before its probe side's scans start (staging.py: a join is built
before it is probed, and nothing buffers, so the scans streaming into the probe run in the probe's
stage). At that boundary the join's NCA can summarise its build keys (a Bloom filter over the key
tuple's hash, and each integral key's range), and the scans can drop, right after their own
filters and before encoding them, the rows whose keys cannot match. This module decides where.

The rule, on the logical plan (`plan_runtime_filters`), per join:
- only `inner`, `left_semi` and `right_outer` joins: they output a probe row only when it matches,
  so dropping a probe row that matches nothing changes nothing. Not `left_outer` or `left_anti`,
  whose preserved probe side keeps rows without a match (the build side is never filtered);
- each probe key is a plain column of the probe input (not an expression: a key computed by an
  expression would have to be computed twice, and its value's type may differ from the column's);
- walking from the probe input up to a `read`, every operation passes the key columns through
  unchanged: filters, projections whose output column for a key is a plain input column, and
  aggregations whose group key for each join key is a plain input column (dropping an input row
  whose group key matches no build key drops rows of a group the join drops whole: TPC-H Q4's
  orders joined with lineitem's distinct order keys), and joins: past a join each key is a column
  of one of its sides, and the filter goes to that side (a row of it whose key fails makes only
  output rows whose key fails, or is NULL); a key from an inner join's build side that equals one
  of its probe keys goes to the probe side as well (a left outer join's too: its build half is
  that key or NULL), and one from its probe side to its build side (TPC-H Q18: the orders of large
  quantities filter the lineitem scan probing the join with orders). Not through shuffles, nor a
  key that is an aggregate's result;
- every operation on that walk, the read included, has this one consumer: a read or a filter that
  also feeds something else must keep every row for it.
Each read reached is a target, with a filter edge of its own. On the pipeline (`attach_runtime_filters`), after placement
so that every NCA id is final, the join's NCA must make filters (`runtime_filter_build`) and every
NCA that starts with the read (one per node when the read is split over nodes) must apply them
(`runtime_filter_probe` and `applies_runtime_filters`), in a stage after the join's build phase.

A join that gets none has a note saying why; both show in the compile answer's `runtime_filters`
(GET /v1/jobs/{id}, the client's dry run `explain()`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ..dataflow.expr import Column
from ..dataflow.plan import Aggregate, Filter, InputRef, Join, JoinType, LogicalPlan, Project, Read
from ..nca.interface import NcaImplementation, RuntimeFilterSpec
from .pipeline import StagedPipeline

FILTERABLE = (JoinType.INNER, JoinType.LEFT_SEMI, JoinType.RIGHT_OUTER)  # a probe row no build row matches is dropped
MAX_KEYS = 64  # keys of one filter (ncas/runtime/jg_rfilter.h)
MAX_PER_SCAN = 16  # filters one scan applies (ncas/runtime/rfilter.c)


@dataclass(frozen=True, slots=True)
class RuntimeFilterCandidate:
    """A join whose probe side comes, key columns unchanged, from one read (the plan's rule)."""

    join: str
    read: str
    columns: tuple[int, ...]  # the join's probe keys as indexes into the read's schema, in key order
    keys: tuple[str, ...]  # their names in the read
    path: tuple[str, ...]  # the operations between the read and the join, read side first


@dataclass(frozen=True, slots=True)
class RuntimeFilterEdge:
    """A planned runtime filter: the join's NCA makes it when its build phase ends; each of
    `probe_ncas` (the read's scans) applies it as its filter number `slots[i]`, made by
    `sources[i]`. A join cloned per node beside a read split over nodes (scale_out.py) has its
    whole build side in every clone (broadcast), so every clone makes the same filter; each scan
    takes the one of the clone its rows go to, on its own node."""

    id: str
    join: str
    read: str
    columns: tuple[int, ...]
    keys: tuple[str, ...]
    path: tuple[str, ...]
    probe_ncas: tuple[str, ...]
    slots: tuple[int, ...]
    sources: tuple[str, ...]  # per probe NCA, the join NCA whose filter it gets

    @property
    def build_ncas(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.sources))

    def to_json(self) -> dict:
        return {"id": self.id, "join": self.join, "planned": True, "read": self.read, "keys": list(self.keys),
                "through": list(self.path), "from": list(self.build_ncas), "to": list(self.probe_ncas),
                "kinds": ["bloom", "range"]}


def _probe_sources(plan: LogicalPlan, join: Join) -> list[RuntimeFilterCandidate] | str:
    """The reads feeding `join`'s probe side with the key columns unchanged, or why there is none."""
    if join.type not in FILTERABLE:
        return (f"a {join.type.value} join keeps probe rows that match nothing: its probe side is "
                "preserved, so no row of it may be dropped early")
    if len(join.probe_keys) > MAX_KEYS:
        return f"a runtime filter takes at most {MAX_KEYS} keys; the join has {len(join.probe_keys)}"
    columns: list[int] = []
    for j, key in enumerate(join.probe_keys):
        if not isinstance(key, Column):
            return f"probe key {j} is computed by an expression, not a column the scan could test"
        columns.append(key.index)
    found: list[RuntimeFilterCandidate] = []
    why = ""
    # A work list, not recursion: a request may put thousands of operations between a read and
    # its join (compile_scaling's chains), and each join on the way adds up to two branches.
    todo: list[tuple[InputRef, str, tuple[int, ...], tuple[str, ...]]] = [(join.probe, join.name, tuple(columns), ())]
    while todo:
        ref, consumer, cols, path = todo.pop()
        branches = _step(plan, join, ref, consumer, cols, path, found)
        if isinstance(branches, str):
            why = why or branches
        else:
            todo.extend(reversed(branches))
    return found or why


Branch = tuple[InputRef, str, tuple[int, ...], tuple[str, ...]]


def _step(plan: LogicalPlan, join: Join, ref: InputRef, consumer: str, columns: tuple[int, ...],
          path: tuple[str, ...], found: list[RuntimeFilterCandidate]) -> list[Branch] | str:
    """One operation on the way up from `join`'s probe side, with the join's keys as `columns` of
    its output: a read adds a candidate; the others give where to go on (their inputs, with the
    keys as columns there), or why the way ends."""
    op = plan.op(ref.op)
    users = plan.consumers(op.name)
    if len(users) != 1 or users[0][0].name != consumer:
        return f"'{op.name}' feeds other operations besides '{consumer}', which need its rows unfiltered"
    cols = list(columns)
    if isinstance(op, Read):
        for j, (idx, key) in enumerate(zip(cols, join.probe_keys, strict=True)):
            if op.schema.fields[idx].type != key.type:  # a binder's cast would have made it an expression
                return f"probe key {j} has another type than column '{op.schema.fields[idx].name}' of read '{op.name}'"
        found.append(RuntimeFilterCandidate(join.name, op.name, tuple(cols),
                                            tuple(op.schema.fields[i].name for i in cols), tuple(reversed(path))))
        return []
    if isinstance(op, Filter):
        pass
    elif isinstance(op, Project):
        for j, idx in enumerate(cols):
            expr = op.columns[idx].expr
            if not isinstance(expr, Column):
                return (f"projection '{op.name}' computes key {j} ('{op.columns[idx].name}') by an "
                        "expression: the scan does not see the key's values")
            cols[j] = expr.index
    elif isinstance(op, Aggregate):
        for j, idx in enumerate(cols):
            if idx >= len(op.group_by):
                return (f"key {j} is aggregate '{op.aggregates[idx - len(op.group_by)].name}' of "
                        f"'{op.name}', not one of its group keys")
            expr = op.group_by[idx].expr
            if not isinstance(expr, Column):
                return (f"aggregation '{op.name}' computes group key '{op.group_by[idx].name}' (join "
                        f"key {j}) by an expression: the scan does not see the key's values")
            cols[j] = expr.index
    elif isinstance(op, Join):
        return _through_join(plan, op, cols, path + (op.name,))
    else:
        return (f"the probe side comes from {op.kind} '{op.name}', which does not pass its input's "
                "rows through unchanged")
    return [(op.input, op.name, tuple(cols), path + (op.name,))]


def _through_join(plan: LogicalPlan, inner: Join, cols: list[int], path: tuple[str, ...]) -> list[Branch] | str:
    """Past a join `inner` on the way: each key is a column of its probe side or of its build side.
    A row of either side whose key fails the filter only makes output rows that fail it too (or
    whose key is NULL, which the filter's join drops as well), so the filter holds on that side's
    rows. A build key equal to a probe key in the rows `inner` outputs (inner joins; a left outer
    join's build half is that or NULL) lets the filter go to the other side too: TPC-H Q18's orders
    of large quantities reach the lineitem scan that probes the orders they join. Each side
    reached is a branch of its own."""
    width = len(plan.input_schema(inner.probe).fields)
    source = []  # per key: ("p", probe column) or ("b", build column)
    for j, idx in enumerate(cols):
        if inner.columns is not None:
            expr = inner.columns[idx].expr
            if not isinstance(expr, Column):
                return (f"join '{inner.name}' computes key {j} ('{inner.columns[idx].name}') by an "
                        "expression: the scan does not see the key's values")
            idx = expr.index
        source.append(("p", idx) if idx < width else ("b", idx - width))
    equal = [(bk.index, pk.index) for bk, pk in zip(inner.build_keys, inner.probe_keys, strict=True)
             if isinstance(bk, Column) and isinstance(pk, Column) and bk.type == pk.type]
    to_probe = {b: p for b, p in equal}
    to_build = {p: b for b, p in equal}
    branches: list[Branch] = []
    # the probe side: build columns through equal keys, where the output row is a matched one
    matched = inner.type in (JoinType.INNER, JoinType.LEFT_OUTER)
    probe_cols = [c if side == "p" else to_probe.get(c, -1) if matched else -1 for side, c in source]
    if -1 not in probe_cols:
        branches.append((inner.probe, inner.name, tuple(probe_cols), path))
    # the build side: only of an inner join (its other types keep or drop probe rows by what the
    # build side has, so dropping build rows would change them)
    build_cols = [c if side == "b" else to_build.get(c, -1) for side, c in source]
    if inner.type is JoinType.INNER and -1 not in build_cols:
        branches.append((inner.build, inner.name, tuple(build_cols), path))
    if not branches:
        j = probe_cols.index(-1)
        return (f"key {j} comes from the other side of join '{inner.name}' than the others, and is not one "
                "of its equal keys")
    return branches


def plan_runtime_filters(plan: LogicalPlan) -> tuple[list[RuntimeFilterCandidate], dict[str, str]]:
    """Per hash join of `plan`, in plan order: a candidate, or a note why it gets no runtime filter."""
    out: list[RuntimeFilterCandidate] = []
    notes: dict[str, str] = {}
    for op in plan.ops:
        if isinstance(op, Join):
            found = _probe_sources(plan, op)
            if isinstance(found, str):
                notes[op.name] = found
            else:
                out.extend(found)
    return out, notes


def attach_runtime_filters(pipeline: StagedPipeline,
                           impls: Mapping[str, NcaImplementation] | Iterable[NcaImplementation],
                           enabled: bool = True) -> StagedPipeline:
    """The pipeline with its runtime filter edges planned (module docstring): each involved NCA
    gets its `RuntimeFilterSpec`s, the pipeline the edges and, per join without one, why."""
    by_name = ({i.name: i for i in impls.values()} if isinstance(impls, Mapping)
               else {i.name: i for i in impls})
    plan = pipeline.plan
    candidates, notes = plan_runtime_filters(plan)
    if not enabled:
        notes.update({c.join: "runtime filters are switched off on this server (--no-runtime-filters)"
                      for c in candidates})
        return replace(pipeline, runtime_filters=(), runtime_filter_notes=_in_plan_order(plan, notes))
    specs: dict[str, list[RuntimeFilterSpec]] = {}
    edges: list[RuntimeFilterEdge] = []
    for cand in candidates:
        why, sources, probes = _nodes_for(pipeline, by_name, cand)
        full = [p for p in probes if sum(1 for f in specs.get(p, ()) if f.role == "probe") >= MAX_PER_SCAN]
        if full and not why:
            why = f"the scan {full[0]} applies {MAX_PER_SCAN} runtime filters already, the most one takes"
        if why:
            notes.setdefault(cand.join, why)  # a join with another read that takes it has no note (below)
            continue
        fid = f"rf{len(edges)}"
        slots = []
        for p in probes:
            mine = specs.setdefault(p, [])
            slots.append(sum(1 for s in mine if s.role == "probe"))
            mine.append(RuntimeFilterSpec(fid, cand.join, "probe", slots[-1], cand.columns))
        for b in dict.fromkeys(sources):
            specs.setdefault(b, []).append(RuntimeFilterSpec(fid, cand.join, "build"))
        edges.append(RuntimeFilterEdge(fid, cand.join, cand.read, cand.columns, cand.keys, cand.path,
                                       tuple(probes), tuple(slots), tuple(sources)))
    for e in edges:
        notes.pop(e.join, None)
    ncas = tuple(replace(n, runtime_filters=tuple(specs[n.id])) if n.id in specs else n for n in pipeline.ncas)
    return replace(pipeline, ncas=ncas, runtime_filters=tuple(edges), runtime_filter_notes=_in_plan_order(plan, notes))


def _in_plan_order(plan: LogicalPlan, notes: dict[str, str]) -> dict[str, str]:
    return {op.name: notes[op.name] for op in plan.ops if op.name in notes}


def _fed(pipeline: StagedPipeline, start: str, join: str) -> str | None:
    """The first NCA implementing `join` that the output of NCA `start` reaches, or None."""
    seen, todo = {start}, [start]
    while todo:
        nid = todo.pop(0)
        for e in pipeline.edges:
            if e.producer != nid or e.to_client or e.consumer in seen:
                continue
            if join in pipeline.node(e.consumer).ops:
                return e.consumer
            seen.add(e.consumer)
            todo.append(e.consumer)
    return None


def _nodes_for(pipeline: StagedPipeline, impls: Mapping[str, NcaImplementation],
               cand: RuntimeFilterCandidate) -> tuple[str, list[str], list[str]]:
    """(why not, or "", per scan of the read the join NCA it gets its filter from, the scans)."""
    plan = pipeline.plan
    builds = [n for n in pipeline.ncas if cand.join in n.ops and not n.converter]
    if not builds:
        return f"no NCA implements join '{cand.join}'", [], []
    for build in builds:
        impl = impls.get(build.implementation)
        if impl is None or not impl.runtime_filter_build:
            return f"{build.implementation} ({build.id}) does not make runtime filters", [], []
    probes = [n for n in pipeline.ncas if n.ops and n.ops[0] == cand.read]
    if not probes:
        return f"no NCA scans read '{cand.read}'", [], []
    sources = []
    for n in probes:
        impl = impls.get(n.implementation)
        if impl is None or not impl.runtime_filter_probe:
            return f"{n.implementation} ({n.id}), the scan of '{cand.read}', does not apply runtime filters", [], []
        verdict = impl.applies_runtime_filters(plan, n.ops)
        if not verdict:
            return f"{n.implementation} ({n.id}) cannot apply one: {verdict.reason}", [], []
        build = pipeline.node(_fed(pipeline, n.id, cand.join) or builds[0].id)
        if not n.stages or not build.stages or n.stages[0] <= build.stages[0]:
            return (f"the scan {n.id} of '{cand.read}' does not start after the build phase of {build.id} "
                    "ends"), [], []
        sources.append(build.id)
    return "", sources, [n.id for n in probes]
