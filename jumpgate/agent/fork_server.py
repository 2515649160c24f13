"""Fork servers: one loaded copy of an NCA binary per binary, forking that binary's processes.

An ORC or Parquet scan spends ~8.5 ms of CPU between `exec` and `ready`, nearly all of it the
dynamic loader relocating Arrow C++ from the pyarrow wheel. The runtime's `BINARY --fork-server`
(ncas/runtime/fork_server.c, docs/nca-process-protocol.md) does that once and then forks a fresh
process per request, handing it the standard input, output and error the caller made for it, in
the working directory it names. Each forked process serves one job, exactly as an exec'ed one.

`ForkedProcess` is the part of `subprocess.Popen` the deployers and the agent use (pid, stdin,
stdout, poll, wait), so a forked process goes wherever a Popen went. It is not the caller's child:
the fork server reaps it and reports its exit code; a pidfd of it, which the server sends with the
reply, says when it has exited.

Like agent/node.py, this file is self-contained (the Python standard library only): the server
ships it beside the agent to SSH nodes, and the local deployer (deploy/local.py) uses it as well.
"""
from __future__ import annotations

import contextlib
import logging
import os
import queue
import select
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

# Room in the server's command line for each child's (`--bind HOST --inputs N ...`), which the
# child writes there so that `ps` shows it (fork_server.c): the server is started with this many
# spaces as a third argument and blanks them.
TITLE_ROOM = 512
# A fork takes well under a millisecond, a server's start ~10 ms (more on a loaded machine); this
# long means the binary does not serve --fork-server, and it is exec'ed from then on.
REPLY_TIMEOUT_S = 3.0
EXIT_CODE_TIMEOUT_S = 2.0  # between the pidfd saying "exited" and the server's notice of the code
POLL_SETTLE_S = 0.02  # what `poll` waits for that notice before answering "not yet"
UNKNOWN_EXIT = -255  # the code of a process whose fork server died before reporting it


class ForkServerError(OSError):
    """The fork server is gone or refused a request; the caller starts the process itself."""


def is_fork_server(cmdline: bytes) -> bool:
    """Whether /proc/PID/cmdline is a fork server's (its children show their own arguments)."""
    return cmdline.split(b"\0")[1:2] == [b"--fork-server"]


def _readable(fd: int, timeout: float | None) -> bool:
    """poll(2), not select(2): a busy server's descriptors go past select's 1024."""
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(None if timeout is None else max(0, int(timeout * 1000 + 0.999))))


class ForkedProcess:
    """A process a fork server started: what the deployers use of `subprocess.Popen`."""

    def __init__(self, pid: int, pidfd: int | None, stdin: IO[bytes], stdout: IO[bytes],
                 server: ForkServer) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._server = server

    def _exited(self, timeout: float | None) -> bool:
        if self._pidfd is not None:
            return _readable(self._pidfd, timeout)
        return self._server.wait_exit_code(self.pid, timeout, take=False) is not None  # no pidfd: the notice

    def poll(self) -> int | None:
        """The exit code once the process has exited and its server has said it; until then None,
        without waiting long: deployers poll every process under a lock."""
        if self.returncode is None and self._exited(0):
            self._settle(POLL_SETTLE_S, final=False)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._exited(timeout):
                raise subprocess.TimeoutExpired(str(self._server.binary), timeout or 0.0)
            self._settle(EXIT_CODE_TIMEOUT_S, final=True)
        assert self.returncode is not None
        return self.returncode

    def _settle(self, timeout: float, final: bool) -> None:
        code = self._server.wait_exit_code(self.pid, timeout)
        if code is None:
            if not final and not self._server.closed:
                return  # the notice is on its way
            code = UNKNOWN_EXIT
        self.returncode = code
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def __del__(self) -> None:
        if self._pidfd is not None:
            try:
                os.close(self._pidfd)
            except OSError:
                pass


class ForkServer:
    """`binary --fork-server`, started now with `log_path` as its standard error (removed at
    `close` when empty), inside `around_start` (e.g. the node's CPU pinning, which the server's
    children inherit). `spawn` forks a process of the binary."""

    def __init__(self, binary: str, log_path: Path,
                 around_start: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext) -> None:
        self.binary = binary
        self.log_path = log_path
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(log_path, "ab") as err, around_start():
                self.proc = subprocess.Popen([binary, "--fork-server", " " * TITLE_ROOM], stdin=theirs,
                                             stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        self._lock = threading.Lock()  # one request at a time: replies come in order
        self._replies: queue.Queue[tuple[bytes, list[int]] | None] = queue.Queue()
        self._exits: dict[int, int] = {}
        self._cond = threading.Condition()
        self._closed = False
        threading.Thread(target=self._read, name=f"fork-server-{self.proc.pid}", daemon=True).start()

    @property
    def alive(self) -> bool:
        return not self._closed and self.proc.poll() is None

    @property
    def closed(self) -> bool:
        """Its socket has ended: no more replies or exit notices will come."""
        return self._closed

    def spawn(self, argv: list[str], cwd: Path, stderr: IO[bytes]) -> ForkedProcess:
        """A new process of the binary with `argv` (argv[0] is the binary), in `cwd`, its standard
        error `stderr`, its standard input and output pipes to this process."""
        if argv[0] != self.binary:
            raise ValueError(f"the fork server of {self.binary} cannot start {argv[0]}")
        payload = b"".join(os.fsencode(a) + b"\0" for a in [str(cwd), *argv[1:]])
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            with self._lock:
                if not self.alive:
                    raise ForkServerError(f"the fork server of {self.binary} has exited")
                try:
                    socket.send_fds(self._sock, [payload], [in_r, out_w, stderr.fileno()])
                    reply = self._replies.get(timeout=REPLY_TIMEOUT_S)
                except (OSError, queue.Empty) as e:
                    raise ForkServerError(f"the fork server of {self.binary} did not answer: {e}") from e
        except BaseException:
            for fd in (in_w, out_r):
                os.close(fd)
            raise
        finally:
            os.close(in_r)
            os.close(out_w)
        if reply is None:
            os.close(in_w)
            os.close(out_r)
            raise ForkServerError(f"the fork server of {self.binary} has exited")
        text, fds = reply
        if not text.startswith(b"pid "):
            os.close(in_w)
            os.close(out_r)
            for fd in fds:
                os.close(fd)
            raise ForkServerError(f"the fork server of {self.binary}: {text.decode(errors='replace')}")
        return ForkedProcess(int(text[4:]), fds[0] if fds else None, os.fdopen(in_w, "wb", buffering=0),
                             os.fdopen(out_r, "rb", buffering=0), self)

    def wait_exit_code(self, pid: int, timeout: float | None, take: bool = True) -> int | None:
        """Child `pid`'s exit code once the server has reported it (with `take`, forgotten here:
        it is asked for once), None when it has not within `timeout` or the server is gone
        without saying."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while pid not in self._exits:
                left = None if deadline is None else deadline - time.monotonic()
                if self._closed or (left is not None and left <= 0):
                    return None
                self._cond.wait(left)
            return self._exits.pop(pid) if take else self._exits[pid]

    def _read(self) -> None:
        """Replies to the request waiting, exit notices to the table, until the socket closes."""
        try:
            while True:
                data, fds, _flags, _addr = socket.recv_fds(self._sock, 256, 1)
                if not data:
                    break
                if data.startswith(b"exit "):
                    _, pid, code = data.split()
                    with self._cond:
                        self._exits[int(pid)] = int(code)
                        self._cond.notify_all()
                else:
                    self._replies.put((data, fds))
        except (OSError, ValueError):
            pass
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._replies.put(None)

    def close(self) -> None:
        """End the server (its socket's end is its signal); its children go on until their own
        standard input closes, as any NCA's does."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        try:
            self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        try:  # kept when it says something: why a server failed
            if self.log_path.stat().st_size == 0:
                self.log_path.unlink()
        except OSError:
            pass


class ForkServers:
    """The fork servers of one deployer or agent: one per binary and CPU set (a server's children
    inherit its CPU set), at most `limit`, the least recently used stopped beyond that. `pin(cpus)`
    is the context a server starts in so that it runs on `cpus` (agent/node.py `pinned_start`)."""

    def __init__(self, limit: int, log_dir: Path, pin: Callable[[tuple[int, ...]], AbstractContextManager[object]],
                 warn: Callable[[str], None]) -> None:
        self.limit = limit
        self.log_dir = log_dir
        self._pin = pin
        self._warn = warn
        self._servers: dict[tuple[str, tuple[int, ...]], ForkServer] = {}  # least recently used first
        self._refused: set[str] = set()  # binaries whose server failed its first request: exec'ed from then on
        self._lock = threading.Lock()

    def spawn(self, argv: list[str], cwd: Path, stderr: IO[bytes], cpus: tuple[int, ...] = ()) -> ForkedProcess | None:
        """`argv` forked from its binary's server (started now when it has none or it died); None
        when fork servers are off or the server fails, and the caller exec's the process itself."""
        if self.limit <= 0 or argv[0] in self._refused:
            return None
        key = (argv[0], tuple(cpus))
        with self._lock:
            server = self._servers.pop(key, None)
            fresh = server is None or not server.alive
            try:
                if server is None or not server.alive:
                    if server is not None:
                        server.close()
                    while len(self._servers) >= self.limit:
                        self._servers.pop(next(iter(self._servers))).close()
                    self.log_dir.mkdir(parents=True, exist_ok=True)
                    server = ForkServer(argv[0], self.log_dir / f"fork-server-{Path(argv[0]).name}.log",
                                        lambda: self._pin(key[1]))
                self._servers[key] = server  # now the most recently used
                return server.spawn(argv, cwd, stderr)
            except OSError as e:  # ForkServerError included
                if fresh:  # a binary that does not serve --fork-server (or cannot start at all)
                    self._refused.add(argv[0])
                self._warn(f"starting {argv[0]} without its fork server: {e}")
                if server is not None:
                    self._servers.pop(key, None)
                    server.close()
                return None

    def servers(self) -> list[ForkServer]:
        with self._lock:
            return list(self._servers.values())

    def stop_all(self) -> None:
        """Stop every server; a later `spawn` starts its binary's again."""
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()

    def close(self) -> None:
        """Stop every server and start no more."""
        with self._lock:
            self.limit = 0
        self.stop_all()
