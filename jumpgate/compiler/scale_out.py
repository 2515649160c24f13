"""Scaling out over nodes (thesis §3.3.4): a read whose files are spread over nodes becomes one scan
per node, each reading the files its node holds, and the instances taking its rows partition-wise
(a join probing it with its build side broadcast, ...) run once per node next to those scans.

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

Partition-wise pipelines: an instance fed over the network by a split read's clones is cloned
too, once per clone, when it can work on the part of the rows one node holds, so those rows stay
on their node until they have shrunk (`_partition_wise`). It must take the clones' rows on one port
only, as the probe side of a join or the input of a filter, projection, shuffle or partial
aggregation, and the same safety holds for every operation it fused after that one; it may read no
files, and its other ports (a join's build side) must come from instances the split read does not
reach. Its clone k takes only clone k's rows, runs on clone k's node (why in `placement`) and keeps
the original's stages and threads; every other input fans out to all of its clones (a build
producer's port gets one destination per clone, each with stream ids from 0). Followers are found
in id order, so a chain of them (a join, then a partial aggregation, then another broadcast-build
join, ...) is cloned up to the first instance that is not per-partition safe (a complete or final
aggregation, a join the rows reach on the build side, an instance also receiving another split
read's rows): that one stays a single instance receiving every clone's output, and its
`expected_streams` grow. A complete aggregation there stays complete: it receives every row, and
after a join it has little left to do (TPC-H Q3's at SF 1: ~5 ms of CPU for 30K rows, in a query
of ~800 ms), so a partial aggregation per node would only add an NCA per node.
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
    JoinType,
    LogicalPlan,
    NamedExpr,
    Project,
    Shuffle,
    fresh_name,
    inputs_of,
)
from ..nca.deployment import Host
from ..nca.interface import FILE, InputPort
from .mapped import OperationDecision
from .pipeline import Edge, NcaNode, StagedPipeline, assign_streams, expected_streams, fed_by, stage_members
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
    return _chain(pipeline, node, prev, node.ops[node.ops.index(prev) + 1:])


def _chain(pipeline: StagedPipeline, node: NcaNode, prev: str, ops: Sequence[str]) -> _Path:
    """Walk `ops` of `node`, a fused chain in which each reads the one before, the first reading
    `prev`: may each see only a part of `prev`'s rows?"""
    inside = set(node.ops)
    for name in ops:
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
        elif isinstance(op, Join):  # a join but right_outer answers for each probe row alone
            if op.type is JoinType.RIGHT_OUTER:
                return _Path(refusal=f"right outer join '{name}' outputs the build rows no probe row "
                                     f"matched: it must see every probe row")
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
        partial_name = fresh_name(f"{op.name}_partial", taken)
        state = _partial_schema(op, plan.op_paths.get(op.name))
        ops += [replace(op, name=partial_name, mode=AggMode.PARTIAL), _final(op, partial_name, state)]
        schemas[partial_name] = state
        halves[partial_name] = op.name
        if op.name in paths:
            paths[partial_name] = paths[op.name]
    return LogicalPlan(plan.name, tuple(ops), schemas, paths), halves


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


# ------------------------------------------------------------------ the pipeline: what is cloned


def scale_out(pipeline: StagedPipeline, hosts: Sequence[Host]) -> StagedPipeline:
    """`pipeline` with every instance reading a read spread over `hosts` cloned once per node, and
    the instances taking its rows partition-wise with it (see the module docstring); unchanged
    when no read is spread."""
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
    return _clone(pipeline, _partition_wise(pipeline, parts, hosts)) if parts else pipeline


# ------------------------------------------------------------------ partition-wise followers


@dataclass(frozen=True, slots=True)
class _Split:
    """The instances cloned once per share of a split read: its scans (`scan[id] == id`) and the
    followers taking their rows partition-wise (`scan[id]`: the scan whose rows they take,
    `feeder[id]`: the instance sending them)."""

    shares: dict[str, list[Share]]
    scan: dict[str, str]
    feeder: dict[str, str]

    def partition_wise(self, producer: str, consumer: str) -> bool:
        """Does clone k of `producer` feed only clone k of `consumer`?"""
        return producer in self.scan and self.scan[producer] == self.scan.get(consumer)


def _partition_wise(pipeline: StagedPipeline, parts: dict[str, list[Share]], hosts: Sequence[Host]) -> _Split:
    """The split scans, and every instance that may follow them partition-wise, in id order (a
    topological order, so a chain of followers is found in one pass)."""
    split = _Split(dict(parts), {nid: nid for nid in parts}, {})
    reached: dict[str, frozenset[str]] = {}  # instance -> the split scans whose rows reach it
    for node in pipeline.ncas:
        ports = pipeline.input_edges(node.id)
        reached[node.id] = frozenset({node.id} & parts.keys()).union(
            *(reached[e.producer] for edges in ports for e in edges))
        if node.id in split.scan:
            continue
        fed = _follows(pipeline, node, ports, split, reached, hosts)
        if fed is not None:
            scan = split.scan[fed]
            split.shares[node.id], split.scan[node.id], split.feeder[node.id] = parts[scan], scan, fed
    return split


def _follows(pipeline: StagedPipeline, node: NcaNode, ports: list[list[Edge]], split: _Split,
             reached: dict[str, frozenset[str]], hosts: Sequence[Host]) -> str | None:
    """The cloned instance whose clones `node` may follow partition-wise (clone k taking only
    clone k's rows), or None: it must take them on one port only, get everything else from
    instances their split read does not reach (a join's whole build side, sent to every clone),
    read no files, run on every node of the split, and be per-partition safe from the first
    operation reading them on."""
    fed = [i for i, edges in enumerate(ports) if any(e.producer in split.scan for e in edges)]
    if len(fed) != 1 or any(port.spec.transport == FILE for port in node.inputs):
        return None
    [port] = fed
    feeders = {e.producer for e in ports[port]}
    if len(feeders) != 1:  # a port takes one logical edge: one producer
        return None
    [feeder] = feeders
    scan = split.scan[feeder]
    others = [e.producer for i, edges in enumerate(ports) if i != port for e in edges]
    if any(scan in reached[p] for p in others):  # a build side made of the same rows
        return None
    able = {h.name for h in able_hosts(node, hosts)}
    if any(s.host not in able for s in split.shares[scan]):  # e.g. a switch, which no node runs
        return None
    path = _from_port(pipeline, node, node.inputs[port].source)
    return feeder if not path.refusal and path.complete is None else None


def _from_port(pipeline: StagedPipeline, node: NcaNode, source: InputRef) -> _Path:
    """What the rows arriving over `source` meet inside `node`, from the first operation reading
    them: a complete aggregation stops a follower as any refusal does (it stays one instance
    receiving every clone's rows)."""
    entry = next((i for i, name in enumerate(node.ops) if source in inputs_of(pipeline.plan.op(name))), None)
    if entry is None:  # a converter re-encodes each row on its own
        return _Path() if node.converter else _Path(refusal=f"no operation of {node.id} reads {source}")
    return _chain(pipeline, node, source.op, node.ops[entry:])


# ------------------------------------------------------------------ the pipeline: clones


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


def _pairs(e: Edge, new: _Renumbered, split: _Split) -> list[tuple[str, str]]:
    """(producer, consumer) of each copy of edge `e`: a clone sends where the original did, to
    each instance of its consumer, except that a follower's clone k takes only clone k's rows."""
    producers = new.ids[e.producer]
    if e.to_client:
        return [(p, e.consumer) for p in producers]
    consumers = new.ids[e.consumer]
    if split.partition_wise(e.producer, e.consumer):
        return list(zip(producers, consumers, strict=True))
    return [(p, c) for p in producers for c in consumers]  # e.g. a join's build side, to every clone


def _clone(pipeline: StagedPipeline, split: _Split) -> StagedPipeline:
    new = _Renumbered.of(pipeline, split.shares)
    edges = [replace(e, producer=p, consumer=c) for e in pipeline.edges for p, c in _pairs(e, new, split)]
    edges = assign_streams(edges, new.order())
    expected = expected_streams(edges)
    instances = {old: list(zip(new.ids[old], (s.host for s in shares))) for old, shares in split.shares.items()}
    nodes = []
    for node in pipeline.ncas:
        for k, nid in enumerate(new.ids[node.id]):
            share = split.shares[node.id][k] if node.id in split.shares else None
            ports = tuple(_port(port, expected.get((nid, i, False), 0), share) for i, port in enumerate(node.inputs))
            clone = replace(node, id=nid, inputs=ports)
            if share is not None:
                clone = replace(clone, host=share.host, placement=_why(pipeline, node, k, split, new, instances))
            nodes.append(clone)
    first_feeder: dict[str, str] = {}
    for e in edges:
        if e.to_client:
            first_feeder.setdefault(e.consumer, e.producer)
    outputs = {name: replace(out, expected_streams=expected[(name, 0, True)], producer=first_feeder[name])
               for name, out in pipeline.outputs.items()}
    return replace(pipeline, ncas=tuple(nodes), edges=tuple(edges), outputs=outputs,
                   stages=stage_members(nodes, len(pipeline.stages)),
                   decisions=_decisions(pipeline, split, new, instances, edges))


def _port(port: InputPort, expected: int, share: Share | None) -> InputPort:
    """A clone's input port: its share of the files, or the streams now arriving."""
    if port.spec.transport == FILE:
        return port if share is None else replace(port, files=share.files)
    return replace(port, expected_streams=expected)


def _instances_text(instances: list[tuple[str, str]]) -> str:
    return ", ".join(f"{nid} on {host}" for nid, host in instances)


def _read_of(pipeline: StagedPipeline, scan: str) -> str:
    return node_files(pipeline, pipeline.node(scan))[0].read


def _why(pipeline: StagedPipeline, node: NcaNode, k: int, split: _Split, new: _Renumbered,
         instances: dict[str, list[tuple[str, str]]]) -> str:
    """Why clone k of `node` runs on its share's node: it scans that node's files, or it takes
    the rows of the instance scanning them (through `feeder`'s clone k)."""
    share, scan = split.shares[node.id][k], split.scan[node.id]
    read = _read_of(pipeline, scan)
    if scan == node.id:
        files = node_files(pipeline, node)
        names = ", ".join(p.rsplit("/", 1)[-1] for p in share.files[:3]) + (" ..." if len(share.files) > 3 else "")
        return (f"{share.host}: holds {len(share.files)} of the {len(files)} files of read '{read}' "
                f"({names}; {describe_bytes(share.bytes)}); the read is split into one scan per node: "
                f"{_instances_text(instances[node.id])}")
    feeder, scanner = new.ids[split.feeder[node.id]][k], new.ids[scan][k]
    via = "the scan" if feeder == scanner else f"next to {scanner}, the scan"
    return (f"{share.host}: takes its rows from {feeder} on {share.host}, {via} of {share.host}'s part of "
            f"read '{read}' (split over nodes); one instance per part: {_instances_text(instances[node.id])}")


def _decisions(pipeline: StagedPipeline, split: _Split, new: _Renumbered,
               instances: dict[str, list[tuple[str, str]]], edges: list[Edge]) -> dict[str, OperationDecision]:
    """The decisions with the new ids: an operation of a split instance names its first clone and
    lists them all; a send names the NCAs that feed it."""
    feeding: dict[str, set[str]] = {}
    for e in edges:
        if e.to_client:
            feeding.setdefault(e.consumer, set()).add(e.producer)
    out = {}
    for name, dec in pipeline.decisions.items():
        if dec.nca is None:  # a send
            feeders = sorted(feeding.get(name, ()))
            out[name] = replace(dec, note=fed_by(dec.note, feeders))
            continue
        note = dec.note
        if dec.nca in instances:
            scan = split.scan[dec.nca]
            why = ("split over nodes, one instance per node holding the read's files" if scan == dec.nca else
                   f"taken partition-wise with read '{_read_of(pipeline, scan)}', split over nodes: one "
                   f"instance per part")
            note = (f"{note}; " if note else "") + f"{why}: {_instances_text(instances[dec.nca])}"
        out[name] = replace(dec, nca=new.ids[dec.nca][0], note=note)
    return out
