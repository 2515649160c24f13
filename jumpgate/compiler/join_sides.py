"""Which side of a left outer join is built (thesis §3.3.5: a join's build side is complete before
its probe side starts).

A request's `left_outer` join keeps its probe side ("left"): the probe side streams through and
the build side is held in a hash table for the whole probe. When the preserved side is the small
one (TPC-H Q13: 150,000 customers kept, 1.5 M orders matched against them), that holds the large
side in memory, in a stage of its own that nothing overlaps, and streams the small one. So, before
mapping, such a join becomes a `right_outer` join with its sides swapped: the small side is built,
the large one probes it as it is read, and the join NCA emits, after the last probe row, every
build row no probe row matched with the probe half NULL (ncas/runtime/join.c). The answer is the
same rows, in the same columns: the swapped join gets explicit output `columns` in the original
order, and its condition and columns read the swapped joined row.

Sizes are rough, as they can be before any data is read (`estimate_bytes`): a read is the bytes of
its files, a filter keeps half of its input, an aggregation with groups a quarter (one without
groups a single row), a shuffle partition its share, a join its larger side (semi, anti and outer
joins their preserved side). A join is swapped when its build side's estimate is larger than its
probe side's; a side of unknown size (a read without file sizes) leaves it as the request put it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..contract.types import Schema
from ..dataflow.expr import Column, reindex_columns
from ..dataflow.plan import (
    Aggregate,
    Filter,
    InputRef,
    Join,
    JoinType,
    LogicalPlan,
    NamedExpr,
    Operation,
    Project,
    Read,
    Shuffle,
)
from .pipeline import StagedPipeline

FILTER_KEEPS = 0.5
GROUPS_KEEP = 0.25


def estimate_bytes(plan: LogicalPlan) -> dict[str, float | None]:
    """Per operation, a rough size of its output in bytes (None: unknown). Per shuffle, the size
    of one partition."""
    sizes: dict[str, float | None] = {}

    def of(ref: InputRef) -> float | None:
        return sizes.get(ref.op)

    def scaled(x: float | None, by: float) -> float | None:
        return None if x is None else x * by

    for op in plan.ops:
        size: float | None
        if isinstance(op, Read):
            size = float(sum(op.sizes)) if op.sizes and len(op.sizes) == len(op.paths) else None
        elif isinstance(op, Filter):
            size = scaled(of(op.input), FILTER_KEEPS)
        elif isinstance(op, Project):
            size = of(op.input)
        elif isinstance(op, Shuffle):
            size = scaled(of(op.input), 1 / max(op.partitions, 1))
        elif isinstance(op, Aggregate):
            size = scaled(of(op.input), GROUPS_KEEP) if op.group_by else 0.0
        elif isinstance(op, Join):
            size = _join_size(op, of(op.probe), of(op.build))
        else:  # a send outputs nothing
            continue
        sizes[op.name] = size
    return sizes


def _join_size(join: Join, probe: float | None, build: float | None) -> float | None:
    if join.type in (JoinType.LEFT_SEMI, JoinType.LEFT_ANTI, JoinType.LEFT_OUTER):
        return probe
    if join.type is JoinType.RIGHT_OUTER:
        return build
    return None if probe is None or build is None else max(probe, build)


def as_right_outer(join: Join, probe: Schema, build: Schema) -> Join:
    """Left outer `join` over sides of schemas `probe` and `build`, swapped into the right outer
    join that gives the same rows in the same columns. The swapped joined row is the old build's
    columns, then the old probe's; a join without `columns` gets its default ones (the probe's,
    then the build's) made explicit."""
    def index(i: int) -> int:  # old joined row (probe, build) -> new (build, probe)
        return len(build) + i if i < len(probe) else i - len(probe)

    if join.columns is not None:
        columns = tuple(NamedExpr(c.name, reindex_columns(c.expr, index)) for c in join.columns)
    else:
        fields = (*probe.fields, *build.fields)
        columns = tuple(NamedExpr(f.name, Column(f.name, index(i), f.type)) for i, f in enumerate(fields))
    condition = None if join.condition is None else reindex_columns(join.condition, index)
    return replace(join, build=join.probe, probe=join.build, build_keys=join.probe_keys,
                   probe_keys=join.build_keys, type=JoinType.RIGHT_OUTER, condition=condition,
                   columns=columns)


def build_smaller_outer_side(plan: LogicalPlan) -> tuple[LogicalPlan, dict[str, str]]:
    """`plan` with each left outer join whose build side is estimated larger than its probe side
    swapped into a right outer join; and, per swapped join, why (for the compile answer)."""
    sizes = estimate_bytes(plan)
    ops: list[Operation] = []
    why: dict[str, str] = {}
    for op in plan.ops:
        if isinstance(op, Join) and op.type is JoinType.LEFT_OUTER:
            probe, build = sizes.get(op.probe.op), sizes.get(op.build.op)
            if probe is not None and build is not None and build > probe:
                op = as_right_outer(op, plan.schemas[op.probe.op], plan.schemas[op.build.op])
                why[op.name] = (f"left outer join built on its preserved side '{op.build.op}' (~{_mb(probe)}) "
                                f"rather than '{op.probe.op}' (~{_mb(build)}), run as right_outer")
        ops.append(op)
    if not why:
        return plan, why
    return LogicalPlan(plan.name, tuple(ops), plan.schemas, plan.op_paths), why


def noted(pipeline: StagedPipeline, why: Mapping[str, str]) -> StagedPipeline:
    """The compile answer's decision of each swapped join says so."""
    if not why:
        return pipeline
    decisions = {name: replace(d, note="; ".join(x for x in (why.get(name), d.note) if x)) if name in why else d
                 for name, d in pipeline.decisions.items()}
    return replace(pipeline, decisions=decisions)


def _mb(x: float) -> str:
    return f"{x / 1e6:.1f} MB" if x >= 1e5 else f"{x / 1e3:.0f} KB"
