"""The local deployer: NCAs run as processes on this machine.

Each NCA process gets its own process group so that `stop` takes every child with it, and its
standard input is a pipe from the control plane: if the control plane dies, the pipe closes and
the NCA exits (docs/nca-process-protocol.md), so nothing is ever left behind.

`start_for_job` takes a pre-started spare of the same command line when the warm pool
(deploy/warm.py) has one; `warm_up` has the pool start one for the next job.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from .warm import WarmPool, WarmSettings


def _wait_exit(p: subprocess.Popen, timeout: float) -> bool:
    """Wait up to `timeout` for the process to exit; True when it has (and is reaped).
    Popen.wait with a timeout sleeps in growing steps, oversleeping an exit that takes a
    millisecond by one or two; a pidfd becomes readable the moment the process exits."""
    try:
        fd = os.pidfd_open(p.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel), or already reaped
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    return p.poll() is not None


@dataclass
class NcaProcess:
    popen: subprocess.Popen
    log_path: Path
    remove_log: bool = False  # a spare's log lives outside any job's directory: removed on stop
    # Set by whoever reads stdout in a thread of its own: that thread closes it at end of file.
    # Closing it here while the thread may be about to read would let the read land on the same
    # descriptor number reused by the next pipe opened (a spare's stdout), stealing its bytes.
    reader_closes_stdout: bool = False

    @property
    def pid(self) -> int:
        return self.popen.pid


class LocalDeployer:
    """Starts and stops NCA processes; keeps a registry so shutdown can sweep stragglers."""

    kind = "local"

    def __init__(self, bind_host: str = "127.0.0.1", warm: WarmSettings | None = None,
                 spare_dir: Path | None = None) -> None:
        self.bind_host = bind_host
        self._procs: dict[int, NcaProcess] = {}
        self._lock = threading.Lock()
        settings = warm if warm is not None and spare_dir is not None else WarmSettings(per_binary=0)
        self.warm = WarmPool(settings, lambda argv, d, name: self.start(argv, d, name, remove_log=True),
                             self.stop, lambda p: p.popen.poll() is None, spare_dir or Path("."))

    def start(self, argv: list[str], work_dir: Path, log_name: str, *, remove_log: bool = False) -> NcaProcess:
        log_path = work_dir / f"{log_name}.stderr"
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(argv, cwd=work_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, start_new_session=True, bufsize=0)
        proc = NcaProcess(popen, log_path, remove_log)
        with self._lock:
            self._procs[popen.pid] = proc
        return proc

    def start_for_job(self, argv: list[str], work_dir: Path, log_name: str) -> NcaProcess:
        """A process for one job: a waiting spare started with the same `argv` if there is one
        (its working directory and log are the pool's), else a fresh one. The NCA must not
        depend on its working directory (software NCAs get absolute paths)."""
        proc = self.warm.take(argv)
        return proc if proc is not None else self.start(argv, work_dir, log_name)

    def warm_up(self, argv: list[str]) -> None:
        """Have a spare started with `argv` wait for the next job (in the background; the pool
        keeps at most its per-binary number). Software NCAs call it when their job's process
        is destroyed, so that the start does not compete with the job for CPU."""
        self.warm.replenish(argv)

    def stop(self, proc: NcaProcess, grace: float = 2.0) -> None:
        """Close stdin (the NCA's signal to exit), then TERM and KILL the process group."""
        p = proc.popen
        for stream in (p.stdin,) if proc.reader_closes_stdout else (p.stdin, p.stdout):
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

    def activity(self, proc: NcaProcess) -> tuple[int, ...] | None:
        """A reading that changes whenever the process (any of its threads) moves bytes through
        a system call or uses CPU: /proc's rchar, wchar and utime+stime. None when it cannot be
        read (the process is gone, or no /proc). The executor's stall watchdog compares them."""
        try:
            with open(f"/proc/{proc.pid}/io") as f:
                io = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
            with open(f"/proc/{proc.pid}/stat") as f:
                stat = f.read()
            # fields after the command name (which may hold spaces): utime and stime are 14 and 15
            fields = stat[stat.rindex(")") + 2:].split()
            return int(io["rchar"]), int(io["wchar"]), int(fields[11]) + int(fields[12])
        except (OSError, KeyError, ValueError, IndexError):
            return None

    def running(self) -> list[NcaProcess]:
        """Processes that belong to jobs (not idle spares) and still run."""
        spares = set(self.warm.pids())
        with self._lock:
            return [p for p in self._procs.values() if p.popen.poll() is None and p.pid not in spares]

    def shutdown(self) -> None:
        self.warm.shutdown()
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            self.stop(proc, grace=0.5)
