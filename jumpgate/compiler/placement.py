"""Placement: which host each NCA instance of a staged pipeline runs on (the step after staging).

An instance may run on a host whose `kinds` include its `ResourceRequest.deployment` (software
NCAs ask for "local": a process), and an instance that reads files only on a host that holds all
of them (the storage says which, `Read.holders`; a data root every host shares says nothing). An instance no host can run (a switch: the network itself
hosts it, and its plugin reaches the device) is placed on no host. Among the hosts that can run
it, an instance goes where its stages leave the most cores free after what is already placed
there (the NCAs of one stage run together, so they are spread over hosts before any host is
oversubscribed), ties to the first host the deployer listed. The
choice is recorded in the pipeline (`NcaNode.host`) so that the executor, the job's answer and
its page all say where each instance ran.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..contract.errors import MappingError
from ..dataflow.plan import Read
from ..nca.deployment import Host
from ..nca.interface import FILE
from .pipeline import NcaNode, StagedPipeline


def place(pipeline: StagedPipeline, hosts: Sequence[Host]) -> StagedPipeline:
    """The pipeline with every NCA instance's host recorded (see the module docstring)."""
    load: dict[tuple[int, str], int] = {}  # (stage, host) -> cores placed
    nodes = []
    for node in pipeline.ncas:
        kind = node.resources.deployment
        able = [h for h in hosts if kind in h.kinds]
        holding = _holding(pipeline, node)
        if holding is not None:
            able = [h for h in able if h.name in holding]
            if not able:
                reads = sorted({r for r, _, _ in _files(pipeline, node)})
                raise MappingError(_spread(pipeline, node), path=pipeline.plan.op_paths.get(reads[0]))
        if not able:
            if kind == "local":  # a process, and no host runs processes: nothing can run it
                raise MappingError(f"no host can run {node.id} ({node.implementation}): the deployer "
                                   f"offers {', '.join(h.name for h in hosts) or 'no hosts'}")
            nodes.append(node)  # hosted by the network (a switch) or by its own plugin
            continue
        best = min(able, key=lambda h: (max((load.get((s, h.name), 0) - h.cores for s in node.stages), default=0),
                                        hosts.index(h)))
        for s in node.stages:
            load[(s, best.name)] = load.get((s, best.name), 0) + node.resources.cores
        nodes.append(replace(node, host=best.name))
    return replace(pipeline, ncas=tuple(nodes))


def _files(pipeline: StagedPipeline, node: NcaNode) -> list[tuple[str, str, tuple[str, ...]]]:
    """(read, file, holders) of every file the instance reads."""
    out = []
    for port in node.inputs:
        if port.spec.transport != FILE:
            continue
        read = pipeline.plan.op(port.source.op)
        assert isinstance(read, Read)  # a file port is a read's
        holders = read.holders
        for i, path in enumerate(port.files):
            out.append((read.name, path, holders[i] if i < len(holders) else ()))
    return out


def _holding(pipeline: StagedPipeline, node: NcaNode) -> frozenset[str] | None:
    """The hosts holding every file the instance reads; None when no file constrains it."""
    sets = [frozenset(h) for _, _, h in _files(pipeline, node) if h]
    return frozenset.intersection(*sets) if sets else None


def _spread(pipeline: StagedPipeline, node: NcaNode) -> str:
    files = _files(pipeline, node)
    by_holders: dict[tuple[str, ...], list[str]] = {}
    for _, path, holders in files:
        by_holders.setdefault(holders, []).append(path)
    where = "; ".join(f"{', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''} on "
                      f"{', '.join(h) or 'any node'}" for h, paths in by_holders.items())
    reads = sorted({r for r, _, _ in files})
    return (f"no node holds all the files of read {', '.join(map(repr, reads))} ({where}); a read "
            "whose files are spread over nodes is not split into one scan per node yet (docs/deploy.md)")
