"""Runtime filters on the conformance suite's TPC-H Q3 and Q12 (docs/runtime-filters.md): the answers
are still DuckDB's, the filter from the join's build side reached the scan of its probe side, and
that scan removed rows before sending them: it sent fewer tuples than the rows passing its own
filter, which is what it sends without the runtime filter (counted by DuckDB on the same data)."""
from __future__ import annotations

import pytest

from jumpgate.conformance import load_cases
from jumpgate.conformance.runner import check_rows

pytestmark = [pytest.mark.e2e, pytest.mark.conformance]

CASES = {c.name: c for c in load_cases()}

# per case: the join whose probe side is the big one, its read, and the rows of that read passing
# the read's own filter (what the scan sends without a runtime filter)
PROBES = {
    "tpch_q03": ("with_items", "li", "SELECT count(*) FROM tpch.lineitem WHERE l_shipdate > DATE '1995-03-15'"),
    "tpch_q12": ("j", "ord", "SELECT count(*) FROM tpch.orders"),
}


@pytest.mark.parametrize("name", sorted(PROBES), ids=[f"runtime_filter_{n}" for n in sorted(PROBES)])
def test_runtime_filter_keeps_answers_and_removes_probe_rows(name, runner):
    case = CASES[name]
    join, read, unfiltered_sql = PROBES[name]
    runner.oracle.load(case.tables)
    got = runner.client.run(case.runnable_request(host=runner.host, fmt=runner.fmt), timeout=runner.timeout)
    job = runner.client.last_job
    problems = [p for check in case.checks for p in [check_rows(runner.oracle, case, check, got)] if p]
    assert not problems, problems

    status = job.status()
    filters = {f["join"]: f for f in status["runtime_filters"]}
    f = filters[join]
    assert f["read"] == read and f["handed"] and f["bytes"] > 0 and f["build_rows"] > 0
    assert f["rows_removed"] > 0

    unfiltered = runner.oracle.con.execute(unfiltered_sql).fetchone()[0]
    ncas = status["timeline"]["ncas"]
    [scan] = f["to"]
    [stage] = ncas[scan]["stages"]
    assert stage["runtime_filters"] == 1
    assert stage["rf_rows_tested"] == unfiltered  # every row its own filter kept was tested
    assert stage["tuples_out"] == unfiltered - stage["rf_rows_removed"] < unfiltered / 2
    assert f"runtime_filter:{f['id']}" in ncas[scan]  # the hand-over shows in the timeline

    # a dry run (explain: the compile answer, the job deleted at once) shows it planned
    plan = runner.client.explain(case.runnable_request(host=runner.host, fmt=runner.fmt))
    planned = {p["join"]: p for p in plan.answer["runtime_filters"]}
    assert planned[join]["planned"] and planned[join]["read"] == read and planned[join]["to"]
    assert f"join {join} -> scan of {read}" in str(plan)
