"""Size limits on a dataflow request: the second line of defence of a shared service.

The parser, the binder, the mapper and the code generators are meant to be linear in the size of
a request and never to recurse on its nesting (docs/limits.md); these limits bound what a single
request may make them do, and are checked *before* the work they protect: the number of
operations before any operation is read, an expression's length, nesting depth, IN lists and
literals on its tokens before sqlglot parses it. Each failure names the JSON path (for example
`operations[3].condition`), the limit's name and its value.

Sizes answer 413 (`RequestTooLarge`): the request is well-formed but bigger than this service
takes. Nesting deeper than allowed answers 400 (`RequestError`), like any other expression the
service cannot take.

The defaults are generous for TPC-DS-sized requests (its 99 queries need at most a few hundred
operations, expressions of a few kilobytes, nesting below 30 levels and IN lists of a few dozen
values) while keeping the worst request cheap:

- `max_operations` 10,000: a fused chain of 10,000 filters compiles in well under ten seconds;
  far beyond any generated plan (a TPC-DS query is below 300 operations).
- `max_expression_chars` 1,000,000: one expression is parsed in about 2 s at this size; the body
  is at most 16 MB anyway (jumpgate/api). It admits an IN list at `max_in_list` of short values.
- `max_expression_depth` 200 levels of the parsed tree: sqlglot's parser is recursive descent, up
  to 25 Python frames per level of parentheses, CASE or prefix operator (measured); 200 levels is
  ten times the deepest TPC-DS expression and keeps every recursive pass (sqlglot's parser, the
  binder, the code generators) within a few thousand frames.
- `max_in_list` 50,000 values: IN lists of constants become one sorted array searched by binary
  search in the generated C (codegen/expr.py), so the C compiler's time does not grow with them (a
  10,000-value list compiles in 0.04 s); a list twice the limit is refused on its tokens in well
  under a second, where compiling 100,000 values would take 1.5-2 s of the server's time.
- `max_literal_bytes` 65,536 bytes (UTF-8) per string or number literal: values that can match a
  column are a few hundred bytes in every benchmark; each byte is four characters of generated C.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from ..contract.errors import PayloadTooLarge, RequestError


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """What one request may contain (see the module docstring for why each default)."""

    max_operations: int = 10_000
    max_expression_chars: int = 1_000_000
    max_expression_depth: int = 200
    max_in_list: int = 50_000
    max_literal_bytes: int = 65_536

    def __post_init__(self) -> None:
        for name in ("max_operations", "max_expression_chars", "max_expression_depth", "max_in_list",
                     "max_literal_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")


DEFAULT_LIMITS = RequestLimits()


class RequestTooLarge(PayloadTooLarge):
    """A request (or a part of it) bigger than a limit of `RequestLimits`: HTTP 413. The answer
    names the JSON path, the limit (`limit`: its name, `maximum`: its value) and what was found."""

    status = 413

    def __init__(self, message: str, path: str | None, limit: str, maximum: int, found: int) -> None:
        super().__init__(message, path)
        self.context.update(limit=limit, maximum=maximum, found=found)


def too_large(what: str, found: int, unit: str, limit: str, maximum: int, path: str | None) -> RequestTooLarge:
    """'operations: the request has 12,000 operations; the limit is 10,000 (max_operations)'."""
    return RequestTooLarge(f"{what} has {found:,} {unit}; the limit is {maximum:,} ({limit})",
                           path, limit, maximum, found)


def too_deep(what: str, found: int | None, maximum: int, path: str | None) -> RequestError:
    """'the expression is nested 5,001 levels deep; the limit is 200 (max_expression_depth)': a
    400 like any expression the service cannot take, with the limit in the answer's context."""
    err = RequestError(f"{what}; the limit is {maximum:,} levels (max_expression_depth)", path)
    err.context.update(limit="max_expression_depth", maximum=maximum)
    if found is not None:
        err.context["found"] = found
    return err


# Frames sqlglot's recursive-descent parser needs per level of nesting (measured: 20 for a
# parenthesis, 23 for a function call, 29 for `NOT (`, which counts as two levels), with room.
FRAMES_PER_LEVEL = 25
_SPARE_FRAMES = 300  # what the caller's stack and our own passes may add


def ensure_stack_for(depth: int, frames_per_level: int = FRAMES_PER_LEVEL) -> None:
    """Make sure `depth` levels of nesting fit under Python's recursion limit from here.

    The depth is bounded before any recursion starts, so this only ever raises the limit, to at
    most what the configured depth needs; it is never lowered (another thread may be parsing)."""
    frame, used = sys._getframe(), 0
    while frame is not None:  # the frames already on this thread's stack
        used += 1
        frame = frame.f_back
    needed = used + depth * frames_per_level + _SPARE_FRAMES
    if sys.getrecursionlimit() < needed:
        sys.setrecursionlimit(needed)


__all__ = ["DEFAULT_LIMITS", "RequestLimits", "RequestTooLarge", "ensure_stack_for", "too_deep", "too_large"]
