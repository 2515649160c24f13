"""What the server tells clients of its data root (the Spark plugin's `spark.jumpgate.dataRoot`
when unset): the root every node resolves a read's paths in, or nothing when the nodes' roots
differ; GET /v1/nodes gives each node's."""
from __future__ import annotations

import os

import pytest

from jumpgate.runtime.service import JumpgateService, Settings


@pytest.fixture
def service_of(tmp_path):
    made = []

    def make(nodes_yaml: str | None = None) -> JumpgateService:
        nodes = None
        if nodes_yaml is not None:
            nodes = tmp_path / "nodes.yaml"
            nodes.write_text(nodes_yaml)
        svc = JumpgateService(Settings(data_root=tmp_path / "data", cache_dir=tmp_path / "cache", nodes=nodes))
        made.append(svc)
        return svc

    (tmp_path / "data").mkdir()
    yield make
    for svc in made:
        svc.shutdown()


def test_one_machine_says_its_data_root(service_of, tmp_path):
    svc = service_of()
    root = os.path.realpath(tmp_path / "data")
    assert svc.client_data_root() == root
    # not for anyone who asks: GET /v1/health answers without a token
    assert "data_root" not in svc.health() and svc.health()["nodes"] == ["local"]
    assert [n["data_root"] for n in svc.nodes()] == [root]


def test_nodes_sharing_the_servers_data_root_say_it(service_of, tmp_path):
    svc = service_of("nodes:\n  - {name: a, address: 127.0.0.2, cores: 1}\n"
                     "  - {name: b, address: 127.0.0.3, cores: 1}\n")
    root = os.path.realpath(tmp_path / "data")
    assert svc.client_data_root() == root
    assert {n["name"]: n["data_root"] for n in svc.nodes()} == {"a": root, "b": root}


def test_nodes_with_different_data_roots_say_none(service_of, tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    svc = service_of("nodes:\n"
                     f"  - {{name: a, address: 127.0.0.2, cores: 1, data_root: '{tmp_path / 'a'}'}}\n"
                     f"  - {{name: b, address: 127.0.0.3, cores: 1, data_root: '{tmp_path / 'b'}'}}\n")
    assert svc.client_data_root() is None
    assert {n["name"]: n["data_root"] for n in svc.nodes()} == {"a": os.path.realpath(tmp_path / "a"),
                                                                "b": os.path.realpath(tmp_path / "b")}
