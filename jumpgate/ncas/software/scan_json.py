"""The JSON Lines scan NCA: read, with any following filters and projections fused in
(thesis Table 3.4 "JSON scan-[agg]"; Appendix A.2 is its operator interface), and a shuffle
that ends the chain (its P outputs are the scan's output ports; codegen/shuffle.py), or an
aggregate with its own filters and projections (codegen/aggregate.py; see aggregate.py).

Parsing runs on simdjson in the precompiled runtime; the filters and projections are generated C.
"""
from __future__ import annotations

import os

from ...compiler.mapping import fusable_chain
from ...compiler.ntf import generate_ntf
from ...dataflow.plan import Aggregate, FileFormat, LogicalPlan, Read, Shuffle, output_count
from ...nca.interface import (
    FILE,
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
from .aggregate import aggregation_params, fuse_trailing_aggregate
from .codegen import generate_scan_query
from .codegen.aggregate import generate_aggregate_query
from .codegen.shuffle import generate_scan_shuffle_query
from .ntf_filter_project import fuse_trailing_shuffle
from .process import ProcessNca

TRANSPORTS = ("tcp", "udp")  # udp: docs/udp-transport.md (towards a switch, one tuple per datagram)
MAX_THREADS = 64
MIN_BYTES_PER_THREAD = 16 << 20


class JsonScanNca(NcaImplementation):
    name = "software.scan_json"
    keyed_streams = True  # its process runtime speaks keyed streams (ncas/runtime/in_tcp.c)
    description = ("JSON Lines scan on simdjson, with filters, projections and a final shuffle or aggregate "
                   "fused in (generated C)")
    operation_kinds = ("read", "filter", "project", "shuffle", "aggregate")

    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        if not anchor:
            return Verdict.no("not a format converter")
        op = plan.op(anchor)
        if not isinstance(op, Read):
            return Verdict.no(f"takes only 'read' as its first operation, not '{op.kind}'")
        if op.format is not FileFormat.JSON:
            return Verdict.no(f"reads only JSON Lines, not {op.format.value}")
        chain = fusable_chain(plan, anchor, ("filter", "project"))
        fused = fuse_trailing_aggregate(plan, chain)
        return Verdict.yes(fused if fused != chain else fuse_trailing_shuffle(plan, chain))

    def match_input(self, plan, ops, inputs) -> Verdict[None]:
        if len(inputs) != 1 or inputs[0].transport != FILE or inputs[0].format != FileFormat.JSON.value:
            got = ", ".join(i.describe() for i in inputs) or "nothing"
            return Verdict.no(f"reads JSON Lines files only, got {got}")
        return Verdict.yes()

    def match_output(self, plan, ops, inputs, wanted) -> Verdict[tuple[OutputSpec, ...]]:
        transport = wanted[0] if wanted and wanted[0] else "tcp"
        if transport not in TRANSPORTS or any(w and w != transport for w in wanted):
            return Verdict.no(f"sends over {', '.join(TRANSPORTS)} only, not {', '.join(w for w in wanted if w)}")
        layout = generate_ntf(plan.schemas[ops[-1]])
        # one stream per worker thread: each thread sends its share of the file on its own connection;
        # a fused shuffle has one port per output, all in the same layout
        ports = output_count(plan.op(ops[-1]))
        return Verdict.yes(tuple(OutputSpec(StreamSpec(NTF, transport, layout), streams=None) for _ in range(ports)))

    def resources(self, plan, ops) -> ResourceRequest:
        # Workers split the input by byte ranges cut at line boundaries: more threads pay for
        # inputs of more than a few MB (one chunk each); small files get one.
        total = sum(os.path.getsize(p) for p in plan.op(ops[0]).paths)
        return ResourceRequest(cores=1, max_cores=max(1, min(MAX_THREADS, total // MIN_BYTES_PER_THREAD)))

    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        return JsonScanInstance(spec, context)


class JsonScanInstance(ProcessNca):
    driver = "scan_json"

    def generate_source(self) -> str:
        layout = self.spec.outputs[0].spec.layout
        if isinstance(self.spec.operations()[-1], Shuffle):
            return generate_scan_shuffle_query(self.spec.operations(), layout)
        if any(isinstance(op, Aggregate) for op in self.spec.operations()):
            return generate_aggregate_query(self.spec.operations(), layout)
        return generate_scan_query(self.spec.operations(), layout)

    def params(self) -> dict[str, str]:
        return aggregation_params(self.spec.operations(), self.context)
