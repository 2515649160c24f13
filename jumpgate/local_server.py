"""Start a real `jumpgate serve` process on a free loopback port and stop it cleanly: used by the
end-to-end tests, the benchmarks and anyone embedding Jumpgate in their own test suite."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from .agent.fork_server import is_fork_server


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class LocalServer:
    def __init__(self, data_root: Path, cache_dir: Path | None = None, log_path: Path | None = None,
                 cores: int | None = None, extra_args: list[str] | None = None, ready_timeout: float = 60,
                 env: dict[str, str] | None = None, wrapper: list[str] | None = None) -> None:
        """`env` adds to (or overrides) the environment the server inherits, e.g. a setting
        that offers an NCA (JUMPGATE_SWITCH_MODEL=1); `wrapper` is a command line the server's
        runs under (it ends by exec-ing its arguments), e.g. one entering a mount namespace."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        exe = Path(sys.executable).with_name("jumpgate")
        # --exit-with-parent: a test run or benchmark killed midway leaves no server behind
        argv = [str(exe) if exe.exists() else "jumpgate", "serve", "--port", str(self.port),
                "--data-root", str(data_root), "--exit-with-parent"]
        if cache_dir is not None:
            argv += ["--cache-dir", str(cache_dir)]
        if cores is not None:
            argv += ["--cores", str(cores)]
        argv = [*(wrapper or []), *argv, *(extra_args or [])]
        self.log_path = log_path
        self._log = open(log_path, "wb") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, **env} if env else None)
        self.http = httpx.Client(base_url=self.url, timeout=60)
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = log_path.read_text()[-2000:] if log_path else ""
                self.stop()  # the log file and the HTTP client, which nobody else will close
                raise RuntimeError(f"jumpgate serve exited with {self.proc.returncode}: {tail}")
            try:
                if self.http.get("/v1/health").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"jumpgate serve did not answer within {ready_timeout:.0f} s")

    def _processes(self) -> list[tuple[int, int, str]]:
        """Every live (not zombie) process: pid, parent pid, state."""
        out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,stat="], capture_output=True, text=True).stdout
        rows = []
        for line in out.splitlines():
            pid, ppid, stat = line.split(None, 2)
            if not stat.startswith("Z"):
                rows.append((int(pid), int(ppid), stat))
        return rows

    def _fork_servers(self, rows: list[tuple[int, int, str]]) -> set[int]:
        found = set()
        for pid, ppid, _ in rows:
            if ppid == self.proc.pid:
                try:
                    if is_fork_server(Path(f"/proc/{pid}/cmdline").read_bytes()):
                        found.add(pid)
                except OSError:  # it has ended meanwhile
                    pass
        return found

    def fork_servers(self) -> list[int]:
        """PIDs of the server's fork servers (docs/nca-process-protocol.md, "Fork servers")."""
        return sorted(self._fork_servers(self._processes()))

    def children(self, *, spares: bool = False) -> list[int]:
        """PIDs of live NCA processes the server started, itself or through its fork servers
        (whose children they are); without `spares`, not the idle pre-started ones it keeps for
        the next job (GET /v1/health "ncas_warm")."""
        # The processes first, then which are spares: a spare started between the two (the pool
        # replaces one after each job) is then not in the list, rather than in it unexcused.
        rows = self._processes()
        idle: set[int] = set()
        if not spares and self.proc.poll() is None:
            try:
                idle = set(self.http.get("/v1/health").json().get("ncas_warm", []))
            except (httpx.HTTPError, ValueError):
                pass
        forkers = self._fork_servers(rows)
        return [pid for pid, ppid, _ in rows
                if (ppid == self.proc.pid and pid not in forkers or ppid in forkers) and pid not in idle]

    def stop(self) -> None:
        self.http.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self._log is not subprocess.DEVNULL:
            self._log.close()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
