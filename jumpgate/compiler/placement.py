"""Placement: which host each NCA instance of a staged pipeline runs on (the step after staging and
scaling out, thesis §3.3.4).

An instance may run on a host whose `kinds` include its `ResourceRequest.deployment` (software
NCAs ask for "local": a process). An instance no host can run (a switch: the network itself hosts
it, and its plugin reaches the device) is placed on no host. Instances are placed in id order, a
topological order, so every instance's producers are placed before it.

- **An instance that reads files** runs only on a host that holds all of them (the storage says
  which, `Read.holders`; a data root every host shares says nothing). The scans of a read split
  over nodes (`scale_out.py`) come already placed, each on the node holding its part. Among the
  hosts that can run it, an instance goes where its stages leave the most cores free after what is
  already placed there (the NCAs of one stage run together, so they are spread over hosts before
  any host is oversubscribed), ties to the first host the deployer listed.
- **An instance fed by other instances** (a join, an aggregation, a shuffle, a relay) goes, among
  the hosts with its cores free in every one of its stages, to the one where most of the bytes it
  receives are produced: bytes between instances of one host do not cross the network. Ties, and
  inputs of unknown size, fall back to the rule above. When no host has its cores free, it goes to
  the least oversubscribed host (the rule above), ties to the one producing most of its input.

Bytes are a rough estimate (`edge_bytes`): what a scan emits is taken to be the size of the files
it reads, what any other instance emits the bytes it receives, split evenly over its output ports
(a shuffle's partitions), each destination of a port getting all of it. That is an upper bound
(filters, projections, aggregations and NTF's fixed widths usually shrink data), but it ranks
hosts by what decides the cost of moving data: which files sit where.

The choice is recorded in the pipeline (`NcaNode.host`, and `NcaNode.placement` saying why when
there was a choice) so that the executor, the job's answer and its page all say where each
instance ran.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..contract.errors import MappingError
from ..dataflow.plan import Read
from ..nca.deployment import Host
from ..nca.interface import FILE
from .pipeline import NcaNode, StagedPipeline


@dataclass(frozen=True, slots=True)
class NodeFile:
    """One file an instance reads: its read, its file input port, size and holders (() for any)."""

    read: str
    port: int
    path: str
    size: int
    holders: tuple[str, ...]


def node_files(pipeline: StagedPipeline, node: NcaNode) -> list[NodeFile]:
    """Every file the instance reads, in port then file order."""
    out = []
    for i, port in enumerate(node.inputs):
        if port.spec.transport != FILE:
            continue
        read = pipeline.plan.op(port.source.op)
        assert isinstance(read, Read)  # a file port is a read's
        size = dict(zip(read.paths, read.sizes))
        holders = dict(zip(read.paths, read.holders))
        out += [NodeFile(read.name, i, path, size.get(path, 0), holders.get(path, ())) for path in port.files]
    return out


def able_hosts(node: NcaNode, hosts: Sequence[Host]) -> list[Host]:
    """The hosts that can run the instance's kind of NCA, in the deployer's order."""
    return [h for h in hosts if node.resources.deployment in h.kinds]


def edges_into(pipeline: StagedPipeline) -> dict[str, list[int]]:
    """Per NCA id, the indexes in `pipeline.edges` of the edges arriving at it from other NCAs."""
    into: dict[str, list[int]] = {}
    for i, e in enumerate(pipeline.edges):
        if not e.to_client:
            into.setdefault(e.consumer, []).append(i)
    return into


def edge_bytes(pipeline: StagedPipeline) -> list[int]:
    """Estimated bytes on each edge of `pipeline.edges` (see the module docstring)."""
    per_edge = [0] * len(pipeline.edges)
    into = edges_into(pipeline)
    out: dict[str, list[int]] = {}
    for i, e in enumerate(pipeline.edges):
        out.setdefault(e.producer, []).append(i)
    for node in pipeline.ncas:  # topological: producers first
        received = sum(per_edge[i] for i in into.get(node.id, ()))
        emitted = sum(f.size for f in node_files(pipeline, node)) + received
        for i in out.get(node.id, ()):
            per_edge[i] = emitted // max(1, len(node.outputs))
    return per_edge


@dataclass
class _Placer:
    pipeline: StagedPipeline
    hosts: Sequence[Host]
    load: dict[tuple[int, str], int]  # (stage, host) -> cores placed
    where: dict[str, str | None]  # NCA id -> its host, for the instances placed so far
    sizes: list[int]  # edge_bytes
    into: dict[str, list[int]]  # edges_into

    def oversubscribed(self, node: NcaNode, h: Host) -> int:
        """How far beyond its cores `h` already is in the worst of the instance's stages."""
        return max((self.load.get((s, h.name), 0) - h.cores for s in node.stages), default=0)

    def fits(self, node: NcaNode, h: Host) -> bool:
        return all(self.load.get((s, h.name), 0) + node.resources.cores <= h.cores for s in node.stages)

    def charge(self, node: NcaNode, h: Host) -> None:
        for s in node.stages:
            self.load[(s, h.name)] = self.load.get((s, h.name), 0) + node.resources.cores
        self.where[node.id] = h.name

    def local_bytes(self, node: NcaNode) -> dict[str, int]:
        """Per host, the estimated bytes the instance receives from instances placed there."""
        out: dict[str, int] = {}
        for i in self.into.get(node.id, ()):
            host = self.where.get(self.pipeline.edges[i].producer)
            if host is not None:
                out[host] = out.get(host, 0) + self.sizes[i]
        return out

    def by_cores(self, node: NcaNode, able: list[Host]) -> tuple[Host, str]:
        best = min(able, key=lambda h: (self.oversubscribed(node, h), self.hosts.index(h)))
        return best, f"most cores free in stage(s) {_stages(node)} among {', '.join(h.name for h in able)}"

    def by_bytes(self, node: NcaNode, able: list[Host]) -> tuple[Host, str]:
        local = self.local_bytes(node)
        total = sum(self.sizes[i] for i in self.into.get(node.id, ()))

        def produced(host: str) -> str:
            if not total:
                return "the size of its input is not known"
            return f"{describe_bytes(local.get(host, 0))} of the ~{describe_bytes(total)} it receives are produced on {host}"

        free = [h for h in able if self.fits(node, h)]
        if free:
            best = min(free, key=lambda h: (-local.get(h.name, 0), self.oversubscribed(node, h), self.hosts.index(h)))
            return best, (f"{produced(best.name)}; {node.resources.cores} core(s) free in stage(s) "
                          f"{_stages(node)} on {', '.join(h.name for h in free)}")
        best = min(able, key=lambda h: (self.oversubscribed(node, h), -local.get(h.name, 0), self.hosts.index(h)))
        return best, (f"no node has {node.resources.cores} core(s) free in stage(s) {_stages(node)}, "
                      f"{best.name} is the least oversubscribed; {produced(best.name)}")

    def place(self, node: NcaNode) -> NcaNode:
        able = able_hosts(node, self.hosts)
        if node.host is not None:  # a scan of a split read, put on the node holding its part
            host = next((h for h in able if h.name == node.host), None)
            if host is None:
                raise MappingError(f"{node.id} ({node.implementation}) was put on node {node.host!r}, "
                                   f"which cannot run it")
            self.charge(node, host)
            return node
        files = node_files(self.pipeline, node)
        constrained = [frozenset(f.holders) for f in files if f.holders]
        if constrained:
            holding = frozenset.intersection(*constrained)
            able = [h for h in able if h.name in holding]
            if not able:
                raise MappingError(spread_message(self.pipeline, node, self.hosts),
                                   path=self.pipeline.plan.op_paths.get(files[0].read))
        if not able:
            if node.resources.deployment == "local":  # a process, and no host runs processes
                raise MappingError(f"no host can run {node.id} ({node.implementation}): the deployer "
                                   f"offers {', '.join(h.name for h in self.hosts) or 'no hosts'}")
            self.where[node.id] = None
            return node  # hosted by the network (a switch) or by its own plugin
        fed = node.id in self.into
        best, why = self.by_bytes(node, able) if fed else self.by_cores(node, able)
        self.charge(node, best)
        # one possible host: nothing was chosen, and one node answers exactly as it always did
        return replace(node, host=best.name, placement=f"{best.name}: {why}" if len(able) > 1 else "")


def place(pipeline: StagedPipeline, hosts: Sequence[Host]) -> StagedPipeline:
    """The pipeline with every NCA instance's host recorded (see the module docstring)."""
    placer = _Placer(pipeline, hosts, {}, {}, edge_bytes(pipeline), edges_into(pipeline))
    return replace(pipeline, ncas=tuple(placer.place(node) for node in pipeline.ncas))


def spread_message(pipeline: StagedPipeline, node: NcaNode, hosts: Sequence[Host], why: str = "") -> str:
    """Why no node can run the instance with all its files: which node holds which files, and
    `why` the read is not split into one scan per node (by default: a file is on no node that
    can run it, or it was not asked to be)."""
    files = node_files(pipeline, node)
    by_holders: dict[tuple[str, ...], list[str]] = {}
    for f in files:
        by_holders.setdefault(f.holders, []).append(f.path)
    where = "; ".join(f"{', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''} on "
                      f"{', '.join(h) or 'any node'}" for h, paths in by_holders.items())
    reads = ", ".join(map(repr, sorted({f.read for f in files})))
    if why:
        return (f"no node holds all the files of read {reads} ({where}), and it cannot be split into "
                f"one scan per node: {why}")
    able = {h.name for h in able_hosts(node, hosts)}
    nowhere = [f.path for f in files if f.holders and not able.intersection(f.holders)]
    why = (f"{', '.join(nowhere[:3])}{' ...' if len(nowhere) > 3 else ''} is on no node that can run "
           f"{node.implementation} ({', '.join(sorted(able)) or 'none'})" if nowhere else
           "a read whose files are spread over nodes must be split into one scan per node first "
           "(compiler/scale_out.py)")
    return f"no node holds all the files of read {reads} ({where}): {why}"


def _stages(node: NcaNode) -> str:
    return ", ".join(map(str, node.stages))


def describe_bytes(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
