"""The compiler's front door: a logical plan in, a staged networked pipeline out (thesis §3.3.5).

Mapping picks the NCAs (and, through their `match_output`, the NTF layouts: software NCAs call
`generate_ntf`, the switch publishes its own); staging runs on the logical operations and every
NCA inherits the union of its operations' stages; scaling chooses thread counts.

Given the deployer's hosts, the pipeline is then scaled out over nodes and placed (thesis §3.3.4):
a read whose files are spread over nodes becomes one scan per node (`scale_out.py`), and every
instance gets its host (`placement.py`). When such a read's instance fused a complete aggregation,
each node's scan would aggregate only its own rows: the plan is rewritten with that aggregation
split into a partial and a final one and mapped again, so the final one is an NCA of its own that
receives every scan's partial rows. Without spread reads nothing of this changes the pipeline.

Before any of it, aggregations with DISTINCT aggregates become aggregations without them
(`distinct.py`), so that no plugin ever sees one, and a left outer join whose preserved side is
the smaller one is swapped into a right outer join that builds it (`join_sides.py`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from ..dataflow.plan import LogicalPlan
from ..nca.deployment import Host
from ..nca.interface import NcaImplementation, ResourceRequest, Verdict
from . import cost as costs
from .distinct import expand_distinct
from .join_sides import build_smaller_outer_side, noted
from .mapping import DEFAULT_BUDGET, map_plan
from .pipeline import StagedPipeline, build_pipeline
from .placement import place
from .runtime_filters import attach_runtime_filters
from .scale_out import aggregates_to_split, scale_out, split_aggregates
from .scaling import assign_threads
from .staging import compute_stages


def compile_plan(plan: LogicalPlan,
                 registry_implementations: Mapping[str, NcaImplementation] | Iterable[NcaImplementation],
                 capacity_check: Callable[[ResourceRequest], Verdict] | None = None, *,
                 op_paths: Mapping[str, str] | None = None,
                 cost: costs.PlacementCost = costs.default_cost,
                 budget: int = DEFAULT_BUDGET, thread_budget: int = 1,
                 hosts: Sequence[Host] | None = None, runtime_filters: bool = True) -> StagedPipeline:
    """Map `plan` onto the registered implementations (a name -> implementation mapping, or any
    iterable of implementations), compute stages, and build the pipeline.

    `capacity_check(resources)` lets the deployer veto an NCA that can never fit. `op_paths` maps
    operation names to request paths (`operations[3]`) so errors point into the request.
    Raises `MappingError` (HTTP 422) when no graph of NCAs can run the plan or when the plan
    cannot be staged without buffering. `thread_budget` is the cores one stage may use in all:
    NCAs that scale internally share what the others leave (see scaling.py). `hosts` are where
    instances may run (the deployer's); with them, each instance's host is chosen (placement.py).
    Last, runtime filters from joins' build sides to their probe sides' scans are planned
    (runtime_filters.py); with `runtime_filters` False, none is, and the answer says so."""
    impls = list(registry_implementations.values()) if isinstance(registry_implementations, Mapping) \
        else list(registry_implementations)
    plan, op_paths = expand_distinct(plan, op_paths)
    plan, swapped_joins = build_smaller_outer_side(plan)

    def staged(plan: LogicalPlan, op_paths: Mapping[str, str] | None) -> StagedPipeline:
        mapped = map_plan(plan, impls, capacity_check=capacity_check, op_paths=op_paths, cost=cost,
                          budget=budget)
        op_stages = compute_stages(plan, op_paths)
        mapped = assign_threads(mapped, op_stages, thread_budget)
        pipeline = build_pipeline(mapped, op_stages, keyed={impl.name for impl in impls if impl.keyed_streams})
        return noted(pipeline, swapped_joins)

    pipeline = staged(plan, op_paths)
    if hosts is None:
        return attach_runtime_filters(pipeline, impls, runtime_filters)
    split = aggregates_to_split(pipeline, hosts)
    if split:  # partial aggregations on the nodes, the final one fed by all of them
        plan, halves = split_aggregates(plan, split)
        if op_paths is not None:  # each half points at the aggregation it was in the request
            op_paths = {**op_paths, **{half: op_paths[whole] for half, whole in halves.items() if whole in op_paths}}
        pipeline = staged(plan, op_paths)
    return attach_runtime_filters(place(scale_out(pipeline, hosts), hosts), impls, runtime_filters)
