"""Shared scans (docs/shared-scans.md): scans of different jobs (or of one job) that are about to
read the same files at the same time run as one process.

A scan that may share (`share_key`) is announced to the service's Sharing (jumpgate/nca/
sharing.py, which groups them) as it compiles, and starts nothing at allocate: its process, alone
or shared, starts when its stage runs. A group of one runs the scan's own binary, as without
sharing; a larger group links the members' objects (compiled beside their own binaries) into one
process (`SharedScanProcess`), configured with every member's destinations, messages and runtime
filters (`SharedScanRun`). Each member's job gets the group's read counters, its own output
counters, and its own failure: a member cut off alone fails its job only
(ncas/runtime/shared_scan.cpp).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ...dataflow.plan import Shuffle
from ...nca.interface import FILE, CompileResult, NcaError, PhaseStats
from ...nca.sharing import Group
from .build import build_shared_nca
from .codegen.messages import message_params
from .codegen.shared import MAX_MEMBERS, SharedMember, generate_shared_scan
from .process import ProcessNca
from .udp_transport import UdpEdges

if TYPE_CHECKING:
    from .file_scan import FileScanInstance

# The columnar scans prune units and prefilter rows by `prune.N` predicates from the query's own
# filter: they share with scans whose predicates (all their params) are the same, which every
# member's filter then implies.
SHAREABLE_DRIVERS = ("scan_json", "scan_orc", "scan_parquet")
RF_SLOTS = 16  # runtime filter slots of one process (ncas/runtime/rfilter.c)


@dataclass(frozen=True)
class ShareKey:
    """What scans must have in common to run as one process."""

    tenant: str  # one process never mixes tenants' queries (their speed, their failures, their job ids)
    host: str
    driver: str
    root: str | None
    files: tuple[str, ...]
    threads: int  # each member's receivers expect one stream per worker thread
    params: tuple[tuple[str, str], ...]


def share_key(scan: FileScanInstance) -> tuple[ShareKey | None, str]:
    """The scan's key, or None and why it runs alone."""
    spec, host = scan.spec, scan.context.host
    if host is None or scan.context.deployer is None:
        return None, "no host"
    if scan.driver not in SHAREABLE_DRIVERS:
        return None, f"the {scan.driver} scan does not share yet"
    fused = [op for op in spec.operations() if isinstance(op, Shuffle)]
    if fused:  # its ports are a hash's partitions: not yet shared
        return None, f"its {fused[0].kind} '{fused[0].name}' is fused into the scan"
    if any(o.spec.transport != "tcp" for o in spec.outputs):
        return None, "it sends over UDP"
    files = tuple(f for port in spec.inputs if port.spec.transport == FILE for f in port.files)
    return ShareKey(scan.context.tenant, host.name, scan.driver, host.data_root, files, scan.threads(),
                    tuple(sorted(scan.params().items()))), ""


def fits(group: Group, scan: FileScanInstance) -> bool:
    """Whether one process can take `scan` besides the group's members."""
    slots = sum(len(m.probe_filters()) for m in group.members) + len(scan.probe_filters())
    return len(group.members) < MAX_MEMBERS and slots <= RF_SLOTS


@dataclass(eq=False)
class SharedScanRun:
    """A group's process: its first member runs it, the others wait for its outcome."""

    group: Group
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _done: threading.Event = field(default_factory=threading.Event)
    _started: bool = False
    _left: set[int] = field(default_factory=set)
    _process: SharedScanProcess | None = None
    _stats: PhaseStats | None = None
    _error: Exception | None = None
    _events: dict[int, dict] = field(default_factory=dict)

    @property
    def members(self) -> list[FileScanInstance]:
        return self.group.members

    @property
    def name(self) -> str:
        return self.group.name

    def run(self, scan: FileScanInstance) -> PhaseStats:
        """Execute the group (its first caller does; the others wait) and return what `scan` did."""
        with self._lock:
            first, self._started = not self._started, True
        if first:
            try:
                self._run()
            except Exception as e:  # every member fails with it: the read itself failed
                self._error = e
            finally:
                self._done.set()
        else:
            self._done.wait()
        if self._error is not None:
            raise self._error
        return self._stats_of(self.members.index(scan))

    def _run(self) -> None:
        leader = self.members[0]
        process = SharedScanProcess(self, leader)
        with self._lock:
            if len(self._left) == len(self.members):
                raise NcaError("cancelled")
            self._process = process
        try:
            process.compile()
            process.allocate()
            process.configure([port for m in self.members for port in m.destinations()])
            base = 0
            for m in self.members:
                for slot, blob in m.runtime_filters_received().items():
                    process.accept_runtime_filter(base + slot, blob)
                base += len(m.probe_filters())
            self._stats = process.execute(0)
            self._events = dict(process.member_events)
        finally:
            process.destroy()

    def _stats_of(self, k: int) -> PhaseStats:
        event = self._events.get(k)
        if event is None:
            raise NcaError(f"the shared scan {self.name} did not report member {k}")
        if "error" in event:
            raise NcaError(str(event["error"]))
        whole = self._stats
        return replace(whole, tuples_out=int(event.get("tuples_out", 0)), bytes_out=int(event.get("bytes_out", 0)),
                       extra={**whole.extra, "shared_scan": {
                           "group": self.name, "member": k, "members": len(self.members),
                           "jobs": sorted({m.spec.job_id for m in self.members})}})

    def activity(self) -> object | None:
        process = self._process
        return process.activity() if process is not None else None

    def leave(self, scan: FileScanInstance) -> None:
        """`scan`'s job is being destroyed. The process goes on for the others (the member's
        streams break when its consumers go, which cuts it off alone) unless none is left."""
        with self._lock:
            self._left.add(id(scan))
            process = self._process if len(self._left) == len(self.members) else None
        if process is not None:
            process.destroy()


class SharedScanProcess(ProcessNca):
    """The process of a group of more than one: the members' queries linked together, configured
    with all their ports one after the other (the generated table's order)."""

    def __init__(self, group: SharedScanRun, leader: FileScanInstance) -> None:
        outputs = tuple(o for m in group.members for o in m.spec.outputs)
        refs = tuple(r for m in group.members for r in m.spec.output_refs)
        spec = replace(leader.spec, id=group.name, outputs=outputs, output_refs=refs)
        super().__init__(spec, leader.context)
        self.group = group
        self.driver = leader.driver
        self.leader = leader
        self.member_events: dict[int, dict] = {}

    def generate_source(self) -> str:
        return generate_shared_scan([SharedMember(m.generated, len(m.spec.outputs), len(m.probe_filters()))
                                     for m in self.group.members])

    def compile(self) -> CompileResult:
        table = self.generate_source()
        self._messages = message_params(table)
        self.udp = UdpEdges(self.spec, self.context)
        result = build_shared_nca([m.generated for m in self.group.members], table, self.driver,
                                  self.context.cache_dir)
        self.binary = result.path
        return CompileResult(cached=result.cached, artifact=str(result.path))

    def allocate(self) -> list:
        endpoints = super().allocate()
        self._warm_argv = None  # no spare for a binary the next group is unlikely to share
        return endpoints

    def threads(self) -> int:
        return self.leader.threads()

    def params(self) -> dict[str, str]:
        return self.leader.params()

    def _side_event(self, event: dict) -> bool:
        if event.get("event") == "member" and isinstance(event.get("member"), int):
            self.member_events[event["member"]] = event
            return True
        return super()._side_event(event)

