"""What several software NCA plugins share, so that no plugin module imports another: which
operations a chain fuses, the answers of the plugins that read NTF from another NCA, the
aggregation settings, and the instance of the chains that run on the `ntf_relay` driver.

The aggregation settings (the partial mode's table bound, aggregate.py) apply wherever an
aggregate runs: in the aggregation NCA and in a scan with a fused aggregate.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

from ...dataflow.expr import Column, Expr, walk
from ...dataflow.plan import (
    AggMode,
    Aggregate,
    Filter,
    LogicalPlan,
    Operation,
    Project,
    Shuffle,
    output_count,
)
from ...nca.fusion import fusable_chain
from ...nca.interface import NTF, InstanceContext, NcaError, OutputSpec, ResourceRequest, StreamSpec, Verdict
from .codegen.shuffle import generate_relay_query, is_contract_layout
from .process import ProcessNca
from .udp_transport import preferred_transport, transport_setting_problem

NTF_TRANSPORTS = ("tcp",)  # what the NTF readers take unless they say otherwise
RELAY_MAX_THREADS = 4  # workers take whole input streams; more help only with as many streams
TABLE_BYTES_PARAM = "agg.table_bytes"
TABLE_BYTES_ENV = "JUMPGATE_AGG_TABLE_BYTES"
DEFAULT_TABLE_BYTES = 8 << 20  # the thesis' partial aggregation bound (§2.1.2)


# ------------------------------------------------------------------ fusion


def filter_project_chain(plan: LogicalPlan, anchor: str) -> tuple[str, ...]:
    """`anchor`, then the filters and projections the fusion rule lets follow it."""
    return fusable_chain(plan, anchor, ("filter", "project"))


def wide_shuffle_key(op: Shuffle) -> str | None:
    """Why the software NCAs cannot shuffle by `op`'s keys, or None: jg_hash v1 (docs/hashing.md)
    defines no hash for a wide decimal (more than 18 digits, 128 bits) yet, and receivers
    partition by that hash, so such a key is refused rather than hashed some other way."""
    for i, k in enumerate(op.keys):
        if k.type is not None and k.type.is_wide_decimal:
            return (f"shuffle '{op.name}': keys[{i}] is {k.type}, a wide decimal (more than 18 digits), "
                    "which the shuffle hash (jg_hash v1) does not take yet")
    return None


def fuse_trailing_shuffle(plan: LogicalPlan, chain: tuple[str, ...]) -> tuple[str, ...]:
    """`chain` plus the shuffle that is the single consumer of its last operation, if any (the
    fusion rule: the last operation has exactly one consumer edge), unless it has a wide key."""
    consumers = plan.consumers(chain[-1])
    if len(consumers) == 1 and isinstance(consumers[0][0], Shuffle) and wide_shuffle_key(consumers[0][0]) is None:
        return (*chain, consumers[0][0].name)
    return chain


def fuse_trailing_aggregate(plan: LogicalPlan, chain: tuple[str, ...]) -> tuple[str, ...]:
    """`chain` plus the aggregate that is the single consumer of its last operation, and that
    aggregate's filters and projections; `chain` unchanged when no aggregate follows. Used by the
    scans: a fused complete or final aggregation is correct with several scan threads because the
    workers' tables are merged before any group is emitted."""
    consumers = plan.consumers(chain[-1])
    if len(consumers) != 1 or not isinstance(consumers[0][0], Aggregate):
        return chain
    return chain + filter_project_chain(plan, consumers[0][0].name)


def read_columns_used(plan: LogicalPlan, ops: tuple[str, ...]) -> set[str]:
    """The names of the columns of the read `ops[0]` that the chain after it needs: what its last
    projection or aggregate outputs, traced back through the chain (a filter or shuffle adds the
    columns it tests or hashes). A chain with neither needs every column. Columnar scans read
    only these (the generated query's column table), so they are what a thread count should
    weigh."""
    needed: set[str] | None = None  # None: every column the operation's input has
    for name in reversed(ops[1:]):
        op = plan.op(name)
        if isinstance(op, Project):
            needed = _names(c.expr for c in op.columns if needed is None or c.name in needed)
        elif isinstance(op, Aggregate):
            needed = _names(g.expr for g in op.group_by) | _names(a.expr for a in op.aggregates if a.expr is not None)
        elif isinstance(op, Filter) and needed is not None:
            needed |= _names([op.condition])
        elif isinstance(op, Shuffle) and needed is not None:
            needed |= _names(op.keys)
    read = plan.op(ops[0])
    names = {f.name for f in read.schema.fields}
    return names if needed is None else needed & names


def _names(exprs: Iterable[Expr]) -> set[str]:
    return {n.name for e in exprs for n in walk(e) if isinstance(n, Column)}


# ------------------------------------------------------------------ NTF input and output


def ntf_input_verdict(plan: LogicalPlan, ops: tuple[str, ...], inputs: tuple[StreamSpec, ...],
                      transports: tuple[str, ...] = NTF_TRANSPORTS) -> Verdict[None]:
    """One NTF input over one of `transports`, in the contract §2 layout of the first operation's
    input schema (what the runtime's NTF decoder reads)."""
    if len(inputs) != 1:
        return Verdict.no(f"reads exactly one input, got {len(inputs)}")
    spec = inputs[0]
    if spec.format != NTF or spec.transport not in transports or spec.layout is None:
        return Verdict.no(f"reads NTF over {', '.join(transports)} only, got {spec.describe()}")
    first = plan.op(ops[0])
    schema = plan.input_schema(first.input)  # type: ignore[union-attr]
    if not is_contract_layout(spec.layout, schema):
        return Verdict.no("reads only the contract §2 NTF layout of its input schema, not a custom layout")
    return Verdict.yes()


def tcp_outputs(plan: LogicalPlan, ops: tuple[str, ...], wanted: tuple[str | None, ...],
                layout, transports: tuple[str, ...] = NTF_TRANSPORTS) -> Verdict[tuple[OutputSpec, ...]]:
    """One OutputSpec per output port of the last operation (a shuffle has P), all `layout`, one
    stream per worker thread (the control plane picks the thread count), over the wanted
    transport when it is one of `transports`, else the preferred one (udp_transport.py)."""
    ports = output_count(plan.op(ops[-1]))
    bad = sorted({w for w in wanted if w and w not in transports})
    if bad:
        return Verdict.no(f"sends over {', '.join(transports)} only, not {', '.join(bad)}")
    free = preferred_transport(transports)  # where nothing insists (JUMPGATE_NCA_TRANSPORT)
    if free is None:
        return Verdict.no(transport_setting_problem())
    chosen = [(wanted[i] if i < len(wanted) else None) or free for i in range(ports)]
    return Verdict.yes(tuple(OutputSpec(StreamSpec(NTF, t, layout), streams=None) for t in chosen))


def relay_resources(plan: LogicalPlan, ops: tuple[str, ...]) -> ResourceRequest:
    """One worker thread at least. More help only when the input arrives on several streams (the
    runtime deals whole streams to workers; a worker without a stream just ends its outputs).
    Memory: every worker has a 1 MiB send buffer per output port (a shuffle has P ports)."""
    ports = output_count(plan.op(ops[-1]))
    return ResourceRequest(cores=1, max_cores=RELAY_MAX_THREADS, memory_mb=64 + ports * RELAY_MAX_THREADS)


class RelayInstance(ProcessNca):
    """An NTF-reading chain on the `ntf_relay` driver (the NTF filter/project NCA and the
    shuffle NCA)."""

    driver = "ntf_relay"

    def generate_source(self) -> str:
        ops = self.spec.operations()
        schema = self.spec.plan.input_schema(ops[0].input)
        return generate_relay_query(ops, schema, self.spec.inputs[0].spec.layout, self.spec.outputs[0].spec.layout)


# ------------------------------------------------------------------ aggregation settings


def table_bytes(context: InstanceContext) -> int:
    """The partial mode's table bound: instance settings, then the environment, then 8 MiB."""
    value = context.settings.get(TABLE_BYTES_PARAM) or os.environ.get(TABLE_BYTES_ENV) or DEFAULT_TABLE_BYTES
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise NcaError(f"{TABLE_BYTES_PARAM} must be a number of bytes, got {value!r}") from None
    if n < 1024:
        raise NcaError(f"{TABLE_BYTES_PARAM} must be at least 1024 bytes, got {n}")
    return n


def aggregation_params(ops: list[Operation], context: InstanceContext) -> dict[str, str]:
    """`param` settings of an NCA whose operations include an aggregate."""
    if any(isinstance(op, Aggregate) and op.mode is AggMode.PARTIAL for op in ops):
        return {TABLE_BYTES_PARAM: str(table_bytes(context))}
    return {}
