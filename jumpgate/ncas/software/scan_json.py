"""The JSON Lines scan NCA: read, with any following filters and projections fused in
(thesis Table 3.4 "JSON scan-[agg]"; Appendix A.2 is its operator interface), and a shuffle
that ends the chain or an aggregate with its own filters and projections (file_scan.py).

Parsing runs on simdjson in the precompiled runtime; the filters and projections are generated C.
"""
from __future__ import annotations

from ...dataflow.plan import FileFormat
from .file_scan import FileScanInstance, FileScanNca

MIN_BYTES_PER_THREAD = 16 << 20


class JsonScanInstance(FileScanInstance):
    """One JSON Lines scan (the driver splits the files by byte ranges)."""


class JsonScanNca(FileScanNca):
    name = "software.scan_json"
    description = ("JSON Lines scan on simdjson, with filters, projections and a final shuffle or aggregate "
                   "fused in (generated C)")
    format = FileFormat.JSON
    driver = "scan_json"
    # Workers split the input by byte ranges cut at line boundaries: more threads pay for inputs of
    # more than a few MB (one chunk each); small files get one.
    min_bytes_per_thread = MIN_BYTES_PER_THREAD
    reads_only = "JSON Lines"
    reads_files = "JSON Lines files"
    instance_class = JsonScanInstance
