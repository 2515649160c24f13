"""The compiled-NCA cache is bounded (found: it grew without limit, 45 MB after a few hundred
distinct expressions): beyond its limit the least recently used NCAs go, binary and source, but
never one used within the last hour (a compiled job may still execute it)."""
from __future__ import annotations

import os
import time

from jumpgate.ncas.software.build import prune_cache


def make(ncas, name: str, size: int, age_s: float) -> None:
    (ncas / name).write_bytes(b"x" * size)
    (ncas / f"{name}.c").write_bytes(b"y" * 100)
    then = time.time() - age_s
    os.utime(ncas / name, (then, then))


def test_the_least_recently_used_go_first_and_recent_ones_never(tmp_path):
    ncas = tmp_path / "ncas"
    ncas.mkdir()
    make(ncas, "scan_json-old", 1000, 10 * 3600)
    make(ncas, "join-older", 1000, 20 * 3600)
    make(ncas, "scan_json-used-today", 1000, 2 * 3600)
    make(ncas, "join-just-now", 1000, 60)
    (ncas / ".build-tmp").mkdir()
    removed = prune_cache(ncas, limit=2300, force=True)
    assert removed == ["join-older", "scan_json-old"]
    assert sorted(os.listdir(ncas)) == [".build-tmp", "join-just-now", "join-just-now.c", "scan_json-used-today",
                                        "scan_json-used-today.c"]
    # over the limit, but what is left was used within the hour (or just now): kept
    assert prune_cache(ncas, limit=0, force=True, keep_recent_s=3 * 3600) == []
