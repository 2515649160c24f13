"""NCA plugins that misbehave on purpose (design: "test NCAs that are slow, never ready, or fail
mid-stream, so failure handling is tested on every change"; JupyterHub's test spawners).

They are real `NcaImplementation`s driven by the real executor; their data path is a Python
thread that writes genuine NTF streams (contract §3) to the destinations it was configured with.
Each takes a JSON `read` whose file name selects the behaviour, so one registry holds them all.
"""
from __future__ import annotations

import socket
import struct
import threading
import time

from jumpgate.contract.ntf import generate_ntf
from jumpgate.dataflow.plan import LogicalPlan, Read
from jumpgate.nca.interface import (
    FILE,
    NTF,
    CompileResult,
    Destination,
    Endpoint,
    InstanceContext,
    NcaError,
    NcaImplementation,
    NcaInstance,
    NcaSpec,
    OutputSpec,
    PhaseStats,
    StreamSpec,
    Verdict,
)

BEHAVIOURS = ("ok", "slow", "never_ready", "fail_compile", "fail_midstream", "stuck")


def behaviour_of(read: Read) -> str:
    stem = read.paths[0].rsplit("/", 1)[-1].split(".")[0]
    return stem if stem in BEHAVIOURS else "ok"


class MisbehavingSource(NcaImplementation):
    """Emits `tuples` all-NULL rows of the read's schema, misbehaving as its file name says: `slow`
    (2 ms a tuple), `never_ready`, `fail_compile`, `fail_midstream`, `stuck` (opens its stream,
    then neither sends nor ends it)."""

    name = "testing.misbehaving_source"
    description = "test NCA: a source that is slow, never ready, or fails (chosen by file name)"
    operation_kinds = ("read",)
    tuples = 1000

    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        if anchor and isinstance(plan.op(anchor), Read):
            return Verdict.yes((anchor,))
        return Verdict.no("takes only a read")

    def match_input(self, plan, ops, inputs) -> Verdict[None]:
        ok = len(inputs) == 1 and inputs[0].transport == FILE
        return Verdict.yes() if ok else Verdict.no("reads files only")

    def match_output(self, plan, ops, inputs, wanted) -> Verdict[tuple[OutputSpec, ...]]:
        if wanted and wanted[0] not in (None, "tcp"):
            return Verdict.no("tcp only")
        layout = generate_ntf(plan.schemas[ops[-1]])
        return Verdict.yes((OutputSpec(StreamSpec(NTF, "tcp", layout)),))

    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        return MisbehavingInstance(spec, behaviour_of(spec.operations()[0]), self.tuples)


class MisbehavingInstance(NcaInstance):
    def __init__(self, spec: NcaSpec, behaviour: str, tuples: int) -> None:
        super().__init__(spec)
        self.behaviour = behaviour
        self.tuples = tuples
        self.destinations: list[list[Destination]] = []
        self.destroyed = threading.Event()
        self.sockets: list[socket.socket] = []
        self.sent = 0

    def activity(self) -> object | None:
        return self.sent  # what a stalled NCA stops changing (executor's stall watchdog)

    def compile(self) -> CompileResult:
        if self.behaviour == "fail_compile":
            raise NcaError("compiler said no (on purpose)")
        return CompileResult(cached=True, artifact="python")

    def allocate(self) -> list[Endpoint]:
        if self.behaviour == "never_ready":
            if not self.destroyed.wait(60):
                raise NcaError("never became ready")
            raise NcaError("cancelled")
        return []

    def configure(self, destinations: list[list[Destination]]) -> None:
        self.destinations = destinations

    def execute(self, phase: int) -> PhaseStats:
        layout = self.spec.outputs[0].spec.layout
        tup = b"\xff" * layout.null_bytes + b"\x00" * (layout.fixed_size - layout.null_bytes)
        frame = struct.pack("<I", len(tup)) + tup
        t0 = time.monotonic_ns()
        try:
            return self._send(frame, t0)
        finally:
            # A cancel may land between a connect and destroy()'s pass over the sockets, so the
            # data path closes what it opened however it ends, like a real NCA's process exiting.
            for s in self.sockets:
                s.close()

    def _send(self, frame: bytes, t0: int) -> PhaseStats:
        for dest in self.destinations[0]:
            s = socket.create_connection((dest.endpoint.host, dest.endpoint.port), timeout=10)
            self.sockets.append(s)
            s.sendall(b"NTF1" + struct.pack("<I", dest.first_stream))
        if self.behaviour == "stuck":  # connected, then neither sends nor ends, like a lost stream
            self.destroyed.wait()
            raise NcaError("cancelled")
        sent = 0
        for i in range(self.tuples):
            if self.destroyed.is_set():
                raise NcaError("cancelled")
            if self.behaviour == "fail_midstream" and i == self.tuples // 2:
                raise NcaError("lost my accelerator (on purpose)", file=self.spec.operations()[0].paths[0],
                               record=i + 1)
            if self.behaviour == "slow":
                time.sleep(0.002)
            for s in self.sockets:
                s.sendall(frame)
            sent += 1
            self.sent = sent
        for s in self.sockets:
            s.sendall(struct.pack("<IQ", 0, sent))
        return PhaseStats(wall_ns=time.monotonic_ns() - t0, tuples_out=sent, bytes_out=sent * len(frame))

    def destroy(self) -> None:
        self.destroyed.set()
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass
