"""parse_request: the whole of contract §1 against a real data root on disk."""
from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from jumpgate.contract import types as T
from jumpgate.contract.errors import RequestError
from jumpgate.contract.types import Field, Schema
from jumpgate.dataflow.expr import Cast, Column
from jumpgate.dataflow.plan import (
    AggFn,
    AggMode,
    Aggregate,
    FileFormat,
    Filter,
    InputRef,
    Join,
    JoinType,
    Read,
    Send,
    Shuffle,
)
from jumpgate.dataflow.request import parse_request
from jumpgate.dataflow.typecheck import check_bound

D = T.decimal


@pytest.fixture
def root(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    (data / "parts").mkdir(parents=True)
    (data / "parts" / "nested").mkdir()
    (data / "lineitem.json").write_text('{"l_orderkey": 1}\n')
    (data / "part.json").write_text('{"p_partkey": 1}\n')
    for name in ("p-1.json", "p-0.json", "p-2.csv"):
        (data / "parts" / name).write_text("{}\n")
    (data / "parts" / "nested" / "p-9.json").write_text("{}\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text('{"secret": 1}\n')
    os.symlink(outside / "secret.json", data / "leak.json")
    os.symlink(outside, data / "leakdir")
    os.symlink(data / "part.json", data / "alias.json")
    return data


LINEITEM = [{"name": "l_orderkey", "type": "int64"}, {"name": "l_partkey", "type": "int32"},
            {"name": "l_quantity", "type": "decimal(12,2)"}, {"name": "l_extendedprice", "type": "decimal(12,2)"},
            {"name": "l_shipdate", "type": "date"}, {"name": "l_returnflag", "type": "string"}]


def base() -> dict:
    """A valid request using every kind; operations deliberately out of order."""
    return {"name": "q1-ish", "operations": [
        {"kind": "read", "name": "li", "path": "lineitem.json", "format": "json", "schema": copy.deepcopy(LINEITEM)},
        {"kind": "send", "name": "out0", "input": "fin0", "transport": "tcp", "host": "127.0.0.1", "port": 9000},
        {"kind": "filter", "name": "f", "input": "li", "condition": "l_shipdate <= '1998-09-02'"},
        {"kind": "read", "name": "part", "path": ["part.json"], "format": "json",
         "schema": [{"name": "p_partkey", "type": "int64"}, {"name": "p_brand", "type": "string"}]},
        {"kind": "join", "name": "j", "build": "part", "probe": "f", "build_keys": ["p_partkey"],
         "probe_keys": ["l_partkey"]},
        {"kind": "aggregate", "name": "pa", "input": "j", "mode": "partial",
         "group_by": [{"name": "flag", "expr": "l_returnflag"}],
         "aggregates": [{"name": "sum_qty", "fn": "sum", "expr": "l_quantity"},
                        {"name": "n", "fn": "count_star"},
                        {"name": "avg_price", "fn": "avg", "expr": "l_extendedprice * (1 - 0.05)"}]},
        {"kind": "shuffle", "name": "sh", "input": "pa", "keys": ["flag"], "partitions": 2},
        {"kind": "aggregate", "name": "fin0", "input": "sh[0]", "mode": "final",
         "group_by": [{"name": "flag"}],
         "aggregates": [{"name": "sum_qty", "fn": "sum"}, {"name": "n", "fn": "count_star"},
                        {"name": "avg_price", "fn": "avg", "expr": "ignored in final mode"}]},
        {"kind": "aggregate", "name": "fin1", "input": "sh[1]", "mode": "final",
         "group_by": [{"name": "flag", "expr": "flag"}],
         "aggregates": [{"name": "sum_qty", "fn": "sum"}, {"name": "n", "fn": "count_star"},
                        {"name": "avg_price", "fn": "avg"}]},
        {"kind": "send", "name": "out1", "input": "fin1", "transport": "tcp", "host": "localhost", "port": 9001},
    ]}


def op(req: dict, name: str) -> dict:
    return next(o for o in req["operations"] if o.get("name") == name)


def simple(*ops: dict) -> dict:
    """read 'r' (a int32, s string) -> ops... -> send of the last one."""
    r = {"kind": "read", "name": "r", "path": "lineitem.json", "format": "json",
         "schema": [{"name": "a", "type": "int32"}, {"name": "s", "type": "string"}]}
    last = ops[-1]["name"] if ops else "r"
    send = {"kind": "send", "name": "out", "input": last, "transport": "tcp", "host": "h", "port": 1}
    return {"operations": [r, *ops, send]}


# --- a valid request ---------------------------------------------------------------------------

def test_full_request(root):
    plan = parse_request(base(), root)
    assert plan.name == "q1-ish"
    names = [o.name for o in plan.ops]
    # inputs first; otherwise request order
    assert names == ["li", "f", "part", "j", "pa", "sh", "fin0", "out0", "fin1", "out1"]
    li = plan.op("li")
    assert isinstance(li, Read) and li.format is FileFormat.JSON
    assert li.paths == (str((root / "lineitem.json").resolve()),)
    f = plan.op("f")
    assert isinstance(f, Filter) and f.condition.type == T.BOOLEAN
    j = plan.op("j")
    assert isinstance(j, Join) and j.type is JoinType.INNER
    assert j.build_keys == (Column("p_partkey", 0, T.INT64),)
    assert j.probe_keys == (Cast(Column("l_partkey", 1, T.INT32), T.INT64, T.INT64),)  # narrower side cast
    assert plan.schemas["j"].names == [f["name"] for f in LINEITEM] + ["p_partkey", "p_brand"]
    partial = Schema((Field("flag", T.STRING), Field("sum_qty", D(18, 2)), Field("n", T.INT64),
                      Field("avg_price__sum", D(18, 4)), Field("avg_price__count", T.INT64)))
    assert plan.schemas["pa"] == partial
    assert plan.schemas["sh"] == partial
    sh = plan.op("sh")
    assert isinstance(sh, Shuffle) and sh.partitions == 2
    complete = Schema((Field("flag", T.STRING), Field("sum_qty", D(18, 2)), Field("n", T.INT64),
                       Field("avg_price", T.FLOAT64)))
    assert plan.schemas["fin0"] == complete and plan.schemas["fin1"] == complete
    fin0 = plan.op("fin0")
    assert isinstance(fin0, Aggregate) and fin0.mode is AggMode.FINAL and fin0.input == InputRef("sh", 0)
    assert [a.expr for a in fin0.aggregates] == [Column("sum_qty", 1, D(18, 2)), Column("n", 2, T.INT64),
                                                 Column("avg_price__sum", 3, D(18, 4))]
    out1 = plan.op("out1")
    assert isinstance(out1, Send) and (out1.transport, out1.host, out1.port) == ("tcp", "localhost", 9001)
    assert "out0" not in plan.schemas
    assert [s.name for s in plan.sends] == ["out0", "out1"]
    assert plan.consumers("sh") == [(plan.op("fin0"), InputRef("sh", 0)), (plan.op("fin1"), InputRef("sh", 1))]


def test_every_expression_is_bound(root):
    plan = parse_request(base(), root)
    for o in plan.ops:
        if isinstance(o, Filter):
            check_bound(o.condition, plan.input_schema(o.input))
        if isinstance(o, Join):
            for k in o.build_keys:
                check_bound(k, plan.schemas[o.build.op])
            for k in o.probe_keys:
                check_bound(k, plan.schemas[o.probe.op])
        if isinstance(o, Aggregate):
            for g in o.group_by:
                check_bound(g.expr, plan.input_schema(o.input))
            for a in o.aggregates:
                if a.expr is not None:
                    check_bound(a.expr, plan.input_schema(o.input))


def test_complete_aggregate_types(root):
    req = simple({"kind": "aggregate", "name": "agg", "input": "r", "group_by": [],
                  "aggregates": [{"name": "s1", "fn": "sum", "expr": "a"}, {"name": "c", "fn": "count", "expr": "s"},
                                 {"name": "lo", "fn": "min", "expr": "s"}, {"name": "hi", "fn": "max", "expr": "a"},
                                 {"name": "av", "fn": "avg", "expr": "a"}, {"name": "n", "fn": "count_star"},
                                 {"name": "fs", "fn": "sum", "expr": "a / 2"}]})
    plan = parse_request(req, root)
    assert plan.schemas["agg"] == Schema((Field("s1", T.INT64), Field("c", T.INT64), Field("lo", T.STRING),
                                          Field("hi", T.INT32), Field("av", T.FLOAT64), Field("n", T.INT64),
                                          Field("fs", T.FLOAT64)))
    agg = plan.op("agg")
    assert agg.mode is AggMode.COMPLETE and agg.aggregates[5].fn is AggFn.COUNT_STAR and agg.aggregates[5].expr is None


def test_project_join_variants_and_fan_out(root):
    req = simple(
        {"kind": "project", "name": "p", "input": "r",
         "columns": [{"name": "'); system(\"id\"); //", "expr": "a + 1"}, {"name": "k", "expr": "a"}]},
        {"kind": "join", "name": "semi", "build": "r", "probe": "p", "build_keys": ["a"], "probe_keys": ["k"],
         "type": "left_semi", "condition": "s <> 'x' AND k > 0"},
        {"kind": "join", "name": "outer", "build": "r", "probe": "p", "build_keys": ["a"], "probe_keys": ["k"],
         "type": "left_outer", "columns": [{"name": "x", "expr": "s"}, {"name": "y", "expr": "k + a"}]},
        {"kind": "project", "name": "both", "input": "semi", "columns": [{"name": "k", "expr": "k"}]},
    )
    req["operations"].append({"kind": "send", "name": "out2", "input": "outer", "transport": "tcp",
                              "host": "h", "port": 2})
    plan = parse_request(req, root)
    assert plan.schemas["p"].names == ["'); system(\"id\"); //", "k"]
    assert plan.schemas["semi"] == plan.schemas["p"]  # semi joins output probe columns
    semi = plan.op("semi")
    assert semi.condition is not None and semi.type is JoinType.LEFT_SEMI
    assert plan.schemas["outer"] == Schema((Field("x", T.STRING), Field("y", T.INT64)))
    outer = plan.op("outer")  # columns are bound against probe columns then build columns
    assert outer.columns[1].expr.right.arg == Column("a", 2, T.INT32)
    # a self join without renaming: every column name is on both sides
    with pytest.raises(RequestError, match="ambiguous") as info:
        parse_request(_with(req, "outer", probe="r", probe_keys=["a"], columns=[{"name": "x", "expr": "s"}]), root)
    assert info.value.path == "operations[3].columns[0].expr"


def _with(req: dict, name: str, **fields) -> dict:
    req = copy.deepcopy(req)
    op(req, name).update(fields)
    return req


# --- malformed requests: exact path and an informative message -------------------------------------

def _set(opname, /, **fields):
    return lambda r: op(r, opname).update(fields)


def _drop(name, key):
    return lambda r: op(r, name).pop(key)


def _agg(opname, index, /, **fields):
    return lambda r: op(r, opname)["aggregates"][index].update(fields)


def _append(o):
    return lambda r: r["operations"].append(o)


BAD = [
    # the body
    ("ops-missing", lambda r: r.pop("operations"), "operations", "missing field 'operations'"),
    ("ops-not-list", lambda r: r.update(operations={"a": 1}), "operations", "must be an array"),
    ("ops-empty", lambda r: r.update(operations=[]), "operations", "must not be empty"),
    ("top-typo", lambda r: r.update(nmae="x"), "nmae", "unknown field 'nmae'"),
    ("label-type", lambda r: r.update(name=5), "name", "must be a string"),
    # operations' shape
    ("op-not-object", lambda r: r["operations"].insert(2, "filter"), "operations[2]", "must be a JSON object"),
    ("kind-missing", _drop("f", "kind"), "operations[2].kind", "missing field 'kind'"),
    ("kind-unknown", _set("f", kind="scan"), "operations[2].kind", "unknown operation kind 'scan'"),
    ("kind-type", _set("f", kind=3), "operations[2].kind", "must be a string"),
    ("name-missing", _drop("f", "name"), "operations[2].name", "missing field 'name'"),
    ("name-pattern", _set("part", name="part-1"), "operations[3].name", "must match"),
    ("name-duplicate", _set("part", name="li"), "operations[3].name", "duplicate operation name 'li'"),
    ("field-typo", _set("f", condtion="x"), "operations[2].condtion", "unknown field 'condtion'"),
    ("field-missing", _drop("f", "condition"), "operations[2].condition", "missing field 'condition'"),
    # references and the graph
    ("input-unknown", _set("f", input="lii"), "operations[2].input", "did you mean 'li'"),
    ("input-type", _set("f", input=["li"]), "operations[2].input", "must be an operation name"),
    ("input-syntax", _set("f", input="li[x]"), "operations[2].input", "NAME[i]"),
    ("input-send", _set("f", input="out0"), "operations[2].input", "is a send"),
    ("shuffle-no-index", _set("fin0", input="sh"), "operations[7].input", "sh[0]..sh[1]"),
    ("shuffle-range", _set("fin1", input="sh[2]"), "operations[8].input", "has 2 outputs"),
    ("index-non-shuffle", _set("f", input="li[0]"), "operations[2].input", "single output"),
    ("cycle", _set("f", input="j"), "operations[2].input", "cycle: f -> j -> f"),
    ("cycle-long", lambda r: r["operations"].__setitem__(0, {"kind": "filter", "name": "li", "input": "fin0",
                                                             "condition": "TRUE"}),
     "operations[0].input", "cycle: li -> fin0 -> sh -> pa -> j -> f -> li"),
    ("self-cycle", _set("f", input="f"), "operations[2].input", "cycle: f -> f"),
    ("unused", _append({"kind": "filter", "name": "dead", "input": "li", "condition": "TRUE"}),
     "operations[10]", "'dead' is not used"),
    ("no-send", lambda r: r.update(operations=[op(r, "li")]), "operations", "no send operation"),
    ("shuffle-output-unread", _set("sh", partitions=3), "operations[6].partitions", "sh[2] are not read"),
    ("shuffle-huge", _set("sh", partitions=10**12), "operations[6].partitions",
     "sh[2], sh[3], sh[4], sh[5], sh[6], sh[7], sh[8], sh[9], sh[10], sh[11] and 999999999988 more"),
    # send
    ("port-zero", _set("out0", port=0), "operations[1].port", "must be 1..65535"),
    ("port-big", _set("out0", port=70000), "operations[1].port", "must be 1..65535"),
    ("port-string", _set("out0", port="9000"), "operations[1].port", "must be an integer"),
    ("port-bool", _set("out0", port=True), "operations[1].port", "must be an integer"),
    ("transport-case", _set("out0", transport="TCP"), "operations[1].transport", "lower-case"),
    ("transport-empty", _set("out0", transport=""), "operations[1].transport", "must not be empty"),
    ("host-empty", _set("out0", host=""), "operations[1].host", "must not be empty"),
    ("host-space", _set("out0", host="a b"), "operations[1].host", "host name"),
    # read
    ("format", _set("li", format="xml"), "operations[0].format", "json, orc, parquet, csv"),
    ("schema-empty", _set("li", schema=[]), "operations[0].schema", "must not be empty"),
    ("schema-dup", lambda r: op(r, "li")["schema"][3].update(name="l_partkey"), "operations[0].schema[3].name",
     "duplicate column name 'l_partkey'"),
    ("schema-type", lambda r: op(r, "li")["schema"][3].update(type="money"), "operations[0].schema[3].type",
     "unknown type 'money'"),
    ("schema-decimal", lambda r: op(r, "li")["schema"][2].update(type="decimal(39,2)"),
     "operations[0].schema[2].type", "precision"),
    ("schema-extra", lambda r: op(r, "li")["schema"][1].update(nullable=True), "operations[0].schema[1].nullable",
     "unknown field 'nullable'"),
    ("schema-name-empty", lambda r: op(r, "li")["schema"][0].update(name=""), "operations[0].schema[0].name",
     "must not be empty"),
    ("schema-name-nul", lambda r: op(r, "li")["schema"][0].update(name="a\x00b"), "operations[0].schema[0].name",
     "NUL"),
    ("path-type", _set("li", path=5), "operations[0].path", "a string or a list of strings"),
    ("path-list-item", _set("li", path=["lineitem.json", 3]), "operations[0].path[1]", "must be a string"),
    # expressions in operations
    ("filter-not-boolean", _set("f", condition="l_quantity + 1"), "operations[2].condition",
     "must be boolean, got decimal(13,2)"),
    ("filter-syntax", _set("f", condition="l_quantity >> > 3"), "operations[2].condition", "syntax error"),
    ("filter-unknown-column", _set("f", condition="l_shipdat < '1998-01-01'"), "operations[2].condition",
     "unknown column 'l_shipdat'"),
    ("filter-not-string", _set("f", condition=True), "operations[2].condition", "must be a string"),
    # join
    ("join-key-count", _set("j", build_keys=["p_partkey", "p_brand"]), "operations[4].probe_keys",
     "'build_keys' has 2 expressions but 'probe_keys' has 1"),
    ("join-key-types", _set("j", probe_keys=["l_returnflag"]), "operations[4].probe_keys[0]",
     "type string and build_keys[0] has type int64"),
    ("join-key-bad", _set("j", build_keys=["l_partkey"]), "operations[4].build_keys[0]", "unknown column"),
    ("join-keys-empty", _set("j", build_keys=[], probe_keys=[]), "operations[4].build_keys", "must not be empty"),
    ("join-type", _set("j", type="full_outer"), "operations[4].type", "inner, left_semi, left_anti, left_outer"),
    ("join-condition", _set("j", condition="p_brand"), "operations[4].condition", "must be boolean"),
    ("join-clash", lambda r: op(r, "part")["schema"].append({"name": "l_returnflag", "type": "string"}),
     "operations[4].columns", "both join inputs have a column named 'l_returnflag'"),
    ("join-anti-build-column", _set("j", type="left_anti", columns=[{"name": "b", "expr": "p_brand"}]),
     "operations[4].columns[0].expr", "uses a build column"),
    ("join-columns-dup", _set("j", columns=[{"name": "a", "expr": "p_brand"}, {"name": "a", "expr": "l_partkey"}]),
     "operations[4].columns[1].name", "duplicate output column 'a'"),
    # aggregate
    ("agg-fn", _agg("pa", 0, fn="median"), "operations[5].aggregates[0].fn", "sum, count, count_star, min, max, avg"),
    ("agg-count-star-expr", _agg("pa", 1, expr="l_quantity"), "operations[5].aggregates[1].expr", "takes no 'expr'"),
    ("agg-sum-string", _agg("pa", 0, expr="l_returnflag"), "operations[5].aggregates[0].expr",
     "sum needs a numeric expression, got string"),
    ("agg-expr-missing", lambda r: op(r, "pa")["aggregates"][0].pop("expr"), "operations[5].aggregates[0].expr",
     "sum needs an expression"),
    ("agg-mode", _set("pa", mode="merge"), "operations[5].mode", "complete, partial, final"),
    ("agg-empty", _set("pa", group_by=[], aggregates=[]), "operations[5].aggregates", "at least one"),
    ("agg-dup-partial", _agg("pa", 0, name="avg_price__sum"), "operations[5].aggregates[2].name",
     "duplicate output column 'avg_price__sum'"),
    ("agg-final-missing-state", _agg("fin0", 0, name="sum_quantity"), "operations[7].aggregates[0].name",
     "partial-state column 'sum_quantity'"),
    ("agg-final-bad-state", _agg("fin0", 1, name="flag"), "operations[7].aggregates[1].name",
     "must be an integer, got string"),
    ("agg-group-no-expr", lambda r: op(r, "pa")["group_by"][0].pop("expr"), "operations[5].group_by[0].expr",
     "missing field 'expr'"),
    # shuffle
    ("shuffle-partitions", _set("sh", partitions=0), "operations[6].partitions", "must be >= 1"),
    ("shuffle-partitions-float", _set("sh", partitions=2.0), "operations[6].partitions", "must be an integer"),
    ("shuffle-keys", _set("sh", keys=[]), "operations[6].keys", "must not be empty"),
    ("shuffle-key-expr", _set("sh", keys=["flag", "nope"]), "operations[6].keys[1]", "unknown column 'nope'"),
]


@pytest.mark.parametrize("mutate, path, fragment", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_malformed(root, mutate, path, fragment):
    req = base()
    mutate(req)
    with pytest.raises(RequestError) as info:
        parse_request(req, root)
    assert info.value.path == path, info.value.message
    assert fragment in info.value.message, info.value.message


def test_body_must_be_an_object(root):
    for body in ([], "ops", None, 3):
        with pytest.raises(RequestError, match="must be a JSON object") as info:
            parse_request(body, root)
        assert info.value.path is None


def test_optional_fields_may_be_null(root):
    req = base()
    op(req, "j").update(type=None, condition=None, columns=None)
    op(req, "pa")["aggregates"][1]["expr"] = None
    parse_request(req, root)


# --- read paths --------------------------------------------------------------------------------

def _read_paths(root: Path, path) -> tuple[str, ...]:
    req = simple()
    req["operations"][0]["path"] = path
    return parse_request(req, root).ops[0].paths


def _read_error(root: Path, path) -> RequestError:
    with pytest.raises(RequestError) as info:
        _read_paths(root, path)
    return info.value


@pytest.mark.parametrize("path, where, fragment", [
    ("../outside/secret.json", "operations[0].path", "must not contain '..'"),
    ("parts/../../outside/secret.json", "operations[0].path", "must not contain '..'"),
    ("/etc/passwd", "operations[0].path", "must be relative"),
    ("~/secret.json", "operations[0].path", "must be relative"),
    (["lineitem.json", "../x"], "operations[0].path[1]", "must not contain '..'"),
    ("leak.json", "operations[0].path", "resolves outside the data root"),
    ("leakdir/secret.json", "operations[0].path", "resolves outside the data root"),
    ("leakdir/missing.json", "operations[0].path", "resolves outside the data root"),
    ("missing.json", "operations[0].path", "does not exist"),
    ("parts", "operations[0].path", "not a regular file"),
    ("", "operations[0].path", "must not be empty"),
    ([], "operations[0].path", "must not be an empty list"),
    ("parts/*.parquet", "operations[0].path", "matches no files"),
    ("leak*", "operations[0].path", "resolves outside the data root"),
    ("leakdir/*", "operations[0].path", "resolves outside the data root"),
    (["part.json", "alias.json"], "operations[0].path[1]", "named twice"),
    (["parts/p-0.json", "parts/*.json"], "operations[0].path[1]", "named twice"),
    ("a\x00b", "operations[0].path", "NUL"),
])
def test_path_errors(root, path, where, fragment):
    e = _read_error(root, path)
    assert e.path == where and fragment in e.message, e.message
    assert "secret" not in e.message or "secret" in str(path)  # nothing about outside files leaks


def test_symlink_inside_the_root_is_fine(root):
    assert _read_paths(root, "alias.json") == (str((root / "part.json").resolve()),)


def test_glob_is_sorted_and_skips_directories(root):
    parts = (root / "parts").resolve()
    assert _read_paths(root, "parts/*.json") == (str(parts / "p-0.json"), str(parts / "p-1.json"))
    assert _read_paths(root, "parts/*") == (str(parts / "p-0.json"), str(parts / "p-1.json"), str(parts / "p-2.csv"))
    assert _read_paths(root, "parts/**/*.json") == (str(parts / "nested" / "p-9.json"), str(parts / "p-0.json"),
                                                    str(parts / "p-1.json"))
    assert _read_paths(root, "parts/p-[01].json") == (str(parts / "p-0.json"), str(parts / "p-1.json"))


def test_list_of_files_keeps_order(root):
    r = root.resolve()
    assert _read_paths(root, ["part.json", "lineitem.json", "parts/p-2.csv"]) == (
        str(r / "part.json"), str(r / "lineitem.json"), str(r / "parts" / "p-2.csv"))


def test_data_root_itself_may_be_a_symlink(root, tmp_path):
    link = tmp_path / "root-link"
    os.symlink(root, link)
    assert _read_paths(link, "lineitem.json") == (str((root / "lineitem.json").resolve()),)
    with pytest.raises(RequestError, match="outside"):
        _read_paths(link, "leak.json")


@pytest.mark.parametrize("name", ["'); system(\"id\"); //", '"; */ #include <stdlib.h>', "new\nline", "日本語 ✓"])
def test_hostile_schema_names_are_data(root, name):
    quoted = '"' + name.replace('"', '""') + '"'
    req = simple({"kind": "filter", "name": "f", "input": "r", "condition": f"{quoted} > 0"},
                 {"kind": "project", "name": "p", "input": "f", "columns": [{"name": name + "!", "expr": quoted}]})
    req["operations"][0]["schema"].append({"name": name, "type": "int64"})
    plan = parse_request(req, root)
    assert plan.op("f").condition.left == Column(name, 2, T.INT64)
    assert plan.schemas["p"] == Schema((Field(name + "!", T.INT64),))
