"""Expression text → unbound expression tree (contract §1, "Expressions").

sqlglot tokenizes and parses the text; one small function per construct then converts its syntax
tree into `jumpgate.dataflow.expr` nodes. Anything not in the contract's expression list is
rejected with a `RequestError` naming the construct, so sqlglot's much larger SQL surface never
leaks through. sqlglot's own exceptions never escape this module.

What the parser already decides (the binder in `typecheck` does the rest):
- literals are typed here, because their type does not depend on context (contract §1): an integer
  is int32 if it fits, else int64, else float64; a number with a point and no exponent is
  decimal(p,s) with p its significant digits (float64 beyond 18 digits); an exponent gives float64;
  `DATE 'YYYY-MM-DD'` (and `CAST('…' AS DATE)`) is a date literal, validated here. `NULL` stays
  untyped (`type=None`) until the binder gives it the type of its context;
- in strings `''` is the only escape; a backslash is an ordinary character. Double-quoted names
  (`""` escapes) may contain anything but NUL; unquoted names are matched to the schema by the
  binder (exactly, else a unique case-insensitive match);
- a minus sign in front of a numeric literal is folded into it, so `-2147483648` is an int32;
- `BETWEEN` is desugared to `x >= lo AND x <= hi`, the simple `CASE x WHEN v` to `CASE WHEN x = v`,
  `!=` to `<>`, `substring` to `substr`;
- comments, `;`, `::` casts, `==`, qualified names (`t.a`) and functions other than the contract's
  (including sqlglot's aliases such as `nvl` or `char_length`) are rejected;
- the size limits of `RequestLimits` (dataflow/limits.py) are checked before sqlglot parses: the
  length on the text; the nesting, every IN list's length and every literal's size on the tokens
  (`_check_sizes`). sqlglot's parser is recursive descent, so the nesting is bounded before it
  runs; then the parsed tree's depth is checked exactly, without recursion, before our own
  (recursive) conversion, binding and code generation see it.

Parsed trees are remembered by text (`_PARSED`): clients send the same expressions again and
again (a scan's filter in every run of a report, a Spark query's pushed-down predicates), the
trees are immutable, and sqlglot's parse was the largest part of parsing a Spark job's request.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import expressions as sg
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError, TokenError
from sqlglot.tokens import Token, TokenType

from ..contract import types as T
from ..contract.errors import RequestError
from .expr import Binary, Case, Cast, Column, Expr, Func, InList, IsNull, Like, Literal, Unary
from .jsonshape import clip, expression_text
from .limits import DEFAULT_LIMITS, RequestLimits, ensure_stack_for, too_deep, too_large
from .literals import negate_literal, number_literal, parse_date
from .memo import BoundedMemo

_DIALECT = Dialect.get_or_raise(None)  # sqlglot's generic SQL: '' escapes, "quoted" identifiers

# Words that may stand in front of "(": our functions, CAST, and keywords that take a parenthesised
# operand. Anything else followed by "(" is a function call we do not support.
_FUNCTION_WORDS = {"abs", "coalesce", "substr", "substring", "lower", "upper", "length", "year",
                   "month", "day", "cast"}
_KEYWORDS_BEFORE_PAREN = {"not", "in", "and", "or", "when", "then", "else", "case", "between",
                          "like", "is", "from", "for"}
_WORD = re.compile(r"[^\W\d]\w*")


class _Unsupported(Exception):
    """Raised inside the converter; turned into a RequestError with path and text."""

    def __init__(self, message: str, node: sg.Expression | None = None) -> None:
        super().__init__(message)
        self.node = node


def parse_expression(text: str, path: str, limits: RequestLimits = DEFAULT_LIMITS) -> Expr:
    """Parse one expression of a request into an unbound tree (types only on literals).

    Raises `RequestError` (400) at `path` for what the contract does not allow, and
    `RequestTooLarge` (413) for an expression beyond `limits`."""
    text = expression_text(text, path, python_type=True)
    if not text.strip():
        raise RequestError("empty expression", path, text)
    if len(text) > limits.max_expression_chars:
        raise too_large("the expression", len(text), "characters", "max_expression_chars",
                        limits.max_expression_chars, path)
    if "\x00" in text:
        raise RequestError("expression contains a NUL character", path, clip(text))
    memo_key = (text, limits) if len(text) <= _MEMO_MAX_CHARS else None
    known = _PARSED.get(memo_key) if memo_key is not None else None
    if known is not None:
        return known
    _check_long_lists(text, path, limits)
    try:
        tokens = _tokenize(text)
        _check_tokens(tokens, text)
        _check_sizes(tokens, text, path, limits)
        ensure_stack_for(limits.max_expression_depth)  # what the bounded nesting needs, no more
        tree = _parse_tokens(tokens, text)
        _check_depth(tree, path, limits.max_expression_depth)
        parsed = _convert(tree)
        return _PARSED.put(memo_key, parsed) if memo_key is not None else parsed
    except _Unsupported as e:
        snippet = _snippet(e.node) if e.node is not None else text
        raise RequestError(str(e), path, clip(snippet)) from None
    except RecursionError:  # cannot happen after _check_sizes; a last line of defence
        raise too_deep("the expression is nested too deeply for the parser", None,
                       limits.max_expression_depth, path) from None


# The trees of the last texts parsed without error, by (text, limits): the limits are part of the
# key, as a text within one request's limits may not be within another's. Only short texts are
# kept (_MEMO_MAX_CHARS), so the memo stays a few megabytes; errors are not kept (they name the
# request's path).
_MEMO_MAX_CHARS = 4096
_PARSED: BoundedMemo[tuple[str, RequestLimits], Expr] = BoundedMemo(4096)


# --- tokens and syntax -------------------------------------------------------------------------

_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")
_LIST_MARKS = re.compile(r"[(),]")


def _check_long_lists(text: str, path: str, limits: RequestLimits) -> None:
    """A list longer than `max_in_list`, refused before the tokenizer spends a second on it (a
    100,000-value IN list is 200,000 tokens). Only an expression with that many commas can hold
    one; then parentheses and commas outside quotes are counted per level, at C speed but for the
    loop over them. Any parenthesised list counts (no function takes 50,000 arguments either);
    `_check_sizes` checks IN lists exactly on the tokens of everything shorter."""
    if text.count(",") < limits.max_in_list:
        return
    blank = _QUOTED.sub(lambda m: m.group()[0] + " " * (len(m.group()) - 2) + m.group()[-1], text)
    counts: list[list[int]] = [[0, 0]]  # per open parenthesis: [its offset, commas seen]
    for m in _LIST_MARKS.finditer(blank):
        mark = m.group()
        if mark == "(":
            counts.append([m.start(), 0])
        elif mark == ")":
            if len(counts) > 1:
                counts.pop()
        else:
            counts[-1][1] += 1
            if counts[-1][1] + 1 > limits.max_in_list and len(counts) > 1:
                start = counts[-1][0]
                kind = "IN list" if re.search(r"\bIN\s*$", blank[max(0, start - 16):start], re.IGNORECASE) else "list"
                raise too_large(f"the {kind} at {_position(text, start)}", _items_of(blank, start), "values",
                                "max_in_list", limits.max_in_list, path)


def _items_of(blank: str, start: int) -> int:
    """The values of the list opening at `start` (for the message): its commas at its own level."""
    depth, commas = 0, 0
    for m in _LIST_MARKS.finditer(blank, start):
        mark = m.group()
        depth += mark == "("
        depth -= mark == ")"
        if depth == 0:
            break
        commas += mark == "," and depth == 1
    return commas + 1

def _tokenize(text: str) -> list[Token]:
    try:
        return _DIALECT.tokenize(text)
    except TokenError as e:
        detail = str(e).removeprefix("Error tokenizing ")
        raise _Unsupported(f"cannot read expression (unterminated string or quoted name?) near {detail}") from None
    except SqlglotError as e:  # pragma: no cover - defensive: any other sqlglot failure
        raise _Unsupported(f"cannot read expression: {_first_line(str(e))}") from None


def _position(text: str, start: int) -> str:
    line = text.count("\n", 0, start) + 1
    col = start - (text.rfind("\n", 0, start) + 1) + 1
    return f"column {col}" if line == 1 else f"line {line}, column {col}"


def _check_tokens(tokens: list[Token], text: str) -> None:
    """Reject lexical constructs sqlglot accepts but the contract does not. (Positions are worked
    out only for an error: counting lines up to every token made long expressions quadratic.)"""
    for i, tok in enumerate(tokens):
        problem = _lexical_problem(tok)
        if problem:
            raise _Unsupported(problem.format(where=_position(text, tok.start)))
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if nxt is None or nxt.token_type is not TokenType.L_PAREN:
            continue
        prev = tokens[i - 1] if i else None
        word = tok.text.lower()
        is_name = tok.token_type is TokenType.IDENTIFIER or _WORD.fullmatch(tok.text) is not None
        if not is_name or word in _FUNCTION_WORDS or word in _KEYWORDS_BEFORE_PAREN:
            continue
        if prev is not None and prev.token_type is TokenType.ALIAS:  # CAST(x AS decimal(5,2))
            continue
        raise _Unsupported(f"unsupported function {tok.text!r} at {_position(text, tok.start)}; supported: "
                           "abs, coalesce, substr, lower, upper, length, year, month, day, CAST")


def _lexical_problem(tok: Token) -> str:
    """What is wrong with one token, with `{where}` for its position; "" when nothing is."""
    if tok.comments:
        return "comments are not allowed in expressions (near {where})"
    if tok.token_type is TokenType.SEMICOLON:
        return "expected a single expression, found ';' at {where}"
    if tok.token_type is TokenType.DCOLON:
        return "'::' casts are not supported, use CAST(e AS type) (at {where})"
    if tok.text == "==":
        return "'==' is not supported, use '=' (at {where})"
    return ""


# Nesting as sqlglot's parser recurses on it: parentheses (which also open function arguments and
# IN lists) and CASE ... END open a level until they close; a prefix operator opens one until its
# operand ends, at the latest at AND, OR, a comma, WHEN, THEN or ELSE of its own level (NOT's
# operand is a comparison, unary minus's a factor). Binary operators chain without recursing.
_CLOSERS = {TokenType.L_PAREN: TokenType.R_PAREN, TokenType.CASE: TokenType.END}
_PREFIX_OPERATORS = {TokenType.NOT, TokenType.DASH, TokenType.PLUS, TokenType.TILDE}
_OPERAND_BOUNDARIES = {TokenType.AND, TokenType.OR, TokenType.COMMA, TokenType.WHEN, TokenType.THEN,
                       TokenType.ELSE}
# tokens that end an operand: a minus or plus after them is binary (literals end one too)
_OPERAND_ENDS = {TokenType.NUMBER, TokenType.VAR, TokenType.IDENTIFIER, TokenType.NULL, TokenType.TRUE,
                 TokenType.FALSE, TokenType.STAR, TokenType.R_PAREN, TokenType.END}


def _is_literal(tok: Token) -> bool:
    return tok.token_type is TokenType.NUMBER or tok.token_type.name.endswith("STRING")


@dataclass(slots=True)
class _Level:
    """One open parenthesis or CASE while the tokens are scanned."""

    closer: TokenType | None  # None: the expression itself
    prefix: int = 0  # prefix operators whose operand is still open at this level
    betweens: int = 0  # BETWEENs whose AND is still to come (that AND ends no operand)
    in_list: Token | None = None  # the "(" of an IN list
    items: int = 1


def _check_sizes(tokens: list[Token], text: str, path: str, limits: RequestLimits) -> None:
    """Literal sizes, IN-list lengths and an upper bound of the nesting, from the tokens alone:
    sqlglot's recursive parser runs only on expressions within the limits."""
    levels, depth, deepest, prev = [_Level(None)], 0, 0, None
    still_open = {TokenType.R_PAREN: 0, TokenType.END: 0}  # levels waiting for each closer
    for tok in tokens:
        tt = tok.token_type
        if _is_literal(tok):
            _check_literal(tok, text, path, limits)
        if tt in _CLOSERS:
            opens_in = tt is TokenType.L_PAREN and prev is not None and prev.token_type is TokenType.IN
            levels.append(_Level(_CLOSERS[tt], in_list=tok if opens_in else None))
            still_open[_CLOSERS[tt]] += 1
            depth += 1
        elif tt in still_open and still_open[tt]:
            # close the innermost level this token closes, and any left open inside it (text that
            # does not balance is sqlglot's to report); each level is closed once: linear
            while True:
                level = levels.pop()
                still_open[level.closer] -= 1  # type: ignore[index]
                depth -= 1 + level.prefix
                _check_in_list(level, text, path, limits)
                if level.closer is tt:
                    break
        elif tt in _OPERAND_BOUNDARIES:
            top = levels[-1]
            if tt is TokenType.AND and top.betweens:
                top.betweens -= 1
            else:
                depth, top.prefix = depth - top.prefix, 0
            top.items += tt is TokenType.COMMA
        elif tt is TokenType.BETWEEN:
            levels[-1].betweens += 1
        elif tt in _PREFIX_OPERATORS and (prev is None or not (prev.token_type in _OPERAND_ENDS
                                                               or _is_literal(prev))):
            levels[-1].prefix += 1
            depth += 1
        deepest = max(deepest, depth)
        prev = tok
    for level in levels[1:]:
        _check_in_list(level, text, path, limits)
    if deepest > limits.max_expression_depth:
        raise too_deep(f"the expression nests {deepest:,} levels deep (parentheses, CASE, NOT, unary "
                       "minus)", deepest, limits.max_expression_depth, path)


def _check_literal(tok: Token, text: str, path: str, limits: RequestLimits) -> None:
    size = len(tok.text.encode("utf-8", errors="surrogatepass"))
    if size > limits.max_literal_bytes:
        what = "a number" if tok.token_type is TokenType.NUMBER else "a string literal"
        raise too_large(f"{what} at {_position(text, tok.start)}", size, "bytes", "max_literal_bytes",
                        limits.max_literal_bytes, path)


def _check_in_list(level: _Level, text: str, path: str, limits: RequestLimits) -> None:
    if level.in_list is not None and level.items > limits.max_in_list:
        raise too_large(f"the IN list at {_position(text, level.in_list.start)}", level.items, "values",
                        "max_in_list", limits.max_in_list, path)


def _parse_tokens(tokens: list[Token], text: str) -> sg.Expression:
    try:
        trees = _DIALECT.parser(error_level=ErrorLevel.IMMEDIATE).parse(tokens, text)
    except ParseError as e:
        raise _Unsupported(_syntax_message(e, text)) from None
    except SqlglotError as e:
        raise _Unsupported(f"syntax error: {_first_line(str(e))}") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise _Unsupported("expected a single expression")
    return trees[0]


_CLASS_RE = re.compile(r"<class 'sqlglot\.expressions\.[\w.]*?(\w+)'>")


def _syntax_message(e: ParseError, text: str) -> str:
    if not e.errors:
        return f"syntax error: {_first_line(str(e))}"
    err = e.errors[0]
    desc = _CLASS_RE.sub(r"\1", str(err.get("description") or "invalid syntax"))
    m = re.match(r"Required keyword: '(\w+)' missing for (\w+)", desc)
    if m:
        desc = f"incomplete expression ({m.group(2)} is missing an operand or argument)"
    elif m := re.match(r"The number of provided arguments \((\d+)\) is greater than the maximum number "
                       r"of supported arguments \((\d+)\)", desc):
        desc = f"too many arguments ({m.group(1)}, at most {m.group(2)})"
    elif desc.startswith("Invalid expression / Unexpected token"):
        desc = "unexpected token"
    line, col = err.get("line"), err.get("col")
    where = f"column {col}" if line == 1 else f"line {line}, column {col}"
    near = err.get("highlight")
    return f"syntax error at {where}" + (f" near {near!r}" if near else "") + f": {desc}"


def _first_line(s: str) -> str:
    return s.strip().splitlines()[0][:300] if s.strip() else "invalid syntax"


def _check_depth(tree: sg.Expression, path: str, limit: int) -> None:
    """The parsed tree's depth (every node a level, as deep as our recursive passes go), found
    without recursion; deeper than `limit` is a RequestError naming both."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.iter_expressions())
    if deepest > limit:
        raise too_deep(f"the expression is nested {deepest} levels deep", deepest, limit, path)


def _snippet(node: sg.Expression) -> str:
    try:
        s = node.sql()
    except Exception:  # noqa: BLE001 - rendering for an error message only
        s = type(node).__name__
    return clip(s)


# --- conversion: one function per construct ---------------------------------------------------

def _convert(node: sg.Expression) -> Expr:
    handler = _HANDLERS.get(type(node))
    if handler is None:
        raise _Unsupported(f"unsupported construct {_construct_name(node)!r} in expression: "
                           f"{_snippet(node)}", node)
    return handler(node)


def _only(node: sg.Expression, *allowed: str) -> None:
    """Reject sqlglot options we do not implement (e.g. CAST ... FORMAT, BETWEEN SYMMETRIC)."""
    for key, value in node.args.items():
        if key not in allowed and value not in (None, False, []):
            raise _Unsupported(f"unsupported option {key.upper()!r} of {_construct_name(node)} in "
                               f"expression: {_snippet(node)}", node)


def _paren(node: sg.Paren) -> Expr:
    _only(node, "this")
    return _convert(node.this)


def _alias(node: sg.Expression) -> Expr:
    extra = node.args.get("alias") or (node.expressions[0] if node.expressions else None)
    near = f" near {_snippet(extra)!r}" if isinstance(extra, sg.Expression) else ""
    raise _Unsupported(f"unexpected text after the expression{near} (aliases are not supported; "
                       "quote names that contain spaces)", node)


def _column(node: sg.Column) -> Expr:
    if isinstance(node.this, sg.Star):
        raise _Unsupported("unsupported construct '*' in expression", node)
    if any(node.args.get(k) for k in ("table", "db", "catalog")):
        raise _Unsupported(f"qualified column names are not supported: {_snippet(node)} "
                           "(quote the whole name if it contains a dot)", node)
    _only(node, "this")
    return Column(node.this.this)


def _literal(node: sg.Literal) -> Expr:
    if node.is_string:
        return Literal(node.this, T.STRING)
    return _number(node.this, negative=False, node=node)


def _number(text: str, negative: bool, node: sg.Expression) -> Literal:
    try:
        return number_literal(text, negative)
    except ValueError as e:
        raise _Unsupported(str(e), node) from None


def _boolean(node: sg.Boolean) -> Expr:
    return Literal(bool(node.this), T.BOOLEAN)


def _null(node: sg.Null) -> Expr:
    return Literal(None)


def _neg(node: sg.Neg) -> Expr:
    _only(node, "this")
    inner = node.this
    while isinstance(inner, sg.Paren):
        inner = inner.this
    if isinstance(inner, sg.Literal) and not inner.is_string:
        return _number(inner.this, negative=True, node=inner)
    arg = _convert(node.this)
    if isinstance(arg, Literal) and arg.type is not None and arg.type.is_numeric and arg.value is not None:
        return negate_literal(arg)
    return Unary("neg", arg)


def _not(node: sg.Not) -> Expr:
    _only(node, "this")
    inner = node.this
    if isinstance(inner, sg.Is):
        e = _is(inner)
        return IsNull(e.arg, not e.negated)
    if isinstance(inner, sg.In):
        e = _in(inner)
        return InList(e.arg, e.items, not e.negated)
    if isinstance(inner, sg.Like):
        e = _like(inner)
        return Like(e.arg, e.pattern, not e.negated)
    return Unary("not", _convert(inner))


def _is(node: sg.Is) -> IsNull:
    _only(node, "this", "expression", "negate")
    if not isinstance(node.expression, sg.Null):
        raise _Unsupported(f"only IS [NOT] NULL is supported, not: {_snippet(node)}", node)
    return IsNull(_convert(node.this), bool(node.args.get("negate")))


_BINARY_OPS: dict[type, str] = {
    sg.Add: "+", sg.Sub: "-", sg.Mul: "*", sg.Div: "/", sg.Mod: "%",
    sg.EQ: "=", sg.NEQ: "<>", sg.LT: "<", sg.LTE: "<=", sg.GT: ">", sg.GTE: ">=",
    sg.And: "and", sg.Or: "or",
}


def _binary(node: sg.Binary) -> Expr:
    _only(node, "this", "expression")
    return Binary(_BINARY_OPS[type(node)], _convert(node.this), _convert(node.expression))


def _between(node: sg.Between) -> Expr:
    _only(node, "this", "low", "high")
    arg = _convert(node.this)
    return Binary("and", Binary(">=", arg, _convert(node.args["low"])),
                  Binary("<=", arg, _convert(node.args["high"])))


def _in(node: sg.In) -> InList:
    if node.args.get("query") is not None:
        raise _Unsupported(f"IN takes a list of values, not a subquery: {_snippet(node)}", node)
    if node.args.get("field") is not None or node.args.get("unnest") is not None:
        raise _Unsupported(f"IN takes a parenthesised list of values: {_snippet(node)}", node)
    _only(node, "this", "expressions")
    items = node.expressions
    if not items:
        raise _Unsupported(f"IN needs a non-empty list of values: {_snippet(node)}", node)
    return InList(_convert(node.this), tuple(_convert(i) for i in items))


def _like(node: sg.Like) -> Like:
    _only(node, "this", "expression", "negate")
    pattern = node.expression
    while isinstance(pattern, sg.Paren):
        pattern = pattern.this
    if not (isinstance(pattern, sg.Literal) and pattern.is_string):
        raise _Unsupported(f"the pattern of LIKE must be a string literal: {_snippet(node)}", node)
    return Like(_convert(node.this), pattern.this, bool(node.args.get("negate")))


def _case(node: sg.Case) -> Expr:
    _only(node, "this", "ifs", "default")
    subject = _convert(node.this) if node.this is not None else None
    whens = []
    for branch in node.args["ifs"]:
        if not isinstance(branch, sg.If):  # pragma: no cover - sqlglot always builds If here
            raise _Unsupported("malformed CASE", node)
        _only(branch, "this", "true")
        cond = _convert(branch.this)
        if subject is not None:
            cond = Binary("=", subject, cond)
        whens.append((cond, _convert(branch.args["true"])))
    default = node.args.get("default")
    return Case(tuple(whens), _convert(default) if default is not None else None)


def _cast(node: sg.Cast) -> Expr:
    _only(node, "this", "to")
    to = _cast_type(node.args["to"], node)
    inner = node.this
    if to == T.DATE and isinstance(inner, sg.Literal) and inner.is_string:
        return date_literal(inner.this, node)
    return Cast(_convert(inner), to)


_SIMPLE_TYPES = {
    sg.DataType.Type.INT: T.INT32,
    sg.DataType.Type.BIGINT: T.INT64,
    sg.DataType.Type.DOUBLE: T.FLOAT64,
    sg.DataType.Type.TEXT: T.STRING,
    sg.DataType.Type.VARCHAR: T.STRING,
    sg.DataType.Type.BOOLEAN: T.BOOLEAN,
    sg.DataType.Type.DATE: T.DATE,
}


def _cast_type(dt: sg.DataType, node: sg.Expression) -> T.DataType:
    """Map sqlglot's type to ours: contract names plus INT/INTEGER, BIGINT, DOUBLE, VARCHAR/TEXT."""
    kind = dt.this
    params = dt.expressions
    expected = "boolean, int32, int64, float64, decimal(p,s), string, date"
    if kind is sg.DataType.Type.USERDEFINED:
        name = str(dt.args.get("kind") or "")
        try:
            return T.parse_type(name)
        except ValueError:
            raise _Unsupported(f"unsupported type {name!r} in CAST; expected one of {expected}", node) from None
    if kind is sg.DataType.Type.DECIMAL:
        values = []
        for p in params:
            v = p.this if isinstance(p, sg.DataTypeParam) else p
            if not (isinstance(v, sg.Literal) and not v.is_string and v.this.isdigit()):
                raise _Unsupported(f"decimal precision and scale must be integers: {_snippet(dt)}", node)
            values.append(int(v.this))
        if len(values) not in (1, 2):
            raise _Unsupported(f"decimal needs a precision and a scale, e.g. decimal(12,2): {_snippet(dt)}", node)
        try:
            return T.decimal(values[0], values[1] if len(values) == 2 else 0)
        except ValueError as e:
            raise _Unsupported(f"{e} in CAST: {_snippet(dt)}", node) from None
    simple = _SIMPLE_TYPES.get(kind)
    if simple is None or params or dt.args.get("nested"):
        raise _Unsupported(f"unsupported type {_snippet(dt)!r} in CAST; expected one of {expected}", node)
    return simple


def date_literal(text: str, node: sg.Expression | None = None) -> Literal:
    """A date literal from 'YYYY-MM-DD' text; raises _Unsupported (parser) for invalid dates."""
    days = parse_date(text)
    if days is None:
        raise _Unsupported(f"invalid date {text!r}; expected 'YYYY-MM-DD'", node)
    return Literal(days, T.DATE)


def _function(name: str, arity: tuple[int, int | None], *keys: str) -> Callable[[sg.Expression], Expr]:
    """A converter for a contract function that sqlglot parses into its own node class."""

    def convert(node: sg.Expression) -> Expr:
        low, high = arity
        want = f"{low}" if low == high else f"{low} to {high}" if high else f"at least {low}"
        try:
            _only(node, *keys)
        except _Unsupported:  # e.g. substr(s, 1, 2, 3) fills sqlglot's extra slots
            raise _Unsupported(f"{name}() takes {want} argument(s): {_snippet(node)}", node) from None
        args: list[sg.Expression] = []
        for key in keys:
            value = node.args.get(key)
            if isinstance(value, list):
                args.extend(value)
            elif value is not None:
                args.append(value)
        if len(args) < low or (high is not None and len(args) > high):
            raise _Unsupported(f"{name}() takes {want} argument(s), got {len(args)}: {_snippet(node)}", node)
        return Func(name, tuple(_convert(a) for a in args))

    return convert


_HANDLERS: dict[type, Callable[..., Expr]] = {
    sg.Paren: _paren,
    sg.Alias: _alias,
    sg.Aliases: _alias,
    sg.Column: _column,
    sg.Literal: _literal,
    sg.Boolean: _boolean,
    sg.Null: _null,
    sg.Neg: _neg,
    sg.Not: _not,
    sg.Is: _is,
    sg.Between: _between,
    sg.In: _in,
    sg.Like: _like,
    sg.Case: _case,
    sg.Cast: _cast,
    **{cls: _binary for cls in _BINARY_OPS},
    sg.Abs: _function("abs", (1, 1), "this"),
    sg.Coalesce: _function("coalesce", (1, None), "this", "expressions"),
    sg.Substring: _function("substr", (2, 3), "this", "start", "length"),
    sg.Lower: _function("lower", (1, 1), "this"),
    sg.Upper: _function("upper", (1, 1), "this"),
    sg.Length: _function("length", (1, 1), "this"),
    sg.Year: _function("year", (1, 1), "this"),
    sg.Month: _function("month", (1, 1), "this"),
    sg.Day: _function("day", (1, 1), "this"),
}

_CONSTRUCT_NAMES: dict[type, str] = {
    sg.Select: "SELECT", sg.Subquery: "subquery", sg.Star: "*", sg.Exists: "EXISTS",
    sg.Placeholder: "parameter placeholder", sg.Parameter: "parameter", sg.Dot: "'.' access",
    sg.DPipe: "'||' (string concatenation)", sg.Concat: "string concatenation",
    sg.NullSafeEQ: "IS [NOT] DISTINCT FROM", sg.ILike: "ILIKE", sg.Escape: "LIKE ... ESCAPE",
    sg.TryCast: "TRY_CAST", sg.IntDiv: "DIV", sg.Interval: "INTERVAL", sg.Bracket: "[] subscript",
    sg.Array: "array", sg.BitwiseAnd: "&", sg.BitwiseOr: "|", sg.BitwiseXor: "^",
    sg.BitwiseNot: "~", sg.BitwiseLeftShift: "<<", sg.BitwiseRightShift: ">>",
    sg.Var: "bare word", sg.Command: "command",
}


def _construct_name(node: sg.Expression) -> str:
    name = _CONSTRUCT_NAMES.get(type(node))
    if name is not None:
        return name
    if isinstance(node, sg.Anonymous):
        return f"function {node.name}"
    if isinstance(node, sg.Func):
        return f"function {node.sql_name()}"
    return node.key.upper()
