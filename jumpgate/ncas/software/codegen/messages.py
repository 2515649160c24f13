"""Data-error messages of a generated NCA, kept out of its C source.

Messages name the request's operations and columns ("... in aggregate 'x1234'"), and clients name
columns after ids that change from run to run (Spark's exprIds) or rename them (Trino's
self-joins). build.py keys its binary cache on the generated source, so messages in the source
would make every re-run of one query a new source and a new compile. The generated code therefore
refers to message K only (`jg_message(ctx, K)`, ncas/runtime/jg.h); the texts travel with the
NCA's configuration (`param msg.K TEXT`, docs/nca-process-protocol.md) and the runtime looks one
up when a row fails. Two requests that differ only in names get byte-identical C, one binary.
"""
from __future__ import annotations

from collections.abc import Sequence

MESSAGE_PARAM = "msg."  # `param msg.K TEXT`: message K of the table


def _plain(text: str) -> str:
    """`text` as the process can hold it: valid UTF-8 (a lone surrogate becomes '?') without NUL,
    since the runtime keeps it as a C string."""
    return text.encode("utf-8", errors="replace").decode("utf-8").replace("\0", "?")


class MessageTable:
    """The messages of one generated file, numbered in the order the generators ask for them.

    Every request gets an entry of its own, even for a text met before: whether two texts are
    equal depends on the names in them, and the numbering (hence the C) must not."""

    def __init__(self) -> None:
        self._texts: list[str] = []

    def add(self, text: str) -> int:
        self._texts.append(_plain(text))
        return len(self._texts) - 1

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(self._texts)


class GeneratedSource(str):
    """Generated C source with the message table its process must be given.

    A `str` (the C text), so that everything that reads, compares or builds generated source
    (build_nca, golden files, tests) keeps working unchanged; `messages` is what ProcessNca sends
    as `param msg.K` (`message_params`)."""

    messages: tuple[str, ...]

    def __new__(cls, source: str, messages: Sequence[str]) -> GeneratedSource:
        self = super().__new__(cls, source)
        self.messages = tuple(messages)
        return self


def message_params(source: str) -> dict[str, str]:
    """The `param` settings that give a process the message table of `source` (none for a source
    that carries no table: hand-written C, which passes its messages to jg_fail itself)."""
    return {f"{MESSAGE_PARAM}{k}": text for k, text in enumerate(getattr(source, "messages", ()))}


def refers_to_messages(source: str) -> bool:
    """Whether `source` looks messages up (so that a process given no table would report numbers)."""
    return "jg_message(" in source
