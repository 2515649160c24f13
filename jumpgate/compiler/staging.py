"""Stage computation for staged networked pipelines (thesis §3.3.5 "Stage Computation", Appendix
A.1.4, Figure A.4).

Staging runs on logical operations; the NCAs that implement them inherit the union of their
operations' stages (`jumpgate.compiler.compile`).

Semantics
---------
A *stage* is the set of operations that run concurrently. NCAs have little memory, so nothing
buffers a stream between two operations: data flows only while both ends run.

* Streaming operations (`read`, `filter`, `project`, `aggregate`, `shuffle`, `send`) run in
  exactly one stage. A `join` runs in two: its build phase (consumes the build edge, emits
  nothing), then its probe phase (consumes the probe edge, emits its output). Its build input has
  finished by the time it probes.
* Within a stage an operation can run only if
  - every producer it reads from *in its current phase* runs in the same stage **and emits** in
    it (a join emits only in its probe phase; a producer that has already finished cannot feed a
    streaming consumer);
  - when it emits in its current phase, every consumer of its output runs in the same stage and
    *accepts that edge* in its current phase (a join accepts its build edge only in its build
    phase and its probe edge only in its probe phase).
  Reads have no producers, sends have no consumers, and a join in its build phase has no outputs
  to check.
* Each stage is the greatest fixpoint of these conditions: start from every unfinished operation
  (each in its current phase) and remove those whose conditions fail until nothing changes. The
  conditions are monotone, so the fixpoint is unique and gives maximal concurrency. The
  operations left run: a join advances from build to probe, everything else finishes.
* An empty stage while work remains means the plan cannot run without buffering (for example, one
  producer feeding both sides of a join): `MappingError` names the operations and why.

The thesis' pseudo-code (Figure A.4) adds runnable operations in one forward pass; the fixpoint
is the same rule ("runnable when inputs *and* receivers are runnable") without depending on the
order of operations.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from ..contract.errors import MappingError
from ..dataflow.plan import InputRef, Join, LogicalPlan, inputs_of

BUILD, PROBE, STREAM = "build", "probe", "stream"


@dataclass(frozen=True, slots=True)
class _ConsumerEdge:
    consumer: str
    index: int  # position among the consumer's inputs_of(); a join's 0 = build, 1 = probe
    ref: InputRef


class _Graph:
    """Plan adjacency, indexed once (the plan's own lookups are linear scans)."""

    def __init__(self, plan: LogicalPlan) -> None:
        self.order = [op.name for op in plan.ops]
        self.rank = {n: i for i, n in enumerate(self.order)}
        self.ops = {op.name: op for op in plan.ops}
        self.inputs = {op.name: inputs_of(op) for op in plan.ops}
        self.consumers: dict[str, list[_ConsumerEdge]] = {n: [] for n in self.order}
        for op in plan.ops:
            for i, ref in enumerate(self.inputs[op.name]):
                self.consumers[ref.op].append(_ConsumerEdge(op.name, i, ref))

    def phases(self, name: str) -> tuple[str, ...]:
        return (BUILD, PROBE) if isinstance(self.ops[name], Join) else (STREAM,)

    def neighbours(self, name: str) -> list[str]:
        """The operations whose conditions mention `name`: its producers and its consumers."""
        return [ref.op for ref in self.inputs[name]] + [e.consumer for e in self.consumers[name]]


def _accepts(phase: str, index: int) -> bool:
    """Does an operation in `phase` read its `index`-th input edge?"""
    if phase == BUILD:
        return index == 0
    if phase == PROBE:
        return index == 1
    return True


def _emits(phase: str) -> bool:
    return phase != BUILD


class _Simulation:
    def __init__(self, g: _Graph) -> None:
        self.g = g
        self.pos = {n: 0 for n in g.order}  # index of the current phase
        self.stages: dict[str, list[int]] = {n: [] for n in g.order}

    def phase(self, name: str) -> str | None:
        phases = self.g.phases(name)
        p = self.pos[name]
        return phases[p] if p < len(phases) else None

    def remaining(self) -> list[str]:
        return [n for n in self.g.order if self.phase(n) is not None]

    def _why_absent(self, name: str) -> str:
        if self.phase(name) is None:
            return f"'{name}' has already finished and nothing buffers its output"
        return f"'{name}' cannot run in this stage"

    def blocker(self, name: str, running: set[str]) -> str | None:
        """Why `name` cannot run together with `running`, or None when it can."""
        g, phase = self.g, self.phase(name)
        assert phase is not None
        for i, ref in enumerate(g.inputs[name]):
            if not _accepts(phase, i):
                continue
            p = ref.op
            if p not in running:
                return f"its input {ref}: {self._why_absent(p)}"
            p_phase = self.phase(p)
            if p_phase is not None and not _emits(p_phase):
                return f"its input {ref} is join '{p}' in its build phase, which emits nothing yet"
        if not _emits(phase):
            return None
        for edge in g.consumers[name]:
            c = edge.consumer
            if c not in running:
                return f"its consumer {self._why_absent(c)}"
            c_phase = self.phase(c)
            assert c_phase is not None
            if not _accepts(c_phase, edge.index):
                side = "build" if edge.index == 0 else "probe"
                state = ("is still in its build phase" if c_phase == BUILD
                         else "has already finished building")
                return f"it feeds the {side} side of join '{c}', which {state}"
        return None

    def next_stage(self) -> tuple[list[str], list[tuple[str, str]]]:
        """The greatest set of remaining operations that can run together, and for the others the
        order in which they were ruled out with the reason (the first ones are the root causes).

        A worklist: every operation is checked once in plan order, and again only when one it
        depends on (a producer or a consumer) was ruled out, so a stage costs O(operations +
        edges) however far a blocked join's effect travels up a chain."""
        remaining = self.remaining()
        running = set(remaining)
        removed: list[tuple[str, str]] = []
        queue, queued = deque(remaining), set(remaining)
        while queue:
            name = queue.popleft()
            queued.discard(name)
            if name not in running:
                continue
            why = self.blocker(name, running)
            if why is None:
                continue
            running.discard(name)
            removed.append((name, why))
            for other in self.g.neighbours(name):
                if other in running and other not in queued:
                    queue.append(other)
                    queued.add(other)
        return [n for n in remaining if n in running], removed

    def run(self, names: list[str], stage: int) -> None:
        for n in names:
            self.stages[n].append(stage)
            self.pos[n] += 1


def compute_stages(plan: LogicalPlan,
                   op_paths: Mapping[str, str] | None = None) -> dict[str, tuple[int, ...]]:
    """Operation name -> the global stage numbers it runs in (ascending), in plan order.

    `op_paths` maps operation names to request paths (`operations[3]`) for error messages.
    Raises `MappingError` when no schedule without buffering exists."""
    sim = _Simulation(_Graph(plan))
    stage = 0
    while sim.remaining():
        running, removed = sim.next_stage()
        if not running:
            raise _deadlock(sim, stage, removed, op_paths or {})
        sim.run(running, stage)
        stage += 1
    return {n: tuple(s) for n, s in sim.stages.items()}


def stage_count(op_stages: Mapping[str, tuple[int, ...]]) -> int:
    return 1 + max((s for stages in op_stages.values() for s in stages), default=-1)


# ------------------------------------------------------------------ diagnosis


def _ancestors(g: _Graph, name: str) -> set[str]:
    seen = {name}
    todo = [name]
    while todo:
        for ref in g.inputs[todo.pop()]:
            if ref.op not in seen:
                seen.add(ref.op)
                todo.append(ref.op)
    return seen


def _shared_join_sources(sim: _Simulation, stuck: list[str], most: int = 3, looked_at: int = 20) -> list[str]:
    """Sentences for joins whose build and probe sides come from one producer: the common case
    of a plan that needs buffering. At most `most` of them, among the first `looked_at` stuck
    joins: each walks the join's ancestors, so all of them would be quadratic."""
    g, out = sim.g, []
    joins = [n for n in stuck if isinstance(g.ops[n], Join)][:looked_at]
    for name in joins:
        op = g.ops[name]
        assert isinstance(op, Join)
        if len(out) == most:
            break
        common = _ancestors(g, op.build.op) & _ancestors(g, op.probe.op)
        if not common:
            continue
        # name the fork closest to the join: the last common ancestor in plan order
        fork = max(common, key=g.rank.__getitem__)
        out.append(f"join '{name}' reads both its build side ({op.build}) and its probe side "
                   f"({op.probe}) from '{fork}': a streaming producer runs once, its output "
                   f"cannot be held back until the probe phase, and no operation buffers data")
    return out


def _deadlock(sim: _Simulation, stage: int, removed: list[tuple[str, str]],
              op_paths: Mapping[str, str]) -> MappingError:
    stuck = sim.remaining()
    labels = ", ".join(f"'{n}' ({sim.phase(n)})" if sim.phase(n) != STREAM else f"'{n}'" for n in stuck[:20])
    if len(stuck) > 20:
        labels += f" and {len(stuck) - 20:,} more"
    lines = [f"cannot stage the plan without buffering: in stage {stage} none of {labels} can run"]
    lines += [f"  - {s}" for s in _shared_join_sources(sim, stuck)]
    # root causes first: edges into a join side that the join does not read in its phase
    ranked = sorted(removed, key=lambda r: (" side of join " not in r[1], "emits nothing" in r[1]))
    for name, why in ranked[:3]:
        lines.append(f"  - '{name}': {why}")
    if len(ranked) > 3:
        lines.append(f"  - ... and {len(ranked) - 3} more waiting on those")
    first = ranked[0][0] if ranked else stuck[0]
    err = MappingError("\n".join(lines), path=op_paths.get(first))
    err.context["operations"] = stuck
    return err
