"""A node that is a Kubernetes pod running `jumpgate agent serve` (docs/deploy.md, "Kubernetes"):
the server connects to the agent directly over TCP at podIP:agent_port and proves the shared
secret in the agent's handshake (agent/link.py), the same session the SSH deployer opens through
its channel (deploy/agent_deployer.py holds everything else).

Why no tunnel: inside a cluster the pod network is the transport, the agent's port is opened only
to the server's pods by the NetworkPolicy of deploy/kubernetes/, and the handshake's HMAC keeps
anyone without the Secret out. The pod is found and dropped by deploy/kube_source.py; while it
is known, a lost session is tried again every RECHECK_S seconds as for an SSH node.
"""
from __future__ import annotations

import socket
import threading

from ..agent.link import AgentError
from ..nca.deployment import Host
from .agent_deployer import AgentNodeDeployer
from .warm import WarmSettings


class KubePodDeployer(AgentNodeDeployer):
    """The NCAs of one agent pod."""

    kind = "kubernetes"

    def __init__(self, host: Host, pod: str, namespace: str, port: int, secret: bytes, *,
                 lease: float = 10.0, connect_timeout: float = 5.0, server_name: str = "jumpgate",
                 warm: WarmSettings | None = None) -> None:
        super().__init__(host, lease=lease, server_name=server_name, warm=warm)
        self.pod, self.namespace, self.port = pod, namespace, port
        self._secret = secret
        self._timeout = connect_timeout
        self._sock: socket.socket | None = None
        self.connect()
        self._start_rechecks()

    @property
    def where(self) -> str:
        return f"node {self.host.name} (pod {self.namespace}/{self.pod} at {self.host.address}:{self.port})"

    def connect(self) -> bool:
        with self._lock:
            if self._closed.is_set():
                return False
            if self._link is not None and self._link.alive:
                return True
            try:
                sock = socket.create_connection((self.host.address, self.port), timeout=self._timeout)
            except OSError as e:
                return self._down(f"cannot reach the agent of pod {self.namespace}/{self.pod} at "
                                  f"{self.host.address}:{self.port}: {e.strerror or e}")
            # The session may be quiet for long (its reader blocks), so the socket has no timeout;
            # a peer that accepts and never answers the handshake is cut off by this timer instead.
            sock.settimeout(None)
            watchdog = threading.Timer(self._timeout + 5.0, _cut, (sock,))
            watchdog.start()
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # short messages (see ssh.py)
                link = self._open_link(sock, self._secret)
            except AgentError as e:
                sock.close()
                return self._down(f"pod {self.namespace}/{self.pod}: {e}")
            except (OSError, EOFError, ValueError) as e:
                sock.close()
                return self._down(f"the agent of pod {self.namespace}/{self.pod} cannot be reached: "
                                  f"{type(e).__name__}: {e}")
            finally:
                watchdog.cancel()
            self._sock = sock
            return self._up(link, self.port, f"in pod {self.namespace}/{self.pod} at {self.host.address}:{self.port}")

    def retire(self, reason: str) -> None:
        """The pod is gone or not Ready: end the session (the agent stops this server's NCAs there)
        with `reason` as what jobs that ran there are told."""
        self.state, self.reason = "down", reason
        self._closed.set()  # before the session ends: its end is expected, not a loss to report
        self.shutdown()

    def _close_transport(self) -> None:
        sock = self._sock
        if sock is not None:
            _cut(sock)
            sock.close()


def _cut(sock: socket.socket) -> None:
    """End the connection both ways (a blocked reader sees its end at once)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
