"""Executing a staged networked pipeline (thesis §3.3.5 "Executing Staged Network Pipelines").

The life-cycle interface is called in parallel lock-step: every NCA compiles and allocates
concurrently, then every NCA is configured with where its outputs go; then stage by stage,
`execute` runs on the NCAs of the stage concurrently and the next stage starts only when all of
them are done. Whatever happens (success, an NCA failure, DELETE), every instance is destroyed
exactly once and the job's cores are released.

One departure from the thesis' strict lock-step: an NCA allocates as soon as its own compile is
done instead of after every NCA's, so starting its process (8-10 ms for an ORC or Parquet scan)
overlaps the others' compiles. Nothing is lost: allocate needs only the NCA's own binary, and
configure, the first step that needs every NCA's endpoints, still waits for all. The first
failure of any step (a compile, say, while another NCA is starting) destroys every instance at
once, started or not, and no allocate starts after it.

The first failure is the one reported: when one NCA fails, its neighbours usually fail soon after
(a stream ends early), and those are consequences, not causes.

While a stage runs, the executor reads every running NCA's counters so far (`progress`) every
PROGRESS_INTERVAL_S, for the live progress of `GET /v1/jobs/{id}` (runtime/progress.py); the stall
watchdog's activity readings keep their own pace.

When an NCA's last phase succeeds, the executor tells each NCA it sends to, once all of that input
port's senders are through, with `senders_finished` (NcaInstance): everything they will send there
has been sent, so a UDP receiver still missing an end of stream can fail at once instead of
waiting out its idle timeout (docs/udp-transport.md, "A lost END").

Before a stage starts, each scan of it that applies a runtime filter gets the filter the join's
build phase made in an earlier stage (`_hand_runtime_filters`, docs/runtime-filters.md): a small
blob relayed over the control channels at the stage boundary, never rows.
"""
from __future__ import annotations

import logging
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, as_completed, wait
from dataclasses import replace
from pathlib import Path

from ..compiler.pipeline import StagedPipeline
from ..contract.errors import NcaFailure
from ..nca.deployment import Deployer, Host
from ..nca.interface import FILE, Destination, Endpoint, InstanceContext, NcaError, NcaInstance, PhaseStats
from ..nca.registry import Registry
from ..nca.sharing import Sharing
from .jobs import Job, JobState, JobStore
from .logs import JOB_ID

log = logging.getLogger(__name__)


class Cancelled(Exception):
    pass


def _is_consequence(failure: NcaFailure) -> bool:
    """A broken input stream is what a consumer sees when its producer failed: when both are
    reported, the producer's error is the one worth showing. The runtime names stream failures
    "input port N ..." (ncas/runtime/in_tcp.c)."""
    return failure.message.startswith("input port ")


def senders_by_port(pipeline: StagedPipeline) -> dict[tuple[str, int], set[str]]:
    """(consumer NCA, input port) -> the NCAs that send to it (edges to clients are not NCAs')."""
    senders: dict[tuple[str, int], set[str]] = {}
    for e in pipeline.edges:
        if not e.to_client:
            senders.setdefault((e.consumer, e.consumer_port), set()).add(e.producer)
    return senders


def stream_keys(pipeline: StagedPipeline) -> dict[tuple[str, int], int]:
    """A fresh random key per keyed input port (the compiler marks the edges; docs/contract.md).
    Ports are numbers the kernel hands out again as soon as they are free, so a sender left over
    from another job can connect to one of ours; with a key it can never be counted as one of
    this job's streams."""
    ports = {(e.consumer, e.consumer_port) for e in pipeline.edges if e.keyed}
    return {port: secrets.randbits(64) or 1 for port in sorted(ports)}


# A client (a `send`'s receiver) that takes no data for this long while an NCA has data for it fails
# its job (Destination.client_stall_ms): it stopped reading or never accepted, and would otherwise
# hold the job's cores until the stall watchdog. A slow NCA downstream is backpressure, never this.
CLIENT_STALL_S = 10.0

# How often a running stage's NCAs are asked for their counters (NcaInstance.progress), and how soon
# after a stage starts the first time: a status poll should see live numbers within a second.
PROGRESS_INTERVAL_S = 0.5
FIRST_PROGRESS_S = 0.05


class StallWatchdog:
    """Notices a stage that has stopped making progress: every NCA still running reports the same
    activity reading (bytes moved, CPU used; NcaInstance.activity) for `timeout` seconds. A stage
    with an NCA that cannot report its activity is never taken for stalled. Without this, a lost
    stream or a client that stopped reading would leave the job running forever."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout or 0.0
        self.interval = min(1.0, self.timeout / 4) if self.timeout > 0 else None
        self._last: dict[str, object] = {}
        self._since = time.monotonic()

    def stalled(self, readings: dict[str, object | None]) -> bool:
        if self.timeout <= 0:
            return False
        now = time.monotonic()
        if any(r is None for r in readings.values()) or readings != self._last:
            self._last, self._since = readings, now
            return False
        return now - self._since >= self.timeout


class JobRunner:
    def __init__(self, job: Job, store: JobStore, registry: Registry, deployer: Deployer | None, cache_dir: Path,
                 work_root: Path, on_finish: Callable[[Job], None], stall_timeout: float | None = None,
                 client_stall: float | None = CLIENT_STALL_S,
                 progress_interval: float | None = PROGRESS_INTERVAL_S,
                 on_stages_done: Callable[[Job], None] | None = None, sharing: Sharing | None = None) -> None:
        self.job = job
        self.store = store
        self.registry = registry
        self.deployer = deployer
        self.cache_dir = cache_dir
        self.work_dir = work_root / job.id
        self.on_finish = on_finish
        # Every stage ended well: the NCAs did their work and are exiting. Called before destroy,
        # which also starts the warm spares of the next jobs (tens of ms): a job waiting for these
        # cores need not wait for that.
        self.on_stages_done = on_stages_done
        self.stall_timeout = stall_timeout  # seconds without progress in a stage; None = never
        self.client_stall = client_stall  # seconds a client may take no data; None or 0 = never
        self.progress_interval = progress_interval or None  # seconds between counter readings; None = never
        self.sharing = sharing  # the service's shared scans (docs/shared-scans.md); None: never
        self.instances: dict[str, NcaInstance] = {}
        self._keys: dict[tuple[str, int], int] = {}
        self._steps: dict[str, str] = {}  # the life-cycle step each NCA is in (for its failure)
        self._cancel = threading.Event()
        self._destroy_lock = threading.Lock()
        self._destroyed = False
        self._failure: NcaFailure | None = None
        self._failure_lock = threading.Lock()
        self._pending_senders = senders_by_port(job.pipeline)  # shrinks as senders finish
        self._senders_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(4, len(job.pipeline.ncas)),
                                        thread_name_prefix=f"job-{job.id}",
                                        initializer=JOB_ID.set, initargs=(job.id,))  # its logs name the job

    # ---------------------------------------------------------------- public

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"job-{self.job.id}", daemon=True)
        self._thread.start()

    def cancel(self, timeout: float = 30.0) -> None:
        """Destroy every NCA and wait (bounded) until the run has wound down and released its
        resources, so that the caller's answer reflects a clean state."""
        self._cancel.set()
        self._destroy_all()
        self._thread.join(timeout)

    # ---------------------------------------------------------------- the run

    def _run(self) -> None:
        job, tl = self.job, self.job.timeline
        JOB_ID.set(job.id)  # this thread's logs name the job (runtime/logs.py)
        state = JobState.SUCCEEDED
        try:
            self.work_dir.mkdir(parents=True, exist_ok=True)
            hosts = {h.name: h for h in self.deployer.hosts()} if self.deployer is not None else {}
            self._keys = stream_keys(job.pipeline)
            for node in job.pipeline.ncas:
                impl = self.registry.get(node.implementation)
                spec = job.pipeline.build_spec(node, job.id)
                spec = replace(spec, inputs=tuple(replace(port, key=self._keys.get((node.id, i), 0))
                                                  for i, port in enumerate(spec.inputs)))
                context = InstanceContext(deployer=self.deployer, work_dir=str(self.work_dir),
                                          cache_dir=str(self.cache_dir), host=self._host_of(node, hosts),
                                          sharing=self.sharing, tenant=job.tenant)
                self.instances[node.id] = impl.instantiate(spec, context)
            setup = tl.begin("setup")
            endpoints = self._lockstep("compile", self._compile_and_allocate)
            routes = self._resolve_routes(endpoints)
            self._lockstep("configure", lambda nid, inst: inst.configure(routes[nid]))
            tl.end(setup)
            run = tl.begin("execute")
            for stage, nca_ids in enumerate(job.pipeline.stages):
                span = tl.begin(f"stage:{stage}")
                job.live.stage_started(stage)
                self._run_stage(stage, nca_ids)
                tl.end(span)
            job.live.stage_started(None)
            tl.end(run)
        except Cancelled:
            state = JobState.CANCELLED if self._failure is None else JobState.FAILED
        except Exception as e:  # an unexpected bug in a plugin must still clean up and report
            log.exception("job %s failed in the control plane", job.id)
            self._fail(NcaFailure(nca="control-plane", stage=None, message=f"{type(e).__name__}: {e}"))
            state = JobState.FAILED
        if self._failure is not None:
            state = JobState.FAILED
            job.error = self._failure.to_json()
        if state is JobState.SUCCEEDED and self.on_stages_done is not None:
            self.on_stages_done(job)
        teardown = tl.begin("destroy")
        self._destroy_all()
        tl.end(teardown)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.on_finish(job)  # release resources before anyone can see the terminal state
        try:
            self.store.transition(job, state, (JobState.RUNNING,))
        except Exception:  # already ended by DELETE after a timeout: keep that state
            pass
        # NCA logs matter only while the job runs (failures carry their stderr tail in the error):
        # removed after the terminal state, which the client waits for, as nothing reads them now
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def _host_of(self, node, hosts: dict[str, Host]) -> Host | None:
        """Where placement put the instance; a pipeline compiled without placement runs what a
        host can run on the deployer's first host (as on a single machine)."""
        if node.host is not None:
            if node.host not in hosts:
                raise RuntimeError(f"{node.id} was placed on host {node.host!r}, which the deployer does not have")
            return hosts[node.host]
        first = next(iter(hosts.values()), None)
        return first if first is not None and node.resources.deployment in first.kinds else None

    def _compile_and_allocate(self, nid: str, inst: NcaInstance) -> list[Endpoint]:
        """Compile, then at once allocate (module docstring): each with its own timeline span."""
        tl = self.job.timeline
        span = tl.begin("compile", nca=nid)
        result = inst.compile()
        tl.end(span, cached=result.cached)
        if self._failure is not None or self._cancel.is_set():
            raise NcaError("cancelled")  # another NCA failed: do not start a process now
        self._steps[nid] = "allocate"
        span = tl.begin("allocate", nca=nid)
        try:
            return inst.allocate()
        finally:
            tl.end(span)

    def _lockstep(self, step: str, fn) -> dict[str, object]:
        """Run one life-cycle step on every NCA concurrently. The first failure destroys every
        instance at once, so that steps still running (a process that never gets ready) end
        now rather than at their timeouts."""
        results: dict[str, object] = {}
        futures = {}
        self._steps = dict.fromkeys(self.instances, step)
        for nid, inst in self.instances.items():
            futures[self._pool.submit(self._timed, step, nid, inst, fn)] = nid
        for fut in as_completed(futures):
            nid = futures[fut]
            try:
                results[nid] = fut.result()
            except Exception as e:  # NcaError or a plugin bug: either fails the job
                self._fail(self._failure_from(e, nid, None, self._steps.get(nid, step)))
                if self._failure is not None:
                    self._destroy_all()
        if self._failure is not None or self._cancel.is_set():
            raise Cancelled()
        return results

    def _timed(self, step: str, nid: str, inst: NcaInstance, fn):
        if self._cancel.is_set():
            raise NcaError("cancelled")
        if step == "compile":
            return fn(nid, inst)
        span = self.job.timeline.begin(step, nca=nid)
        try:
            return fn(nid, inst)
        finally:
            self.job.timeline.end(span)

    def _hand_runtime_filters(self, stage: int, nca_ids: list[str]) -> None:
        """Before a stage runs: give each scan of it that applies runtime filters what the joins'
        build phases (all in earlier stages; compiler/runtime_filters.py) made
        (docs/runtime-filters.md). The filter is a small blob relayed as a control message at the
        stage boundary, never data; a join that made none leaves its scans keeping every row."""
        starting = set(nca_ids)
        tl = self.job.timeline
        for edge in self.job.pipeline.runtime_filters:
            probes = [(p, slot, src) for p, slot, src in zip(edge.probe_ncas, edge.slots, edge.sources, strict=True)
                      if p in starting and self.job.pipeline.node(p).stages[0] == stage]
            if not probes:
                continue
            blobs = {src: self.instances[src].runtime_filter() for _, _, src in probes}
            made = [b for b in blobs.values() if b is not None and b.data is not None]
            self.job.runtime_filters[edge.id] = {
                "stage": stage, "handed": len(made) == len(blobs),
                "build_rows": max((b.rows for b in blobs.values() if b is not None), default=None),
                "bytes": max((len(b.data) for b in made), default=0)}
            for nid, slot, src in probes:
                blob = blobs[src]
                if blob is None or blob.data is None:
                    continue  # none made (the build side too large for one that removes rows)
                span = tl.begin(f"runtime_filter:{edge.id}", nca=nid)
                try:
                    self.instances[nid].accept_runtime_filter(slot, blob)
                except Exception as e:  # the scan is gone, or a plugin's bug: the job fails as at execute
                    self._fail(self._failure_from(e, nid, stage, "execute"))
                    self._destroy_all()
                    raise Cancelled() from None
                finally:
                    tl.end(span, join=edge.join, from_nca=src, slot=slot, bytes=len(blob.data),
                           build_rows=blob.rows)

    def _run_stage(self, stage: int, nca_ids: list[str]) -> None:
        self._hand_runtime_filters(stage, nca_ids)
        futures = {}
        for nid in nca_ids:
            phase = self.job.pipeline.node(nid).stages.index(stage)
            self.job.live.started(nid, stage)
            futures[self._pool.submit(self._execute_one, stage, phase, nid)] = nid
        pending = set(futures)
        watchdog = StallWatchdog(self.stall_timeout)
        now = time.monotonic()
        next_watch = None if watchdog.interval is None else now + watchdog.interval
        next_reading = None if self.progress_interval is None else now + min(FIRST_PROGRESS_S, self.progress_interval)
        while pending:
            due = [t for t in (next_watch, next_reading) if t is not None]
            timeout = max(0.0, min(due) - time.monotonic()) if due else None
            done, pending = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            for fut in done:
                try:
                    fut.result()
                except Exception as e:
                    self._fail(self._failure_from(e, futures[fut], stage, "execute"))
                    # Tear everything down now: NCAs blocked on the failed one's streams (and the
                    # client's receivers) are released at once instead of waiting for timeouts.
                    self._destroy_all()
            running = sorted(futures[f] for f in pending)
            now = time.monotonic()
            if next_reading is not None and now >= next_reading:
                next_reading = now + self.progress_interval
                if running and not self._destroyed:
                    self._read_progress(stage, running)
            if next_watch is None or now < next_watch:
                continue
            next_watch = now + watchdog.interval
            if running and not self._destroyed and watchdog.stalled(
                    {nid: self.instances[nid].activity() for nid in running}):
                names = ", ".join(f"{nid} ({self.job.pipeline.node(nid).implementation})" for nid in running)
                self._fail(NcaFailure(nca=running[0], stage=stage, message=(
                    f"stage {stage} made no progress for {watchdog.timeout:.0f} s: {names} still running, "
                    "none of them moving data or computing (a stream that never comes, or a client "
                    "that stopped reading)"), extra={"step": "execute", "stalled": running}))
                self._destroy_all()
        if self._failure is not None or self._cancel.is_set():
            raise Cancelled()

    def _read_progress(self, stage: int, running: list[str]) -> None:
        """Take each running NCA's counters so far (NcaInstance.progress: never blocks). One that
        cannot tell, or fails to, is unknown: progress is for people, it never fails a job."""
        for nid in running:
            try:
                reading = self.instances[nid].progress()
            except Exception:  # noqa: BLE001 - a plugin's bug here costs only its progress
                log.debug("reading the progress of %s in job %s failed", nid, self.job.id, exc_info=True)
                reading = None
            self.job.live.read(nid, stage, reading if isinstance(reading, PhaseStats) else None)

    def _execute_one(self, stage: int, phase: int, nid: str) -> None:
        tl = self.job.timeline
        span = tl.begin(f"stage:{stage}", nca=nid)
        stats = None
        try:
            if self._destroyed:  # cancelled or failed while queued for the pool: start nothing now
                raise NcaError("cancelled")
            stats = self.instances[nid].execute(phase)
        finally:
            tl.end(span)
            tl.stage_result(nid, stage, phase, span, stats)
        if phase == len(self.job.pipeline.node(nid).stages) - 1:
            self._sender_finished(nid)

    def _sender_finished(self, nid: str) -> None:
        """`nid` has sent all it ever will: tell every input port it fed whose senders are now all
        through (module docstring)."""
        with self._senders_lock:
            ready = []
            for (consumer, port), senders in self._pending_senders.items():
                if nid in senders:
                    senders.discard(nid)
                    if not senders:
                        ready.append((consumer, port))
        for consumer, port in ready:
            try:
                self.instances[consumer].senders_finished(port)
            except Exception:  # a notice that cannot be given costs only the fast failure
                log.exception("telling %s of job %s that its senders finished failed", consumer, self.job.id)

    def _resolve_routes(self, endpoints: dict[str, object]) -> dict[str, list[list[Destination]]]:
        """Turn the pipeline's edges into endpoints now that every NCA listens. An NCA's
        endpoints cover its network input ports only, in port order (file ports have none)."""
        pipeline = self.job.pipeline
        routes: dict[str, list[list[Destination]]] = {}
        for node in pipeline.ncas:
            ports: list[list[Destination]] = []
            for edges in pipeline.output_edges(node.id):
                dests = []
                for e in edges:
                    if e.to_client:
                        out = pipeline.outputs[e.consumer]
                        send = pipeline.plan.op(e.consumer)  # its udp_version: what the client's receiver takes
                        ep = Endpoint(out.host, out.port, out.transport, udp_version=getattr(send, "udp_version", 1))
                    else:
                        consumer = pipeline.node(e.consumer)
                        net_index = sum(1 for p in consumer.inputs[: e.consumer_port] if p.spec.transport != FILE)
                        ep = endpoints[e.consumer][net_index]
                    key = 0 if e.to_client else self._keys.get((e.consumer, e.consumer_port), 0)
                    stall = (self.client_stall or 0.0) if e.to_client else 0.0  # an NCA's slowness is backpressure
                    stall_ms = max(1, round(stall * 1000)) if stall > 0 else 0
                    dests.append(Destination(ep, e.first_stream, e.streams, key, stall_ms))
                ports.append(dests)
            routes[node.id] = ports
        return routes

    # ---------------------------------------------------------------- failure and teardown

    def _failure_from(self, e: Exception, nid: str, stage: int | None, step: str) -> NcaFailure:
        if isinstance(e, NcaError):
            return NcaFailure(nca=nid, stage=stage, message=e.message, file=e.file, record=e.record,
                              extra={"step": step, **e.extra})
        return NcaFailure(nca=nid, stage=stage, message=f"{type(e).__name__}: {e}", extra={"step": step})

    def _fail(self, failure: NcaFailure) -> None:
        with self._failure_lock:
            if self._cancel.is_set() or failure.message == "cancelled":
                return  # after DELETE, what follows are consequences
            if self._failure is None or (_is_consequence(self._failure) and not _is_consequence(failure)):
                self._failure = failure

    def _destroy_all(self) -> None:
        with self._destroy_lock:
            if self._destroyed:
                return
            self._destroyed = True
        threads = [threading.Thread(target=self._destroy_one, args=(nid, inst), daemon=True)
                   for nid, inst in self.instances.items()]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def _destroy_one(self, nid: str, inst: NcaInstance) -> None:
        JOB_ID.set(self.job.id)  # a thread of its own: its logs name the job too
        try:
            inst.destroy()
        except Exception:
            log.exception("destroy of %s in job %s failed", nid, self.job.id)
