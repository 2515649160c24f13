"""Validating a request with its pydantic models (models.py), answered as the service always has:
one `RequestError` with today's message and the JSON path (`operations[2].schema[3].type`).

Pydantic reports every error it finds; a client is told one. It is the one the hand-written
checks reported first, in their order: the request's own fields, then each operation in turn (not
an object, its kind, unknown fields, missing fields, its name, a shuffle's partitions), then
references, then the other values. So a request with one mistake is told exactly what it was
always told. A request with several may now hear of a mistake of shape (anything the models
check) before one of meaning (a name used twice, the graph, an expression, a file), which the
binders find once the shape is right.
"""
from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from ..contract.errors import RequestError
from .jsonshape import at, json_type, missing_field, not_an_object, show, unknown_field
from .limits import DEFAULT_LIMITS, RequestLimits
from .models import CHECK_FAILED, OPERATIONS, DataflowRequest

_NOT_AN_OBJECT = {"model_type", "model_attributes_type", "dict_type"}
_REFERENCES = ("input", "build", "probe")
_TOP_ORDER = {"extra_forbidden": 1, "missing": 2, "name": 3, "operations": 4}


def validate_request(body: object, limits: RequestLimits = DEFAULT_LIMITS) -> DataflowRequest:
    """The request as its model, or the RequestError (413 for `max_operations`) of its first
    mistake."""
    try:
        return DataflowRequest.model_validate(body, context={"limits": limits})
    except ValidationError as e:
        errors = e.errors(include_url=False)
        first = min(range(len(errors)), key=lambda i: (_rank(errors[i]), i))
        raise _translate(errors[first]) from None


def _rank(err: ErrorDetails) -> tuple:
    """Where the hand-written checks would have found this error: lower first."""
    loc = err["loc"]
    if not loc:
        return (0, 0)
    if loc[0] != "operations" or len(loc) == 1:
        return (0, _TOP_ORDER.get(err["type"], 0) or _TOP_ORDER.get(str(loc[0]), 0))
    index = loc[1]
    if len(loc) == 2:  # the operation itself: not an object, or its kind
        return (1, index, 0)
    field = loc[3] if len(loc) > 3 else None
    if len(loc) == 4 and err["type"] == "extra_forbidden":
        return (1, index, 1)
    if len(loc) == 4 and err["type"] == "missing":
        return (1, index, 2)
    if field == "name" and len(loc) == 4:
        return (1, index, 3)
    if field == "partitions" and loc[2] == "shuffle":
        return (1, index, 4)
    if field in _REFERENCES and len(loc) == 4:
        return (2, index, _REFERENCES.index(field))
    return (3, index, *_steps(err))


def _steps(err: ErrorDetails) -> list[tuple[int, int]]:
    """The order of a value's error inside its operation: by field, then by list item; inside an
    object its unknown fields first, then its missing ones, then its fields' values (as
    jsonshape.check_keys checks them)."""
    loc = err["loc"]
    steps: list[tuple[int, int]] = []
    tp: Any = OPERATIONS.get(str(loc[2]))
    for depth, part in enumerate(loc[3:], start=3):
        tp = _unwrap(tp)
        last = depth == len(loc) - 1
        if _is_model(tp):
            names = tp.field_names()
            position = names.index(part) if part in names else len(names)
            if last and err["type"] == "extra_forbidden":
                steps.append((0, 0))
            elif last and err["type"] == "missing":
                steps.append((1, position))
            else:
                steps.append((2, position))
            field = next((f for n, f in tp.model_fields.items() if (f.alias or n) == part), None)
            tp = field.annotation if field is not None else None
        else:
            steps.append((2, part if isinstance(part, int) else 0))
            tp = get_args(tp)[0] if get_origin(tp) is list else None
    return steps


def _translate(err: ErrorDetails) -> RequestError:
    kind, loc, ctx = err["type"], err["loc"], err.get("ctx") or {}
    if kind == CHECK_FAILED:
        error: RequestError = ctx["error"]
        path = _join(_walk(loc[:-1])[1], error.path) if ctx["relative"] else _walk(loc)[1]
        return _at(error, path)
    model, path = _walk(loc)
    if kind in _NOT_AN_OBJECT:
        return RequestError(not_an_object(err["input"], _label(model)), path or None)
    if kind == "union_tag_not_found":
        return RequestError(missing_field("kind", "an operation"), at(path, "kind"))
    if kind == "union_tag_invalid":
        value = err["input"].get("kind") if isinstance(err["input"], dict) else None
        if not isinstance(value, str):
            return RequestError(f"'kind' must be a string, got {json_type(value)}", at(path, "kind"))
        return RequestError(f"unknown operation kind {show(value)}; expected one of {', '.join(OPERATIONS)}",
                            at(path, "kind"), value)
    holder, _ = _walk(loc[:-1])
    if kind == "extra_forbidden" and _is_model(holder):
        return RequestError(unknown_field(loc[-1], holder.label, holder.field_names()), path)
    if kind == "missing" and _is_model(holder):
        return RequestError(missing_field(str(loc[-1]), holder.label), path)
    # Not expected: every check has its own message. Pydantic's is still a good one.
    return RequestError(err["msg"], path or None)


def _walk(loc: tuple) -> tuple[Any, str]:
    """The type expected at `loc`, and its JSON path (the discriminator's tags dropped)."""
    tp: Any = DataflowRequest
    path = ""
    for part in loc:
        tp = _unwrap(tp)
        if _is_model(tp):
            field = next((f for n, f in tp.model_fields.items() if (f.alias or n) == part), None)
            tp = field.annotation if field is not None else None
            path = at(path, str(part))
        elif isinstance(part, int):
            tp = get_args(tp)[0] if get_origin(tp) is list else None
            path = at(path, part)
        elif part in OPERATIONS and get_origin(tp) in (Union, UnionType):  # the union's tag: not in the JSON
            tp = OPERATIONS[part]
        else:
            tp = None
            path = at(path, str(part))
    return _unwrap(tp), path


def _unwrap(tp: Any) -> Any:
    """The type inside Annotated[...] and inside X | None."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
            continue
        if get_origin(tp) in (Union, UnionType):
            members = [a for a in get_args(tp) if a is not type(None)]
            if len(members) == 1:
                tp = members[0]
                continue
        return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _label(tp: Any) -> str:
    return tp.label if _is_model(tp) else "an operation"  # the union of operations


def _join(base: str, relative: str | None) -> str:
    if not relative:
        return base
    if not base or relative.startswith("["):
        return base + relative
    return f"{base}.{relative}"


def _at(error: RequestError, path: str) -> RequestError:
    """`error` with its path where pydantic found the value (its context keeps its order)."""
    error.path = path or None
    rest = {k: v for k, v in error.context.items() if k != "path"}
    error.context = {"path": path, **rest} if path else rest
    return error
