"""The query file of a scan NCA: `read` followed by any chain of `filter` and `project`.

Projections compose by substitution: an expression over a projection's output is rewritten to
the projection's input, down to the read's columns, so a dropped column is never evaluated, and
common sub-expression elimination (`ExprCompiler`) makes a column used several times evaluate
once per row. The row function evaluates the filters in order (a row passes only when the
condition is TRUE), then the output values, then writes one NTF tuple.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ....compiler.ntf import NtfLayout
from ....dataflow.expr import Column, Expr, walk
from ....dataflow.plan import Filter, Operation, Project, Read
from ....dataflow.types import DataType, Schema
from .csyntax import (
    CodegenError,
    CValue,
    FunctionBody,
    LiteralPool,
    c_bytes,
    is_true,
    jg_type,
    not_,
    row_member,
    same_representation,
    utf8,
)
from .expr import ExprCompiler, count_subtrees
from .output import emit_tuple
from .rewrite import substitute_columns
from .templates import render


@dataclass(frozen=True)
class ScanPlan:
    """A scan chain reduced to what the row function evaluates: every expression is over the
    read's schema. `where` labels (for error messages) name request operations and columns."""

    read: Read
    filters: tuple[tuple[str, Expr], ...]  # (where, condition)
    outputs: tuple[tuple[str, Expr], ...]  # (where, value)


def plan_scan(ops: Sequence[Operation]) -> ScanPlan:
    """Check the chain and bind every filter and output to the read's columns."""
    if not ops or not isinstance(ops[0], Read):
        raise CodegenError("a scan query starts with a 'read' operation")
    read = ops[0]
    current: list[Expr] = [Column(f.name, i, f.type) for i, f in enumerate(read.schema.fields)]
    names = list(read.schema.names)
    filters: list[tuple[str, Expr]] = []
    previous = read.name
    for op in ops[1:]:
        if getattr(op, "input", None) is None or op.input.op != previous or op.input.port != 0:
            raise CodegenError(f"operation {op.name!r} does not read the previous operation of the chain")
        if isinstance(op, Filter):
            filters.append((f"filter '{op.name}'", substitute_columns(op.condition, current)))
        elif isinstance(op, Project):
            current = [substitute_columns(c.expr, current) for c in op.columns]
            names = [c.name for c in op.columns]
        else:
            raise CodegenError(f"a scan query takes filter and project operations, not {op.kind!r}")
        previous = op.name
    last = ops[-1].name
    outputs = tuple((f"column '{n}' of '{last}'", e) for n, e in zip(names, current))
    return ScanPlan(read, tuple(filters), outputs)


class RowEnv:
    """Column references resolve to `row[k]`, k the compact index of the read column."""

    def __init__(self, schema: Schema, used: Sequence[int]) -> None:
        self.schema = schema
        self.compact = {src: k for k, src in enumerate(used)}

    def column(self, index: int, expected: DataType) -> CValue:
        if index not in self.compact:
            raise CodegenError(f"input column #{index} was not planned as used")
        t = self.schema.fields[index].type
        if not same_representation(t, expected):
            raise CodegenError(f"input column #{index} is {t}, referenced as {expected}")
        k = self.compact[index]
        return CValue(f"row[{k}].v.{row_member(t)}", f"row[{k}].null", t)


def used_columns(exprs: Sequence[Expr]) -> list[int]:
    """Read columns the expressions reference, in schema order."""
    return sorted({n.index for e in exprs for n in walk(e) if isinstance(n, Column)})


def column_table(schema: Schema, used: Sequence[int]) -> list[dict]:
    rows = []
    for src in used:
        f = schema.fields[src]
        name = utf8(f.name, "column name")
        rows.append({"name": c_bytes(name), "name_len": len(name), "jg_type": jg_type(f.type),
                     "precision": f.type.precision, "scale": f.type.scale, "source_index": src,
                     "type": str(f.type)})
    return rows


def generate_scan_query(ops: Sequence[Operation], layout: NtfLayout, ports: int = 1) -> str:
    """C source of a scan NCA's query: the JG_QUERY descriptor and its row function.

    `ops` is the NCA's chain (read, then filters and projects, each reading the previous one),
    bound and typed; `layout` is the NTF of the last operation's output; `ports` is the number of
    output ports (each gets every tuple)."""
    if ports < 1:
        raise CodegenError("a scan query has at least one output port")
    scan = plan_scan(ops)
    exprs = [e for _, e in scan.filters] + [e for _, e in scan.outputs]
    used = used_columns(exprs)
    pool = LiteralPool()
    body = FunctionBody(message_ref=pool.message)
    comp = ExprCompiler(body, pool, RowEnv(scan.read.schema, used), shared=count_subtrees(exprs))
    for i, (where, cond) in enumerate(scan.filters):
        comp.where = where
        body.comment(f"filter {i + 1} of {len(scan.filters)}")
        v = comp.compile(cond)
        body.line(f"if {body.cond(not_(is_true(v)))} return JG_ROW_OK;")
    values = []
    for (where, e), f in zip(scan.outputs, layout.fields):
        comp.where = where
        values.append(comp.coerce(comp.compile(e), f.type))
    if len(layout.fields) != len(scan.outputs):
        raise CodegenError(f"NTF layout has {len(layout.fields)} fields, the query outputs {len(scan.outputs)}")
    emit_tuple(body, values, layout, ports)
    return render("scan_query.c.j2", kind="scan", body=body.text(), literals=pool.declarations(),
                  columns=column_table(scan.read.schema, used), nfilters=len(scan.filters), ports=ports)
