"""The generated file of a shared scan (docs/shared-scans.md): several scan queries over one read.

Each member is a scan query generated as usual (scan.py, its chain of filters and projections);
the build compiles it once under a name derived from its text (`member_symbol`), so that the
object serves every shared scan it is ever a member of. This file only lists them, with
where each one's output ports, message numbers and runtime filter slots begin in the shared
process: a member's code keeps the numbers it was generated with, and the runtime adds these
(ncas/runtime/shared_scan.cpp). Its message table is the members' tables one after the other.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from .csyntax import CodegenError
from .messages import GeneratedSource
from .templates import render

MAX_MEMBERS = 64


def member_symbol(source: str) -> str:
    """The name a member's JG_QUERY is compiled under: one per text, so two jobs running the same
    query share one object, listed twice with their own ports."""
    return "jg_member_" + hashlib.sha256(source.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class SharedMember:
    """One member: its generated query, its output port count and its runtime filter slots."""

    source: str  # a GeneratedSource (its message table travels with it)
    ports: int
    runtime_filters: int = 0


def generate_shared_scan(members: Sequence[SharedMember]) -> GeneratedSource:
    if not members:
        raise CodegenError("a shared scan has at least one member")
    if len(members) > MAX_MEMBERS:
        raise CodegenError(f"a shared scan has at most {MAX_MEMBERS} members, got {len(members)}")
    rows, ports, msgs, rfs, texts = [], 0, 0, 0, []
    for m in members:
        if m.ports < 1:
            raise CodegenError("a shared scan's member has at least one output port")
        messages = getattr(m.source, "messages", ())
        rows.append({"symbol": member_symbol(m.source), "port_base": ports, "msg_base": msgs, "rf_base": rfs})
        ports, msgs, rfs = ports + m.ports, msgs + len(messages), rfs + m.runtime_filters
        texts += messages
    symbols = list(dict.fromkeys(r["symbol"] for r in rows))
    return GeneratedSource(render("shared_scan.c.j2", members=rows, symbols=symbols), texts)
