"""Internal scaling (thesis §3.4 "Scaling NCAs"): the control plane chooses each NCA's thread count.

An implementation says how far one instance can scale (`ResourceRequest.cores` at least,
`max_cores` at most). NCAs of one stage run together, so the cores of the budget that a stage's
minimum needs leave over are handed out one at a time, round robin, starting with the NCAs that do
the most work per input byte (parsers first: the thesis found format conversion to be the
bottleneck of most queries). An NCA running in several stages gets the smallest of its stages'
shares. In a stage that reads files, an NCA fed by other NCAs (a join, an aggregation after a scan)
is not charged its minimum against the budget, and spare cores go to the file readers until they
have what they can use: such an NCA mostly waits for its producers (a few percent busy in the
TPC-H bottoms); threads it gets beyond its minimum are charged. Output ports whose `streams` is
None open one stream per thread, so the thread count also fixes every destination's
`expected_streams`. An NCA reading the network gets no more threads than the streams arriving on
its busiest input port (its workers take whole streams).
"""
from __future__ import annotations

from dataclasses import replace

from ..dataflow.plan import LogicalPlan
from .mapped import MappedGraph, Placement

# Lower sorts first when spare cores are handed out.
_PRIORITY = {"read": 0, "join": 1, "aggregate": 2, "shuffle": 3, "filter": 4, "project": 4}


def _priority(plan: LogicalPlan, p: Placement) -> int:
    return min((_PRIORITY.get(plan.op(o).kind, 5) for o in p.ops), default=5)


def assign_threads(mapped: MappedGraph, op_stages: dict[str, tuple[int, ...]], budget: int) -> MappedGraph:
    """Give every placement its thread count within `budget` cores per stage, and resolve output
    streams left to the thread count."""
    plan = mapped.plan
    stages_of = [sorted({s for o in p.ops for s in op_stages[o]}) for p in mapped.placements]
    threads = [max(1, p.resources.cores) for p in mapped.placements]
    allowed = [max(t, p.resources.max_cores) for t, p in zip(threads, mapped.placements)]
    fed = [any(e.ref is not None for e in p.inputs) for p in mapped.placements]
    in_stage: dict[int, list[int]] = {}  # stage -> the placements running in it, in order
    for i, ss in enumerate(stages_of):
        for stage in ss:
            in_stage.setdefault(stage, []).append(i)
    for stage in sorted(in_stage):
        members = in_stage[stage]
        reads_files = any(not fed[i] for i in members)
        spare = budget - sum(threads[i] for i in members if not (reads_files and fed[i]))
        members.sort(key=lambda i: (_priority(plan, mapped.placements[i]), i))
        share = {i: threads[i] for i in members}
        # the file readers first, up to what they can use, when the others mostly wait for them
        rounds = [[i for i in members if not fed[i]], members] if reads_files else [members]
        for group in rounds:
            while spare > 0:
                grown = False
                for i in group:
                    if spare > 0 and share[i] < allowed[i]:
                        share[i] += 1
                        spare -= 1
                        grown = True
                if not grown:
                    break
        for i in members:  # an NCA spanning stages keeps the smallest share it got
            allowed[i] = share[i]
    placements = []
    producer_streams: dict = {}  # logical edge -> streams its producer port opens
    for p, n in zip(mapped.placements, allowed):
        # Software NCAs that read the network hand whole input streams to their workers: threads
        # beyond the streams arriving on the busiest input port would sit idle.
        incoming = [producer_streams.get(e.ref, 1) for e in p.inputs if e.ref is not None]
        if incoming:
            n = max(1, min(n, max(incoming)))
        outputs = tuple(o if o.streams is not None else replace(o, streams=n) for o in p.outputs)
        for ref, o in zip(p.output_refs, outputs):
            producer_streams[ref] = o.streams
        convs = tuple(replace(c, output=replace(c.output, streams=c.output.streams or 1))
                      for c in p.input_conversions + p.send_conversions)
        k = len(p.input_conversions)
        placements.append(replace(p, resources=replace(p.resources, cores=n), outputs=outputs,
                                  input_conversions=convs[:k], send_conversions=convs[k:]))
    return replace(mapped, placements=tuple(placements))
