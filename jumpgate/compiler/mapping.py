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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..dataflow.plan import InputRef, LogicalPlan, Operation, Read, Send, inputs_of, output_count
from ..errors import MappingError
from ..nca.interface import (
    FILE,
    NTF,
    NcaImplementation,
    OutputSpec,
    ResourceRequest,
    StreamSpec,
    Verdict,
)
from . import cost as costs

CANDIDATE_TRANSPORTS = ("tcp", "udp")
DEFAULT_BUDGET = 20_000  # explored states before the search turns greedy


# ------------------------------------------------------------------ results


@dataclass(frozen=True, slots=True)
class VerdictRecord:
    """One implementation's answer about one operation, with the step that decided it:
    `operations`, `fusion`, `input`, `output`, `capacity` (a no), `search` (a yes after which the
    rest of the plan could not be mapped), `cost` (a yes, but another graph was cheaper),
    `chosen`, or `skipped` (not asked: the search budget was exhausted)."""

    implementation: str
    ok: bool
    step: str
    reason: str
    chosen: bool = False

    def to_json(self) -> dict:
        return {"implementation": self.implementation, "ok": self.ok, "step": self.step,
                "reason": self.reason, "chosen": self.chosen}


@dataclass(frozen=True, slots=True)
class InputEdge:
    """An input of a placed NCA: operation `op` reads its `index`-th input (`inputs_of` order)
    over logical edge `ref`; `ref` is None for a read's files."""

    op: str
    index: int
    ref: InputRef | None


@dataclass(frozen=True, slots=True)
class Conversion:
    """A converter NCA on one logical edge, in front of `consumer` (an operation, or a send)."""

    implementation: str
    ref: InputRef
    consumer: str
    index: int  # the consumer's input position; 0 for a send
    input: StreamSpec
    output: OutputSpec
    resources: ResourceRequest


@dataclass(frozen=True, slots=True)
class Placement:
    """One NCA instance of the chosen graph, before ids and stages are assigned."""

    implementation: str
    ops: tuple[str, ...]
    inputs: tuple[InputEdge, ...]
    input_specs: tuple[StreamSpec, ...]  # what the NCA receives, after any converter
    outputs: tuple[OutputSpec, ...]  # one per output port of its last operation
    output_refs: tuple[InputRef, ...]
    input_conversions: tuple[Conversion, ...]
    send_conversions: tuple[Conversion, ...]
    resources: ResourceRequest
    cost: costs.Cost
    verdicts: tuple[VerdictRecord, ...] = ()


@dataclass(frozen=True)
class OperationDecision:
    """Which implementation took an operation, and what every implementation answered."""

    op: str
    implementation: str | None  # None for a send (a client endpoint)
    anchor: str | None  # the first operation of the NCA that took it
    verdicts: tuple[VerdictRecord, ...] = ()
    nca: str | None = None  # filled in by the pipeline builder
    path: str | None = None
    note: str = ""

    def to_json(self) -> dict:
        out: dict = {"implementation": self.implementation, "nca": self.nca, "anchor": self.anchor,
                     "verdicts": [v.to_json() for v in self.verdicts]}
        if self.path:
            out["path"] = self.path
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class MappedGraph:
    plan: LogicalPlan
    placements: tuple[Placement, ...]  # in search order (topological; see _PlanIndex._post_order)
    decisions: dict[str, OperationDecision]  # every operation, in plan order
    cost: costs.Cost
    op_paths: Mapping[str, str] = field(default_factory=dict)
    stats: dict = field(default_factory=dict)


# ------------------------------------------------------------------ helpers for plugins


def fusable_chain(plan: LogicalPlan, anchor: str,
                  follow: Callable[[Operation], bool] | Iterable[str]) -> tuple[str, ...]:
    """`anchor`, then the operations after it that the fusion rule allows and `follow` accepts
    (a predicate, or a collection of operation kinds): while the last one has exactly one
    consumer edge, append that consumer if accepted. A helper for `match_operations`."""
    accept = follow if callable(follow) else (lambda op, kinds=frozenset(follow): op.kind in kinds)
    chain = [anchor]
    while True:
        consumers = plan.consumers(chain[-1])
        if len(consumers) != 1 or isinstance(consumers[0][0], Send) or not accept(consumers[0][0]):
            return tuple(chain)
        chain.append(consumers[0][0].name)


def fits_send(spec: StreamSpec, send: Send) -> bool:
    """An edge into a send carries NTF, with its layout, on the send's transport."""
    return spec.format == NTF and spec.transport == send.transport and spec.layout is not None


def _ops_text(ops: Sequence[str]) -> str:
    return "(" + ", ".join(ops) + ")"


def _specs_text(specs: Sequence[StreamSpec]) -> str:
    return ", ".join(s.describe() for s in specs) or "no input"


# ------------------------------------------------------------------ the plan, indexed


class _PlanIndex:
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
        return [s for s in self.sends if s.input == ref]

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


@dataclass(frozen=True, slots=True)
class _Result:
    cost: costs.Cost
    placements: tuple[Placement, ...]


_SpecState = tuple[tuple[str, int, OutputSpec], ...]


# ------------------------------------------------------------------ the search


class _Mapper:
    def __init__(self, plan: LogicalPlan, implementations: Sequence[NcaImplementation],
                 capacity_check: Callable[[ResourceRequest], Verdict] | None,
                 op_paths: Mapping[str, str], cost: costs.PlacementCost, budget: int) -> None:
        self.plan = plan
        self.g = _PlanIndex(plan)
        names = [i.name for i in implementations]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate NCA implementation names: {', '.join(dup)}")
        ordered = sorted(implementations, key=lambda i: i.name)
        self.impls = [i for i in ordered if not i.converter]
        self.converters = [i for i in ordered if i.converter]
        self.by_name = {i.name: i for i in ordered}
        self.capacity_check = capacity_check
        self.op_paths = op_paths
        self.cost = cost
        self.budget = budget
        self.transports = tuple(sorted(set(CANDIDATE_TRANSPORTS) | {s.transport for s in self.g.sends}))
        self.memo: dict[tuple[frozenset[str], _SpecState], _Result | None] = {}
        self.failures: list[tuple[int, str, dict[str, VerdictRecord]]] = []
        self.explored = 0
        self.greedy = False
        self._cache: dict[tuple, object] = {}

    # -- calling plugins: cached (answers depend only on the arguments) and exception-safe ---

    def _ask(self, key: tuple, call: Callable[[], object]) -> Verdict:
        hit = self._cache.get(key)
        if hit is None:
            try:
                hit = call()
            except Exception as e:  # a plugin bug must not take the compiler down
                hit = Verdict.no(f"raised {type(e).__name__}: {e}")
            if not isinstance(hit, Verdict):
                hit = Verdict.no(f"answered {hit!r}, not a Verdict")
            self._cache[key] = hit
        return hit  # type: ignore[return-value]

    def match_operations(self, impl: NcaImplementation, anchor: str) -> Verdict:
        return self._ask(("ops", impl.name, anchor), lambda: impl.match_operations(self.plan, anchor))

    def match_input(self, impl: NcaImplementation, ops: tuple[str, ...],
                    specs: tuple[StreamSpec, ...]) -> Verdict:
        return self._ask(("in", impl.name, ops, specs), lambda: impl.match_input(self.plan, ops, specs))

    def match_output(self, impl: NcaImplementation, ops: tuple[str, ...],
                     specs: tuple[StreamSpec, ...], wanted: tuple[str | None, ...]) -> Verdict:
        return self._ask(("out", impl.name, ops, specs, wanted),
                         lambda: impl.match_output(self.plan, ops, specs, wanted))

    def resources(self, impl: NcaImplementation, ops: tuple[str, ...]) -> ResourceRequest:
        key = ("res", impl.name, ops)
        if key not in self._cache:
            self._cache[key] = impl.resources(self.plan, ops)
        return self._cache[key]  # type: ignore[return-value]

    def capacity(self, res: ResourceRequest) -> Verdict:
        if self.capacity_check is None:
            return Verdict.yes()
        return self._ask(("cap", res.cores, res.memory_mb, res.deployment,
                          tuple(sorted(res.pools.items()))), lambda: self.capacity_check(res))

    # -- the search ------------------------------------------------------------------------

    def run(self) -> MappedGraph:
        started = time.perf_counter()
        result = self.solve(frozenset(), ())
        elapsed = time.perf_counter() - started
        if result is None:
            raise self._error()
        stats = {"states": self.explored, "greedy": self.greedy, "ms": round(elapsed * 1e3, 3)}
        return MappedGraph(self.plan, result.placements, self._decisions(result.placements),
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
                                    f"could take {_ops_text(first.ops)}, but then the rest of the "
                                    f"plan cannot be mapped") for name, (first, _) in options.items()}))
            self.memo[key] = None
            return None
        total, chosen, sub = best
        verdicts = self._verdicts(rejected, options, best)
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

    def _verdicts(self, rejected: dict[str, VerdictRecord],
                  options: dict[str, tuple[Placement, tuple | None]],
                  best: tuple[costs.Cost, Placement, _Result]) -> tuple[VerdictRecord, ...]:
        total, chosen, _ = best
        out = []
        for impl in self.impls:
            name = impl.name
            if name in rejected:
                out.append(rejected[name])
            elif name not in options:
                out.append(VerdictRecord(name, False, "skipped", "not asked: search budget exhausted"))
            else:
                first, impl_best = options[name]
                if impl_best is None:
                    out.append(VerdictRecord(name, False, "search", f"could take {_ops_text(first.ops)}, "
                                             f"but then the rest of the plan cannot be mapped"))
                elif impl_best[1] is chosen:
                    out.append(VerdictRecord(name, True, "chosen", self._describe(chosen), chosen=True))
                else:
                    mine = impl_best[0]
                    why = (f"same cost ({costs.describe(mine)}); '{chosen.implementation}' came first"
                           if mine == total else
                           f"with it, this operation and the ones after it need {costs.describe(mine)}, "
                           f"against {costs.describe(total)} with '{chosen.implementation}'")
                    out.append(VerdictRecord(name, True, "cost",
                                             f"could take {_ops_text(impl_best[1].ops)}; not chosen: {why}"))
        return tuple(out)

    @staticmethod
    def _describe(p: Placement) -> str:
        outs = ", ".join(o.spec.describe() for o in p.outputs)
        text = f"takes {_ops_text(p.ops)}: {_specs_text(p.input_specs)} -> {outs or 'nothing'}"
        convs = p.input_conversions + p.send_conversions
        if convs:
            text += "; converters: " + ", ".join(f"{c.implementation} on {c.ref}->{c.consumer}" for c in convs)
        return text

    # -- one implementation at one anchor --------------------------------------------------

    def candidates(self, impl: NcaImplementation, anchor: str, taken: frozenset[str],
                   specs: dict[InputRef, OutputSpec]) -> tuple[list[Placement], VerdictRecord | None]:
        name = impl.name
        v = self.match_operations(impl, anchor)
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
        accepted, why = self._accept_inputs(impl, ops, edges, tuple(arriving))
        if accepted is None:
            return [], VerdictRecord(name, False, "input", why)
        cands, why = self._outputs(impl, ops, edges, *accepted)
        if not cands:
            return [], VerdictRecord(name, False, "output", why)
        cap = self.capacity(cands[0].resources)
        if not cap.ok:
            return [], VerdictRecord(name, False, "capacity", cap.reason or "does not fit the deployment")
        return cands, None

    def _chain_error(self, ops: tuple[str, ...], anchor: str, taken: frozenset[str]) -> str | None:
        if ops[0] != anchor:
            return f"answered {_ops_text(ops)}, which does not start with '{anchor}'"
        if len(set(ops)) != len(ops):
            return f"answered {_ops_text(ops)}, which repeats an operation"
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

    def _accept_inputs(self, impl: NcaImplementation, ops: tuple[str, ...],
                       edges: tuple[InputEdge, ...], arriving: tuple[StreamSpec, ...]
                       ) -> tuple[tuple[tuple[StreamSpec, ...], tuple[Conversion, ...]] | None, str]:
        """The cheapest inputs `impl` accepts: as they arrive, else with converters."""
        per_edge: list[list[tuple[StreamSpec, Conversion | None]]] = []
        for e, spec in zip(edges, arriving, strict=True):
            opts: list[tuple[StreamSpec, Conversion | None]] = [(spec, None)]
            if e.ref is not None:
                opts += [(c.output.spec, c) for c in self._conversions(spec, e.ref, e.op, e.index, None)]
            per_edge.append(opts)
        combos = sorted(itertools.islice(itertools.product(*per_edge), 512),
                        key=lambda combo: (sum(c is not None for _, c in combo),
                                           tuple(c.implementation if c else "" for _, c in combo)))
        first_reason = ""
        for combo in combos:
            specs = tuple(s for s, _ in combo)
            v = self.match_input(impl, ops, specs)
            if v.ok:
                return (specs, tuple(c for _, c in combo if c is not None)), ""
            first_reason = first_reason or v.reason
        tail = " (nor with any converter)" if len(combos) > 1 else ""
        return None, f"does not accept {_specs_text(arriving)}{tail}: {first_reason or 'said no'}"

    def _outputs(self, impl: NcaImplementation, ops: tuple[str, ...], edges: tuple[InputEdge, ...],
                 specs_in: tuple[StreamSpec, ...], convs_in: tuple[Conversion, ...]
                 ) -> tuple[list[Placement], str]:
        last = ops[-1]
        ports = output_count(self.g.ops[last])
        refs = tuple(InputRef(last, p) for p in range(ports))
        insisted = tuple(next((s.transport for s in self.g.sends_on(r)), None) for r in refs)
        cands: list[Placement] = []
        seen: set[tuple[OutputSpec, ...]] = set()
        reasons: list[str] = []  # from real requests only, not from transport probes
        for wanted, relaxed, probe in self._wanted_options(insisted):
            if cands and relaxed:
                break
            v = self.match_output(impl, ops, specs_in, wanted)
            outs = tuple(v.value or ()) if v.ok else ()
            why = ""
            if not v.ok:
                why = v.reason or "said no"
            elif len(outs) != ports or not all(isinstance(o, OutputSpec) for o in outs):
                why = f"answered {len(outs)} output spec(s) for {ports} output port(s)"
            elif outs in seen:
                continue
            else:
                seen.add(outs)
                convs_out, why = self._fit_sends(refs, outs)
                if convs_out is not None:
                    convs = convs_in + convs_out
                    cands.append(Placement(
                        implementation=impl.name, ops=ops, inputs=edges, input_specs=specs_in,
                        outputs=outs, output_refs=refs, input_conversions=convs_in,
                        send_conversions=convs_out, resources=self.resources(impl, ops),
                        cost=self.cost(impl, ops, [self.by_name[c.implementation] for c in convs])))
                    continue
            if not probe and why not in reasons:
                reasons.append(why)
        return cands, "; ".join(reasons)

    def _wanted_options(self, insisted: tuple[str | None, ...]
                        ) -> list[tuple[tuple[str | None, ...], bool, bool]]:
        """(`wanted`, relaxed, probe) to try in order. First the sends' transports ("strict");
        then, only useful when those fail, without them ("relaxed": converters may bridge the gap
        to the send). Ports that feed NCAs get None, then each candidate transport ("probe")."""
        free = any(t is None for t in insisted)
        hints: tuple[str | None, ...] = (None, *self.transports) if free else (None,)
        out = [(tuple(t if t is not None else h for t in insisted), False, h is not None) for h in hints]
        if any(t is not None for t in insisted):
            out += [((h,) * len(insisted), True, h is not None) for h in (None, *self.transports)]
        return out

    def _fit_sends(self, refs: tuple[InputRef, ...], outs: tuple[OutputSpec, ...]
                   ) -> tuple[tuple[Conversion, ...] | None, str]:
        convs: list[Conversion] = []
        for ref, out in zip(refs, outs, strict=True):
            for send in self.g.sends_on(ref):
                if fits_send(out.spec, send):
                    continue
                fitting = [c for c in self._conversions(out.spec, ref, send.name, 0, send.transport)
                           if fits_send(c.output.spec, send)]
                if not fitting:
                    tail = "; no converter fits" if self.converters else ""
                    return None, (f"its output {ref} would be {out.spec.describe()}, but send "
                                  f"'{send.name}' receives ntf over {send.transport}{tail}")
                convs.append(fitting[0])
        return tuple(convs), ""

    def _conversions(self, spec: StreamSpec, ref: InputRef, consumer: str, index: int,
                     wanted: str | None) -> list[Conversion]:
        """Converters that accept `spec`, each with every distinct output it offers."""
        out: list[Conversion] = []
        hints = (wanted,) if wanted is not None else (None, *self.transports)
        for conv in self.converters:
            if not self.match_operations(conv, "").ok or not self.match_input(conv, (), (spec,)).ok:
                continue
            res = self.resources(conv, ())
            if not self.capacity(res).ok:
                continue
            seen: set[OutputSpec] = set()
            for hint in hints:
                v = self.match_output(conv, (), (spec,), (hint,))
                outs = tuple(v.value or ()) if v.ok else ()
                if len(outs) != 1 or not isinstance(outs[0], OutputSpec) or outs[0] in seen:
                    continue
                seen.add(outs[0])
                if outs[0].spec != spec:
                    out.append(Conversion(conv.name, ref, consumer, index, spec, outs[0], res))
        return out

    # -- reporting -------------------------------------------------------------------------

    def _decisions(self, placements: tuple[Placement, ...]) -> dict[str, OperationDecision]:
        by_op: dict[str, OperationDecision] = {}
        for p in placements:
            anchor = p.ops[0]
            by_op[anchor] = OperationDecision(anchor, p.implementation, anchor, p.verdicts,
                                              path=self.op_paths.get(anchor))
            for follower in p.ops[1:]:
                by_op[follower] = OperationDecision(
                    follower, p.implementation, anchor,
                    tuple(self._follower_verdict(impl, follower, p) for impl in self.impls),
                    path=self.op_paths.get(follower))
        for s in self.g.sends:
            by_op[s.name] = OperationDecision(
                s.name, None, None, (), path=self.op_paths.get(s.name),
                note=f"client endpoint: receives {s.input} as ntf over {s.transport} at {s.host}:{s.port}")
        return {n: by_op[n] for n in self.g.order if n in by_op}

    def _follower_verdict(self, impl: NcaImplementation, op: str, p: Placement) -> VerdictRecord:
        if impl.name == p.implementation:
            return VerdictRecord(impl.name, True, "chosen",
                                 f"fused with '{p.ops[0]}': {self._describe(p)}", chosen=True)
        v = self.match_operations(impl, op)
        if not v.ok:
            return VerdictRecord(impl.name, False, "operations", v.reason or "does not implement it")
        cap = self.capacity(self.resources(impl, tuple(v.value or (op,))))
        if not cap.ok:  # e.g. a switch whose slots other jobs hold: say so rather than "not needed"
            return VerdictRecord(impl.name, False, "capacity", cap.reason or "does not fit the deployment")
        return VerdictRecord(impl.name, True, "cost", f"could take {_ops_text(v.value or (op,))}; "
                             f"not needed: '{op}' is fused with '{p.ops[0]}' on {p.implementation}")

    def _error(self) -> MappingError:
        if not self.impls:
            return MappingError("no NCA implementation is registered that implements operations")
        if not self.failures:  # cannot happen: a failed search records the operation it failed at
            return MappingError("no combination of NCAs can run this plan")
        _, anchor, records = max(self.failures, key=lambda f: f[0])
        op = self.g.ops[anchor]
        path = self.op_paths.get(anchor)
        where = f"{path}, " if path else ""
        lines = [f"no NCA can run operation '{anchor}' ({where}{op.kind}):"]
        for impl in self.impls:
            r = records.get(impl.name)
            if r is not None:
                lines.append(f"  - {impl.name}: {r.step}: {r.reason}")
        err = MappingError("\n".join(lines), path=path)
        err.context["operation"] = anchor
        err.context["reasons"] = {n: {"step": r.step, "reason": r.reason} for n, r in records.items()}
        return err


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
