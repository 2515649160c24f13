"""The typed expression tree (contract §1, "Expressions").

The parser (`jumpgate.dataflow.parse`) turns request text into these nodes; the binder
(`jumpgate.dataflow.typecheck`) resolves column references against a schema, assigns every node
its result type and inserts explicit `Cast` nodes, so that code generators never reason about
implicit conversions. Generated code is produced from these trees only.

Invariants after binding (code generators rely on them):
- every node's `type` is set (`None` only before binding);
- `Column.index` is the position in the input schema the expression is evaluated against;
- arithmetic `+ - %` and comparisons get operands of the same type, except that two decimals may
  differ in precision and scale (generators rescale exactly); integer arithmetic is int64;
- `*` of two decimals takes any scales (result scale = sum); `/` always has float64 operands;
- `AND`, `OR`, `NOT`, `CASE WHEN` conditions and filters are boolean;
- `Like.pattern` is the pattern's text as data, never spliced into source.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..contract.types import DataType


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    index: int = -1
    type: DataType | None = None


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant. `value` is None for NULL; otherwise, by type: bool, int (int32/int64, the
    unscaled value of a decimal, days since 1970-01-01 for a date), float or str."""

    value: object
    type: DataType | None = None


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "not" | "neg"
    arg: Expr
    type: DataType | None = None


ARITHMETIC_OPS = ("+", "-", "*", "/", "%")
COMPARISON_OPS = ("=", "<>", "<", "<=", ">", ">=")
LOGICAL_OPS = ("and", "or")


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # one of ARITHMETIC_OPS, COMPARISON_OPS, LOGICAL_OPS ("!=" is normalised to "<>")
    left: Expr
    right: Expr
    type: DataType | None = None


@dataclass(frozen=True, slots=True)
class IsNull:
    arg: Expr
    negated: bool = False
    type: DataType | None = None


@dataclass(frozen=True, slots=True)
class InList:
    arg: Expr
    items: tuple[Expr, ...]
    negated: bool = False
    type: DataType | None = None


@dataclass(frozen=True, slots=True)
class Like:
    arg: Expr
    pattern: str  # SQL LIKE pattern: % any run of characters, _ one character; no escape char
    negated: bool = False
    type: DataType | None = None


@dataclass(frozen=True, slots=True)
class Case:
    whens: tuple[tuple[Expr, Expr], ...]  # (condition, value)
    else_: Expr | None = None
    type: DataType | None = None


@dataclass(frozen=True, slots=True)
class Cast:
    arg: Expr
    to: DataType
    type: DataType | None = None


FUNCTIONS = ("abs", "coalesce", "substr", "lower", "upper", "length", "year", "month", "day")


@dataclass(frozen=True, slots=True)
class Func:
    name: str  # one of FUNCTIONS, lower case
    args: tuple[Expr, ...] = field(default_factory=tuple)
    type: DataType | None = None


Expr = Column | Literal | Unary | Binary | IsNull | InList | Like | Case | Cast | Func


def children(e: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions, in evaluation order."""
    if isinstance(e, (Column, Literal)):
        return ()
    if isinstance(e, (Unary, IsNull, Like, Cast)):
        return (e.arg,)
    if isinstance(e, Binary):
        return (e.left, e.right)
    if isinstance(e, InList):
        return (e.arg, *e.items)
    if isinstance(e, Case):
        out: list[Expr] = []
        for c, v in e.whens:
            out += [c, v]
        if e.else_ is not None:
            out.append(e.else_)
        return tuple(out)
    if isinstance(e, Func):
        return e.args
    raise TypeError(f"not an expression node: {type(e).__name__}")


def walk(e: Expr):
    """Pre-order traversal of an expression tree, with an explicit stack (no recursion on its
    depth). A sub-tree that several parents share as one object (code generators fold projections
    into the expressions after them by substitution) is visited once: walking such a tree as if
    every use were a copy is exponential in the number of folded projections."""
    stack, seen = [e], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(reversed(children(node)))


def depth(e: Expr) -> int:
    """Levels of the tree (a leaf is 1), found in one pass over its distinct nodes (shared
    sub-trees once, see `walk`). Recursive passes over a tree (binding, code generation) make
    sure beforehand that this many levels fit on the stack."""
    levels: dict[int, int] = {}
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in levels:
            continue
        kids = children(node)
        if expanded:
            levels[id(node)] = 1 + max((levels[id(c)] for c in kids), default=0)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in kids if id(c) not in levels)
    return levels[id(e)]


def map_children(e: Expr, fn: Callable[[Expr], Expr]) -> Expr:
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
    raise TypeError(f"not an expression node: {type(e).__name__}")


def reindex_columns(e: Expr, index: Callable[[int], int]) -> Expr:
    """`e` (bound) with every column reference `Column(index=i)` reading input column `index(i)`:
    the same expression over a reordered input."""
    if isinstance(e, Column):
        return replace(e, index=index(e.index))
    return map_children(e, lambda c: reindex_columns(c, index))


def columns_used(e: Expr) -> set[int]:
    """Input column indexes an expression reads (bound trees only)."""
    return {n.index for n in walk(e) if isinstance(n, Column)}
