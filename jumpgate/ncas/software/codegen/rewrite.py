"""Small named rewrites of bound expression trees used before code generation."""
from __future__ import annotations

from collections.abc import Sequence

from ....dataflow import expr as dataflow_expr
from ....dataflow.expr import Column, Expr
from .csyntax import CodegenError, same_representation


def map_children(e: Expr, fn) -> Expr:
    """`e` with `fn` applied to each direct child (same node class, same type); a node that is
    not an expression is a CodegenError, as everywhere in code generation."""
    try:
        return dataflow_expr.map_children(e, fn)
    except TypeError as err:
        raise CodegenError(str(err)) from None


def substitute_columns(e: Expr, columns: Sequence[Expr]) -> Expr:
    """Replace every column reference `Column(index=i)` by `columns[i]` (binding an expression
    over a projection's output to the projection's input)."""
    if isinstance(e, Column):
        if not 0 <= e.index < len(columns):
            raise CodegenError(f"column reference #{e.index} outside its input's {len(columns)} columns")
        target = columns[e.index]
        if e.type is None or target.type is None or not same_representation(target.type, e.type):
            raise CodegenError(f"column reference #{e.index} typed {e.type}, its input is {target.type}")
        return target
    return map_children(e, lambda c: substitute_columns(c, columns))
