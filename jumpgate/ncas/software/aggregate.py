"""The aggregation NCA: `aggregate` in any mode (contract §1: complete, partial, final) over NTF
input from another NCA, with the filters and projections after it fused in (a HAVING-like filter
and a projection of the groups are common), on the `ntf_relay` driver (thesis Table 3.4 "Agg").

The file scans fuse a trailing aggregate the same way (`common.fuse_trailing_aggregate`, thesis
Table 3.4 "JSON scan-[agg]"); both generate their query with `codegen.aggregate`.

Partial mode keeps each worker's table within a bound (`param agg.table_bytes`, default 8 MiB as
in the thesis' §2.1.2) and emits and clears the table when an insert would exceed it; the bound
comes from the instance settings' `agg.table_bytes`, else the environment variable
JUMPGATE_AGG_TABLE_BYTES, else the default (`common.aggregation_params`, which the scans with a
fused aggregate send too). Complete and final mode grow without bound and report the table size
in the phase stats (`agg_table_bytes`).
"""
from __future__ import annotations

from ...contract.ntf import generate_ntf
from ...dataflow.plan import AggMode, Aggregate, LogicalPlan
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
from .codegen.aggregate import generate_aggregate_query
from .common import (
    DEFAULT_TABLE_BYTES,
    aggregation_params,
    filter_project_chain,
    ntf_input_verdict,
    tcp_outputs,
)
from .process import ProcessNca
from .support import codegen_support

MAX_THREADS = 4  # workers take whole input streams; more help only with as many streams
TRANSPORTS = ("tcp", "udp")  # udp: docs/udp-transport.md (e.g. a final aggregation after a switch)


class AggregateNca(NcaImplementation):
    name = "software.aggregate"
    keyed_streams = True  # its process runtime speaks keyed streams (ncas/runtime/in_tcp.c)
    description = ("Hash aggregation, complete, partial (bounded table, evicting when full) or final, over NTF "
                   "input, with filters and projections of its groups fused in (generated C)")
    operation_kinds = ("aggregate", "filter", "project")

    def support(self) -> Support:
        return codegen_support({"aggregate": "over NTF from another NCA (TCP or UDP)",
                                "filter": "fused after the aggregate", "project": "fused after the aggregate"},
                               aggregates=True)

    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        if not anchor:
            return Verdict.no("not a format converter")
        op = plan.op(anchor)
        if not isinstance(op, Aggregate):
            return Verdict.no(f"starts with an 'aggregate' operation, not '{op.kind}'")
        return Verdict.yes(filter_project_chain(plan, anchor))

    def match_input(self, plan, ops, inputs) -> Verdict[None]:
        return ntf_input_verdict(plan, ops, inputs, TRANSPORTS)

    def match_output(self, plan, ops, inputs, wanted) -> Verdict[tuple[OutputSpec, ...]]:
        return tcp_outputs(plan, ops, wanted, generate_ntf(plan.schemas[ops[-1]]), TRANSPORTS)

    def resources(self, plan, ops) -> ResourceRequest:
        agg = plan.op(ops[0])
        memory = 64 + (MAX_THREADS * DEFAULT_TABLE_BYTES >> 20 if agg.mode is AggMode.PARTIAL else 0)
        return ResourceRequest(cores=1, max_cores=MAX_THREADS, memory_mb=memory)

    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        return AggregateInstance(spec, context)


class AggregateInstance(ProcessNca):
    driver = "ntf_relay"

    def generate_source(self) -> str:
        ops = self.spec.operations()
        schema = self.spec.plan.input_schema(ops[0].input)  # type: ignore[union-attr]
        return generate_aggregate_query(ops, self.spec.outputs[0].spec.layout, schema)

    def params(self) -> dict[str, str]:
        return aggregation_params(self.spec.operations(), self.context)
