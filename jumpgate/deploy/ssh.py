"""A node reached over SSH (docs/deploy.md, `reach: ssh`), with Paramiko, through its node agent
(docs/agent.md).

One SSH connection per node: the host key is checked against the inventory's known_hosts file
(an unknown or changed key is refused, unless the inventory says to accept an unknown one), the
login is by key only. Over it the server ships the agent (one self-contained Python file, by
content), starts it unless this version already runs (`ensure`), and opens a `direct-tcpip`
channel to the agent's port on the node's loopback: the agent is never exposed to the network,
and the channel is encrypted and authenticated by SSH before the agent's own handshake. Every NCA
of the node then goes through that one channel (start, commands, events, stop: a message each),
so a job pays no SSH session per NCA.

A node that cannot be reached, whose key does not match, that refuses the login or whose agent
does not start is marked down with the reason; jobs are placed on the other nodes, and the node
is tried again every `RECHECK_S` seconds. No process outlives its server: when the connection
ends (the server stopped or died), the agent ends the session's NCAs at once, and a server that
vanished without closing its connection loses them when its lease expires.
"""
from __future__ import annotations

import json
import logging
import shlex
import socket
import threading
from pathlib import Path

import paramiko

from ..agent import node as agent_node
from ..agent.link import AgentError, AgentLink, AgentProcess
from ..dataflow.storage import FileFacts
from ..nca.deployment import ControlChannel, Deployer, Host
from .warm import WarmPool, WarmSettings

log = logging.getLogger(__name__)

REMOTE_CACHE = ".cache/jumpgate"  # under the login's home directory
RECHECK_S = 5.0  # how often a down node is tried again
AGENT_IDLE_EXIT_S = 600.0  # an agent the server started exits after this long without a session


class SshDeployer(Deployer):
    """The NCAs of one node reached over SSH, run by its agent."""

    kind = "ssh"

    def __init__(self, host: Host, ssh_host: str, port: int, user: str, key_file: str, known_hosts: str,
                 accept_unknown_host_key: bool = False, connect_timeout: float = 5.0, *,
                 python: str = "python3", lease: float = 10.0, cache_dir: str | None = None,
                 server_name: str = "jumpgate", warm: WarmSettings | None = None) -> None:
        self.host = host
        self._target = (ssh_host, port, user, key_file, known_hosts, accept_unknown_host_key, connect_timeout)
        self.python = python
        self.cache_dir = cache_dir
        self.lease = lease
        self.server_name = server_name
        self._client: paramiko.SSHClient | None = None
        self._link: AgentLink | None = None
        self.agent_port = 0  # on the node's loopback, once known
        self._lock = threading.Lock()  # one connection attempt at a time
        self._closed = threading.Event()
        self.state, self.reason = "down", "not connected yet"
        # Pre-started NCAs on the node, as the local deployer keeps them (deploy/warm.py): a spare
        # has loaded its libraries and said `ready` before the job that takes it asks.
        self.warm = WarmPool(warm or WarmSettings(per_binary=0), self._spawn_spare, self.stop,
                             lambda p: not p.exited.is_set() and p.link.alive, Path("spares"))
        self.connect()
        threading.Thread(target=self._recheck, name=f"recheck-{host.name}", daemon=True).start()

    # ---------------------------------------------------------------- the connection

    def connect(self) -> bool:
        """Open the node's connection and its agent session; on failure the node is down with
        the reason."""
        with self._lock:
            if self._closed.is_set():
                return False
            if self._link is not None and self._link.alive:
                return True
            ssh_host, port, user, _, known_hosts, accept, _ = self._target
            where = f"{user}@{ssh_host}:{port}"
            client = paramiko.SSHClient()
            try:
                client.load_host_keys(known_hosts)
            except OSError as e:
                return self._down(f"cannot read known_hosts {known_hosts}: {e.strerror or e}")
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy() if accept else paramiko.RejectPolicy())
            try:
                if not self._login(client, where):
                    return False
                return self._open_agent(client, where)
            except BaseException:
                client.close()
                raise

    def _login(self, client: paramiko.SSHClient, where: str) -> bool:
        ssh_host, port, user, key_file, known_hosts, _, timeout = self._target
        try:
            client.connect(ssh_host, port=port, username=user, key_filename=key_file, look_for_keys=False,
                           allow_agent=False, timeout=timeout, banner_timeout=timeout, auth_timeout=timeout)
        except paramiko.BadHostKeyException:
            return self._down(f"the host key of {where} does not match {known_hosts}: refused (a changed "
                              "key may mean another machine answers at this address)", client)
        except paramiko.AuthenticationException:
            return self._down(f"{where} refused the login with key {key_file}", client)
        except paramiko.SSHException as e:
            if "not found in known_hosts" in str(e):
                return self._down(f"the host key of {where} is not in {known_hosts}: refused (add it, or "
                                  "set accept_unknown_host_key in the inventory)", client)
            return self._down(f"SSH to {where} failed: {e}", client)
        except (TimeoutError, OSError) as e:
            return self._down(f"cannot reach {where}: {getattr(e, 'strerror', None) or e}", client)
        # Commands and events are short messages: without this, Nagle's algorithm holds each one
        # back for the peer's delayed ACK (~40 ms a round trip, several per job).
        sock = client.get_transport().sock
        if isinstance(sock, socket.socket):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return True

    def _open_agent(self, client: paramiko.SSHClient, where: str) -> bool:
        """Ship this server's agent (by content), have it started unless it runs, and open the
        session through a channel of the SSH connection."""
        timeout = self._target[6]
        try:
            home = _run(client, "printf %s \"$HOME\"", timeout)
            cache = self.cache_dir or f"{home}/{REMOTE_CACHE}"
            if cache.startswith("~/"):
                cache = f"{home}/{cache[2:]}"
            source = Path(agent_node.__file__)
            version = agent_node.file_version()
            state = f"{cache}/agent/{version}"
            script = f"{state}/agent.py"
            _put_once(client, source, script, state)
            answer = _run(client, " ".join(shlex.quote(a) for a in (
                self.python, script, "ensure", "--state", state, "--cache", cache,
                "--idle-exit", f"{AGENT_IDLE_EXIT_S:g}")), timeout + 15)
            found = json.loads(answer.strip().splitlines()[-1])
            if "error" in found:
                return self._down(f"the agent on {where} did not start: {found['error']}", client)
            channel = client.get_transport().open_channel(
                "direct-tcpip", (found["host"], int(found["port"])), ("127.0.0.1", 0), timeout=timeout)
            link = AgentLink(channel, found["secret"].encode(), label=f"node {self.host.name}",
                             server=self.server_name, lease=self.lease, on_lost=self._lost)
        except AgentError as e:
            return self._down(str(e), client)
        except (OSError, EOFError, paramiko.SSHException, ValueError, KeyError, IndexError) as e:
            return self._down(f"the agent on {where} cannot be reached: {type(e).__name__}: {e}", client)
        self._client, self._link = client, link
        self.agent_port = int(found["port"])
        self.state, self.reason = "up", ""
        log.info("node %s is up: agent %s (pid %s) through %s", self.host.name, version, found["pid"], where)
        return True

    def _down(self, reason: str, client: paramiko.SSHClient | None = None) -> bool:
        if client is not None:
            client.close()
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
        client = self._client
        if client is not None:
            threading.Thread(target=client.close, daemon=True).start()

    def _recheck(self) -> None:
        while not self._closed.wait(RECHECK_S):
            if self.state != "up":
                self.connect()

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
            return self.link().start(argv, work_dir.name, name, self.host)
        proc.waiting = False
        return proc

    def _spawn_spare(self, argv: list[str], work_dir: Path, name: str) -> AgentProcess:
        proc = self.link().start(argv, work_dir.name, name, self.host)
        proc.waiting = True
        return proc

    def warm_up(self, host: Host, argv: list[str]) -> None:
        self.warm.replenish(argv)

    def spares(self) -> list[int]:
        link = self._link
        return sorted(p.pid for p in link.processes() if p.waiting) if link is not None else []

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
            return proc.link.request({"op": "tail", "p": proc.tag, "limit": limit}, timeout=5.0)["text"]
        except AgentError as e:
            return str(e)

    def running(self) -> list[AgentProcess]:
        """The node's NCAs that belong to jobs (not idle spares) and still run."""
        link = self._link
        return [p for p in link.processes() if not p.waiting] if link is not None else []

    def shutdown(self) -> None:
        self.warm.shutdown()
        self._closed.set()
        with self._lock:
            link, client = self._link, self._client
        if link is not None:
            procs = link.processes()
            threads = [threading.Thread(target=link.stop, args=(p, 0.5), daemon=True) for p in procs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            link.close()
        if client is not None:
            client.close()

    @staticmethod
    def _own(channel: ControlChannel) -> AgentProcess:
        if not isinstance(channel, AgentProcess):
            raise TypeError(f"not an NCA of an SSH node: {channel!r}")
        return channel


def _run(client: paramiko.SSHClient, command: str, timeout: float) -> str:
    """Run a command on the node; its standard output, or OSError with its standard error."""
    channel = client.get_transport().open_session(timeout=timeout)
    try:
        channel.settimeout(timeout)
        channel.exec_command(command)
        out = channel.makefile("rb").read().decode(errors="replace")
        if channel.recv_exit_status() != 0:
            err = channel.makefile_stderr("rb").read().decode(errors="replace").strip()
            raise OSError(f"`{command}` failed: {err or out.strip() or 'no message'}")
        return out
    finally:
        channel.close()


def _put_once(client: paramiko.SSHClient, source: Path, remote: str, remote_dir: str) -> None:
    """Upload a file over SFTP unless it is there (its directory is named by its content)."""
    sftp = client.open_sftp()
    try:
        try:
            sftp.stat(remote)
            return
        except FileNotFoundError:
            pass
        _run(client, f"mkdir -p {shlex.quote(remote_dir)}", 10.0)
        tmp = f"{remote}.{threading.get_ident()}.tmp"
        sftp.put(str(source), tmp)
        sftp.posix_rename(tmp, remote)  # atomic: a racing upload of the same bytes is harmless
    finally:
        sftp.close()


class AgentStorage:
    """A node's data root, answered by its agent (jumpgate.dataflow.storage.Storage): the node's
    own view of its files, symlinks resolved by the node. Raises AgentError (an OSError) when the
    node is down: the fleet's storage then counts it as holding nothing."""

    TIMEOUT_S = 30.0  # a glob over a large tree takes a while

    def __init__(self, deployer: SshDeployer, root: str) -> None:
        self.deployer = deployer
        self.root = root

    def stat(self, relative: str) -> FileFacts:
        a = self.deployer.link().request({"op": "stat", "root": self.root, "rel": relative}, timeout=self.TIMEOUT_S)
        return FileFacts(a["real"], a["inside"], a["exists"], a["is_file"], a["size"])

    def glob(self, pattern: str) -> list[str]:
        return list(self.deployer.link().request({"op": "glob", "root": self.root, "pattern": pattern},
                                                 timeout=self.TIMEOUT_S)["paths"])
