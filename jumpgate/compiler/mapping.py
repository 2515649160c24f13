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

Each candidate is a branch of a depth-first search memoised on the state (how many operations of
the fixed order are taken, and the stream spec of every placed output still feeding an untaken
operation); the graph with the lowest additive cost wins (`jumpgate.compiler.cost`), ties going to
the first found, i.e. to implementation names in order. A budget on explored states turns the
search greedy (the first complete graph wins) for pathological plans.

The search is near-linear in the number of operations and never recurses on the plan:
- the operations taken are always a prefix of the fixed order (an accepted chain is contiguous in
  it: each fused operation directly follows its predecessor, or an input it reads would not be
  mapped yet), so a state is a number, not a set;
- the search runs on an explicit stack (each state a generator that yields the states it needs),
  and a result links to the rest of its graph instead of copying it;
- a chain of up to `EXHAUSTIVE_CHAIN` operations offers every prefix; a longer one offers itself
  and the prefixes that end where the kind of operation changes (a filter or projection run, then
  an aggregation, ...), at most `MAX_SPLITS` of them. Splitting a run of filters and projections
  between two NCAs of the same kind never makes a cheaper graph under the default cost, and
  offering every prefix of an N-operation chain made the search O(N^2) states and O(N^3) time.

Every implementation's verdict on every operation is recorded (`OperationDecision`), so users can
see why an operation went, or did not go, to an NCA.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, replace

from ..dataflow.plan import Filter, InputRef, LogicalPlan, Operation, Project, Send
from ..nca.interface import FILE, NcaImplementation, OutputSpec, ResourceRequest, StreamSpec, Verdict
from . import cost as costs
from .answers import PluginAnswers
from .decisions import Reporter
from .mapped import MappedGraph, Placement, VerdictRecord, ops_text
from .negotiation import Negotiator
from .plan_index import PlanIndex

DEFAULT_BUDGET = 20_000  # explored states before the search turns greedy
EXHAUSTIVE_CHAIN = 16  # a chain up to this long offers every prefix
MAX_SPLITS = 16  # a longer one: at most this many shorter prefixes, where the kind changes


@dataclass(frozen=True, slots=True)
class _Result:
    """The best graph for the operations left in a state: its cost, its first placement and the
    result of the state after it (None for nothing left), linked so that no state copies the
    placements of the states after it."""

    cost: costs.Cost
    placement: Placement | None = None
    rest: _Result | None = None

    def placements(self) -> tuple[Placement, ...]:
        out: list[Placement] = []
        node: _Result | None = self
        while node is not None and node.placement is not None:
            out.append(node.placement)
            node = node.rest
        return tuple(out)


_NOTHING_LEFT = _Result(costs.ZERO)

_SpecState = tuple[tuple[str, int, OutputSpec], ...]
_Key = tuple[int, _SpecState]  # (operations of the search order taken, live output specs)
_Search = Generator[_Key, "_Result | None", "_Result | None"]


def _split_class(op: Operation) -> str:
    """Operations a long chain is not split between: filters and projections are one class."""
    return "row" if isinstance(op, (Filter, Project)) else op.kind


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
        self.memo: dict[_Key, _Result | None] = {}
        self.failures: list[tuple[int, str, dict[str, VerdictRecord]]] = []
        self.explored = 0
        self.greedy = False

    def run(self) -> MappedGraph:
        started = time.perf_counter()
        result = self.search((0, ()))
        elapsed = time.perf_counter() - started
        if result is None:
            raise self.report.error(self.failures)
        placements = result.placements()
        stats = {"states": self.explored, "greedy": self.greedy, "ms": round(elapsed * 1e3, 3)}
        return MappedGraph(self.plan, placements, self.report.decisions(placements),
                           result.cost, dict(self.op_paths), stats)

    def search(self, root: _Key) -> _Result | None:
        """The depth-first search on an explicit stack: each frame is a state's `solve`, which
        yields the key of every state it needs and is sent that state's result."""
        stack: list[_Search] = [self.solve(*root)]
        answer: _Result | None = None
        while stack:
            try:
                key = stack[-1].send(answer)
            except StopIteration as done:
                stack.pop()
                answer = done.value
                continue
            if key in self.memo:
                answer = self.memo[key]
            else:  # a new state: its first send(None) starts it
                stack.append(self.solve(*key))
                answer = None
        return answer

    def solve(self, taken: int, state: _SpecState) -> _Search:
        """The cheapest graph for the operations after the first `taken` of the search order,
        given the specs of the placed outputs they read (`state`)."""
        key = (taken, state)
        if taken == len(self.g.targets):
            self.memo[key] = _NOTHING_LEFT
            return _NOTHING_LEFT
        anchor = self.g.targets[taken]
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
                now_taken = taken + len(cand.ops)
                sub = yield (now_taken, self._next_state(specs, cand, now_taken))
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
            self.failures.append((taken, anchor, rejected | {
                name: VerdictRecord(name, False, "search",
                                    f"could take {ops_text(first.ops)}, but then the rest of the "
                                    f"plan cannot be mapped") for name, (first, _) in options.items()}))
            self.memo[key] = None
            return None
        total, chosen, sub = best
        verdicts = self.report.verdicts(rejected, options, best)
        result = _Result(total, replace(chosen, verdicts=verdicts), sub)
        self.memo[key] = result
        return result

    def _next_state(self, specs: dict[InputRef, OutputSpec], cand: Placement, taken: int) -> _SpecState:
        """Specs of placed outputs that still feed an operation no NCA has taken."""
        merged = dict(specs)
        merged.update(zip(cand.output_refs, cand.outputs, strict=True))
        live = [(ref.op, ref.port, out) for ref, out in merged.items() if self._feeds_untaken(ref, taken)]
        return tuple(sorted(live, key=lambda t: (t[0], t[1])))

    def _feeds_untaken(self, ref: InputRef, taken: int) -> bool:
        rank = self.g.rank
        return any(c in rank and rank[c] >= taken for c in self.g.ref_consumers.get(ref, ()))  # sends have no rank

    # -- one implementation at one anchor --------------------------------------------------

    def candidates(self, impl: NcaImplementation, anchor: str, taken: int,
                   specs: dict[InputRef, OutputSpec]) -> tuple[list[Placement], VerdictRecord | None]:
        name = impl.name
        v = self.ask.match_operations(impl, anchor)
        if not v.ok:
            return [], VerdictRecord(name, False, "operations", v.reason or "does not implement it")
        ops = tuple(v.value) if v.value else (anchor,)
        why = self._chain_error(ops, anchor, taken)
        if why:
            return [], VerdictRecord(name, False, "fusion", why)
        in_order = self._in_search_order(ops, taken)
        cands: list[Placement] = []
        first: VerdictRecord | None = None
        for k in self._prefix_lengths(ops):  # the whole chain first: ties keep the longest fusion
            more, rejection = self._chain_candidates(impl, ops[:k], specs)
            if more and k > in_order:  # cannot happen (see _in_search_order): never place out of order
                more, rejection = [], VerdictRecord(name, False, "input", f"'{ops[in_order]}' is not the next "
                                                    f"operation to map after '{ops[in_order - 1]}'")
            cands += more
            first = first or rejection
        return (cands, None) if cands else ([], first)

    def _in_search_order(self, ops: tuple[str, ...], taken: int) -> int:
        """How many of `ops` follow each other in the search order from `taken` on. A chain whose
        inputs are all mapped always does entirely: a fused operation comes right after its
        predecessor unless one of its other inputs is still to be searched."""
        targets, n = self.g.targets, 0
        while n < len(ops) and taken + n < len(targets) and targets[taken + n] == ops[n]:
            n += 1
        return n

    def _prefix_lengths(self, ops: tuple[str, ...]) -> list[int]:
        """The prefixes of a chain offered as candidates, longest first (module docstring)."""
        if len(ops) <= EXHAUSTIVE_CHAIN:
            return list(range(len(ops), 0, -1))
        kinds = [_split_class(self.g.ops[n]) for n in ops]
        cuts = [k for k in range(len(ops) - 1, 0, -1) if kinds[k - 1] != kinds[k]]
        return [len(ops), *cuts[:MAX_SPLITS]]

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

    def _chain_error(self, ops: tuple[str, ...], anchor: str, taken: int) -> str | None:
        if ops[0] != anchor:
            return f"answered {ops_text(ops)}, which does not start with '{anchor}'"
        if len(set(ops)) != len(ops):
            return f"answered {ops_text(ops)}, which repeats an operation"
        for n in ops:
            if n not in self.g.ops:
                return f"answered unknown operation '{n}'"
            if isinstance(self.g.ops[n], Send):
                return f"answered send '{n}'; sends are client endpoints, not operations of an NCA"
            if self.g.rank[n] < taken:
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
