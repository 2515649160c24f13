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
  unchanged: filters, and projections whose output column for a key is a plain input column. Not
  through aggregations, joins or shuffles;
- every operation on that walk, the read included, has this one consumer: a read or a filter that
  also feeds something else must keep every row for it.
The read found is the filter's target. On the pipeline (`attach_runtime_filters`), after placement
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
from ..dataflow.plan import Filter, InputRef, Join, JoinType, LogicalPlan, Project, Read
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


def _probe_source(plan: LogicalPlan, join: Join) -> RuntimeFilterCandidate | str:
    """The read feeding `join`'s probe side with the key columns unchanged, or why there is none."""
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
    ref: InputRef = join.probe
    consumer = join.name
    path: list[str] = []
    while True:
        op = plan.op(ref.op)
        users = plan.consumers(op.name)
        if len(users) != 1 or users[0][0].name != consumer:
            return f"'{op.name}' feeds other operations besides '{consumer}', which need its rows unfiltered"
        if isinstance(op, Read):
            break
        if isinstance(op, Filter):
            pass
        elif isinstance(op, Project):
            for j, idx in enumerate(columns):
                expr = op.columns[idx].expr
                if not isinstance(expr, Column):
                    return (f"projection '{op.name}' computes key {j} ('{op.columns[idx].name}') by an "
                            "expression: the scan does not see the key's values")
                columns[j] = expr.index
        else:
            return (f"the probe side comes from {op.kind} '{op.name}', which does not pass its input's "
                    "rows through unchanged")
        path.append(op.name)
        consumer = op.name
        ref = op.input
    read = op
    for j, (idx, key) in enumerate(zip(columns, join.probe_keys, strict=True)):
        if read.schema.fields[idx].type != key.type:  # a binder's cast would have made it an expression
            return f"probe key {j} has another type than column '{read.schema.fields[idx].name}' of read '{read.name}'"
    return RuntimeFilterCandidate(join.name, read.name, tuple(columns),
                                  tuple(read.schema.fields[i].name for i in columns), tuple(reversed(path)))


def plan_runtime_filters(plan: LogicalPlan) -> tuple[list[RuntimeFilterCandidate], dict[str, str]]:
    """Per hash join of `plan`, in plan order: a candidate, or a note why it gets no runtime filter."""
    out: list[RuntimeFilterCandidate] = []
    notes: dict[str, str] = {}
    for op in plan.ops:
        if isinstance(op, Join):
            found = _probe_source(plan, op)
            if isinstance(found, str):
                notes[op.name] = found
            else:
                out.append(found)
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
            notes[cand.join] = why
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
