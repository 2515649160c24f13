"""The two NCA plugin interfaces (thesis §3.3.4, Tables 3.2 and 3.3; Appendix A.1.2-A.1.3).

An NCA implementation is a subclass of `NcaImplementation`, registered under the entry-point group
`jumpgate.ncas`. The compiler talks to it only through the *operator interface*
(`match_operations`, `match_input`, `match_output`, `resources`); the executor only through the
*life-cycle interface* of the `NcaInstance` it creates (`compile`, `allocate`, `configure`,
`execute`, `destroy`, and the optional `activity`, `progress` and `senders_finished`). Built-in NCAs
get no other way in.

Every answer of the operator interface is a verdict with a reason, so that users can see why an
operation was or was not given to an NCA (design principle 1).
"""
from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar

from ..contract.ntf import NtfLayout
from ..dataflow.plan import InputRef, LogicalPlan, Operation
from .deployment import Deployer, Host
from .sharing import Sharing
from .support import Support

# ------------------------------------------------------------------ formats on edges

FILE = "file"  # the transport of a `read` operation's input: files under the data root
NTF = "ntf"  # the data format of every NCA-to-NCA and NCA-to-client edge that uses NTF


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """What flows over one edge: a data format and a transport.

    For a `read` input, `format` is the file format (`json`, `orc`, ...) and `transport` is
    `file`. Between NCAs and towards clients, `format` is `ntf` with the exact `layout`, and
    `transport` is a transport name (`tcp`, `udp`, ...)."""

    format: str
    transport: str
    layout: NtfLayout | None = None

    def describe(self) -> str:
        return f"{self.format} over {self.transport}"


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """One output port of an NCA: what it emits and over how many parallel streams (connections)
    per destination. `streams` lets a multi-threaded NCA open one connection per thread; the
    destination then expects that many streams from this port (contract §3 `expected_streams`)."""

    spec: StreamSpec
    streams: int | None = 1  # None: one per thread of the instance (chosen by the control plane)


# ------------------------------------------------------------------ verdicts

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Verdict(Generic[T]):
    """An answer with a reason. `value` carries the payload of a positive answer."""

    ok: bool
    reason: str = ""
    value: T | None = None

    @classmethod
    def yes(cls, value: T | None = None, reason: str = "") -> Verdict[T]:
        return cls(True, reason, value)

    @classmethod
    def no(cls, reason: str) -> Verdict[T]:
        return cls(False, reason, None)

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    """What one NCA instance needs from its deployment. `cores` is threads of a software NCA;
    `pools` are named exclusive resources (e.g. a switch's register slots) leased per job."""

    cores: int = 1  # at least; the control plane may give up to max_cores (internal scaling)
    max_cores: int = 1
    memory_mb: int = 64
    deployment: str = "local"  # which kind of deployer can host it
    pools: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------ what the life cycle is given


@dataclass(frozen=True, slots=True)
class InputPort:
    """An input of an NCA instance: either files (a `read`), or a network edge on which it will
    accept `expected_streams` connections."""

    spec: StreamSpec
    source: InputRef  # the logical edge this port carries
    expected_streams: int = 1
    files: tuple[str, ...] = ()  # for `file` inputs
    # Keyed streams (docs/contract.md): nonzero when every stream arriving here opens with the
    # keyed header carrying this 64-bit key. The executor sets it only for TCP ports whose
    # receiver and senders all declare `keyed_streams`; the receiver ignores other connections.
    key: int = 0


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    transport: str = "tcp"
    # UDP (docs/udp-transport.md): what the receiver at this endpoint takes per datagram; 0 = the
    # sender's defaults. A switch takes a few tuples per datagram (docs/switch.md).
    max_datagram: int = 0
    max_tuples: int = 0
    # The UDP transport version the receiver takes (docs/udp-transport.md): 1, loss detected but not
    # repaired (a switch); 2, acknowledged streams whose senders repeat what is lost. A sender may
    # send any version up to it.
    udp_version: int = 1
    # Version 2: the most data datagrams a sender may keep in flight per stream towards this
    # receiver, from its first datagram on; None = no bound beyond the sender's `udp.window_bytes`.
    # A receiver that deduplicates with a ring of sequence numbers and answers with receipts (the
    # switch model: JG_UDP_SACK_WINDOW, docs/udp-transport.md "A switch in a version 2 path") must
    # say so here: a sender that was not told keeps its whole window in flight.
    udp_window_datagrams: int | None = None

    def __post_init__(self) -> None:
        if self.udp_window_datagrams is not None and self.udp_window_datagrams < 1:
            raise ValueError(f"udp_window_datagrams is at least 1 (None: no bound), not {self.udp_window_datagrams}")


@dataclass(frozen=True, slots=True)
class Destination:
    """Where one output port sends: an endpoint and the stream ids this sender uses there
    (`first_stream` .. `first_stream + streams - 1`, contract §3)."""

    endpoint: Endpoint
    first_stream: int
    streams: int = 1
    key: int = 0  # nonzero: open every stream with the keyed header and this key (docs/contract.md)
    # Nonzero: the receiver is a client (a `send`'s), not an NCA; fail the stream when it takes no
    # data for this many milliseconds while there is data for it (it stopped reading, or never
    # accepted the connection). A slow NCA downstream is backpressure and never gets this. An NCA
    # that cannot tell may ignore it: the executor's stall watchdog still catches the stall, later.
    client_stall_ms: int = 0


@dataclass(frozen=True, slots=True)
class RuntimeFilterSpec:
    """One runtime filter (docs/runtime-filters.md) as one NCA instance sees it: made by the NCA
    of a hash join when its build phase ends (`role` "build"), applied by a scan feeding the
    join's probe side to its rows after its own filters, before it encodes them (`role` "probe").
    The compiler plans them (jumpgate/compiler/runtime_filters.py); the executor hands what the
    builder made (`NcaInstance.runtime_filter`) to each applier (`accept_runtime_filter`)."""

    id: str  # the job's filter id: rf0, rf1, ...
    join: str  # the join operation whose build side makes it
    role: str  # "build" or "probe"
    slot: int = 0  # probe: which of the NCA's filters this is (0, 1, ... in the order of its filters)
    columns: tuple[int, ...] = ()  # probe: the join's keys as columns of the read's schema, in key order


@dataclass(frozen=True, slots=True)
class RuntimeFilterBlob:
    """What a join's build phase made for its runtime filters: the serialised filter
    (ncas/runtime/jg_rfilter.h), or None when it made none that could remove a row (a build side
    too large for a Bloom filter, with keys that have no range); `rows` of the build side."""

    data: bytes | None
    rows: int = 0


@dataclass(frozen=True)
class NcaSpec:
    """Everything an instance needs to know about its part of the job, fixed at compile time."""

    id: str
    implementation: str
    plan: LogicalPlan
    ops: tuple[str, ...]  # operation names it implements, in plan order
    inputs: tuple[InputPort, ...]
    outputs: tuple[OutputSpec, ...]  # one per output port, in port order (see output_refs)
    output_refs: tuple[InputRef, ...]  # the logical edge each output port carries
    stages: tuple[int, ...]  # global stage numbers it runs in, ascending
    resources: ResourceRequest
    job_id: str = ""
    runtime_filters: tuple[RuntimeFilterSpec, ...] = ()  # the ones it makes or applies

    def operations(self) -> list[Operation]:
        return [self.plan.op(n) for n in self.ops]


@dataclass
class PhaseStats:
    """What an NCA reports at the end of one execute call (design: "where did the time go")."""

    wall_ns: int = 0
    wait_in_ns: int = 0
    wait_out_ns: int = 0
    tuples_in: int = 0
    bytes_in: int = 0
    tuples_out: int = 0
    bytes_out: int = 0
    threads: int = 1  # worker threads; the waits are summed over them
    cpu_ns: int | None = None  # CPU time the NCA used in the phase, when it can tell
    extra: dict = field(default_factory=dict)

    @property
    def busy_ns(self) -> int:
        """Per thread, on average: the wall time less that thread's share of the waits (the
        waits are sums over all threads, so subtracting them whole from one wall clock would
        make a busy multi-threaded NCA look idle)."""
        threads = max(1, self.threads)
        return max(0, self.wall_ns - (self.wait_in_ns + self.wait_out_ns) // threads)

    def to_json(self) -> dict:
        threads = max(1, self.threads)
        cpu = {} if self.cpu_ns is None else {"cpu_ms": self.cpu_ns / 1e6}
        return {"wall_ms": self.wall_ns / 1e6, "busy_ms": self.busy_ns / 1e6, "threads": threads, **cpu,
                "wait_input_ms": self.wait_in_ns / 1e6 / threads,
                "wait_output_ms": self.wait_out_ns / 1e6 / threads,
                "tuples_in": self.tuples_in, "bytes_in": self.bytes_in,
                "tuples_out": self.tuples_out, "bytes_out": self.bytes_out, **self.extra}


@dataclass(frozen=True, slots=True)
class CompileResult:
    cached: bool = False
    artifact: str = ""  # e.g. the path of a binary, or a configuration digest


# ------------------------------------------------------------------ the interfaces


def _reject_incomplete(cls: type, required_attrs: tuple[str, ...]) -> None:
    """Fail at class definition (not at first use) when a concrete plugin misses a piece."""
    if inspect.isabstract(cls) or cls.__dict__.get("abstract", False):
        return
    missing = [a for a in required_attrs if not getattr(cls, a, None)]
    abstract = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing or abstract:
        raise TypeError(f"NCA plugin {cls.__module__}.{cls.__qualname__} is incomplete: "
                        f"missing {', '.join(missing + abstract)}")


def _check_class_types(cls: type, types: dict[str, type]) -> None:
    """Fail at class definition when a declared hook has the wrong type (a typo'd value would
    otherwise be silently ignored by the compiler)."""
    for attr, want in types.items():
        value = getattr(cls, attr)
        ok = isinstance(value, want) and (want is bool or not isinstance(value, bool))
        if not ok:
            kind = "an int" if want is int else f"a {want.__name__}"
            raise TypeError(f"NCA plugin {cls.__module__}.{cls.__qualname__}: {attr} must be {kind}, "
                            f"not {value!r}")


class NcaInstance(ABC):
    """The life-cycle interface of one NCA in one job (thesis Table 3.3).

    The executor calls each step on every instance of a job concurrently (parallel lock-step):
    all `compile`, each followed at once by that instance's `allocate` (which must need nothing
    but its own compile), then all `configure`, then stage by stage `execute` on the instances of
    that stage. `destroy` is called exactly once, on success, failure or cancellation, possibly
    from another thread while `allocate` or `execute` blocks; it must make them return promptly
    and must release every process, port and lease."""

    def __init__(self, spec: NcaSpec) -> None:
        self.spec = spec

    def __init_subclass__(cls, **kw) -> None:
        super().__init_subclass__(**kw)
        _reject_incomplete(cls, ())

    @abstractmethod
    def compile(self) -> CompileResult:
        """Generate and build whatever is query-specific (code, configuration)."""

    @abstractmethod
    def allocate(self) -> list[Endpoint]:
        """Start the instance; return one endpoint per network input port, in port order."""

    @abstractmethod
    def configure(self, destinations: list[list[Destination]]) -> None:
        """Tell the instance where each output port sends (a list of destinations per port)."""

    @abstractmethod
    def execute(self, phase: int) -> PhaseStats:
        """Run the instance's `phase`-th stage (0-based among `spec.stages`) and block until it
        is done. Raises `NcaError` when the NCA fails."""

    def activity(self) -> object | None:
        """Optional: a reading that changes while the instance makes progress (moves bytes, uses
        CPU), for the executor's stall watchdog; None (the default) when it cannot tell, and such
        an instance is never taken for stalled."""
        return None

    def progress(self) -> PhaseStats | None:
        """Optional: the running phase's counters so far (`tuples_in`, `bytes_in`, `tuples_out`,
        `bytes_out`, `wall_ns`; the rest may stay 0), for the live progress of `GET /v1/jobs/{id}`.
        Called from an executor thread every fraction of a second while `execute` runs; it must not
        block, so an answer may be a reading from the call before. None (the default): the instance
        cannot tell, and its counters show as unknown until its phase's `execute` returns."""
        return None

    def senders_finished(self, port: int) -> None:
        """Optional: every NCA that sends to input port `port` (an index into `spec.inputs`) has
        finished its last phase successfully, so everything it will ever send there, its ends of
        stream included, has been sent. Over UDP an end can be lost, and a receiver cannot tell a
        lost one from a slow sender; with this notice it can: a stream whose end has still not
        arrived a grace period later, once everything that did arrive has been read, has lost it,
        and the instance should fail now rather than wait out an idle timeout
        (docs/udp-transport.md). Called from an executor thread while `execute` may be running
        (or before it starts, when the senders ran in an earlier stage); it must not block. The
        default ignores it (TCP detects a missing end by itself)."""
        return None

    def runtime_filter(self) -> RuntimeFilterBlob | None:
        """Optional, for an NCA that makes runtime filters (`spec.runtime_filters` with role
        "build"): the filter its build phase made, once that phase's `execute` returned; None (the
        default) when it made none. Called from an executor thread between stages."""
        return None

    def accept_runtime_filter(self, slot: int, blob: RuntimeFilterBlob) -> None:
        """Optional, for an NCA that applies runtime filters (role "probe"): the filter of its
        `slot`, given before the `execute` of the stage it runs in. The default ignores it (the
        rows are then all kept, which is always correct)."""
        return None

    @abstractmethod
    def destroy(self) -> None:
        """Stop and clean up; idempotent."""


class NcaError(Exception):
    """Raised by `execute` (or any life-cycle step) when the NCA fails."""

    def __init__(self, message: str, file: str | None = None, record: int | None = None,
                 **extra: object) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.record = record
        self.extra = extra


class NcaImplementation(ABC):
    """An NCA implementation: the operator interface plus a factory for instances.

    Subclasses set `name` (the registry name, also the entry-point name), `description` and
    `operation_kinds` (what it may implement, for `GET /v1/ncas` and the support matrix), and
    implement the four operator-interface methods and `instantiate`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    operation_kinds: ClassVar[tuple[str, ...]] = ()
    converter: ClassVar[bool] = False  # implements no operation; only converts format/transport
    # Its instances send and receive keyed TCP streams (docs/contract.md, "Keyed streams between
    # NCAs"): they honour InputPort.key and Destination.key. Between two such NCAs a stray
    # connection to a reused port number can then never pass for one of the job's streams.
    keyed_streams: ClassVar[bool] = False
    # Cost hooks (jumpgate.compiler.cost): among graphs of the same size a lower `preference` wins
    # (e.g. a switch over a software NCA); an `in_network` NCA (a switch the packets cross anyway)
    # costs no instance, since it adds no host process and no hop.
    preference: ClassVar[int] = 0
    in_network: ClassVar[bool] = False
    # Runtime filters (docs/runtime-filters.md): its instances make one from a hash join's build
    # side (`runtime_filter_build`) or apply them to the rows of a read (`runtime_filter_probe`,
    # for the operations `applies_runtime_filters` accepts).
    runtime_filter_build: ClassVar[bool] = False
    runtime_filter_probe: ClassVar[bool] = False

    def __init_subclass__(cls, **kw) -> None:
        super().__init_subclass__(**kw)
        _reject_incomplete(cls, ("name", "description"))
        _check_class_types(cls, {"preference": int, "in_network": bool, "converter": bool,
                                 "keyed_streams": bool, "runtime_filter_build": bool,
                                 "runtime_filter_probe": bool})

    # -- operator interface ------------------------------------------------------------

    @abstractmethod
    def match_operations(self, plan: LogicalPlan, anchor: str) -> Verdict[tuple[str, ...]]:
        """Can this NCA implement operation `anchor`? On yes, `value` is the operations it would
        take: `anchor` first, then any following operations it fuses (each with a single
        consumer, in plan order). Converters answer for `anchor == ""` only."""

    @abstractmethod
    def match_input(self, plan: LogicalPlan, ops: tuple[str, ...],
                    inputs: tuple[StreamSpec, ...]) -> Verdict[None]:
        """Does it accept these inputs (one per input edge of `ops`, in order; a `read` has one
        `file` input) in these formats and on these transports?"""

    @abstractmethod
    def match_output(self, plan: LogicalPlan, ops: tuple[str, ...],
                     inputs: tuple[StreamSpec, ...],
                     wanted: tuple[str | None, ...]) -> Verdict[tuple[OutputSpec, ...]]:
        """What it would emit, one `OutputSpec` per output port of `ops`' last operation. `wanted`
        holds, per port, the transport a receiver insists on (a client's `send`), or None."""

    def resources(self, plan: LogicalPlan, ops: tuple[str, ...]) -> ResourceRequest:
        """The resources one instance needs (thesis: the operator interface names a resource
        manager; here the request goes to the deployer's)."""
        return ResourceRequest()

    def resource_pools(self) -> dict:
        """The named pools this implementation's `resources` may ask for (ResourceRequest.pools),
        name -> a pool manager with `can_acquire(units)` (jumpgate.deploy.resources.BlockPool):
        the service's capacity check asks them during mapping, so a job that would find no free
        units is mapped to other NCAs. The instances lease and release their units themselves
        (in `allocate` and `destroy`)."""
        return {}

    def applies_runtime_filters(self, plan: LogicalPlan, ops: tuple[str, ...]) -> Verdict[None]:
        """For a `runtime_filter_probe` NCA: can an instance implementing `ops` (a read first)
        apply runtime filters on the read's columns to its rows? The default says no."""
        return Verdict.no(f"{self.name} does not apply runtime filters")

    def support(self) -> Support | None:
        """Optional: what it takes, item by item (types, expressions, functions, aggregates), for
        the support matrix (jumpgate/nca/support.py, docs/support-matrix.md); None (the default)
        shows as not declared. The operator interface still decides per request."""
        return None

    def capabilities(self) -> dict:
        """What `GET /v1/ncas` shows for this implementation."""
        return {"name": self.name, "description": self.description,
                "operations": list(self.operation_kinds), "converter": self.converter,
                "keyed_streams": self.keyed_streams}

    # -- life-cycle factory --------------------------------------------------------------

    @abstractmethod
    def instantiate(self, spec: NcaSpec, context: InstanceContext) -> NcaInstance:
        """Create the life-cycle object for one instance of this NCA in a job."""


@dataclass
class InstanceContext:
    """Services an instance may use: where to run, where to keep artifacts and logs. `host` is
    where the compiler's placement put the instance (None for an NCA the network hosts, such as
    a switch, which reaches its device itself)."""

    deployer: Deployer | None
    work_dir: str  # per-job scratch directory, removed when the job ends
    cache_dir: str  # long-lived cache (compiled binaries)
    settings: dict = field(default_factory=dict)
    host: Host | None = None
    # The service's coordinator of instances that run together (nca/sharing.py: shared scans,
    # docs/shared-scans.md), None when nothing is shared; and the tenant the job runs for, whose
    # instances alone may share with it.
    sharing: Sharing | None = None
    tenant: str = ""
