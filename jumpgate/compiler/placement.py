"""Placement: which host each NCA instance of a staged pipeline runs on (the step after staging).

An instance may run on a host whose `kinds` include its `ResourceRequest.deployment` (software
NCAs ask for "local": a process). An instance no host can run (a switch: the network itself
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
from ..nca.deployment import Host
from .pipeline import StagedPipeline


def place(pipeline: StagedPipeline, hosts: Sequence[Host]) -> StagedPipeline:
    """The pipeline with every NCA instance's host recorded (see the module docstring)."""
    load: dict[tuple[int, str], int] = {}  # (stage, host) -> cores placed
    nodes = []
    for node in pipeline.ncas:
        kind = node.resources.deployment
        able = [h for h in hosts if kind in h.kinds]
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
