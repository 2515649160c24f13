"""The ORC and Parquet scan NCAs: read, with the filters and projections after it fused in, and a
trailing aggregate (its partial mode is the thesis' "ORC scan-[agg]", Table 3.4) or shuffle, as
the JSON scan does — the generated query is format-independent and shared with it.

Reading runs in the native drivers ncas/runtime/scan_orc.cpp and scan_parquet.cpp (Arrow C++ from
the pyarrow wheel, see arrow_cpp.py); they read only the columns the query uses, split the work by
stripe / row group across threads, and skip the stripes / row groups whose statistics rule out the
filter (`prune.N` params from pruning.py; skipped counts in the phase stats). Two plugins rather
than one so that `GET /v1/ncas` and the mapping decisions say plainly which format each takes.
"""
from __future__ import annotations

import os
from typing import ClassVar

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
from . import arrow_cpp
from .aggregate import aggregation_params, fuse_trailing_aggregate
from .codegen import generate_scan_query
from .codegen.aggregate import generate_aggregate_query
from .codegen.shuffle import generate_scan_shuffle_query
from .ntf_filter_project import fuse_trailing_shuffle
from .process import ProcessNca
from .pruning import prune_params

TRANSPORTS = ("tcp", "udp")  # udp: docs/udp-transport.md (towards a switch, as the JSON scan)
MAX_THREADS = 64
MIN_BYTES_PER_THREAD = 4 << 20  # compressed: a few MB of ORC/Parquet is a lot of rows
BATCH_ROWS_SETTING = "scan.batch_rows"  # instance setting passed through as a param


class ColumnarScanNca(NcaImplementation):
    """Shared by the ORC and Parquet plugins; each sets the format, the driver and its unit."""

    abstract = True
    format: ClassVar[FileFormat]
    driver: ClassVar[str] = ""
    unit: ClassVar[str] = ""  # what the work is split by, for descriptions
    operation_kinds = ("read", "filter", "project", "aggregate", "shuffle")
    keyed_streams = True  # its process runtime speaks keyed streams (ncas/runtime/in_tcp.c)

    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        if not anchor:
            return Verdict.no("not a format converter")
        op = plan.op(anchor)
        if not isinstance(op, Read):
            return Verdict.no(f"takes only 'read' as its first operation, not '{op.kind}'")
        if op.format is not self.format:
            return Verdict.no(f"reads only {self.format.value} files, not {op.format.value}")
        why = arrow_cpp.unavailable_reason()
        if why:
            return Verdict.no(f"Arrow C++ is unavailable: {why}")
        chain = fusable_chain(plan, anchor, ("filter", "project"))
        fused = fuse_trailing_aggregate(plan, chain)
        return Verdict.yes(fused if fused != chain else fuse_trailing_shuffle(plan, chain))

    def match_input(self, plan, ops, inputs) -> Verdict[None]:
        if len(inputs) != 1 or inputs[0].transport != FILE or inputs[0].format != self.format.value:
            got = ", ".join(i.describe() for i in inputs) or "nothing"
            return Verdict.no(f"reads {self.format.value} files only, got {got}")
        return Verdict.yes()

    def match_output(self, plan, ops, inputs, wanted) -> Verdict[tuple[OutputSpec, ...]]:
        transport = wanted[0] if wanted and wanted[0] else "tcp"
        if transport not in TRANSPORTS or any(w and w != transport for w in wanted):
            return Verdict.no(f"sends over {', '.join(TRANSPORTS)} only, not {', '.join(w for w in wanted if w)}")
        layout = generate_ntf(plan.schemas[ops[-1]])
        # one stream per worker thread; a fused shuffle has one port per output, in the same layout
        ports = output_count(plan.op(ops[-1]))
        return Verdict.yes(tuple(OutputSpec(StreamSpec(NTF, transport, layout), streams=None) for _ in range(ports)))

    def resources(self, plan, ops) -> ResourceRequest:
        # Workers take whole stripes / row groups: more threads than units would idle, and a few
        # MB of compressed input per thread is the least worth a thread.
        paths = plan.op(ops[0]).paths
        total = sum(os.path.getsize(p) for p in paths)
        units = count_units(self.format, paths, limit=MAX_THREADS)
        return ResourceRequest(cores=1, max_cores=max(1, min(MAX_THREADS, units, total // MIN_BYTES_PER_THREAD)))

    def capabilities(self) -> dict:
        caps = super().capabilities()
        caps["formats"] = [self.format.value]
        caps["splits_by"] = self.unit
        why = arrow_cpp.unavailable_reason()
        if why:
            caps["unavailable"] = why
        return caps

    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        return ColumnarScanInstance(spec, context, self.driver)


class OrcScanNca(ColumnarScanNca):
    name = "software.scan_orc"
    description = ("ORC scan on Apache ORC C++ through Arrow, split by stripe, skipping stripes by their "
                   "statistics, with filters, projections and a final shuffle or aggregate fused in (generated C)")
    format = FileFormat.ORC
    driver = "scan_orc"
    unit = "stripe"


class ParquetScanNca(ColumnarScanNca):
    name = "software.scan_parquet"
    description = ("Parquet scan on Arrow's Parquet reader, split by row group, skipping row groups by their "
                   "statistics, with filters, projections and a final shuffle or aggregate fused in (generated C)")
    format = FileFormat.PARQUET
    driver = "scan_parquet"
    unit = "row group"


def count_units(fmt: FileFormat, paths, limit: int) -> int:
    """Stripes or row groups in `paths`, counted up to `limit` (footers only; a file that cannot be
    read counts as one: the NCA reports it properly when it runs)."""
    n = 0
    for p in paths:
        if n >= limit:
            break
        try:
            if fmt is FileFormat.ORC:
                import pyarrow.orc as orc

                n += max(1, orc.ORCFile(p).nstripes)
            else:
                import pyarrow.parquet as pq

                n += max(1, pq.ParquetFile(p).metadata.num_row_groups)
        except Exception:  # any unreadable file
            n += 1
    return n


class ColumnarScanInstance(ProcessNca):
    def __init__(self, spec: NcaSpec, context: InstanceContext, driver: str) -> None:
        super().__init__(spec, context)
        self.driver = driver

    def generate_source(self) -> str:
        ops = self.spec.operations()
        layout = self.spec.outputs[0].spec.layout
        if isinstance(ops[-1], Shuffle):
            return generate_scan_shuffle_query(ops, layout)
        if any(isinstance(op, Aggregate) for op in ops):
            return generate_aggregate_query(ops, layout)
        return generate_scan_query(ops, layout)

    def params(self) -> dict[str, str]:
        params = aggregation_params(self.spec.operations(), self.context)
        params.update(prune_params(self.spec.operations()))
        batch = self.context.settings.get(BATCH_ROWS_SETTING)
        if batch:
            params[BATCH_ROWS_SETTING] = str(int(batch))
        return params
