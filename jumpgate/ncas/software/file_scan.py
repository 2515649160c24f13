"""What every file scan NCA shares: read one file format, with the filters and projections after
it fused in, and a trailing aggregate with its own filters and projections (codegen/aggregate.py)
or a shuffle that ends the chain (its P outputs are the scan's output ports; codegen/shuffle.py).

The generated query does not depend on the format: the native driver reads the file and hands
the row function typed columns. A format only says which driver reads it, how its work splits
across threads, and how the operator interface's reasons name it: JSON Lines (scan_json.py),
ORC and Parquet (scan_columnar.py).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ...contract.ntf import generate_ntf
from ...dataflow.plan import Aggregate, FileFormat, LogicalPlan, Read, Shuffle, output_count
from ...nca.interface import (
    FILE,
    NTF,
    CompileResult,
    Destination,
    Endpoint,
    InstanceContext,
    NcaImplementation,
    NcaInstance,
    NcaSpec,
    OutputSpec,
    PhaseStats,
    ResourceRequest,
    RuntimeFilterBlob,
    StreamSpec,
    Verdict,
)
from ...nca.support import Support
from .build import build_member_object
from .codegen import generate_scan_query
from .codegen.aggregate import generate_aggregate_query
from .codegen.shuffle import generate_scan_shuffle_query
from .common import (
    aggregation_params,
    filter_project_chain,
    fuse_trailing_aggregate,
    fuse_trailing_shuffle,
    read_columns_used,
)
from .process import ProcessNca
from .scan_sharing import SharedScanRun, fits, share_key
from .support import codegen_support
from .udp_transport import preferred_transport, transport_setting_problem

if TYPE_CHECKING:
    from ...nca.sharing import Group, Ticket

log = logging.getLogger(__name__)

TRANSPORTS = ("tcp", "udp")  # udp: docs/udp-transport.md (towards a switch, up to four tuples per datagram)
MAX_THREADS = 64


class FileScanInstance(ProcessNca):
    """One scan: the query generated for its chain, on its format's driver.

    With the service's Sharing (InstanceContext.sharing) a scan that may share starts
    nothing before its stage runs: there it runs alone as always, or as a member of a group of
    scans of the same files (scan_sharing.py, docs/shared-scans.md)."""

    def __init__(self, spec: NcaSpec, context: InstanceContext, driver: str) -> None:
        super().__init__(spec, context)
        self.driver = driver
        self.generated = ""  # the generated query: a shared scan's member
        self._ticket: Ticket | None = None
        self._group: Group | None = None
        self._routes: list[list[Destination]] = []
        self._filters_in: dict[int, RuntimeFilterBlob] = {}

    def probe_filters(self) -> list:
        """The runtime filters it applies, by slot."""
        return sorted((f for f in self.spec.runtime_filters if f.role == "probe"), key=lambda f: f.slot)

    def generate_source(self) -> str:
        ops = self.spec.operations()
        layout = self.spec.outputs[0].spec.layout
        if isinstance(ops[-1], Shuffle):
            source = generate_scan_shuffle_query(ops, layout)
        elif any(isinstance(op, Aggregate) for op in ops):
            source = generate_aggregate_query(ops, layout, runtime_filters=[f.columns for f in self.probe_filters()])
        else:
            source = generate_scan_query(ops, layout, runtime_filters=[f.columns for f in self.probe_filters()])
        self.generated = source
        return source

    def params(self) -> dict[str, str]:
        return aggregation_params(self.spec.operations(), self.context)

    # -- shared scans (docs/shared-scans.md) ------------------------------------------------

    def compile(self) -> CompileResult:
        self._ticket = self._announce()  # first: its peers wait for it from now on
        result = super().compile()
        if self._ticket is not None:  # now, beside its own binary: a group then only links
            build_member_object(self.generated, Path(self.context.cache_dir))
        return result

    def _announce(self) -> Ticket | None:
        sharing = self.context.sharing
        if sharing is None:
            return None
        key, why = share_key(self)
        if key is None:
            log.debug("job %s %s does not share its scan: %s", self.spec.job_id, self.spec.id, why)
            return None
        return sharing.announce(key, self)

    def allocate(self) -> list[Endpoint]:
        if self._ticket is None:
            return super().allocate()
        return []  # a scan has no network inputs; its process starts when its stage runs

    def configure(self, destinations: list[list[Destination]]) -> None:
        if self._ticket is None:
            return super().configure(destinations)
        self._routes = destinations

    def accept_runtime_filter(self, slot: int, blob: RuntimeFilterBlob) -> None:
        if self._ticket is None:
            return super().accept_runtime_filter(slot, blob)
        self._filters_in[slot] = blob

    def destinations(self) -> list[list[Destination]]:
        return self._routes

    def runtime_filters_received(self) -> dict[int, RuntimeFilterBlob]:
        return self._filters_in

    def execute(self, phase: int) -> PhaseStats:
        if self._ticket is None:
            return super().execute(phase)
        self._group = group = self._ticket.join(fits)
        if not group.alone:
            return self._run().run(self)
        super().allocate()  # alone: as without sharing, only later
        super().configure(self._routes)
        for slot, blob in self._filters_in.items():
            super().accept_runtime_filter(slot, blob)
        return super().execute(phase)

    def progress(self) -> PhaseStats | None:
        return None if self._shared() else super().progress()

    def activity(self) -> object | None:
        return self._run().activity() if self._shared() else super().activity()

    def destroy(self) -> None:
        if self._ticket is not None:
            self._ticket.withdraw()
        if self._shared():
            self._run().leave(self)
        super().destroy()

    def _shared(self) -> bool:
        return self._group is not None and not self._group.alone

    def _run(self) -> SharedScanRun:
        return self._group.runner(SharedScanRun)


class FileScanNca(NcaImplementation):
    """A file scan plugin. Subclasses describe their format: `format`, the `driver` that reads
    it, `min_bytes_per_thread` (the least input worth a worker thread), how reasons name it
    (`reads_only`, `reads_files`) and its `instance_class`; `unavailable` when the host cannot run
    it, and `work` when the files' structure limits the threads or the scan reads less than the
    whole files."""

    abstract = True
    format: ClassVar[FileFormat]
    driver: ClassVar[str] = ""
    min_bytes_per_thread: ClassVar[int] = 1
    reads_only: ClassVar[str] = ""  # "reads only <this>, not <the read's format>"
    reads_files: ClassVar[str] = ""  # "reads <this> only, got <the inputs>"
    instance_class: ClassVar[type[FileScanInstance]] = FileScanInstance
    operation_kinds = ("read", "filter", "project", "shuffle", "aggregate")
    runtime_filter_probe = True  # docs/runtime-filters.md: applies_runtime_filters says when
    keyed_streams = True  # its process runtime speaks keyed streams (ncas/runtime/in_tcp.c)

    def unavailable(self) -> str:
        """Why this host cannot run the scan, or "" when it can."""
        return ""

    def work(self, read: Read, columns: set[str]) -> tuple[int, int]:
        """(the most worker threads the files' structure can keep busy, the bytes the scan reads)
        when it needs `columns` of `read`. A row format reads every byte of its files."""
        return MAX_THREADS, sum(read.sizes)  # sizes from the storage at parse time

    def support(self) -> Support:
        fused = "fused after the read"
        return codegen_support({"read": self.reads_files, "filter": fused, "project": fused,
                                "aggregate": "fused after the read's filters and projections, as their single consumer",
                                "shuffle": "fused at the end of the read's filters and projections"}, aggregates=True)

    def applies_runtime_filters(self, plan: LogicalPlan, ops: tuple[str, ...]) -> Verdict[None]:
        """After its filters: before writing NTF in a plain scan (codegen/scan.py), before
        aggregating in a scan with a fused aggregation (codegen/aggregate.py). Not when a shuffle
        is fused in (its query is generated elsewhere)."""
        fused = [plan.op(n) for n in ops if isinstance(plan.op(n), Shuffle)]
        if fused:
            return Verdict.no(f"its {fused[0].kind} '{fused[0].name}' is fused into the scan")
        return Verdict.yes()

    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        if not anchor:
            return Verdict.no("not a format converter")
        op = plan.op(anchor)
        if not isinstance(op, Read):
            return Verdict.no(f"takes only 'read' as its first operation, not '{op.kind}'")
        if op.format is not self.format:
            return Verdict.no(f"reads only {self.reads_only}, not {op.format.value}")
        why = self.unavailable()
        if why:
            return Verdict.no(why)
        chain = filter_project_chain(plan, anchor)
        fused = fuse_trailing_aggregate(plan, chain)
        return Verdict.yes(fused if fused != chain else fuse_trailing_shuffle(plan, chain))

    def match_input(self, plan, ops, inputs) -> Verdict[None]:
        if len(inputs) != 1 or inputs[0].transport != FILE or inputs[0].format != self.format.value:
            got = ", ".join(i.describe() for i in inputs) or "nothing"
            return Verdict.no(f"reads {self.reads_files} only, got {got}")
        return Verdict.yes()

    def match_output(self, plan, ops, inputs, wanted) -> Verdict[tuple[OutputSpec, ...]]:
        transport = wanted[0] if wanted and wanted[0] else preferred_transport(TRANSPORTS)
        if transport is None:
            return Verdict.no(transport_setting_problem())
        if transport not in TRANSPORTS or any(w and w != transport for w in wanted):
            return Verdict.no(f"sends over {', '.join(TRANSPORTS)} only, not {', '.join(w for w in wanted if w)}")
        layout = generate_ntf(plan.schemas[ops[-1]])
        # one stream per worker thread: each thread sends its share of the files on its own
        # connection; a fused shuffle has one port per output, all in the same layout
        ports = output_count(plan.op(ops[-1]))
        return Verdict.yes(tuple(OutputSpec(StreamSpec(NTF, transport, layout), streams=None) for _ in range(ports)))

    def resources(self, plan, ops) -> ResourceRequest:
        units, total = self.work(plan.op(ops[0]), read_columns_used(plan, ops))
        workers = min(MAX_THREADS, units, total // self.min_bytes_per_thread)
        return ResourceRequest(cores=1, max_cores=max(1, workers))

    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        return self.instance_class(spec, context, self.driver)
