"""The staged networked pipeline (SNP, thesis §3.3.3, §3.3.5): the NCA instances of a job, the
network edges between them and towards the clients, stream ids, and the stages they run in.

Built from a `MappedGraph` and the operations' stages by `build_pipeline`. The executor reads it
through `build_spec` (what each instance is told at compile time) and `output_edges` (where each
output port sends, to be turned into `Destination`s once the receivers' endpoints are known);
the REST layer through `to_json` (contract §4, POST /v1/jobs).

Stream ids (contract §3): every destination (an NCA input port, or a client's send) expects the
sum of the `streams` of the producer ports feeding it; each feeding port gets the ids
`first_stream .. first_stream + streams - 1`, assigned in NCA id then port order
(`assign_streams`, `expected_streams`). An output port may feed several destinations (a fan-out):
it sends everything to each of them, with each destination's own stream ids.

After building, a pipeline may be rewritten before placement: `scale_out.py` clones the scan of a
read spread over nodes (one instance per node) and the per-partition-safe NCAs it feeds (one
beside each scan), then `placement.py` records each instance's host and why (`NcaNode.host`,
`NcaNode.placement`).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property

from ..contract.ntf import NtfLayout
from ..dataflow.plan import InputRef, LogicalPlan, Read
from ..nca.interface import (
    FILE,
    InputPort,
    NcaSpec,
    OutputSpec,
    ResourceRequest,
    RuntimeFilterSpec,
    StreamSpec,
)
from . import cost as costs
from .mapped import Conversion, MappedGraph, OperationDecision, Placement, VerdictRecord
from .staging import stage_count


@dataclass(frozen=True)
class NcaNode:
    """One NCA instance. `stages` are global stage numbers, ascending; the instance's execute
    phase k runs in stage `stages[k]`. File input ports (a read's) expect no streams."""

    id: str
    implementation: str
    ops: tuple[str, ...]  # empty for a converter
    inputs: tuple[InputPort, ...]
    outputs: tuple[OutputSpec, ...]
    output_refs: tuple[InputRef, ...]
    stages: tuple[int, ...]
    resources: ResourceRequest
    converter: bool = False
    verdicts: dict[str, tuple[VerdictRecord, ...]] = field(default_factory=dict)  # per operation
    note: str = ""
    host: str | None = None  # where placement put it (compiler/placement.py); None: the network
    placement: str = ""  # why it runs on `host` (empty when there was no choice)
    runtime_filters: tuple[RuntimeFilterSpec, ...] = ()  # it makes or applies (runtime_filters.py)


@dataclass(frozen=True)
class Edge:
    """A network edge: output port `producer_port` of NCA `producer` sends the logical edge `ref`
    to input port `consumer_port` of NCA `consumer`, or, when `to_client`, to the client of send
    `consumer` (port 0). The producer uses stream ids `first_stream .. first_stream+streams-1`."""

    ref: InputRef
    producer: str
    producer_port: int
    consumer: str
    consumer_port: int
    to_client: bool
    spec: StreamSpec
    streams: int = 1
    first_stream: int = 0
    # keyed streams (docs/contract.md): a TCP edge between two NCAs that both declare them
    keyed: bool = False

    def to_json(self) -> dict:
        return {"from": self.producer, "from_port": self.producer_port, "to": self.consumer,
                "to_port": self.consumer_port, "client": self.to_client, "edge": str(self.ref),
                "format": self.spec.format, "transport": self.spec.transport,
                "streams": self.streams, "first_stream": self.first_stream, "keyed": self.keyed}


@dataclass(frozen=True)
class ClientOutput:
    """What the client of one send receives."""

    send: str
    layout: NtfLayout
    transport: str
    host: str
    port: int
    expected_streams: int
    source: InputRef  # the logical edge the send reads
    producer: str  # the NCA id sending to it

    def to_json(self) -> dict:
        return {"layout": self.layout.to_json(), "expected_streams": self.expected_streams}


@dataclass(frozen=True)
class StagedPipeline:
    plan: LogicalPlan
    ncas: tuple[NcaNode, ...]  # in id order: nca0, nca1, ...; a topological order
    edges: tuple[Edge, ...]
    outputs: dict[str, ClientOutput]  # per send, in plan order
    stages: list[list[str]]  # NCA ids running in each global stage
    op_stages: dict[str, tuple[int, ...]]
    decisions: dict[str, OperationDecision]
    cost: costs.Cost = ()
    stats: dict = field(default_factory=dict)
    # runtime filters from joins' build sides to the scans of their probe sides, and per join
    # why it has none (compiler/runtime_filters.py, docs/runtime-filters.md)
    runtime_filters: tuple = ()  # RuntimeFilterEdge
    runtime_filter_notes: dict[str, str] = field(default_factory=dict)

    # Lookups by NCA id are indexed once per pipeline (the executor, placement and scaling out ask
    # for every instance; a scan of all edges each time was quadratic in the size of the job).

    @cached_property
    def _by_id(self) -> dict[str, NcaNode]:
        return {n.id: n for n in self.ncas}

    @cached_property
    def _edges_from(self) -> dict[str, list[Edge]]:
        return _group(self.edges, lambda e: e.producer)

    @cached_property
    def _edges_into(self) -> dict[str, list[Edge]]:
        return _group((e for e in self.edges if not e.to_client), lambda e: e.consumer)

    def node(self, nca_id: str) -> NcaNode:
        return self._by_id[nca_id]

    def output_edges(self, nca_id: str) -> list[list[Edge]]:
        """Per output port of `nca_id`, the edges it sends on (several when it fans out)."""
        node = self.node(nca_id)
        out: list[list[Edge]] = [[] for _ in node.outputs]
        for e in self._edges_from.get(nca_id, ()):
            out[e.producer_port].append(e)
        return out

    def input_edges(self, nca_id: str) -> list[list[Edge]]:
        """Per input port of `nca_id`, the edges arriving on it (none for a file port)."""
        node = self.node(nca_id)
        out: list[list[Edge]] = [[] for _ in node.inputs]
        for e in self._edges_into.get(nca_id, ()):
            out[e.consumer_port].append(e)
        return out

    def build_spec(self, node: NcaNode | str, job_id: str = "") -> NcaSpec:
        n = self.node(node) if isinstance(node, str) else node
        return NcaSpec(id=n.id, implementation=n.implementation, plan=self.plan, ops=n.ops,
                       inputs=n.inputs, outputs=n.outputs, output_refs=n.output_refs,
                       stages=n.stages, resources=n.resources, job_id=job_id,
                       runtime_filters=n.runtime_filters)

    def part_files(self, node: NcaNode) -> tuple[str, ...]:
        """The files `node` reads when they are only part of its read's (one scan of a read split
        over nodes, compiler/scale_out.py); () otherwise."""
        out: list[str] = []
        for port in node.inputs:
            if port.spec.transport == FILE:
                read = self.plan.op(port.source.op)
                if isinstance(read, Read) and port.files != read.paths:
                    out += port.files
        return tuple(out)

    def _nca_json(self, n: NcaNode) -> dict:
        out = {"id": n.id, "implementation": n.implementation, "operations": list(n.ops),
               "stages": list(n.stages), "converter": n.converter, "host": n.host}
        if n.placement:  # only where placement had a choice: one node answers as it always did
            out["placement"] = n.placement
        files = self.part_files(n)
        if files:
            out["files"] = list(files)
        return out

    def to_json(self) -> dict:
        """The compile answer of contract §4 (`ncas`, `stages`, `outputs`), plus `edges`,
        `decisions` (why each operation went where it did), `runtime_filters` (those planned, and
        for the other joins why none) and `search` statistics. An NCA says
        why it runs on its host (`placement`) where placement had a choice, and which files it
        reads (`files`) when they are its node's part of a read split over nodes."""
        return {
            "ncas": [self._nca_json(n) for n in self.ncas],
            "stages": [list(s) for s in self.stages],
            "outputs": {name: o.to_json() for name, o in self.outputs.items()},
            "edges": [e.to_json() for e in self.edges],
            "decisions": {name: d.to_json() for name, d in self.decisions.items()},
            "runtime_filters": [*(f.to_json() for f in self.runtime_filters),
                                *({"join": join, "planned": False, "reason": why}
                                  for join, why in self.runtime_filter_notes.items())],
            "search": {"cost": list(self.cost), "cost_text": costs.describe(self.cost) if self.cost else "",
                       **self.stats},
        }


# ------------------------------------------------------------------ building


@dataclass
class _Draft:
    implementation: str
    ops: tuple[str, ...]
    outputs: tuple[OutputSpec, ...]
    output_refs: tuple[InputRef, ...]
    resources: ResourceRequest
    ports: list[InputPort] = field(default_factory=list)
    converter: bool = False
    note: str = ""
    index: int = -1


@dataclass
class _Builder:
    mapped: MappedGraph
    op_stages: dict[str, tuple[int, ...]]
    drafts: list[_Draft] = field(default_factory=list)
    producer: dict[InputRef, tuple[_Draft, int]] = field(default_factory=dict)
    links: list[tuple[InputRef, _Draft, int, _Draft | str, int]] = field(default_factory=list)

    def add(self, d: _Draft) -> _Draft:
        d.index = len(self.drafts)
        self.drafts.append(d)
        return d

    def converter(self, c: Conversion) -> _Draft:
        d = self.add(_Draft(c.implementation, (), (c.output,), (c.ref,), c.resources, converter=True,
                            note=f"converts {c.input.describe()} to {c.output.spec.describe()} "
                                 f"on {c.ref} -> {c.consumer}"))
        d.ports.append(InputPort(spec=c.input, source=c.ref))
        src, port = self.producer[c.ref]
        self.links.append((c.ref, src, port, d, 0))
        return d

    def placement(self, p: Placement) -> None:
        plan = self.mapped.plan
        convs = {(c.ref, c.consumer, c.index): c for c in p.input_conversions}
        pending: list[tuple[InputRef, _Draft, int, int]] = []
        ports: list[InputPort] = []
        for i, (edge, spec) in enumerate(zip(p.inputs, p.input_specs, strict=True)):
            if edge.ref is None:
                read = plan.op(edge.op)
                assert isinstance(read, Read)
                ports.append(InputPort(spec=StreamSpec(read.format.value, FILE), source=InputRef(read.name),
                                       expected_streams=0, files=read.paths))
                continue
            ports.append(InputPort(spec=spec, source=edge.ref))
            conv = convs.get((edge.ref, edge.op, edge.index))
            if conv is not None:
                pending.append((edge.ref, self.converter(conv), 0, i))
            else:
                src, port = self.producer[edge.ref]
                pending.append((edge.ref, src, port, i))
        me = self.add(_Draft(p.implementation, p.ops, p.outputs, p.output_refs, p.resources, ports))
        self.links += [(ref, src, port, me, i) for ref, src, port, i in pending]
        for port, ref in enumerate(p.output_refs):
            self.producer[ref] = (me, port)
        for c in p.send_conversions:
            self.links.append((c.ref, self.converter(c), 0, c.consumer, 0))

    def stages_of(self, d: _Draft) -> tuple[int, ...]:
        if d.converter:  # runs while its producer emits: the producer's last stage
            return (self.op_stages[d.output_refs[0].op][-1],)
        return tuple(sorted({s for op in d.ops for s in self.op_stages[op]}))


def build_pipeline(mapped: MappedGraph, op_stages: dict[str, tuple[int, ...]],
                   keyed: frozenset[str] | set[str] = frozenset()) -> StagedPipeline:
    """Assign NCA ids (`nca0`, ... in the mapper's topological search order, which finishes the
    build side of a join before its probe side; a converter comes just before its consumer, or
    just after the NCA feeding its client), edges, stream ids and stages. `keyed` names the
    implementations that speak keyed streams: an input port whose edges all join two of them
    (over TCP) is keyed."""
    b = _Builder(mapped, op_stages)
    for p in mapped.placements:
        b.placement(p)
    plan = mapped.plan
    converted_sends = {c.consumer for p in mapped.placements for c in p.send_conversions}
    for send in plan.sends:
        if send.name not in converted_sends:
            src, port = b.producer[send.input]
            b.links.append((send.input, src, port, send.name, 0))

    ids = {d.index: f"nca{d.index}" for d in b.drafts}
    edges = assign_streams([
        Edge(ref=ref, producer=ids[src.index], producer_port=port,
             consumer=dst if isinstance(dst, str) else ids[dst.index], consumer_port=dport,
             to_client=isinstance(dst, str), spec=src.outputs[port].spec, streams=src.outputs[port].streams)
        for ref, src, port, dst, dport in b.links], [ids[d.index] for d in b.drafts])

    impl_of = {ids[d.index]: d.implementation for d in b.drafts}
    port_keyed: dict[tuple[str, int], bool] = {}
    for e in edges:
        if not e.to_client:
            both = impl_of[e.producer] in keyed and impl_of[e.consumer] in keyed and e.spec.transport == "tcp"
            port_keyed[(e.consumer, e.consumer_port)] = port_keyed.get((e.consumer, e.consumer_port), True) and both
    edges = [replace(e, keyed=not e.to_client and port_keyed[(e.consumer, e.consumer_port)]) for e in edges]

    expected = expected_streams(edges)
    decisions = _decisions_with_ids(mapped.decisions, b.drafts, ids, edges)
    nodes = []
    for d in b.drafts:
        nid = ids[d.index]
        ports = tuple(port if port.spec.transport == FILE
                      else replace(port, expected_streams=expected.get((nid, i, False), 0))
                      for i, port in enumerate(d.ports))
        nodes.append(NcaNode(id=nid, implementation=d.implementation, ops=d.ops, inputs=ports,
                             outputs=d.outputs, output_refs=d.output_refs, stages=b.stages_of(d),
                             resources=d.resources, converter=d.converter,
                             verdicts={op: decisions[op].verdicts for op in d.ops}, note=d.note))

    outputs = {}
    to_client = _group((e for e in edges if e.to_client), lambda e: e.consumer)
    for send in plan.sends:
        into = to_client[send.name]
        spec = into[0].spec
        assert spec.layout is not None  # the mapper only connects NTF with a layout to a send
        outputs[send.name] = ClientOutput(send.name, spec.layout, send.transport, send.host, send.port,
                                          expected[(send.name, 0, True)], send.input, into[0].producer)
    stages = stage_members(nodes, stage_count(op_stages))
    return StagedPipeline(plan=plan, ncas=tuple(nodes), edges=tuple(edges), outputs=outputs,
                          stages=stages, op_stages=dict(op_stages), decisions=decisions,
                          cost=mapped.cost, stats=dict(mapped.stats))


def stage_members(nodes: Iterable[NcaNode], count: int) -> list[list[str]]:
    """The NCA ids running in each of `count` stages, in `nodes` order."""
    out: list[list[str]] = [[] for _ in range(count)]
    for n in nodes:
        for s in n.stages:
            out[s].append(n.id)
    return out


def _group(edges: Iterable[Edge], key) -> dict[str, list[Edge]]:
    out: dict[str, list[Edge]] = {}
    for e in edges:
        out.setdefault(key(e), []).append(e)
    return out


def expected_streams(edges: list[Edge] | tuple[Edge, ...]) -> dict[tuple[str, int, bool], int]:
    """Per destination (consumer, port, to_client), the streams arriving there."""
    expected: dict[tuple[str, int, bool], int] = {}
    for e in edges:
        key = (e.consumer, e.consumer_port, e.to_client)
        expected[key] = expected.get(key, 0) + e.streams
    return expected


FED_BY = "; fed by "


def fed_by(note: str, feeders: list[str]) -> str:
    """A send's decision note saying which NCAs feed it (replacing what it said before)."""
    base = note.split(FED_BY)[0]
    return f"{base}{FED_BY}{', '.join(feeders)}" if feeders else base


def assign_streams(edges: list[Edge], order: list[str]) -> list[Edge]:
    """Give each producer port feeding a destination its first stream id, in NCA id then port
    order, so that a destination's ids are 0 .. expected_streams - 1."""
    rank = {nid: i for i, nid in enumerate(order)}
    next_id: dict[tuple[str, int, bool], int] = {}
    first: dict[int, int] = {}
    for i in sorted(range(len(edges)), key=lambda k: (rank[edges[k].producer], edges[k].producer_port, k)):
        e = edges[i]
        key = (e.consumer, e.consumer_port, e.to_client)
        first[i] = next_id.get(key, 0)
        next_id[key] = first[i] + e.streams
    return [replace(e, first_stream=first[i]) for i, e in enumerate(edges)]


def _decisions_with_ids(decisions: dict[str, OperationDecision], drafts: list[_Draft],
                        ids: dict[int, str], edges: list[Edge]) -> dict[str, OperationDecision]:
    where = {op: ids[d.index] for d in drafts for op in d.ops}
    to_client = _group((e for e in edges if e.to_client), lambda e: e.consumer)
    out = {}
    for name, dec in decisions.items():
        if name in where:
            out[name] = replace(dec, nca=where[name])
        else:  # a send: say which NCA feeds it
            feeders = sorted({e.producer for e in to_client.get(name, ())})
            out[name] = replace(dec, note=fed_by(dec.note, feeders))
    return out
