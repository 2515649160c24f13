"""Scaling out over nodes (thesis §3.3.4): a read whose files are spread over nodes becomes one scan
per node, each reading the files its node holds.

The storage says, per file of a read, which nodes hold it (`Read.holders`; empty: any node). When
no node that can run the read's NCA holds all of its files, `scale_out` rewrites the staged
pipeline before placement: the instance holding the read is cloned once per node that gets a part
of the files; each clone reads only its part, is put on its node (`NcaNode.host`, and why in
`NcaNode.placement`), and sends where the original sent. The consumers' `expected_streams` grow by
the clones' streams and stream ids are assigned again as `pipeline.py` does (per destination, in
NCA id then port order). Ids are renumbered `nca0, nca1, ...` with the clones in the original's
place, which keeps them a topological order; `stages`, `decisions` (an operation of a split NCA
names its first clone and lists all of them) and the clients' `outputs` follow. A read one node
holds entirely stays one scan, so a single node's pipelines are not touched.

Which node scans which file: a file only one node holds goes there; the others, largest first
(`Read.sizes`), go to the node holding them with the fewest bytes so far, so the parts are
balanced by bytes over the nodes that can take them.

What may be cloned: the read's rows pass through the instance's fused operations, and each clone
sees only its part of them, while whatever consumes the clones' outputs receives all of them. So
every operation on that path must be per-partition safe: filter, project, shuffle (each clone
sends partition p to the same consumer), a partial aggregation, and a join the read feeds on its
probe side while its build side arrives over the network (then every clone needs the whole build
side: the build producer's port fans out to each clone, which the process protocol supports with
one `dest` per destination). A complete aggregation is not safe: `compile_plan` rewrites it into a
partial and a final aggregation (`split_aggregates`) and maps the plan again, so that the final one
is an instance of its own receiving every clone's partial rows. Anything else (a final
aggregation, the build side of a join fused with the read, an operation of unknown kind) is a
`MappingError` (HTTP 422) naming the read, which node holds which files, and why; its path is the
read's request path.

Instances fed by the clones over the network are not cloned: a join, an aggregation or a shuffle
receiving a split read on any port gets every part there, so a split read may feed a separate
join's build side as well as its probe side.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..contract.errors import MappingError
from ..contract.types import Field, Schema
from ..dataflow.aggregates import partial_fields
from ..dataflow.expr import Column
from ..dataflow.plan import (
    AggFn,
    AggMode,
    Aggregate,
    AggregateCall,
    Filter,
    InputRef,
    Join,
    LogicalPlan,
    NamedExpr,
    Project,
    Shuffle,
    inputs_of,
)
from ..nca.deployment import Host
from ..nca.interface import FILE, InputPort
from .mapped import OperationDecision
from .pipeline import Edge, NcaNode, StagedPipeline, assign_streams, expected_streams, fed_by
from .placement import NodeFile, able_hosts, describe_bytes, node_files, spread_message


@dataclass(frozen=True, slots=True)
class Share:
    """The part of a spread read one node scans: its files, in the read's order, and their bytes."""

    host: str
    files: tuple[str, ...]
    bytes: int


def shares(pipeline: StagedPipeline, node: NcaNode, hosts: Sequence[Host]) -> list[Share] | None:
    """How the instance's files are split over the nodes that can run it, in the deployer's
    order; None when it reads no files, when one node holds them all (it stays one scan), or
    when a file is on no such node (placement says which)."""
    files = node_files(pipeline, node)
    names = [h.name for h in able_hosts(node, hosts)]
    candidates = [[n for n in names if not f.holders or n in f.holders] for f in files]
    if not files or any(not c for c in candidates) or set(names).intersection(*candidates):
        return None
    bytes_on = dict.fromkeys(names, 0)
    taken: dict[str, list[int]] = {n: [] for n in names}
    # files with one holder first (no choice), then the largest first: greedy balancing by bytes
    for i in sorted(range(len(files)), key=lambda i: (len(candidates[i]) > 1, -files[i].size, i)):
        best = min(candidates[i], key=lambda n: (bytes_on[n], names.index(n)))
        taken[best].append(i)
        bytes_on[best] += files[i].size
    return [Share(n, tuple(files[i].path for i in sorted(taken[n])), bytes_on[n]) for n in names if taken[n]]


@dataclass(frozen=True, slots=True)
class _Path:
    """What the read's rows meet inside its instance: the first complete aggregation (which
    `split_aggregates` can fix), or why the instance cannot be cloned at all."""

    complete: str | None = None
    refusal: str = ""


def _follow(pipeline: StagedPipeline, node: NcaNode, files: list[NodeFile]) -> _Path:
    """Walk the operations the read's rows pass through inside `node`, in chain order."""
    if len({f.port for f in files}) > 1:
        return _Path(refusal=f"{node.id} reads several reads' files")
    prev = files[0].read
    if prev not in node.ops:
        return _Path(refusal=f"{node.id} reads the files of '{prev}' without taking the read")
    inside = set(node.ops)
    for name in node.ops[node.ops.index(prev) + 1:]:  # a fused chain: each reads the one before
        op = pipeline.plan.op(name)
        if prev not in {r.op for r in inputs_of(op)}:
            return _Path(refusal=f"'{name}', fused with it, does not read '{prev}'")
        if isinstance(op, (Filter, Project, Shuffle)):
            pass
        elif isinstance(op, Aggregate):
            if op.mode is AggMode.COMPLETE:
                return _Path(complete=name)
            if op.mode is AggMode.FINAL:
                return _Path(refusal=f"final aggregation '{name}' is fused with it: each node's scan "
                                     f"would merge only its own node's partial rows")
        elif isinstance(op, Join):
            if op.build.op == prev:
                return _Path(refusal=f"it feeds the build side of join '{name}' fused with it: every "
                                     f"probe row must meet the whole build side")
            if op.probe.op != prev or op.build.op in inside:
                return _Path(refusal=f"join '{name}' fused with it does not get its build side over "
                                     f"the network")
        else:
            return _Path(refusal=f"'{name}' ({op.kind}), fused with it, is not known to give the same "
                                 f"answer on parts of its input")
        prev = name
    return _Path()


def _refusal(pipeline: StagedPipeline, node: NcaNode, hosts: Sequence[Host], why: str) -> MappingError:
    read = node_files(pipeline, node)[0].read
    return MappingError(spread_message(pipeline, node, hosts, why), path=pipeline.plan.op_paths.get(read))


def aggregates_to_split(pipeline: StagedPipeline, hosts: Sequence[Host]) -> list[str]:
    """The complete aggregations fused with a read that must be split over nodes (in plan order):
    `compile_plan` turns each into a partial and a final one. Raises the `MappingError` of a read
    that cannot be split for another reason."""
    out = []
    for node in pipeline.ncas:
        if shares(pipeline, node, hosts) is None:
            continue
        path = _follow(pipeline, node, node_files(pipeline, node))
        if path.refusal:
            raise _refusal(pipeline, node, hosts, path.refusal)
        if path.complete is not None:
            out.append(path.complete)
    return [op.name for op in pipeline.plan.ops if op.name in out]


# ------------------------------------------------------------------ the plan: partial + final


def split_aggregates(plan: LogicalPlan, names: Sequence[str]) -> tuple[LogicalPlan, dict[str, str]]:
    """`plan` with each complete aggregation in `names` replaced by a partial one (`NAME_partial`,
    fed by its input) and a final one (named as before, so its consumers and its request path
    stay), and the name of each partial one's aggregation. The final one's output is the
    complete one's (dataflow/aggregates.py)."""
    ops, schemas, paths = [], dict(plan.schemas), dict(plan.op_paths)
    halves: dict[str, str] = {}
    taken = {op.name for op in plan.ops}
    for op in plan.ops:
        if op.name not in names:
            ops.append(op)
            continue
        assert isinstance(op, Aggregate) and op.mode is AggMode.COMPLETE
        partial_name = _fresh(f"{op.name}_partial", taken)
        state = _partial_schema(op, plan.op_paths.get(op.name))
        ops += [replace(op, name=partial_name, mode=AggMode.PARTIAL), _final(op, partial_name, state)]
        schemas[partial_name] = state
        halves[partial_name] = op.name
        if op.name in paths:
            paths[partial_name] = paths[op.name]
    return LogicalPlan(plan.name, tuple(ops), schemas, paths), halves


def _fresh(name: str, taken: set[str]) -> str:
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name}{n}"
    taken.add(out)
    return out


def _partial_schema(op: Aggregate, path: str | None) -> Schema:
    fields = [Field(g.name, g.expr.type) for g in op.group_by]  # type: ignore[arg-type]
    for call in op.aggregates:
        fields += partial_fields(call.name, call.fn, call.expr.type if call.expr is not None else None)
    try:
        return Schema(tuple(fields))
    except ValueError as e:  # e.g. a group column named like an average's `NAME__sum` state
        raise MappingError(f"aggregation '{op.name}' reads a read spread over nodes, so it must be split "
                           f"into a partial and a final aggregation, but its partial state would have a "
                           f"{e}", path=path) from None


def _final(op: Aggregate, partial_name: str, state: Schema) -> Aggregate:
    """The final half: group columns and state columns read by name from the partial's output."""
    def column(name: str) -> Column:
        i = state.index(name)
        return Column(name, i, state.fields[i].type)

    groups = tuple(NamedExpr(g.name, column(g.name)) for g in op.group_by)
    calls = tuple(AggregateCall(c.name, c.fn, column(c.name + "__sum" if c.fn is AggFn.AVG else c.name))
                  for c in op.aggregates)
    return Aggregate(op.name, InputRef(partial_name), groups, calls, AggMode.FINAL)


# ------------------------------------------------------------------ the pipeline: clones


def scale_out(pipeline: StagedPipeline, hosts: Sequence[Host]) -> StagedPipeline:
    """`pipeline` with every instance reading a read spread over `hosts` cloned once per node
    (see the module docstring); unchanged when no read is spread."""
    parts: dict[str, list[Share]] = {}
    for node in pipeline.ncas:
        split = shares(pipeline, node, hosts)
        if split is None:
            continue
        path = _follow(pipeline, node, node_files(pipeline, node))
        why = path.refusal or (f"complete aggregation '{path.complete}' is fused with it, and each "
                               f"node's scan would aggregate only its own rows (compile_plan splits it "
                               f"into a partial and a final aggregation first)" if path.complete else "")
        if why:
            raise _refusal(pipeline, node, hosts, why)
        parts[node.id] = split
    return _clone(pipeline, parts) if parts else pipeline


@dataclass
class _Renumbered:
    """Old NCA id -> the new ids of its instance(s): one, or one per share when it is split."""

    ids: dict[str, list[str]]

    @classmethod
    def of(cls, pipeline: StagedPipeline, parts: dict[str, list[Share]]) -> _Renumbered:
        ids: dict[str, list[str]] = {}
        n = 0
        for node in pipeline.ncas:  # the clones in the original's place: still topological
            count = len(parts[node.id]) if node.id in parts else 1
            ids[node.id] = [f"nca{n + k}" for k in range(count)]
            n += count
        return cls(ids)

    def order(self) -> list[str]:
        return [nid for ids in self.ids.values() for nid in ids]


def _clone(pipeline: StagedPipeline, parts: dict[str, list[Share]]) -> StagedPipeline:
    new = _Renumbered.of(pipeline, parts)
    edges: list[Edge] = []
    for e in pipeline.edges:  # every clone sends where the original did; a clone's input fans out
        consumers = [e.consumer] if e.to_client else new.ids[e.consumer]
        edges += [replace(e, producer=p, consumer=c) for p in new.ids[e.producer] for c in consumers]
    edges = assign_streams(edges, new.order())
    expected = expected_streams(edges)
    scans = {old: list(zip(new.ids[old], (s.host for s in split))) for old, split in parts.items()}
    nodes = []
    for node in pipeline.ncas:
        for k, nid in enumerate(new.ids[node.id]):
            share = parts[node.id][k] if node.id in parts else None
            ports = tuple(_port(port, expected.get((nid, i, False), 0), share) for i, port in enumerate(node.inputs))
            clone = replace(node, id=nid, inputs=ports)
            if share is not None:
                clone = replace(clone, host=share.host, placement=_why(pipeline, node, share, scans[node.id]))
            nodes.append(clone)
    outputs = {}
    for name, out in pipeline.outputs.items():
        into = [e for e in edges if e.to_client and e.consumer == name]
        outputs[name] = replace(out, expected_streams=expected[(name, 0, True)], producer=into[0].producer)
    return replace(pipeline, ncas=tuple(nodes), edges=tuple(edges), outputs=outputs,
                   stages=[[n.id for n in nodes if s in n.stages] for s in range(len(pipeline.stages))],
                   decisions=_decisions(pipeline.decisions, new, scans, edges))


def _port(port: InputPort, expected: int, share: Share | None) -> InputPort:
    """A clone's input port: its share of the files, or the streams now arriving."""
    if port.spec.transport == FILE:
        return port if share is None else replace(port, files=share.files)
    return replace(port, expected_streams=expected)


def _scans_text(scans: list[tuple[str, str]]) -> str:
    return ", ".join(f"{nid} on {host}" for nid, host in scans)


def _why(pipeline: StagedPipeline, node: NcaNode, share: Share, scans: list[tuple[str, str]]) -> str:
    files = node_files(pipeline, node)
    names = ", ".join(p.rsplit("/", 1)[-1] for p in share.files[:3]) + (" ..." if len(share.files) > 3 else "")
    return (f"{share.host}: holds {len(share.files)} of the {len(files)} files of read '{files[0].read}' "
            f"({names}; {describe_bytes(share.bytes)}); the read is split into one scan per node: "
            f"{_scans_text(scans)}")


def _decisions(decisions: dict[str, OperationDecision], new: _Renumbered,
               scans: dict[str, list[tuple[str, str]]], edges: list[Edge]) -> dict[str, OperationDecision]:
    """The decisions with the new ids: an operation of a split instance names its first clone and
    lists them all; a send names the NCAs that feed it."""
    out = {}
    for name, dec in decisions.items():
        if dec.nca is None:  # a send
            feeders = sorted({e.producer for e in edges if e.to_client and e.consumer == name})
            out[name] = replace(dec, note=fed_by(dec.note, feeders))
            continue
        note = dec.note
        if dec.nca in scans:
            note = (f"{note}; " if note else "") + \
                f"split over nodes, one instance per node holding the read's files: {_scans_text(scans[dec.nca])}"
        out[name] = replace(dec, nca=new.ids[dec.nca][0], note=note)
    return out
