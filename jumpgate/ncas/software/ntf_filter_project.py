"""The NTF filter/project NCA: filters and projections over NTF tuples from another NCA, on the
`ntf_relay` driver (generated C, like the scan's).

It makes plans work that no fused NCA covers: a read consumed by several operations (the scan
takes only the read and fans its output out; each branch's filters and projections become one of
these), a projection after an aggregate or a join produced by another NCA, a filter on one output
of a shuffle. A chain that ends in a shuffle takes the shuffle too (one hop less). The mapper
prefers fused NCAs (fewest instances), so a chain that a scan can fuse never lands here.
"""
from __future__ import annotations

from ...compiler.mapping import fusable_chain
from ...compiler.ntf import generate_ntf
from ...dataflow.plan import LogicalPlan, Shuffle, output_count
from ...nca.interface import (
    NTF,
    InstanceContext,
    NcaImplementation,
    NcaInstance,
    NcaSpec,
    OutputSpec,
    ResourceRequest,
    StreamSpec,
    Verdict,
)
from .codegen.shuffle import generate_relay_query, is_contract_layout
from .process import ProcessNca

TRANSPORTS = ("tcp",)
MAX_THREADS = 4


def fuse_trailing_shuffle(plan: LogicalPlan, chain: tuple[str, ...]) -> tuple[str, ...]:
    """`chain` plus the shuffle that is the single consumer of its last operation, if any (the
    fusion rule: the last operation has exactly one consumer edge)."""
    consumers = plan.consumers(chain[-1])
    if len(consumers) == 1 and isinstance(consumers[0][0], Shuffle):
        return (*chain, consumers[0][0].name)
    return chain


def ntf_input_verdict(plan: LogicalPlan, ops: tuple[str, ...], inputs: tuple[StreamSpec, ...],
                      transports: tuple[str, ...] = TRANSPORTS) -> Verdict[None]:
    """One NTF input over one of `transports`, in the contract §2 layout of the first operation's
    input schema (what the runtime's NTF decoder reads)."""
    if len(inputs) != 1:
        return Verdict.no(f"reads exactly one input, got {len(inputs)}")
    spec = inputs[0]
    if spec.format != NTF or spec.transport not in transports or spec.layout is None:
        return Verdict.no(f"reads NTF over {', '.join(transports)} only, got {spec.describe()}")
    first = plan.op(ops[0])
    schema = plan.input_schema(first.input)  # type: ignore[union-attr]
    if not is_contract_layout(spec.layout, schema):
        return Verdict.no("reads only the contract §2 NTF layout of its input schema, not a custom layout")
    return Verdict.yes()


def tcp_outputs(plan: LogicalPlan, ops: tuple[str, ...], wanted: tuple[str | None, ...],
                layout, transports: tuple[str, ...] = TRANSPORTS) -> Verdict[tuple[OutputSpec, ...]]:
    """One OutputSpec per output port of the last operation (a shuffle has P), all `layout`, one
    stream per worker thread (the control plane picks the thread count), over the wanted
    transport when it is one of `transports`, else the first of them."""
    ports = output_count(plan.op(ops[-1]))
    bad = sorted({w for w in wanted if w and w not in transports})
    if bad:
        return Verdict.no(f"sends over {', '.join(transports)} only, not {', '.join(bad)}")
    chosen = [(wanted[i] if i < len(wanted) else None) or transports[0] for i in range(ports)]
    return Verdict.yes(tuple(OutputSpec(StreamSpec(NTF, t, layout), streams=None) for t in chosen))


def relay_resources(plan: LogicalPlan, ops: tuple[str, ...]) -> ResourceRequest:
    """One worker thread at least. More help only when the input arrives on several streams (the
    runtime deals whole streams to workers; a worker without a stream just ends its outputs).
    Memory: every worker has a 1 MiB send buffer per output port (a shuffle has P ports)."""
    ports = output_count(plan.op(ops[-1]))
    return ResourceRequest(cores=1, max_cores=MAX_THREADS, memory_mb=64 + ports * MAX_THREADS)


class NtfFilterProjectNca(NcaImplementation):
    name = "software.ntf_filter_project"
    keyed_streams = True  # its process runtime speaks keyed streams (ncas/runtime/in_tcp.c)
    description = ("Filters and projections over NTF input from another NCA (after a fan-out, an aggregate, "
                   "a join), optionally ending in a shuffle (generated C on the NTF relay)")
    operation_kinds = ("filter", "project", "shuffle")

    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        if not anchor:
            return Verdict.no("not a format converter")
        op = plan.op(anchor)
        if op.kind not in ("filter", "project"):
            return Verdict.no(f"starts with a 'filter' or 'project' operation, not '{op.kind}'")
        return Verdict.yes(fuse_trailing_shuffle(plan, fusable_chain(plan, anchor, ("filter", "project"))))

    def match_input(self, plan, ops, inputs) -> Verdict[None]:
        return ntf_input_verdict(plan, ops, inputs)

    def match_output(self, plan, ops, inputs, wanted) -> Verdict[tuple[OutputSpec, ...]]:
        layout = generate_ntf(plan.schemas[ops[-1]])
        return tcp_outputs(plan, ops, wanted, layout)

    def resources(self, plan, ops) -> ResourceRequest:
        return relay_resources(plan, ops)

    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        return RelayInstance(spec, context)


class RelayInstance(ProcessNca):
    """An NTF-reading chain on the `ntf_relay` driver (this NCA and the shuffle NCA)."""

    driver = "ntf_relay"

    def generate_source(self) -> str:
        ops = self.spec.operations()
        schema = self.spec.plan.input_schema(ops[0].input)
        return generate_relay_query(ops, schema, self.spec.inputs[0].spec.layout, self.spec.outputs[0].spec.layout)
