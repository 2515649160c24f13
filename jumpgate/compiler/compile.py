"""The compiler's front door: a logical plan in, a staged networked pipeline out (thesis §3.3.5).

Mapping picks the NCAs (and, through their `match_output`, the NTF layouts: software NCAs call
`generate_ntf`, the switch publishes its own); staging runs on the logical operations and every
NCA inherits the union of its operations' stages.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from ..dataflow.plan import LogicalPlan
from ..nca.deployment import Host
from ..nca.interface import NcaImplementation, ResourceRequest, Verdict
from . import cost as costs
from .mapping import DEFAULT_BUDGET, map_plan
from .pipeline import StagedPipeline, build_pipeline
from .placement import place
from .scaling import assign_threads
from .staging import compute_stages


def compile_plan(plan: LogicalPlan,
                 registry_implementations: Mapping[str, NcaImplementation] | Iterable[NcaImplementation],
                 capacity_check: Callable[[ResourceRequest], Verdict] | None = None, *,
                 op_paths: Mapping[str, str] | None = None,
                 cost: costs.PlacementCost = costs.default_cost,
                 budget: int = DEFAULT_BUDGET, thread_budget: int = 1,
                 hosts: Sequence[Host] | None = None) -> StagedPipeline:
    """Map `plan` onto the registered implementations (a name -> implementation mapping, or any
    iterable of implementations), compute stages, and build the pipeline.

    `capacity_check(resources)` lets the deployer veto an NCA that can never fit. `op_paths` maps
    operation names to request paths (`operations[3]`) so errors point into the request.
    Raises `MappingError` (HTTP 422) when no graph of NCAs can run the plan or when the plan
    cannot be staged without buffering. `thread_budget` is the cores one stage may use in all:
    NCAs that scale internally share what the others leave (see scaling.py). `hosts` are where
    instances may run (the deployer's); with them, each instance's host is chosen (placement.py)."""
    impls = list(registry_implementations.values()) if isinstance(registry_implementations, Mapping) \
        else list(registry_implementations)
    mapped = map_plan(plan, impls, capacity_check=capacity_check, op_paths=op_paths, cost=cost,
                      budget=budget)
    op_stages = compute_stages(plan, op_paths)
    mapped = assign_threads(mapped, op_stages, thread_budget)
    pipeline = build_pipeline(mapped, op_stages, keyed={impl.name for impl in impls if impl.keyed_streams})
    return place(pipeline, hosts) if hosts is not None else pipeline
