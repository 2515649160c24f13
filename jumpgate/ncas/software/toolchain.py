"""What every native build of a software NCA shares: where the runtime's sources are, the compiler
and its flags (the CPU level, the sanitizers), `make` in the runtime directory, and the error a
failed build raises.

It sits below build.py (the runtime and query binaries), drivers.py (what a query is linked
with), arrow_cpp.py and dpdk.py (optional parts built on demand), so that none of those needs
another's private names and none imports another in a circle.
"""
from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from ...contract.errors import JumpgateError

ENV_SOURCES = "JUMPGATE_NCA_SOURCES"  # overrides the ncas/ directory (runtime/ and templates/)
# The target level is chosen from the CPU that builds (and, for the local deployer, runs) the NCA:
# x86-64-v3 (AVX2) doubles simdjson's structural indexing speed over v2. The level is part of the
# cache keys, so a cache moved to an older machine rebuilds instead of crashing. Override with
# JUMPGATE_NCA_MARCH (e.g. "x86-64-v2").
MARCH_ENV = "JUMPGATE_NCA_MARCH"
_V3_FLAGS = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
# JUMPGATE_NCA_SANITIZE=1 builds the runtime and queries with AddressSanitizer and UBSan, for
# debugging a crashing NCA (a separate cache key, so normal binaries are never mixed in).
SANITIZE_ENV = "JUMPGATE_NCA_SANITIZE"
_SANITIZE_FLAGS = ("-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined")


class NcaBuildError(JumpgateError):
    """The runtime, a driver or a generated query failed to build; `stderr` is the compiler's output."""

    status = 500

    def __init__(self, message: str, stderr: str = "", command: list[str] | None = None) -> None:
        super().__init__(message, compiler_output=stderr[-4000:] or None)
        self.stderr = stderr
        self.command = command or []


def nca_sources_dir() -> Path:
    """The ncas/ directory: the repository's, next to the jumpgate package, unless overridden."""
    return _resolved_sources(os.environ.get(ENV_SOURCES) or None)


@functools.lru_cache(maxsize=8)
def _resolved_sources(env: str | None) -> Path:
    # Resolving walks every component of the path with a system call each; every NCA compile of
    # every job asks, from threads that then queue for the GIL, so it is done once per setting.
    return Path(env).resolve() if env else Path(__file__).resolve().parents[3] / "ncas"


def runtime_dir() -> Path:
    """Sources of the runtime library and drivers (ncas/runtime)."""
    return nca_sources_dir() / "runtime"


@functools.cache
def toolchain_id() -> str:
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


def extra_flags() -> tuple[str, ...]:
    """The sanitizers' flags when JUMPGATE_NCA_SANITIZE asks for them, else nothing."""
    return _SANITIZE_FLAGS if os.environ.get(SANITIZE_ENV, "") not in ("", "0") else ()


def run_make(build_dir: Path, target: str, make_vars: list[str], what: str, jobs: int = 1) -> None:
    """`make -C ncas/runtime BUILD=build_dir ARCH=... target` with `make_vars`; NcaBuildError
    naming `what` (and carrying make's output) when it fails."""
    cmd = ["make", "-C", str(runtime_dir()), f"BUILD={build_dir}", f"-j{jobs}",
           f"ARCH={' '.join(arch_flags())}", *make_vars, target]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise NcaBuildError(f"building {what} failed", proc.stderr + proc.stdout, cmd)
