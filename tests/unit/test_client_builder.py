"""The fluent builder produces exactly the contract §1 request JSON."""
from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pytest

from jumpgate.client import BuilderError, Jumpgate, build_request, read

# The thesis' running example (Figure 3.4 / Figure A.1) in the contract's §1 format. Figure A.1
# joins and then projects (price, state); under the contract a join whose sides share a column
# name (store_id) needs `columns`, so that projection moves into the join.
THESIS_REQUEST = {
    "name": "total sales per state for item 100",
    "operations": [
        {"kind": "read", "name": "read_sales", "path": "sales/*.jsonl", "format": "json",
         "schema": [{"name": "item_id", "type": "int32"}, {"name": "store_id", "type": "int32"},
                    {"name": "price", "type": "float64"}]},
        {"kind": "filter", "name": "filter_sales", "input": "read_sales", "condition": "item_id = 100"},
        {"kind": "project", "name": "project_sales", "input": "filter_sales",
         "columns": [{"name": "store_id", "expr": "store_id"}, {"name": "price", "expr": "price"}]},
        {"kind": "read", "name": "read_stores", "path": "stores.jsonl", "format": "json",
         "schema": [{"name": "store_id", "type": "int32"}, {"name": "state", "type": "string"}]},
        {"kind": "project", "name": "project_stores", "input": "read_stores",
         "columns": [{"name": "store_id", "expr": "store_id"}, {"name": "state", "expr": "state"}]},
        {"kind": "join", "name": "join_sales_stores", "build": "project_stores", "probe": "project_sales",
         "build_keys": ["store_id"], "probe_keys": ["store_id"], "type": "inner",
         "columns": [{"name": "price", "expr": "price"}, {"name": "state", "expr": "state"}]},
        {"kind": "aggregate", "name": "agg", "input": "join_sales_stores",
         "group_by": [{"name": "state", "expr": "state"}],
         "aggregates": [{"name": "total_price", "fn": "sum", "expr": "price"}], "mode": "partial"},
        {"kind": "shuffle", "name": "shuffle", "input": "agg", "keys": ["state"], "partitions": 2},
        {"kind": "send", "name": "host1", "input": "shuffle[0]", "transport": "tcp", "host": "10.0.0.1",
         "port": 1234},
        {"kind": "send", "name": "host2", "input": "shuffle[1]", "transport": "tcp", "host": "10.0.0.2",
         "port": 4567},
    ],
}


@pytest.fixture
def jg():
    with Jumpgate("http://127.0.0.1:1") as j:
        yield j


def test_thesis_running_example(jg):
    sales = (jg.read("sales/*.jsonl", format="json", name="read_sales",
                     schema={"item_id": "int32", "store_id": "int32", "price": "float64"})
             .filter("item_id = 100", name="filter_sales")
             .project(["store_id", "price"], name="project_sales"))
    stores = (jg.read("stores.jsonl", schema=[("store_id", "int32"), ("state", "string")], name="read_stores")
              .project(["store_id", "state"], name="project_stores"))
    agg = (sales.join(stores, on="store_id", columns=["price", "state"], name="join_sales_stores")
           .aggregate(group_by=["state"], total_price="sum(price)", mode="partial", name="agg"))
    s = agg.shuffle("state", 2, name="shuffle")
    request = jg.request(s[0].send("10.0.0.1", 1234, "TCP", name="host1"), s[1].send("10.0.0.2", 4567, name="host2"),
                         name="total sales per state for item 100")
    assert request == THESIS_REQUEST
    assert json.loads(json.dumps(request)) == request  # plain JSON all the way down


def brief_example(jg):
    sales = jg.read("sales/*.jsonl", format="json",
                    schema={"item_id": "int32", "store_id": "int32", "price": "decimal(12,2)"})
    q = sales.filter("item_id = 100").project(store_id="store_id", price="price")
    stores = jg.read("stores.jsonl", schema=[("store_id", "int32"), ("state", "string")])
    agg = q.join(stores, on=["store_id"], columns={"state": "state", "price": "price"}) \
        .aggregate(group_by=["state"], total="sum(price)")
    s = agg.shuffle(["state"], 2)
    return jg.request(s[0].send("127.0.0.1", 1234), s[1].send("127.0.0.1", 4567))


def test_generated_names_follow_positions_and_are_deterministic(jg):
    req = brief_example(jg)
    names = [op["name"] for op in req["operations"]]
    assert names == ["read_0", "filter_1", "project_2", "read_3", "join_4", "aggregate_5", "shuffle_6",
                     "send_7", "send_8"]
    assert req["operations"][4]["build"] == "read_3" and req["operations"][4]["probe"] == "project_2"
    assert req["operations"][7]["input"] == "shuffle_6[0]" and req["operations"][8]["input"] == "shuffle_6[1]"
    assert req["operations"][0]["schema"][2] == {"name": "price", "type": "decimal(12,2)"}
    assert req == brief_example(jg)


def test_generated_name_avoids_explicit_one(jg):
    r = jg.read("t.jsonl", schema={"a": "int32"}, name="filter_1")
    req = jg.request(r.filter("a > 1").send("h", 1))
    assert [op["name"] for op in req["operations"]] == ["filter_1", "filter_1_", "send_2"]


def test_nodes_are_immutable_and_reusable(jg):
    r = jg.read("t.jsonl", schema={"a": "int32", "b": "string"})
    f1 = r.filter("a > 1")
    f2 = r.filter("a < 0")
    assert f1 is not f2 and f1.input is r and f2.input is r
    with pytest.raises(dataclasses.FrozenInstanceError):
        f1.condition = "x"  # type: ignore[misc]
    req = jg.request(f1.send("h", 1), f2.send("h", 2))
    kinds = [op["kind"] for op in req["operations"]]
    assert kinds == ["read", "filter", "send", "filter", "send"]  # the shared read appears once
    assert req["operations"][3]["input"] == "read_0"
    # a structurally equal but separate read is a separate operation
    r2 = jg.read("t.jsonl", schema={"a": "int32", "b": "string"})
    assert len(jg.request(r.send("h", 1), r2.send("h", 2))["operations"]) == 4


def test_duplicate_explicit_names_are_rejected(jg):
    a = jg.read("a", schema={"x": "int32"}, name="r")
    b = jg.read("b", schema={"x": "int32"}, name="r")
    with pytest.raises(BuilderError, match="two different operations are named 'r'"):
        jg.request(a.send("h", 1), b.send("h", 2))


def test_schema_forms(jg):
    want = [{"name": "a", "type": "int32"}, {"name": "d", "type": "decimal(12,2)"}, {"name": "s", "type": "string"},
            {"name": "t", "type": "date"}]
    forms = [
        {"a": "int32", "d": "DECIMAL(12, 2)", "s": "string", "t": "date"},
        [("a", "int32"), ("d", "decimal(12,2)"), ("s", "string"), ("t", "date")],
        [{"name": "a", "type": "int32"}, {"name": "d", "type": "decimal(12,2)"},
         {"name": "s", "type": "string"}, {"name": "t", "type": "date"}],
        pa.schema([("a", pa.int32()), ("d", pa.decimal128(12, 2)), ("s", pa.string()), ("t", pa.date32())]),
    ]
    for schema in forms:
        req = jg.request(jg.read(["x/1.orc", "x/2.orc"], "ORC", schema).send("h", 9))
        assert req["operations"][0] == {"kind": "read", "name": "read_0", "path": ["x/1.orc", "x/2.orc"],
                                        "format": "orc", "schema": want}


@pytest.mark.parametrize("schema, message", [
    (None, "needs a schema"),
    ({}, "must not be empty"),
    ({"a": "int"}, "unknown type 'int'"),
    ({"a": "decimal(39,2)"}, "precision"),
    ([("a", "int32"), ("a", "int64")], "duplicate"),
    ([("a",)], "cannot read a schema column"),
    ({"": "int32"}, "non-empty string"),
    (pa.schema([("a", pa.int8())]), "no contract equivalent"),
])
def test_bad_schemas(schema, message):
    with pytest.raises(BuilderError, match=message):
        read("t.jsonl", schema=schema)


def test_project_forms(jg):
    r = jg.read("t", schema={"a": "int32", "b": "int32", "name": "string"})
    p = r.project("a", ("twice", "a * 2"), {"name": "n", "expr": "name"}, {"c": "a + b"}, ["b"], s="a - b")
    assert p.columns == ("a", "twice", "n", "c", "b", "s")
    body = jg.request(p.send("h", 1))["operations"][1]["columns"]
    assert body == [{"name": "a", "expr": "a"}, {"name": "twice", "expr": "a * 2"}, {"name": "n", "expr": "name"},
                    {"name": "c", "expr": "a + b"}, {"name": "b", "expr": "b"}, {"name": "s", "expr": "a - b"}]


@pytest.mark.parametrize("call, message", [
    (lambda r: r.project(), "at least one column"),
    (lambda r: r.project("a", a="b"), "duplicate column names"),
    (lambda r: r.project(3), "cannot read a column"),
    (lambda r: r.project("nosuch"), "no column 'nosuch'"),
    (lambda r: r.project('"Nosuch"'), "no column 'Nosuch'"),
    (lambda r: r.filter(""), "filter condition"),
    (lambda r: r.filter(None), "filter condition"),
    (lambda r: r.filter("a > 1", name="1bad"), "operation name"),
    (lambda r: r.filter("a > 1", name="bad-name"), "operation name"),
    (lambda r: r.shuffle("a", 0), "partitions"),
    (lambda r: r.shuffle([], 2), "non-empty list"),
    (lambda r: r.shuffle("zz", 2), "no column 'zz'"),
    (lambda r: r.send("h", 0), "port"),
    (lambda r: r.send("h", 70000), "port"),
    (lambda r: r.send("", 1), "host"),
    (lambda r: r.aggregate(), "group_by columns or aggregates"),
    (lambda r: r.aggregate(t="median(a)"), "unknown function 'median'"),
    (lambda r: r.aggregate(t="sum a"), "fn\\(expr\\)"),
    (lambda r: r.aggregate(t="sum()"), "expression"),
    (lambda r: r.aggregate(t="count_star(a)"), "takes no expression"),
    (lambda r: r.aggregate(["a"], a="sum(b)"), "duplicate output names"),
    (lambda r: r.aggregate(t="sum(a)", mode="partialish"), "mode"),
    (lambda r: r.aggregate(["q"], t="sum(a)"), "no column 'q'"),
    (lambda r: r.aggregate(t="sum(q)"), "no column 'q'"),
    (lambda r: r.join(r, on="a"), "both sides have columns"),
    (lambda r: r.join(r, on="a", type="full_outer", columns=["a"]), "join type"),
    (lambda r: r.join(r, build_keys=["a", "b"], probe_keys=["a"], columns=["a"]), "2 build keys but 1"),
    (lambda r: r.join(r, on="a", build_keys=["a"], columns=["a"]), "not both"),
    (lambda r: r.join(r, columns=["a"]), "needs on="),
    (lambda r: r.join("t", on="a"), "build side"),
    (lambda r: r.join(r, on="zz", columns=["a"]), "no column 'zz'"),
    (lambda r: r.join(r, on="a", columns=[]), "must not be empty"),
])
def test_local_validation(jg, call, message):
    r = jg.read("t", schema={"a": "int32", "b": "int64"})
    with pytest.raises(BuilderError, match=message):
        call(r)


def test_expressions_are_not_second_guessed(jg):
    r = jg.read("t", schema={"a": "int32"})
    # not bare column names: left to the server
    p = r.project(x="nosuch + 1", y="TRUE", z="CAST(a AS int64)", w="'lit'")
    assert p.columns == ("x", "y", "z", "w")
    # column names are matched case-insensitively (the server decides on case)
    r.project("A")
    # after an expression-typed step whose columns the client cannot know, nothing is checked
    semi = r.join(jg.read("u", schema={"a": "int32"}), on="a", type="left_semi")
    assert semi.columns is None
    semi.project("anything")


def test_join_forms(jg):
    probe = jg.read("p", schema={"k": "int32", "v": "int64"})
    build = jg.read("b", schema={"bk": "int32", "w": "string"})
    j = probe.join(build, on=[("k", "bk")], type="left_outer", condition="v > 0")
    assert j.columns == ("k", "v", "bk", "w")
    op = jg.request(j.send("h", 1))["operations"][2]
    assert op == {"kind": "join", "name": "join_2", "build": "read_1", "probe": "read_0", "build_keys": ["bk"],
                  "probe_keys": ["k"], "type": "left_outer", "condition": "v > 0"}
    j2 = probe.join(build, build_keys="bk + 1", probe_keys=["k"], columns=[("key", "k"), ("w", "w")])
    op = jg.request(j2.send("h", 1))["operations"][2]
    assert op["build_keys"] == ["bk + 1"] and op["columns"] == [{"name": "key", "expr": "k"},
                                                                 {"name": "w", "expr": "w"}]


def test_aggregate_forms(jg):
    r = jg.read("t", schema={"g": "string", "x": "float64"})
    a = r.aggregate("g", aggregates=[("s", "sum", "x"), {"name": "n", "fn": "COUNT", "expr": "x"},
                                     ("m", "max(x)")],
                    lo=("min", "x"), c="count(*)", c2=("count_star",), av="avg(x + 1)", mode="partial")
    assert a.columns == ("g", "s", "n", "m", "lo", "c", "c2", "av__sum", "av__count")
    op = jg.request(a.send("h", 1))["operations"][1]
    assert op["aggregates"] == [
        {"name": "s", "fn": "sum", "expr": "x"}, {"name": "n", "fn": "count", "expr": "x"},
        {"name": "m", "fn": "max", "expr": "x"}, {"name": "lo", "fn": "min", "expr": "x"},
        {"name": "c", "fn": "count_star"}, {"name": "c2", "fn": "count_star"},
        {"name": "av", "fn": "avg", "expr": "x + 1"}]
    assert op["group_by"] == [{"name": "g", "expr": "g"}] and op["mode"] == "partial"
    total = r.aggregate(aggregates={"n": "count(*)"})
    assert jg.request(total.send("h", 1))["operations"][1]["group_by"] == []
    final = a.aggregate(["g"], av="avg(av)", mode="final")  # final reads partial states by name
    assert final.columns == ("g", "av")


def test_shuffle_indexing(jg):
    s = jg.read("t", schema={"a": "int32"}).shuffle("a", 3)
    assert len(s) == 3 and [p.index for p in s] == [0, 1, 2]
    assert s[-1].index == 2 and s[0].columns == ("a",)
    with pytest.raises(IndexError):
        s[3]
    with pytest.raises(TypeError):
        s["0"]  # type: ignore[index]
    req = jg.request(s[2].filter("a > 0").send("h", 1))
    assert req["operations"][2]["input"] == "shuffle_1[2]"


def test_request_needs_sends(jg):
    r = jg.read("t", schema={"a": "int32"})
    with pytest.raises(BuilderError, match="at least one send"):
        jg.request()
    with pytest.raises(BuilderError, match="built from send nodes"):
        jg.request(r)


def test_deep_plans_do_not_recurse():
    node = read("t", schema={"a": "int32"})
    for i in range(3000):
        node = node.filter(f"a > {i}")
    node = node.project("a")  # column checks look only one step back
    req = build_request([node.send("h", 1)])
    assert len(req["operations"]) == 3003 and req["operations"][-2]["input"] == "filter_3000"


def test_collect_without_session():
    with pytest.raises(BuilderError, match="without a Jumpgate session"):
        read("t", schema={"a": "int32"}).collect()
