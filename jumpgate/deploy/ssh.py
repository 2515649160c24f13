"""A node reached over SSH (docs/deploy.md, `reach: ssh`), with Paramiko.

One SSH connection per node, opened when the server starts: the host key is checked against the
inventory's known_hosts file (an unknown or changed key is refused, unless the inventory says to
accept an unknown one), the login is by key only. A node that cannot be reached, whose key does
not match or that refuses the login is marked down with the reason, and jobs are placed on the
other nodes.

Each NCA is one `exec` channel: its standard input and output are the channel, so the process
protocol (docs/nca-process-protocol.md) runs over SSH unchanged, and its standard error is kept
(the tail) for error messages. Binaries are shipped once, by content (SFTP into
`~/.cache/jumpgate/ncas/<hash>-<name>` on the node). No process outlives its server: when the
connection ends (the server stopped or died), sshd closes each channel, the NCA reads the end of
its standard input and exits, as a local NCA does when its pipe closes.
"""
from __future__ import annotations

import hashlib
import logging
import posixpath
import re
import shlex
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from stat import S_ISDIR, S_ISREG

import paramiko

from ..dataflow.storage import FileFacts
from ..nca.deployment import ControlChannel, Deployer, Host

log = logging.getLogger(__name__)

REMOTE_CACHE = ".cache/jumpgate"  # under the login's home directory
STDERR_TAIL = 4000


class SshProcess(ControlChannel):
    def __init__(self, channel: paramiko.Channel, stdout: paramiko.ChannelFile, pid: int, host: Host,
                 name: str) -> None:
        self.channel = channel
        self.pid = pid
        self.host = host
        self.name = name
        self._stdin = channel.makefile_stdin("wb")
        self._stdout = stdout  # the file the pid was read from: its buffer may hold the next lines
        self._stderr = bytearray()  # the last STDERR_TAIL bytes
        self._lock = threading.Lock()
        threading.Thread(target=self._keep_stderr, name=f"{name}-stderr", daemon=True).start()

    def send(self, data: bytes) -> None:
        with self._lock:
            if self.channel.closed:
                raise OSError("the SSH channel is closed")
            self._stdin.write(data)
            self._stdin.flush()

    def events(self) -> Iterator[bytes]:
        return self._lines()

    def _lines(self) -> Iterator[bytes]:
        try:
            yield from self._stdout
        except (OSError, EOFError, paramiko.SSHException):
            return

    def _keep_stderr(self) -> None:
        while True:
            try:
                chunk = self.channel.recv_stderr(4096)
            except (OSError, EOFError, paramiko.SSHException):
                return
            if not chunk:
                return
            with self._lock:
                self._stderr += chunk
                del self._stderr[:-STDERR_TAIL]

    def stderr_tail(self, limit: int) -> str:
        with self._lock:
            return bytes(self._stderr).decode(errors="replace")[-limit:].strip()


class SshDeployer(Deployer):
    """The NCAs of one node reached over SSH."""

    kind = "ssh"

    def __init__(self, host: Host, ssh_host: str, port: int, user: str, key_file: str, known_hosts: str,
                 accept_unknown_host_key: bool = False, connect_timeout: float = 5.0) -> None:
        self.host = host
        self._target = (ssh_host, port, user, key_file, known_hosts, accept_unknown_host_key, connect_timeout)
        self._client: paramiko.SSHClient | None = None
        self._home = ""
        self._shipped: dict[tuple[str, int, int], str] = {}  # (local path, size, mtime) -> remote path
        self._procs: dict[int, SshProcess] = {}
        self._lock = threading.Lock()
        self.state, self.reason = "down", "not connected yet"
        self.connect()

    # ---------------------------------------------------------------- the connection

    def connect(self) -> bool:
        """Open the node's connection; on failure the node is down with the reason."""
        ssh_host, port, user, _, known_hosts, accept, _ = self._target
        where = f"{user}@{ssh_host}:{port}"
        client = paramiko.SSHClient()
        try:
            client.load_host_keys(known_hosts)
        except OSError as e:
            return self._down(f"cannot read known_hosts {known_hosts}: {e.strerror or e}")
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy() if accept else paramiko.RejectPolicy())
        try:
            return self._login(client, where)
        except BaseException:
            client.close()
            raise

    def _login(self, client: paramiko.SSHClient, where: str) -> bool:
        ssh_host, port, user, key_file, known_hosts, _, timeout = self._target
        try:
            client.connect(ssh_host, port=port, username=user, key_filename=key_file, look_for_keys=False,
                           allow_agent=False, timeout=timeout, banner_timeout=timeout, auth_timeout=timeout)
            _, out, _ = client.exec_command("printf %s \"$HOME\"", timeout=timeout)
            self._home = out.read().decode()
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
        # Commands and events are short lines: without this, Nagle's algorithm holds each one back
        # for the peer's delayed ACK (~40 ms a round trip, several per job).
        sock = client.get_transport().sock
        if isinstance(sock, socket.socket):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._client = client
        self.state, self.reason = "up", ""
        return True

    def _down(self, reason: str, client: paramiko.SSHClient | None = None) -> bool:
        if client is not None:
            client.close()
        log.warning("node %s is down: %s", self.host.name, reason)
        self.state, self.reason = "down", reason
        return False

    def _transport(self) -> paramiko.Transport:
        client = self._client
        transport = client.get_transport() if client is not None else None
        if transport is None or not transport.is_active():
            raise OSError(f"node {self.host.name} is down: {self.reason or 'its SSH connection ended'}")
        return transport

    def _run(self, command: str, timeout: float = 10.0) -> str:
        channel = self._transport().open_session(timeout=timeout)
        try:
            channel.settimeout(timeout)
            channel.exec_command(command)
            out = channel.makefile("rb").read().decode(errors="replace")
            if channel.recv_exit_status() != 0:
                err = channel.makefile_stderr("rb").read().decode(errors="replace").strip()
                raise OSError(f"on node {self.host.name}: `{command}` failed: {err or 'no message'}")
            return out
        finally:
            channel.close()

    # ---------------------------------------------------------------- the Deployer interface

    def hosts(self) -> list[Host]:
        return [self.host]

    def ship(self, host: Host, artifact: Path) -> str:
        """The binary on the node, by content: uploaded once, then found by its hash."""
        st = artifact.stat()
        key = (str(artifact), st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._shipped.get(key)
        if hit is not None:
            return hit
        digest = hashlib.sha256(artifact.read_bytes()).hexdigest()[:24]
        remote_dir = f"{self._home}/{REMOTE_CACHE}/ncas"
        remote = f"{remote_dir}/{digest}-{artifact.name}"
        sftp = paramiko.SFTPClient.from_transport(self._transport())
        try:
            try:
                sftp.stat(remote)
            except FileNotFoundError:
                self._run(f"mkdir -p {shlex.quote(remote_dir)}")
                tmp = f"{remote}.{threading.get_ident()}.tmp"
                sftp.put(str(artifact), tmp)
                sftp.chmod(tmp, 0o755)
                sftp.posix_rename(tmp, remote)  # atomic: a racing upload of the same bytes is harmless
        finally:
            sftp.close()
        with self._lock:
            self._shipped[key] = remote
        return remote

    def start(self, host: Host, argv: list[str], work_dir: Path, name: str, *,
              reuse: bool = False) -> SshProcess:
        """`argv` in a directory of the node named like the job's, through one exec channel; the
        shell prints its pid before it becomes the NCA (`exec`), so `stop` can end it for sure."""
        remote_dir = f"{self._home}/{REMOTE_CACHE}/work/{work_dir.name}"
        command = (f"mkdir -p {shlex.quote(remote_dir)} && cd {shlex.quote(remote_dir)} && echo $$ && "
                   f"exec {' '.join(shlex.quote(a) for a in argv)}")
        channel = self._transport().open_session(timeout=10.0)
        channel.exec_command(command)
        stdout = channel.makefile("rb")
        first = stdout.readline()
        try:
            pid = int(first)
        except ValueError:
            channel.close()
            raise OSError(f"starting {name} on node {self.host.name} failed: {first!r}") from None
        proc = SshProcess(channel, stdout, pid, self.host, name)
        with self._lock:
            self._procs[id(proc)] = proc
        return proc

    def stop(self, channel: ControlChannel, grace: float = 2.0) -> None:
        """End of input first (the NCA's signal to exit), then TERM and KILL by pid."""
        proc = self._own(channel)
        try:
            proc.channel.shutdown_write()
        except (OSError, EOFError, paramiko.SSHException):
            pass
        if not self._exited(proc, 0.2):
            for sig, wait in (("TERM", grace), ("KILL", 5.0)):
                try:
                    self._run(f"kill -{sig} {proc.pid} 2>/dev/null || true", timeout=5.0)
                except OSError:
                    break  # the connection is gone: sshd closes the channel, the NCA exits
                if self._exited(proc, wait):
                    break
        proc.channel.close()
        with self._lock:
            self._procs.pop(id(proc), None)

    @staticmethod
    def _exited(proc: SshProcess, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not (proc.channel.exit_status_ready() or proc.channel.closed):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def log_tail(self, channel: ControlChannel, limit: int = 2000) -> str:
        return self._own(channel).stderr_tail(limit)

    def running(self) -> list[SshProcess]:
        with self._lock:
            return [p for p in self._procs.values() if not p.channel.exit_status_ready()]

    def shutdown(self) -> None:
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            self.stop(proc, grace=0.5)
        if self._client is not None:
            self._client.close()

    @staticmethod
    def _own(channel: ControlChannel) -> SshProcess:
        if not isinstance(channel, SshProcess):
            raise TypeError(f"not an NCA of an SSH node: {channel!r}")
        return channel


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Python's glob syntax as a regular expression over relative paths: `*` and `?` stop at `/`,
    `**/` spans directories, `[...]` is a class (`[!...]` negated)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i) and i + 2 == len(pattern):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1:end]
            negate, body = body.startswith("!"), body[1:] if body.startswith("!") else body
            body = body.replace("\\", "\\\\")  # ranges (a-z) stay ranges; a backslash is literal
            out.append("[" + ("^" if negate else "\\" if body.startswith("^") else "") + body + "]")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


class SshStorage:
    """A node's data root, answered over SFTP (jumpgate.dataflow.storage.Storage): the node's own
    view of its files, symlinks resolved by the node."""

    MAX_LISTED = 100_000  # entries a glob may walk before it gives up (a pattern over a huge tree)

    def __init__(self, deployer: SshDeployer, root: str) -> None:
        self.deployer = deployer
        self.root = root
        self._real_root: str | None = None
        self._session: paramiko.SFTPClient | None = None
        self._lock = threading.Lock()  # one request at a time on the kept session

    @contextmanager
    def _sftp(self) -> Iterator[paramiko.SFTPClient]:
        """The node's SFTP session, opened once and kept (opening one costs a round trip or more
        per path otherwise); reopened when the connection was."""
        with self._lock:
            transport = self.deployer._transport()  # OSError: the node is down
            session = self._session
            if session is None or session.get_channel() is None or session.get_channel().closed:
                try:
                    session = self._session = paramiko.SFTPClient.from_transport(transport)
                except paramiko.SSHException as e:
                    raise OSError(f"node {self.deployer.host.name} answers no SFTP: {e}") from None
            yield session

    def stat(self, relative: str) -> FileFacts:
        with self._sftp() as sftp:  # OSError: the node cannot answer (FleetStorage skips it)
            if self._real_root is None:
                self._real_root = sftp.normalize(self.root)
            root = self._real_root
            try:
                real = sftp.normalize(f"{root}/{relative}")
            except OSError:  # a dangling name: it does not exist
                return FileFacts(posixpath.normpath(f"{root}/{relative}"), True, False, False)
            inside = real == root or real.startswith(root.rstrip("/") + "/")
            if not inside:
                return FileFacts(real, False, False, False)
            try:
                attrs = sftp.stat(real)
            except OSError:
                return FileFacts(real, True, False, False)
            is_file = S_ISREG(attrs.st_mode or 0)
            return FileFacts(real, True, True, is_file, attrs.st_size or 0 if is_file else 0)

    def glob(self, pattern: str) -> list[str]:
        rx = glob_regex(pattern)
        found: list[str] = []
        with self._sftp() as sftp:
            todo, seen = [""], 0
            while todo and seen < self.MAX_LISTED:
                rel = todo.pop()
                try:
                    entries = sftp.listdir_attr(f"{self.root}/{rel}" if rel else self.root)
                except OSError:
                    continue
                for e in entries:
                    seen += 1
                    path = f"{rel}/{e.filename}" if rel else e.filename
                    if S_ISDIR(e.st_mode or 0):
                        todo.append(path)
                    if rx.match(path):
                        found.append(path)
        return sorted(found)
