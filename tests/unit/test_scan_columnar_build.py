"""Building the ORC/Parquet drivers: only on demand (the runtime never compiles them), against the
pyarrow wheel's headers, linked to its versioned libraries found through the binary's RUNPATH, and
a clear build error (not a broken runtime) when Arrow C++ is unavailable."""
from __future__ import annotations

import subprocess

import pytest

from jumpgate.ncas.software import arrow_cpp, build
from jumpgate.ncas.software.build import NcaBuildError, build_nca, ensure_arrow_drivers, ensure_runtime

from .fixtures.columnar import cache_dir
from .fixtures.runtime_harness import FIXTURES

COPY = (FIXTURES / "copy_query.c").read_text()
needs_arrow = pytest.mark.skipif(arrow_cpp.unavailable_reason() is not None,
                                 reason=f"Arrow C++: {arrow_cpp.unavailable_reason()}")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return cache_dir(tmp_path_factory)


@needs_arrow
def test_toolchain_facts():
    tc = arrow_cpp.arrow_toolchain()
    assert (tc.include_dir / "arrow/adapters/orc/adapter.h").is_file()
    assert [p.name.split(".so.")[0] for p in tc.libraries] == ["libparquet", "libarrow"]
    assert "-isystem" in tc.cxxflags and any(f.startswith("-D_GLIBCXX_USE_CXX11_ABI=") for f in tc.cxxflags)
    assert tc.ldflags[-1] == f"-Wl,-rpath,{tc.lib_dir}" and "-lsnappy" in tc.ldflags  # jg_snappy.h


@needs_arrow
def test_built_on_demand_and_linked_to_the_wheel(cache):
    rt = ensure_runtime(cache)
    assert not (rt / "scan_orc.o").exists()  # `all` never compiles against Arrow
    objs, tc = ensure_arrow_drivers(rt)
    assert objs.parent == rt and {"scan_orc.o", "scan_parquet.o", "scan_arrow.o"} <= {p.name for p in objs.iterdir()}
    assert ensure_arrow_drivers(rt)[0] == objs  # cached
    for driver in arrow_cpp.DRIVERS:
        exe = build_nca(COPY, driver, cache).path
        dyn = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True, check=True).stdout
        assert f"[{tc.libraries[1].name}]" in dyn, dyn  # libarrow.so.NNNN (ORC is inside it)
        assert (f"[{tc.libraries[0].name}]" in dyn) == (driver == "scan_parquet"), dyn
        assert str(tc.lib_dir) in dyn  # RUNPATH: found at run time without LD_LIBRARY_PATH
        assert build_nca(COPY, driver, cache).cached


def test_without_arrow_the_runtime_still_builds(cache, monkeypatch):
    def unavailable():
        raise arrow_cpp.ArrowUnavailable("pyarrow is not installed (test)")

    monkeypatch.setattr(arrow_cpp, "arrow_toolchain", unavailable)
    assert "scan_orc" in build.DRIVERS
    build_nca(COPY, "scan_json", cache)
    with pytest.raises(NcaBuildError, match="pyarrow is not installed"):
        build_nca(COPY + "\n/* another query */\n", "scan_orc", cache)
