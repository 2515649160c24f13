"""The NTF filter/project NCA: filters and projections over NTF tuples from another NCA, on the
`ntf_relay` driver (generated C, like the scan's).

It makes plans work that no fused NCA covers: a read consumed by several operations (the scan
takes only the read and fans its output out; each branch's filters and projections become one of
these), a projection after an aggregate or a join produced by another NCA, a filter on one output
of a shuffle. A chain that ends in a shuffle takes the shuffle too (one hop less). The mapper
prefers fused NCAs (fewest instances), so a chain that a scan can fuse never lands here.
"""
from __future__ import annotations

from ...contract.ntf import generate_ntf
from ...dataflow.plan import LogicalPlan
from ...nca.interface import (
    InstanceContext,
    NcaImplementation,
    NcaInstance,
    NcaSpec,
    OutputSpec,
    ResourceRequest,
    Verdict,
)
from ...nca.support import Support
from .common import (
    RelayInstance,
    filter_project_chain,
    fuse_trailing_shuffle,
    ntf_input_verdict,
    relay_resources,
    tcp_outputs,
)
from .support import codegen_support


class NtfFilterProjectNca(NcaImplementation):
    name = "software.ntf_filter_project"
    keyed_streams = True  # its process runtime speaks keyed streams (ncas/runtime/in_tcp.c)
    description = ("Filters and projections over NTF input from another NCA (after a fan-out, an aggregate, "
                   "a join), optionally ending in a shuffle (generated C on the NTF relay)")
    operation_kinds = ("filter", "project", "shuffle")

    def support(self) -> Support:
        ntf = "over NTF from another NCA"
        return codegen_support({"filter": ntf, "project": ntf, "shuffle": "fused at the end of its chain"},
                               aggregates=False)

    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        if not anchor:
            return Verdict.no("not a format converter")
        op = plan.op(anchor)
        if op.kind not in ("filter", "project"):
            return Verdict.no(f"starts with a 'filter' or 'project' operation, not '{op.kind}'")
        return Verdict.yes(fuse_trailing_shuffle(plan, filter_project_chain(plan, anchor)))

    def match_input(self, plan, ops, inputs) -> Verdict[None]:
        return ntf_input_verdict(plan, ops, inputs)

    def match_output(self, plan, ops, inputs, wanted) -> Verdict[tuple[OutputSpec, ...]]:
        layout = generate_ntf(plan.schemas[ops[-1]])
        return tcp_outputs(plan, ops, wanted, layout)

    def resources(self, plan, ops) -> ResourceRequest:
        return relay_resources(plan, ops)

    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        return RelayInstance(spec, context)

