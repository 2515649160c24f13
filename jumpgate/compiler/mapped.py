"""What the mapper produces (`map_plan`): the chosen NCA placements, and every implementation's
verdict on every operation, so users can see why an operation went, or did not go, to an NCA."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..dataflow.plan import InputRef, LogicalPlan
from ..nca.interface import OutputSpec, ResourceRequest, StreamSpec
from . import cost as costs


@dataclass(frozen=True, slots=True)
class VerdictRecord:
    """One implementation's answer about one operation, with the step that decided it:
    `operations`, `fusion`, `input`, `output`, `capacity` (a no), `search` (a yes after which the
    rest of the plan could not be mapped), `cost` (a yes, but another graph was cheaper),
    `chosen`, or `skipped` (not asked: the search budget was exhausted, or the operation follows
    the first of a long fused chain, decisions.py)."""

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
    placements: tuple[Placement, ...]  # in search order (topological; see PlanIndex._post_order)
    decisions: dict[str, OperationDecision]  # every operation, in plan order
    cost: costs.Cost
    op_paths: Mapping[str, str] = field(default_factory=dict)
    stats: dict = field(default_factory=dict)


def ops_text(ops: Sequence[str], limit: int = 12) -> str:
    """'(r, f1, f2)'; a long chain as its first and last operations, so that the text of every
    verdict on a 10,000-operation chain stays short (the answer lists one per operation)."""
    if len(ops) <= limit:
        return "(" + ", ".join(ops) + ")"
    return f"({', '.join(ops[:limit - 2])}, ... {len(ops) - limit + 1:,} more ..., {ops[-1]})"


def specs_text(specs: Sequence[StreamSpec]) -> str:
    return ", ".join(s.describe() for s in specs) or "no input"
