"""DISTINCT aggregates (`count(DISTINCT x)`, dataflow/aggregates.py) as aggregations without them.

An aggregation `NAME` by keys K whose DISTINCT aggregates all take x becomes, before mapping:

1. `NAME__distinct`: by K and x (each distinct x once per group), with the partial states of the
   aggregates that are not DISTINCT (`sum`, `count`, `count_star`, `min`, `max` under their names;
   `avg` as `NAME__sum` and `NAME__count`), all complete mode;
2. `NAME__merge` (or `NAME` itself when nothing follows it): by K over (1), each DISTINCT aggregate
   its own function over x (a NULL x is a group of (1) of its own, which `count`, `sum`, `avg`,
   `min` and `max` skip, as SQL's DISTINCT aggregates do), the others merged (`sum` of the sums
   and of the counts, `min` of the minima, ...);
3. `NAME`, a projection, when (2) is not the answer yet: an average is its sums over its counts,
   and a count of a global aggregation (no K) is 0, not NULL, over no rows.

This is Spark's rewrite of a single distinct aggregate. It runs in the compiler, like the split of
an aggregation over nodes (scale_out.py), so no plugin sees a DISTINCT aggregate; the new
operations keep the request path of the one they replace, and consumers of `NAME` read the last.
"""
from __future__ import annotations

from collections.abc import Mapping

from ..contract.types import Field, Schema
from ..dataflow.aggregates import result_type
from ..dataflow.expr import Binary, Case, Column, Expr, Func, Literal
from ..dataflow.plan import (
    AggFn,
    AggMode,
    Aggregate,
    AggregateCall,
    InputRef,
    LogicalPlan,
    NamedExpr,
    Project,
    fresh_name,
)
from ..dataflow.typecheck import bind


def has_distinct(plan: LogicalPlan) -> bool:
    return any(isinstance(op, Aggregate) and any(c.distinct for c in op.aggregates) for op in plan.ops)


def expand_distinct(plan: LogicalPlan, op_paths: Mapping[str, str] | None = None
                    ) -> tuple[LogicalPlan, Mapping[str, str] | None]:
    """`plan` with every aggregation that has DISTINCT aggregates rewritten (module docstring),
    and `op_paths` with the new operations' paths (the rewritten one's); both unchanged when
    there is none."""
    if not has_distinct(plan):
        return plan, op_paths
    taken = {op.name for op in plan.ops}
    ops: list = []
    schemas = dict(plan.schemas)
    plan_paths, given_paths = dict(plan.op_paths), dict(op_paths or {})
    for op in plan.ops:
        if not (isinstance(op, Aggregate) and any(c.distinct for c in op.aggregates)):
            ops.append(op)
            continue
        for node, schema in _rewrite(op, schemas[op.name], taken):
            ops.append(node)
            schemas[node.name] = schema
            for paths in (plan_paths, given_paths):
                if op.name in paths:
                    paths.setdefault(node.name, paths[op.name])
    out = LogicalPlan(plan.name, tuple(ops), schemas, plan_paths)
    return out, (None if op_paths is None else given_paths)


def _rewrite(op: Aggregate, out_schema: Schema, taken_ops: set[str]) -> list[tuple[object, Schema]]:
    assert op.mode is AggMode.COMPLETE
    value = next(c.expr for c in op.aggregates if c.distinct)
    assert value is not None and all(c.expr == value for c in op.aggregates if c.distinct)
    columns = {g.name for g in op.group_by} | {c.name for c in op.aggregates}
    value_name = fresh_name("distinct_value", columns)

    # 1. by the keys and the value, with the others' partial states
    inner_calls: list[AggregateCall] = []
    inner_fields = [Field(g.name, g.expr.type) for g in op.group_by] + [Field(value_name, value.type)]
    states: dict[str, tuple[str, ...]] = {}  # aggregate -> its state columns in (1)
    for c in op.aggregates:
        if c.distinct:
            continue
        if c.fn is AggFn.AVG:
            parts = (fresh_name(c.name + "__sum", columns), fresh_name(c.name + "__count", columns))
            inner_calls += [AggregateCall(parts[0], AggFn.SUM, c.expr), AggregateCall(parts[1], AggFn.COUNT, c.expr)]
        else:
            parts = (c.name,)
            inner_calls.append(AggregateCall(c.name, c.fn, c.expr))
        states[c.name] = parts
    inner_fields += [Field(c.name, result_type(c.fn, c.expr.type if c.expr is not None else None))
                     for c in inner_calls]
    inner_schema = Schema(tuple(inner_fields))
    inner_name = fresh_name(f"{op.name}__distinct", taken_ops)
    inner = Aggregate(inner_name, op.input, (*op.group_by, NamedExpr(value_name, value)), tuple(inner_calls))

    # 2. by the keys: the DISTINCT aggregates over the value, the others merged
    def col(name: str) -> Column:
        i = inner_schema.index(name)
        return Column(name, i, inner_schema.fields[i].type)

    merge = {AggFn.SUM: AggFn.SUM, AggFn.COUNT: AggFn.SUM, AggFn.COUNT_STAR: AggFn.SUM,
             AggFn.MIN: AggFn.MIN, AggFn.MAX: AggFn.MAX}
    outer_calls: list[AggregateCall] = []
    for c in op.aggregates:
        if c.distinct:
            outer_calls.append(AggregateCall(c.name, c.fn, col(value_name)))
        elif c.fn is AggFn.AVG:
            outer_calls += [AggregateCall(p, AggFn.SUM, col(p)) for p in states[c.name]]
        else:
            outer_calls.append(AggregateCall(c.name, merge[c.fn], col(c.name)))
    groups = tuple(NamedExpr(g.name, col(g.name)) for g in op.group_by)
    outer_fields = [Field(g.name, g.expr.type) for g in groups]
    outer_fields += [Field(c.name, result_type(c.fn, c.expr.type)) for c in outer_calls]  # type: ignore[union-attr]
    outer_schema = Schema(tuple(outer_fields))

    # 3. the answer's columns, when (2) is not it yet
    finish = [g.name for g in op.group_by] + [c.name for c in op.aggregates]
    exprs: list[Expr] = [Column(n) for n in finish]
    for i, c in enumerate(op.aggregates, start=len(op.group_by)):
        if c.distinct:
            continue
        if c.fn is AggFn.AVG:
            total, count = (Column(p) for p in states[c.name])
            exprs[i] = Case(((Binary("=", count, Literal(0)), Literal(None)),), Binary("/", total, count))
        elif c.fn in (AggFn.COUNT, AggFn.COUNT_STAR) and not op.group_by:
            exprs[i] = Func("coalesce", (Column(c.name), Literal(0)))
    if outer_schema == out_schema and all(isinstance(e, Column) for e in exprs):
        return [(inner, inner_schema), (Aggregate(op.name, InputRef(inner_name), groups, tuple(outer_calls)), out_schema)]
    outer_name = fresh_name(f"{op.name}__merge", taken_ops)
    outer = Aggregate(outer_name, InputRef(inner_name), groups, tuple(outer_calls))
    columns_out = tuple(NamedExpr(n, _bound(e, outer_schema, f, op.name))
                        for n, e, f in zip(finish, exprs, out_schema.fields, strict=True))
    project = Project(op.name, InputRef(outer_name), columns_out)
    return [(inner, inner_schema), (outer, outer_schema), (project, out_schema)]


def _bound(e: Expr, schema: Schema, want: Field, where: str) -> Expr:
    """`e` bound over `schema`; its type is the one the aggregation's answer has for that column."""
    bound = bind(e, schema, where)
    assert bound.type == want.type, (where, want, bound.type)
    return bound


__all__ = ["expand_distinct", "has_distinct"]
