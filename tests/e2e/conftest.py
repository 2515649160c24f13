"""End-to-end fixtures: a real `jumpgate serve` process on loopback over a generated data root,
and DuckDB over the same files as the oracle."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jumpgate.local_server import LocalServer

from .data import write_all_types


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    write_all_types(root / "t.jsonl", rows=5000, seed=11)
    return root


@pytest.fixture(scope="session")
def server(data_root, tmp_path_factory):
    cache = Path(os.environ.get("JUMPGATE_TEST_CACHE") or tmp_path_factory.mktemp("cache"))
    srv = LocalServer(data_root, cache, tmp_path_factory.mktemp("logs") / "server.log")
    yield srv
    left = srv.children()
    srv.stop()
    assert not left, f"NCA processes left behind: {left}"


STORE_SALES_SF = 0.1  # the conformance suite's scale factor: the data is generated once per machine and shared


@pytest.fixture(scope="session")
def tpcds_root() -> Path:
    """The conformance suite's TPC-DS data root with store_sales (JSON Lines) at STORE_SALES_SF:
    the switch aggregator's job (thesis §3.5.6) and the UDP loss tests read it."""
    pytest.importorskip("duckdb")
    from jumpgate.conformance import default_data_dir, ensure_data

    root = default_data_dir(STORE_SALES_SF)
    ensure_data(root, ["tpcds/store_sales"], STORE_SALES_SF)
    return root


def switch_model_server(root: Path, logs: Path, env: dict[str, str] | None = None) -> Iterator[LocalServer]:
    """A server that offers the switch model (JUMPGATE_SWITCH_MODEL=1, and `env`) over `root`;
    afterwards no NCA or model process may be left."""
    cache = os.environ.get("JUMPGATE_TEST_CACHE")
    srv = LocalServer(root, Path(cache) if cache else None, logs / "server.log",
                      env={"JUMPGATE_SWITCH_MODEL": "1", **(env or {})})
    yield srv
    left = srv.children()
    srv.stop()
    assert not left, f"processes left behind (NCAs or the switch model): {left}"


@pytest.fixture
def duck(data_root):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    yield con
    con.close()
