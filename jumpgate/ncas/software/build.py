"""Build software NCAs: the precompiled runtime (once per runtime source and compiler version) and
one small binary per generated query (generated C + a driver object + libjgrt.a).

Everything lands in a cache directory and is keyed by content, so a query that was built before
costs a hash and a `stat`. Builds are safe to run concurrently from several jobs or test workers:
the runtime is built under a file lock into a temporary directory that is renamed into place, and
query binaries are written to a temporary file and renamed (the last writer wins with identical
bytes).
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ...errors import JumpgateError
from . import arrow_cpp

ENV_SOURCES = "JUMPGATE_NCA_SOURCES"  # overrides the ncas/ directory (runtime/ and templates/)
DRIVERS = ("scan_json", "ntf_relay")  # driver objects the runtime Makefile builds
DRIVERS += ("join",)  # the hash join (ncas/runtime/join.c)
DRIVERS += arrow_cpp.DRIVERS  # ORC/Parquet scans on Arrow C++ from pyarrow: built on first use (below)
CC = "g++"  # compiles the generated C (-x c) and links with libstdc++ for simdjson, in one call
CFLAGS = ("-x", "c", "-std=c11", "-O2", "-pthread")
# The target level is chosen from the CPU that builds (and, for the local deployer, runs) the NCA:
# x86-64-v3 (AVX2) doubles simdjson's structural indexing speed over v2. The level is part of the
# cache keys, so a cache moved to an older machine rebuilds instead of crashing. Override with
# JUMPGATE_NCA_MARCH (e.g. "x86-64-v2").
MARCH_ENV = "JUMPGATE_NCA_MARCH"
_V3_FLAGS = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
LDLIBS = ("-lsimdjson", "-lpthread")
# JUMPGATE_NCA_SANITIZE=1 builds the runtime and queries with AddressSanitizer and UBSan, for
# debugging a crashing NCA (a separate cache key, so normal binaries are never mixed in).
SANITIZE_ENV = "JUMPGATE_NCA_SANITIZE"
_SANITIZE_FLAGS = ("-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined")
_RUNTIME_SUFFIXES = {".c", ".cpp", ".h"}
_STAMP = ".complete"


class NcaBuildError(JumpgateError):
    """The runtime or a generated query failed to build; `stderr` is the compiler's output."""

    status = 500

    def __init__(self, message: str, stderr: str = "", command: list[str] | None = None) -> None:
        super().__init__(message, compiler_output=stderr[-4000:] or None)
        self.stderr = stderr
        self.command = command or []


@dataclass(frozen=True, slots=True)
class BuildResult:
    path: Path  # the executable
    cached: bool  # True when an earlier build was reused
    seconds: float


def nca_sources_dir() -> Path:
    """The ncas/ directory: the repository's, next to the jumpgate package, unless overridden."""
    env = os.environ.get(ENV_SOURCES)
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[3] / "ncas"


def runtime_dir() -> Path:
    """Sources of the runtime library and drivers (ncas/runtime)."""
    return nca_sources_dir() / "runtime"


@functools.cache
def _toolchain_id() -> str:
    """Compiler versions and the simdjson header's identity: a change in any means a rebuild."""
    parts = []
    for tool in ("gcc", "g++"):
        try:
            out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            raise NcaBuildError(f"the C toolchain is not usable: {tool}: {e}") from None
        parts.append(out.splitlines()[0] if out else tool)
    for header in ("/usr/include/simdjson.h", "/usr/local/include/simdjson.h"):
        try:
            st = os.stat(header)
            parts.append(f"{header}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            pass
    return "\n".join(parts)


@functools.cache
def arch_flags() -> tuple[str, ...]:
    """-march for NCA builds: x86-64-v3 when this CPU has AVX2 and friends, else x86-64-v2."""
    level = os.environ.get(MARCH_ENV)
    if not level:
        try:
            with open("/proc/cpuinfo") as f:
                flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
        except OSError:
            flags = []
        level = "x86-64-v3" if _V3_FLAGS <= set(flags) else "x86-64-v2"
    return (f"-march={level}", "-mpclmul")


def _extra_flags() -> tuple[str, ...]:
    return _SANITIZE_FLAGS if os.environ.get(SANITIZE_ENV, "") not in ("", "0") else ()


def _runtime_files(root: Path) -> list[tuple[str, int, int]]:
    """(name, size, mtime) of every runtime source: what a cheap "did anything change" looks at."""
    out = []
    with os.scandir(root) as entries:
        for e in entries:
            if e.is_file() and (os.path.splitext(e.name)[1] in _RUNTIME_SUFFIXES or e.name == "Makefile"):
                st = e.stat()
                out.append((e.name, st.st_size, st.st_mtime_ns))
    return sorted(out)


# runtime_hash memo: (root, flags, files' names/sizes/mtimes) -> hash. Reading and hashing every
# source costs about a millisecond on each NCA compile of every job; a scandir costs a tenth of it
# and still notices an edited source (its size or mtime changes), so a developer's change rebuilds.
_RUNTIME_HASHES: dict[tuple, str] = {}


def runtime_hash() -> str:
    """Hash of the runtime sources (every .c/.cpp/.h and the Makefile), the toolchain and flags."""
    root = runtime_dir()
    if not (root / "Makefile").is_file():
        raise NcaBuildError(f"no NCA runtime sources at {root} (set {ENV_SOURCES} to the ncas/ directory)")
    flags = " ".join(arch_flags() + _extra_flags())
    memo = (str(root), flags, tuple(_runtime_files(root)))
    known = _RUNTIME_HASHES.get(memo)
    if known is not None:
        return known
    h = hashlib.sha256(_toolchain_id().encode() + flags.encode())
    for name, _, _ in memo[2]:
        h.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    if len(_RUNTIME_HASHES) > 64:  # edits during development: keep the memo small
        _RUNTIME_HASHES.clear()
    _RUNTIME_HASHES[memo] = h.hexdigest()[:20]
    return _RUNTIME_HASHES[memo]


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_runtime(cache_dir: Path) -> Path:
    """Build the runtime into cache_dir/runtime-<hash> unless it is there; return that directory."""
    cache_dir = Path(cache_dir)
    build = cache_dir / f"runtime-{runtime_hash()}"
    if (build / _STAMP).exists():
        return build
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _file_lock(cache_dir / f"{build.name}.lock"):
        if (build / _STAMP).exists():  # another process built it while we waited
            return build
        tmp = Path(tempfile.mkdtemp(prefix=f".{build.name}-", dir=cache_dir))
        try:
            cmd = ["make", "-C", str(runtime_dir()), f"BUILD={tmp}", f"-j{os.cpu_count() or 1}",
                   f"ARCH={' '.join(arch_flags())}", "all"]
            if _extra_flags():
                flags = " ".join(_extra_flags())
                cmd += [f"CFLAGS={flags}", f"CXXFLAGS={flags}"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise NcaBuildError("building the NCA runtime failed", proc.stderr + proc.stdout, cmd)
            (tmp / _STAMP).write_text(json.dumps({"toolchain": _toolchain_id(), "built": time.time()}))
            if build.exists():  # left over from a build that crashed before its stamp
                shutil.rmtree(build)
            os.rename(tmp, build)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return build


def build_nca(generated_source: str, driver: str, cache_dir: Path, *, dpdk: bool = False) -> BuildResult:
    """The executable of one NCA: generated C compiled and linked with `driver` and libjgrt.a
    (and, with `dpdk`, the runtime's DPDK transport and libdpdk: jumpgate/ncas/software/dpdk.py)."""
    t0 = time.perf_counter()
    if driver not in DRIVERS:
        raise NcaBuildError(f"unknown NCA driver {driver!r} (known: {', '.join(DRIVERS)})")
    cache_dir = Path(cache_dir)
    runtime = ensure_runtime(cache_dir)
    extra = arch_flags() + _extra_flags()
    objects, ldflags, ext_key = _driver_link(driver, runtime)
    if dpdk:  # docs/udp-transport.md, "DPDK"
        from .dpdk import ensure_dpdk_object

        obj, tc = ensure_dpdk_object(runtime, [f"ARCH={' '.join(arch_flags())}"])
        objects, ldflags, ext_key = [*objects, str(obj)], (*ldflags, *tc.ldflags), ext_key + tc.key
    key = hashlib.sha256(json.dumps([generated_source, driver, runtime.name, CC, CFLAGS, extra, LDLIBS]
                                    + ([ext_key] if ext_key else [])).encode())
    exe = cache_dir / "ncas" / f"{driver}-{key.hexdigest()[:32]}"
    if exe.exists():
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
    return BuildResult(exe, False, time.perf_counter() - t0)


# ------------------------------------------------------------------ drivers on Arrow C++ (pyarrow)


def _driver_link(driver: str, runtime: Path) -> tuple[list[str], tuple[str, ...], str]:
    """The object files of `driver`, extra link flags, and the identity of any outside library
    they link (part of the binary's cache key)."""
    if driver not in arrow_cpp.DRIVERS:
        return [str(runtime / f"{driver}.o")], (), ""
    objs, tc = ensure_arrow_drivers(runtime)
    return [str(objs / f"{driver}.o"), str(objs / arrow_cpp.COMMON_OBJECT)], tc.ldflags, tc.key


def ensure_arrow_drivers(runtime: Path) -> tuple[Path, arrow_cpp.ArrowToolchain]:
    """Build the Arrow drivers (`make arrow`) into runtime/arrow-<hash of the wheel> unless there.

    Separate from ensure_runtime: the runtime builds (and every other driver works) without
    pyarrow, and only a job that scans ORC or Parquet pays for compiling against Arrow's headers."""
    try:
        tc = arrow_cpp.arrow_toolchain()
    except (arrow_cpp.ArrowUnavailable, OSError) as e:
        raise NcaBuildError(f"the ORC/Parquet scan drivers cannot be built: {e}") from None
    build = runtime / f"arrow-{hashlib.sha256(tc.key.encode()).hexdigest()[:12]}"
    if (build / _STAMP).exists():
        return build, tc
    with _file_lock(runtime.parent / f"{runtime.name}-{build.name}.lock"):
        if (build / _STAMP).exists():
            return build, tc
        tmp = Path(tempfile.mkdtemp(prefix=f".{build.name}-", dir=runtime))
        try:
            cmd = ["make", "-C", str(runtime_dir()), f"BUILD={tmp}", f"-j{min(2, os.cpu_count() or 1)}",
                   f"ARCH={' '.join(arch_flags())}", f"ARROW_CXXFLAGS={' '.join(tc.cxxflags)}", arrow_cpp.MAKE_TARGET]
            if _extra_flags():
                cmd.append(f"CXXFLAGS={' '.join(_extra_flags())}")
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise NcaBuildError("building the ORC/Parquet scan drivers failed", proc.stderr + proc.stdout, cmd)
            (tmp / _STAMP).write_text(json.dumps({"arrow": tc.key, "built": time.time()}))
            if build.exists():
                shutil.rmtree(build)
            os.rename(tmp, build)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return build, tc
