"""Request limits (dataflow/limits.py): checked before the work they protect, each a clear 400 or
413 naming the JSON path and the limit; and what is within them is accepted."""
from __future__ import annotations

import sys
import time

import pytest

from jumpgate.contract.errors import RequestError
from jumpgate.contract.ntf import generate_ntf
from jumpgate.dataflow.limits import DEFAULT_LIMITS, RequestLimits, RequestTooLarge
from jumpgate.dataflow.request import parse_request
from jumpgate.ncas.software.codegen.scan import generate_scan_query

SCHEMA = [{"name": "a", "type": "int64"}, {"name": "s", "type": "string"}]


@pytest.fixture
def root(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"a": 1, "s": "x"}\n')
    return tmp_path


def request(*middle: dict) -> dict:
    read = {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": SCHEMA}
    last = middle[-1]["name"] if middle else "r"
    send = {"kind": "send", "name": "out", "input": last, "transport": "tcp", "host": "127.0.0.1", "port": 9}
    return {"name": "limits", "operations": [read, *middle, send]}


def filt(condition: str, name: str = "f", input: str = "r") -> dict:
    return {"kind": "filter", "name": name, "input": input, "condition": condition}


def rejected(body: dict, root, limits: RequestLimits = DEFAULT_LIMITS) -> tuple[RequestError, float]:
    started = time.perf_counter()
    with pytest.raises(RequestError) as info:
        parse_request(body, root, limits)
    return info.value, time.perf_counter() - started


def test_defaults_are_documented_values():
    assert DEFAULT_LIMITS == RequestLimits(max_operations=10_000, max_expression_chars=1_000_000,
                                           max_expression_depth=200, max_in_list=50_000,
                                           max_literal_bytes=65_536)


@pytest.mark.parametrize("field", ["max_operations", "max_expression_chars", "max_expression_depth",
                                   "max_in_list", "max_literal_bytes"])
@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_limits_must_be_positive_integers(field, bad):
    with pytest.raises(ValueError, match=field):
        RequestLimits(**{field: bad})


def test_a_hundred_thousand_operations_are_413_before_any_is_read(root):
    filters = [filt("a > 0", f"f{i}", f"f{i - 1}" if i else "r") for i in range(99_998)]
    err, elapsed = rejected(request(*filters), root)
    assert type(err) is RequestTooLarge and err.status == 413
    assert err.path == "operations"
    assert err.message == "the request has 100,000 operations; the limit is 10,000 (max_operations)"
    assert err.context["limit"] == "max_operations" and err.context["maximum"] == 10_000
    assert err.context["found"] == 100_000
    assert elapsed < 1.0
    # counted before anything else: not even objects are looked at
    err, _ = rejected({"operations": [7] * 10_001}, root)
    assert type(err) is RequestTooLarge and err.path == "operations"


def test_operations_within_a_raised_limit_are_parsed(root):
    filters = [filt("a > 0", f"f{i}", f"f{i - 1}" if i else "r") for i in range(20)]
    with pytest.raises(RequestTooLarge):
        parse_request(request(*filters), root, RequestLimits(max_operations=21))
    plan = parse_request(request(*filters), root, RequestLimits(max_operations=22))
    assert len(plan.ops) == 22


def test_a_one_megabyte_literal_is_413_at_its_condition(root):
    err, elapsed = rejected(request(filt("s = '" + "x" * (1 << 20) + "'")), root)
    assert type(err) is RequestTooLarge and err.status == 413
    assert err.path == "operations[1].condition"
    assert err.context["limit"] == "max_expression_chars"  # longer than any expression may be
    assert elapsed < 2.0


def test_a_literal_beyond_its_limit_names_it_in_bytes(root):
    # 40,000 characters, 80,000 bytes of UTF-8: the limit is on bytes
    err, _ = rejected(request(filt("s = '" + "é" * 40_000 + "'")), root)
    assert type(err) is RequestTooLarge and err.path == "operations[1].condition"
    assert err.message == ("a string literal at column 5 has 80,000 bytes; the limit is 65,536 "
                           "(max_literal_bytes)")
    assert (err.context["limit"], err.context["found"]) == ("max_literal_bytes", 80_000)
    assert len(err.context.get("text", "")) <= 200, "an error never echoes the megabyte"
    err, _ = rejected(request(filt("a = " + "1" * 70_000)), root)
    assert err.context["limit"] == "max_literal_bytes" and "a number" in err.message
    parse_request(request(filt("s = '" + "é" * 30_000 + "'")), root)  # 60,000 bytes: fine


def test_five_thousand_nested_parentheses_are_a_clear_400_within_a_second(root):
    err, elapsed = rejected(request(filt("(" * 5000 + "a > 0" + ")" * 5000)), root)
    assert type(err) is RequestError and err.status == 400
    assert err.path == "operations[1].condition"
    assert err.message == ("the expression nests 5,000 levels deep (parentheses, CASE, NOT, unary minus); "
                           "the limit is 200 levels (max_expression_depth)")
    assert (err.context["limit"], err.context["maximum"], err.context["found"]) == ("max_expression_depth", 200, 5000)
    assert elapsed < 1.0


@pytest.mark.parametrize("text", [
    "NOT " * 5000 + "a > 0",
    "CASE WHEN a > 0 THEN " * 3000 + "TRUE" + " ELSE FALSE END" * 3000,
    "abs(" * 3000 + "a" + ")" * 3000 + " > 0",
    "a IN (" * 3000 + "1" + ")" * 3000,
    "-(" * 3000 + "a" + ")" * 3000 + " > 0",
    "a BETWEEN (" * 3000 + "1" + ") AND 2" * 3000,
])
def test_deep_nesting_of_any_kind_is_refused_before_parsing(root, text):
    limit = sys.getrecursionlimit()
    err, elapsed = rejected(request(filt(text)), root)
    assert err.status == 400 and err.context["limit"] == "max_expression_depth"
    assert err.context["found"] > 200 and elapsed < 1.0
    assert sys.getrecursionlimit() == limit, "the parser never ran, so nothing needed more stack"


@pytest.mark.parametrize("text", [
    "(" * 190 + "a > 0" + ")" * 190,
    "NOT (" * 95 + "a > 0" + ")" * 95,
    "abs(" * 190 + "a" + ")" * 190 + " > 0",
    "CASE WHEN a > 0 THEN " * 95 + "TRUE" + " ELSE FALSE END" * 95,
    "a IN (" + ", ".join(f"coalesce({'abs(' * 90}a{')' * 90}, {i})" for i in range(3)) + ")",
])
def test_nesting_within_the_limit_is_parsed_bound_and_generated(root, text):
    # sqlglot needs ~20 frames per level: the old parser failed beyond ~50 parentheses
    plan = parse_request(request(filt(text)), root)
    ops = list(plan.ops[:-1])
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # what a fresh process has: code generation makes the room it needs
    try:
        assert "query_row" in generate_scan_query(ops, generate_ntf(plan.schemas["f"]))
    finally:
        sys.setrecursionlimit(previous)


def test_a_long_in_list_beyond_its_limit_is_413_naming_the_list(root):
    values = ", ".join(str(i) for i in range(1001))
    limits = RequestLimits(max_in_list=1000)
    err, _ = rejected(request(filt(f"a > 0 AND a IN ({values})")), root, limits)
    assert type(err) is RequestTooLarge and err.path == "operations[1].condition"
    assert err.message == "the IN list at column 16 has 1,001 values; the limit is 1,000 (max_in_list)"
    within = ", ".join(str(i) for i in range(1000))
    parse_request(request(filt(f"a IN ({within}) AND a IN (coalesce(a, 1), 2)")), root, limits)


def test_an_expression_beyond_its_length_is_413(root):
    text = " OR ".join(f"a = {i}" for i in range(20))
    err, _ = rejected(request(filt(text)), root, RequestLimits(max_expression_chars=len(text) - 1))
    assert type(err) is RequestTooLarge and err.context["found"] == len(text)
    parse_request(request(filt(text)), root, RequestLimits(max_expression_chars=len(text)))


def test_every_expression_of_every_operation_kind_is_checked(root):
    limits = RequestLimits(max_expression_depth=10)
    deep = "(" * 12 + "a" + ")" * 12
    project = {"kind": "project", "name": "p", "input": "r", "columns": [{"name": "x", "expr": "a"},
                                                                         {"name": "y", "expr": deep}]}
    err, _ = rejected(request(project), root, limits)
    assert err.path == "operations[1].columns[1].expr"
    agg = {"kind": "aggregate", "name": "g", "input": "r", "group_by": [{"name": "s", "expr": "s"}],
           "aggregates": [{"name": "t", "fn": "sum", "expr": deep}]}
    err, _ = rejected(request(agg), root, limits)
    assert err.path == "operations[1].aggregates[0].expr"
    shuffle = request({"kind": "shuffle", "name": "h", "input": "r", "keys": ["a", deep], "partitions": 1})
    shuffle["operations"][-1]["input"] = "h[0]"
    err, _ = rejected(shuffle, root, limits)
    assert err.path == "operations[1].keys[1]"
    join = request({"kind": "join", "name": "j", "build": "r", "probe": "r2", "build_keys": ["a"],
                    "probe_keys": [deep], "columns": [{"name": "a", "expr": "a"}]})
    join["operations"].insert(1, {**join["operations"][0], "name": "r2"})
    err, _ = rejected(join, root, limits)
    assert err.path == "operations[2].probe_keys[0]"


def test_numbers_out_of_float64_range_are_400_not_a_crash(root):
    for text in ("a = " + "9" * 400, "a = " + "9" * 5000, "a = 1" + "0" * 400 + ".5", "a < 1e999"):
        err, _ = rejected(request(filt(text)), root)
        assert err.status == 400 and "out of range for float64" in err.message, text
