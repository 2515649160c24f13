"""The switch aggregator NCA plugin (thesis §3.5.6): a partial aggregation on a programmable switch,
fed by software NCAs over UDP, forwarding to a software final aggregation (docs/switch.md).

Two registered implementations share this code and differ only in the switch behind them:

- `switch.aggregate`: a real switch, given by JUMPGATE_SWITCH (`tofino://...` through BF Runtime,
  `bmv2://...` through P4Runtime); without it, the operator interface says so and declines.
- `switch.model`: the switch MODEL (p4/model/), a local process that runs the same pipeline on UDP
  sockets, for machines without a switch. Off unless JUMPGATE_SWITCH_MODEL=1 (tests, demos),
  because everywhere else a partial aggregation is better served by the software NCAs.

Operator interface: only what the switch can do (controller/query.py): a partial aggregation by
one key of at most 64 bits with at most two integer or decimal sums and one count, fixed-size
tuples of at most eight fields arriving over UDP, up to defs.TUPLES_PER_DATAGRAM per datagram, in
version 2 (acknowledged) streams where the backend takes them (the model: SwitchBackend.udp_version),
else version 1; it emits the contract layout of the partial-state schema over UDP, so the final
aggregation reads it like any partial output.
Its register slots are a pool (ResourceRequest.pools) the plugin leases per job: two jobs never
share slots, and the service's capacity check maps a job that would find none to software NCAs.

Life cycle: compile = translate the aggregation (query.py); allocate = lease slots, open the
backend, take the job's UDP ingress port and a control socket; configure = write the job's table
entries (controller.py) and reset its counters (and the ring of version 2 streams); execute = wait
for every sender's END (forwarded by the switch with its own count of what arrived: in version 1
loss fails the job; a version 2 sender repeats what is lost, and its stream is complete once the
switch has taken every datagram; an END that has not come once the executor said the senders
finished and the switch stopped counting their datagrams fails it, `senders_finished`) and until
the switch has taken every tuple those ENDs count through its table (a datagram's later tuples
recirculate inside the switch), then flush the job's slots
(one FLUSH datagram per slot; the data plane emits occupied ones) and end the switch's output
stream (FINISH); destroy = clear what a failed job left (FLUSH with DISCARD), delete the entries,
reset the counters, release the port, the backend and the lease.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import random
import socket
import threading
import time
from pathlib import Path

from ...contract.ntf import NtfLayout
from ...contract.readiness import wait_readable
from ...contract.types import Kind
from ...contract.udp import (
    END_PAYLOAD,
    F_DISCARD,
    F_END,
    F_ERROR,
    F_FINISH,
    F_FLUSH,
    FINISH_PAYLOAD,
    HEADER_SIZE,
    pack_header,
    parse_header,
)
from ...dataflow import language
from ...dataflow.plan import AggFn, AggMode, Aggregate, LogicalPlan
from ...deploy.resources import BlockLease, BlockPool
from ...deploy.udp_relay import Faults, RelayProcess
from ...nca.interface import (
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
    ResourceRequest,
    StreamSpec,
    Verdict,
)
from ...nca.support import Support
from . import defs
from .backends import ModelBackend, SwitchBackend, backend_from_url, resolve_ipv4
from .controller import Aggregator, JobConfig, JobSlots, Output, SeenRing, StreamCounters, TableEntry
from .query import (
    COLUMNS_ONLY,
    FIXED_SIZE_ONLY,
    FUNCTIONS,
    KEY_KINDS,
    PARTIAL_ONLY,
    SUM_AND_COUNT_ONLY,
    SUM_KINDS,
    SwitchQuery,
    compile_query,
    input_reason,
    operation_reason,
)

log = logging.getLogger(__name__)

SWITCH_ENV = "JUMPGATE_SWITCH"  # tofino://HOST:PORT?... or bmv2://HOST:PORT?... (docs/switch.md)
MODEL_ENV = "JUMPGATE_SWITCH_MODEL"  # "1": offer the switch model
SLOTS_ENV = "JUMPGATE_SWITCH_SLOTS"  # slot indices leased per job and way (a power of two, 512 .. 32768)
# For testing only: a lossy relay (jumpgate.deploy.udp_relay; a JSON object of its Faults) between
# the senders and the switch's ingress, which takes version 2 streams and so survives it. The
# switch's own output is a version 1 stream: JUMPGATE_UDP_RELAY, which puts relays in front of the
# software NCAs' inputs, would fail it.
RELAY_ENV = "JUMPGATE_SWITCH_RELAY"
POLL_S = 0.2
# How long an END notice may take after the control plane said the senders finished, and how long
# the switch's `flushed` counter may stand still while FLUSHes are outstanding, before the job fails
# with UDP loss; the receivers' grace period (docs/udp-transport.md) plays the same part.
LOSS_GRACE_S = 2.0


def _relay_faults() -> Faults | None:
    try:
        return Faults.from_text(os.environ.get(RELAY_ENV, ""))
    except ValueError as e:
        raise NcaError(f"{RELAY_ENV}: {e}") from None


def _slots_per_job() -> int:
    text = os.environ.get(SLOTS_ENV) or str(defs.WAY_SLOTS)
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < defs.BLOCK_SLOTS or n > defs.WAY_SLOTS or n & (n - 1):
        raise ValueError(f"{SLOTS_ENV}={text!r}: a power of two from {defs.BLOCK_SLOTS} to {defs.WAY_SLOTS}")
    return n


class SwitchAggregatorNca(NcaImplementation):
    name = "switch.aggregate"
    description = ("Partial aggregation in a programmable switch (P4; Tofino through BF Runtime, BMv2 through "
                   "P4Runtime): one key of up to 64 bits, integer and decimal sums, count; UDP in and out")
    operation_kinds = ("aggregate",)
    preference = -1  # preferred over software when the graphs are otherwise equal (compiler/cost.py)
    in_network = True  # the packets cross the switch anyway: no host process, no extra hop

    def __init__(self) -> None:
        self.backend, self.unavailable = self.make_backend()
        self.slots = _slots_per_job()
        self.pool = BlockPool(f"{self.name}.slots", defs.WAY_SLOTS, defs.BLOCK_SLOTS)
        self._tags = itertools.count(random.randrange(1, 1 << 31))

    def make_backend(self) -> tuple[SwitchBackend | None, str]:
        """The switch behind this implementation, or None and why not."""
        url = os.environ.get(SWITCH_ENV)
        if not url:
            return None, f"no switch is configured (set {SWITCH_ENV}=tofino://... or bmv2://...; docs/switch.md)"
        return backend_from_url(url), ""

    def next_tag(self) -> int:
        return next(self._tags) % ((1 << 32) - 1) + 1  # never 0 (XORed into stored keys; docs/switch.md)

    # -- operator interface --------------------------------------------------------------
    def support(self) -> Support:
        """From query.py's tables: key and sum types, the functions its registers compute."""
        keys = ", ".join(k.value for k in KEY_KINDS)
        sums = ", ".join(k.value for k in SUM_KINDS)
        types = {}
        for kind in Kind:
            roles = (["group key"] if kind in KEY_KINDS else []) + (["summed"] if kind in SUM_KINDS else [])
            if kind is not Kind.STRING:
                types[kind.value] = ", ".join(roles + ["counted"])
        aggregates = {AggFn.SUM.value: f"of an input column of type {sums}; at most {defs.MAX_SUMS}",
                      AggFn.COUNT.value: "of an input column; one count in all",
                      AggFn.COUNT_STAR.value: "one count in all",
                      AggMode.PARTIAL.value: f"one group key, an input column of type {keys}"}
        why_not = {Kind.STRING.value: FIXED_SIZE_ONLY, AggMode.COMPLETE.value: PARTIAL_ONLY,
                   AggMode.FINAL.value: PARTIAL_ONLY,
                   **{fn.value: SUM_AND_COUNT_ONLY for fn in AggFn if fn not in FUNCTIONS}}
        why_not.update({c.id: COLUMNS_ONLY for c in language.CONSTRUCTS if c.id != "column"})
        why_not.update({f.name: COLUMNS_ONLY for f in language.FUNCTION_LIST})
        return Support(operations={"aggregate": f"{PARTIAL_ONLY}; NTF over UDP in, up to "
                                                f"{defs.TUPLES_PER_DATAGRAM} tuples per datagram, "
                                                f"at most {defs.MAX_IN_FIELDS} fields"},
                       types=types, expressions={"column": "group key, summed and counted values"},
                       aggregates=aggregates, why_not=why_not)

    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        if not anchor:
            return Verdict.no("not a format converter")
        if self.backend is None:
            return Verdict.no(self.unavailable)
        op = plan.op(anchor)
        if not isinstance(op, Aggregate):
            return Verdict.no(f"aggregates only, not '{op.kind}'")
        why = operation_reason(plan, op)
        return Verdict.no(why) if why else Verdict.yes((anchor,))

    def match_input(self, plan, ops, inputs) -> Verdict[None]:
        if len(inputs) != 1 or inputs[0].format != NTF or inputs[0].transport != "udp" or inputs[0].layout is None:
            got = ", ".join(i.describe() for i in inputs) or "nothing"
            return Verdict.no(f"receives NTF over udp only (up to {defs.TUPLES_PER_DATAGRAM} tuples per datagram), "
                              f"got {got}")
        op = plan.op(ops[0])
        why = input_reason(inputs[0].layout, plan.input_schema(op.input))
        return Verdict.no(why) if why else Verdict.yes()

    def match_output(self, plan, ops, inputs, wanted) -> Verdict[tuple[OutputSpec, ...]]:
        if any(w not in (None, "udp") for w in wanted):
            return Verdict.no(f"sends over udp only, not {', '.join(w for w in wanted if w)}")
        op = plan.op(ops[0])
        query = compile_query(plan, op, inputs[0].layout)
        return Verdict.yes((OutputSpec(StreamSpec(NTF, "udp", query.layout), streams=1),))

    def resources(self, plan, ops) -> ResourceRequest:
        return ResourceRequest(cores=1, max_cores=1, memory_mb=16, deployment="switch",
                               pools={self.pool.name: self.slots})

    def resource_pools(self) -> dict:
        return {self.pool.name: self.pool}

    def capabilities(self) -> dict:
        out = super().capabilities()
        out["switch"] = self.backend.describe() if self.backend else None
        out["slots"] = self.pool.snapshot()
        return out

    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        return SwitchInstance(spec, context, self)


class SwitchModelNca(SwitchAggregatorNca):
    name = "switch.model"
    description = ("MODEL of the switch aggregator (p4/model: the P4 pipeline's logic on UDP sockets, for machines "
                   "without a switch; on with JUMPGATE_SWITCH_MODEL=1)")

    def make_backend(self) -> tuple[SwitchBackend | None, str]:
        if os.environ.get(MODEL_ENV, "") not in ("1", "true", "yes"):
            return None, f"the switch model is off (tests and demos turn it on with {MODEL_ENV}=1)"
        return ModelBackend(), ""


class SwitchInstance(NcaInstance):
    """One job's use of the switch."""

    def __init__(self, spec: NcaSpec, context: InstanceContext, impl: SwitchAggregatorNca) -> None:
        super().__init__(spec)
        self.context = context
        self.impl = impl
        self.backend: SwitchBackend = impl.backend  # type: ignore[assignment]
        self.query: SwitchQuery | None = None
        self.lease: BlockLease | None = None
        self.slots: JobSlots | None = None
        self.ingress: tuple[str, int] | None = None
        self.sock: socket.socket | None = None
        self.entries: list[TableEntry] = []
        self.flushed = False
        self._opened = False
        self._destroyed = threading.Event()
        self._senders_done: float | None = None  # when the executor said every sender finished
        self._lock = threading.Lock()
        self.relay: RelayProcess | None = None  # JUMPGATE_SWITCH_RELAY (testing)

    @property
    def owner(self) -> str:
        return f"{self.spec.job_id}/{self.spec.id}"

    # -- life cycle -----------------------------------------------------------------------
    def compile(self) -> CompileResult:
        op = self.spec.operations()[0]
        layout: NtfLayout = self.spec.inputs[0].spec.layout  # type: ignore[assignment]
        self.query = compile_query(self.spec.plan, op, layout)  # type: ignore[arg-type]
        return CompileResult(cached=True, artifact=f"{self.backend.describe()}: {self.query.out_words}")

    def allocate(self) -> list[Endpoint]:
        streams = self.spec.inputs[0].expected_streams
        if streams > defs.MAX_STREAMS:
            raise NcaError(f"the switch counts at most {defs.MAX_STREAMS} input streams per job, not {streams}")
        with self._lock:
            if self._destroyed.is_set():
                raise NcaError("cancelled")
            try:
                self.lease = self.impl.pool.acquire(self.owner, self.spec.resources.pools.get(self.impl.pool.name,
                                                                                              self.impl.slots))
            except Exception as e:  # NoResources: another job took the slots since mapping
                raise NcaError(f"{e}; resubmit the job to map it to software NCAs") from None
            self.backend.open(Path(self.context.cache_dir))
            self._opened = True
        self.slots = JobSlots(self.lease.start // defs.BLOCK_SLOTS, self.lease.start, self.lease.size,
                              self.impl.next_tag())
        self.ingress = self.backend.ingress(self.slots.job)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind((self.backend.controller_host, 0))
        host, port = self.ingress
        faults = _relay_faults()
        if faults is not None:
            try:
                # on the controller's address: the senders reach it, and it reaches the switch's
                # data address (the same host for the model; a port of the switch for BMv2)
                self.relay = RelayProcess((host, port), faults, listen_host=self.backend.controller_host)
            except (OSError, RuntimeError) as e:
                raise NcaError(f"{RELAY_ENV}: cannot start a relay in front of the switch: {e}") from None
            # the senders' datagrams cross it; FLUSH and FINISH do not
            host, port = self.backend.controller_host, self.relay.port
        # the sender packs up to TUPLES_PER_DATAGRAM tuples per datagram: what the parser and the
        # record stack of a recirculating datagram allow (docs/switch.md); it sends version 2
        # (acknowledged) where the data plane deduplicates and answers with receipts (the model,
        # BMv2), keeping at most defs.SEEN datagrams in flight per stream: what its ring can deduplicate
        v2 = self.backend.udp_version >= 2
        return [Endpoint(host, port, "udp", max_tuples=defs.TUPLES_PER_DATAGRAM,
                         udp_version=self.backend.udp_version, udp_window_datagrams=defs.SEEN if v2 else None)]

    def configure(self, destinations: list[list[Destination]]) -> None:
        if len(destinations) != 1 or len(destinations[0]) != 1:
            raise NcaError("the switch sends its output to exactly one destination")
        (dest,) = destinations[0]
        if dest.endpoint.transport != "udp" or dest.streams != 1:
            raise NcaError(f"the switch sends one UDP stream, not {dest.streams} over {dest.endpoint.transport}")
        assert self.query is not None and self.slots is not None and self.ingress is not None and self.sock
        _check_destination_limits(dest.endpoint, self.query)
        ctrl_host, ctrl_port = self.sock.getsockname()
        self.entries = (JobConfig.entries(self.query, self.slots, self.ingress[1])
                        + Output.entries(self.query, self.slots.job, resolve_ipv4(dest.endpoint.host),
                                         dest.endpoint.port, dest.first_stream, resolve_ipv4(ctrl_host), ctrl_port))
        self.backend.write_registers(StreamCounters.reset(self.slots.job))
        if self.backend.udp_version >= 2:
            self.backend.fill_registers(SeenRing.reset(self.slots.job))  # marks an earlier job left
            self.backend.prepare_answers()
        self.backend.write_entries(self.entries)
        blocks = self._blocks()
        if not blocks <= self.backend.clean_blocks:
            self._flush(F_DISCARD)  # slots another job may have left (a failed clear, a restarted server)
        self.backend.clean_blocks -= blocks

    def execute(self, phase: int) -> PhaseStats:
        t0 = time.monotonic_ns()
        ends = self._wait_for_senders()
        datagrams = sum(r for _, _, r in ends.values())
        tuples_in = sum(t for _, t, _ in ends.values())
        self._wait_for_tuples(tuples_in)
        flush_t0 = time.monotonic_ns()
        self._flush(0)
        self.flushed = True
        self.backend.clean_blocks |= self._blocks()
        assert self.slots is not None
        job = self.slots.job
        out_dgrams, out, bypassed, spilled = (self.backend.read_register(r, job)[0]
                                              for r in ("out_seq", "records", "bypassed", "spilled"))
        # version 2: the datagrams the ring took (each once) and those it dropped as taken before
        # (the network's duplicates, and repeats whose receipt was lost or late)
        acked = ({"switch_taken": datagrams, "switch_repeats": self.backend.read_register(defs.REPEATS_REGISTER, job)[0]}
                 if self.backend.udp_version >= 2 else {})
        wall = time.monotonic_ns() - t0
        record = 4 + self.query.layout.fixed_size  # type: ignore[union-attr]
        return PhaseStats(wall_ns=wall, wait_in_ns=flush_t0 - t0, tuples_in=tuples_in,
                          bytes_in=datagrams * HEADER_SIZE + tuples_in * (4 + self.query.in_len),  # type: ignore[union-attr]
                          tuples_out=out, bytes_out=out_dgrams * HEADER_SIZE + out * record,
                          extra={"switch_slots": self.slots.size * defs.WAYS, "switch_bypassed": bypassed,
                                 "switch_spilled": spilled, "switch_flush_ms": (time.monotonic_ns() - flush_t0) / 1e6,
                                 **acked})

    def senders_finished(self, port: int) -> None:
        """The senders' ENDs have all been sent: from now on a missing END notice is loss, once
        the switch has stopped counting datagrams of that stream (_overdue_ends)."""
        if self._senders_done is None:
            self._senders_done = time.monotonic()

    def destroy(self) -> None:
        with self._lock:
            if self._destroyed.is_set():
                return
            self._destroyed.set()
        try:
            if self.entries and not self.flushed:
                self._flush(F_DISCARD)  # a failed job's slots: clear them without output
                self.backend.clean_blocks |= self._blocks()
        except Exception:
            log.warning("switch: clearing the slots of %s failed (the next job on them clears them)", self.owner)
        try:
            if self.entries:
                self.backend.delete_entries(self.entries)
                self.backend.write_registers(StreamCounters.reset(self.slots.job))  # type: ignore[union-attr]
            if self.ingress is not None:
                self.backend.release_ingress(self.ingress[1])
        except Exception:
            log.exception("switch: cleaning up after %s failed", self.owner)
        finally:
            if self.relay is not None:
                report = self.relay.stop()
                log.info("job %s %s: UDP relay in front of the switch: %s", self.spec.job_id, self.spec.id,
                         json.dumps({k: v for k, v in report.items() if k != "event"}))
            if self.sock is not None:
                self.sock.close()
            if self._opened:
                self.backend.close()
            self.impl.pool.release(self.owner)

    # -- the data plane -------------------------------------------------------------------
    def _blocks(self) -> set[int]:
        assert self.slots is not None
        return set(range(self.slots.base, self.slots.base + self.slots.size, defs.BLOCK_SLOTS))

    def _wait_for_senders(self) -> dict[int, tuple[int, int, int]]:
        """END notices of every input stream: stream -> (datagrams sent, tuples sent, received).

        A version 1 stream's first END notice is final: the switch counted what arrived, and fewer
        datagrams than were sent is loss. A version 2 stream's sender repeats what is lost, and its
        END until the switch answers it, which the switch does once it has taken every datagram:
        such a stream is complete with the first notice whose `received` equals the END's number
        (or, should that very notice be lost on the way here, once the `received` register does)."""
        expected = self.spec.inputs[0].expected_streams
        ends: dict[int, tuple[int, int, int]] = {}
        complete: set[int] = set()
        acked: set[int] = set()  # version 2 streams
        sock = self.sock
        assert sock is not None
        watch = _StillCounters()
        while len(complete) < expected:
            if self._destroyed.is_set():
                raise NcaError("cancelled")
            ready = wait_readable(sock, POLL_S)
            if not ready:
                complete |= self._taken_whole(ends, acked - complete)
                self._overdue_ends(watch, [s for s in range(expected) if s not in complete], ends)
                continue
            data = sock.recv(2048)
            h = parse_header(data)
            if h.flags & F_ERROR:
                raise NcaError(f"the switch received a datagram it cannot parse on the job's port (stream "
                               f"{h.stream}, {len(data)} bytes): the sender does not send 1 to "
                               f"{defs.TUPLES_PER_DATAGRAM} tuples of the job's fixed size per datagram")
            if not h.flags & F_END or h.stream >= expected or len(data) < HEADER_SIZE + END_PAYLOAD.size:
                continue
            tuples, received = END_PAYLOAD.unpack_from(data, HEADER_SIZE)
            if h.stream in complete:
                continue  # a later copy (version 1 sends three; version 2 repeats until answered)
            ends[h.stream] = (h.seq, tuples, received)
            if h.version == 2:
                acked.add(h.stream)
            if h.version != 2 or received == h.seq:
                complete.add(h.stream)
        for stream, (sent, tuples, received) in sorted(ends.items()):
            # received counts datagrams, each of 1 .. TUPLES_PER_DATAGRAM tuples
            if received != sent or not sent <= tuples <= sent * defs.TUPLES_PER_DATAGRAM:
                raise NcaError(f"UDP loss between the sender of stream {stream} and the switch: it sent {sent} "
                               f"datagrams ({tuples} tuples), the switch received {received}")
        return ends

    def _taken_whole(self, ends: dict[int, tuple[int, int, int]], streams: set[int]) -> set[int]:
        """Version 2 streams whose END has come and whose datagrams the switch has all taken by its
        `received` register, though no END notice said so yet (`ends` updated)."""
        assert self.slots is not None
        base = self.slots.job * defs.MAX_STREAMS
        whole = set()
        for s in streams:
            sent, tuples, _ = ends[s]
            received = self.backend.read_register(defs.STREAM_REGISTER, base + s)[0]
            if received == sent:
                ends[s] = (sent, tuples, received)
                whole.add(s)
        return whole

    def _wait_for_tuples(self, tuples: int) -> None:
        """Wait until the switch has taken all `tuples` the senders' ENDs count through its table
        (its `tuples` counter). Its END notice counts a datagram on its first pass; the datagram's
        later tuples recirculate, one pass each, and may still be on their way when the END
        arrives. The model takes a datagram's tuples at once, so there it is already so."""
        assert self.slots is not None
        watch = _StillCounters()
        while (done := self.backend.read_register("tuples", self.slots.job)[0]) != tuples:
            if done > tuples:
                raise NcaError(f"the switch took {done} tuples through its table, more than the {tuples} its "
                               "senders' ENDs count")
            if watch.still({0: done}, LOSS_GRACE_S):
                raise NcaError(f"UDP loss inside the switch: it took {done} of the {tuples} tuples its senders "
                               "sent through its table and is not taking more (recirculated datagrams lost)")
            if self._destroyed.is_set():
                raise NcaError("cancelled")
            time.sleep(0.005)

    def _overdue_ends(self, watch: _StillCounters, missing: list[int],
                      ends: dict[int, tuple[int, int, int]]) -> None:
        """Fail with UDP loss when the senders finished at least LOSS_GRACE_S ago and the switch
        has counted no datagram of the streams still without END notice for that long: their ENDs
        are not somewhere behind data the switch is still working through, they were lost (every
        copy; UDP, a full receive buffer). A real switch counts at line rate, so only the grace
        matters there; the model may have a backlog, which is why the counters are watched."""
        assert self.slots is not None
        done = self._senders_done
        if done is None:
            return
        base = self.slots.job * defs.MAX_STREAMS
        counts = {s: self.backend.read_register(defs.STREAM_REGISTER, base + s)[0] for s in missing}
        if not watch.still(counts, LOSS_GRACE_S) or time.monotonic() - done < LOSS_GRACE_S:
            return
        stream = missing[0]
        if stream in ends:  # version 2: the END came, not all of the data
            sent = ends[stream][0]
            raise NcaError(f"UDP loss between the sender of stream {stream} and the switch: the sender finished "
                           f"{time.monotonic() - done:.1f} s ago, but the switch took {counts[stream]} of its {sent} "
                           "data datagrams and is not taking more (the sender stopped repeating them)")
        raise NcaError(f"UDP loss between the sender of stream {stream} and the switch: the sender finished "
                       f"{time.monotonic() - done:.1f} s ago, but no copy of its END reached the switch (which "
                       f"received {counts[stream]} data datagrams of the stream and is not receiving more)")

    def _flush(self, flags: int) -> None:
        """One FLUSH per slot of the job's block in every way (the data plane reads and clears it,
        and emits it unless DISCARD), then, for a real flush, FINISH (the switch's END) three times.
        Waits until the switch has processed every FLUSH (its `flushed` counter)."""
        assert self.slots is not None and self.ingress is not None and self.sock is not None
        job = self.slots.job
        seqs = Aggregator.flushes(self.slots)
        n = len(seqs)
        before = self.backend.read_register("flushed", job)[0]
        # at most `window` FLUSHes ahead of what the switch has counted (all of them, unless the
        # backend is a switch that drops a burst it cannot take: SwitchBackend.flush_window)
        window = self.backend.flush_window or n
        sent = 0
        watch = _StillCounters()
        while True:
            done = self.backend.read_register("flushed", job)[0] - before
            for seq in seqs[sent:min(n, done + window)]:
                self.sock.sendto(pack_header(0, seq, 0, F_FLUSH | flags), self.ingress)
            sent = max(sent, min(n, done + window))
            if done >= n:
                break
            # it stands still only when what is missing will never come (a backlog still moves)
            if watch.still({0: done}, LOSS_GRACE_S):
                raise NcaError(f"UDP loss between the controller and the switch: it processed {done} "
                               f"of {n} FLUSH datagrams and is not processing more")
            time.sleep(0.01 if sent == n else 0.002)
        if not flags & F_DISCARD:
            finish = pack_header(0, 0, 0, F_FINISH) + FINISH_PAYLOAD.pack(before + n)
            for _ in range(3):
                self.sock.sendto(finish, self.ingress)


def _check_destination_limits(endpoint: Endpoint, q: SwitchQuery) -> None:
    """The switch's output datagrams carry the records of one input datagram (up to
    TUPLES_PER_DATAGRAM, docs/switch.md): the destination must take that many per datagram."""
    record = 4 + q.layout.fixed_size
    biggest = HEADER_SIZE + defs.TUPLES_PER_DATAGRAM * record
    if endpoint.max_tuples and endpoint.max_tuples < defs.TUPLES_PER_DATAGRAM:
        raise NcaError(f"the switch sends up to {defs.TUPLES_PER_DATAGRAM} records per datagram; its destination "
                       f"{endpoint.host}:{endpoint.port} takes {endpoint.max_tuples}")
    if endpoint.max_datagram and endpoint.max_datagram < biggest:
        raise NcaError(f"the switch sends datagrams of up to {biggest} bytes; its destination "
                       f"{endpoint.host}:{endpoint.port} takes {endpoint.max_datagram}")


class _StillCounters:
    """Whether some counters of the switch have stood still for a while (they move as long as it
    still has datagrams of theirs to work through)."""

    def __init__(self) -> None:
        self.counts: dict[int, int] | None = None
        self.since = time.monotonic()

    def still(self, counts: dict[int, int], seconds: float) -> bool:
        now = time.monotonic()
        if counts != self.counts:
            self.counts, self.since = counts, now
            return False
        return now - self.since >= seconds


__all__ = ["SwitchAggregatorNca", "SwitchInstance", "SwitchModelNca"]
