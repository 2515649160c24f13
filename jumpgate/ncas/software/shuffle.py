"""The shuffle NCA: hash partitioning of NTF tuples to P destinations (contract §1 `shuffle`).

It takes one shuffle whose input arrives as NTF over tcp, evaluates the key expressions
(generated C), hashes the key values with jg_hash v1 (docs/hashing.md: the documented hash, so
other systems can co-partition with it) and forwards each tuple's bytes unchanged to output port
`h mod P`; port i carries `NAME[i]` in the input's layout. It runs on the `ntf_relay` driver.

Shuffles fuse where they can save a hop: onto the end of a JSON scan chain
(`software.scan_json`) and of an NTF filter/project chain (`software.ntf_filter_project`). This
NCA takes the ones that cannot fuse: after a read that feeds several operations, after an
aggregate or a join of another NCA.
"""
from __future__ import annotations

from ...dataflow.plan import LogicalPlan, Shuffle
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
from .common import RelayInstance, ntf_input_verdict, relay_resources, tcp_outputs, wide_shuffle_key
from .support import codegen_support


class ShuffleNca(NcaImplementation):
    name = "software.shuffle"
    keyed_streams = True  # its process runtime speaks keyed streams (ncas/runtime/in_tcp.c)
    description = ("Hash partitioning of NTF tuples to P outputs by jg_hash v1 of the key expressions "
                   "(docs/hashing.md); tuples are forwarded unchanged")
    operation_kinds = ("shuffle",)

    def support(self) -> Support:
        return codegen_support({"shuffle": "over NTF from another NCA; P outputs by jg_hash v1 of the keys"},
                               aggregates=False)

    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        if not anchor:
            return Verdict.no("not a format converter")
        op = plan.op(anchor)
        if not isinstance(op, Shuffle):
            return Verdict.no(f"takes only 'shuffle' operations, not '{op.kind}'")
        why = wide_shuffle_key(op)
        if why:
            return Verdict.no(why)
        return Verdict.yes((anchor,))

    def match_input(self, plan, ops, inputs) -> Verdict[None]:
        return ntf_input_verdict(plan, ops, inputs)

    def match_output(self, plan, ops, inputs, wanted) -> Verdict[tuple[OutputSpec, ...]]:
        # every output is the input's layout, unchanged: the bytes are forwarded
        return tcp_outputs(plan, ops, wanted, inputs[0].layout)

    def resources(self, plan, ops) -> ResourceRequest:
        return relay_resources(plan, ops)

    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        return RelayInstance(spec, context)
