"""`x IN (many constants)`: one sorted array per list, searched by binary search.

A list compared item by item becomes one `if` per item, and C compilers are superlinear in long
runs of branches (gcc -O2 spent 24 s on 10,000 of them). Here the constants become a static
const array in the function (sorted and deduplicated at generation time) and the lookup is one
small loop, so an IN list of 100,000 values compiles in about a second and costs log2(n)
comparisons per row. The order used for sorting is the one the comparison uses at run time:

- integers, dates, booleans and decimals are int64 values; decimal constants are brought to the
  probe's scale exactly, and a constant with more significant fraction digits than the probe's
  scale, or too large for its precision, can never be equal and is left out;
- float64 values compare as `compare_condition` does: NaN equals only NaN (kept as a flag, not in
  the array), -0.0 equals 0.0 (one entry);
- strings compare as `jg_strcmp` (bytes, then length), which is the order of Python's `bytes`;
  their bytes are one literal of the pool (the only door for request text) with an offset table.

Only lists with at least `SET_MIN` constants take this path (fewer are compared one by one, as
fast, and the generated code of small lists stays as it was). NULL constants and non-constant
items keep their meaning: expr.py's `_in_list` handles them around the lookup.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ....contract.types import Kind
from ....dataflow.expr import Literal
from .csyntax import CodegenError, CValue, c_double, c_int, utf8

if TYPE_CHECKING:
    from .expr import ExprCompiler

SET_MIN = 16
_PER_LINE = 8  # array values per generated line
_DECIMAL_LIMIT = 10**18  # every decimal value is below 10^precision <= 10^18


def use_set(constants: Sequence[Literal]) -> bool:
    return len(constants) >= SET_MIN


def emit_lookup(c: ExprCompiler, x: CValue, constants: Sequence[Literal], found: str) -> None:
    """Set `found` to 1 when the non-NULL probe `x` equals one of `constants` (non-NULL literals
    of its type, decimals of any scale)."""
    kind = x.type.kind
    if kind is Kind.STRING:
        _strings(c, x, [utf8(_value(v, str), "string literal") for v in constants], found)
    elif kind is Kind.FLOAT64:
        _floats(c, x, [float(_value(v, (int, float))) for v in constants], found)
    elif kind is Kind.DECIMAL:
        scale = x.type.scale
        values = (_at_scale(_value(v, int), v.type.scale, scale) for v in constants)
        _integers(c, x, [v for v in values if v is not None], found)
    elif kind in (Kind.INT32, Kind.INT64, Kind.DATE, Kind.BOOLEAN):
        _integers(c, x, [int(_value(v, (int, bool))) for v in constants], found)
    else:
        raise CodegenError(f"IN list of {x.type}")


def _value(lit: Literal, types: type | tuple[type, ...]) -> object:
    if lit.value is None or not isinstance(lit.value, types):
        raise CodegenError(f"IN list constant {lit.value!r} of type {lit.type}")
    return lit.value


def _at_scale(unscaled: int, scale: int, to: int) -> int | None:
    """A decimal's unscaled value at scale `to`, or None when no decimal of that scale (and at most
    18 digits) equals it."""
    if scale <= to:
        value = unscaled * 10 ** (to - scale)
    else:
        value, rest = divmod(unscaled, 10 ** (scale - to))
        if rest:
            return None
    return value if abs(value) < _DECIMAL_LIMIT else None


def _array(c: ExprCompiler, ctype: str, items: list[str]) -> str:
    """A static const array of the function, hoisted to its top; returns its name."""
    name = f"set{c.body.fresh()}"
    c.body.hoist(f"static const {ctype} {name}[{len(items)}] = {{")
    for i in range(0, len(items), _PER_LINE):
        c.body.hoist("  " + ", ".join(items[i:i + _PER_LINE]) + ",")
    c.body.hoist("};")
    return name


def _search(c: ExprCompiler, size: int, less: Callable[[str], str], equal: Callable[[str], str],
            found: str) -> None:
    """Binary search for the first entry not below the probe; `less(i)` and `equal(i)` are C
    conditions comparing the entry at index `i` with it."""
    k = c.body.fresh()
    lo, hi, mid = f"lo{k}", f"hi{k}", f"mid{k}"
    with c.body.block(""):
        c.body.line(f"uint32_t {lo} = 0, {hi} = {size}u;")
        with c.body.block(f"while ({lo} < {hi})"):
            c.body.line(f"const uint32_t {mid} = {lo} + ({hi} - {lo}) / 2u;")
            c.body.line(f"if ({less(mid)}) {lo} = {mid} + 1u; else {hi} = {mid};")
        c.body.line(f"if ({lo} < {size}u && {equal(lo)}) {found} = 1;")


def _integers(c: ExprCompiler, x: CValue, values: list[int], found: str) -> None:
    values = sorted(set(values))
    if not values:  # e.g. decimal constants no value of the probe's type can equal
        return
    name = _array(c, "int64_t", [c_int(v) for v in values])
    _search(c, len(values), lambda i: f"{name}[{i}] < {x.value}", lambda i: f"{name}[{i}] == {x.value}", found)


def _floats(c: ExprCompiler, x: CValue, values: list[float], found: str) -> None:
    finite = sorted({v for v in values if v == v})  # a set: -0.0 and 0.0 are one entry
    if finite:
        name = _array(c, "double", [c_double(v) for v in finite])
        # a NaN probe is below nothing and equal to nothing: the search ends without a match
        _search(c, len(finite), lambda i: f"{name}[{i}] < {x.value}", lambda i: f"{name}[{i}] == {x.value}", found)
    if any(v != v for v in values):
        c.body.line(f"if ({x.value} != {x.value}) {found} = 1;")


def _strings(c: ExprCompiler, x: CValue, values: list[bytes], found: str) -> None:
    values = sorted(set(values))  # bytes order: jg_strcmp's
    offsets = [0]
    for v in values:
        offsets.append(offsets[-1] + len(v))
    blob = c.pool.add(b"".join(values))
    table = _array(c, "uint32_t", [f"{o}u" for o in offsets])
    def entry(i: str) -> str:
        return f"((jg_str){{{blob} + {table}[{i}], {table}[{i} + 1u] - {table}[{i}]}})"

    _search(c, len(values), lambda i: f"jg_strcmp({entry(i)}, {x.value}) < 0",
            lambda i: f"jg_strcmp({entry(i)}, {x.value}) == 0", found)
