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
