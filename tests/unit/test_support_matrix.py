"""The support matrix (docs/support-matrix.md) says what the code does: the request language's
catalogue parses and binds, the NCAs' declarations agree with their operator interfaces, and the
Spark plugin's tables (jumpgate/matrix/spark.py) agree with its Scala sources."""
from __future__ import annotations

import pytest

from jumpgate.contract.types import Field as TField
from jumpgate.contract.types import Kind, Schema, parse_type
from jumpgate.dataflow import expr as E
from jumpgate.dataflow import language, parse
from jumpgate.dataflow.expr import walk
from jumpgate.dataflow.parse import parse_expression
from jumpgate.dataflow.request import parse_request
from jumpgate.dataflow.typecheck import bind
from jumpgate.matrix import spark
from jumpgate.nca.registry import load_registry

SCHEMA = Schema(tuple(TField(n, parse_type(t)) for n, t in language.EXAMPLE_SCHEMA))


# --- the request language ----------------------------------------------------------------------


@pytest.mark.parametrize("construct", language.CONSTRUCTS, ids=lambda c: c.id)
def test_each_construct_example_parses_binds_and_is_that_construct(construct):
    tree = bind(parse_expression(construct.example, "x"), SCHEMA, "x")
    nodes = [n for n in walk(tree) if isinstance(n, construct.node)]
    assert nodes, f"{construct.example!r} has no {construct.node.__name__}"
    if construct.ops:
        assert {getattr(n, "op", None) for n in nodes} & set(construct.ops)


@pytest.mark.parametrize("function", language.FUNCTION_LIST, ids=lambda f: f.name)
def test_each_function_example_parses_and_binds(function):
    tree = bind(parse_expression(function.example, "x"), SCHEMA, "x")
    assert isinstance(tree, E.Func) and tree.name == function.name


def test_the_catalogue_lists_every_function_and_node_of_the_parser():
    assert set(language.FUNCTION_DOCS) == set(E.FUNCTIONS)
    assert parse._FUNCTION_WORDS - {"cast", "substring"} == set(E.FUNCTIONS)
    nodes = {c.node for c in language.CONSTRUCTS}
    assert nodes == {E.Column, E.Literal, E.Unary, E.Binary, E.IsNull, E.InList, E.Like, E.Case, E.Cast, E.Func}
    ops = {op for c in language.CONSTRUCTS for op in c.ops}
    assert set(E.ARITHMETIC_OPS) | set(E.COMPARISON_OPS) | set(E.LOGICAL_OPS) | {"neg", "not"} <= ops


@pytest.mark.parametrize("name", [n for n in language.NOT_IN_LANGUAGE if n in ("ILIKE", "TRY_CAST", "subquery")])
def test_what_is_not_in_the_language_is_rejected_by_name(name):
    text = {"ILIKE": "s ILIKE 'a%'", "TRY_CAST": "TRY_CAST(s AS int32)", "subquery": "i IN (SELECT 1)"}[name]
    with pytest.raises(Exception) as e:
        parse_expression(text, "x")
    assert name.split()[0] in str(e.value) or "subquery" in str(e.value)


# --- the NCAs' declarations --------------------------------------------------------------------


def test_every_registered_nca_declares_its_support_for_its_operations():
    for impl in load_registry().all():
        support = impl.support()
        assert support is not None, impl.name
        assert set(support.operations) == set(impl.operation_kinds), impl.name
        for dimension in ("types", "expressions", "functions", "aggregates"):
            unknown = set(getattr(support, dimension)) - set(_items(dimension))
            assert not unknown, (impl.name, dimension, unknown)


def _items(dimension: str) -> list[str]:
    return {"types": list(language.TYPES), "expressions": [c.id for c in language.CONSTRUCTS],
            "functions": [f.name for f in language.FUNCTION_LIST],
            "aggregates": list(language.AGGREGATES) + list(language.MODES)}[dimension]


def _switch_verdict(tmp_path, key_type: str, fn: str, value_type: str) -> str | None:
    from jumpgate.ncas.switch.query import operation_reason

    (tmp_path / "t.jsonl").write_text("")
    schema = [{"name": "k", "type": key_type}, {"name": "v", "type": value_type}]
    plan = parse_request({"operations": [
        {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": schema},
        {"kind": "aggregate", "name": "g", "input": "r", "mode": "partial", "group_by": [{"name": "k", "expr": "k"}],
         "aggregates": [{"name": "a", "fn": fn, "expr": "v"}]},
        {"kind": "send", "name": "o", "input": "g", "transport": "tcp", "host": "127.0.0.1", "port": 1}]}, tmp_path)
    return operation_reason(plan, plan.op("g"))


@pytest.mark.parametrize("kind", [k for k in Kind if k is not Kind.STRING])
def test_the_switchs_declaration_is_what_its_operator_interface_says(tmp_path, kind):
    support = load_registry(only=["switch.model"]).get("switch.model").support()
    t = "decimal(12,2)" if kind is Kind.DECIMAL else kind.value
    note = support.types[kind.value]
    assert (_switch_verdict(tmp_path, t, "count", "int64") is None) == ("group key" in note), note
    if kind in (Kind.INT32, Kind.INT64, Kind.DECIMAL, Kind.FLOAT64):
        assert (_switch_verdict(tmp_path, "int64", "sum", t) is None) == ("summed" in note), note
    for fn in ("min", "max", "avg"):
        assert fn not in support.aggregates and _switch_verdict(tmp_path, "int64", fn, "int64") is not None


# --- the Spark plugin's tables against its Scala sources ---------------------------------------


def test_spark_expressions_are_the_ones_the_translator_matches():
    cases = spark.scala_expressions()
    assert set(spark.EXPRESSIONS) == set(cases), (
        f"in ExprTranslator.scala, not in jumpgate/matrix/spark.py: {sorted(set(cases) - set(spark.EXPRESSIONS))}; "
        f"the other way: {sorted(set(spark.EXPRESSIONS) - set(cases))}")


@pytest.mark.parametrize("name", sorted(spark.EXPRESSIONS))
def test_each_spark_expression_has_the_status_its_scala_case_implies(name):
    status, _ = spark.EXPRESSIONS[name]
    blocks = spark.scala_expressions()[name]
    text = "".join(blocks)
    only_fails = all(b.split("=>", 1)[1].strip().startswith("fail(") for b in blocks)
    guarded = any(" if " in b.split("=>", 1)[0] for b in blocks)
    if status == "no":
        assert only_fails
    elif status == "incompatible":
        assert "incompatible(" in text and "fail(" not in text
    elif status == "yes":
        assert "fail(" not in text and "incompatible(" not in text and not guarded
    else:
        assert status == "partly" and not only_fails
    if "incompatible(" in text:
        assert status in ("incompatible", "partly")


def test_spark_casts_are_the_translators_in_order():
    assert [c[0] for c in spark.CASTS] == spark.scala_casts()


def test_spark_aggregates_types_and_operators_are_the_plugins():
    names, body = spark.scala_aggregates()
    assert set(spark.AGGREGATES) == names
    for why in spark.AGGREGATES_NOT.values():
        assert f'Why("{why}")' in body
    assert set(spark.TYPES) == spark.scala_types()
    assert {conv: op for op, conv, _, _ in spark.OPERATORS} == spark.scala_operators()
