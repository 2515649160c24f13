"""The request's pydantic models (dataflow/models.py): they validate every request with today's
messages, they are what the published JSON Schema and the field lists come from, and the
contract's table of operations says what they say."""
from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from jumpgate.contract.errors import RequestError
from jumpgate.dataflow import models
from jumpgate.dataflow.limits import RequestLimits, RequestTooLarge
from jumpgate.dataflow.models import OPERATIONS, DataflowRequest, request_schema
from jumpgate.dataflow.request import FIELDS, INPUT_FIELDS
from jumpgate.dataflow.validation import validate_request

from .test_request import base

ROOT = Path(__file__).resolve().parents[2]


# --- the published schema and the contract -------------------------------------------------------

def test_the_committed_json_schema_is_the_models():
    generated = subprocess.run([sys.executable, "-m", "jumpgate.dataflow.models"], capture_output=True, text=True,
                               check=True, cwd=ROOT).stdout
    assert (ROOT / "docs/request.schema.json").read_text() == generated, \
        "regenerate with: python -m jumpgate.dataflow.models > docs/request.schema.json"
    assert json.loads(generated) == request_schema()


def _contract_rows() -> dict[str, str]:
    """kind -> its `fields` cell, from the table of contract §1 (docs/contract.md)."""
    text = (ROOT / "docs/contract.md").read_text()
    section = text[text.index("## 1. Dataflow request"):text.index("### Types")]
    rows = {}
    for line in section.splitlines():
        m = re.fullmatch(r"\| `(\w+)` \| (.*) \| (.*) \|", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def _named_fields(cell: str) -> dict[str, str]:
    """Each field a cell names (the backticked names that open one of its `;`-separated parts),
    with the text that describes it."""
    out = {}
    for part in cell.split("; "):
        m = re.match(r"((?:`\w+`(?:, )?)+)(.*)", part)
        assert m, f"cannot read the field names of {part!r}"
        for name in re.findall(r"`(\w+)`", m.group(1)):
            out[name] = m.group(2)
    return out


def test_the_contract_table_names_the_models_operations_and_fields():
    rows = _contract_rows()
    assert list(rows) == list(OPERATIONS), "the contract's kinds, in order, are the models'"
    for kind, cell in rows.items():
        described = _named_fields(cell)
        required, optional = FIELDS[kind]
        assert set(described) == {*required, *optional}, (kind, sorted(described), required, optional)


def test_the_contract_table_lists_every_value_of_the_models_enums_and_entries():
    rows = _contract_rows()
    enums = {("read", "format"): models.FileFormat, ("join", "type"): models.JoinType,
             ("aggregate", "mode"): models.AggMode, ("aggregate", "aggregates"): models.AggFn}
    for (kind, field), enum in enums.items():
        words = set(re.findall(r"`(\w+)`", _named_fields(rows[kind])[field]))
        assert {e.value for e in enum} <= words, (kind, field, words)
    entries = {("read", "schema"): models.SchemaColumn, ("project", "columns"): models.NamedExpression,
               ("join", "columns"): models.NamedExpression, ("aggregate", "group_by"): models.GroupKey,
               ("aggregate", "aggregates"): models.AggregateCall}
    for (kind, field), model in entries.items():
        shown = re.search(r"`\[\{(.*?)\}", _named_fields(rows[kind])[field])
        assert shown, (kind, field)
        assert re.findall(r'"(\w+)"', shown.group(1)) == model.field_names(), (kind, field)


def test_the_request_fields_come_from_the_models():
    assert FIELDS["join"] == (("build", "probe", "build_keys", "probe_keys"), ("type", "condition", "columns"))
    assert FIELDS["read"] == (("path", "format", "schema"), ())
    assert INPUT_FIELDS == {"read": (), "join": ("build", "probe"), **{k: ("input",) for k in OPERATIONS
                                                                        if k not in ("read", "join")}}


# --- pydantic validates, in today's words -----------------------------------------------------------

HANDLED = {models.CHECK_FAILED, "model_type", "model_attributes_type", "missing", "extra_forbidden",
           "union_tag_invalid", "union_tag_not_found"}
ODD = [None, 7, -1, 0, 70000, 2.0, True, "", " ", "x y", "TCP", "a\x00b", [], [1], ["a"], {}, {"zz": 1}, "li[0]"]


def _mutations():
    """Every field of every object of a valid request, set to each odd value, left out, and
    joined by an unknown field: one mistake each."""
    def each(req, at):
        target = req
        for key in at:
            target = target[key]
        return target
    paths = [()]
    b = base()
    for i, op in enumerate(b["operations"]):
        paths.append(("operations", i))
        for key, value in op.items():
            if isinstance(value, list):
                paths += [("operations", i, key, j) for j, item in enumerate(value[:2]) if isinstance(item, dict)]
    for at in paths:
        for key in list(each(b, at)):
            for value in ODD:
                req = base()
                each(req, at)[key] = value
                yield req
            req = base()
            del each(req, at)[key]
            yield req
        req = base()
        each(req, at)["zz"] = 1
        yield req


def test_every_error_pydantic_finds_has_todays_wording():
    """Each kind of error pydantic reports is one validation.py words, or a check's own message:
    pydantic's defaults ("Input should be ...") never reach a client."""
    seen = set()
    for req in _mutations():
        try:
            DataflowRequest.model_validate(req, context={"limits": RequestLimits()})
        except ValidationError as e:
            kinds = {err["type"] for err in e.errors()}
            assert kinds <= HANDLED, (kinds - HANDLED, req)
            seen |= kinds
            with pytest.raises(RequestError) as info:
                validate_request(req)
            assert info.value.path is None or not info.value.path.startswith(".")
    assert seen == HANDLED


def _error(req) -> RequestError:
    with pytest.raises(RequestError) as info:
        validate_request(req)
    return info.value


def test_kind_errors_keep_their_text():
    req = base()
    req["operations"][2]["kind"] = "scan"
    e = _error(req)
    assert (e.path, e.context.get("text")) == ("operations[2].kind", "scan")
    assert e.message.startswith("unknown operation kind 'scan'; expected one of read, filter, project")


def test_a_check_keeps_its_text_and_its_own_path_below_the_field():
    req = base()
    req["operations"][1]["transport"] = "TCP"
    e = _error(req)
    assert (e.path, e.context) == ("operations[1].transport", {"path": "operations[1].transport", "text": "TCP"})
    req = base()
    req["operations"][3]["path"] = ["part.json", 3]
    assert _error(req).path == "operations[3].path[1]"


def test_of_several_mistakes_the_one_checked_first_by_hand_is_told():
    req = base()
    req["operations"][6]["partitions"] = 0  # a shuffle's partitions: checked with the operation's shape
    req["operations"][1]["port"] = 0  # a value: after the shape of every operation
    assert _error(req).path == "operations[6].partitions"
    req = base()
    item = req["operations"][0]["schema"][1]
    item.pop("type")
    item["nullable"] = True  # unknown fields before missing ones, in any object
    assert _error(req).path == "operations[0].schema[1].nullable"
    req = base()
    req["operations"][4]["probe"] = 3  # a reference: after every operation's shape
    req["operations"][7]["colour"] = "red"
    assert _error(req).path == "operations[7].colour"
    req = base()
    req["nmae"] = 1  # the request's own fields first
    req["operations"][0] = 5
    assert _error(req).path == "nmae"


def test_too_many_operations_is_413_before_any_operation_is_read():
    req = base()
    req["operations"][0] = "not an operation"
    with pytest.raises(RequestTooLarge) as info:
        validate_request(req, RequestLimits(max_operations=3))
    assert info.value.status == 413 and info.value.path == "operations"
    assert info.value.context == {"path": "operations", "limit": "max_operations", "maximum": 3, "found": 10}


def test_optional_fields_may_be_null_and_mean_their_default():
    req = base()
    req["operations"][4].update(type=None, condition=None, columns=None)
    req["operations"][5].update(mode=None, group_by=None)
    request = validate_request(req)
    join, agg = request.operations[4], request.operations[5]
    assert join.type is models.JoinType.INNER and join.condition is None and join.columns is None
    assert agg.mode is models.AggMode.COMPLETE and agg.group_by == []


def test_a_valid_request_is_its_model():
    req = base()
    request = validate_request(copy.deepcopy(req))
    assert request.model_dump(by_alias=True, exclude_unset=True) == req
