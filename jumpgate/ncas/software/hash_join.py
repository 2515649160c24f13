"""The hash-join NCA: `join` with its extra condition and output columns, and any following filters
and projections fused in (thesis Table 3.4 "join-[project]"). It runs in two stages as the staging
algorithm assigns them (thesis §3.3.5, Appendix A.1.3): execute phase 0 receives the build side
and builds the hash table, phase 1 receives the probe side and emits the joined rows.

Inputs are NTF over TCP: network input port 0 is the build side and port 1 the probe side, the
order of a join's input edges (`inputs_of(join)` is (build, probe)). The driver is
ncas/runtime/join.c; the generated part (keys, key equality, hash, condition, fused operations,
output) comes from `codegen.join`.
"""
from __future__ import annotations

from ...contract.ntf import NtfLayout, generate_ntf
from ...dataflow.memo import BoundedMemo
from ...dataflow.plan import Join, LogicalPlan, RequestJoinType
from ...nca.interface import (
    NTF,
    InstanceContext,
    NcaImplementation,
    NcaInstance,
    NcaSpec,
    OutputSpec,
    ResourceRequest,
    StreamSpec,
    Verdict,
)
from ...nca.support import Support
from .codegen import CodegenError
from .codegen.join import generate_join_query
from .common import filter_project_chain
from .process import ProcessNca
from .support import codegen_support

TRANSPORTS = ("tcp",)
MAX_THREADS = 8  # internal scaling: build and probe workers per instance (the control plane decides)
SIDES = ("build", "probe")


def _structure(layout: NtfLayout) -> tuple:
    """What decoding depends on: sizes, and each field's type, offset and null bit (not names)."""
    return (layout.null_bytes, layout.fixed_size,
            tuple((f.type.kind, f.type.scale, f.offset, f.null_bit) for f in layout.fields))


class HashJoinNca(NcaImplementation):
    name = "software.hash_join"
    keyed_streams = True  # its process runtime speaks keyed streams (ncas/runtime/in_tcp.c)
    runtime_filter_build = True  # a Bloom filter and key ranges at the end of the build (docs/runtime-filters.md)
    description = ("Hash join (build stage, then probe stage): inner, left semi/anti/outer, any key types, "
                   "extra condition, output columns and following filters and projections fused in "
                   "(generated C)")
    operation_kinds = ("join", "filter", "project")

    # -- operator interface ----------------------------------------------------------------

    def support(self) -> Support:
        types = ", ".join(t.value for t in RequestJoinType) + " (run as right_outer when the side it keeps is the smaller)"
        return codegen_support({"join": f"{types}; keys of any type; an extra condition; output columns",
                                "filter": "fused after the join", "project": "fused after the join"},
                               aggregates=False)

    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        if not anchor:
            return Verdict.no("not a format converter")
        op = plan.op(anchor)
        if not isinstance(op, Join):
            return Verdict.no(f"takes only 'join' as its first operation, not '{op.kind}'")
        chain = filter_project_chain(plan, anchor)
        # generate once here so that what the code generator cannot do is a verdict with a reason,
        # not a failed job; fall back to fewer fused operations first
        first_error = None
        for n in range(len(chain), 0, -1):
            ops = chain[:n]
            try:
                self._generate(plan, ops, generate_ntf(plan.schemas[ops[-1]]))
            except CodegenError as e:
                first_error = first_error or e
                continue
            fused = f"; fuses {', '.join(ops[1:])}" if n > 1 else ""
            return Verdict.yes(ops, reason=f"{op.type.value} hash join on {len(op.build_keys)} key(s){fused}")
        return Verdict.no(f"cannot generate C for it: {first_error}")

    def match_input(self, plan: LogicalPlan, ops: tuple[str, ...],
                    inputs: tuple[StreamSpec, ...]) -> Verdict[None]:
        join = plan.op(ops[0])
        if not isinstance(join, Join) or len(inputs) != 2:
            got = ", ".join(i.describe() for i in inputs) or "nothing"
            return Verdict.no(f"takes a build and a probe input, got {got}")
        for side, ref, spec in zip(SIDES, (join.build, join.probe), inputs, strict=True):
            if spec.format != NTF:
                return Verdict.no(f"reads NTF on its {side} side, got {spec.describe()}")
            if spec.transport not in TRANSPORTS:
                return Verdict.no(f"receives over {', '.join(TRANSPORTS)} only; its {side} side is "
                                  f"{spec.describe()}")
            if spec.layout is None or _structure(spec.layout) != _structure(generate_ntf(plan.input_schema(ref))):
                return Verdict.no(f"reads the contract NTF layout of its {side} side's schema; "
                                  f"{ref} arrives in another layout")
        return Verdict.yes()

    def match_output(self, plan: LogicalPlan, ops: tuple[str, ...], inputs: tuple[StreamSpec, ...],
                     wanted: tuple[str | None, ...]) -> Verdict[tuple[OutputSpec, ...]]:
        transport = wanted[0] if wanted and wanted[0] else "tcp"
        if transport not in TRANSPORTS:
            return Verdict.no(f"sends over {', '.join(TRANSPORTS)} only, not {transport}")
        layout = generate_ntf(plan.schemas[ops[-1]])
        # one stream per worker thread: each probe worker sends on its own connection
        return Verdict.yes((OutputSpec(StreamSpec(NTF, transport, layout), streams=None),))

    def resources(self, plan: LogicalPlan, ops: tuple[str, ...]) -> ResourceRequest:
        # Workers split the incoming streams of each side; the hash table is shared (read-only
        # while probing), so more threads pay when the inputs arrive on several streams.
        return ResourceRequest(cores=1, max_cores=MAX_THREADS, memory_mb=256)

    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        return HashJoinInstance(spec, context)

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _generate(plan: LogicalPlan, ops: tuple[str, ...], layout: NtfLayout) -> str:
        key = (id(plan), ops, layout)
        known = _SOURCES.get(key)
        if known is not None and known[0] is plan:
            return known[1]
        join = plan.op(ops[0])
        assert isinstance(join, Join)
        source = generate_join_query([plan.op(n) for n in ops], plan.input_schema(join.probe),
                                     plan.input_schema(join.build), layout)
        _SOURCES.put(key, (plan, source))
        return source


# The C of a chain of the plans being mapped and compiled now: match_operations generates it to
# learn whether the chain can be generated at all, and compile generates it again with the
# negotiated layout (most often the same), a few milliseconds each on the path of every job. Keyed
# by the plan's identity (each entry holds its plan, so that the id is not reused while the entry
# lives), the chain's names and the layout; not by the operations' values, whose equality would
# take the literals -0.0 and 0.0 for one. Few are kept: each holds its plan alive, and a plan may
# be large (a 100,000-value IN list); a job's chains are matched and compiled within moments.
_SOURCES: BoundedMemo[tuple, tuple[LogicalPlan, str]] = BoundedMemo(64)


class HashJoinInstance(ProcessNca):
    driver = "join"

    def params(self) -> dict[str, str]:
        """`rf.out 1` when the compiler planned a runtime filter from this join
        (docs/runtime-filters.md): the build phase then makes it and reports it (`rfilter`)."""
        return {"rf.out": "1"} if any(f.role == "build" for f in self.spec.runtime_filters) else {}

    def generate_source(self) -> str:
        return HashJoinNca._generate(self.spec.plan, self.spec.ops, self.spec.outputs[0].spec.layout)
