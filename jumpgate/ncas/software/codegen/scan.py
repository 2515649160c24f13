"""The query file of a scan NCA: `read` followed by any chain of `filter` and `project`, folded
onto the read's row as chain.py describes.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ....contract.ntf import NtfLayout
from ....contract.types import DataType, Kind, Schema
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
from .templates import render_query


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


def column_table(schema: Schema, used: Sequence[int], named: bool = True) -> list[dict]:
    """JG_QUERY.columns: the `used` columns of `schema`. A scan finds its columns in its files by
    name (`named`); a driver decoding NTF goes by position only, so there the names, which are
    the request's and differ between requests of one shape, stay out of the source."""
    rows = []
    for src in used:
        f = schema.fields[src]
        name = utf8(f.name, "column name") if named else b""
        rows.append({"name": c_bytes(name), "name_len": len(name), "jg_type": jg_type(f.type),
                     "precision": f.type.precision, "scale": f.type.scale, "source_index": src,
                     "type": str(f.type)})
    return rows


INTEGRAL = (Kind.BOOLEAN, Kind.INT32, Kind.INT64, Kind.DATE, Kind.DECIMAL)


def _value_hash(t: DataType, v: str) -> str:
    """jg_hash v1's value hash of the non-NULL value `v` (a C value of type `t`), as the join's."""
    if t.kind is Kind.FLOAT64:
        return f"jg_hash_float({v})"
    if t.kind is Kind.STRING:
        return f"jg_hash_bytes({v}.p, {v}.n)"
    return f"jg_hash_int({v})"


def emit_runtime_filters(body: FunctionBody, comp: ExprCompiler, schema: Schema,
                         filters: Sequence[Sequence[int]], skip: str = "return JG_ROW_OK;") -> None:
    """Test the row against runtime filter `slot` for each key column list of `filters`
    (docs/runtime-filters.md): NULL keys, the key tuple's jg_hash v1 (the hash join's), and the
    integral keys' values for the key ranges, then jg_rf_test; a row it drops runs `skip` (is not
    emitted, or not aggregated)."""
    for slot, columns in enumerate(filters):
        comp.where = f"runtime filter {slot}"
        values = [comp.compile(Column(schema.fields[i].name, i, schema.fields[i].type)) for i in columns]
        body.comment(f"runtime filter {slot} (docs/runtime-filters.md): keys are read columns "
                     + ", ".join(f"#{i}" for i in columns))
        nulls = [v.null for v in values if not v.never_null]
        body.line("{")
        body.line(f"  const int rf_null = {' || '.join(nulls) if nulls else '0'};")
        body.line("  uint64_t rf_h = JG_HASH_SEED;")
        body.line(f"  int64_t rf_i[{len(values)}] = {{0}};")
        body.line("  if (!rf_null) {")
        for j, v in enumerate(values):
            body.line(f"    rf_h = jg_hash_combine(rf_h, {_value_hash(v.type, v.value)});")
            if v.type.kind in INTEGRAL:
                body.line(f"    rf_i[{j}] = (int64_t)({v.value});")
        body.line("  }")
        body.line(f"  if (!jg_rf_test(ctx, {slot}u, rf_null, rf_h, rf_i)) {skip}")
        body.line("}")


def generate_scan_query(ops: Sequence[Operation], layout: NtfLayout, ports: int = 1,
                        runtime_filters: Sequence[Sequence[int]] = ()) -> str:
    """C source of a scan NCA's query: the JG_QUERY descriptor and its row function.

    `ops` is the NCA's chain (read, then filters and projects, each reading the previous one),
    bound and typed; `layout` is the NTF of the last operation's output; `ports` is the number of
    output ports (each gets every tuple). `runtime_filters` lists, per filter slot, the key
    columns (indexes into the read's schema) of a runtime filter the row is tested against after
    the filters, before its tuple is written (docs/runtime-filters.md)."""
    if ports < 1:
        raise CodegenError("a scan query has at least one output port")
    scan = plan_scan(ops)
    schema = scan.read.schema
    keys = [Column(schema.fields[i].name, i, schema.fields[i].type) for cols in runtime_filters for i in cols]
    exprs = [e for _, e in scan.filters] + [e for _, e in scan.outputs]
    used = used_columns(exprs + keys)
    pool = LiteralPool()
    body = FunctionBody(messages=pool.messages)
    comp = ExprCompiler(body, pool, RowEnv(schema, used), shared=count_subtrees(exprs))
    emit_filters(body, comp, scan.filters)
    emit_runtime_filters(body, comp, schema, runtime_filters)
    emit_outputs(body, comp, scan.outputs, layout, ports)
    compact = {src: k for k, src in enumerate(used)}
    return render_query("scan_query.c.j2", pool, kind="scan", body=body.text(),
                  columns=column_table(schema, used), nfilters=len(scan.filters), ports=ports,
                  runtime_filters=[[compact[i] for i in cols] for cols in runtime_filters])
