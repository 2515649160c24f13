"""Fusion helpers for plugins' `match_operations` (the plugin kit): which operations after an
anchor an NCA may take with it. The framework enforces the fusion rule on every answer
(jumpgate.compiler.mapping); these helpers only save each plugin from restating it."""
from __future__ import annotations

from collections.abc import Callable, Iterable

from ..dataflow.plan import LogicalPlan, Operation, Send


def fusable_chain(plan: LogicalPlan, anchor: str,
                  follow: Callable[[Operation], bool] | Iterable[str]) -> tuple[str, ...]:
    """`anchor`, then the operations after it that the fusion rule allows and `follow` accepts
    (a predicate, or a collection of operation kinds): while the last one has exactly one
    consumer edge, append that consumer if accepted."""
    accept = follow if callable(follow) else (lambda op, kinds=frozenset(follow): op.kind in kinds)
    chain = [anchor]
    while True:
        consumers = plan.consumers(chain[-1])
        if len(consumers) != 1 or isinstance(consumers[0][0], Send) or not accept(consumers[0][0]):
            return tuple(chain)
        chain.append(consumers[0][0].name)
