"""Drivers of software NCAs, and the registry `build_nca` finds them in.

A driver is the native part of a software NCA that is the same for every query: the process's
`main`, which reads the NCA's input and calls the generated row function (ncas/runtime/jgrt.h,
`jgr_driver`). `build_nca(source, driver, ...)` links a query with the driver registered under
that name; a `ProcessNca` names its driver in its `driver` attribute.

The built-in drivers register themselves here exactly as a plugin's do (design: no private
shortcuts for built-ins): build.py those the runtime Makefile builds, arrow_cpp.py the ORC and
Parquet scans. A plugin that brings its own driver ships its C or C++ sources and registers them
when its module is imported, which loading its entry point does before anything is compiled:

    register_driver(SourceDriver("mycompany_fpga_feed", (HERE / "fpga_feed.c",)))

They are compiled against the runtime's headers with the runtime's flags on first use, into the
cache beside the runtime they link with, and rebuilt when the sources or the runtime change.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from .buildstep import beside_runtime, stamped_build
from .toolchain import NcaBuildError, arch_flags, extra_flags, runtime_dir

# A driver's name is part of its binaries' file names (build.py: `<driver>-<hash>`, with the
# query's source beside it as `.c`), so no dots, slashes or spaces.
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
# The runtime Makefile's flags for its own driver objects (ALL_CFLAGS, ALL_CXXFLAGS), so that an
# outside driver is compiled as a built-in one would be.
_COMMON = ("-fPIC", "-pthread", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Wno-unused-parameter")
_COMPILERS = {".c": ("gcc", "-std=c11"), ".cpp": ("g++", "-std=c++17"), ".cc": ("g++", "-std=c++17")}


@dataclass(frozen=True, slots=True)
class DriverLink:
    """What linking a query with a driver takes: object files, link flags, and the identity of
    anything they are built from beyond the runtime (part of the binary's cache key)."""

    objects: tuple[Path, ...]
    ldflags: tuple[str, ...] = ()
    key: str = ""


class NcaDriver(ABC):
    """A driver `build_nca` can link a query with. `name` is what NCAs ask for."""

    name: str

    @abstractmethod
    def link(self, runtime: Path) -> DriverLink:
        """Build whatever the driver needs for the runtime build `runtime` (a directory made by
        build.ensure_runtime) unless it is there, and say how to link with it. Raises
        NcaBuildError when it cannot be built here, with the reason."""


@dataclass(frozen=True)
class RuntimeDriver(NcaDriver):
    """A driver whose object the runtime Makefile's `all` target builds (ncas/runtime/<name>.c or
    .cpp), so it exists in every runtime build."""

    name: str

    def link(self, runtime: Path) -> DriverLink:
        return DriverLink((runtime / f"{self.name}.o",))


@dataclass(frozen=True)
class SourceDriver(NcaDriver):
    """A driver shipped as sources outside ncas/runtime, typically by a plugin: each `.c`/`.cpp`
    of `sources` is compiled against the runtime's headers (jgrt.h, jg.h) with the runtime's
    flags plus `cflags`; list the driver's own headers too, so that editing one rebuilds it.
    `ldflags` are added when linking (libraries the driver needs)."""

    name: str
    sources: tuple[Path, ...]
    cflags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(Path(s).resolve() for s in self.sources))
        object.__setattr__(self, "cflags", tuple(self.cflags))
        object.__setattr__(self, "ldflags", tuple(self.ldflags))
        units = self._units()
        if not units:
            raise ValueError(f"driver {self.name!r}: no .c or .cpp file among its sources")
        stems = [s.stem for s in units]
        if len(set(stems)) != len(stems):
            raise ValueError(f"driver {self.name!r}: two sources would make the same object ({', '.join(stems)})")

    def _units(self) -> list[Path]:
        return [s for s in self.sources if s.suffix in _COMPILERS]

    def _digest(self) -> str:
        h = hashlib.sha256(repr((self.name, self.cflags, self.ldflags, arch_flags(), extra_flags())).encode())
        for src in self.sources:
            try:
                h.update(str(src).encode() + b"\0" + src.read_bytes() + b"\0")
            except OSError as e:
                raise NcaBuildError(f"NCA driver {self.name!r}: cannot read its source {src}: {e}") from None
        return h.hexdigest()[:20]

    def link(self, runtime: Path) -> DriverLink:
        digest = self._digest()
        target, lock = beside_runtime(runtime, f"driver-{self.name}-{digest[:12]}")
        stamped_build(target, self._compile, {"driver": self.name, "sources": [str(s) for s in self.sources]},
                      lock=lock)
        return DriverLink(tuple(target / f"{s.stem}.o" for s in self._units()), self.ldflags, f"{self.name} {digest}")

    def _compile(self, out: Path) -> None:
        opt = extra_flags() or ("-O2",)  # as the runtime Makefile: the sanitizers' flags replace -O2
        for src in self._units():
            compiler, std = _COMPILERS[src.suffix]
            cmd = [compiler, std, *opt, *arch_flags(), *_COMMON, f"-I{runtime_dir()}", *self.cflags,
                   "-c", str(src), "-o", str(out / f"{src.stem}.o")]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise NcaBuildError(f"compiling NCA driver {self.name!r} ({src.name}) failed", proc.stderr, cmd)


# ------------------------------------------------------------------ the registry

_DRIVERS: dict[str, NcaDriver] = {}
_LOCK = threading.Lock()


def register_driver(driver: NcaDriver) -> NcaDriver:
    """Make `driver` available to `build_nca` under `driver.name`; returns it. Registering an equal
    driver again does nothing (a module imported twice); another driver under a taken name is an
    error, so two plugins cannot silently swap each other's native code."""
    if not isinstance(driver, NcaDriver):
        raise TypeError(f"register_driver takes an NcaDriver (RuntimeDriver, SourceDriver, ...), not {driver!r}")
    if not _NAME.match(driver.name):
        raise ValueError(f"NCA driver name {driver.name!r} must be a letter followed by letters, digits, "
                         f"'_' or '-' (it names the binaries built with it)")
    with _LOCK:
        known = _DRIVERS.get(driver.name)
        if known is not None and known != driver:
            raise ValueError(f"two NCA drivers are named {driver.name!r}: {known!r} and {driver!r}")
        _DRIVERS[driver.name] = driver
    return driver


def known_drivers() -> tuple[str, ...]:
    """Names of every registered driver, sorted."""
    with _LOCK:
        return tuple(sorted(_DRIVERS))


def driver_named(name: str) -> NcaDriver:
    """The driver registered as `name`; NcaBuildError naming the known ones otherwise."""
    with _LOCK:
        driver = _DRIVERS.get(name)
    if driver is None:
        raise NcaBuildError(f"unknown NCA driver {name!r} (known: {', '.join(known_drivers()) or 'none'}); "
                            f"a plugin that brings its own registers it with "
                            f"jumpgate.ncas.software.drivers.register_driver when its module is imported")
    return driver
