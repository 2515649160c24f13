"""Fixtures of the conformance suite: TPC data at scale factor 0.1 (generated once, cached under
the Jumpgate cache directory keyed by generator and scale factor), DuckDB over the same files as
the oracle, and a real `jumpgate serve` with every registered NCA (or those named, comma-separated,
in `JUMPGATE_CONFORMANCE_NCAS`)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from jumpgate.conformance import Oracle, Runner, default_data_dir, ensure_data, format_root, load_cases

SF = float(os.environ.get("JUMPGATE_CONFORMANCE_SF", "0.1"))
# The same requests and expected results over each copy of the data (issue: ORC and Parquet too).
FORMATS = [f for f in os.environ.get("JUMPGATE_CONFORMANCE_FORMATS", "json,orc,parquet").split(",") if f]


@pytest.fixture(scope="session")
def conformance_data() -> Path:
    pytest.importorskip("duckdb")
    root = default_data_dir(SF)
    t0 = time.monotonic()
    written = ensure_data(root, {t for c in load_cases() for t in c.tables}, SF)
    if written:
        print(f"\nconformance data: generated {len(written)} tables under {root} in {time.monotonic() - t0:.1f} s")
    return root


@pytest.fixture(scope="session")
def oracle(conformance_data):
    o = Oracle(conformance_data)
    yield o
    o.close()


@pytest.fixture(scope="session", params=FORMATS)
def conformance_format(request, conformance_data) -> str:
    fmt = request.param
    if fmt != "json":
        t0 = time.monotonic()
        written = ensure_data(conformance_data, {t for c in load_cases() for t in c.tables}, SF, fmt=fmt)
        if written:
            print(f"\nconformance data: wrote {len(written)} {fmt} tables in {time.monotonic() - t0:.1f} s")
    return fmt


@pytest.fixture(scope="session")
def conformance_server(conformance_data, conformance_format, tmp_path_factory):
    from jumpgate.local_server import LocalServer

    cache = os.environ.get("JUMPGATE_TEST_CACHE")
    only = os.environ.get("JUMPGATE_CONFORMANCE_NCAS")  # e.g. "software.scan_json": see the strict xfails
    srv = LocalServer(format_root(conformance_data, conformance_format), Path(cache) if cache else None,
                      tmp_path_factory.mktemp("conformance-logs") / "server.log",
                      extra_args=["--ncas", only] if only else None)
    yield srv
    left = srv.children()
    srv.stop()
    assert not left, f"NCA processes left behind: {left}"


@pytest.fixture(scope="session")
def runner(conformance_server, conformance_format, oracle):
    r = Runner(conformance_server.url, oracle, fmt=conformance_format)
    yield r
    r.close()
