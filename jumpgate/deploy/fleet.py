"""A fleet of nodes from an inventory (deploy/inventory.py): one deployer per node, behind the one
`Deployer` interface, so the compiler's placement and the executor see hosts and nothing else; and
one storage over the nodes' data roots, which says which nodes hold each file.

Each call about a started instance goes to the deployer of the node it runs on. Nodes reached
`local` are processes of this machine bound to the node's address and counted against the node's
cores: several such nodes partition one machine (its addresses and its cores) as separate hosts,
and with `cpus` each node's NCAs run on its own CPUs only (deploy/affinity.py).

Nodes of `kubernetes:` sources (deploy/kube_source.py) come and go while the server runs: the
fleet adds a pod deployer (deploy/kube_pod.py) when an agent pod becomes Ready and retires it when
the pod goes, so `node_states()`, `hosts()` and the storage are always the nodes of now. A retired
node's deployer is kept for the calls about its NCAs that are still under way (stop, log tail).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..dataflow.storage import FileFacts, LocalStorage, Storage, glob_with_facts
from ..nca.deployment import ControlChannel, Deployer, Host
from .affinity import format_cpulist
from .agent_deployer import AgentNodeDeployer, AgentStorage
from .inventory import Inventory, KubernetesSource
from .kube_pod import KubePodDeployer
from .kube_source import AgentPod, KubeNodeSource, read_secret
from .local import LocalDeployer
from .ssh import SshDeployer
from .warm import WarmSettings

log = logging.getLogger(__name__)

FIRST_LIST_WAIT_S = 15.0  # at start, how long the first answer of each source (and its pods' sessions) is awaited


class FleetDeployer(Deployer):
    kind = "fleet"

    def __init__(self, inventory: Inventory, warm: WarmSettings | None = None, spare_root: Path | None = None,
                 data_root: Path | None = None) -> None:
        """`data_root`: the server's, for the nodes whose inventory entry names none (as `storage`
        picks them); each host's NCAs open their files beneath its root."""
        self.inventory = inventory
        self.warm = warm
        self.data_root = data_root
        self._lock = threading.Lock()  # guards the three dicts below: sources change them at any time
        self._nodes: dict[str, Deployer] = {}
        self._info: dict[str, dict] = {}  # per node: what GET /v1/nodes says of where it came from
        self._retired: dict[str, Deployer] = {}
        for node in inventory.static_nodes:
            root = node.data_root or (str(data_root) if data_root is not None else None)
            info: dict = {"reach": node.reach}
            if node.cpus is not None:
                info["cpus"] = format_cpulist(node.cpu_set)
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
                info["ssh"] = f"{x.user}@{x.host}:{x.port}"
            else:
                spares = spare_root / node.name if spare_root is not None else None
                self._nodes[node.name] = LocalDeployer(node.address, warm, spares, node.core_count, name=node.name,
                                                       data_root=root, cpus=node.cpu_set)
            self._info[node.name] = info
        self.sources = [self._source(spec) for spec in inventory.sources]
        for source in self.sources:
            source.start()
        deadline = time.monotonic() + FIRST_LIST_WAIT_S
        for source in self.sources:  # the pods Ready now are nodes before the server takes jobs
            source.synced.wait(max(0.0, deadline - time.monotonic()))

    @property
    def dynamic(self) -> bool:
        """Whether nodes may come and go while the server runs."""
        return bool(self.sources)

    # ---------------------------------------------------------------- kubernetes sources

    def _source(self, spec: KubernetesSource) -> KubeNodeSource:
        try:
            secret = read_secret(spec.secret_file)
        except OSError as e:
            secret = b""
            failure = f"cannot read the agents' secret {spec.secret_file}: {e.strerror or e}"
        else:
            failure = "" if secret else f"the agents' secret {spec.secret_file} is empty"
        source = KubeNodeSource(spec, lambda pod: self._pod_ready(spec, source, secret, pod),
                                lambda name, why: self._pod_gone(source, name, why))
        if failure:  # the pods would all refuse the handshake: say why once, and do not watch
            source.fail(failure)
        return source

    def _pod_ready(self, spec: KubernetesSource, source: KubeNodeSource, secret: bytes, pod: AgentPod) -> None:
        with self._lock:
            taken = pod.name in self._nodes
        if taken:
            log.warning("pod %s/%s is not used: a node of that name exists already", pod.namespace, pod.name)
            return
        root = pod.data_root or (str(self.data_root) if self.data_root is not None else None)
        host = Host(pod.name, pod.ip, pod.cores, data_root=root)
        deployer = KubePodDeployer(host, pod.name, pod.namespace, spec.agent_port, secret, lease=spec.lease_s,
                                   connect_timeout=spec.connect_timeout, warm=self.warm)
        with self._lock:
            self._nodes[pod.name] = deployer
            self._retired.pop(pod.name, None)
            self._info[pod.name] = {"reach": "kubernetes", "pod": pod.name, "namespace": pod.namespace,
                                    "source": source}
        log.info("node %s added: pod %s/%s at %s, %d cores", pod.name, pod.namespace, pod.name, pod.ip, pod.cores)

    def _pod_gone(self, source: KubeNodeSource, name: str, reason: str) -> None:
        with self._lock:
            deployer = self._nodes.get(name)
            if not isinstance(deployer, KubePodDeployer) or self._info[name].get("source") is not source:
                return
            del self._nodes[name]
            del self._info[name]
            self._retired[name] = deployer
        log.warning("node %s removed: %s", name, reason)
        deployer.retire(f"was removed: {reason}")

    def source_states(self) -> list[dict]:
        """Each kubernetes source: its namespace, selector, API server, state and reason."""
        return [s.describe() for s in self.sources]

    # ---------------------------------------------------------------- the nodes

    def _deployers(self) -> list[Deployer]:
        with self._lock:
            return list(self._nodes.values())

    def node_states(self) -> list[tuple[Host, str, str]]:
        out = []
        for d in self._deployers():
            state, reason = (d.state, d.reason) if isinstance(d, AgentNodeDeployer) else ("up", "")
            out += [(h, state, reason) for h in d.hosts()]
        return out

    def node_info(self) -> dict[str, dict]:
        with self._lock:
            nodes = dict(self._nodes)
            infos = {name: dict(info) for name, info in self._info.items()}
        out = {}
        for name, d in nodes.items():
            info = infos.get(name, {})
            source = info.pop("source", None)
            if isinstance(source, KubeNodeSource):
                info["source"] = {"state": source.state, "reason": source.reason}
            if isinstance(d, AgentNodeDeployer):
                info["agent"] = d.health()
            out[name] = info
        return out

    def control_ports(self) -> list[int]:
        # Kubernetes sources: their agents' port, even before a pod is Ready (no job may send there).
        ports = {spec.agent_port for spec in self.inventory.sources}
        return sorted(ports | {port for d in self._deployers() for port in d.control_ports()})

    def _roots(self, default_root: Path) -> dict[str, Storage]:
        roots: dict[str, Storage] = {}
        with self._lock:
            nodes = list(self._nodes.items())
        for name, d in nodes:
            if isinstance(d, AgentNodeDeployer):
                roots[name] = AgentStorage(d, d.host.data_root or str(default_root))
            else:
                root = next((n.data_root for n in self.inventory.static_nodes if n.name == name), None)
                roots[name] = LocalStorage(root or str(default_root))
        return roots

    def storage(self, default_root: Path) -> FleetStorage:
        """Each node's data root (the server's --data-root where the inventory names none), each
        answered by the node: a local one by this machine, an agent's by the agent; the nodes of
        the moment, as kubernetes nodes come and go."""
        return FleetStorage(lambda: self._roots(default_root))

    def _of(self, host: Host) -> Deployer:
        with self._lock:
            found = self._nodes.get(host.name) or self._retired.get(host.name)
        if found is None:
            raise ValueError(f"no node named {host.name!r} in the inventory")
        return found

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

    def allow_fork_server(self, host: Host, binary: str) -> None:
        self._of(host).allow_fork_server(host, binary)

    def activity(self, channel: ControlChannel) -> tuple[int, ...] | None:
        return self._of(channel.host).activity(channel)

    def log_tail(self, channel: ControlChannel, limit: int = 2000) -> str:
        return self._of(channel.host).log_tail(channel, limit)

    def warm_up(self, host: Host, argv: list[str]) -> None:
        self._of(host).warm_up(host, argv)

    def running(self) -> list[ControlChannel]:
        return [c for d in self._deployers() for c in d.running()]

    def spares(self) -> list[int]:
        return sorted(p for d in self._deployers() for p in d.spares())

    def close_spares(self) -> None:
        for d in self._deployers():
            d.close_spares()

    def shutdown(self) -> None:
        for source in self.sources:  # first: no node is added while the others stop
            source.close()
        for d in self._deployers():
            d.shutdown()


class FleetStorage:
    """The nodes' data roots as one `Storage`: a path names a file of every node whose data root
    has it. The first such node (in inventory order) gives its real path and size; the holders are
    the nodes that have it at that same real path (a root shared by several nodes), so an NCA on
    any holder reads it by the path the plan carries. A path no node has is answered by the first
    node, so the error says what the rules say for one data root."""

    def __init__(self, roots: dict[str, Storage] | Callable[[], dict[str, Storage]]) -> None:
        # A callable: the roots of the nodes of the moment (a fleet whose nodes come and go).
        self._roots = roots if callable(roots) else (lambda: roots)
        # The nodes are asked at once: a remote answer is a round trip, and a request's parse asks
        # about each of its files.
        self._pool = ThreadPoolExecutor(max_workers=max(4, len(self.roots)), thread_name_prefix="storage")

    @property
    def roots(self) -> dict[str, Storage]:
        return self._roots()

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
        return self._merge(relative, self._answers(lambda storage: storage.stat(relative)))

    def glob_stat(self, pattern: str) -> list[tuple[str, FileFacts]]:
        """Each node's matches with their facts, asked of all nodes at once, one question each;
        a path is then what `stat` would say of it (a node that did not list it does not hold
        it, which is what its own answer to `stat` would have said)."""
        listed: dict[str, list[tuple[str, FileFacts]]] = {}
        for name, matches in self._answers(lambda storage: glob_with_facts(storage, pattern)):
            for path, facts in matches:
                listed.setdefault(path, []).append((name, facts))
        return [(path, self._merge(path, listed[path])) for path in sorted(listed)]

    @staticmethod
    def _merge(relative: str, answers: list[tuple[str, FileFacts]]) -> FileFacts:
        """One path's facts from the nodes' answers, in inventory order."""
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

