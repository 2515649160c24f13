"""Reads resolve through a `Storage` (jumpgate/dataflow/storage.py): a data root that another host
answers for (here a table of files in memory) serves a request exactly like the local one, with
the same rules and the same error texts, and the file sizes it reports decide the scans' threads;
nothing is looked up on the control plane's own disk."""
from __future__ import annotations

import fnmatch
from pathlib import PurePosixPath

import pytest

from jumpgate.contract.errors import RequestError
from jumpgate.dataflow.request import parse_request
from jumpgate.dataflow.storage import FileFacts, LocalStorage
from jumpgate.ncas.software.scan_json import JsonScanNca

ROOT = "/srv/remote-data"
SCHEMA = [{"name": "a", "type": "int64"}]


class RemoteStorage:
    """A host's data root known only from its answers (as an SSH host's would be)."""

    def __init__(self, files: dict[str, int], outside: set[str] = frozenset()) -> None:
        self.files, self.outside, self.asked = files, outside, []

    def stat(self, relative: str) -> FileFacts:
        self.asked.append(relative)
        if relative in self.outside:
            return FileFacts(f"/elsewhere/{relative}", False, False, False)
        real = str(PurePosixPath(ROOT) / relative)
        if relative in self.files:
            return FileFacts(real, True, True, True, self.files[relative])
        is_dir = any(f.startswith(relative.rstrip("/") + "/") for f in self.files)
        return FileFacts(real, True, is_dir, False)

    def glob(self, pattern: str) -> list[str]:
        return sorted(f for f in [*self.files, *self.outside] if fnmatch.fnmatch(f, pattern))


def request(path) -> dict:
    return {"operations": [
        {"kind": "read", "name": "r", "path": path, "format": "json", "schema": SCHEMA},
        {"kind": "send", "name": "out", "input": "r", "transport": "tcp", "host": "127.0.0.1", "port": 9}]}


def test_a_remote_data_root_resolves_paths_and_sizes():
    storage = RemoteStorage({"t/part-0.jsonl": 300 << 20, "t/part-1.jsonl": 100 << 20, "u.jsonl": 5})
    plan = parse_request(request("t/*.jsonl"), storage)
    read = plan.op("r")
    assert read.paths == (f"{ROOT}/t/part-0.jsonl", f"{ROOT}/t/part-1.jsonl")
    assert read.sizes == (300 << 20, 100 << 20)
    # the scan's threads follow the sizes the storage reported (no file of this machine is opened)
    assert JsonScanNca().resources(plan, ("r",)).max_cores > 1


@pytest.mark.parametrize("path, message", [
    ("missing.jsonl", "does not exist in the data root"),
    ("t", "is not a regular file"),
    ("link.jsonl", "resolves outside the data root"),
    ("*.parquet", "matches no files"),
    (["u.jsonl", "u.jsonl"], "is named twice"),
])
def test_the_rules_hold_for_a_remote_data_root(path, message):
    storage = RemoteStorage({"t/part-0.jsonl": 10, "u.jsonl": 5}, outside={"link.jsonl"})
    with pytest.raises(RequestError, match=message):
        parse_request(request(path), storage)


def test_local_storage_reports_sizes(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"a": 1}\n')
    facts = LocalStorage(tmp_path).stat("a.jsonl")
    assert (facts.inside, facts.exists, facts.is_file, facts.size) == (True, True, True, 9)
    assert parse_request(request("a.jsonl"), tmp_path).op("r").sizes == (9,)


def test_a_fleet_storage_says_which_nodes_hold_each_file(tmp_path):
    from jumpgate.deploy.fleet import FleetStorage

    shared, only_b = tmp_path / "shared", tmp_path / "b"
    for d in (shared, only_b):
        d.mkdir()
    (shared / "s.jsonl").write_text('{"a": 1}\n')
    (only_b / "b.jsonl").write_text('{"a": 2}\n')
    (only_b / "s.jsonl").write_text('{"a": 3}\n')  # the same name, another file
    fleet = FleetStorage({"a": LocalStorage(shared), "c": LocalStorage(shared), "b": LocalStorage(only_b)})
    read = parse_request(request(["s.jsonl", "b.jsonl"]), fleet).op("r")
    # s.jsonl: the first holder's file, held by the nodes that see it at that same path
    assert read.paths == (str(shared / "s.jsonl"), str(only_b / "b.jsonl"))
    assert read.holders == (("a", "c"), ("b",))
    assert fleet.glob("*.jsonl") == ["b.jsonl", "s.jsonl"]
    with pytest.raises(RequestError, match="does not exist in the data root"):
        parse_request(request("none.jsonl"), fleet)


@pytest.fixture
def tree(tmp_path):
    """A data root with plain files, a subdirectory, a directory reached through a symlink, and
    symlinks to a file inside, to a file outside and to nothing."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "t" / "sub").mkdir(parents=True)
    outside.mkdir()
    for name in ("t/a.jsonl", "t/b.jsonl", "t/sub/c.jsonl", "u.jsonl"):
        (root / name).write_text('{"a": 1}\n' * len(name))
    (outside / "secret.jsonl").write_text("x")
    (root / "t" / "in.jsonl").symlink_to(root / "u.jsonl")
    (root / "t" / "out.jsonl").symlink_to(outside / "secret.jsonl")
    (root / "t" / "dangling.jsonl").symlink_to(root / "gone.jsonl")
    (root / "t2").symlink_to(root / "t")
    (root / "away").symlink_to(outside)
    return root


PATTERNS = ["t/*.jsonl", "t2/*.jsonl", "*/*.jsonl", "**/*.jsonl", "t/*", "away/*", "t/sub/*", "none/*"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_glob_with_its_facts_says_what_a_stat_per_match_says(tree, pattern):
    """LocalStorage.glob_stat finds each directory's real path once instead of resolving every
    match component by component; the facts must be the same, symlinks included. The node
    agent's answer (one round trip for the whole glob) is the same again."""
    from jumpgate.agent.node import glob_stat_under, stat_under

    local = LocalStorage(tree)
    one_by_one = [(m, local.stat(m)) for m in local.glob(pattern)]
    assert local.glob_stat(pattern) == one_by_one
    agent = [(m["path"], FileFacts(m["real"], m["inside"], m["exists"], m["is_file"], m["size"]))
             for m in glob_stat_under(str(tree), pattern)]
    assert agent == one_by_one
    assert [(m, FileFacts(**stat_under(str(tree), m))) for m in local.glob(pattern)] == one_by_one


def test_a_glob_is_one_question_to_a_storage_that_answers_it_so(tree):
    """A storage that answers a glob with the facts (a remote node's agent) is asked once, not
    once per match; the fleet of several such roots asks each node once too."""
    from jumpgate.deploy.fleet import FleetStorage

    class OneQuestion(RemoteStorage):
        def glob_stat(self, pattern):
            out = [(m, RemoteStorage.stat(self, m)) for m in self.glob(pattern)]  # its own answer,
            self.asked = [("glob_stat", pattern)]  # in one question
            return out

    files = {f"t/part-{i}.jsonl": 10 + i for i in range(50)}
    storage = OneQuestion(files)
    read = parse_request(request("t/*.jsonl"), storage).op("r")
    assert len(read.paths) == 50 and storage.asked == [("glob_stat", "t/*.jsonl")]
    a, b = OneQuestion(files), OneQuestion({"t/part-7.jsonl": 99, "t/extra.jsonl": 1})
    fleet = FleetStorage({"a": a, "b": b})
    read = parse_request(request("t/*.jsonl"), fleet).op("r")
    assert len(read.paths) == 51 and a.asked == b.asked == [("glob_stat", "t/*.jsonl")]
    # the fleet's merge is what a stat per path would say: the first holder's facts, its holders
    assert fleet.glob_stat("t/*.jsonl") == [(m, fleet.stat(m)) for m in fleet.glob("t/*.jsonl")]
    assert dict(zip(read.paths, read.holders))[f"{ROOT}/t/part-7.jsonl"] == ("a", "b")
