"""A fleet of nodes from an inventory (deploy/inventory.py): one deployer per node, behind the one
`Deployer` interface, so the compiler's placement and the executor see hosts and nothing else; and
one storage over the nodes' data roots, which says which nodes hold each file.

Each call about a started instance goes to the deployer of the node it runs on. Nodes reached
`local` are processes of this machine bound to the node's address and counted against the node's
cores: several such nodes partition one machine (its addresses and its cores) as separate hosts,
and with `cpus` each node's NCAs run on its own CPUs only (deploy/affinity.py).
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..dataflow.storage import FileFacts, LocalStorage, Storage
from ..nca.deployment import ControlChannel, Deployer, Host
from .affinity import format_cpulist
from .inventory import Inventory
from .local import LocalDeployer
from .ssh import AgentStorage, SshDeployer
from .warm import WarmSettings

log = logging.getLogger(__name__)


class FleetDeployer(Deployer):
    kind = "fleet"

    def __init__(self, inventory: Inventory, warm: WarmSettings | None = None, spare_root: Path | None = None,
                 data_root: Path | None = None) -> None:
        """`data_root`: the server's, for the nodes whose inventory entry names none (as `storage`
        picks them); each host's NCAs open their files beneath its root."""
        self.inventory = inventory
        self._nodes: dict[str, Deployer] = {}
        for node in inventory.nodes:
            root = node.data_root or (str(data_root) if data_root is not None else None)
            if node.reach == "ssh":
                assert node.ssh is not None  # the inventory checks it
                x = node.ssh
                # as the inventory spells it: the node resolves paths itself (AgentStorage), so the
                # real paths it returns are under this root only when it names no symlink
                self._nodes[node.name] = SshDeployer(Host(node.name, node.address, node.core_count, data_root=root,
                                                          cpus=node.cpu_set),
                                                     x.host, x.port,
                                                     x.user, x.key_file, x.known_hosts,
                                                     x.accept_unknown_host_key, x.connect_timeout,
                                                     python=x.python, lease=x.lease_s,
                                                     cache_dir=x.cache_dir, warm=warm)
            else:
                spares = spare_root / node.name if spare_root is not None else None
                self._nodes[node.name] = LocalDeployer(node.address, warm, spares, node.core_count, name=node.name,
                                                       data_root=root, cpus=node.cpu_set)

    def node_states(self) -> list[tuple[Host, str, str]]:
        out = []
        for d in self._nodes.values():
            state, reason = (d.state, d.reason) if isinstance(d, SshDeployer) else ("up", "")
            out += [(h, state, reason) for h in d.hosts()]
        return out

    def node_info(self) -> dict[str, dict]:
        out = {}
        for node in self.inventory.nodes:
            d = self._nodes[node.name]
            info: dict = {"reach": node.reach}
            if node.cpus is not None:
                info["cpus"] = format_cpulist(node.cpu_set)
            if isinstance(d, SshDeployer):
                assert node.ssh is not None
                info["ssh"] = f"{node.ssh.user}@{node.ssh.host}:{node.ssh.port}"
                info["agent"] = d.health()
            out[node.name] = info
        return out

    def control_ports(self) -> list[int]:
        return sorted({port for d in self._nodes.values() for port in d.control_ports()})

    def storage(self, default_root: Path) -> FleetStorage:
        """Each node's data root (the server's --data-root where the inventory names none), each
        answered by the node: a local one by this machine, an SSH one by its agent."""
        roots: dict[str, Storage] = {}
        for node in self.inventory.nodes:
            root = node.data_root or str(default_root)
            d = self._nodes[node.name]
            roots[node.name] = AgentStorage(d, root) if isinstance(d, SshDeployer) else LocalStorage(root)
        return FleetStorage(roots)

    def _of(self, host: Host) -> Deployer:
        try:
            return self._nodes[host.name]
        except KeyError:
            raise ValueError(f"no node named {host.name!r} in the inventory") from None

    def hosts(self) -> list[Host]:
        """The nodes that are up: jobs are placed on those only."""
        return [h for h, state, _ in self.node_states() if state == "up"]

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
        # The nodes are asked at once: a remote answer is a round trip, and a request's parse asks
        # about each of its files.
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(roots)), thread_name_prefix="storage")

    def _answers(self, ask) -> list:
        """Each node's answer, in inventory order; a node that cannot answer now (down) holds
        nothing."""
        futures = [(name, self._pool.submit(ask, storage)) for name, storage in self.roots.items()]
        out = []
        for name, future in futures:
            try:
                out.append((name, future.result()))
            except OSError as e:
                log.warning("node %s cannot tell about its files: %s", name, e)
        return out

    def stat(self, relative: str) -> FileFacts:
        answers = self._answers(lambda storage: storage.stat(relative))
        if not answers:
            return FileFacts(relative, True, False, False)
        held = [(name, f) for name, f in answers if f.inside and f.is_file]
        if not held:
            outside = next((f for _, f in answers if not f.inside), None)
            return outside or answers[0][1]
        _, first = held[0]
        holders = tuple(name for name, f in held if f.real == first.real)
        return FileFacts(first.real, True, True, True, first.size, holders)

    def glob(self, pattern: str) -> list[str]:
        return sorted({m for _, matches in self._answers(lambda storage: storage.glob(pattern)) for m in matches})

