"""The life-cycle interface for software NCAs: one native process per instance, driven over the
process protocol of docs/nca-process-protocol.md (the thesis' Appendix A.3 does the same over
stdin/stdout). Subclasses say what to generate and which driver to link; this class does the rest
for every software NCA alike.
"""
from __future__ import annotations

import json
import logging
import posixpath
import queue
import threading
import time
from abc import abstractmethod
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from ...nca.deployment import ControlChannel
from ...nca.interface import (
    FILE,
    CompileResult,
    Destination,
    Endpoint,
    InstanceContext,
    NcaError,
    NcaInstance,
    NcaSpec,
    PhaseStats,
    RuntimeFilterBlob,
)
from .build import build_nca
from .codegen.messages import message_params, refers_to_messages
from .udp_transport import UdpEdges

READY_TIMEOUT_S = 30.0

log = logging.getLogger(__name__)


def _token(text: str) -> str:
    """Percent-encode a text token for the protocol (every byte outside A-Za-z0-9._~/-)."""
    return quote(text, safe="/._~-")


def relative_to_root(path: str, root: str, host: str) -> str:
    """`path` (a real path the storage resolved, FileFacts.real) relative to the host's data
    root, as the `file` command gives it; an NcaError when it is not under the root."""
    real, base = posixpath.normpath(path), posixpath.normpath(root)
    rel = posixpath.relpath(real, base) if posixpath.isabs(real) and posixpath.isabs(base) else ".."
    if rel == "." or rel == ".." or rel.startswith("../"):
        raise NcaError(f"file {path} is not under the data root {root} of host {host}: the NCA opens its "
                       "files beneath that root only (give a node's data root by its real path, without symlinks)")
    return rel


STATS_KEYS = ("wall_ns", "wait_in_ns", "wait_out_ns", "tuples_in", "bytes_in", "tuples_out", "bytes_out")


def _phase_stats(stats: dict) -> PhaseStats:
    """The `stats` object of a `done` (or `stats`) event: the known counters, `threads`, `cpu_ns`,
    and the NCA's own keys as `extra`."""
    return PhaseStats(**{k: int(stats.get(k, 0)) for k in STATS_KEYS}, threads=int(stats.get("threads", 1)),
                      cpu_ns=int(stats["cpu_ns"]) if "cpu_ns" in stats else None,
                      extra={k: v for k, v in stats.items() if k not in (*STATS_KEYS, "threads", "cpu_ns")})


class ProcessNca(NcaInstance):
    """Base class of every software NCA instance."""

    abstract = True
    driver: str = ""  # the runtime driver object to link (e.g. "scan_json")

    def __init__(self, spec: NcaSpec, context: InstanceContext) -> None:
        super().__init__(spec)
        self.context = context
        self.binary: Path | None = None
        self.proc = None
        self._events: queue.Queue[dict | None] = queue.Queue()
        self._destroyed = threading.Event()
        self._lock = threading.Lock()
        self.udp: UdpEdges | None = None  # DPDK and receiver settings of its UDP edges (compile on)
        self._last_proc: ControlChannel | None = None  # for the log tail of a process that is gone
        self._file_paths: dict[str, str] = {}  # `file` argument -> the plan's path, for errors
        self._warm_argv: list[str] | None = None
        # Live counters (docs/nca-process-protocol.md, "Live counters"): whether the process said
        # in `ready` that it answers `stats`, the phase being executed, and its latest reading.
        self._reports_stats = False
        self._phase: int | None = None
        self._reading: PhaseStats | None = None
        self._reading_lock = threading.Lock()
        self._rfilter: RuntimeFilterBlob | None = None  # what the build phase made (`rfilter` event)
        # The generated source's message table (codegen/messages.py), sent as `param msg.K`: the
        # binary holds message numbers only, so that it serves every request of its shape.
        self._messages: dict[str, str] = {}

    # -- what subclasses provide ----------------------------------------------------------

    @abstractmethod
    def generate_source(self) -> str:
        """The query-specific C source, generated from the typed operations of `spec`: what the
        generators return (a GeneratedSource, which carries the message table the process is
        given at configure), not a copy of its text."""

    def threads(self) -> int:
        return max(1, self.spec.resources.cores)

    def params(self) -> dict[str, str]:
        """Implementation-specific settings sent as `param` commands."""
        return {}

    # -- life cycle -----------------------------------------------------------------------

    def compile(self) -> CompileResult:
        source = self.generate_source()
        self._messages = message_params(source)
        if not self._messages and refers_to_messages(source):
            raise NcaError("the generated source refers to a message table it does not carry "
                           "(generate_source must return the generator's GeneratedSource itself)")
        self.udp = UdpEdges(self.spec, self.context)  # docs/udp-transport.md, "DPDK"
        result = build_nca(source, self.driver, Path(self.context.cache_dir), dpdk=self.udp.dpdk)
        self.binary = Path(result.path)
        return CompileResult(cached=result.cached, artifact=str(result.path))

    def allocate(self) -> list[Endpoint]:
        if self.binary is None or self.udp is None:
            raise NcaError("allocate called before compile")
        deployer, host = self.context.deployer, self.context.host
        if deployer is None or host is None:
            raise NcaError("no host to run on: the job placed this NCA nowhere")
        net_inputs = [p for p in self.spec.inputs if p.spec.transport != FILE]
        argv = [deployer.ship(host, self.binary), "--bind", host.address, "--inputs", str(len(net_inputs))]
        udp = [str(i) for i, p in enumerate(net_inputs) if p.spec.transport == "udp"]
        if udp:  # docs/udp-transport.md
            argv += ["--udp-inputs", ",".join(udp)]
        # A pre-started spare when the deployer keeps them (deploy/warm.py); not with DPDK, whose
        # port lease and environment belong to one process.
        reuse = not self.udp.dpdk
        if reuse:  # every binary built on the runtime serves `--fork-server` (ncas/runtime/fork_server.c)
            deployer.allow_fork_server(host, argv[0])
        with self._lock:
            if self._destroyed.is_set():
                raise NcaError("cancelled")
            self.udp.acquire()
            self.proc = proc = deployer.start(host, argv, Path(self.context.work_dir), self.spec.id, reuse=reuse)
        threading.Thread(target=self._read_events, args=(proc.events(),), name=f"{self.spec.id}-events",
                         daemon=True).start()
        ready = self._next_event(READY_TIMEOUT_S, "ready")
        self._reports_stats = ready.get("stats") is True
        if reuse:
            self._warm_argv = argv  # a spare for the next job is started when this one ends
        ports = ready.get("ports", [])
        if len(ports) != len(net_inputs):
            raise NcaError(f"NCA process reported {len(ports)} ports, expected {len(net_inputs)}")
        endpoints = [Endpoint(host.address, int(p), port.spec.transport) if port.spec.transport != "udp" else
                     Endpoint(self.udp.input_host(host.address), int(p), "udp", udp_version=self.udp.udp_version)
                     for p, port in zip(ports, net_inputs)]
        if any(ep.transport == "udp" for ep in endpoints):
            endpoints = self.udp.front(endpoints)  # a lossy relay in front of each UDP input, when testing asks
        return endpoints

    def configure(self, destinations: list[list[Destination]]) -> None:
        lines = [f"threads {self.threads()}"]
        for key, value in {**self.params(), **(self.udp.params() if self.udp else {}), **self._messages}.items():
            lines.append(f"param {_token(key)} {_token(value)}")
        lines += self._file_lines()
        net_index = 0
        for port in self.spec.inputs:
            if port.spec.transport != FILE:
                lines.append(f"expect {net_index} {port.expected_streams}")
                if port.key:  # docs/contract.md, keyed streams
                    lines.append(f"key {net_index} {port.key:016x}")
                net_index += 1
        for out_port, dests in enumerate(destinations):
            for d in dests:
                line = f"dest {out_port} {_token(d.endpoint.host)} {d.endpoint.port} {d.first_stream} {d.streams}"
                if d.endpoint.transport == "udp":  # docs/udp-transport.md
                    line += f" udp {d.endpoint.max_datagram} {d.endpoint.max_tuples}"
                    if self.udp is not None and self.udp.sends_version(d.endpoint) >= 2:
                        line += " v2"  # the receiver acknowledges: loss is repaired
                        if d.endpoint.udp_window_datagrams:  # a switch's ring: its bound from the start
                            line += f" window {d.endpoint.udp_window_datagrams}"
                if d.key:
                    line += f" key {d.key:016x}"
                if d.client_stall_ms and d.endpoint.transport != "udp":  # a UDP sender never waits
                    line += f" client {d.client_stall_ms}"
                lines.append(line)
        self._send(lines)

    def _file_lines(self) -> list[str]:
        """`root` and `file` commands for the file inputs. The process opens each file beneath the
        host's data root (openat2 RESOLVE_BENEATH), so a file replaced since the submit's check by
        a symlink leading outside the root is refused rather than read. A host without a data root
        gets the real paths as they are, which the process opens following no symlink."""
        files = [f for port in self.spec.inputs if port.spec.transport == FILE for f in port.files]
        host = self.context.host
        if not files:
            return []
        if host is None or host.data_root is None:
            return [f"file {_token(f)}" for f in files]
        names = [relative_to_root(f, host.data_root, host.name) for f in files]
        self._file_paths = dict(zip(names, files))
        return [f"root {_token(host.data_root)}", *(f"file {_token(n)}" for n in names)]

    def execute(self, phase: int) -> PhaseStats:
        with self._reading_lock:
            self._phase, self._reading = phase, PhaseStats(threads=self.threads())
        self._send([f"execute {phase}"])
        event = self._next_event(None, "done")
        return _phase_stats(event.get("stats", {}))

    def progress(self) -> PhaseStats | None:
        """Ask the process for its counters (`stats`, docs/nca-process-protocol.md) and return the
        latest answer for the phase being executed: the answer comes on the event stream a moment
        later, so each call returns what the call before asked for (zeros at first). None when the
        process does not answer `stats` or no phase was executed yet."""
        with self._reading_lock:
            reading = self._reading if self._reports_stats else None
        if reading is None:
            return None
        try:
            self._send(["stats"])
        except NcaError:
            return None  # destroyed or gone: execute reports what happened
        return reading

    def _take_stats(self, event: dict) -> None:
        """A `stats` answer (events thread): kept when it is about the phase being executed."""
        stats, phase = event.get("stats"), event.get("phase")
        if not isinstance(stats, dict) or isinstance(phase, bool) or not isinstance(phase, int):
            return
        try:
            reading = _phase_stats(stats)
        except (TypeError, ValueError):
            return
        with self._reading_lock:
            if phase == self._phase:
                self._reading = reading

    def senders_finished(self, port: int) -> None:
        """Tell the process (`senders_done`, docs/nca-process-protocol.md) so that a UDP input
        fails at once on a lost END; a TCP input notices a missing end by itself."""
        spec = self.spec.inputs[port].spec
        if spec.transport != "udp":
            return
        net_index = sum(1 for p in self.spec.inputs[:port] if p.spec.transport != FILE)
        try:
            self._send([f"senders_done {net_index}"])
        except NcaError:
            pass  # destroyed or gone: its own failure, if any, is reported by execute

    def runtime_filter(self) -> RuntimeFilterBlob | None:
        """The filter the process reported with its `rfilter` event (docs/runtime-filters.md),
        which comes before the build phase's `done`."""
        return self._rfilter

    def accept_runtime_filter(self, slot: int, blob: RuntimeFilterBlob) -> None:
        """`rfilter SLOT HEX` before the phase's `execute` (docs/nca-process-protocol.md)."""
        if blob.data is None:
            return
        self._send([f"rfilter {slot} {blob.data.hex()}"])

    def _take_rfilter(self, event: dict) -> None:
        data, rows = event.get("data"), event.get("rows", 0)
        try:
            blob = bytes.fromhex(data) if isinstance(data, str) else None
        except ValueError:
            log.warning("job %s %s: a runtime filter that is not hex: ignored", self.spec.job_id, self.spec.id)
            return
        self._rfilter = RuntimeFilterBlob(blob, int(rows) if isinstance(rows, int) else 0)

    def activity(self) -> object | None:
        """For the stall watchdog: the counters the process reports (`stats`) when it does, else
        the deployer's reading of its bytes moved and CPU used. Not the deployer's reading for a
        process asked for its counters: the `stats` exchange itself moves bytes through its
        control pipes, so an NCA blocked on a client that stopped reading would seem busy."""
        proc = self.proc
        if proc is None:
            return None
        reading = self.progress()  # asks anew: the watchdog may run without the progress poll
        if reading is not None:
            return ("counters", reading.tuples_in, reading.bytes_in, reading.tuples_out, reading.bytes_out)
        return self.context.deployer.activity(proc)

    def destroy(self) -> None:
        with self._lock:
            self._destroyed.set()
            proc, self.proc = self.proc, None
            self._last_proc = proc or self._last_proc
        if proc is not None:
            self.context.deployer.stop(proc)
        if self.udp is not None:
            self.udp.release()  # after the process is gone: its DPDK port is free again
        self._events.put(None)  # wake a blocked execute
        if self._warm_argv is not None and self.context.host is not None:
            # Now rather than at allocate: starting a process costs a Parquet scan ~8 ms of CPU,
            # which would slow the job's own stages on a small machine.
            self.context.deployer.warm_up(self.context.host, self._warm_argv)
            self._warm_argv = None

    # -- plumbing -------------------------------------------------------------------------

    def _send(self, lines: list[str]) -> None:
        proc = self.proc
        if proc is None or self._destroyed.is_set():
            raise NcaError("cancelled")
        try:
            proc.send(("\n".join(lines) + "\n").encode())
        except (BrokenPipeError, OSError, ValueError) as e:
            raise NcaError(f"NCA process is gone ({e}){self._stderr_tail()}") from None

    def _read_events(self, lines: Iterator[bytes]) -> None:
        """Events until the instance exits or is stopped."""
        try:
            for raw in lines:
                try:
                    event = json.loads(raw)
                except ValueError:
                    event = {"event": "log", "message": raw.decode(errors="replace").rstrip()}
                if isinstance(event, dict) and not self._side_event(event):
                    self._events.put(event)
        except (OSError, ValueError):
            pass
        self._events.put(None)

    def _side_event(self, event: dict) -> bool:
        """Take an event that is not for execute's wait; False for those that are. Subclasses
        add their own (a shared scan's `member` events)."""
        if event.get("event") == "stats":
            self._take_stats(event)  # an answer to `progress`
            return True
        if event.get("event") == "rfilter":
            self._take_rfilter(event)  # before the build phase's `done`
            return True
        return False

    def _next_event(self, timeout: float | None, want: str) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                event = self._events.get(timeout=left)
            except queue.Empty:
                raise NcaError(f"NCA process did not report '{want}' within {timeout:.0f} s") from None
            if event is None:
                if self._destroyed.is_set():
                    raise NcaError("cancelled")
                raise NcaError(f"NCA process exited before '{want}'{self._stderr_tail()}")
            kind = event.get("event")
            if kind == want:
                return event
            if kind == "error":
                file = event.get("file")  # as the `file` command named it; the job names the plan's path
                raise NcaError(str(event.get("message", "NCA failed")), file=self._file_paths.get(file, file),
                               record=event.get("record"))
            if kind == "log":  # information worth keeping: an ignored stray connection, say
                log.info("job %s %s: %s", self.spec.job_id, self.spec.id, event.get("message"))
            # unknown events are informational

    def _stderr_tail(self, limit: int = 2000) -> str:
        proc = self.proc or self._last_proc
        text = self.context.deployer.log_tail(proc, limit) if proc is not None else ""
        return f": {text}" if text else ""
