"""The ORC and Parquet scan NCAs: read, with the filters and projections after it fused in, and a
trailing aggregate (its partial mode is the thesis' "ORC scan-[agg]", Table 3.4) or shuffle, as
the JSON scan does — the generated query is format-independent and shared with it (file_scan.py).

Reading runs in the native drivers ncas/runtime/scan_orc.cpp and scan_parquet.cpp (Arrow C++ from
the pyarrow wheel, see arrow_cpp.py); they read only the columns the query uses, split the work by
stripe / row group across threads, and skip the stripes / row groups whose statistics rule out the
filter (`prune.N` params from pruning.py; skipped counts in the phase stats). Two plugins rather
than one so that `GET /v1/ncas` and the mapping decisions say plainly which format each takes.
"""
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import BinaryIO, ClassVar

from ...dataflow.plan import FileFormat
from . import arrow_cpp
from .file_scan import MAX_THREADS, FileScanInstance, FileScanNca
from .pruning import prune_params

MIN_BYTES_PER_THREAD = 4 << 20  # compressed: a few MB of ORC/Parquet is a lot of rows
BATCH_ROWS_SETTING = "scan.batch_rows"  # instance setting passed through as a param


class ColumnarScanInstance(FileScanInstance):
    def params(self) -> dict[str, str]:
        params = super().params()
        params.update(prune_params(self.spec.operations()))
        batch = self.context.settings.get(BATCH_ROWS_SETTING)
        if batch:
            params[BATCH_ROWS_SETTING] = str(int(batch))
        return params


class ColumnarScanNca(FileScanNca):
    """Shared by the ORC and Parquet plugins (Arrow C++ readers); each sets the format, the driver,
    its unit and how reasons name its files."""

    abstract = True
    unit: ClassVar[str] = ""  # what the work is split by, for descriptions
    operation_kinds = ("read", "filter", "project", "aggregate", "shuffle")
    # Workers take whole stripes / row groups: more threads than units would idle, and a few MB
    # of compressed input per thread is the least worth a thread.
    min_bytes_per_thread = MIN_BYTES_PER_THREAD
    instance_class = ColumnarScanInstance

    def unavailable(self) -> str:
        why = arrow_cpp.unavailable_reason()
        return f"Arrow C++ is unavailable: {why}" if why else ""

    def max_workers(self, paths: Sequence[str]) -> int:
        return count_units(self.format, paths, limit=MAX_THREADS)

    def capabilities(self) -> dict:
        caps = super().capabilities()
        caps["formats"] = [self.format.value]
        caps["splits_by"] = self.unit
        why = arrow_cpp.unavailable_reason()
        if why:
            caps["unavailable"] = why
        return caps


class OrcScanNca(ColumnarScanNca):
    name = "software.scan_orc"
    description = ("ORC scan on Apache ORC C++ through Arrow, split by stripe, skipping stripes by their "
                   "statistics, with filters, projections and a final shuffle or aggregate fused in (generated C)")
    format = FileFormat.ORC
    driver = "scan_orc"
    unit = "stripe"
    reads_only = reads_files = "orc files"


class ParquetScanNca(ColumnarScanNca):
    name = "software.scan_parquet"
    description = ("Parquet scan on Arrow's Parquet reader, split by row group, skipping row groups by their "
                   "statistics, with filters, projections and a final shuffle or aggregate fused in (generated C)")
    format = FileFormat.PARQUET
    driver = "scan_parquet"
    unit = "row group"
    reads_only = reads_files = "parquet files"


def count_units(fmt: FileFormat, paths, limit: int) -> int:
    """Stripes or row groups in `paths`, counted up to `limit` (footers only; a file that cannot be
    read counts as one: the NCA reports it properly when it runs)."""
    n = 0
    for p in paths:
        if n >= limit:
            break
        try:
            with open_real_path(p) as f:
                if fmt is FileFormat.ORC:
                    import pyarrow.orc as orc

                    n += max(1, orc.ORCFile(f).nstripes)
                else:
                    import pyarrow.parquet as pq

                    n += max(1, pq.ParquetFile(f).metadata.num_row_groups)
        except Exception:  # any unreadable file
            n += 1
    return n


def open_real_path(path: str) -> BinaryIO:
    """`path`, a real path the storage resolved (absolute, every symlink already followed and
    checked), opened for reading one component at a time without following any symlink: a file
    replaced since the check by a symlink (to a file outside the data root, or to a FIFO that would
    block the server) raises OSError instead of being read, as the NCA's own open refuses it."""
    parts = PurePosixPath(path).parts
    if len(parts) < 2 or parts[0] != "/" or ".." in parts:
        raise OSError(errno.EINVAL, "not an absolute real path", path)
    dir_fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[1:-1]:
            fd = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = fd
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")
