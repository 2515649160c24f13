"""build.py: the runtime is built once per source/toolchain hash, query binaries are cached by
content, concurrent builds are safe, and compiler errors carry the compiler's output."""
from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from jumpgate.ncas.software import build
from jumpgate.ncas.software.build import NcaBuildError, build_nca, ensure_runtime, runtime_dir

from .fixtures.runtime_harness import FIXTURES

COPY = (FIXTURES / "copy_query.c").read_text()


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "nca-cache"


def test_runtime_dir_is_the_repository_ncas():
    assert (runtime_dir() / "jg.h").is_file()
    assert runtime_dir().parent.name == "ncas"


def test_runtime_dir_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv(build.ENV_SOURCES, str(tmp_path))
    assert runtime_dir() == tmp_path.resolve() / "runtime"
    with pytest.raises(NcaBuildError, match="no NCA runtime sources"):
        build.runtime_hash()


def test_ensure_runtime_builds_library_and_drivers(cache):
    rt = ensure_runtime(cache)
    assert rt.name == f"runtime-{build.runtime_hash()}"
    for name in ("libjgrt.a", "scan_json.o", "ntf_relay.o", ".complete"):
        assert (rt / name).is_file()
    assert ensure_runtime(cache) == rt


def test_build_is_cached_by_content(cache):
    src = COPY + "\n/* variant: cache test */\n"
    first = build_nca(src, "scan_json", cache)
    again = build_nca(src, "scan_json", cache)
    other = build_nca(src, "ntf_relay", cache)
    assert not first.cached and again.cached and not other.cached
    assert first.path == again.path != other.path
    assert os.access(first.path, os.X_OK) and first.path.with_suffix(".c").read_text() == src
    print(f"\ncold build {first.seconds * 1000:.0f} ms, cached lookup {again.seconds * 1e6:.0f} us")


def test_concurrent_builds_of_one_query(tmp_path):
    """Fresh cache: several threads race on the runtime (file lock) and on the binary (rename)."""
    src = COPY + "\n/* variant: concurrency test */\n"
    results, errors = [], []

    def go():
        try:
            results.append(build_nca(src, "scan_json", tmp_path))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({r.path for r in results}) == 1
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("runtime-") and p.is_dir()]) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".runtime-")]  # no temp dirs left
    assert not [p for p in (tmp_path / "ncas").iterdir() if p.name.startswith(".build-")]
    proc = subprocess.run([str(results[0].path), "--bind", "127.0.0.1", "--inputs", "0"], input=b"",
                          capture_output=True, timeout=10)
    assert proc.returncode == 0 and b'"ready"' in proc.stdout


def test_compiler_error_carries_stderr(cache):
    with pytest.raises(NcaBuildError) as ei:
        build_nca("#include \"jg.h\"\nint broken( {\n", "scan_json", cache)
    assert "error" in ei.value.stderr and "query.c" in ei.value.stderr
    assert ei.value.to_json()["compiler_output"]


def test_unknown_driver(cache):
    with pytest.raises(NcaBuildError, match="unknown NCA driver"):
        build_nca(COPY, "no_such_driver", cache)


def test_make_check(tmp_path):
    """The install-time check target links a trivial query and runs it through the protocol."""
    proc = subprocess.run(["make", "-s", "-C", str(runtime_dir()), f"BUILD={tmp_path}", "check"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "jgrt check: ok" in proc.stdout


def test_runtime_hash_notices_an_edited_source(monkeypatch, tmp_path):
    """The hash is memoized between looks at the files (RUNTIME_RECHECK_S): within the interval an
    edit is not looked for, after it an edited source changes the hash, and an untouched tree
    keeps it."""
    import shutil

    shutil.copytree(runtime_dir(), tmp_path / "runtime")
    monkeypatch.setenv(build.ENV_SOURCES, str(tmp_path))
    monkeypatch.setattr(build, "RUNTIME_RECHECK_S", 3600.0)
    first = build.runtime_hash()
    source = tmp_path / "runtime" / "jg.h"
    source.write_text(source.read_text() + "\n/* edited */\n")
    assert build.runtime_hash() == first  # not looked at again within the interval
    monkeypatch.setattr(build, "RUNTIME_RECHECK_S", 0.0)
    edited = build.runtime_hash()
    assert edited != first
    assert build.runtime_hash() == edited  # looked at again, nothing changed
    source.write_text(source.read_text().replace("\n/* edited */\n", ""))
    os.utime(source, ns=(0, 0))  # a different mtime, the original bytes
    assert build.runtime_hash() == first
