"""Small named rewrites of bound expression trees used before code generation."""
from __future__ import annotations

from collections.abc import Sequence

from ....dataflow.expr import Column, Expr, map_children
from .csyntax import CodegenError, same_representation


def substitute_columns(e: Expr, columns: Sequence[Expr]) -> Expr:
    """Replace every column reference `Column(index=i)` by `columns[i]` (binding an expression
    over a projection's output to the projection's input). A node that is not an expression is a
    CodegenError, as everywhere in code generation."""
    try:
        return _substitute(e, columns)
    except TypeError as err:  # dataflow's map_children met a node that is not an expression
        raise CodegenError(str(err)) from None


def _substitute(e: Expr, columns: Sequence[Expr]) -> Expr:
    # one frame per level besides map_children's: a request's expressions nest up to
    # `max_expression_depth` (tests/unit/test_limits.py)
    if isinstance(e, Column):
        if not 0 <= e.index < len(columns):
            raise CodegenError(f"column reference #{e.index} outside its input's {len(columns)} columns")
        target = columns[e.index]
        if e.type is None or target.type is None or not same_representation(target.type, e.type):
            raise CodegenError(f"column reference #{e.index} typed {e.type}, its input is {target.type}")
        return target
    return map_children(e, lambda c: _substitute(c, columns))
