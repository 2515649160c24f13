"""The C building blocks every generated file shares: values, byte literals, function bodies.

Security rule (design: "text from a request never reaches a compiler"): the only way request
text (string literals, LIKE patterns, the column names a scan looks up in its files) enters
generated source is `c_bytes`, which writes every byte as a `\\xNN` escape, so no quote,
backslash, newline, `*/` or `??/` trigraph can ever appear. Identifiers are generated (`t3`, `n3`,
`lit_2`, `row[1]`), never derived from names. Error messages, which quote operation and column
names, are not in the source at all: the code refers to them by number (messages.py), so that
requests differing only in names share one source and one compiled binary.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from ....contract.types import DataType, Kind
from .messages import MessageTable


class CodegenError(Exception):
    """A typed tree or plan the generators cannot turn into C (a bug upstream, or a construct
    not implemented yet). Raised loudly, never papered over."""


# C type of a value of each kind while an expression is evaluated. Every integer-like kind is
# held as int64_t (int32 and date values are range-checked where they are produced).
_C_TYPE = {
    Kind.BOOLEAN: "int",
    Kind.INT32: "int64_t",
    Kind.INT64: "int64_t",
    Kind.DATE: "int64_t",
    Kind.DECIMAL: "int64_t",
    Kind.FLOAT64: "double",
    Kind.STRING: "jg_str",
}

_ZERO = {
    Kind.BOOLEAN: "0",
    Kind.INT32: "0",
    Kind.INT64: "0",
    Kind.DATE: "0",
    Kind.DECIMAL: "0",
    Kind.FLOAT64: "0.0",
    Kind.STRING: "Q_EMPTY_STR",
}

# jg_val union member that holds each kind (jg.h)
_ROW_MEMBER = {
    Kind.BOOLEAN: "i",
    Kind.INT32: "i",
    Kind.INT64: "i",
    Kind.DATE: "i",
    Kind.DECIMAL: "i",
    Kind.FLOAT64: "f",
    Kind.STRING: "s",
}

# enum jg_type (jg.h)
_JG_TYPE = {
    Kind.BOOLEAN: "JG_BOOLEAN",
    Kind.INT32: "JG_INT32",
    Kind.INT64: "JG_INT64",
    Kind.FLOAT64: "JG_FLOAT64",
    Kind.DECIMAL: "JG_DECIMAL",
    Kind.STRING: "JG_STRING",
    Kind.DATE: "JG_DATE",
}


# Wide decimals (p > 18) are held as __int128 while evaluated, in jg_val's member `w` (jg.h) and
# as JG_DECIMAL128 in column tables; narrow ones keep the v1 int64 representation above.
WIDE_C_TYPE = "__int128"


def c_type(t: DataType) -> str:
    return WIDE_C_TYPE if t.is_wide_decimal else _C_TYPE[t.kind]


def c_zero(t: DataType) -> str:
    return _ZERO[t.kind]


def row_member(t: DataType) -> str:
    return "w" if t.is_wide_decimal else _ROW_MEMBER[t.kind]


def jg_type(t: DataType) -> str:
    return "JG_DECIMAL128" if t.is_wide_decimal else _JG_TYPE[t.kind]


def same_representation(a: DataType, b: DataType) -> bool:
    """True when a value of type `a` can be used as a value of type `b` without any C code:
    int32 in int64, and decimals of the same scale (precision checks happen at production), a
    narrow one also where a wide one is expected (C widens int64 to __int128 exactly), never a
    wide one where a narrow one is expected (that needs a checked narrowing)."""
    if a == b:
        return True
    if a.is_integer and b.is_integer:
        return a.kind is Kind.INT32 or b.kind is Kind.INT64
    return (a.kind is Kind.DECIMAL and b.kind is Kind.DECIMAL and a.scale == b.scale
            and (b.is_wide_decimal or not a.is_wide_decimal))


@dataclass(frozen=True, slots=True)
class CValue:
    """An evaluated sub-expression: C expressions for its value and its null flag.

    Both are *atomic* C expressions (an identifier, a constant in parentheses when negative, or
    `row[k].v.i`), so they can be pasted into any larger expression. `null` is "0" when the value
    can never be NULL and "1" when it always is; generators fold those constants."""

    value: str
    null: str
    type: DataType

    @property
    def never_null(self) -> bool:
        return self.null == "0"

    @property
    def always_null(self) -> bool:
        return self.null == "1"


# ------------------------------------------------------------------ constants


def c_int(v: int) -> str:
    """An int64 constant; negative ones parenthesised (so `a - (-1)` never becomes `a--1`)."""
    if not -(2**63) <= v < 2**63:
        raise CodegenError(f"integer constant {v} does not fit int64")
    if v == -(2**63):
        return "INT64_MIN"
    if v < 0:
        return f"(-INT64_C({-v}))"
    return f"INT64_C({v})"


def c_int128(v: int) -> str:
    """A 128-bit constant (C has no 128-bit literals): int64 ones cast, larger ones built from
    base-10^18 parts, which the compiler folds."""
    if not -(2**127) < v < 2**127:
        raise CodegenError(f"integer constant {v} does not fit 128 bits")
    if -(2**63) <= v < 2**63:
        return f"((__int128){c_int(v)})"
    sign, m = ("-", -v) if v < 0 else ("", v)
    e18 = 10**18
    hi, mid, lo = m // e18 // e18, m // e18 % e18, m % e18
    return f"({sign}(((__int128)INT64_C({hi}) * INT64_C({e18}) + INT64_C({mid})) * INT64_C({e18}) + INT64_C({lo})))"


def c_double(v: float) -> str:
    """An exact double constant: the shortest decimal that reads back as `v` (Python's repr; C
    compilers round decimal constants correctly), hexadecimal for subnormals."""
    if v != v:
        return "(__builtin_nan(\"\"))"
    if v in (float("inf"), float("-inf")):
        return "(__builtin_inf())" if v > 0 else "(-__builtin_inf())"
    text = repr(float(v))
    if 0 < abs(v) < 2.2250738585072014e-308:
        text = float(v).hex()
    elif not any(ch in text for ch in ".e"):
        text += ".0"
    return f"({text})" if text.startswith("-") else text


def c_bytes(data: bytes, per_line: int = 16, indent: str = "  ") -> str:
    """A C string literal holding exactly `data`, every byte as a \\xNN escape. Long data is split
    into adjacent literals on several lines. This is the only door for request text."""
    if not data:
        return '""'
    chunks = ["\"" + "".join(f"\\x{b:02x}" for b in data[i:i + per_line]) + "\""
              for i in range(0, len(data), per_line)]
    return f"\n{indent}".join(chunks)


def utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise CodegenError(f"{what} is not valid Unicode text (lone surrogate?)") from e


# ------------------------------------------------------------------ null-flag algebra


def or_nulls(*flags: str) -> str:
    """C expression that is 1 when any flag is; constants folded."""
    out: list[str] = []
    for f in flags:
        if f == "1":
            return "1"
        if f != "0" and f not in out:
            out.append(f)
    if not out:
        return "0"
    return out[0] if len(out) == 1 else "(" + " | ".join(out) + ")"


def is_true(v: CValue) -> str:
    """C condition: the boolean `v` is TRUE (not NULL and not 0)."""
    if v.always_null:
        return "0"
    if v.never_null:
        return v.value
    return f"(!{v.null} && {v.value})"


def is_false(v: CValue) -> str:
    """C condition: the boolean `v` is FALSE (not NULL and 0)."""
    if v.always_null:
        return "0"
    if v.never_null:
        return f"!{v.value}"
    return f"(!{v.null} && !{v.value})"


def not_(cond: str) -> str:
    if cond == "0":
        return "1"
    if cond == "1":
        return "0"
    return f"!{cond}" if cond.startswith("(") or cond.isidentifier() else f"!({cond})"


# ------------------------------------------------------------------ literal pool


class LiteralPool:
    """Byte strings a generated file needs, each emitted once from `c_bytes` and referenced by a
    generated name (`lit_K`, used with an explicit length): string literals and LIKE patterns,
    which are query data. The file's error messages, which name request operations and columns,
    go to `messages` instead: a table the process receives at run time (messages.py)."""

    def __init__(self) -> None:
        self._lits: dict[bytes, int] = {}
        self.messages = MessageTable()

    def add(self, data: bytes) -> str:
        return f"lit_{self._lits.setdefault(data, len(self._lits))}"

    def declarations(self) -> list[dict]:
        return [{"name": f"lit_{k}", "bytes": c_bytes(d, indent="    "), "length": len(d)}
                for d, k in self._lits.items()]


# ------------------------------------------------------------------ function bodies


class FunctionBody:
    """Statements of one generated C function, with fresh SSA-style temporaries.

    `decls` are declarations hoisted to the top of the function (memoised values that several
    blocks share); `lines` is the body. `error_return` is what a failing row does after
    jg_fail: other templates (aggregation, join) may return differently. `messages` is the file's
    message table (LiteralPool.messages); a body without one cannot report data errors."""

    def __init__(self, ctx: str = "ctx", error_return: str = "return JG_ROW_ERROR;", depth: int = 1,
                 messages: MessageTable | None = None) -> None:
        self.ctx = ctx
        self.messages = messages
        self.error_return = error_return
        self.decls: list[str] = []
        self.lines: list[str] = []
        self._depth = depth
        self._base_depth = depth
        self._next = 0

    # -- names
    def fresh(self) -> int:
        k = self._next
        self._next += 1
        return k

    # -- emission
    def line(self, text: str) -> None:
        self.lines.append("  " * self._depth + text)

    def comment(self, text: str) -> None:
        """A comment of our own words (never request text)."""
        if "*/" in text or "\n" in text or "??" in text or not text.isascii():
            raise CodegenError("comment text must be plain ASCII without */, ?? or newlines")
        self.line(f"/* {text} */")

    def hoist(self, text: str) -> None:
        self.decls.append("  " * self._base_depth + text)

    @staticmethod
    def cond(text: str) -> str:
        """`(text)` unless `text` is already one parenthesised whole."""
        if text.startswith("(") and text.endswith(")"):
            depth = 0
            for i, ch in enumerate(text):
                depth += ch == "("
                depth -= ch == ")"
                if depth == 0 and i < len(text) - 1:
                    break
            else:
                return text
        return f"({text})"

    @contextmanager
    def block(self, header: str):
        """`header {` ... `}`; `header` is e.g. `if (x)` or `` for a bare block."""
        self.line(f"{header} {{" if header else "{")
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self.line("}")

    @contextmanager
    def if_else(self, cond: str):
        """`if (cond) { A } else { B }`: yields a callable that switches from A to B."""
        self.line(f"if {self.cond(cond)} {{")
        self._depth += 1

        def otherwise() -> None:
            self.lines.append("  " * (self._depth - 1) + "} else {")

        try:
            yield otherwise
        finally:
            self._depth -= 1
            self.line("}")

    def message(self, text: str) -> str:
        """C expression of the message `text`: its number in the message table, looked up at run
        time, never the text (which may name request operations and columns)."""
        if self.messages is None:
            raise CodegenError("a data error in a function body that has no message table")
        return f"jg_message({self.ctx}, {self.messages.add(text)}u)"

    def fail(self, message: str, cond: str | None = None, note: str | None = None) -> None:
        """Report a data error and leave the row. `message` goes to the message table (it may
        name request columns); `note` is a comment of our own words for readers of the
        generated file."""
        if cond == "0":
            return  # never fails: no message table entry either
        stmt = f"{{ jg_fail({self.ctx}, {self.message(message)}); {self.error_return} }}"
        if note:
            stmt += self._note(note)
        if cond is None:
            self.line(stmt)
        else:
            self.line(f"if {self.cond(cond)} {stmt}")

    def fail_text(self, message: str, text: str, cond: str, note: str | None = None) -> None:
        """Report a data error quoting a string value of the row (invalid casts)."""
        stmt = (f"if {self.cond(cond)} {{ jg_fail_text({self.ctx}, {self.message(message)}, {text}); "
                f"{self.error_return} }}")
        self.line(stmt + (self._note(note) if note else ""))

    @staticmethod
    def _note(text: str) -> str:
        if "*/" in text or "\n" in text or "??" in text or not text.isascii():
            raise CodegenError("a note must be plain ASCII text of our own")
        return f" /* {text} */"

    # -- temporaries
    def temp(self, t: DataType, value: str | None = None, null: str | None = None,
             const: bool = False) -> CValue:
        """Declare fresh `tK` (value) and, unless `null` is a constant, `nK` (null flag).

        `value=None` zero-initialises the value (to be assigned later); `null=None` declares a
        null flag initialised to 0 to be assigned later."""
        k = self.fresh()
        q = "const " if const else ""
        self.line(f"{q}{c_type(t)} t{k} = {value if value is not None else c_zero(t)};")
        if null in ("0", "1"):
            return CValue(f"t{k}", null, t)
        if null is not None and (null.isidentifier() or null.startswith("row[")):
            return CValue(f"t{k}", null, t)  # share the operand's flag: no new temporary
        self.line(f"{q}int n{k} = {null if null is not None else '0'};")
        return CValue(f"t{k}", f"n{k}", t)

    def result(self, t: DataType, nullable: bool = True, null_init: str = "0") -> CValue:
        """Mutable result temporaries for a value computed in branches (CASE, AND, coalesce)."""
        k = self.fresh()
        self.line(f"{c_type(t)} t{k} = {c_zero(t)};")
        if not nullable:
            return CValue(f"t{k}", "0", t)
        self.line(f"int n{k} = {null_init};")
        return CValue(f"t{k}", f"n{k}", t)

    def assign(self, dst: CValue, src: CValue) -> None:
        if dst.value != src.value:
            self.line(f"{dst.value} = {src.value};")
        if dst.null not in ("0", "1") and dst.null != src.null:
            self.line(f"{dst.null} = {src.null};")

    def text(self) -> str:
        return "\n".join(self.decls + self.lines)
