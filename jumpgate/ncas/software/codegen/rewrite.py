"""Small named rewrites of bound expression trees used before code generation."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ....dataflow.expr import Binary, Case, Cast, Column, Expr, Func, InList, IsNull, Like, Literal, Unary
from .csyntax import CodegenError, same_representation


def map_children(e: Expr, fn) -> Expr:
    """`e` with `fn` applied to each direct child (same node class, same type)."""
    if isinstance(e, (Column, Literal)):
        return e
    if isinstance(e, (Unary, IsNull, Like, Cast)):
        return replace(e, arg=fn(e.arg))
    if isinstance(e, Binary):
        return replace(e, left=fn(e.left), right=fn(e.right))
    if isinstance(e, InList):
        return replace(e, arg=fn(e.arg), items=tuple(fn(i) for i in e.items))
    if isinstance(e, Case):
        return replace(e, whens=tuple((fn(c), fn(v)) for c, v in e.whens),
                       else_=None if e.else_ is None else fn(e.else_))
    if isinstance(e, Func):
        return replace(e, args=tuple(fn(a) for a in e.args))
    raise CodegenError(f"not an expression node: {type(e).__name__}")


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
