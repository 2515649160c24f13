"""Mapping logical operations to NCAs by iterative replacement (thesis §3.3.5 "Mapping Dataflow
Operations to NCAs", Appendix A.1.5, Figure A.7).

The search repeatedly takes the next operation that no NCA has taken yet, in a fixed topological
order (each sink's input subtrees one after the other, see `_PlanIndex._post_order`), so its
inputs are all taken or are files, and asks every implementation's operator interface about it:

1. `match_operations(plan, anchor)`: the operations it would take, `anchor` first. The framework
   enforces the fusion rule: each operation but the last has exactly one consumer, which is the
   next one; sends are client endpoints and are never taken. Fusing is an offer, not a must: the
   search also places the implementation on each shorter prefix of the chain (the operations left
   go to other NCAs), longest first, so that a cheaper graph may split a fusion, e.g. a scan that
   would fuse a partial aggregation leaves it to a switch. A plugin that cannot run a prefix says
   so in `match_input`/`match_output`.
2. `match_input` with the `StreamSpec` arriving on each input edge (a `read` gets its file format
   on transport `file`). If it refuses, converters (`converter = True`) may be inserted on its
   network input edges; the cheapest combination that it accepts wins.
3. `match_output` with, per output port, the transport of a consuming `send` (None otherwise).
   For ports that feed NCAs the search also asks with each candidate transport (`tcp`, `udp` and
   the sends' transports) as if a receiver insisted on it, because the receiver is placed later
   and may accept only one transport; each distinct answer is a separate candidate graph.
   Every edge into a send must carry NTF on the send's transport, converted if need be.
4. The optional `capacity_check(resources)` may veto the candidate.

Each candidate is a branch of a depth-first search memoised on the state (operations taken, and
the stream spec of every placed output still feeding an untaken operation); the graph with the
lowest additive cost wins (`jumpgate.compiler.cost`), ties going to the first found, i.e. to
implementation names in order. A budget on explored states turns the search greedy (the first
complete graph wins) for pathological plans.

Every implementation's verdict on every operation is recorded (`OperationDecision`), so users can
see why an operation went, or did not go, to an NCA.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..dataflow.plan import InputRef, LogicalPlan, Send
from ..nca.interface import FILE, NcaImplementation, OutputSpec, ResourceRequest, StreamSpec, Verdict
from . import cost as costs
from .answers import PluginAnswers
from .decisions import Reporter
from .mapped import MappedGraph, Placement, VerdictRecord, ops_text
from .negotiation import Negotiator
from .plan_index import PlanIndex

DEFAULT_BUDGET = 20_000  # explored states before the search turns greedy


@dataclass(frozen=True, slots=True)
class _Result:
    cost: costs.Cost
    placements: tuple[Placement, ...]


_SpecState = tuple[tuple[str, int, OutputSpec], ...]


# ------------------------------------------------------------------ the search


class _Mapper:
    """The memoised depth-first search; asking plugins (`PluginAnswers`), negotiating streams
    (`Negotiator`) and reporting (`Reporter`) are its collaborators."""

    def __init__(self, plan: LogicalPlan, implementations: Sequence[NcaImplementation],
                 capacity_check: Callable[[ResourceRequest], Verdict] | None,
                 op_paths: Mapping[str, str], cost: costs.PlacementCost, budget: int) -> None:
        self.plan = plan
        self.g = PlanIndex(plan)
        names = [i.name for i in implementations]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate NCA implementation names: {', '.join(dup)}")
        ordered = sorted(implementations, key=lambda i: i.name)
        self.impls = [i for i in ordered if not i.converter]
        converters = [i for i in ordered if i.converter]
        self.ask = PluginAnswers(plan, capacity_check)
        self.negotiate = Negotiator(self.g, self.ask, converters, {i.name: i for i in ordered}, cost)
        self.report = Reporter(self.g, self.ask, self.impls, op_paths)
        self.op_paths = op_paths
        self.budget = budget
        self.memo: dict[tuple[frozenset[str], _SpecState], _Result | None] = {}
        self.failures: list[tuple[int, str, dict[str, VerdictRecord]]] = []
        self.explored = 0
        self.greedy = False

    def run(self) -> MappedGraph:
        started = time.perf_counter()
        result = self.solve(frozenset(), ())
        elapsed = time.perf_counter() - started
        if result is None:
            raise self.report.error(self.failures)
        stats = {"states": self.explored, "greedy": self.greedy, "ms": round(elapsed * 1e3, 3)}
        return MappedGraph(self.plan, result.placements, self.report.decisions(result.placements),
                           result.cost, dict(self.op_paths), stats)

    def next_anchor(self, taken: frozenset[str]) -> str | None:
        return next((n for n in self.g.targets if n not in taken), None)

    def solve(self, taken: frozenset[str], state: _SpecState) -> _Result | None:
        key = (taken, state)
        if key in self.memo:
            return self.memo[key]
        anchor = self.next_anchor(taken)
        if anchor is None:
            self.memo[key] = _Result(costs.ZERO, ())
            return self.memo[key]
        self.explored += 1
        self.greedy = self.greedy or self.explored > self.budget
        specs = {InputRef(op, port): out for op, port, out in state}
        rejected: dict[str, VerdictRecord] = {}
        options: dict[str, tuple[Placement, tuple[costs.Cost, Placement, _Result] | None]] = {}
        best: tuple[costs.Cost, Placement, _Result] | None = None
        for impl in self.impls:
            if self.greedy and best is not None:
                break
            cands, rejection = self.candidates(impl, anchor, taken, specs)
            if rejection is not None:
                rejected[impl.name] = rejection
                continue
            impl_best = None
            for cand in cands:
                now_taken = taken | frozenset(cand.ops)
                sub = self.solve(now_taken, self._next_state(specs, cand, now_taken))
                if sub is None:
                    continue
                total = costs.add(cand.cost, sub.cost)
                if impl_best is None or total < impl_best[0]:
                    impl_best = (total, cand, sub)
                if self.greedy:
                    break
            options[impl.name] = (cands[0], impl_best)
            if impl_best is not None and (best is None or impl_best[0] < best[0]):
                best = impl_best
        if best is None:
            self.failures.append((self.g.rank[anchor], anchor, rejected | {
                name: VerdictRecord(name, False, "search",
                                    f"could take {ops_text(first.ops)}, but then the rest of the "
                                    f"plan cannot be mapped") for name, (first, _) in options.items()}))
            self.memo[key] = None
            return None
        total, chosen, sub = best
        verdicts = self.report.verdicts(rejected, options, best)
        result = _Result(total, (replace(chosen, verdicts=verdicts), *sub.placements))
        self.memo[key] = result
        return result

    def _next_state(self, specs: dict[InputRef, OutputSpec], cand: Placement,
                    taken: frozenset[str]) -> _SpecState:
        """Specs of placed outputs that still feed an operation no NCA has taken."""
        merged = dict(specs)
        merged.update(zip(cand.output_refs, cand.outputs, strict=True))
        live = [(ref.op, ref.port, out) for ref, out in merged.items()
                if any(c not in taken and not isinstance(self.g.ops[c], Send)
                       for c in self.g.ref_consumers.get(ref, ()))]
        return tuple(sorted(live, key=lambda t: (t[0], t[1])))

    # -- one implementation at one anchor --------------------------------------------------

    def candidates(self, impl: NcaImplementation, anchor: str, taken: frozenset[str],
                   specs: dict[InputRef, OutputSpec]) -> tuple[list[Placement], VerdictRecord | None]:
        name = impl.name
        v = self.ask.match_operations(impl, anchor)
        if not v.ok:
            return [], VerdictRecord(name, False, "operations", v.reason or "does not implement it")
        ops = tuple(v.value) if v.value else (anchor,)
        why = self._chain_error(ops, anchor, taken)
        if why:
            return [], VerdictRecord(name, False, "fusion", why)
        cands: list[Placement] = []
        first: VerdictRecord | None = None
        for k in range(len(ops), 0, -1):  # the whole chain first: ties keep the longest fusion
            more, rejection = self._chain_candidates(impl, ops[:k], specs)
            cands += more
            first = first or rejection
        return (cands, None) if cands else ([], first)

    def _chain_candidates(self, impl: NcaImplementation, ops: tuple[str, ...],
                          specs: dict[InputRef, OutputSpec]) -> tuple[list[Placement], VerdictRecord | None]:
        """Placements of `impl` on exactly `ops` (a chain that passed the fusion rule)."""
        name = impl.name
        edges = self.g.external_inputs(ops)
        arriving = []
        for e in edges:
            if e.ref is None:
                read = self.g.ops[e.op]
                arriving.append(StreamSpec(read.format.value, FILE))  # type: ignore[union-attr]
            elif e.ref in specs:
                arriving.append(specs[e.ref].spec)
            else:
                return [], VerdictRecord(name, False, "input", f"fuses '{e.op}', whose input {e.ref} "
                                         f"is not mapped yet (fuse only operations after the first "
                                         f"one's inputs)")
        accepted, why = self.negotiate.accept_inputs(impl, ops, edges, tuple(arriving))
        if accepted is None:
            return [], VerdictRecord(name, False, "input", why)
        cands, why = self.negotiate.outputs(impl, ops, edges, *accepted)
        if not cands:
            return [], VerdictRecord(name, False, "output", why)
        cap = self.ask.capacity(cands[0].resources)
        if not cap.ok:
            return [], VerdictRecord(name, False, "capacity", cap.reason or "does not fit the deployment")
        return cands, None

    def _chain_error(self, ops: tuple[str, ...], anchor: str, taken: frozenset[str]) -> str | None:
        if ops[0] != anchor:
            return f"answered {ops_text(ops)}, which does not start with '{anchor}'"
        if len(set(ops)) != len(ops):
            return f"answered {ops_text(ops)}, which repeats an operation"
        for n in ops:
            if n not in self.g.ops:
                return f"answered unknown operation '{n}'"
            if isinstance(self.g.ops[n], Send):
                return f"answered send '{n}'; sends are client endpoints, not operations of an NCA"
            if n in taken:
                return f"answered '{n}', which another NCA already took"
        for a, b in itertools.pairwise(ops):
            cons = self.g.consumers[a]
            if len(cons) != 1 or cons[0][0] != b:
                return (f"cannot fuse '{a}' with '{b}': an NCA may fuse an operation only into its "
                        f"single consumer ('{a}' has {len(cons)} consumer edge(s))")
        return None


def map_plan(plan: LogicalPlan, implementations: Sequence[NcaImplementation], *,
             capacity_check: Callable[[ResourceRequest], Verdict] | None = None,
             op_paths: Mapping[str, str] | None = None,
             cost: costs.PlacementCost = costs.default_cost,
             budget: int = DEFAULT_BUDGET) -> MappedGraph:
    """Map every non-send operation of `plan` to NCA instances; see the module docstring.

    `op_paths` maps operation names to request paths (`operations[3]`) for errors and decisions.
    Raises `MappingError` naming the operation that cannot be mapped and every implementation's
    reason, and `ValueError` for two implementations with the same name."""
    return _Mapper(plan, list(implementations), capacity_check, op_paths or {}, cost, budget).run()
