"""The checks of a request's JSON values, with errors that name the JSON path.

Every message says which field, what was expected and what was found, in the request's own
vocabulary (`operations[2].schema[3].type`). They are the one copy of those messages: the request
models (dataflow/models.py) call these checks as pydantic validators and build the messages of
pydantic's own errors (an unknown or missing field, not an object) with the functions below, and
the binders (opbind.py, aggregates.py) call them on plan fragments they are given directly.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..contract.errors import RequestError

_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
               int: "an integer", float: "a number", type(None): "null"}


def json_type(value: object) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


def show(value: object, limit: int = 80) -> str:
    """A value for an error message: repr, truncated."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip(text: str, limit: int = 200) -> str:
    """Request text quoted in an error (`text`): enough to find it, never the whole megabyte."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def at(base: str | None, key: str | int) -> str:
    """Join a JSON path: at('operations[2]', 'condition') == 'operations[2].condition'."""
    if isinstance(key, int):
        return f"{base or ''}[{key}]"
    return f"{base}.{key}" if base else key


def not_an_object(value: object, what: str) -> str:
    return f"{what} must be a JSON object, got {json_type(value)}"


def unknown_field(key: object, what: str, allowed: Sequence[str]) -> str:
    return f"unknown field {show(key)} in {what}; allowed fields: {', '.join(allowed)}"


def missing_field(key: str, what: str) -> str:
    return f"missing field {key!r} in {what}"


def expect_object(value: object, path: str | None, what: str) -> dict:
    if not isinstance(value, dict):
        raise RequestError(not_an_object(value, what), path)
    return value


def check_keys(obj: dict, path: str | None, required: Sequence[str], optional: Sequence[str],
               what: str) -> None:
    """Reject unknown fields (they are usually typos) and report the first missing one.

    Optional fields may be null, which means the same as leaving them out."""
    allowed = [*required, *optional]
    for key in obj:
        if key not in allowed:
            raise RequestError(unknown_field(key, what, allowed), at(path, str(key)))
    for key in required:
        if key not in obj:
            raise RequestError(missing_field(key, what), at(path, key))


def get_string(obj: dict, key: str, path: str, *, required: bool = True, nonempty: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise RequestError(f"{key!r} must be a string, got {json_type(value)}", at(path, key))
    if nonempty and not value.strip():
        raise RequestError(f"{key!r} must not be empty", at(path, key))
    return value


def get_int(obj: dict, key: str, path: str, low: int, high: int | None = None) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{key!r} must be an integer, got {json_type(value)} {show(value)}", at(path, key))
    if value < low or (high is not None and value > high):
        bounds = f"{low}..{high}" if high is not None else f">= {low}"
        raise RequestError(f"{key!r} must be {bounds}, got {value}", at(path, key))
    return value


def get_list(obj: dict, key: str, path: str, *, required: bool = True, nonempty: bool = True) -> list:
    value = obj.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise RequestError(f"{key!r} must be an array, got {json_type(value)}", at(path, key))
    if nonempty and not value:
        raise RequestError(f"{key!r} must not be empty", at(path, key))
    return value


def choice(obj: dict, key: str, path: str, choices: type, default: str | None = None):
    """One of an enum's values (`choices`); null means `default` where there is one."""
    value = obj.get(key, None)
    if value is None and default is not None:
        value = default
    options = [c.value for c in choices]  # type: ignore[attr-defined]
    if not isinstance(value, str) or value not in options:
        raise RequestError(f"{key!r} must be one of {', '.join(options)}; got {show(value)}", at(path, key))
    return choices(value)


def expression_text(value: object, path: str | None, *, python_type: bool = False) -> str:
    """An expression's text. `python_type` names a wrong value's type as Python does (`int`, not
    `an integer`): what a named expression's `expr` has always been told."""
    if not isinstance(value, str):
        found = type(value).__name__ if python_type else json_type(value)
        raise RequestError(f"an expression must be a string, got {found}", path)
    return value


def check_column_name(name: object, path: str | None) -> str:
    """Output column names: any non-empty string without NUL (they are data, never code)."""
    if not isinstance(name, str):
        raise RequestError(f"a column name must be a string, got {json_type(name)}", path)
    if not name:
        raise RequestError("a column name must not be empty", path)
    if "\x00" in name:
        raise RequestError("a column name must not contain NUL characters", path, name)
    return name
