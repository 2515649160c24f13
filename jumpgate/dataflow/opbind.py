"""One binder per operation kind: an operation + input schemas → plan node + output schema.

`request.parse_request` has already validated the operation with its model (models.py: fields,
their values' types, ranges and syntax) and resolved its input references; these functions parse
and bind every expression, check what needs more than one field and compute the output schema
(contract §1). Read, filter, project, shuffle and send take the validated model (`RawOp.model`).
The join binder, `parse_named` and `bind_expr` also take raw JSON fields as they are given to
them by other callers (aggregates.py, the code generators' golden files), so they keep their own
checks of it, with the same messages (jsonshape.py). Aggregates live in `aggregates.py`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..contract import types as T
from ..contract.errors import RequestError
from ..contract.types import Field, Schema
from .expr import Expr, columns_used
from .jsonshape import (
    at,
    check_column_name,
    check_keys,
    choice,  # also imported from here by aggregates.py
    clip,
    expect_object,
    expression_text,
    get_list,
    show,
)
from .limits import DEFAULT_LIMITS, RequestLimits
from .models import FilterOperation, ReadOperation, SendOperation, ShuffleOperation
from .parse import parse_expression
from .paths import resolve_read_paths
from .plan import Filter, InputRef, Join, JoinType, NamedExpr, Project, Read, RequestJoinType, Send, Shuffle
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
    model: Any = None  # its validated model (models.py); None when a caller binds a fragment by hand

    @property
    def path(self) -> str:
        return f"operations[{self.index}]"

    def at(self, key: str | int) -> str:
        return at(self.path, key)


def bind_expr(text: object, schema: Schema | tuple[Field, ...], path: str,
              limits: RequestLimits = DEFAULT_LIMITS) -> Expr:
    return bind(parse_expression(expression_text(text, path), path, limits), schema, path)


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


# --- read --------------------------------------------------------------------------------------

def bind_read(op: RawOp, storage: Storage) -> tuple[Read, Schema]:
    m: ReadOperation = op.model
    fields: list[Field] = []
    seen: set[str] = set()
    for j, column in enumerate(m.columns):
        if column.name in seen:
            raise RequestError(f"duplicate column name {show(column.name)} in the schema",
                               op.at("schema") + f"[{j}].name", column.name)
        seen.add(column.name)
        fields.append(Field(column.name, T.parse_type(column.type)))  # a type name the model checked
    schema = Schema(tuple(fields))
    files = resolve_read_paths(m.path, storage, op.at("path"))
    return Read(op.name, files.paths, m.format, schema, files.sizes, files.holders), schema


# --- filter, project, shuffle, send -------------------------------------------------------------

def bind_filter(op: RawOp, ref: InputRef, schema: Schema) -> tuple[Filter, Schema]:
    m: FilterOperation = op.model
    cond = bind_condition(m.condition, schema, op.at("condition"), op.limits)
    return Filter(op.name, ref, cond), schema


def bind_project(op: RawOp, ref: InputRef, schema: Schema) -> tuple[Project, Schema]:
    items = op.obj["columns"]  # a non-empty list of named expressions (the model's check)
    columns = bind_named(parse_named(items, op.at("columns"), limits=op.limits), schema, op.at("columns"))
    return Project(op.name, ref, columns), named_schema(columns)


def bind_shuffle(op: RawOp, ref: InputRef, schema: Schema) -> tuple[Shuffle, Schema]:
    m: ShuffleOperation = op.model
    bound = tuple(bind_expr(k, schema, op.at("keys") + f"[{j}]", op.limits) for j, k in enumerate(m.keys))
    return Shuffle(op.name, ref, bound, m.partitions), schema


def bind_send(op: RawOp, ref: InputRef) -> Send:
    m: SendOperation = op.model  # transport, host and port: all the model's checks
    if m.udp_version is not None and m.transport != "udp":
        raise RequestError(f"udp_version is for transport udp, not {m.transport}", op.at("udp_version"),
                           m.udp_version)
    return Send(op.name, ref, m.transport, m.host, m.port, m.udp_version or 1)


# --- join --------------------------------------------------------------------------------------

def bind_join(op: RawOp, build: InputRef, probe: InputRef, build_schema: Schema,
              probe_schema: Schema) -> tuple[Join, Schema]:
    jtype = JoinType(choice(op.obj, "type", op.path, RequestJoinType, default="inner").value)
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
