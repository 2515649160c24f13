"""The local deployer: NCAs run as processes on this machine.

Each NCA process gets its own process group so that `stop` takes every child with it, and its
standard input is a pipe from the control plane: if the control plane dies, the pipe closes and
the NCA exits (docs/nca-process-protocol.md), so nothing is ever left behind.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass
class NcaProcess:
    popen: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid


class LocalDeployer:
    """Starts and stops NCA processes; keeps a registry so shutdown can sweep stragglers."""

    kind = "local"

    def __init__(self, bind_host: str = "127.0.0.1") -> None:
        self.bind_host = bind_host
        self._procs: dict[int, NcaProcess] = {}
        self._lock = threading.Lock()

    def start(self, argv: list[str], work_dir: Path, log_name: str) -> NcaProcess:
        log_path = work_dir / f"{log_name}.stderr"
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(argv, cwd=work_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, start_new_session=True, bufsize=0)
        proc = NcaProcess(popen, log_path)
        with self._lock:
            self._procs[popen.pid] = proc
        return proc

    def stop(self, proc: NcaProcess, grace: float = 2.0) -> None:
        """Close stdin (the NCA's signal to exit), then TERM and KILL the process group."""
        p = proc.popen
        for stream in (p.stdin, p.stdout):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass
        if p.poll() is None:
            try:
                p.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            if p.poll() is not None:
                break
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        # The group may still hold children of the NCA even when the leader exited.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        with self._lock:
            self._procs.pop(p.pid, None)

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
        with self._lock:
            return [p for p in self._procs.values() if p.popen.poll() is None]

    def shutdown(self) -> None:
        for proc in list(self._procs.values()):
            self.stop(proc, grace=0.5)
