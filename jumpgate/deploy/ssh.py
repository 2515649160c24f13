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
is tried again every `RECHECK_S` seconds (deploy/agent_deployer.py). No process outlives its server: when the connection
ends (the server stopped or died), the agent ends the session's NCAs at once, and a server that
vanished without closing its connection loses them when its lease expires.

What is not about SSH (ship, start, stop, spares, the state) is deploy/agent_deployer.py's, shared
with the Kubernetes pod deployer.
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
from ..agent.link import AgentError
from ..nca.deployment import Host
from .agent_deployer import AgentNodeDeployer
from .warm import WarmSettings

log = logging.getLogger(__name__)

REMOTE_CACHE = ".cache/jumpgate"  # under the login's home directory
AGENT_IDLE_EXIT_S = 600.0  # an agent the server started exits after this long without a session


class SshDeployer(AgentNodeDeployer):
    """The NCAs of one node reached over SSH, run by its agent."""

    kind = "ssh"

    def __init__(self, host: Host, ssh_host: str, port: int, user: str, key_file: str, known_hosts: str,
                 accept_unknown_host_key: bool = False, connect_timeout: float = 5.0, *,
                 python: str = "python3", lease: float = 10.0, cache_dir: str | None = None,
                 server_name: str = "jumpgate", warm: WarmSettings | None = None) -> None:
        super().__init__(host, lease=lease, server_name=server_name, warm=warm)
        self._target = (ssh_host, port, user, key_file, known_hosts, accept_unknown_host_key, connect_timeout)
        self.python = python
        self.cache_dir = cache_dir
        self._client: paramiko.SSHClient | None = None
        self.connect()
        self._start_rechecks()

    @property
    def where(self) -> str:
        ssh_host, port, user = self._target[:3]
        return f"node {self.host.name} ({user}@{ssh_host}:{port})"

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
            return self._down_closing(f"the host key of {where} does not match {known_hosts}: refused (a changed "
                                      "key may mean another machine answers at this address)", client)
        except paramiko.AuthenticationException:
            return self._down_closing(f"{where} refused the login with key {key_file}", client)
        except paramiko.SSHException as e:
            if "not found in known_hosts" in str(e):
                return self._down_closing(f"the host key of {where} is not in {known_hosts}: refused (add it, "
                                          "or set accept_unknown_host_key in the inventory)", client)
            return self._down_closing(f"SSH to {where} failed: {e}", client)
        except (TimeoutError, OSError) as e:
            return self._down_closing(f"cannot reach {where}: {getattr(e, 'strerror', None) or e}", client)
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
            # the module it imports first: a directory with agent.py in it has both
            _put_once(client, agent_node.FORK_SERVER_FILE, f"{state}/fork_server.py", state)
            _put_once(client, source, script, state)
            answer = _run(client, " ".join(shlex.quote(a) for a in (
                self.python, script, "ensure", "--state", state, "--cache", cache,
                "--idle-exit", f"{AGENT_IDLE_EXIT_S:g}")), timeout + 15)
            found = json.loads(answer.strip().splitlines()[-1])
            if "error" in found:
                return self._down_closing(f"the agent on {where} did not start: {found['error']}", client)
            channel = client.get_transport().open_channel(
                "direct-tcpip", (found["host"], int(found["port"])), ("127.0.0.1", 0), timeout=timeout)
            link = self._open_link(channel, found["secret"].encode())
        except AgentError as e:
            return self._down_closing(str(e), client)
        except (OSError, EOFError, paramiko.SSHException, ValueError, KeyError, IndexError) as e:
            return self._down_closing(f"the agent on {where} cannot be reached: {type(e).__name__}: {e}", client)
        self._client = client
        return self._up(link, int(found["port"]), f"(pid {found['pid']}) through {where}")

    def _down_closing(self, reason: str, client: paramiko.SSHClient) -> bool:
        client.close()
        return self._down(reason)

    def _close_transport(self) -> None:
        client = self._client
        if client is not None:
            client.close()


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

