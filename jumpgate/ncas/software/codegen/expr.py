"""Typed expression tree -> C statements (contract §1 semantics).

`ExprCompiler.compile(e)` emits statements into a `FunctionBody` and returns a `CValue`: C names of
the value and of its null flag, held in fresh temporaries (`t3`, `n3`). One small function per node
class, found through `HANDLERS`; an unknown node class is a `CodegenError`, never a guess.

SQL semantics generated here:
- NULL propagates through arithmetic, comparisons, casts and functions;
- AND/OR are three-valued and short-circuit (the right side is evaluated only when the left does
  not decide), CASE evaluates only the taken branch, coalesce stops at the first non-NULL, IN stops
  at the first match (a list of at least `inset.SET_MIN` constants searches them first, in one
  sorted array); so an error in a part that is not needed is never raised;
- integer and decimal results that do not fit their type are data errors (`jg_fail`), never a
  wrapped answer; division or remainder by zero is a data error;
- identical sub-trees are evaluated once per row (common sub-expression elimination): inside the
  same or an enclosing unconditional scope the first result is reused; a sub-tree first met in a
  conditional branch and needed again elsewhere is memoised behind a per-row "done" flag.

Handlers recurse on the tree's depth, which the parser bounds (dataflow/limits.py); a root
`compile` makes sure that depth fits on the stack. Lists (CASE branches, coalesce arguments, IN
items) are walked in loops, never by recursion on their length.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import ExitStack, contextmanager
from dataclasses import fields
from typing import Protocol

from ....contract.types import BOOLEAN, DataType, Kind
from ....dataflow.expr import (
    ARITHMETIC_OPS,
    COMPARISON_OPS,
    LOGICAL_OPS,
    Binary,
    Case,
    Column,
    Expr,
    InList,
    IsNull,
    Like,
    Literal,
    Unary,
    children,
    depth,
)
from ....dataflow.limits import ensure_stack_for
from .csyntax import (
    CodegenError,
    CValue,
    FunctionBody,
    LiteralPool,
    c_double,
    c_int,
    c_int128,
    c_type,
    c_zero,
    is_false,
    is_true,
    or_nulls,
    same_representation,
    utf8,
)


class Env(Protocol):
    """Where column references get their values (a row of jg_val, a join's two sides, ...)."""

    def column(self, index: int, expected: DataType) -> CValue: ...


Handler = Callable[["ExprCompiler", Expr], CValue]
_FRAMES_PER_LEVEL = 12  # compile -> _compile -> _dispatch -> handler (-> helpers) per tree level, with room
HANDLERS: dict[type, Handler] = {}


def handles(*classes: type):
    def register(fn: Handler) -> Handler:
        for cls in classes:
            HANDLERS[cls] = fn
        return fn
    return register


def _is_leaf(e: Expr) -> bool:
    return isinstance(e, (Column, Literal))


class SubtreeKeys:
    """Identity of sub-trees for CSE: equal keys for structurally equal sub-trees. Not `==` of the
    nodes: 0.0 == -0.0 and 1 == True in Python, but `f * -0.0` is not `f * 0.0`, so leaves are
    told apart by their dataclass repr.

    Keys are interned bottom-up (hash-consing), once per node object: folded projections share
    sub-trees as objects, and a repr of such a tree (the key this replaced) grows exponentially
    with the number of projections folded. The table holds the nodes it keyed, so their ids stay
    theirs while it lives."""

    def __init__(self) -> None:
        self._by_node: dict[int, str] = {}
        self._interned: dict[tuple, str] = {}
        self._alive: list[Expr] = []

    def key(self, e: Expr) -> str:
        hit = self._by_node.get(id(e))
        if hit is not None:
            return hit
        stack: list[tuple[Expr, bool]] = [(e, False)]
        while stack:  # post-order with an explicit stack: no recursion on the depth
            node, expanded = stack.pop()
            if id(node) in self._by_node:
                continue
            kids = children(node)
            if not expanded:
                stack.append((node, True))
                stack.extend((c, False) for c in kids if id(c) not in self._by_node)
                continue
            signature = (_own_fields(node), tuple(self._by_node[id(c)] for c in kids))
            self._by_node[id(node)] = self._interned.setdefault(signature, f"e{len(self._interned)}")
            self._alive.append(node)
        return self._by_node[id(e)]


def _own_fields(e: Expr) -> str:
    """What tells a node apart besides its children: a leaf's repr, an inner node's class,
    operator, type and the shape of its child lists."""
    if _is_leaf(e):
        return repr(e)
    own = []
    for f in fields(e):
        value = getattr(e, f.name)
        if f.name in ("arg", "left", "right", "items", "args"):
            own.append(len(value) if isinstance(value, tuple) else None)
        elif f.name == "whens":
            own.append(len(value))
        elif f.name == "else_":
            own.append(value is None)
        else:
            own.append(repr(value))
    return f"{type(e).__name__}{own}"


class SharedCounts(Counter):
    """`count_subtrees`' answer: occurrences per key, and the keys' table for the compiler."""

    def __init__(self, keys: SubtreeKeys | None = None) -> None:
        super().__init__()
        self.keys = keys or SubtreeKeys()


def count_subtrees(exprs: Iterable[Expr]) -> SharedCounts:
    """How often each non-leaf sub-tree occurs in `exprs` (the candidates for CSE), by key. A
    sub-tree shared as one object is counted at each use, its own sub-trees once: it is computed
    once, so they are too."""
    counts = SharedCounts()
    stack, seen = list(exprs), set()
    while stack:
        e = stack.pop()
        if _is_leaf(e):
            continue
        counts[counts.keys.key(e)] += 1
        if id(e) not in seen:
            seen.add(id(e))
            stack.extend(c for c in children(e) if not _is_leaf(c))
    return counts


class ExprCompiler:
    """Compiles bound expression trees into one function body.

    `shared` counts sub-trees over every expression the function will evaluate (from
    `count_subtrees`); sub-trees that occur more than once are computed once per row.
    `where` names the part of the query being compiled in error messages (for example
    "column 'total' of 'p'"); messages reach C only as byte arrays of the literal pool.

    Templates that compile expressions inside their own C blocks must wrap them in `branch()`,
    so that a cached value never escapes the block it was computed in."""

    def __init__(self, body: FunctionBody, pool: LiteralPool, env: Env, shared: Counter | None = None) -> None:
        self.body = body
        self.pool = pool
        self.env = env
        self.shared = shared if shared is not None else SharedCounts()
        self.keys = self.shared.keys if isinstance(self.shared, SharedCounts) else SubtreeKeys()
        self.where = "expression"
        self._scopes: list[dict[str, CValue]] = [{}]  # sub-tree key -> value, innermost last
        self._memo: dict[str, tuple[CValue, str]] = {}  # sub-tree key -> (hoisted value, done flag)
        self._compiling = 0  # nested compile() calls under way

    # ---------------------------------------------------------------- entry points

    def compile(self, e: Expr) -> CValue:
        if not self._compiling:  # a root: the handlers recurse on its depth, which the parser bounded
            ensure_stack_for(depth(e), _FRAMES_PER_LEVEL)
        self._compiling += 1
        try:
            return self._compile(e)
        finally:
            self._compiling -= 1

    def _compile(self, e: Expr) -> CValue:
        if e.type is None:
            raise CodegenError(f"unbound expression node {type(e).__name__} (no type)")
        if _is_leaf(e):
            return self._dispatch(e)
        key = self.keys.key(e)
        if self.shared[key] < 2:
            return self._dispatch(e)
        for scope in reversed(self._scopes):
            if key in scope:
                return scope[key]
        if len(self._scopes) == 1 and key not in self._memo:
            v = self._dispatch(e)  # unconditional first use: a plain temporary for the rest
            self._scopes[0][key] = v
            return v
        v = self._memoised(e, key)
        self._scopes[-1][key] = v
        return v

    def _dispatch(self, e: Expr) -> CValue:
        handler = HANDLERS.get(type(e))
        if handler is None:
            raise CodegenError(f"no C code generation for expression node {type(e).__name__}")
        v = handler(self, e)
        if not same_representation(v.type, e.type):
            raise CodegenError(f"generated {v.type} for a node typed {e.type}")
        return CValue(v.value, v.null, e.type)

    def _memoised(self, e: Expr, key: str) -> CValue:
        """Compute `e` at most once per row although this use is inside a branch: results are
        hoisted to the top of the function with a done flag."""
        if key not in self._memo:
            k = self.body.fresh()
            self.body.hoist(f"{c_type(e.type)} t{k} = {c_zero(e.type)};")
            self.body.hoist(f"int n{k} = 0;")
            self.body.hoist(f"int d{k} = 0;")
            self._memo[key] = (CValue(f"t{k}", f"n{k}", e.type), f"d{k}")
        memo, flag = self._memo[key]
        with self.body.block(f"if (!{flag})"), self.branch():
            v = self._dispatch(e)
            self.body.assign(memo, v)
            self.body.line(f"{flag} = 1;")
        return memo

    @contextmanager
    def branch(self):
        """Code compiled inside runs conditionally: its cached results stay inside."""
        self._scopes.append({})
        try:
            yield
        finally:
            self._scopes.pop()

    # ---------------------------------------------------------------- helpers for handlers

    def null_of(self, t: DataType) -> CValue:
        return CValue(c_zero(t), "1", t)

    def discard(self, *values: CValue) -> None:
        """Mark computed values as intentionally unused (keeps -Wextra quiet)."""
        for v in values:
            if v.value.isidentifier() and v.value[0] == "t":
                self.body.line(f"(void){v.value};")

    @contextmanager
    def unless_null(self, null: str):
        """Run the block only for non-NULL operands (checks must not fire on NULL garbage)."""
        if null == "0":
            yield
        else:
            with self.body.block(f"if (!{null})"):
                yield

    def fail(self, what: str, cond: str | None = None) -> None:
        """A data error: `what` is our own words, `where` may name request columns."""
        self.body.fail(f"{what} in {self.where}", cond, note=what)

    def check_fits(self, var: str, t: DataType, what: str | None = None) -> None:
        """Fail when int64 `var` does not fit type `t` (int32 range, decimal precision); `what`
        replaces the default message (casts say "value out of range for ...")."""
        if t.kind in (Kind.INT32, Kind.DATE):
            msg = what or ("integer overflow: result does not fit int32" if t.kind is Kind.INT32 else "date out of range")
            self.fail(msg, f"{var} < INT32_MIN || {var} > INT32_MAX")
        elif t.kind is Kind.DECIMAL:
            lim = c_int128(10 ** t.precision) if t.is_wide_decimal else c_int(10 ** t.precision)
            self.fail(what or f"decimal overflow: result does not fit {t}", f"{var} <= -{lim} || {var} >= {lim}")

    def narrowed(self, v: CValue, t: DataType) -> CValue:
        """A wide decimal value `v` as narrow decimal `t` of its scale: checked against t's
        precision while still 128 bits, then held as int64."""
        out = self.body.temp(t, None, v.null)
        with self.unless_null(v.null):
            lim = c_int128(10 ** t.precision)
            self.fail(f"decimal overflow: result does not fit {t}", f"{v.value} <= -{lim} || {v.value} >= {lim}")
            self.body.line(f"{out.value} = (int64_t){v.value};")
        return out

    def coerce(self, v: CValue, t: DataType) -> CValue:
        """Use `v` as a value of type `t` (the binder made them agree up to representation)."""
        if (v.type.is_wide_decimal and t.kind is Kind.DECIMAL and not t.is_wide_decimal
                and v.type.scale == t.scale):
            return self.narrowed(v, t)
        if not same_representation(v.type, t):
            raise CodegenError(f"expected a value of type {t}, got {v.type}")
        if t.kind is Kind.DECIMAL and v.type.precision > t.precision:
            out = self.body.temp(t, v.value, v.null, const=True)
            with self.unless_null(v.null):
                self.check_fits(out.value, t)
            return out
        if t.kind is Kind.INT32 and v.type.kind is Kind.INT64:
            out = self.body.temp(t, v.value, v.null, const=True)
            with self.unless_null(v.null):
                self.check_fits(out.value, t)
            return out
        return CValue(v.value, v.null, t)

    def str_literal(self, data: bytes) -> str:
        return f"((jg_str){{{self.pool.add(data)}, {len(data)}}})"


# -------------------------------------------------------------------- leaves


@handles(Column)
def _column(c: ExprCompiler, e: Column) -> CValue:
    if e.index < 0:
        raise CodegenError("column reference without an index (unbound tree)")
    return c.env.column(e.index, e.type)


@handles(Literal)
def _literal(c: ExprCompiler, e: Literal) -> CValue:
    t, v = e.type, e.value
    if v is None:
        return c.null_of(t)
    k = t.kind
    if k is Kind.BOOLEAN:
        if not isinstance(v, bool):
            raise CodegenError(f"boolean literal holds {type(v).__name__}")
        return CValue("1" if v else "0", "0", t)
    if k in (Kind.INT32, Kind.INT64, Kind.DATE, Kind.DECIMAL):
        if not isinstance(v, int) or isinstance(v, bool):
            raise CodegenError(f"{t} literal holds {type(v).__name__}")
        if k is Kind.DECIMAL and abs(v) >= 10 ** t.precision:
            raise CodegenError(f"decimal literal does not fit {t}")
        if t.is_wide_decimal:
            return CValue(c_int128(v), "0", t)
        if k in (Kind.INT32, Kind.DATE) and not -(2**31) <= v < 2**31:
            raise CodegenError(f"{t} literal out of range")
        return CValue(c_int(v), "0", t)
    if k is Kind.FLOAT64:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise CodegenError(f"float64 literal holds {type(v).__name__}")
        return CValue(c_double(float(v)), "0", t)
    if k is Kind.STRING:
        if not isinstance(v, str):
            raise CodegenError(f"string literal holds {type(v).__name__}")
        return CValue(c.str_literal(utf8(v, "string literal")), "0", t)
    raise CodegenError(f"no literal of type {t}")


# -------------------------------------------------------------------- unary


@handles(Unary)
def _unary(c: ExprCompiler, e: Unary) -> CValue:
    a = c.compile(e.arg)
    t = e.type
    if a.always_null:
        c.discard(a)
        return c.null_of(t)
    if e.op == "not":
        if a.type.kind is not Kind.BOOLEAN:
            raise CodegenError(f"NOT of {a.type}")
        return c.body.temp(BOOLEAN, f"!{a.value}", a.null, const=True)
    if e.op != "neg":
        raise CodegenError(f"unknown unary operator {e.op!r}")
    if t.kind is Kind.FLOAT64:
        return c.body.temp(t, f"-{a.value}", a.null, const=True)
    if t.kind is Kind.DECIMAL:
        return c.coerce(c.body.temp(a.type, f"-{a.value}", a.null, const=True), t)
    if t.is_integer:
        out = c.body.temp(t, None, a.null)
        with c.unless_null(a.null):
            c.fail("integer overflow in negation", f"__builtin_sub_overflow((int64_t)0, {a.value}, &{out.value})")
            c.check_fits(out.value, t)
        return out
    raise CodegenError(f"negation of {t}")


# -------------------------------------------------------------------- binary


@handles(Binary)
def _binary(c: ExprCompiler, e: Binary) -> CValue:
    if e.op in LOGICAL_OPS:
        return _logical(c, e)
    if e.op in COMPARISON_OPS:
        return _comparison(c, e)
    if e.op in ARITHMETIC_OPS:
        return arithmetic(c, e)
    raise CodegenError(f"unknown binary operator {e.op!r}")


def _logical(c: ExprCompiler, e: Binary) -> CValue:
    """Three-valued AND/OR with short-circuit: the right side runs only when the left side does
    not decide (FALSE for AND, TRUE for OR)."""
    is_and = e.op == "and"
    decides, other_decides = (is_false, is_false) if is_and else (is_true, is_true)
    decided_value = "0" if is_and else "1"
    a = c.compile(e.left)
    r = c.body.result(BOOLEAN)
    cond_a = decides(a)
    with c.body.if_else(cond_a) as otherwise:
        c.body.line(f"{r.value} = {decided_value};")
        otherwise()
        with c.branch():
            b = c.compile(e.right)
            with c.body.if_else(other_decides(b)) as otherwise_b:
                c.body.line(f"{r.value} = {decided_value};")
                otherwise_b()
                # neither side decides: each is the neutral value or NULL
                null = or_nulls(a.null, b.null)
                if null != "0":
                    c.body.line(f"{r.null} = {null};")
                if is_and:
                    c.body.line(f"{r.value} = {'!' + r.null if null != '0' else '1'};")
    return r


def compare_condition(op: str, a: CValue, b: CValue) -> str:
    """C condition `a op b` for non-NULL operands of the same type (decimals of any scales,
    compared exactly; float64 with NaN equal to itself and greater than every other value, as
    DuckDB and Spark do)."""
    cop = {"=": "==", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}.get(op)
    if cop is None:
        raise CodegenError(f"unknown comparison {op!r}")
    ka, kb = a.type.kind, b.type.kind
    x, y = a.value, b.value
    if ka is Kind.STRING and kb is Kind.STRING:
        return f"(jg_strcmp({x}, {y}) {cop} 0)"
    if ka is Kind.DECIMAL and kb is Kind.DECIMAL:
        sa, sb = a.type.scale, b.type.scale
        if (a.type.is_wide_decimal or b.type.is_wide_decimal) and sa != sb:
            # rescaling a 38-digit value may not fit 128 bits: the runtime compares exactly
            return f"(jg_dec128_cmp({x}, {sa}, {y}, {sb}) {cop} 0)"
        if sa < sb:
            x = f"(__int128){x} * {c_int(10 ** (sb - sa))}"
            y = f"(__int128){y}"
        elif sb < sa:
            y = f"(__int128){y} * {c_int(10 ** (sa - sb))}"
            x = f"(__int128){x}"
        return f"({x} {cop} {y})"
    if ka is Kind.FLOAT64 and kb is Kind.FLOAT64:
        return {
            "==": f"({x} == {y} || ({x} != {x} && {y} != {y}))",
            "!=": f"!({x} == {y} || ({x} != {x} && {y} != {y}))",
            "<": f"({x} < {y} || ({x} == {x} && {y} != {y}))",
            "<=": f"({x} <= {y} || {y} != {y})",
            ">": f"({y} < {x} || ({y} == {y} && {x} != {x}))",
            ">=": f"({x} >= {y} || {x} != {x})",
        }[cop]
    same = ka == kb or (a.type.is_integer and b.type.is_integer)
    if not same or ka is Kind.FLOAT64 or kb is Kind.FLOAT64:
        raise CodegenError(f"comparison of {a.type} with {b.type} (the binder must cast)")
    return f"({x} {cop} {y})"


def _comparison(c: ExprCompiler, e: Binary) -> CValue:
    a = c.compile(e.left)
    b = c.compile(e.right)
    null = or_nulls(a.null, b.null)
    if null == "1":
        c.discard(a, b)
        return c.null_of(BOOLEAN)
    cond = compare_condition(e.op, a, b)
    if a.type.kind is Kind.STRING and null != "0":
        cond = f"!{null} && {cond}"  # never hand a NULL's bytes to a helper
    return c.body.temp(BOOLEAN, cond, null, const=True)


# -------------------------------------------------------------------- IS NULL, IN, LIKE


@handles(IsNull)
def _is_null(c: ExprCompiler, e: IsNull) -> CValue:
    a = c.compile(e.arg)
    c.discard(a)
    if a.null in ("0", "1"):
        truth = (a.null == "1") != e.negated
        return CValue("1" if truth else "0", "0", BOOLEAN)
    return c.body.temp(BOOLEAN, f"!{a.null}" if e.negated else a.null, "0", const=True)


@handles(InList)
def _in_list(c: ExprCompiler, e: InList) -> CValue:
    """`x IN (items)`: TRUE at the first match (later non-constant items are not evaluated),
    else NULL when x or any item is NULL, else FALSE. NOT IN negates (NULL stays NULL).
    At least `inset.SET_MIN` constants are searched in one sorted array first (inset.py)."""
    x = c.compile(e.arg)
    r = c.body.result(BOOLEAN)
    if x.always_null:
        c.discard(x)
        c.body.line(f"{r.null} = 1;")
        return r
    constants = [i for i in e.items if isinstance(i, Literal) and i.value is not None]
    # the sorted arrays hold int64 values; a wide decimal probe compares item by item instead
    searched = use_set(constants) and not x.type.is_wide_decimal
    # with a lookup, every literal is settled by it or, for NULL, by one line; the rest one by one
    others = [i for i in e.items if not (searched and isinstance(i, Literal))]
    found, saw_null = r.value, r.null  # r.null means "saw a NULL item" until the end
    with ExitStack() as stack:
        if not x.never_null:
            otherwise = stack.enter_context(c.body.if_else(x.null))
            c.body.line(f"{r.null} = 1;")
            otherwise()
            stack.enter_context(c.branch())  # items run only for a non-NULL x
        if searched:
            emit_lookup(c, x, constants, found)
            if len(constants) < len(e.items) - len(others):
                c.body.line(f"{saw_null} = 1;")
        for i, item in enumerate(others):
            if _is_leaf(item) or (i == 0 and not searched):
                _in_item(c, x, item, found, saw_null)
                continue
            # evaluated only while nothing matched; one flat block per item, never nested, so
            # a long list does not nest the C code as deep as it is long
            with c.body.block(f"if (!{found})"), c.branch():
                _in_item(c, x, item, found, saw_null)
    c.body.line(f"if ({found}) {saw_null} = 0;")
    if e.negated:
        return c.body.temp(BOOLEAN, f"!{r.value}", r.null, const=True)
    return r


def _in_item(c: ExprCompiler, x: CValue, item: Expr, found: str, saw_null: str) -> None:
    v = c.compile(item)
    if v.always_null:
        c.discard(v)
        c.body.line(f"{saw_null} = 1;")
        return
    cond = compare_condition("=", x, v)
    if v.never_null:
        c.body.line(f"if (!{found} && {cond}) {found} = 1;")
    else:
        c.body.line(f"if ({v.null}) {saw_null} = 1; else if (!{found} && {cond}) {found} = 1;")


@handles(Like)
def _like(c: ExprCompiler, e: Like) -> CValue:
    a = c.compile(e.arg)
    if a.type.kind is not Kind.STRING:
        raise CodegenError(f"LIKE on {a.type}")
    if a.always_null:
        c.discard(a)
        return c.null_of(BOOLEAN)
    pat = utf8(e.pattern, "LIKE pattern")
    call = f"jg_like({a.value}, {c.pool.add(pat)}, {len(pat)})"
    if e.negated:
        call = "!" + call
    cond = call if a.never_null else f"!{a.null} && {call}"
    return c.body.temp(BOOLEAN, cond, a.null, const=True)


# -------------------------------------------------------------------- CASE


@handles(Case)
def _case(c: ExprCompiler, e: Case) -> CValue:
    """Conditions in order; only the taken branch's value is evaluated; no ELSE means NULL.
    Each WHEN nests in the ELSE of the one before, built in a loop (no recursion on the number
    of branches)."""
    r = c.body.result(e.type, null_init="1")
    with ExitStack() as stack:
        for i, (cond, value) in enumerate(e.whens):
            k = c.compile(cond)
            if k.type.kind is not Kind.BOOLEAN:
                raise CodegenError("CASE condition is not boolean")
            otherwise = stack.enter_context(c.body.if_else(is_true(k)))
            with c.branch():
                c.body.assign(r, c.coerce(c.compile(value), e.type))
            if i + 1 < len(e.whens) or e.else_ is not None:
                otherwise()
                stack.enter_context(c.branch())
        if e.else_ is not None:
            c.body.assign(r, c.coerce(c.compile(e.else_), e.type))
    return r


# -------------------------------------------------------------------- the rest registers itself

from . import casts as _casts  # noqa: E402,F401  (registers Cast)
from . import functions as _functions  # noqa: E402,F401  (registers Func)
from .arith import arithmetic  # noqa: E402
from .inset import emit_lookup, use_set  # noqa: E402
