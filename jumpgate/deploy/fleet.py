"""A fleet of nodes from an inventory (deploy/inventory.py): one deployer per node, behind the one
`Deployer` interface, so the compiler's placement and the executor see hosts and nothing else; and
one storage over the nodes' data roots, which says which nodes hold each file.

Each call about a started instance goes to the deployer of the node it runs on. Nodes reached
`local` are processes of this machine bound to the node's address and counted against the node's
cores: several such nodes partition one machine (its addresses and its cores) as separate hosts.
"""
from __future__ import annotations

from pathlib import Path

from ..dataflow.storage import FileFacts, LocalStorage, Storage
from ..nca.deployment import ControlChannel, Deployer, Host
from .inventory import Inventory
from .local import LocalDeployer
from .warm import WarmSettings


class FleetDeployer(Deployer):
    kind = "fleet"

    def __init__(self, inventory: Inventory, warm: WarmSettings | None = None, spare_root: Path | None = None) -> None:
        self._nodes: dict[str, Deployer] = {}
        for node in inventory.nodes:
            spares = spare_root / node.name if spare_root is not None else None
            self._nodes[node.name] = LocalDeployer(node.address, warm, spares, node.cores, name=node.name)

    def _of(self, host: Host) -> Deployer:
        try:
            return self._nodes[host.name]
        except KeyError:
            raise ValueError(f"no node named {host.name!r} in the inventory") from None

    def hosts(self) -> list[Host]:
        return [h for d in self._nodes.values() for h in d.hosts()]

    def ship(self, host: Host, artifact: Path) -> str:
        return self._of(host).ship(host, artifact)

    def start(self, host: Host, argv: list[str], work_dir: Path, name: str, *,
              reuse: bool = False) -> ControlChannel:
        return self._of(host).start(host, argv, work_dir, name, reuse=reuse)

    def stop(self, channel: ControlChannel, grace: float = 2.0) -> None:
        self._of(channel.host).stop(channel, grace)

    def activity(self, channel: ControlChannel) -> tuple[int, ...] | None:
        return self._of(channel.host).activity(channel)

    def log_tail(self, channel: ControlChannel, limit: int = 2000) -> str:
        return self._of(channel.host).log_tail(channel, limit)

    def warm_up(self, host: Host, argv: list[str]) -> None:
        self._of(host).warm_up(host, argv)

    def running(self) -> list[ControlChannel]:
        return [c for d in self._nodes.values() for c in d.running()]

    def running_on(self, host: Host) -> list[ControlChannel]:
        return self._of(host).running()

    def spares(self) -> list[int]:
        return sorted(p for d in self._nodes.values() for p in d.spares())

    def close_spares(self) -> None:
        for d in self._nodes.values():
            d.close_spares()

    def shutdown(self) -> None:
        for d in self._nodes.values():
            d.shutdown()


class FleetStorage:
    """The nodes' data roots as one `Storage`: a path names a file of every node whose data root
    has it. The first such node (in inventory order) gives its real path and size; the holders are
    the nodes that have it at that same real path (a root shared by several nodes), so an NCA on
    any holder reads it by the path the plan carries. A path no node has is answered by the first
    node, so the error says what the rules say for one data root."""

    def __init__(self, roots: dict[str, Storage]) -> None:
        self.roots = roots

    def stat(self, relative: str) -> FileFacts:
        answers = [(name, storage.stat(relative)) for name, storage in self.roots.items()]
        held = [(name, f) for name, f in answers if f.inside and f.is_file]
        if not held:
            outside = next((f for _, f in answers if not f.inside), None)
            return outside or answers[0][1]
        _, first = held[0]
        holders = tuple(name for name, f in held if f.real == first.real)
        return FileFacts(first.real, True, True, True, first.size, holders)

    def glob(self, pattern: str) -> list[str]:
        return sorted({m for storage in self.roots.values() for m in storage.glob(pattern)})


def fleet_storage(inventory: Inventory, default_root: Path) -> FleetStorage:
    """Each node's data root (the server's --data-root where the inventory names none)."""
    return FleetStorage({n.name: LocalStorage(n.data_root or default_root) for n in inventory.nodes})
