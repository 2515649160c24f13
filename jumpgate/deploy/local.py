"""The local deployer: NCAs run as processes on this machine, its one host.

Each NCA process gets its own process group so that `stop` takes every child with it, and its
standard input is a pipe from the control plane: if the control plane dies, the pipe closes and
the NCA exits (docs/nca-process-protocol.md), so nothing is ever left behind. Its control channel
is that pipe and its standard output; its standard error goes to `<name>.stderr` in the job's
directory.

`start(..., reuse=True)` takes a pre-started spare of the same command line when the warm pool
(deploy/warm.py) has one; `warm_up` has the pool start one for the next job. A binary declared with
`allow_fork_server` has its processes, spares included, forked from one loaded copy of it
(agent/fork_server.py) instead of exec'ed.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from ..agent.fork_server import ForkedProcess, ForkServers
from ..contract.readiness import wait_readable
from ..nca.deployment import ControlChannel, Deployer, Host
from .affinity import pinned_start
from .warm import WarmPool, WarmSettings

log = logging.getLogger(__name__)


def _wait_exit(p: subprocess.Popen | ForkedProcess, timeout: float) -> bool:
    """Wait up to `timeout` for the process to exit; True when it has (and is reaped).
    Popen.wait with a timeout sleeps in growing steps, oversleeping an exit that takes a
    millisecond by one or two; a pidfd becomes readable the moment the process exits."""
    if isinstance(p, ForkedProcess):  # waits on the pidfd its fork server sent
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        fd = os.pidfd_open(p.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel), or already reaped
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        wait_readable(fd, timeout)
    finally:
        os.close(fd)
    return p.poll() is not None


class LocalProcess(ControlChannel):
    """An NCA process of this machine: stdin carries commands, stdout events."""

    def __init__(self, popen: subprocess.Popen | ForkedProcess, host: Host, name: str, log_path: Path,
                 remove_log: bool = False) -> None:
        self.popen = popen
        self.host = host
        self.name = name
        self.log_path = log_path
        self.remove_log = remove_log  # a spare's log lives outside any job's directory
        # Set once a thread reads the events: that thread closes stdout at end of file. Closing
        # it in `stop` while the thread may be about to read would let the read land on the same
        # descriptor number reused by the next pipe opened (a spare's stdout), stealing its bytes.
        self.reading = False
        # A spare waiting for a job (from the moment it is spawned, so that a spare still being
        # started is never taken for a job's process left behind).
        self.waiting = False
        self._send_lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def send(self, data: bytes) -> None:
        with self._send_lock:  # the executor's notices may come while a command is written
            self.popen.stdin.write(data)
            self.popen.stdin.flush()

    def events(self) -> Iterator[bytes]:
        self.reading = True  # now, not when the iteration starts: `stop` may come first
        return self._lines()

    def _lines(self) -> Iterator[bytes]:
        stdout = self.popen.stdout
        try:
            # In chunks: the pipe is unbuffered (bufsize=0, for stdin), and iterating its lines takes
            # a read per byte, which a long event (a join's runtime filter, docs/runtime-filters.md:
            # hundreds of KB) turned into a third of a second. A read returns what has arrived.
            pending = bytearray()
            while chunk := stdout.read(1 << 16):
                pending += chunk
                start = 0
                while (end := pending.find(b"\n", start)) >= 0:
                    yield bytes(pending[start:end + 1])
                    start = end + 1
                del pending[:start]
            if pending:
                yield bytes(pending)
        except (OSError, ValueError):
            return
        finally:
            try:
                stdout.close()
            except OSError:
                pass


class LocalDeployer(Deployer):
    """Starts and stops NCA processes; keeps a registry so shutdown can sweep stragglers."""

    kind = "local"

    def __init__(self, bind_host: str = "127.0.0.1", warm: WarmSettings | None = None,
                 spare_dir: Path | None = None, cores: int | None = None, name: str = "local",
                 data_root: Path | str | None = None, cpus: tuple[int, ...] = ()) -> None:
        # the data root as LocalStorage resolves it, so that the real paths it returns are under it
        root = os.path.realpath(data_root) if data_root is not None else None
        self.host = Host(name, bind_host, cores or len(cpus) or os.cpu_count() or 1, data_root=root, cpus=cpus)
        self._procs: dict[int, LocalProcess] = {}
        self._lock = threading.Lock()
        settings = warm if warm is not None and spare_dir is not None else WarmSettings(per_binary=0)
        self.warm = WarmPool(settings, lambda argv, d, name: self._spawn(argv, d, name, spare=True),
                             self.stop, lambda p: p.popen.poll() is None, spare_dir or Path("."))
        # Only a server's (spare_dir: where their logs go).
        self.fork_servers = ForkServers(settings.fork_servers if spare_dir is not None else 0, self.warm.spare_dir,
                                        pinned_start, log.warning)
        self._forkable: set[str] = set()  # binaries declared with allow_fork_server

    def hosts(self) -> list[Host]:
        return [self.host]

    def start(self, host: Host, argv: list[str], work_dir: Path, name: str, *,
              reuse: bool = False) -> LocalProcess:
        """A process for one job; with `reuse`, a waiting spare started with the same `argv` if
        there is one (its working directory and log are the pool's), else a fresh one."""
        if host.name != self.host.name:
            raise ValueError(f"the local deployer has no host {host.name!r}")
        proc = self.warm.take(argv) if reuse else None
        if proc is None:
            return self._spawn(argv, work_dir, name)
        proc.waiting = False
        return proc

    def allow_fork_server(self, host: Host, binary: str) -> None:
        self._forkable.add(binary)

    def _spawn(self, argv: list[str], work_dir: Path, name: str, *, spare: bool = False) -> LocalProcess:
        """A new process; a `spare`'s log lives in the pool's directory and goes with it."""
        log_path = work_dir / f"{name}.stderr"
        with self._lock:  # registered as it starts: `running` and `spares` see every child
            with open(log_path, "wb") as err:
                popen = self.fork_servers.spawn(argv, work_dir, err, self.host.cpus) \
                    if argv[0] in self._forkable else None
                if popen is None:
                    with pinned_start(self.host.cpus):
                        popen = subprocess.Popen(argv, cwd=work_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                 stderr=err, start_new_session=True, bufsize=0)
            proc = LocalProcess(popen, self.host, name, log_path, remove_log=spare)
            proc.waiting = spare
            self._procs[popen.pid] = proc
        return proc

    def warm_up(self, host: Host, argv: list[str]) -> None:
        """Have a spare started with `argv` wait for the next job (in the background; the pool
        keeps at most its per-binary number). Software NCAs call it when their job's process
        is destroyed, so that the start does not compete with the job for CPU."""
        self.warm.replenish(argv)

    def stop(self, channel: ControlChannel, grace: float = 2.0) -> None:
        """Close stdin (the NCA's signal to exit), then TERM and KILL the process group."""
        proc = self._own(channel)
        p = proc.popen
        for stream in (p.stdin,) if proc.reading else (p.stdin, p.stdout):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass
        if p.poll() is None:
            _wait_exit(p, 0.2)
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            if p.poll() is not None:
                break
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            _wait_exit(p, wait)
        # The group may still hold children of the NCA even when the leader exited.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        with self._lock:
            self._procs.pop(p.pid, None)
        if proc.remove_log:
            proc.log_path.unlink(missing_ok=True)

    def activity(self, channel: ControlChannel) -> tuple[int, ...] | None:
        """/proc's rchar, wchar and utime+stime of the process: they change whenever any of its
        threads moves bytes through a system call or uses CPU. None when they cannot be read (the
        process is gone, or no /proc)."""
        pid = self._own(channel).pid
        try:
            with open(f"/proc/{pid}/io") as f:
                io = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            # fields after the command name (which may hold spaces): utime and stime are 14 and 15
            fields = stat[stat.rindex(")") + 2:].split()
            return int(io["rchar"]), int(io["wchar"]), int(fields[11]) + int(fields[12])
        except (OSError, KeyError, ValueError, IndexError):
            return None

    def log_tail(self, channel: ControlChannel, limit: int = 2000) -> str:
        try:
            return self._own(channel).log_path.read_text(errors="replace")[-limit:].strip()
        except OSError:
            return ""

    def running(self) -> list[LocalProcess]:
        """Processes that belong to jobs (not idle spares) and still run."""
        with self._lock:
            return [p for p in self._procs.values() if p.popen.poll() is None and not p.waiting]

    def spares(self) -> list[int]:
        """Spares waiting for a job, those still being started included."""
        with self._lock:
            return sorted(p.pid for p in self._procs.values() if p.waiting and p.popen.poll() is None)

    def close_spares(self) -> None:
        self.warm.shutdown()

    def shutdown(self) -> None:
        self.warm.shutdown()
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            self.stop(proc, grace=0.5)
        self.fork_servers.close()

    @staticmethod
    def _own(channel: ControlChannel) -> LocalProcess:
        if not isinstance(channel, LocalProcess):
            raise TypeError(f"not a process of the local deployer: {channel!r}")
        return channel
