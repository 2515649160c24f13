"""The ORC and Parquet scan NCAs: read, with the filters and projections after it fused in, and a
trailing aggregate (its partial mode is the thesis' "ORC scan-[agg]", Table 3.4) or shuffle, as
the JSON scan does — the generated query is format-independent and shared with it (file_scan.py).

Reading runs in the native drivers ncas/runtime/scan_orc.cpp and scan_parquet.cpp (Arrow C++ from
the pyarrow wheel, see arrow_cpp.py); they read only the columns the query uses, split the work by
stripe / row group across threads, and skip the stripes / row groups whose statistics rule out the
filter (`prune.N` params from pruning.py; skipped counts in the phase stats). A scan asks for a
thread per 4 MB of the compressed bytes of the columns it reads (`columnar_work`: Parquet's column
chunks; an ORC file's share by its column count), up to its stripes / row groups: a query of one
column of a wide table is a small scan, whatever the files' size. Two plugins rather
than one so that `GET /v1/ncas` and the mapping decisions say plainly which format each takes.
"""
from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import BinaryIO, ClassVar

from ...dataflow.plan import FileFormat, Read
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

    def work(self, read: Read, columns: set[str]) -> tuple[int, int]:
        # A query reading one narrow column of wide files is a small scan: another thread would
        # cost more (its start, its stream, merging its groups) than the share of work it takes.
        return columnar_work(self.format, read.paths, read.sizes, columns,
                             limit=(MAX_THREADS, MAX_THREADS * self.min_bytes_per_thread))

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


def columnar_work(fmt: FileFormat, paths: Sequence[str], sizes: Sequence[int], columns: set[str],
                  limit: tuple[int, int]) -> tuple[int, int]:
    """(stripes or row groups, compressed bytes of the `columns` read) in `paths`, from the footers
    only; counting stops once both reach `limit`. Parquet gives each column chunk's size; ORC's
    footer does not (its streams are listed per stripe), so an ORC file counts the share of its
    data that the columns are of its columns. A file that cannot be read counts as one unit of
    its whole size: the NCA reports it properly when it runs."""
    units = total = 0
    for i, p in enumerate(paths):
        if units >= limit[0] and total >= limit[1]:
            break
        try:
            footer = _footer(fmt, p)
            n, size = footer.units, footer.bytes_of(columns)
        except Exception:  # any unreadable file
            n, size = 1, sizes[i] if i < len(sizes) else 0
        units += max(1, n)
        total += size
    return units, total


@dataclass(frozen=True)
class _Footer:
    """What sizing a scan needs of one file's footer: its stripes or row groups, and the compressed
    bytes per column (Parquet: each column chunk's path and size; ORC: the file's data and its
    top-level column names, shared out by count)."""

    units: int
    chunks: tuple[tuple[str, int], ...] = ()
    orc_names: tuple[str, ...] = ()
    orc_bytes: int = 0

    def bytes_of(self, columns: set[str]) -> int:
        if self.orc_names:
            used = sum(1 for n in self.orc_names if n in columns)
            return self.orc_bytes * used // len(self.orc_names)
        # "a.b" for a nested field b of a; a flat name may hold dots
        return sum(size for path, size in self.chunks if path in columns or path.split(".", 1)[0] in columns)


def _footer(fmt: FileFormat, path: str) -> _Footer:
    """`path`'s footer, read once per file identity (device, inode, size, modification time):
    every job over the same files sizes its scans again, and reading 25 Parquet footers cost some
    15 ms of each TPC-H query's submit. A file changed in place gets a new size or time, so it is
    read again (one rewritten to the same size within the clock's tick would be sized by its old
    footer: only a thread count, never what is read)."""
    # lstat: no file is read on a hit, and a path whose last part became a symlink misses and
    # goes through open_real_path, which refuses it
    st = os.stat(path, follow_symlinks=False)
    return _read_footer(fmt, path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _read_footer(fmt: FileFormat, path: str, dev: int, ino: int, size: int, mtime_ns: int) -> _Footer:
    """The footer of that version of `path` (the identity is the cache key only)."""
    with open_real_path(path) as f:
        return _orc_footer(f) if fmt is FileFormat.ORC else _parquet_footer(f)


def _parquet_footer(f: BinaryIO) -> _Footer:
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(f).metadata
    chunks: dict[str, int] = {}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            chunks[chunk.path_in_schema] = chunks.get(chunk.path_in_schema, 0) + chunk.total_compressed_size
    return _Footer(meta.num_row_groups, tuple(chunks.items()))


def _orc_footer(f: BinaryIO) -> _Footer:
    import pyarrow.orc as orc

    file = orc.ORCFile(f)
    return _Footer(file.nstripes, orc_names=tuple(file.schema.names), orc_bytes=file.content_length)


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
