"""The dataflow request of contract §1 as pydantic models: what validates a request's shape, and
what `/openapi.json` and `docs/request.schema.json` publish (`python -m jumpgate.dataflow.models`
prints the JSON Schema).

Pydantic really validates (rather than models that only document beside a hand-written
validator): `validation.validate_request` runs these models on every request before anything else
reads it, so what the schema publishes is what the server checks, and there is no second copy of
the request's shape to drift from it. Today's messages survive the switch because the checks
did not change, only who calls them. They check everything that one field's value decides, for every
field of every object: objects, arrays, strings, integers and their ranges, the fields each object
may and must have, the operation kinds (a union discriminated on `kind`), names, references
(`NAME` or `NAME[i]`), transports, hosts, ports, type names and the shape of a read's `path`.
Each field's check is a pydantic validator that calls the same check function the binders use on
their own (jsonshape.py, paths.py, the functions below), so every message is word for word the
one the service has always given, and pydantic's location of the value becomes the JSON path.
Pydantic's own errors (not an object, an unknown or a missing field, an unknown kind) are worded
by validation.py with jsonshape's message functions.

What one field cannot decide stays where the whole request is known (request.py, opbind.py,
aggregates.py): unique names and what references point at, the graph, expressions (parsed and
typed against their input's columns), duplicate columns, join keys in pairs, the rules that depend
on an aggregate's mode and function, and read paths in the data root. An aggregate's `expr` is
therefore documented here but not validated (`SkipValidation`): what a wrong one is told depends
on the mode and the function.

Models are documentation too: a class docstring or a `description` is what the JSON Schema
shows a client, so they speak to users; comments say why.
"""
from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SkipValidation,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from ..contract import types as T
from ..contract.errors import RequestError
from .jsonshape import (
    check_column_name,
    choice,
    expression_text,
    get_int,
    get_list,
    get_string,
    json_type,
    show,
)
from .limits import DEFAULT_LIMITS, too_large
from .paths import read_path_entries
from .plan import AggFn, AggMode, FileFormat, RequestJoinType

JoinType = RequestJoinType  # a request's join types: the plan's own right_outer is not one of them

# The pydantic error type of a failed check; its context holds the RequestError (validation.py).
CHECK_FAILED = "jumpgate_check"

OPERATION_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
NAME_RE = re.compile(OPERATION_NAME)
REFERENCE_RE = re.compile(rf"({OPERATION_NAME})(?:\[([0-9]+)\])?")
TRANSPORT_RE = re.compile(r"[a-z][a-z0-9_]*")


# --- checks as validators ------------------------------------------------------------------------

def _failed(e: RequestError, relative: bool) -> PydanticCustomError:
    """A check's RequestError carried through pydantic; `relative`: its path is relative to the
    object holding the field (`port`, `path[1]`), else it is where pydantic found the value."""
    return PydanticCustomError(CHECK_FAILED, "{message}", {"message": e.message, "error": e, "relative": relative})


def _field(check: Callable[[object, str], object], key: str | None = None) -> BeforeValidator:
    """Validate a field with `check(value, key)`, a check that names the field in its message.
    `key` is the field's JSON name where it is not the attribute's (`schema`)."""
    def validate(value: object, info: ValidationInfo) -> object:
        try:
            return check(value, key or info.field_name or "")
        except RequestError as e:
            raise _failed(e, relative=True) from None
    return BeforeValidator(validate)


def _value(check: Callable[[object], object]) -> BeforeValidator:
    """Validate a value (a field or a list's item) with `check(value)`, whose message does not
    depend on where the value is."""
    def validate(value: object) -> object:
        try:
            return check(value)
        except RequestError as e:
            raise _failed(e, relative=False) from None
    return BeforeValidator(validate)


def _optional(check: Callable[[object, str], object]) -> Callable[[object, str], object]:
    """Optional fields may be null, which means the same as leaving them out."""
    return lambda value, key: None if value is None else check(value, key)


def _array(nonempty: bool = True) -> Callable[[object, str], list]:
    return lambda value, key: get_list({key: value}, key, "", required=nonempty, nonempty=nonempty)


def _one_of(choices: type, default: str | None = None) -> Callable[[object, str], object]:
    return lambda value, key: choice({key: value}, key, "", choices, default)


def _integer(low: int, high: int | None = None) -> Callable[[object, str], int]:
    return lambda value, key: get_int({key: value}, key, "", low, high)


def _operation_name(value: object) -> str:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise RequestError(f"an operation name must match {OPERATION_NAME}, got {show(value)}", None,
                           value if isinstance(value, str) else None)
    return value


def _reference(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise RequestError(f"{key!r} must be an operation name, got {json_type(value)}", key)
    if not REFERENCE_RE.fullmatch(value):
        raise RequestError(f"{key!r} must be an operation name or NAME[i], got {show(value)}", key, value)
    return value


def _transport(value: object, key: str) -> str:
    text: str = get_string({key: value}, key, "")  # type: ignore[assignment]
    if not TRANSPORT_RE.fullmatch(text):
        raise RequestError(f"'transport' must be a lower-case name such as 'tcp', got {show(text)}", key, text)
    return text


def _host(value: object, key: str) -> str:
    text: str = get_string({key: value}, key, "")  # type: ignore[assignment]
    if any(c.isspace() or c == "\x00" for c in text):
        raise RequestError(f"'host' must be a host name or address, got {show(text)}", key, text)
    return text


def _type_name(value: object) -> str:
    try:
        T.parse_type(value)  # type: ignore[arg-type]
    except ValueError as e:
        raise RequestError(str(e), None, value if isinstance(value, str) else None) from None
    return value  # type: ignore[return-value]


def _read_path(value: object, key: str) -> object:
    read_path_entries(value, key)  # paths.py resolves them in the data root when the read is bound
    return value


def _request_name(value: object, key: str) -> str | None:
    return get_string({key: value}, key, "", required=False, nonempty=False)


def _operations(value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> object:
    """`operations`: counted against `max_operations` before any operation is read (413)."""
    try:
        items = get_list({"operations": value}, "operations", "")
        limits = (info.context or {}).get("limits", DEFAULT_LIMITS)
        if len(items) > limits.max_operations:
            raise too_large("the request", len(items), "operations", "max_operations", limits.max_operations,
                            "operations")
    except RequestError as e:
        raise _failed(e, relative=True) from None
    return handler(items)


# --- value types ---------------------------------------------------------------------------------

# The reference check, one object: reference_fields() tells the fields that name inputs by it.
REFERENCE = _field(_reference)

OperationName = Annotated[str, Field(pattern=f"^{OPERATION_NAME}$", description="Unique in the request."),
                          _value(_operation_name)]
Reference = Annotated[str, Field(pattern=rf"^{OPERATION_NAME}(\[[0-9]+\])?$",
                                 description="The name of an operation; `NAME[i]` for output i of a shuffle."),
                      REFERENCE]
Expression = Annotated[str, Field(description="An SQL expression (contract §1, Expressions)."),
                       _value(lambda v: expression_text(v, None))]
ColumnName = Annotated[str, Field(min_length=1, description="Any text but the empty string; no NUL."),
                       _value(lambda v: check_column_name(v, None))]
TypeName = Annotated[str, Field(description="boolean, int32, int64, float64, decimal(p,s) with 1 <= p <= 18 "
                                            "(or up to 38: a wide decimal, an addition of this implementation), "
                                            "string or date.", examples=["int64", "decimal(12,2)"]),
                     _value(_type_name)]
# A named expression's `expr` has always been told its type the Python way (jsonshape.expression_text).
NamedText = Annotated[str | None, _value(lambda v: None if v is None else expression_text(v, None, python_type=True))]


class _Model(BaseModel):
    # Unknown fields are refused: they are usually typos.
    model_config = ConfigDict(extra="forbid")

    label: ClassVar[str]  # how messages name an object of this model: "a schema entry"

    @classmethod
    def field_names(cls) -> list[str]:
        """The JSON names of the fields, in the order messages list them."""
        return [f.alias or name for name, f in cls.model_fields.items()]


class SchemaColumn(_Model):
    """A column of the files a read reads."""

    label: ClassVar[str] = "a schema entry"
    name: ColumnName
    type: TypeName


class NamedExpression(_Model):
    """An output column: `expr` computes it; null means the input column `name`."""

    label: ClassVar[str] = "a named expression"
    name: ColumnName
    expr: NamedText


class GroupKey(_Model):
    """A group column: `expr` computes it; left out or null, it is the input column `name` (left
    out only in final mode)."""

    label: ClassVar[str] = "a named expression"
    name: ColumnName
    expr: NamedText = None


class AggregateCall(_Model):
    """An aggregate column. `count_star` takes no `expr`; in final mode `expr` is not evaluated
    (the partial state is found by name)."""

    label: ClassVar[str] = "an aggregate"
    name: ColumnName
    fn: Annotated[AggFn, _field(_one_of(AggFn))]
    # Checked by aggregates.py: what a wrong expr is told depends on the mode and the function.
    expr: Annotated[str | None, SkipValidation] = None


# --- operations ----------------------------------------------------------------------------------

class _Operation(_Model):
    kind: str  # each operation narrows it to its literal: the discriminator
    name: OperationName


class ReadOperation(_Operation):
    """Reads files under the server's data root; outputs the schema's columns."""

    label: ClassVar[str] = "a read operation"
    kind: Literal["read"]
    path: Annotated[str | Annotated[list[str], Field(min_length=1)],
                    Field(description="A file, a list of files, or a glob, relative to the data root."),
                    _field(_read_path)]
    format: Annotated[FileFormat, Field(description="json is JSON Lines; csv has a header row."),
                      _field(_one_of(FileFormat))]
    # `schema` would shadow BaseModel.schema(): the attribute has another name.
    columns: Annotated[list[SchemaColumn], Field(alias="schema", min_length=1), _field(_array(), "schema")]


class FilterOperation(_Operation):
    """The input's rows where `condition` is TRUE."""

    label: ClassVar[str] = "a filter operation"
    kind: Literal["filter"]
    input: Reference
    condition: Annotated[Expression, Field(description="A boolean expression over the input's columns.")]


class ProjectOperation(_Operation):
    """Exactly the columns `columns` computes."""

    label: ClassVar[str] = "a project operation"
    kind: Literal["project"]
    input: Reference
    columns: Annotated[list[NamedExpression], Field(min_length=1), _field(_array())]


class JoinOperation(_Operation):
    """A hash join; left means the probe side. Outputs `columns` if given, else the probe's columns
    then the build's (a name on both sides is then an error)."""

    label: ClassVar[str] = "a join operation"
    kind: Literal["join"]
    build: Reference
    probe: Reference
    build_keys: Annotated[list[Expression], Field(min_length=1, description="Compared pairwise with probe_keys."),
                          _field(_array())]
    probe_keys: Annotated[list[Expression], Field(min_length=1), _field(_array())]
    type: Annotated[RequestJoinType | None, Field(description="inner when left out or null."),
                    _field(_one_of(RequestJoinType, default=RequestJoinType.INNER.value))] = RequestJoinType.INNER
    condition: Annotated[Expression | None, Field(description="An extra boolean expression over both sides.")] = None
    columns: Annotated[Annotated[list[NamedExpression], Field(min_length=1)] | None,
                       Field(description="Over the probe's columns then the build's."),
                       _field(_optional(_array()))] = None


class AggregateOperation(_Operation):
    """Group columns then aggregate columns; `partial` emits partial states, `final` merges them
    (contract §1)."""

    label: ClassVar[str] = "an aggregate operation"
    kind: Literal["aggregate"]
    input: Reference
    group_by: Annotated[list[GroupKey] | None, _field(_array(nonempty=False))] = []
    aggregates: Annotated[list[AggregateCall] | None, _field(_array(nonempty=False))] = []
    mode: Annotated[AggMode | None, Field(description="complete when left out or null."),
                    _field(_one_of(AggMode, default=AggMode.COMPLETE.value))] = AggMode.COMPLETE


class ShuffleOperation(_Operation):
    """`partitions` outputs, read as NAME[0] .. NAME[partitions-1]; rows with equal keys go to
    the same output."""

    label: ClassVar[str] = "a shuffle operation"
    kind: Literal["shuffle"]
    input: Reference
    keys: Annotated[list[Expression], Field(min_length=1), _field(_array())]
    partitions: Annotated[int, Field(ge=1), _field(_integer(1))]


class SendOperation(_Operation):
    """Sends the input's rows as NTF tuples to where the client listens."""

    label: ClassVar[str] = "a send operation"
    kind: Literal["send"]
    input: Reference
    transport: Annotated[str, Field(pattern="^[a-z][a-z0-9_]*$", description="tcp or udp."), _field(_transport)]
    host: Annotated[str, Field(min_length=1, description="A host name or address."), _field(_host)]
    port: Annotated[int, Field(ge=1, le=65535), _field(_integer(1, 65535))]
    udp_version: Annotated[int | None, Field(ge=1, le=2, description=(
        "udp only: the UDP transport version the client's receiver takes (docs/udp-transport.md): 1 (when "
        "left out or null) detects loss, 2 acknowledges so that the senders repeat what is lost.")),
        _field(_optional(_integer(1, 2)))] = None


OPERATIONS: dict[str, type[_Operation]] = {
    "read": ReadOperation, "filter": FilterOperation, "project": ProjectOperation, "join": JoinOperation,
    "aggregate": AggregateOperation, "shuffle": ShuffleOperation, "send": SendOperation,
}
Operation = Annotated[ReadOperation | FilterOperation | ProjectOperation | JoinOperation | AggregateOperation
                      | ShuffleOperation | SendOperation, Field(discriminator="kind")]


class DataflowRequest(_Model):
    """A dataflow request (contract §1): operations in any order, a DAG through their inputs."""

    label: ClassVar[str] = "the request"
    operations: Annotated[list[Operation], Field(min_length=1), WrapValidator(_operations)]
    name: Annotated[str | None, Field(description="A label for people."), _field(_request_name)] = None


# --- what other modules derive from the models ----------------------------------------------------

def operation_fields() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """kind -> (required fields, optional fields), besides `kind` and `name`."""
    out = {}
    for kind, model in OPERATIONS.items():
        fields = [(f.alias or n, f.is_required()) for n, f in model.model_fields.items() if n not in ("kind", "name")]
        out[kind] = (tuple(n for n, req in fields if req), tuple(n for n, req in fields if not req))
    return out


def reference_fields(kind: str) -> tuple[str, ...]:
    """The fields of an operation that name its inputs, in the order of its input edges."""
    model = OPERATIONS[kind]
    return tuple(f.alias or n for n, f in model.model_fields.items() if REFERENCE in f.metadata)


def request_schema() -> dict[str, Any]:
    """The JSON Schema of a request (what docs/request.schema.json holds)."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **DataflowRequest.model_json_schema()}


def main() -> None:
    json.dump(request_schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
