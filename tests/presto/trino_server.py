"""Start a real Trino 476 server on 127.0.0.1 from the cached install (scripts/trino-install.sh),
with a generated etc/ and plugin folder, and stop it with its whole process group.

Independent of Jumpgate: a caller passes the catalogs (name -> properties) and extra plugin
folders (e.g. the built Jumpgate connector). Sized for a 2-core, 24 GiB machine shared with other
tests: a 3 GiB heap, few task threads.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

VERSION = "476"
CACHE = Path(os.environ.get("JUMPGATE_TRINO_CACHE", f"/var/cache/jumpgate/trino/{VERSION}"))
HOME = CACHE / f"trino-server-{VERSION}"
JAVA_HOME = Path(os.environ.get("JUMPGATE_TRINO_JAVA_HOME", "/usr/lib/jvm/temurin-25-jdk-amd64"))
# The Trino plugins a test run loads: only these (loading all ~60 costs seconds and memory).
BASE_PLUGINS = ["tpch"]

JVM_CONFIG = """-server
-Xmx3G
-Xss2M
-XX:+UseG1GC
-XX:G1HeapRegionSize=32M
-XX:+ExplicitGCInvokesConcurrent
-XX:+ExitOnOutOfMemoryError
-XX:-OmitStackTraceInFastThrow
-XX:ReservedCodeCacheSize=256M
-XX:PerMethodRecompilationCutoff=10000
-XX:PerBytecodeRecompilationCutoff=10000
-Djdk.attach.allowAttachSelf=true
-Djdk.nio.maxCachedBufferSize=2000000
-Dfile.encoding=UTF-8
-XX:+EnableDynamicAgentLoading
-XX:ActiveProcessorCount=2
"""


def missing() -> str | None:
    """Why a Trino server cannot be started here, or None."""
    if not (JAVA_HOME / "bin" / "java").exists():
        return f"no Java 24+ at {JAVA_HOME} (Trino {VERSION} needs one; see scripts/trino-install.sh)"
    if not (HOME / "bin" / "launcher").exists() or not (CACHE / ".installed").exists():
        return f"Trino {VERSION} is not installed in {CACHE}: run scripts/trino-install.sh (or scripts/setup.sh)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _props(d: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in d.items())


class TrinoServer:
    """One Trino node in `workdir`, on a free loopback port: a single-node Trino (coordinator and
    worker), or, given `coordinator` (its URL), a worker that joins that coordinator's cluster."""

    def __init__(self, workdir: Path, catalogs: dict[str, dict[str, str]],
                 extra_plugins: dict[str, Path] | None = None, ready_timeout: float = 180,
                 log_levels: dict[str, str] | None = None, coordinator: str | None = None) -> None:
        why = missing()
        if why:
            raise RuntimeError(why)
        self.workdir = Path(workdir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        etc = self.workdir / "etc"
        shutil.rmtree(self.workdir, ignore_errors=True)
        (etc / "catalog").mkdir(parents=True)
        data = self.workdir / "data"
        data.mkdir()
        self.coordinator = coordinator
        (etc / "node.properties").write_text(_props({
            "node.environment": "jumpgate_test", "node.id": f"jumpgate-test-{os.getpid()}-{self.port}",
            "node.data-dir": str(data), "node.bind-ip": "127.0.0.1", "node.internal-address": "127.0.0.1"}))
        (etc / "jvm.config").write_text(JVM_CONFIG)
        (etc / "config.properties").write_text(_props({
            **({"coordinator": "false"} if coordinator else {"coordinator": "true", "node-scheduler.include-coordinator": "true"}),
            "http-server.http.port": str(self.port), "discovery.uri": coordinator or self.url,
            "query.max-memory": "1GB", "query.max-memory-per-node": "1GB",
            "task.concurrency": "2", "task.max-worker-threads": "4",
            "node-scheduler.min-candidates": "1", "catalog.management": "static",
            "query.client.timeout": "5m", "exchange.http-client.max-connections-per-server": "50",
        }))
        (etc / "log.properties").write_text(_props({"io.trino": "INFO", **(log_levels or {})}))
        for name, props in catalogs.items():
            (etc / "catalog" / f"{name}.properties").write_text(_props(props))
        # A plugin folder of our own: links to the chosen built-in plugins, plus the extra ones.
        plugins = self.workdir / "plugin"
        plugins.mkdir()
        for p in BASE_PLUGINS:
            (plugins / p).symlink_to(HOME / "plugin" / p)
        for name, path in (extra_plugins or {}).items():
            (plugins / name).symlink_to(Path(path).resolve())
        self.ready_sql = ("SELECT count(*) FROM tpch.tiny.region" if catalogs.get("tpch", {}).get("connector.name") == "tpch"
                          else "SELECT 1")
        self.log_path = self.workdir / "server.log"
        env = {**os.environ, "JAVA_HOME": str(JAVA_HOME), "PATH": f"{JAVA_HOME}/bin:{os.environ['PATH']}"}
        self._log = open(self.log_path, "wb")
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [str(HOME / "bin" / "launcher"), "run", f"--etc-dir={etc}", f"--data-dir={data}",
             f"-Dplugin.dir={plugins}", f"--server-log-file={self.log_path}.jvm"],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=self.workdir)
        try:
            self._wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Trino exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/v1/info", timeout=2) as r:
                    # Started, and its node registered with its catalogs: a first query then finds a
                    # node to run on (else NO_NODES_AVAILABLE for a few seconds after start).
                    if not json.load(r).get("starting", True) and (self.coordinator or self._ready_query()):
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.5)
        raise RuntimeError(f"Trino did not become ready within {timeout:.0f} s: {self.log_tail()}")

    def _ready_query(self) -> bool:
        """Whether a query that reads a table runs (over the REST protocol, following nextUri)."""
        sql = self.ready_sql.encode()
        req = urllib.request.Request(self.url + "/v1/statement", data=sql, method="POST",
                                     headers={"X-Trino-User": "readiness"})
        with urllib.request.urlopen(req, timeout=10) as r:
            answer = json.load(r)
        while answer.get("nextUri"):
            with urllib.request.urlopen(urllib.request.Request(answer["nextUri"], headers={"X-Trino-User": "readiness"}),
                                        timeout=10) as r:
                answer = json.load(r)
        return not answer.get("error")

    def log_tail(self, n: int = 4000) -> str:
        text = ""
        for p in (self.log_path, Path(f"{self.log_path}.jvm")):
            if p.exists():
                text += p.read_text(errors="replace")[-n:]
        return text

    def log_text(self) -> str:
        p = Path(f"{self.log_path}.jvm")
        return (p.read_text(errors="replace") if p.exists() else "") + (
            self.log_path.read_text(errors="replace") if self.log_path.exists() else "")

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        self._log.close()
