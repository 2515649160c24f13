"""One binder per operation kind: raw JSON fields + input schemas → plan node + output schema.

`request.parse_request` has already checked the operation's field names, its name and its input
references; these functions check the fields' values, parse and bind every expression and compute
the output schema (contract §1). Aggregates live in `aggregates.py`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..contract import types as T
from ..contract.errors import RequestError
from ..contract.types import Field, Schema
from .expr import Expr, columns_used
from .jsonshape import (
    at,
    check_column_name,
    check_keys,
    clip,
    expect_object,
    get_int,
    get_list,
    get_string,
    json_type,
    show,
)
from .limits import DEFAULT_LIMITS, RequestLimits
from .parse import parse_expression
from .paths import resolve_read_paths
from .plan import FileFormat, Filter, InputRef, Join, JoinType, NamedExpr, Project, Read, Send, Shuffle
from .sqltext import quote_name
from .storage import Storage
from .typecheck import bind, bind_named, cast_to, common_type, named_schema


@dataclass(frozen=True)
class RawOp:
    """One entry of `operations`, shape-checked: kind and name known, no unknown fields."""

    index: int
    kind: str
    name: str
    obj: dict
    limits: RequestLimits = DEFAULT_LIMITS  # what its expressions may be (dataflow/limits.py)

    @property
    def path(self) -> str:
        return f"operations[{self.index}]"

    def at(self, key: str | int) -> str:
        return at(self.path, key)


def bind_expr(text: object, schema: Schema | tuple[Field, ...], path: str,
              limits: RequestLimits = DEFAULT_LIMITS) -> Expr:
    if not isinstance(text, str):
        raise RequestError(f"an expression must be a string, got {json_type(text)}", path)
    return bind(parse_expression(text, path, limits), schema, path)


def bind_condition(text: object, schema: Schema | tuple[Field, ...], path: str,
                   limits: RequestLimits = DEFAULT_LIMITS) -> Expr:
    cond = bind_expr(text, schema, path, limits)
    if cond.type != T.BOOLEAN:
        raise RequestError(f"a condition must be boolean, got {cond.type}", path, clip(text))
    return cond


def parse_named(items: list, path: str, *, expr_required: bool = True,
                taken: dict[str, str] | None = None, limits: RequestLimits = DEFAULT_LIMITS) -> list[NamedExpr]:
    """`[{"name", "expr"}]` entries, names unique (also against `taken`: name -> path), exprs
    parsed but not bound. Without `expr_required`, a missing expr means the column `name`."""
    seen = dict(taken or {})
    out = []
    for i, item in enumerate(items):
        ipath = at(path, i)
        obj = expect_object(item, ipath, "a named expression")
        check_keys(obj, ipath, ["name", "expr"] if expr_required else ["name"],
                   [] if expr_required else ["expr"], "a named expression")
        name = check_column_name(obj["name"], at(ipath, "name"))
        if name in seen:
            raise RequestError(f"duplicate output column {show(name)} (also at {seen[name]})", at(ipath, "name"))
        seen[name] = at(ipath, "name")
        text = obj.get("expr")
        if text is None:
            text = quote_name(name)
        out.append(NamedExpr(name, parse_expression(text, at(ipath, "expr"), limits)))
    return out


def choice(obj: dict, key: str, path: str, choices: type, default: str | None = None):
    value = obj.get(key, None)
    if value is None and default is not None:
        value = default
    options = [c.value for c in choices]  # type: ignore[attr-defined]
    if not isinstance(value, str) or value not in options:
        raise RequestError(f"{key!r} must be one of {', '.join(options)}; got {show(value)}", at(path, key))
    return choices(value)


# --- read --------------------------------------------------------------------------------------

def bind_read(op: RawOp, storage: Storage) -> tuple[Read, Schema]:
    fmt = choice(op.obj, "format", op.path, FileFormat)
    items = get_list(op.obj, "schema", op.path)
    fields: list[Field] = []
    seen: set[str] = set()
    for j, item in enumerate(items):
        jpath = op.at("schema") + f"[{j}]"
        obj = expect_object(item, jpath, "a schema entry")
        check_keys(obj, jpath, ["name", "type"], [], "a schema entry")
        name = check_column_name(obj["name"], at(jpath, "name"))
        if name in seen:
            raise RequestError(f"duplicate column name {show(name)} in the schema", at(jpath, "name"), name)
        seen.add(name)
        type_text = obj["type"]
        try:
            dtype = T.parse_type(type_text)
        except ValueError as e:
            raise RequestError(str(e), at(jpath, "type"), type_text if isinstance(type_text, str) else None) from None
        fields.append(Field(name, dtype))
    schema = Schema(tuple(fields))
    files = resolve_read_paths(op.obj["path"], storage, op.at("path"))
    return Read(op.name, files.paths, fmt, schema, files.sizes, files.holders), schema


# --- filter, project, shuffle, send -------------------------------------------------------------

def bind_filter(op: RawOp, ref: InputRef, schema: Schema) -> tuple[Filter, Schema]:
    cond = bind_condition(op.obj["condition"], schema, op.at("condition"), op.limits)
    return Filter(op.name, ref, cond), schema


def bind_project(op: RawOp, ref: InputRef, schema: Schema) -> tuple[Project, Schema]:
    items = get_list(op.obj, "columns", op.path)
    columns = bind_named(parse_named(items, op.at("columns"), limits=op.limits), schema, op.at("columns"))
    return Project(op.name, ref, columns), named_schema(columns)


def bind_shuffle(op: RawOp, ref: InputRef, schema: Schema) -> tuple[Shuffle, Schema]:
    keys = get_list(op.obj, "keys", op.path)
    bound = tuple(bind_expr(k, schema, op.at("keys") + f"[{j}]", op.limits) for j, k in enumerate(keys))
    partitions = get_int(op.obj, "partitions", op.path, 1)
    return Shuffle(op.name, ref, bound, partitions), schema


_TRANSPORT = re.compile(r"[a-z][a-z0-9_]*")


def bind_send(op: RawOp, ref: InputRef) -> Send:
    transport = get_string(op.obj, "transport", op.path)
    if not _TRANSPORT.fullmatch(transport):  # type: ignore[arg-type]
        raise RequestError(f"'transport' must be a lower-case name such as 'tcp', got {show(transport)}",
                           op.at("transport"), transport)
    host = get_string(op.obj, "host", op.path)
    if any(c.isspace() or c == "\x00" for c in host):  # type: ignore[union-attr]
        raise RequestError(f"'host' must be a host name or address, got {show(host)}", op.at("host"), host)
    port = get_int(op.obj, "port", op.path, 1, 65535)
    return Send(op.name, ref, transport, host, port)  # type: ignore[arg-type]


# --- join --------------------------------------------------------------------------------------

def bind_join(op: RawOp, build: InputRef, probe: InputRef, build_schema: Schema,
              probe_schema: Schema) -> tuple[Join, Schema]:
    jtype = choice(op.obj, "type", op.path, JoinType, default="inner")
    build_keys, probe_keys = _join_keys(op, build_schema, probe_schema)
    both = (*probe_schema.fields, *build_schema.fields)
    cond = op.obj.get("condition")
    condition = bind_condition(cond, both, op.at("condition"), op.limits) if cond is not None else None
    probe_only = jtype in (JoinType.LEFT_SEMI, JoinType.LEFT_ANTI)
    columns = None
    if op.obj.get("columns") is not None:
        items = get_list(op.obj, "columns", op.path)
        columns = bind_named(parse_named(items, op.at("columns"), limits=op.limits), both, op.at("columns"))
        for j, c in enumerate(columns):
            if probe_only and any(i >= len(probe_schema) for i in columns_used(c.expr)):
                raise RequestError(f"a {jtype.value} join outputs only probe rows; column {show(c.name)} "
                                   "uses a build column", op.at("columns") + f"[{j}].expr")
        schema = named_schema(columns)
    elif probe_only:
        schema = probe_schema
    else:
        schema = _concat_schema(op, probe_schema, build_schema)
    join = Join(op.name, build, probe, build_keys, probe_keys, jtype, condition, columns)
    return join, schema


def _join_keys(op: RawOp, build_schema: Schema, probe_schema: Schema) -> tuple[tuple[Expr, ...], tuple[Expr, ...]]:
    build_texts = get_list(op.obj, "build_keys", op.path)
    probe_texts = get_list(op.obj, "probe_keys", op.path)
    if len(build_texts) != len(probe_texts):
        raise RequestError(f"'build_keys' has {len(build_texts)} expressions but 'probe_keys' has "
                           f"{len(probe_texts)}; they are compared pairwise", op.at("probe_keys"))
    build_keys, probe_keys = [], []
    for j, (bt, pt) in enumerate(zip(build_texts, probe_texts, strict=True)):
        bpath, ppath = op.at("build_keys") + f"[{j}]", op.at("probe_keys") + f"[{j}]"
        b, p = bind_expr(bt, build_schema, bpath, op.limits), bind_expr(pt, probe_schema, ppath, op.limits)
        common = common_type(b.type, p.type)  # type: ignore[arg-type]
        if common is None:
            raise RequestError(f"join key probe_keys[{j}] has type {p.type} and build_keys[{j}] has type "
                               f"{b.type}; they cannot be compared", ppath, pt)
        build_keys.append(cast_to(b, common))
        probe_keys.append(cast_to(p, common))
    return tuple(build_keys), tuple(probe_keys)


def _concat_schema(op: RawOp, probe: Schema, build: Schema) -> Schema:
    for f in build.fields:
        if probe.get(f.name) is not None:
            raise RequestError(f"both join inputs have a column named {show(f.name)}; give 'columns' to "
                               "name the join's output", op.at("columns"), f.name)
    return Schema((*probe.fields, *build.fields))
