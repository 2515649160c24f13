"""End-to-end fixtures: a real `jumpgate serve` process on loopback over a generated data root,
and DuckDB over the same files as the oracle."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .data import write_all_types

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, data_root: Path, cache_dir: Path, log_path: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        exe = Path(sys.executable).with_name("jumpgate")
        argv = [str(exe), "serve", "--port", str(self.port), "--data-root", str(data_root),
                "--cache-dir", str(cache_dir)]
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.http = httpx.Client(base_url=self.url, timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {log_path.read_text()[-2000:]}")
            try:
                if self.http.get("/v1/ncas").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("server did not start")

    def children(self) -> list[int]:
        """PIDs of live NCA processes started by the server (each NCA has its own session)."""
        out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
        return [int(p) for p, pp in (line.split() for line in out.splitlines()) if int(pp) == self.proc.pid]

    def stop(self) -> None:
        self.http.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self._log.close()


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    write_all_types(root / "t.jsonl", rows=5000, seed=11)
    return root


@pytest.fixture(scope="session")
def server(data_root, tmp_path_factory):
    cache = Path(os.environ.get("JUMPGATE_TEST_CACHE", tmp_path_factory.mktemp("cache")))
    srv = Server(data_root, cache, tmp_path_factory.mktemp("logs") / "server.log")
    yield srv
    srv.stop()
    leftover = srv.children()
    assert not leftover, f"NCA processes left behind: {leftover}"


@pytest.fixture
def duck(data_root):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    yield con
    con.close()

