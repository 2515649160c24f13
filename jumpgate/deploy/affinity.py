"""CPU sets of nodes (`cpus:` in the inventory, docs/deploy.md): Linux's cpulist notation, and
pinning a started NCA process to its node's CPUs.

Several `local` nodes may partition one machine; without pinning their `cores` are only what the
resource view counts, and the kernel runs every node's NCAs on every CPU. With `cpus`, a node's
NCAs really have those CPUs and no others, as on separate machines (and an operator can keep
Jumpgate off the CPUs of other services).

A process starts pinned (`pinned_start`: the thread that starts it runs on the node's CPUs
meanwhile, and a child inherits its CPU set), so it and its threads never run elsewhere; the
agent's own function: the agent ships alone, so the server's local deployer borrows it rather
than the other way.
"""
from __future__ import annotations

from ..agent.node import pinned_start

__all__ = ["format_cpulist", "parse_cpulist", "pinned_start"]


def parse_cpulist(text: str) -> tuple[int, ...]:
    """`"0-3,6"` -> (0, 1, 2, 3, 6); the notation of /sys/.../cpulist and `taskset -c`."""
    cpus: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"{text!r} is not a CPU list (e.g. \"0-3,6\"): an empty item")
        lo, dash, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise ValueError(f"{text!r} is not a CPU list (e.g. \"0-3,6\"): {part!r}") from None
        if first < 0 or last < first or last >= 4096:
            raise ValueError(f"{text!r} is not a CPU list (e.g. \"0-3,6\"): {part!r} is no range of CPUs")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def format_cpulist(cpus: tuple[int, ...] | list[int]) -> str:
    """(0, 1, 2, 3, 6) -> `"0-3,6"`."""
    out: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)
