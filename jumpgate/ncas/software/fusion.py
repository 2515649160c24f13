"""Helpers NCA authors use to answer match_operations (thesis §3.3.4: "our implementation
provides helper functions to perform common applicability checks")."""
from __future__ import annotations

from ...dataflow.plan import LogicalPlan


def fusable_chain(plan: LogicalPlan, anchor: str, kinds: tuple[str, ...]) -> tuple[str, ...]:
    """`anchor` followed by every next operation of one of `kinds` that is the sole consumer of
    the previous one, which itself has no other consumer (an NCA's inner operations feed only the
    next operation of the same NCA)."""
    chain = [anchor]
    while True:
        consumers = plan.consumers(chain[-1])
        if len(consumers) != 1:
            break
        nxt, _ = consumers[0]
        if nxt.kind not in kinds:
            break
        chain.append(nxt.name)
    return tuple(chain)
