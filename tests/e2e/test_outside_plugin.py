"""An NCA plugin from outside the jumpgate package that brings its own native driver
(tests/plugins/plain_json_scan), registered by entry point as installing its package would, and
proven the way docs/conformance.md tells a third party to: `python -m jumpgate.conformance --nca
testing.plain_json_scan` in a fresh process, whose server finds the plugin only through the
`jumpgate.ncas` entry points. Every case run must pass with the plugin taking its operations, and
what ran must be the plugin's own driver: its marker lines are there and the built-in JSON scan
was never even built."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.plain_json_scan.plugin import DRIVER, MARKER_ENV, PlainJsonScanNca

pytestmark = [pytest.mark.e2e, pytest.mark.conformance, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NCA = PlainJsonScanNca.name
# Requests on the smaller tables: every type, NULLs, strings, dates and decimals through the
# plugin's driver, and joins, aggregations and a shuffle by built-in NCAs beside it. Every request
# (all read JSON Lines, so all are the plugin's) passes too: "*" runs them all.
CASES = os.environ.get("JUMPGATE_OUTSIDE_PLUGIN_CASES", ",".join([
    "tpcds_customer_nulls", "tpcds_date_dim_dates", "tpcds_item_strings", "tpcds_web_sales_decimals",
    "tpch_customer_case_floats", "tpch_orders_strings", "tpch_q02_min_cost", "tpch_q13_left_outer",
    "tpch_q22_anti", "tpcds_store_sales_shuffle_aggregate"]))
MARKS = ("PASS", "FAIL", "XFAIL", "UNUSED")  # the first word of each request's line


def install_entry_point(site: Path) -> None:
    """What `pip install` of a package declaring the plugin's entry point leaves on the path: a
    dist-info directory whose entry_points.txt names the implementation class."""
    info = site / "jumpgate_test_plain_json_scan-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jumpgate-test-plain-json-scan\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[jumpgate.ncas]\n{NCA} = {PlainJsonScanNca.__module__}:{PlainJsonScanNca.__qualname__}\n")


def test_outside_plugin_with_its_own_driver_passes_conformance(tmp_path):
    pytest.importorskip("duckdb")
    site, cache, marker = tmp_path / "site", tmp_path / "cache", tmp_path / "driver-ran.log"
    install_entry_point(site)
    path = [str(site), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), MARKER_ENV: str(marker)}
    proc = subprocess.run([sys.executable, "-m", "jumpgate.conformance", "--nca", NCA, "-k", CASES,
                           "--cache-dir", str(cache)], env=env, capture_output=True, text=True, timeout=540)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    lines = [line for line in out.splitlines() if line.split()[:1] and line.split()[0] in MARKS]
    assert lines and all(line.startswith("PASS") and NCA in line for line in lines), out
    assert f"{len(lines)} passed, 0 failed" in out, out

    ran = marker.read_text().splitlines()  # one line per phase of each instance (plain_scan.c)
    assert len(ran) >= len(lines) and all(line.startswith("plain_scan pid") for line in ran), ran
    assert list((cache / "ncas").glob(f"{DRIVER.name}-*"))
    assert not list((cache / "ncas").glob("scan_json-*"))  # no read went to the built-in scan
