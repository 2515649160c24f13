"""What the mapper reports: each implementation's verdict on each operation (the step that decided
it and why), the decisions of the chosen graph, and the error text when no graph exists. These are
what `GET /v1/jobs/{id}` and the job page show."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..contract.errors import MappingError
from ..nca.interface import NcaImplementation
from . import cost as costs
from .answers import PluginAnswers
from .mapped import OperationDecision, Placement, VerdictRecord, ops_text, specs_text
from .plan_index import PlanIndex

# Followers of a fused chain longer than this are not put to the other implementations: each answer
# costs the plugin a walk of the rest of the chain, O(N^2) over a chain of N operations.
ASK_FOLLOWERS_UP_TO = 16


class Reporter:
    def __init__(self, g: PlanIndex, ask: PluginAnswers, impls: Sequence[NcaImplementation],
                 op_paths: Mapping[str, str]) -> None:
        self.g = g
        self.ask = ask
        self.impls = impls
        self.op_paths = op_paths

    def verdicts(self, rejected: dict[str, VerdictRecord],
                 options: dict[str, tuple[Placement, tuple | None]],
                 best: tuple[costs.Cost, Placement, object]) -> tuple[VerdictRecord, ...]:
        """The verdicts at one anchor: `rejected` implementations with their reasons, the others
        (`options`: first candidate, best result with it) as chosen, costlier, or dead ends."""
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
                    out.append(VerdictRecord(name, False, "search", f"could take {ops_text(first.ops)}, "
                                             f"but then the rest of the plan cannot be mapped"))
                elif impl_best[1] is chosen:
                    out.append(VerdictRecord(name, True, "chosen", self.describe(chosen), chosen=True))
                else:
                    mine = impl_best[0]
                    why = (f"same cost ({costs.describe(mine)}); '{chosen.implementation}' came first"
                           if mine == total else
                           f"with it, this operation and the ones after it need {costs.describe(mine)}, "
                           f"against {costs.describe(total)} with '{chosen.implementation}'")
                    out.append(VerdictRecord(name, True, "cost",
                                             f"could take {ops_text(impl_best[1].ops)}; not chosen: {why}"))
        return tuple(out)

    @staticmethod
    def describe(p: Placement) -> str:
        outs = ", ".join(o.spec.describe() for o in p.outputs)
        text = f"takes {ops_text(p.ops)}: {specs_text(p.input_specs)} -> {outs or 'nothing'}"
        convs = p.input_conversions + p.send_conversions
        if convs:
            text += "; converters: " + ", ".join(f"{c.implementation} on {c.ref}->{c.consumer}" for c in convs)
        return text

    def decisions(self, placements: tuple[Placement, ...]) -> dict[str, OperationDecision]:
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
                                 f"fused with '{p.ops[0]}': {self.describe(p)}", chosen=True)
        if len(p.ops) > ASK_FOLLOWERS_UP_TO:
            return VerdictRecord(impl.name, False, "skipped", f"not asked: '{op}' is one of the "
                                 f"{len(p.ops):,} operations fused with '{p.ops[0]}' on {p.implementation}")
        v = self.ask.match_operations(impl, op)
        if not v.ok:
            return VerdictRecord(impl.name, False, "operations", v.reason or "does not implement it")
        cap = self.ask.capacity(self.ask.resources(impl, tuple(v.value or (op,))))
        if not cap.ok:  # e.g. a switch whose slots other jobs hold: say so rather than "not needed"
            return VerdictRecord(impl.name, False, "capacity", cap.reason or "does not fit the deployment")
        return VerdictRecord(impl.name, True, "cost", f"could take {ops_text(v.value or (op,))}; "
                             f"not needed: '{op}' is fused with '{p.ops[0]}' on {p.implementation}")

    def error(self, failures: Sequence[tuple[int, str, dict[str, VerdictRecord]]]) -> MappingError:
        """Why the search failed: at the operation latest in search order where no implementation
        led to a complete graph, each implementation's reason."""
        if not self.impls:
            return MappingError("no NCA implementation is registered that implements operations")
        if not failures:  # cannot happen: a failed search records the operation it failed at
            return MappingError("no combination of NCAs can run this plan")
        _, anchor, records = max(failures, key=lambda f: f[0])
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
