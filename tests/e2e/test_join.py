"""Hash joins end to end through a real server (JSON scans -> software.hash_join -> client),
each answer compared with DuckDB over the same files: every join type, single and multi-column
keys of int, string, date and decimal types (with casts between the sides), NULL and duplicate keys
on both sides, an extra condition, `columns`, fused operations, empty sides and chained joins."""
from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pytest

from jumpgate.client import Jumpgate

from .data import duck_view
from .helpers import assert_same_rows, read_op

pytestmark = pytest.mark.e2e

# (name, contract type, DuckDB type); the probe's key columns are wider than the build's, so the
# binder casts (int32 -> int64, decimal(10,1) -> decimal(12,2)).
BUILD = [("b_id", "int64", "BIGINT"), ("bk", "int32", "INTEGER"), ("bs", "string", "VARCHAR"),
         ("bdt", "date", "DATE"), ("bd", "decimal(10,1)", "DECIMAL(10,1)"), ("bw", "int64", "BIGINT")]
PROBE = [("p_id", "int64", "BIGINT"), ("pk", "int64", "BIGINT"), ("ps", "string", "VARCHAR"),
         ("pdt", "date", "DATE"), ("pd", "decimal(12,2)", "DECIMAL(12,2)"), ("pv", "int64", "BIGINT")]
THIRD = [("c_id", "int64", "BIGINT"), ("ck", "int64", "BIGINT"), ("cs", "string", "VARCHAR")]
WORDS = ["alpha", "Beta", "naïve", "日本", "", "O'Neil"]
DATES = [dt.date(1969, 12, 31), dt.date(2000, 2, 29), dt.date(2024, 1, 1)]
DECIMALS = ["1.5", "-2.0", "10.1"]

JOIN_SQL = {"inner": "JOIN", "left_semi": "SEMI JOIN", "left_anti": "ANTI JOIN", "left_outer": "LEFT JOIN"}
TYPES = list(JOIN_SQL)
SINGLE = (["bk"], ["pk"], "p.pk = b.bk")
MULTI = (["bk", "bs", "bdt", "bd"], ["pk", "ps", "pdt", "pd"],
         "p.pk = b.bk AND p.ps = b.bs AND p.pdt = b.bdt AND p.pd = b.bd")


def _write(path: Path, rows: list[dict], rnd: random.Random) -> None:
    """NULLs written as null or left out."""
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({k: v for k, v in r.items() if v is not None or rnd.random() < 0.5}) + "\n")


@pytest.fixture(scope="module")
def tables(data_root):
    """Small key domains, so keys repeat on both sides (many-to-many), with NULLs everywhere."""
    rnd = random.Random(7)

    def maybe(v, p=0.08):
        return None if rnd.random() < p else v

    def keys(n_int: int):
        return {"k": maybe(rnd.randrange(n_int)), "s": maybe(rnd.choice(WORDS[:3])),
                "dt": maybe(rnd.choice(DATES).isoformat()), "d": maybe(rnd.choice(DECIMALS))}

    build = []
    for i in range(800):
        k = keys(40)
        build.append({"b_id": i, "bk": k["k"], "bs": k["s"], "bdt": k["dt"], "bd": k["d"], "bw": maybe(rnd.randrange(100))})
    probe = []
    for i in range(2500):
        k = keys(50)
        probe.append({"p_id": i, "pk": k["k"], "ps": k["s"], "pdt": k["dt"], "pd": k["d"], "pv": maybe(rnd.randrange(100))})
    third = [{"c_id": i, "ck": maybe(rnd.randrange(60)), "cs": maybe(rnd.choice(WORDS))} for i in range(300)]
    for name, rows in (("jb", build), ("jp", probe), ("jc", third)):
        _write(data_root / f"{name}.jsonl", rows, rnd)
    return data_root


@pytest.fixture
def jduck(duck, tables):
    for name, cols in (("jb", BUILD), ("jp", PROBE), ("jc", THIRD)):
        duck_view(duck, name, tables / f"{name}.jsonl", cols)
    return duck


def schema(cols) -> list[dict]:
    return [{"name": n, "type": t} for n, t, _ in cols]


def reads() -> list[dict]:
    return [read_op("b", "jb.jsonl", schema(BUILD)), read_op("p", "jp.jsonl", schema(PROBE))]


def join_op(jtype: str, bkeys, pkeys, name: str = "j", build: str = "b", probe: str = "p", **extra) -> dict:
    return {"kind": "join", "name": name, "build": build, "probe": probe, "build_keys": bkeys,
            "probe_keys": pkeys, "type": jtype, **extra}


def run(url: str, ops: list[dict], last: str | None = None):
    """Run with one send of `last` (default: the last operation); returns (table, job)."""
    send = {"kind": "send", "name": "out", "input": last or ops[-1]["name"], "transport": "tcp",
            "host": "127.0.0.1", "port": 0}
    with Jumpgate(url) as jg:
        table = jg.run({"name": "join-e2e", "operations": ops + [send]}, timeout=300)["out"]
        return table, jg.last_job


def select_list(jtype: str) -> str:
    return "p.*" if jtype in ("left_semi", "left_anti") else "p.*, b.*"


def join_nca(job) -> dict:
    [nca] = [n for n in job.ncas if n["implementation"] == "software.hash_join"]
    return nca


@pytest.mark.parametrize("jtype", TYPES)
def test_single_int_key(server, jduck, jtype):
    bkeys, pkeys, on = SINGLE
    got, job = run(server.url, reads() + [join_op(jtype, bkeys, pkeys)])
    assert join_nca(job)["stages"] == [0, 1]
    assert_same_rows(jduck, got, f"SELECT {select_list(jtype)} FROM jp p {JOIN_SQL[jtype]} jb b ON {on}")


@pytest.mark.parametrize("jtype", TYPES)
def test_multi_column_keys_with_condition(server, jduck, jtype):
    """int32/int64, string, date and decimal(10,1)/decimal(12,2) keys; the condition has NULLs."""
    bkeys, pkeys, on = MULTI
    got, _ = run(server.url, reads() + [join_op(jtype, bkeys, pkeys, condition="pv > bw")])
    assert got.num_rows > 0
    assert_same_rows(jduck, got, f"SELECT {select_list(jtype)} FROM jp p {JOIN_SQL[jtype]} jb b "
                                 f"ON {on} AND p.pv > b.bw")


@pytest.mark.parametrize("jtype", ["inner", "left_outer"])
def test_columns_projection_over_both_sides(server, jduck, jtype):
    cols = [{"name": "id", "expr": "p_id"}, {"name": "total", "expr": "pd + bd"},
            {"name": "label", "expr": "upper(bs)"}, {"name": "later", "expr": "bdt > pdt"}]
    got, _ = run(server.url, reads() + [join_op(jtype, ["bk", "bs"], ["pk", "ps"], columns=cols,
                                                condition="bw % 3 <> 0 OR pv IS NULL")])
    assert_same_rows(jduck, got, "SELECT p.p_id AS id, p.pd + b.bd AS total, upper(b.bs) AS label, "
                                 f"b.bdt > p.pdt AS later FROM jp p {JOIN_SQL[jtype]} jb b "
                                 "ON p.pk = b.bk AND p.ps = b.bs AND (b.bw % 3 <> 0 OR p.pv IS NULL)")


def test_fused_filter_and_projection_after_the_join(server, jduck):
    ops = reads() + [join_op("inner", ["bk"], ["pk"]),
                     {"kind": "filter", "name": "f", "input": "j", "condition": "bw > pv"},
                     {"kind": "project", "name": "q", "input": "f",
                      "columns": [{"name": "p_id", "expr": "p_id"}, {"name": "diff", "expr": "bw - pv"},
                                  {"name": "bs", "expr": "bs"}]}]
    got, job = run(server.url, ops)
    assert len(job.ncas) == 3
    assert join_nca(job)["operations"] == ["j", "f", "q"]
    assert_same_rows(jduck, got, "SELECT p.p_id, b.bw - p.pv AS diff, b.bs FROM jp p JOIN jb b ON p.pk = b.bk "
                                 "WHERE b.bw > p.pv")


@pytest.mark.parametrize("jtype", ["inner", "left_semi"])
def test_join_of_two_filtered_scans(server, jduck, jtype):
    """Both inputs are JSON scans with their filters fused in: three NCAs in all."""
    ops = [read_op("b", "jb.jsonl", schema(BUILD)), {"kind": "filter", "name": "bf", "input": "b",
                                                     "condition": "bs LIKE '%a%' AND bw < 50"},
           read_op("p", "jp.jsonl", schema(PROBE)), {"kind": "filter", "name": "pf", "input": "p",
                                                     "condition": "pdt >= DATE '2000-01-01'"},
           join_op(jtype, ["bk", "bd"], ["pk", "pd"], build="bf", probe="pf")]
    got, job = run(server.url, ops)
    assert sorted(tuple(n["operations"]) for n in job.ncas) == [("b", "bf"), ("j",), ("p", "pf")]
    assert_same_rows(jduck, got, f"SELECT {select_list(jtype)} FROM (SELECT * FROM jp WHERE pdt >= DATE '2000-01-01') p "
                                 f"{JOIN_SQL[jtype]} (SELECT * FROM jb WHERE bs LIKE '%a%' AND bw < 50) b "
                                 "ON p.pk = b.bk AND p.pd = b.bd")


@pytest.mark.parametrize("jtype", TYPES)
def test_empty_build_side(server, jduck, jtype):
    ops = [read_op("b", "jb.jsonl", schema(BUILD)), {"kind": "filter", "name": "bf", "input": "b",
                                                     "condition": "bk < -1000"},
           read_op("p", "jp.jsonl", schema(PROBE)), join_op(jtype, ["bk"], ["pk"], build="bf")]
    got, _ = run(server.url, ops)
    assert got.num_rows == (2500 if jtype in ("left_anti", "left_outer") else 0)
    assert_same_rows(jduck, got, f"SELECT {select_list(jtype)} FROM jp p {JOIN_SQL[jtype]} "
                                 "(SELECT * FROM jb WHERE bk < -1000) b ON p.pk = b.bk")


@pytest.mark.parametrize("jtype", ["inner", "left_anti"])
def test_empty_probe_side(server, jduck, jtype):
    ops = [read_op("b", "jb.jsonl", schema(BUILD)), read_op("p", "jp.jsonl", schema(PROBE)),
           {"kind": "filter", "name": "pf", "input": "p", "condition": "p_id < 0"},
           join_op(jtype, ["bk"], ["pk"], probe="pf")]
    got, _ = run(server.url, ops)
    assert got.num_rows == 0
    assert_same_rows(jduck, got, f"SELECT {select_list(jtype)} FROM (SELECT * FROM jp WHERE p_id < 0) p "
                                 f"{JOIN_SQL[jtype]} jb b ON p.pk = b.bk")


def test_chained_joins_run_in_three_stages(server, jduck):
    """The first join's output is the second join's build side: build j1, probe j1 while building
    j2, then probe j2."""
    ops = reads() + [
        join_op("inner", ["bk"], ["pk"], columns=[{"name": "k", "expr": "pk"}, {"name": "p_id", "expr": "p_id"},
                                                  {"name": "bs", "expr": "bs"}]),
        read_op("c", "jc.jsonl", schema(THIRD)),
        join_op("inner", ["k"], ["ck"], name="j2", build="j", probe="c", condition="bs <> cs")]
    got, job = run(server.url, ops)
    assert len(job.stages) == 3
    stages = {tuple(n["operations"]): n["stages"] for n in job.ncas}
    assert stages[("j",)] == [0, 1] and stages[("j2",)] == [1, 2]
    # every edge between the NCAs carried keyed streams (docs/contract.md), the client's did not:
    # had a receiver and its sender disagreed on a key, the job could not have finished
    edges = job.answer["edges"]
    assert [e["keyed"] for e in edges] == [not e["client"] for e in edges] and len(edges) == 5
    assert_same_rows(jduck, got, "SELECT c.*, j.* FROM jc c JOIN "
                                 "(SELECT p.pk AS k, p.p_id, b.bs FROM jp p JOIN jb b ON p.pk = b.bk) j "
                                 "ON c.ck = j.k AND j.bs <> c.cs")


@pytest.mark.parametrize("keys", [SINGLE, MULTI], ids=["one key", "four keys"])
@pytest.mark.parametrize("extra", ["plain", "condition", "columns"])
def test_left_outer_keeping_the_smaller_side_builds_it(server, jduck, keys, extra):
    """jb (800 rows) LEFT JOIN jp (2,500): the request builds jp and probes with jb, the side it
    keeps. The compiler swaps the sides (compiler/join_sides.py): jb is built, jp streams through,
    and the jb rows nothing matched (NULL keys included) come out at the end, NULL on jp's side."""
    bkeys, pkeys, on = keys
    extra_fields: dict = {}
    select, cond = "b.*, p.*", ""
    if extra == "condition":
        extra_fields["condition"] = "pv > bw"
        cond = " AND p.pv > b.bw"
    elif extra == "columns":
        extra_fields["columns"] = [{"name": "id", "expr": "b_id"}, {"name": "pv2", "expr": "pv * 2"},
                                   {"name": "tag", "expr": "coalesce(ps, bs)"}]
        select = "b.b_id AS id, p.pv * 2 AS pv2, coalesce(p.ps, b.bs) AS tag"
    ops = reads() + [join_op("left_outer", pkeys, bkeys, build="p", probe="b", **extra_fields)]
    got, job = run(server.url, ops)
    assert_same_rows(jduck, got, f"SELECT {select} FROM jb b LEFT JOIN jp p ON {on}{cond}")
    nca = join_nca(job)
    decision = job.answer["decisions"]["j"]
    assert "run as right_outer" in decision["note"] and "preserved side 'b'" in decision["note"]
    stages = {tuple(n["operations"]): n["stages"] for n in job.ncas}
    assert stages[("b",)] == [0] and stages[("p",)] == [1]  # jb is built first, jp streams
    with Jumpgate(server.url) as jg:
        status = jg._call("GET", f"/v1/jobs/{job.job_id}")
    [probe_phase] = [s for s in status["timeline"]["ncas"][nca["id"]]["stages"] if s["stage"] == 1]
    assert 0 < probe_phase["unmatched_build_rows"] < 800
    # the build keys filter the probe's scan: a right outer join drops probe rows nothing matches
    assert [(f["join"], f["planned"]) for f in job.answer["runtime_filters"]] == [("j", True)]


def test_left_outer_keeping_the_larger_side_is_left_as_it_is(server, jduck):
    ops = reads() + [join_op("left_outer", ["bk"], ["pk"])]
    got, job = run(server.url, ops)
    assert_same_rows(jduck, got, "SELECT p.*, b.* FROM jp p LEFT JOIN jb b ON p.pk = b.bk")
    assert "right_outer" not in job.answer["decisions"]["j"].get("note", "")
    assert [(f["join"], f["planned"]) for f in job.answer["runtime_filters"]] == [("j", False)]


def test_swapped_left_outer_join_with_fused_filter_and_a_join_above(server, jduck):
    """A filter fused after the swapped join reads its columns by the request's names; a second
    join builds from its output."""
    ops = reads() + [
        join_op("left_outer", ["pk"], ["bk"], build="p", probe="b"),
        {"kind": "filter", "name": "f", "input": "j", "condition": "p_id IS NULL OR pv > 10"},
        read_op("c", "jc.jsonl", schema(THIRD)),
        join_op("inner", ["b_id"], ["c_id"], name="j2", build="f", probe="c")]
    got, job = run(server.url, ops)
    assert "run as right_outer" in job.answer["decisions"]["j"]["note"]
    assert_same_rows(jduck, got, "SELECT c.*, f.* FROM jc c JOIN (SELECT b.*, p.* FROM jb b LEFT JOIN jp p "
                                 "ON p.pk = b.bk WHERE p.p_id IS NULL OR p.pv > 10) f ON c.c_id = f.b_id")


def test_builder_join_reports_build_memory(server, jduck, tables):
    with Jumpgate(server.url) as jg:
        b = jg.read("jb.jsonl", schema={n: t for n, t, _ in BUILD})
        p = jg.read("jp.jsonl", schema={n: t for n, t, _ in PROBE})
        got = p.join(b, on=[("pk", "bk")], type="left_semi").collect()
        status = jg.last_job.status()
    assert_same_rows(jduck, got, "SELECT p.* FROM jp p SEMI JOIN jb b ON p.pk = b.bk")
    text = json.dumps(status)
    assert "build_bytes" in text and "build_rows" in text


def test_runtime_filter_of_an_upper_join_reaches_the_lower_joins_scans(server, jduck):
    """TPC-H Q18's shape: the upper join's key comes from the lower join's build side, equal to the
    lower join's probe key, so the upper join's build keys filter the lower join's probe scan (and
    its build scan, when that runs after the upper build). Answers are DuckDB's."""
    ops = [read_op("c", "jc.jsonl", schema(THIRD)), read_op("p", "jp.jsonl", schema(PROBE)),
           join_op("inner", ["ck"], ["pk"], name="j1", build="c", probe="p"),
           read_op("b", "jb.jsonl", schema(BUILD)), {"kind": "filter", "name": "bf", "input": "b", "condition": "bw < 8"},
           join_op("inner", ["bk"], ["ck"], name="j2", build="bf", probe="j1")]
    got, job = run(server.url, ops)
    assert_same_rows(jduck, got, "SELECT p.*, c.*, b.* FROM jp p JOIN jc c ON p.pk = c.ck JOIN "
                                 "(SELECT * FROM jb WHERE bw < 8) b ON c.ck = b.bk")
    planned = {(f["join"], f["read"]) for f in job.answer["runtime_filters"] if f["planned"]}
    assert {("j1", "p"), ("j2", "p")} <= planned, job.answer["runtime_filters"]
    ran = {(f["join"], f["read"]): f for f in job.last_status["runtime_filters"]}
    assert ran[("j2", "p")]["handed"] and ran[("j2", "p")]["rows_removed"] > 0, ran
