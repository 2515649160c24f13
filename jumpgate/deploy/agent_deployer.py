"""What every deployer of a node reached through its agent (docs/agent.md) shares: the agent-facing
half of the SSH deployer (deploy/ssh.py) and of the Kubernetes pod deployer (deploy/kube_pod.py).

A subclass says only how the stream to the agent is obtained (`connect`: a direct-tcpip channel
of an SSH connection, or a TCP socket to a pod's IP) and opens the session with `_open_link`; ship,
start, stop, activity, log tails, spares, the running NCAs, the lease and the state with its
reason are the same code for both, so a fix to one is a fix to the other.
"""
from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

from ..agent.link import AgentError, AgentLink, AgentProcess
from ..dataflow.storage import FileFacts
from ..nca.deployment import ControlChannel, Deployer, Host
from .warm import WarmPool, WarmSettings

log = logging.getLogger(__name__)

RECHECK_S = 5.0  # how often a down node is tried again


class AgentNodeDeployer(Deployer):
    """The NCAs of one node, run by its agent over one authenticated session."""

    kind = "agent"

    def __init__(self, host: Host, *, lease: float = 10.0, server_name: str = "jumpgate",
                 warm: WarmSettings | None = None) -> None:
        self.host = host
        self.lease = lease
        self.server_name = server_name
        self._link: AgentLink | None = None
        self.agent_port = 0  # once known
        self._lock = threading.Lock()  # one connection attempt at a time
        self._closed = threading.Event()
        self.state, self.reason = "down", "not connected yet"
        # Pre-started NCAs on the node, as the local deployer keeps them (deploy/warm.py): a spare
        # has loaded its libraries and said `ready` before the job that takes it asks.
        self.warm = WarmPool(warm or WarmSettings(per_binary=0), self._spawn_spare, self.stop,
                             lambda p: not p.exited.is_set() and p.link.alive, Path("spares"))
        # Binaries (their paths on the node) whose processes the agent may fork from a loaded copy.
        self._forkable: set[str] = set()

    def _start_rechecks(self) -> None:
        threading.Thread(target=self._recheck, name=f"recheck-{self.host.name}", daemon=True).start()

    # ---------------------------------------------------------------- the connection (subclasses)

    def connect(self) -> bool:
        """Open the node's agent session; on failure the node is down with the reason."""
        raise NotImplementedError

    def _close_transport(self) -> None:
        """Close what carries the session (an SSH connection); nothing for a plain socket."""

    def _open_link(self, stream, secret: bytes) -> AgentLink:
        """The agent's session over `stream`: the handshake proves the shared secret both ways
        (AgentError when refused); the link reports its end to `_lost`."""
        return AgentLink(stream, secret, label=f"node {self.host.name}", server=self.server_name,
                         lease=self.lease, on_lost=self._lost)

    def _up(self, link: AgentLink, port: int, how: str) -> bool:
        self._link = link
        self.agent_port = port
        self.state, self.reason = "up", ""
        log.info("node %s is up: agent %s %s", self.host.name, link.info.get("version", "?"), how)
        return True

    def _down(self, reason: str) -> bool:
        if (self.state, self.reason) != ("down", reason):
            log.warning("node %s is down: %s", self.host.name, reason)
        self.state, self.reason = "down", reason
        return False

    def _lost(self, why: str) -> None:
        """The agent's session ended under us: the node is down until the next check."""
        if self._closed.is_set():
            return
        self.state, self.reason = "down", f"lost its agent: {why}"
        log.warning("node %s is down: %s", self.host.name, self.reason)
        threading.Thread(target=self._close_transport, daemon=True).start()

    def _recheck(self) -> None:
        while not self._closed.wait(RECHECK_S):
            if self.state != "up":
                self.connect()

    @property
    def where(self) -> str:
        """The node as an operator finds it (a subclass adds the SSH login or the pod)."""
        return f"node {self.host.name}"

    def link(self) -> AgentLink:
        link = self._link
        if link is None or not link.alive or self.state != "up":
            raise AgentError(f"node {self.host.name} is down: {self.reason or 'no agent session'}")
        return link

    def control_ports(self) -> list[int]:
        return [self.agent_port] if self.agent_port else []

    def health(self) -> dict:
        link = self._link
        return dict(link.health) if link is not None and link.alive else {}

    # ---------------------------------------------------------------- the Deployer interface

    def hosts(self) -> list[Host]:
        return [self.host]

    def ship(self, host: Host, artifact: Path) -> str:
        return self.link().ship(artifact)

    def start(self, host: Host, argv: list[str], work_dir: Path, name: str, *,
              reuse: bool = False) -> AgentProcess:
        """`argv` in a directory of the node named like the job's; with `reuse`, a waiting spare
        started with the same `argv` when there is one."""
        proc = self.warm.take(argv) if reuse else None
        if proc is None:
            return self.link().start(argv, work_dir.name, name, self.host, fork=argv[0] in self._forkable)
        proc.waiting = False
        return proc

    def _spawn_spare(self, argv: list[str], work_dir: Path, name: str) -> AgentProcess:
        return self.link().start(argv, work_dir.name, name, self.host, spare=True, fork=argv[0] in self._forkable)

    def allow_fork_server(self, host: Host, binary: str) -> None:
        """The agent keeps the fork servers (agent/node.py); this only says which binaries may."""
        if self.warm.settings.fork_servers > 0:
            self._forkable.add(binary)

    def warm_up(self, host: Host, argv: list[str]) -> None:
        self.warm.replenish(argv)

    def spares(self) -> list[int]:
        link = self._link
        # A spare still being started has no pid until its agent answers.
        return sorted(p.pid for p in link.processes() if p.waiting and p.pid) if link is not None else []

    def close_spares(self) -> None:
        self.warm.shutdown()

    def stop(self, channel: ControlChannel, grace: float = 2.0) -> None:
        proc = self._own(channel)
        proc.link.stop(proc, grace)

    def activity(self, channel: ControlChannel) -> tuple[int, ...] | None:
        proc = self._own(channel)
        try:
            reading = proc.link.request({"op": "activity", "p": proc.tag}, timeout=5.0)["reading"]
        except AgentError:
            return None
        return tuple(reading) if reading else None

    def log_tail(self, channel: ControlChannel, limit: int = 2000) -> str:
        proc = self._own(channel)
        if not proc.link.alive:
            return f"node {self.host.name} {self.reason or 'lost its agent'}"
        try:
            text = proc.link.request({"op": "tail", "p": proc.tag, "limit": limit}, timeout=5.0)["text"]
        except AgentError as e:
            return str(e)
        if not text.strip() and proc.exited.is_set():  # it said nothing: say where and how it ended
            return f"{self.where}: {_ended(proc.exit_code)}"
        return text

    def running(self) -> list[AgentProcess]:
        """The node's NCAs that belong to jobs (not idle spares) and still run."""
        link = self._link
        return [p for p in link.processes() if not p.waiting] if link is not None else []

    def shutdown(self) -> None:
        self.warm.shutdown()
        self._closed.set()
        with self._lock:
            link = self._link
        if link is not None:
            procs = link.processes()
            threads = [threading.Thread(target=link.stop, args=(p, 0.5), daemon=True) for p in procs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            link.close()
        self._close_transport()

    def _own(self, channel: ControlChannel) -> AgentProcess:
        if not isinstance(channel, AgentProcess):
            raise TypeError(f"not an NCA of an agent's node ({self.kind}): {channel!r}")
        return channel


def _ended(code: int | None) -> str:
    if code is None:
        return "the NCA's end was not reported"
    if code < 0:
        try:
            return f"the NCA was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the NCA was killed by signal {-code}"
    return f"the NCA exited with status {code}"


class AgentStorage:
    """A node's data root, answered by its agent (jumpgate.dataflow.storage.Storage): the node's
    own view of its files, symlinks resolved by the node. Raises AgentError (an OSError) when the
    node is down: the fleet's storage then counts it as holding nothing."""

    TIMEOUT_S = 30.0  # a glob over a large tree takes a while

    def __init__(self, deployer: AgentNodeDeployer, root: str) -> None:
        self.deployer = deployer
        self.root = root

    def stat(self, relative: str) -> FileFacts:
        a = self.deployer.link().request({"op": "stat", "root": self.root, "rel": relative}, timeout=self.TIMEOUT_S)
        return FileFacts(a["real"], a["inside"], a["exists"], a["is_file"], a["size"])

    def glob(self, pattern: str) -> list[str]:
        return list(self.deployer.link().request({"op": "glob", "root": self.root, "pattern": pattern},
                                                 timeout=self.TIMEOUT_S)["paths"])

    def glob_stat(self, pattern: str) -> list[tuple[str, FileFacts]]:
        """The matches and their facts in one round trip (a read of a thousand files would
        otherwise wait for a thousand)."""
        try:
            a = self.deployer.link().request({"op": "glob_stat", "root": self.root, "pattern": pattern},
                                             timeout=self.TIMEOUT_S)
        except AgentError as e:
            if "unknown operation" not in str(e):
                raise
            # an agent an older server started: a round trip per match, as that server asked
            return [(m, self.stat(m)) for m in self.glob(pattern)]
        return [(m["path"], FileFacts(m["real"], m["inside"], m["exists"], m["is_file"], m["size"]))
                for m in a["matches"]]
