"""A chain of `filter` and `project` operations, folded into one row function.

Every software NCA's query runs such a chain after what produces its rows (a read, a join, NTF
input, an aggregate's groups). Projections compose by substitution: an expression over a
projection's output is rewritten to the projection's input, down to the row the chain starts
from, so a dropped column is never evaluated, and common sub-expression elimination
(`ExprCompiler`) makes a column used several times evaluate once per row. The row function then
evaluates the filters in order (a row passes only when the condition is TRUE), then the output
values, and writes one NTF tuple.
"""
from __future__ import annotations

from collections.abc import Sequence

from ....contract.ntf import NtfLayout
from ....contract.types import Schema
from ....dataflow.expr import Column, Expr
from ....dataflow.plan import Filter, Operation, Project
from .csyntax import CodegenError, FunctionBody, is_true, not_
from .expr import ExprCompiler
from .output import emit_tuple
from .rewrite import substitute_columns

Labelled = tuple[str, Expr]  # (where, expression); `where` names request operations and columns for errors


class ChainFold:
    """Filters and projections folded one at a time onto a row: `columns` are the current
    operation's output values as expressions over that row, `names` their names, `filters` the
    conditions so far (over the row too)."""

    def __init__(self, names: Sequence[str], columns: Sequence[Expr], previous: str | None = None) -> None:
        self.names = list(names)
        self.columns = list(columns)
        self.filters: list[Labelled] = []
        self.previous = previous  # the operation the next one must read; None: the chain reads NTF input

    @classmethod
    def over(cls, schema: Schema, previous: str | None = None) -> ChainFold:
        """Starting from every column of `schema`, unchanged."""
        return cls(schema.names, [Column(f.name, i, f.type) for i, f in enumerate(schema.fields)], previous)

    def bind(self, e: Expr) -> Expr:
        """`e`, an expression over the current columns, as an expression over the row."""
        return substitute_columns(e, self.columns)

    def reads_previous(self, op: Operation) -> bool:
        ref = getattr(op, "input", None)
        return ref is not None and (self.previous is None or (ref.op == self.previous and ref.port == 0))

    def add(self, op: Operation) -> bool:
        """Fold `op` if it is a filter or a projection; False for any other operation (the caller
        decides what that means). `op` must read the previous operation of the chain."""
        if not self.reads_previous(op):
            raise CodegenError(f"operation {op.name!r} does not read the previous operation of the chain")
        if isinstance(op, Filter):
            self.filters.append((f"filter '{op.name}'", self.bind(op.condition)))
        elif isinstance(op, Project):
            self.columns = [self.bind(c.expr) for c in op.columns]
            self.names = [c.name for c in op.columns]
        else:
            return False
        self.previous = op.name
        return True

    def fold(self, ops: Sequence[Operation], takes: str) -> ChainFold:
        """Fold every operation of `ops`; any other than a filter or a projection is an error
        whose message starts with `takes` (what the query takes)."""
        for op in ops:
            if not self.add(op):
                raise CodegenError(f"{takes}, not {op.kind!r}")
        return self

    def outputs(self, last: str | None = None) -> tuple[Labelled, ...]:
        """The chain's output values, labelled as columns of operation `last` (by default the
        last one folded)."""
        of = self.previous if last is None else last
        return tuple((f"column '{n}' of '{of}'", e) for n, e in zip(self.names, self.columns))


def emit_filters(body: FunctionBody, comp: ExprCompiler, filters: Sequence[Labelled],
                 heading: str = "filter {i} of {n}", skip: str = "return JG_ROW_OK;") -> None:
    """Evaluate the conditions in order; a row for which one is not TRUE runs `skip`. Each gets
    a comment, `heading` with its number `i` and the count `n` filled in."""
    for i, (where, cond) in enumerate(filters):
        comp.where = where
        body.comment(heading.format(i=i + 1, n=len(filters)))
        body.line(f"if {body.cond(not_(is_true(comp.compile(cond))))} {skip}")


def emit_outputs(body: FunctionBody, comp: ExprCompiler, outputs: Sequence[Labelled], layout: NtfLayout,
                 ports: int = 1, port: str = "0") -> None:
    """Evaluate the output values, convert each to its field's type and write them as one tuple
    in `layout` (`ports` and `port` as for `emit_tuple`)."""
    if len(layout.fields) != len(outputs):
        raise CodegenError(f"NTF layout has {len(layout.fields)} fields, the query outputs {len(outputs)}")
    values = []
    for (where, e), f in zip(outputs, layout.fields):
        comp.where = where
        values.append(comp.coerce(comp.compile(e), f.type))
    emit_tuple(body, values, layout, ports, port=port)
