"""Transport and format negotiation for one candidate placement (thesis §3.3.5, steps 2 and 3 of
`jumpgate.compiler.mapping`): which input streams an implementation accepts, as they arrive or
through converter NCAs on its edges; which outputs it offers for what its consumers and the
client's sends need; and the converters that bridge an output to a send."""
from __future__ import annotations

import itertools
from collections.abc import Sequence

from ..dataflow.plan import InputRef, Send, output_count
from ..nca.interface import NTF, NcaImplementation, OutputSpec, StreamSpec
from . import cost as costs
from .answers import PluginAnswers
from .mapped import Conversion, InputEdge, Placement, specs_text
from .plan_index import PlanIndex

CANDIDATE_TRANSPORTS = ("tcp", "udp")


def fits_send(spec: StreamSpec, send: Send) -> bool:
    """An edge into a send carries NTF, with its layout, on the send's transport."""
    return spec.format == NTF and spec.transport == send.transport and spec.layout is not None


class Negotiator:
    def __init__(self, g: PlanIndex, ask: PluginAnswers, converters: Sequence[NcaImplementation],
                 by_name: dict[str, NcaImplementation], cost: costs.PlacementCost) -> None:
        self.g = g
        self.ask = ask
        self.converters = converters
        self.by_name = by_name
        self.cost = cost
        self.transports = tuple(sorted(set(CANDIDATE_TRANSPORTS) | {s.transport for s in g.sends}))

    def accept_inputs(self, impl: NcaImplementation, ops: tuple[str, ...],
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
            v = self.ask.match_input(impl, ops, specs)
            if v.ok:
                return (specs, tuple(c for _, c in combo if c is not None)), ""
            first_reason = first_reason or v.reason
        tail = " (nor with any converter)" if len(combos) > 1 else ""
        return None, f"does not accept {specs_text(arriving)}{tail}: {first_reason or 'said no'}"

    def outputs(self, impl: NcaImplementation, ops: tuple[str, ...], edges: tuple[InputEdge, ...],
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
            v = self.ask.match_output(impl, ops, specs_in, wanted)
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
                        send_conversions=convs_out, resources=self.ask.resources(impl, ops),
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
            if not self.ask.match_operations(conv, "").ok or not self.ask.match_input(conv, (), (spec,)).ok:
                continue
            res = self.ask.resources(conv, ())
            if not self.ask.capacity(res).ok:
                continue
            seen: set[OutputSpec] = set()
            for hint in hints:
                v = self.ask.match_output(conv, (), (spec,), (hint,))
                outs = tuple(v.value or ()) if v.ok else ()
                if len(outs) != 1 or not isinstance(outs[0], OutputSpec) or outs[0] in seen:
                    continue
                seen.add(outs[0])
                if outs[0].spec != spec:
                    out.append(Conversion(conv.name, ref, consumer, index, spec, outs[0], res))
        return out
