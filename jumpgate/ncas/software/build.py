"""Build software NCAs: the precompiled runtime (once per runtime source and compiler version) and
one small binary per generated query (generated C + a driver's objects + libjgrt.a).

Everything lands in a cache directory and is keyed by content, so a query that was built before
costs a hash and a `stat`. Generated C holds no operation or column names (its error messages
reach the process with its configuration: codegen/messages.py), so requests that differ only in
names, as a client's re-runs under new column ids do, share one binary. Builds are safe to run concurrently from several jobs or test workers:
the runtime (like every optional part built beside it) is built under a file lock into a
temporary directory that is renamed into place (buildstep.py), and query binaries are written to a
temporary file and renamed (the last writer wins with identical bytes).

Which driver a query is linked with is looked up in the driver registry (drivers.py), where the
built-in drivers are registered as a plugin's own are.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# arrow_cpp registers the ORC/Parquet scan drivers when imported
from .arrow_cpp import DRIVERS as ARROW_DRIVERS
from .arrow_cpp import ensure_arrow_drivers
from .buildstep import stamped_build
from .codegen.shared import member_symbol
from .dpdk import ensure_dpdk_object
from .drivers import DriverLink, RuntimeDriver, driver_named, register_driver
from .toolchain import (
    ENV_SOURCES,
    NcaBuildError,
    arch_flags,
    extra_flags,
    nca_sources_dir,
    run_make,
    runtime_dir,
    toolchain_id,
)

__all__ = ["BuildResult", "DRIVERS", "ENV_SOURCES", "NcaBuildError", "arch_flags", "build_member_object", "build_nca",
           "build_shared_nca", "ensure_arrow_drivers", "ensure_runtime", "nca_sources_dir", "runtime_dir",
           "runtime_hash"]

RUNTIME_DRIVERS = ("scan_json", "ntf_relay")  # driver objects the runtime Makefile builds (`all`)
RUNTIME_DRIVERS += ("join",)  # the hash join (ncas/runtime/join.c)
# The built-in drivers. Not a closed list: build_nca links any registered driver (drivers.py).
DRIVERS = RUNTIME_DRIVERS + ARROW_DRIVERS  # ORC/Parquet scans on Arrow C++ from pyarrow: built on first use
CC = "g++"  # compiles the generated C (-x c) and links with libstdc++ for simdjson, in one call
CFLAGS = ("-x", "c", "-std=c11", "-O2", "-pthread")
LDLIBS = ("-lsimdjson", "-lpthread")
_RUNTIME_SUFFIXES = {".c", ".cpp", ".h"}

for _name in RUNTIME_DRIVERS:
    register_driver(RuntimeDriver(_name))


@dataclass(frozen=True, slots=True)
class BuildResult:
    path: Path  # the executable
    cached: bool  # True when an earlier build was reused
    seconds: float


def _runtime_files(root: Path) -> list[tuple[str, int, int]]:
    """(name, size, mtime) of every runtime source: what a cheap "did anything change" looks at."""
    out = []
    with os.scandir(root) as entries:
        for e in entries:
            if e.is_file() and (os.path.splitext(e.name)[1] in _RUNTIME_SUFFIXES or e.name == "Makefile"):
                st = e.stat()
                out.append((e.name, st.st_size, st.st_mtime_ns))
    return sorted(out)


# runtime_hash memo: (root, flags) -> (when last looked, the files' names/sizes/mtimes, hash).
# Reading and hashing every source costs about a millisecond, and even a scandir with a stat per
# file costs one system call each, which a server thread pays again queueing for the GIL behind the
# job's other threads: on every NCA compile of every job that was a tenth of the server's CPU time
# during a Spark run. So the files are looked at again only after RUNTIME_RECHECK_S, and hashed
# again only when a name, size or mtime changed: a developer's edit rebuilds from the next job on.
RUNTIME_RECHECK_S = 1.0
_RUNTIME_HASHES: dict[tuple[str, str], tuple[float, tuple, str]] = {}
_RUNTIME_LOCK = threading.Lock()


def runtime_hash() -> str:
    """Hash of the runtime sources (every .c/.cpp/.h and the Makefile), the toolchain and flags."""
    root = runtime_dir()
    flags = " ".join(arch_flags() + extra_flags())
    key = (str(root), flags)
    now = time.monotonic()
    known = _RUNTIME_HASHES.get(key)
    if known is not None and now - known[0] < RUNTIME_RECHECK_S:
        return known[2]
    if not (root / "Makefile").is_file():
        raise NcaBuildError(f"no NCA runtime sources at {root} (set {ENV_SOURCES} to the ncas/ directory)")
    files = tuple(_runtime_files(root))
    if known is not None and known[1] == files:
        digest = known[2]
    else:
        h = hashlib.sha256(toolchain_id().encode() + flags.encode())
        for name, _, _ in files:
            h.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
        digest = h.hexdigest()[:20]
    with _RUNTIME_LOCK:
        if len(_RUNTIME_HASHES) > 64:  # many source trees (tests): keep the memo small
            _RUNTIME_HASHES.clear()
        _RUNTIME_HASHES[key] = (now, files, digest)
    return digest


def ensure_runtime(cache_dir: Path) -> Path:
    """Build the runtime into cache_dir/runtime-<hash> unless it is there; return that directory."""

    def make(tmp: Path) -> None:
        flags = " ".join(extra_flags())
        run_make(tmp, "all", [f"CFLAGS={flags}", f"CXXFLAGS={flags}"] if flags else [], "the NCA runtime",
                 jobs=os.cpu_count() or 1)

    return stamped_build(Path(cache_dir) / f"runtime-{runtime_hash()}", make, {"toolchain": toolchain_id()})


def _linking(driver: str, cache_dir: Path) -> tuple[Path, tuple[str, ...], DriverLink]:
    """What linking a query with the registered driver `driver` takes: the runtime built (its
    directory), the compiler flags of this machine, and the driver's objects and flags."""
    runtime = ensure_runtime(cache_dir)
    return runtime, arch_flags() + extra_flags(), driver_named(driver).link(runtime)


def build_nca(generated_source: str, driver: str, cache_dir: Path, *, dpdk: bool = False) -> BuildResult:
    """The executable of one NCA: generated C compiled and linked with the registered driver named
    `driver` (drivers.py) and libjgrt.a (and, with `dpdk`, the runtime's DPDK transport and
    libdpdk: jumpgate/ncas/software/dpdk.py)."""
    t0 = time.perf_counter()
    cache_dir = Path(cache_dir)
    runtime, extra, link = _linking(driver, cache_dir)
    objects, ldflags, ext_key = [str(o) for o in link.objects], link.ldflags, link.key
    if dpdk:  # docs/udp-transport.md, "DPDK"
        obj, tc = ensure_dpdk_object(runtime)
        objects, ldflags, ext_key = [*objects, str(obj)], (*ldflags, *tc.ldflags), ext_key + tc.key
    key = hashlib.sha256(json.dumps([generated_source, driver, runtime.name, CC, CFLAGS, extra, LDLIBS]
                                    + ([ext_key] if ext_key else [])).encode())
    exe = cache_dir / "ncas" / f"{driver}-{key.hexdigest()[:32]}"
    if exe.exists():
        _touch(exe)  # recently used: the last to be pruned
        return BuildResult(exe, True, time.perf_counter() - t0)
    exe.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=exe.parent) as tmp:
        src = Path(tmp) / "query.c"
        src.write_text(generated_source)
        out = Path(tmp) / "nca"
        cmd = [CC, *CFLAGS, *extra, f"-I{runtime_dir()}", str(src), "-x", "none", *objects,
               str(runtime / "libjgrt.a"), *LDLIBS, *ldflags, "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NcaBuildError(f"compiling the generated {driver} NCA failed", proc.stderr, cmd)
        # keep the source next to the binary: it is what a developer debugging a job wants to read
        os.replace(src, exe.with_suffix(".c"))
        os.replace(out, exe)
    prune_cache(exe.parent)
    return BuildResult(exe, False, time.perf_counter() - t0)


def build_member_object(source: str, cache_dir: Path) -> Path:
    """A shared scan's member (docs/shared-scans.md): the generated scan query compiled once, its
    JG_QUERY under the name codegen/shared.py's member_symbol gives its text. A scan that may
    share compiles it with its own binary, so that a group only links."""
    cache_dir = Path(cache_dir)
    runtime = ensure_runtime(cache_dir)
    extra = arch_flags() + extra_flags()
    key = hashlib.sha256(json.dumps([source, runtime.name, CC, CFLAGS, extra]).encode())
    obj = cache_dir / "ncas" / f"member-{key.hexdigest()[:32]}.o"
    if obj.exists():
        _touch(obj)
        return obj
    obj.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=obj.parent) as tmp:
        src, out = Path(tmp) / "member.c", Path(tmp) / "member.o"
        src.write_text(source)
        cmd = [CC, *CFLAGS, *extra, f"-I{runtime_dir()}", f"-DJG_QUERY={member_symbol(source)}", "-c", str(src),
               "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NcaBuildError("compiling a shared scan's member failed", proc.stderr, cmd)
        os.replace(out, obj)
    return obj


def build_shared_nca(members: Sequence[str], shared_source: str, driver: str, cache_dir: Path) -> BuildResult:
    """The executable of a shared scan (docs/shared-scans.md): the members' objects
    (build_member_object), the generated table listing them (codegen/shared.py), the runtime's
    shared_scan.o (which defines the JG_QUERY the driver runs), the registered driver `driver` and
    libjgrt.a. Cached by all of it, as build_nca caches one query."""
    t0 = time.perf_counter()
    cache_dir = Path(cache_dir)
    runtime, extra, link = _linking(driver, cache_dir)
    unique = list(dict.fromkeys(members))  # a query two jobs both run is one object
    key = hashlib.sha256(json.dumps([unique, shared_source, driver, runtime.name, CC, CFLAGS, extra, LDLIBS]
                                    + ([link.key] if link.key else [])).encode())
    exe = cache_dir / "ncas" / f"shared-{driver}-{key.hexdigest()[:32]}"
    if exe.exists():
        _touch(exe)
        return BuildResult(exe, True, time.perf_counter() - t0)
    objects = [build_member_object(m, cache_dir) for m in unique]
    with tempfile.TemporaryDirectory(prefix=".build-", dir=exe.parent) as tmp:
        shared = Path(tmp) / "query.c"
        shared.write_text(shared_source)
        out = Path(tmp) / "nca"
        cmd = [CC, *CFLAGS, *extra, f"-I{runtime_dir()}", str(shared), "-x", "none", *(str(o) for o in objects),
               str(runtime / "shared_scan.o"), *(str(o) for o in link.objects), str(runtime / "libjgrt.a"),
               *LDLIBS, *link.ldflags, "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NcaBuildError(f"linking a shared {driver} NCA failed", proc.stderr, cmd)
        # one file to read when debugging: the table, then each member's query
        exe.with_suffix(".c").write_text(shared_source + "".join(
            f"\n/* ---- member compiled as {member_symbol(m)} ---- */\n{m}" for m in unique))
        os.replace(out, exe)
    prune_cache(exe.parent)
    return BuildResult(exe, False, time.perf_counter() - t0)


# The compiled NCAs are a cache: without a bound, every distinct query adds a binary and its source
# for ever (hundreds of MB after a few thousand queries). Beyond JUMPGATE_NCA_CACHE_MAX_MB (default
# 2048) the least recently used are removed, checked after a new build at most once a minute. A
# binary used in the last hour is never removed, so a job compiled a while ago still finds its NCAs
# when it executes (compiled jobs expire after 10 minutes by default); a running process keeps its
# binary's file open, so removing it never disturbs a job.
PRUNE_EVERY_S = 60.0
KEEP_RECENT_S = 3600.0
_last_prune = 0.0


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


def cache_limit_bytes() -> int:
    try:
        return int(float(os.environ.get("JUMPGATE_NCA_CACHE_MAX_MB", "2048")) * 1024 * 1024)
    except ValueError:
        return 2048 * 1024 * 1024


def prune_cache(ncas_dir: Path, limit: int | None = None, *, force: bool = False,
                keep_recent_s: float = KEEP_RECENT_S) -> list[str]:
    """Remove the least recently used NCAs (binary and source) of `ncas_dir` until it holds at most
    `limit` bytes; returns the names removed."""
    global _last_prune
    now = time.time()
    if not force and time.monotonic() - _last_prune < PRUNE_EVERY_S:
        return []
    _last_prune = time.monotonic()
    limit = cache_limit_bytes() if limit is None else limit
    entries = []
    total = 0
    for entry in os.scandir(ncas_dir):
        if not entry.is_file(follow_symlinks=False) or entry.name.startswith(".") or entry.name.endswith(".c"):
            continue
        st = entry.stat(follow_symlinks=False)
        source = Path(entry.path).with_suffix(".c")
        size = st.st_size + (source.stat().st_size if source.exists() else 0)
        entries.append((st.st_mtime, entry.path, size))
        total += size
    removed = []
    for mtime, path, size in sorted(entries):
        if total <= limit:
            break
        if now - mtime < keep_recent_s:
            break  # everything after it is more recent still
        for victim in (path, str(Path(path).with_suffix(".c"))):
            try:
                os.unlink(victim)
            except FileNotFoundError:
                pass
        total -= size
        removed.append(Path(path).name)
    return removed
