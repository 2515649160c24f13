"""The server's side of a node agent (docs/agent.md): one authenticated connection per node,
shared by every NCA of the node, over any stream with `makefile` and `sendall` (a Paramiko
channel tunnelled through the node's SSH connection, or a socket).

Requests carry an id and are answered by id; NCA processes are known by a tag the link chooses,
and their events (standard output lines, exit) are routed to the `AgentProcess` of the tag. A
heartbeat (`health`, every `lease / 4`) renews the session's lease and keeps the node's load
current; when the connection ends, every process of the link sees the end of its events, and
`on_lost` is told why.
"""
from __future__ import annotations

import hashlib
import itertools
import logging
import queue
import secrets
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from ..nca.deployment import ControlChannel, Host
from .node import PROTOCOL, Frames, ProtocolError, mac

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0


class AgentError(OSError):
    """The agent refused a request or cannot be reached; the message says which and why."""


class AgentProcess(ControlChannel):
    """An NCA process run by a node's agent."""

    def __init__(self, link: AgentLink, tag: int, host: Host, name: str) -> None:
        self.link = link
        self.tag = tag
        self.host = host
        self.name = name
        self.pid = 0
        self.waiting = False  # a pre-started spare no job has taken yet
        self.exit_code: int | None = None
        self.exited = threading.Event()
        self._lines: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def send(self, data: bytes) -> None:
        if self.exited.is_set():
            raise OSError(f"{self.name} has exited")
        self.link.post({"op": "stdin", "p": self.tag}, data)

    def events(self) -> Iterator[bytes]:
        while True:
            line = self._lines.get()
            if line is None:
                return
            yield line

    def _ended(self, code: int | None) -> None:
        if not self.exited.is_set():
            self.exit_code = code
            self.exited.set()
            self._lines.put(None)


class AgentLink:
    """An open session with one node's agent."""

    def __init__(self, stream, secret: bytes, *, label: str, server: str = "jumpgate",
                 lease: float = 10.0, on_lost: Callable[[str], None] | None = None) -> None:
        self.label = label
        self.lease = lease
        self.on_lost = on_lost
        self._frames = Frames(stream)
        self._ids = itertools.count(1)
        self._tags = itertools.count(1)
        self._waiting: dict[int, tuple[threading.Event, list]] = {}
        self._procs: dict[int, AgentProcess] = {}
        self._shipped: dict[tuple[str, int, int], str] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.lost_reason = ""
        self.health: dict = {}
        try:
            self.info = self._handshake(secret, server)
        except BaseException:
            self._frames.close()
            raise
        threading.Thread(target=self._read, name=f"agent-{label}", daemon=True).start()
        threading.Thread(target=self._beat, name=f"agent-{label}-beat", daemon=True).start()

    # ---------------------------------------------------------------- the session

    def _handshake(self, secret: bytes, server: str) -> dict:
        first = self._frames.read()
        if first is None or first[0].get("agent") != "jumpgate":
            raise AgentError(f"{self.label}: the peer is not a Jumpgate agent ({first[0] if first else 'no answer'})")
        hello = first[0]
        if hello.get("protocol") != PROTOCOL:
            raise AgentError(f"{self.label}: the agent speaks protocol {hello.get('protocol')}, this server {PROTOCOL}")
        cnonce = secrets.token_hex(16)
        self._frames.write({"op": "hello", "cnonce": cnonce, "mac": mac(secret, "client", hello["nonce"], cnonce),
                            "lease": self.lease, "server": server})
        answer = self._frames.read()
        if answer is None:
            raise AgentError(f"{self.label}: the agent closed the connection during the handshake")
        head = answer[0]
        if not head.get("ok"):
            raise AgentError(f"{self.label}: the agent refused the session: {head.get('error', 'no reason')}")
        if head.get("mac") != mac(secret, "agent", cnonce, hello["nonce"]):
            raise AgentError(f"{self.label}: the agent could not prove it knows the secret: refused")
        return {**head, "version": hello.get("version", "")}

    @property
    def alive(self) -> bool:
        return not self._closed.is_set()

    def _read(self) -> None:
        why = "the agent closed the connection"
        try:
            while True:
                frame = self._frames.read()
                if frame is None:
                    break
                self._dispatch(*frame)
        except (OSError, EOFError, ProtocolError) as e:
            why = f"the connection to the agent failed: {e}"
        except Exception as e:  # noqa: BLE001 - the link must end cleanly whatever the stream raised
            why = f"the connection to the agent failed: {type(e).__name__}: {e}"
        self._lose(why)

    def _dispatch(self, head: dict, payload: bytes) -> None:
        rid = head.get("re")
        if rid is not None:
            with self._lock:
                waiter = self._waiting.pop(rid, None)
            if waiter is not None:
                waiter[1].append(head)
                waiter[0].set()
            return
        ev = head.get("ev")
        with self._lock:
            proc = self._procs.get(head.get("p"))
        if ev == "out" and proc is not None:
            proc._lines.put(payload)
        elif ev == "exit" and proc is not None:
            proc._ended(head.get("code"))
        elif ev == "error":
            log.warning("agent %s: %s", self.label, head.get("error"))

    def _lose(self, why: str) -> None:
        if self._closed.is_set():
            return
        self.lost_reason = why
        self._closed.set()
        self._frames.close()
        with self._lock:
            waiting, self._waiting = self._waiting, {}
            procs = list(self._procs.values())
        for event, _ in waiting.values():
            event.set()  # the requester finds no answer and raises
        for proc in procs:
            proc._ended(None)
        if self.on_lost is not None:
            self.on_lost(why)

    def _beat(self) -> None:
        """Renew the lease, and keep the node's load current."""
        while not self._closed.wait(max(0.2, self.lease / 4)):
            try:
                self.health = self.request({"op": "health"}, timeout=max(1.0, self.lease / 2))
            except AgentError as e:
                if self.alive:
                    self.close(f"the agent did not answer its heartbeat: {e}")
                return

    # ---------------------------------------------------------------- requests

    def post(self, head: dict, payload: bytes = b"") -> None:
        """A message that needs no answer."""
        if self._closed.is_set():
            raise AgentError(f"{self.label}: {self.lost_reason}")
        try:
            self._frames.write(head, payload)
        except (OSError, EOFError) as e:
            self.close(f"sending to the agent failed: {e}")
            raise AgentError(f"{self.label}: sending to the agent failed: {e}") from None

    def request(self, head: dict, payload: bytes = b"", timeout: float = REQUEST_TIMEOUT_S) -> dict:
        rid = next(self._ids)
        event, box = threading.Event(), []
        with self._lock:
            self._waiting[rid] = (event, box)
        self.post({**head, "id": rid}, payload)
        if not event.wait(timeout):
            with self._lock:
                self._waiting.pop(rid, None)
            raise AgentError(f"{self.label}: no answer to {head.get('op')} within {timeout:g} s")
        if not box:
            raise AgentError(f"{self.label}: {self.lost_reason}")
        answer = box[0]
        if not answer.get("ok"):
            raise AgentError(f"{self.label}: {head.get('op')} refused: {answer.get('error', 'no reason')}")
        return answer

    def ship(self, artifact: Path) -> str:
        """The artefact's path on the node, by content: sent once per digest."""
        st = artifact.stat()
        key = (str(artifact), st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._shipped.get(key)
        if hit is not None:
            return hit
        data = artifact.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        answer = self.request({"op": "has", "digest": digest, "name": artifact.name})
        if not answer["have"]:
            answer = self.request({"op": "put", "digest": digest, "name": artifact.name}, data, timeout=120.0)
        with self._lock:
            self._shipped[key] = answer["path"]
        return answer["path"]

    def start(self, argv: list[str], work: str, name: str, host: Host, *, spare: bool = False,
              fork: bool = False) -> AgentProcess:
        """Start `argv` on the agent's node; a `spare` is waiting for a job from the moment it is
        registered, so that one still being started is never counted as a job's. With `fork`,
        argv[0] serves `--fork-server` and the agent may fork it from a loaded copy (docs/agent.md)."""
        tag = next(self._tags)
        proc = AgentProcess(self, tag, host, name)
        proc.waiting = spare
        with self._lock:  # registered first: its first event may come before the answer
            self._procs[tag] = proc
        try:
            head = {"op": "start", "p": tag, "argv": argv, "work": work, "name": name}
            if host.cpus:  # pinned by the agent (docs/agent.md)
                head["cpus"] = list(host.cpus)
            if fork:
                head["fork"] = True
            answer = self.request(head)
        except AgentError:
            with self._lock:
                self._procs.pop(tag, None)
            raise
        proc.pid = int(answer["pid"])
        return proc

    def stop(self, proc: AgentProcess, grace: float) -> None:
        try:
            if self.alive:
                self.request({"op": "stop", "p": proc.tag, "grace": grace}, timeout=grace + 10.0)
        except AgentError as e:
            log.warning("stopping %s on %s: %s", proc.name, self.label, e)
        finally:
            with self._lock:
                self._procs.pop(proc.tag, None)
            proc._ended(proc.exit_code)

    def processes(self) -> list[AgentProcess]:
        with self._lock:
            return [p for p in self._procs.values() if not p.exited.is_set()]

    def close(self, why: str = "the server closed the session") -> None:
        """Say goodbye (the agent stops this session's processes) and drop the connection."""
        if self._closed.is_set():
            return
        try:
            self._frames.write({"op": "bye"})
        except (OSError, EOFError):
            pass
        self._lose(why)
