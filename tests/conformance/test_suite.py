"""Checks of the conformance suite itself: its request files, its coverage, how it decides what a
request needs, its comparison, and its command line."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pyarrow as pa
import pytest

from jumpgate.conformance import (
    Need,
    compare_tables,
    disjoint_keys,
    load_cases,
    missing,
    missing_reason,
    needs,
)

CASES = load_cases()
SCAN_ONLY = [{"name": "software.scan_json", "operations": ["read", "filter", "project", "shuffle", "aggregate"]}]


def by_name(name):
    return next(c for c in CASES if c.name == name)


def test_at_least_40_requests_from_tpch_and_tpcds():
    assert len(CASES) >= 40
    sources = Counter(c.source.split()[0] for c in CASES)
    assert sources["TPC-H"] >= 15 and sources["TPC-DS"] >= 15, sources


def test_every_operation_join_type_aggregate_function_and_mode_is_covered():
    tags = {t for c in CASES for t in c.exercises}
    wanted = {"read", "filter", "project", "join", "aggregate", "shuffle",
              "join:inner", "join:left_semi", "join:left_anti", "join:left_outer", "join:condition",
              "aggregate:complete", "aggregate:partial", "aggregate:final", "aggregate:global",
              "agg:sum", "agg:count", "agg:count_star", "agg:min", "agg:max", "agg:avg",
              "type:int32", "type:int64", "type:decimal", "type:string", "type:date"}
    assert wanted <= tags, wanted - tags


def test_union_checks_name_real_sends():
    for case in CASES:
        sends = {op["name"] for op in case.operations if op["kind"] == "send"}
        if case.expected_error is not None:  # the job must fail: nothing to compare
            assert not case.checks, case.name
            continue
        assert {s for check in case.checks for s in check.sends} == sends, case.name


def test_needs_place_filters_and_aggregates_after_a_scan_or_on_ntf():
    assert needs(by_name("tpch_q06").request) == [Need("read"), Need("filter"), Need("aggregate")]
    q18 = needs(by_name("tpch_q18_having").request)
    assert Need("filter", "aggregate") in q18 and Need("join") in q18
    final = needs(by_name("tpch_q01_partial_final").request)
    assert Need("aggregate", "aggregate") in final
    shuffled = needs(by_name("tpcds_store_sales_shuffle_aggregate").request)
    assert Need("shuffle") in shuffled and Need("aggregate", "shuffle") in shuffled


def test_missing_is_computed_from_the_ncas_a_server_lists():
    assert missing(by_name("tpch_q06"), SCAN_ONLY) == []
    assert missing(by_name("tpch_q01_scan"), SCAN_ONLY) == []
    gaps = missing(by_name("tpch_q03"), SCAN_ONLY)
    assert missing_reason(gaps) == (
        "needs an NCA for join, aggregate on NTF input (after a join), aggregate on NTF input (after an aggregate)")
    final = missing(by_name("tpch_q01_partial_final"), SCAN_ONLY)
    assert missing_reason(final) == "needs an NCA for aggregate on NTF input (after an aggregate)"
    assert missing(by_name("tpch_q03"), []) == needs(by_name("tpch_q03").request)
    broken = [{"name": "x.join", "error": "ImportError: no module"}]
    assert Need("join") in missing(by_name("tpch_q03"), SCAN_ONLY + broken)
    ntf = [{"name": "ntf", "operations": ["filter", "project", "aggregate", "join"]}]
    assert missing(by_name("tpch_q03"), SCAN_ONLY + ntf) == []


def test_with_only_the_json_scan_the_scan_requests_remain():
    runnable = [c.name for c in CASES if not missing(c, SCAN_ONLY)]
    assert "tpch_q01_scan" in runnable and "tpcds_store_sales_nulls" in runnable
    assert "tpch_q05" not in runnable


def test_compare_tolerates_float_noise_and_ignores_order():
    import duckdb

    con = duckdb.connect()
    a = pa.table({"k": [1, 2, 2, None], "s": ["a", "b", "b", None], "x": [1.0, 2.0, 3.0, None]})
    b = pa.table({"k": [2, 1, 2, None], "s": ["b", "a", "b", None], "x": [3.0 + 1e-12, 1.0, 2.0, None]})
    assert compare_tables(con, a, b) is None
    assert "values differ" in compare_tables(con, a, b.set_column(2, "x", pa.array([3.1, 1.0, 2.0, None])))
    exact = a.select(["k", "s"])
    assert compare_tables(con, exact, exact.take([3, 2, 1, 0])) is None
    assert "missing [(1, 'a')]" in compare_tables(con, exact, pa.table({"k": [1, 2, 1, None], "s": ["a", "b", "a", None]}).take([1, 2, 2, 3]))
    assert "types differ" in compare_tables(con, exact, exact.cast(pa.schema([("k", pa.int32()), ("s", pa.string())])))
    assert "in order" in compare_tables(con, a, b, ordered=True)
    assert disjoint_keys(con, {"o0": a.slice(0, 1), "o1": a.slice(1)}, ["k"]) is None
    assert "different outputs" in disjoint_keys(con, {"o0": a.slice(0, 2), "o1": a.slice(2)}, ["k"])


def test_list_prints_every_request():
    out = subprocess.run([sys.executable, "-m", "jumpgate.conformance", "--list"], capture_output=True,
                         text=True, check=True).stdout
    assert f"{len(CASES)} requests" in out and "tpch_q19" in out and "join:left_anti" in out


@pytest.mark.conformance
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_request_file_is_consistent(case, oracle, conformance_data):
    """The request is valid; expected_sql gives the columns and types Jumpgate's type checker
    gives the sends, answers rows, and agrees with a mechanical translation of the request."""
    from .reference import check_case

    assert check_case(case, oracle, conformance_data) == []


@pytest.mark.e2e
@pytest.mark.conformance
def test_command_line_with_one_nca(conformance_data):
    """`--nca` restricts the server; scan requests pass, the others are reported as unsupported
    because no NCA the restricted server has can run them."""
    proc = subprocess.run([sys.executable, "-m", "jumpgate.conformance", "--nca", "software.scan_json",
                           "--builtins", "", "--data", str(conformance_data), "-k", "tpch_q06_scan,tpch_q05"],
                          capture_output=True, text=True, timeout=600)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any(line.startswith("PASS") and "tpch_q06_scan" in line for line in lines), proc.stdout
    assert any(line.startswith("XFAIL") and "tpch_q05" in line and "needs an NCA for join" in line
               for line in lines), proc.stdout
    assert lines[-1].startswith("1 passed, 0 failed, 1 unsupported"), proc.stdout
