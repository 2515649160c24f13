"""testing.plain_json_scan: read JSON Lines with filters and projections fused in, on its own
driver (plain_scan.c). The operator interface mirrors the built-in JSON scan's, minus what this
driver does not do (fused aggregates and shuffles, UDP)."""
from __future__ import annotations

from pathlib import Path

from jumpgate.contract.ntf import generate_ntf
from jumpgate.dataflow.plan import FileFormat, LogicalPlan, Read
from jumpgate.nca.fusion import fusable_chain
from jumpgate.nca.interface import (
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
from jumpgate.ncas.software.codegen import generate_scan_query
from jumpgate.ncas.software.drivers import SourceDriver, register_driver
from jumpgate.ncas.software.process import ProcessNca

# Registered on import, which loading the entry point does before any query is compiled.
DRIVER = register_driver(SourceDriver("testing_plain_json_scan", (Path(__file__).with_name("plain_scan.c"),)))
MARKER_ENV = "JUMPGATE_TEST_PLAIN_SCAN_LOG"  # the driver appends a line here each phase (plain_scan.c)
MAX_THREADS = 8  # the driver gives each worker whole files


class PlainJsonScanNca(NcaImplementation):
    name = "testing.plain_json_scan"
    description = "test NCA from outside Jumpgate: JSON Lines scan with filters and projections on its own C driver"
    operation_kinds = ("read", "filter", "project")

    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        if not anchor:
            return Verdict.no("not a format converter")
        op = plan.op(anchor)
        if not isinstance(op, Read):
            return Verdict.no(f"takes only 'read' as its first operation, not '{op.kind}'")
        if op.format is not FileFormat.JSON:
            return Verdict.no(f"reads only JSON Lines, not {op.format.value}")
        return Verdict.yes(fusable_chain(plan, anchor, ("filter", "project")))

    def match_input(self, plan, ops, inputs) -> Verdict[None]:
        if len(inputs) != 1 or inputs[0].transport != FILE or inputs[0].format != FileFormat.JSON.value:
            got = ", ".join(i.describe() for i in inputs) or "nothing"
            return Verdict.no(f"reads JSON Lines files only, got {got}")
        return Verdict.yes()

    def match_output(self, plan, ops, inputs, wanted) -> Verdict[tuple[OutputSpec, ...]]:
        if any(w not in (None, "tcp") for w in wanted):
            return Verdict.no("sends over tcp only")
        # one stream per worker thread, each on its own connection
        return Verdict.yes((OutputSpec(StreamSpec(NTF, "tcp", generate_ntf(plan.schemas[ops[-1]])), streams=None),))

    def resources(self, plan, ops) -> ResourceRequest:
        return ResourceRequest(cores=1, max_cores=max(1, min(MAX_THREADS, len(plan.op(ops[0]).paths))))

    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        return PlainJsonScanInstance(spec, context)


class PlainJsonScanInstance(ProcessNca):
    driver = DRIVER.name

    def generate_source(self) -> str:
        return generate_scan_query(self.spec.operations(), self.spec.outputs[0].spec.layout)
