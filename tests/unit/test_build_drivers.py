"""The driver registry (drivers.py): built-in drivers are found in it like anyone's, an unknown name
says which are known, registration refuses clashes, and a driver shipped as sources outside
ncas/runtime is compiled on first use, cached by content and linked like a built-in one: the
plain JSON scan of tests/plugins/plain_json_scan reads the same rows as the built-in scan."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from jumpgate.ncas.software import build, drivers
from jumpgate.ncas.software.arrow_cpp import ArrowDriver
from jumpgate.ncas.software.build import NcaBuildError, build_nca, ensure_runtime
from jumpgate.ncas.software.drivers import (
    RuntimeDriver,
    SourceDriver,
    driver_named,
    known_drivers,
    register_driver,
)

from .fixtures.runtime_harness import FIXTURES, decode_tuple, run_scan

COPY = (FIXTURES / "copy_query.c").read_text()
TINY_DRIVER = """#include "jgrt.h"
/* reads nothing: each worker only ends its outputs */
static int work(jgr_proc *p, int phase, jg_ctx *ctx, jgr_error *err) { return jgr_call_finish(ctx, err); }
static const jgr_driver tiny = {"tiny", 1, 0, 0, work};
int main(int argc, char **argv) { return jgr_main(argc, argv, &tiny); }
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "nca-cache"


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the registry, so that what a test registers does not outlive it."""
    monkeypatch.setattr(drivers, "_DRIVERS", dict(drivers._DRIVERS))


def ready(exe: Path) -> bool:
    proc = subprocess.run([str(exe), "--bind", "127.0.0.1", "--inputs", "0"], input=b"", capture_output=True,
                          timeout=10)
    return proc.returncode == 0 and b'"ready"' in proc.stdout


# ------------------------------------------------------------------ the registry


def test_built_in_drivers_are_registered_like_any_other():
    assert set(build.DRIVERS) <= set(known_drivers())
    assert driver_named("scan_json") == RuntimeDriver("scan_json")
    assert driver_named("join") == RuntimeDriver("join")
    assert driver_named("scan_parquet") == ArrowDriver("scan_parquet")


def test_unknown_driver_names_the_known_ones(cache):
    with pytest.raises(NcaBuildError, match="unknown NCA driver 'no_such'") as ei:
        build_nca(COPY, "no_such", cache)
    assert all(name in ei.value.message for name in build.DRIVERS)
    assert "register_driver" in ei.value.message


def test_registration_refuses_clashes(registry, tmp_path):
    src = tmp_path / "a.c"
    one = SourceDriver("mine", (src,))
    assert register_driver(one) is one
    register_driver(SourceDriver("mine", (str(src),)))  # equal: a module imported twice
    with pytest.raises(ValueError, match="two NCA drivers are named 'mine'"):
        register_driver(SourceDriver("mine", (tmp_path / "b.c",)))
    with pytest.raises(ValueError, match="two NCA drivers are named 'scan_json'"):
        register_driver(SourceDriver("scan_json", (src,)))
    for bad in ("my.driver", "a/b", "", "9lives"):
        with pytest.raises(ValueError, match="must be a letter"):
            register_driver(SourceDriver(bad, (src,)))
    with pytest.raises(TypeError):
        register_driver("mine")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no .c or .cpp"):
        SourceDriver("headers_only", (tmp_path / "x.h",))
    with pytest.raises(ValueError, match="same object"):
        SourceDriver("twice", (tmp_path / "x.c", tmp_path / "sub" / "x.c"))


# ------------------------------------------------------------------ drivers from outside ncas/runtime


def test_source_driver_is_built_once_and_rebuilt_when_edited(registry, cache, tmp_path):
    src = tmp_path / "tiny.c"
    src.write_text(TINY_DRIVER)
    register_driver(SourceDriver("tiny", (src,)))
    first = build_nca(COPY, "tiny", cache)
    assert not first.cached and build_nca(COPY, "tiny", cache).cached
    assert ready(first.path)
    runtime = ensure_runtime(cache)
    [objs] = [p for p in runtime.iterdir() if p.name.startswith("driver-tiny-")]
    assert (objs / "tiny.o").is_file() and (objs / ".complete").is_file()
    assert not [p for p in runtime.iterdir() if p.name.startswith(".driver-")]  # no temporary left

    src.write_text(TINY_DRIVER + "/* edited */\n")
    edited = build_nca(COPY, "tiny", cache)
    assert not edited.cached and edited.path != first.path and ready(edited.path)
    assert len([p for p in runtime.iterdir() if p.name.startswith("driver-tiny-")]) == 2


def test_source_driver_compile_error_carries_the_compiler_output(registry, cache, tmp_path):
    src = tmp_path / "broken.c"
    src.write_text('#include "jgrt.h"\nint main( {\n')
    register_driver(SourceDriver("broken", (src,)))
    with pytest.raises(NcaBuildError, match=r"compiling NCA driver 'broken' \(broken.c\) failed") as ei:
        build_nca(COPY, "broken", cache)
    assert "broken.c" in ei.value.stderr and ei.value.to_json()["compiler_output"]
    src.unlink()
    with pytest.raises(NcaBuildError, match="cannot read its source"):
        build_nca(COPY, "broken", cache)


def test_plugin_driver_reads_what_the_built_in_scan_reads(cache, tmp_path):
    """The outside plugin's own C driver against the built-in simdjson scan, same query, same file."""
    from tests.plugins.plain_json_scan.plugin import DRIVER

    assert driver_named(DRIVER.name) is DRIVER  # importing the plugin registered it
    rows = [
        {"b": True, "i": 1, "l": 1234567890123, "f": 1.5, "d": 12.345, "s": "hello", "dt": "2024-02-29"},
        {"b": None, "i": None, "l": None, "f": None, "d": None, "s": None, "dt": None},
        {},
        {"other": [1, {"x": "}"}], "zzz": "q", "i": 7, "nested": {"i": 8}},
        {"b": False, "i": -2**31, "l": -2**63, "f": -0.0, "d": "-0.005", "s": 'ü"\\\né ☃ 𝄞', "dt": "1970-01-01"},
        {"i": 2**31 - 1, "l": 2**63 - 1, "f": 1e300, "d": "99999999.99", "s": "", "dt": "1969-12-31"},
        {"f": 3, "d": 7, "dt": "2000-03-01", "i": 0},
    ]
    # every row twice: strings escaped (\\u, surrogate pairs) and as raw UTF-8; then a blank line
    text = "".join(json.dumps(r, ensure_ascii=a) + "\n" for r in rows for a in (True, False)) + "\n  \n"
    path = tmp_path / "rows.jsonl"
    path.write_text(text)
    got = {}
    for driver in ("scan_json", DRIVER.name):
        ev, streams, nca = run_scan(build_nca(COPY, driver, cache).path, [path])
        assert ev["event"] == "done" and ev["stats"]["tuples_in"] == 2 * len(rows), ev
        got[driver] = [decode_tuple(t) for s in streams for t in s.tuples]
    assert got[DRIVER.name] == got["scan_json"] and len(got["scan_json"]) == 2 * len(rows)
    assert any("plain JSON Lines scan driver" in line for line in nca.logs)


def test_plugin_driver_reports_bad_data_with_file_and_line(cache, tmp_path):
    from tests.plugins.plain_json_scan.plugin import DRIVER

    path = tmp_path / "bad.jsonl"
    path.write_text('{"i": 1}\n{"i": "one"}\n')
    ev, _, _ = run_scan(build_nca(COPY, DRIVER.name, cache).path, [path])
    assert ev["event"] == "error" and 'column "i": expected int32' in ev["message"]
    assert ev["file"] == str(path) and ev["record"] == 2
