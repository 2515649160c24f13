"""Arrow C++ from the pyarrow wheel, for the columnar scan NCAs (ncas/runtime/scan_orc.cpp,
scan_parquet.cpp, scan_arrow.cpp).

The wheel ships Arrow's headers (`pyarrow.get_include()`) and versioned shared libraries
(`libarrow.so.2600`, `libparquet.so.2600` in `pyarrow.get_library_dirs()`), with ORC built into
libarrow. There are no unversioned `.so` names unless `pyarrow.create_library_symlinks()` ran, which
writes into site-packages; instead we link the versioned files by path and record the wheel's
directory as the binary's RUNPATH, so the NCA loads exactly the libraries pyarrow itself uses.

Snappy pages and chunks are decompressed with the system's libsnappy (Debian's libsnappy-dev, which
scripts/setup.sh installs) rather than the wheel's bundled copy, which is markedly slower on
columns of small integers and decimals (ncas/runtime/jg_snappy.h); the drivers link it with
`-lsnappy`.

Arrow 26's headers need C++20. The C++ ABI (`_GLIBCXX_USE_CXX11_ABI`) must match the wheel's:
manylinux_2_28 wheels use the new ABI, older manylinux2014 ones the old; we read it off the
library's symbol names rather than guess from the wheel tag.

The drivers are built on first use (ensure_arrow_drivers), not with the runtime: the runtime
builds, and every other driver works, without pyarrow, and only a job that scans ORC or Parquet
pays for compiling against Arrow's headers. They register themselves in the driver registry
(drivers.py) as any plugin's driver does.
"""
from __future__ import annotations

import functools
import hashlib
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

from .buildstep import beside_runtime, stamped_build
from .drivers import DriverLink, NcaDriver, register_driver
from .toolchain import NcaBuildError, extra_flags, run_make

DRIVERS = ("scan_orc", "scan_parquet")  # driver objects of the Makefile's `arrow` target
MAKE_TARGET = "arrow"
COMMON_OBJECT = "scan_arrow.o"  # linked with each of them
SNAPPY_HEADERS = (Path("/usr/include/snappy.h"), Path("/usr/local/include/snappy.h"))


class ArrowUnavailable(Exception):
    """Arrow C++ cannot be used from here; the message says why (shown by match_operations)."""


@dataclass(frozen=True)
class ArrowToolchain:
    version: str
    include_dir: Path
    lib_dir: Path
    libraries: tuple[Path, ...]  # libparquet, libarrow (link order)
    cxx11_abi: bool
    snappy_header: Path  # libsnappy's, whose identity is part of the key

    @property
    def cxxflags(self) -> tuple[str, ...]:
        """For the Makefile's ARROW_CXXFLAGS (-isystem: no warnings from Arrow's headers)."""
        return ("-isystem", str(self.include_dir), f"-D_GLIBCXX_USE_CXX11_ABI={int(self.cxx11_abi)}")

    @property
    def ldflags(self) -> tuple[str, ...]:
        return (*map(str, self.libraries), "-lsnappy", f"-Wl,-rpath,{self.lib_dir}")

    @property
    def key(self) -> str:
        """Identity for cache keys: a different wheel means different objects and binaries."""
        stamps = []
        for lib in (*self.libraries, self.snappy_header):
            st = lib.stat()
            stamps.append(f"{lib.name}:{st.st_size}:{st.st_mtime_ns}")
        return f"arrow-{self.version}-abi{int(self.cxx11_abi)}-{self.lib_dir}-{','.join(stamps)}"


def _uses_cxx11_abi(lib: Path) -> bool:
    """True when the library's C++ symbols use the new libstdc++ ABI (std::__cxx11::)."""
    with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(b"St7__cxx11") >= 0 or m.find(b"NSt7__cxx11") >= 0


@functools.cache
def arrow_toolchain() -> ArrowToolchain:
    """Locate the wheel's headers and libraries; raises ArrowUnavailable with the reason."""
    try:
        import pyarrow
    except ImportError as e:
        raise ArrowUnavailable(f"pyarrow is not installed ({e}); the ORC and Parquet scans link Arrow C++ "
                               "from its wheel: pip install pyarrow") from None
    include = Path(pyarrow.get_include())
    info = pyarrow.cpp_build_info
    so = info.so_version
    missing = [h for h in ("arrow/adapters/orc/adapter.h", "parquet/arrow/reader.h") if not (include / h).is_file()]
    if missing:
        raise ArrowUnavailable(f"pyarrow {pyarrow.__version__} has no C++ headers {', '.join(missing)} in {include}")
    for lib_dir in map(Path, pyarrow.get_library_dirs()):
        libs = (lib_dir / f"libparquet.so.{so}", lib_dir / f"libarrow.so.{so}")
        if all(p.is_file() for p in libs):
            break
    else:
        raise ArrowUnavailable(f"libarrow.so.{so} and libparquet.so.{so} are not in pyarrow's library "
                               f"directories {pyarrow.get_library_dirs()}")
    if "ARROW_ORC" not in (include / "arrow/util/config.h").read_text(errors="replace").replace(
            "/* #undef ARROW_ORC */", ""):
        raise ArrowUnavailable(f"pyarrow {pyarrow.__version__} was built without ORC support")
    snappy = next((h for h in SNAPPY_HEADERS if h.is_file()), None)
    if snappy is None:
        raise ArrowUnavailable("libsnappy is not installed (no snappy.h in /usr/include or /usr/local/include): "
                               "apt-get install libsnappy-dev, as scripts/setup.sh does")
    return ArrowToolchain(pyarrow.__version__, include, lib_dir, libs, _uses_cxx11_abi(libs[1]), snappy)


def unavailable_reason() -> str | None:
    """Why the Arrow drivers cannot be built here, or None when they can."""
    try:
        arrow_toolchain()
    except ArrowUnavailable as e:
        return str(e)
    except OSError as e:
        return f"cannot inspect pyarrow's libraries: {e}"
    if not os.access(arrow_toolchain().include_dir, os.R_OK):
        return f"cannot read {arrow_toolchain().include_dir}"
    return None


# ------------------------------------------------------------------ the drivers


def ensure_arrow_drivers(runtime: Path) -> tuple[Path, ArrowToolchain]:
    """Build the Arrow drivers (`make arrow`) into runtime/arrow-<hash of the wheel> unless there."""
    try:
        tc = arrow_toolchain()
    except (ArrowUnavailable, OSError) as e:
        raise NcaBuildError(f"the ORC/Parquet scan drivers cannot be built: {e}") from None

    def make(tmp: Path) -> None:
        make_vars = [f"ARROW_CXXFLAGS={' '.join(tc.cxxflags)}"]
        if extra_flags():
            make_vars.append(f"CXXFLAGS={' '.join(extra_flags())}")
        run_make(tmp, MAKE_TARGET, make_vars, "the ORC/Parquet scan drivers", jobs=min(2, os.cpu_count() or 1))

    target, lock = beside_runtime(runtime, f"arrow-{hashlib.sha256(tc.key.encode()).hexdigest()[:12]}")
    return stamped_build(target, make, {"arrow": tc.key}, lock=lock), tc


@dataclass(frozen=True)
class ArrowDriver(NcaDriver):
    """An ORC or Parquet scan driver: its object and the shared columnar scan, linked against the
    wheel's libraries (whose identity is part of the binary's cache key)."""

    name: str

    def link(self, runtime: Path) -> DriverLink:
        objs, tc = ensure_arrow_drivers(runtime)
        return DriverLink((objs / f"{self.name}.o", objs / COMMON_OBJECT), tc.ldflags, tc.key)


for _name in DRIVERS:
    register_driver(ArrowDriver(_name))
