"""buildstep.stamped_build, the one lock -> temporary -> stamp -> rename step of every cached build
(the runtime, the Arrow drivers, DPDK, plugins' drivers): built once under concurrency, complete
or absent, nothing left behind by a failure or a crash."""
from __future__ import annotations

import json
import threading
import time

import pytest

from jumpgate.ncas.software.buildstep import STAMP, beside_runtime, stamped_build


def writer(calls: list):
    def build(tmp):
        calls.append(tmp)
        time.sleep(0.05)  # long enough for the other threads to queue on the lock
        (tmp / "out.o").write_text("object")
    return build


def test_built_once_by_racing_threads(tmp_path):
    target, calls, results = tmp_path / "part", [], []
    threads = [threading.Thread(target=lambda: results.append(stamped_build(target, writer(calls), {"k": 1})))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and results == [target] * 4
    assert (target / "out.o").read_text() == "object"
    stamp = json.loads((target / STAMP).read_text())
    assert stamp["k"] == 1 and "built" in stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part", "part.lock"]  # no temporary left
    assert stamped_build(target, writer(calls), {}) == target and len(calls) == 1


def test_a_failed_build_leaves_nothing(tmp_path):
    def broken(tmp):
        (tmp / "half.o").write_text("")
        raise RuntimeError("compiler crashed")

    with pytest.raises(RuntimeError, match="compiler crashed"):
        stamped_build(tmp_path / "part", broken, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part.lock"]


def test_a_crashed_build_without_stamp_is_replaced(tmp_path):
    target = tmp_path / "part"
    target.mkdir()
    (target / "stale.o").write_text("from a build that died before its stamp")
    calls = []
    stamped_build(target, writer(calls), {})
    assert len(calls) == 1 and sorted(p.name for p in target.iterdir()) == [STAMP, "out.o"]


def test_parts_of_a_runtime_lock_beside_it(tmp_path):
    runtime = tmp_path / "runtime-abc"
    target, lock = beside_runtime(runtime, "dpdk-123")
    assert target == runtime / "dpdk-123" and lock == tmp_path / "runtime-abc-dpdk-123.lock"
    runtime.mkdir()
    stamped_build(target, writer([]), {}, lock=lock)
    assert lock.exists() and sorted(p.name for p in runtime.iterdir()) == ["dpdk-123"]
