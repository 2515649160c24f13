"""One build step of the NCA cache, safe under concurrency: the runtime, the Arrow drivers, the
DPDK transport and plugins' own drivers are each a directory that appears complete or not at all.

Several jobs, server processes and test workers may want the same directory at once. The first
takes a file lock and builds into a temporary directory beside the target; a stamp file written
last marks the build complete, and a rename moves it into place, so a reader that sees the stamp
sees every file. Whoever waited on the lock finds the stamp and builds nothing. A build that
crashed leaves no stamp: its directory is replaced, its temporary directory removed.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

STAMP = ".complete"


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created if missing), across threads and processes."""
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def is_complete(target: Path) -> bool:
    return (target / STAMP).exists()


def stamped_build(target: Path, build: Callable[[Path], None], stamp: dict, *, lock: Path | None = None) -> Path:
    """`target`, built first by `build(tmp_dir)` unless a complete build is already there.

    `stamp` (JSON) is recorded in the stamp file with the time, to tell what a build was made
    from. `lock` defaults to `<target>.lock` beside it; an exception from `build` propagates and
    leaves nothing behind."""
    if is_complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(lock or target.with_name(f"{target.name}.lock")):
        if is_complete(target):  # another process built it while we waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            build(tmp)
            (tmp / STAMP).write_text(json.dumps({**stamp, "built": time.time(), "pid": os.getpid()}))
            if target.exists():  # left over from a build that crashed before its stamp
                shutil.rmtree(target)
            os.rename(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def beside_runtime(runtime: Path, name: str) -> tuple[Path, Path]:
    """Where an optional part of a runtime build goes (`runtime/<name>`: a new runtime means a new
    part), and its lock file, in the cache directory beside the runtime's own lock."""
    return runtime / name, runtime.parent / f"{runtime.name}-{name}.lock"
