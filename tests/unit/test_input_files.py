"""Input files opened at open time beneath the data root (ncas/runtime/input_file.c,
docs/nca-process-protocol.md "Input files"): the JSON, ORC and Parquet scans as real processes,
with openat2 and with the walk kernels without it get (`param files.openat2 0`), which must agree;
the plugin's side (`root` and relative `file` lines, the footer reads of the columnar plugins).

A file replaced after the control plane's check by a symlink leading outside the root is refused
with the file named, and nothing of the outside file is sent."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from jumpgate.nca.interface import NcaError
from jumpgate.ncas.software.build import build_nca
from jumpgate.ncas.software.process import relative_to_root
from jumpgate.ncas.software.scan_columnar import open_real_path

from .fixtures.runtime_harness import FIXTURES, NcaProcess, Receiver, decode_tuple, run_scan

OUTSIDE_LEADS = "it leads outside the data root (a symlink?): refused"
NO_ROOT_SYMLINK = "without a data root (`root`) no symlink is followed: refused"
WAYS = {"openat2": {}, "walk": {"files.openat2": "0"}}


@pytest.fixture(scope="module")
def scan(tmp_path_factory) -> Path:
    cache = Path(os.environ.get("JUMPGATE_TEST_CACHE") or tmp_path_factory.getbasetemp() / "nca-cache")
    return build_nca((FIXTURES / "copy_query.c").read_text(), "scan_json", cache).path


@pytest.fixture
def tree(tmp_path) -> tuple[Path, Path]:
    """(root, outside): root holds t.jsonl (i = 1, 2) and sub/u.jsonl (i = 3); outside, a sibling
    of the root, holds secret.jsonl (i = 666)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "t.jsonl").write_text(json.dumps({"i": 1}) + "\n" + json.dumps({"i": 2}) + "\n")
    (root / "sub" / "u.jsonl").write_text(json.dumps({"i": 3}) + "\n")
    (outside / "secret.jsonl").write_text(json.dumps({"i": 666}) + "\n")
    return root, outside


def ints(streams) -> list[int]:
    return sorted(decode_tuple(t)["i"] for s in streams for t in s.tuples)


def refused(ev, name: str, why: str) -> None:
    assert ev["event"] == "error" and ev["phase"] == 0, ev
    assert ev["file"] == name, ev
    assert ev["message"] == f"cannot open input file {name}: {why}", ev


# ------------------------------------------------------------------ with a root (what the plugin sends)

@pytest.mark.parametrize("way", WAYS)
def test_files_relative_to_the_root_and_symlinks_that_stay_inside(scan, tree, way):
    root, _ = tree
    os.symlink("t.jsonl", root / "same.jsonl")  # a sibling
    os.symlink("../sub/u.jsonl", root / "sub" / "up_and_down.jsonl")  # `..` that stays inside
    os.symlink("sub", root / "dirlink")  # a directory
    ev, streams, _ = run_scan(scan, ["t.jsonl", "same.jsonl", "sub/up_and_down.jsonl", "dirlink/u.jsonl",
                                     "./sub/../t.jsonl"], root=root, params=WAYS[way])
    assert ev["event"] == "done", ev
    assert ints(streams) == [1, 1, 1, 2, 2, 2, 3, 3]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("case", ["relative_link", "absolute_link", "absolute_link_inside", "dir_link", "chain",
                                  "dotdot", "link_loop"])
def test_paths_leading_outside_the_root_are_refused(scan, tree, way, case):
    root, outside = tree
    name, why = "t.jsonl", OUTSIDE_LEADS
    if case == "relative_link":  # the attack: the checked file replaced by a symlink leading out
        os.replace(_link(root, "../outside/secret.jsonl"), root / name)
    elif case == "absolute_link":
        os.replace(_link(root, str(outside / "secret.jsonl")), root / name)
    elif case == "absolute_link_inside":  # RESOLVE_BENEATH refuses every absolute link
        os.replace(_link(root, str(root / "sub" / "u.jsonl")), root / name)
    elif case == "dir_link":
        name = "sub/u.jsonl"
        os.rename(root / "sub", root / "old_sub")
        os.symlink(str(outside), root / "sub")
        (outside / "u.jsonl").write_text(json.dumps({"i": 666}) + "\n")
    elif case == "chain":  # an inside link to an inside link that leads out
        os.symlink("../../outside/secret.jsonl", root / "sub" / "out.jsonl")
        os.replace(_link(root, "sub/out.jsonl"), root / name)
    elif case == "dotdot":
        name = "sub/../../outside/secret.jsonl"
    elif case == "link_loop":
        os.replace(_link(root, "t.jsonl"), root / name)
        why = "it leads through a symlink loop, or a /proc magic link: refused"
    ev, streams, _ = run_scan(scan, ["sub/u.jsonl", name] if name != "sub/u.jsonl" else [name], root=root,
                              params=WAYS[way])
    refused(ev, name, why)
    assert streams == []


def _link(root: Path, target: str) -> Path:
    """A symlink to `target` at a temporary name in `root` (os.replace then swaps it in at once)."""
    tmp = root / ".swap"
    os.symlink(target, tmp)
    return tmp


@pytest.mark.parametrize("way", WAYS)
def test_not_a_regular_file_missing_and_absolute(scan, tree, way):
    root, outside = tree
    os.mkfifo(root / "fifo.jsonl")  # would block an open without O_NONBLOCK for ever
    for name, why in [("fifo.jsonl", "it is not a regular file"), ("sub", "it is not a regular file"),
                      ("nope.jsonl", "No such file or directory"), ("t.jsonl/x", "Not a directory"),
                      (str(root / "t.jsonl"), "the path is absolute, but input files are relative to the data "
                                              "root: refused")]:
        ev, _, _ = run_scan(scan, [name], root=root, params=WAYS[way])
        refused(ev, name, why)


def test_a_data_error_counts_lines_in_the_file_opened(scan, tree):
    root, _ = tree
    (root / "bad.jsonl").write_text(json.dumps({"i": 1}) + "\n" + '{"i": "x"}\n')
    ev, _, _ = run_scan(scan, ["bad.jsonl"], root=root)
    assert ev["event"] == "error" and ev["file"] == "bad.jsonl" and ev["record"] == 2, ev


def test_a_file_swapped_between_configure_and_execute_is_refused(scan, tree):
    """The order the control plane uses: configured while the file is good, swapped, executed."""
    root, _ = tree
    r = Receiver()
    nca = NcaProcess(scan)
    try:
        nca.configure(["t.jsonl"], [(0, r.port, 0, 1)], root=root)
        os.replace(_link(root, "../outside/secret.jsonl"), root / "t.jsonl")
        nca.send("execute 0")
        refused(nca.event(), "t.jsonl", OUTSIDE_LEADS)
        assert nca.wait() == 1
        assert r.conns == [] and r.data == []  # it failed before connecting: no byte of any file was sent
    finally:
        nca.kill()
        r.close()


def test_a_root_that_cannot_be_opened_or_is_relative(scan, tree):
    root, _ = tree
    ev, _, _ = run_scan(scan, ["t.jsonl"], root=root / "gone")
    refused(ev, "t.jsonl", f"cannot open the data root {root / 'gone'}: No such file or directory")
    nca = NcaProcess(scan)
    try:
        nca.send("root data")
        ev = nca.event("error")
        assert ev["phase"] is None and "absolute" in ev["message"], ev
        assert nca.wait() == 2
    finally:
        nca.kill()


@pytest.mark.parametrize("way", WAYS)
def test_proc_magic_links_are_not_followed(scan, way):
    """/proc/self/fd/N names whatever the process has open; RESOLVE_NO_MAGICLINKS refuses it (the
    walk, reading the link, finds a name like pipe:[123] or an absolute path, and refuses too)."""
    ev, streams, _ = run_scan(scan, ["self/fd/0"], root="/proc", params=WAYS[way])
    assert ev["event"] == "error" and ev["file"] == "self/fd/0" and streams == [], ev


# ------------------------------------------------------------------ without a root (driven by hand)

@pytest.mark.parametrize("way", WAYS)
def test_without_a_root_paths_are_opened_as_given_following_no_symlink(scan, tree, way):
    root, outside = tree
    ev, streams, _ = run_scan(scan, [root / "t.jsonl"], params=WAYS[way])
    assert ev["event"] == "done" and ints(streams) == [1, 2], ev
    os.symlink(root / "sub", root / "dirlink")
    os.symlink("t.jsonl", root / "same.jsonl")
    for path in (root / "same.jsonl", root / "dirlink" / "u.jsonl"):
        ev, streams, _ = run_scan(scan, [path], params=WAYS[way])
        refused(ev, str(path), f"it is a symlink or lies under one, and {NO_ROOT_SYMLINK}")
        assert streams == []


# ------------------------------------------------------------------ ORC and Parquet

@pytest.fixture(scope="module")
def columnar_scans(tmp_path_factory):
    """The ORC and Parquet scans of one int64 column `k`, built as a job would build them."""
    from jumpgate.ncas.software.arrow_cpp import unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(f"Arrow C++: {unavailable_reason()}")
    import pyarrow as pa
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    from .fixtures.columnar import cache_dir, scan_nca

    root = tmp_path_factory.mktemp("columnar-root")
    table = pa.table({"k": pa.array([1, 2, 3], pa.int64())})
    orc.write_table(table, str(root / "t.orc"))
    pq.write_table(table, str(root / "t.parquet"))
    cache = cache_dir(tmp_path_factory)
    return {fmt: scan_nca(root, fmt, [("k", "int64")], cache, path=f"t.{fmt}") for fmt in ("orc", "parquet")}


@pytest.mark.parametrize("fmt", ["orc", "parquet"])
@pytest.mark.parametrize("mmap", ["0", "1"])
def test_columnar_scans_open_beneath_the_root(columnar_scans, tmp_path, fmt, mmap):
    import pyarrow as pa
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    write = (lambda t, p: orc.write_table(t, str(p))) if fmt == "orc" else (lambda t, p: pq.write_table(t, str(p)))
    write(pa.table({"k": pa.array([1, 2, 3], pa.int64())}), root / f"t.{fmt}")
    write(pa.table({"k": pa.array([666], pa.int64())}), outside / f"secret.{fmt}")
    os.symlink(f"t.{fmt}", root / f"same.{fmt}")
    nca = columnar_scans[fmt]
    params = {"scan.mmap": mmap}
    ev, rows, _ = nca.run([f"t.{fmt}", f"same.{fmt}"], threads=2, params=params, root=root)
    assert ev["event"] == "done" and sorted(r["k"] for r in rows) == [1, 1, 2, 2, 3, 3], ev
    os.replace(_link(root, f"../outside/secret.{fmt}"), root / f"t.{fmt}")
    for way in WAYS.values():
        ev, rows, _ = nca.run([f"t.{fmt}"], params={**params, **way}, root=root)
        refused(ev, f"t.{fmt}", OUTSIDE_LEADS)
        assert rows == []


# ------------------------------------------------------------------ the plugin's side

def test_plan_paths_become_relative_to_the_host_root():
    assert relative_to_root("/srv/data/a/t.jsonl", "/srv/data", "n1") == "a/t.jsonl"
    assert relative_to_root("/srv/data/t.jsonl", "/srv/data/", "n1") == "t.jsonl"
    for path in ("/srv/data", "/srv/database/t.jsonl", "/srv/t.jsonl", "/srv/data/../t.jsonl", "data/t.jsonl"):
        with pytest.raises(NcaError, match="is not under the data root /srv/data of host n1"):
            relative_to_root(path, "/srv/data", "n1")


def test_footer_reads_of_the_plugins_follow_no_symlink(tmp_path):
    (tmp_path / "f.orc").write_bytes(b"x")
    with open_real_path(str(tmp_path / "f.orc")) as f:
        assert f.read() == b"x"
    os.symlink("f.orc", tmp_path / "link.orc")
    os.symlink(tmp_path, tmp_path / "dir")
    os.mkfifo(tmp_path / "fifo.orc")
    for bad in ("link.orc", "dir/f.orc", "fifo.orc", "../f.orc"):
        with pytest.raises(OSError):
            open_real_path(str(tmp_path / bad))
