"""The query file of a scan NCA: `read` followed by any chain of `filter` and `project`, folded
onto the read's row as chain.py describes.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ....contract.ntf import NtfLayout
from ....contract.types import DataType, Schema
from ....dataflow.expr import Column, Expr, walk
from ....dataflow.plan import Operation, Read
from .chain import ChainFold, emit_filters, emit_outputs
from .csyntax import (
    CodegenError,
    CValue,
    FunctionBody,
    LiteralPool,
    c_bytes,
    jg_type,
    row_member,
    same_representation,
    utf8,
)
from .expr import ExprCompiler, count_subtrees
from .templates import render


@dataclass(frozen=True)
class ScanPlan:
    """A scan chain reduced to what the row function evaluates: every expression is over the
    read's schema. `where` labels (for error messages) name request operations and columns."""

    read: Read
    filters: tuple[tuple[str, Expr], ...]  # (where, condition)
    outputs: tuple[tuple[str, Expr], ...]  # (where, value)


def fold_scan(ops: Sequence[Operation]) -> tuple[Read, ChainFold]:
    """The read, and its filters and projections folded onto the read's columns."""
    if not ops or not isinstance(ops[0], Read):
        raise CodegenError("a scan query starts with a 'read' operation")
    read = ops[0]
    chain = ChainFold.over(read.schema, read.name).fold(ops[1:], "a scan query takes filter and project operations")
    return read, chain


def plan_scan(ops: Sequence[Operation]) -> ScanPlan:
    """Check the chain and bind every filter and output to the read's columns."""
    read, chain = fold_scan(ops)
    return ScanPlan(read, tuple(chain.filters), chain.outputs())


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
    emit_filters(body, comp, scan.filters)
    emit_outputs(body, comp, scan.outputs, layout, ports)
    return render("scan_query.c.j2", kind="scan", body=body.text(), literals=pool.declarations(),
                  columns=column_table(scan.read.schema, used), nfilters=len(scan.filters), ports=ports)
