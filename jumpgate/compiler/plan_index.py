"""The logical plan indexed for the mapper's search: consumers of every operation and edge, the
sends, and the order in which the search takes operations."""
from __future__ import annotations

from ..dataflow.plan import InputRef, LogicalPlan, Read, Send, inputs_of
from .mapped import InputEdge


class PlanIndex:
    def __init__(self, plan: LogicalPlan) -> None:
        self.plan = plan
        self.order = [op.name for op in plan.ops]
        self.ops = {op.name: op for op in plan.ops}
        self.consumers: dict[str, list[tuple[str, int]]] = {n: [] for n in self.order}
        self.ref_consumers: dict[InputRef, list[str]] = {}
        for op in plan.ops:
            for i, ref in enumerate(inputs_of(op)):
                self.consumers[ref.op].append((op.name, i))
                self.ref_consumers.setdefault(ref, []).append(op.name)
        self.sends = [op for op in plan.ops if isinstance(op, Send)]
        self._sends_on: dict[InputRef, list[Send]] = {}
        for send in self.sends:
            self._sends_on.setdefault(send.input, []).append(send)
        self.targets = [n for n in self._post_order() if not isinstance(self.ops[n], Send)]
        self.rank = {n: i for i, n in enumerate(self.targets)}
        self._external: dict[tuple[str, ...], tuple[InputEdge, ...]] = {}

    def _post_order(self) -> list[str]:
        """A topological order that finishes each input subtree before starting the next one,
        the subtree that needs most live edges first (Sethi-Ullman), so few placed outputs wait
        for their consumers and the memoised search stays small. Any topological order reaches
        every fusion: a fused operation's predecessor always comes first."""
        need: dict[str, int] = {}
        for name in self.order:  # plan order is topological
            kids = sorted((need[r.op] for r in inputs_of(self.ops[name])), reverse=True)
            need[name] = max([1] + [k + i for i, k in enumerate(kids)])
        seen: set[str] = set()
        order: list[str] = []
        sinks = [n for n in self.order if not self.consumers[n]] + self.order  # + a safety net
        for sink in sinks:
            stack: list[tuple[str, bool]] = [(sink, False)]
            while stack:
                name, expanded = stack.pop()
                if expanded:
                    order.append(name)
                    continue
                if name in seen:
                    continue
                seen.add(name)
                stack.append((name, True))
                refs = inputs_of(self.ops[name])
                first_to_last = sorted(range(len(refs)), key=lambda i: (-need[refs[i].op], i))
                stack += [(refs[i].op, False) for i in reversed(first_to_last) if refs[i].op not in seen]
        return order

    def sends_on(self, ref: InputRef) -> list[Send]:
        """The sends reading `ref`, in plan order (indexed: every candidate placement asks)."""
        return self._sends_on.get(ref, [])

    def external_inputs(self, ops: tuple[str, ...]) -> tuple[InputEdge, ...]:
        """Input edges of a chain that come from outside it, in chain then `inputs_of` order."""
        hit = self._external.get(ops)
        if hit is None:
            inside, edges = set(ops), []
            for name in ops:
                op = self.ops[name]
                if isinstance(op, Read):
                    edges.append(InputEdge(name, 0, None))
                edges += [InputEdge(name, i, ref) for i, ref in enumerate(inputs_of(op))
                          if ref.op not in inside]
            hit = self._external[ops] = tuple(edges)
        return hit
