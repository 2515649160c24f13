"""The control plane's use cases, independent of HTTP: submit, execute, status, cancel.

The REST layer (jumpgate/api) is a thin skin over this class, so tests and other front ends can
drive the same logic.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..compiler.compile import compile_plan
from ..contract.errors import JobStateError, NoResources, RequestError, UnknownJob
from ..dataflow.limits import RequestLimits
from ..dataflow.request import parse_request
from ..dataflow.storage import LocalStorage, Storage
from ..deploy.fleet import FleetDeployer, FleetStorage
from ..deploy.inventory import load_inventory
from ..deploy.local import LocalDeployer
from ..deploy.resources import HostCores
from ..deploy.warm import WarmSettings
from ..nca.deployment import Deployer
from ..nca.interface import ResourceRequest, Verdict
from ..nca.registry import Registry, load_registry
from ..nca.sharing import Sharing
from ..tenancy.policy import Reserved
from ..tenancy.tokens import LOCAL, Principal, TokenFile
from .access import Access
from .executor import JobRunner
from .history import HistorySettings, JobHistory
from .jobdb import JobSummary, StoredJob
from .jobs import Job, JobState, JobStore
from .metrics import ServiceMetrics
from .queue import RunQueue, TenantLimits, Waiting
from .timeline import Timeline

log = logging.getLogger(__name__)


def stage_cores(pipeline, host: str | None = None, default_host: str | None = None) -> list[int]:
    """Cores each stage needs: its NCAs run together, those of other stages sit idle. As in the
    thread assignment (compiler/scaling.py), in a stage that reads files the first thread of an NCA
    fed by other NCAs is not counted: it mostly waits for them. With `host`, only the instances
    placed there count; instances placed on no host (a switch, whose driver or model still runs on
    the control plane's machine) count on `default_host`."""
    fed = {e.consumer for e in pipeline.edges if not e.to_client}

    def here(nid: str) -> bool:
        placed = pipeline.node(nid).host or default_host
        return host is None or placed == host

    out = []
    for stage in pipeline.stages:
        mine = [nid for nid in stage if here(nid)]
        free = 1 if any(nid not in fed for nid in stage) else 0
        out.append(sum(pipeline.node(nid).resources.cores - (free if nid in fed else 0) for nid in mine))
    return out


def cores_by_host(pipeline, default_host: str) -> dict[str, list[int]]:
    """Per host that runs any instance of the job, the cores of each stage there."""
    used = {n.host or default_host for n in pipeline.ncas}
    return {h: stage_cores(pipeline, h, default_host) for h in sorted(used)}


def default_cache_dir() -> Path:
    base = os.environ.get("JUMPGATE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "jumpgate")
    return Path(base)


class NoNodeUp(RuntimeError):
    """Every node of the inventory is down when the server starts; the message says why each."""


@dataclass
class Settings:
    data_root: Path
    bind_host: str = "127.0.0.1"  # where NCA processes listen
    cores: int | None = None
    # Jobs together may hold this many times the cores in threads, one job at most the cores
    # (deploy/resources.py: NCA threads wait for the network much of the time).
    overcommit: float = 2.0
    cache_dir: Path = field(default_factory=default_cache_dir)
    work_root: Path | None = None
    plugins: list[str] | None = None  # restrict to these registered NCA names
    # A stage whose running NCAs neither move data nor compute for this long fails its job
    # (runtime/executor.py StallWatchdog); 0 = wait forever.
    stall_timeout_s: float = 300.0
    # Pre-started NCA processes for the next job with the same binary (deploy/warm.py): spares per
    # binary (0 = off), in all, and how long an unused one waits before it is stopped.
    warm: WarmSettings = field(default_factory=WarmSettings)
    # An inventory of nodes (deploy/inventory.py, docs/deploy.md); None: this machine is the one node.
    nodes: Path | None = None
    # Tenants and tokens (tenancy/tokens.py, docs/security.md); None: no authentication (loopback only).
    tokens: Path | None = None
    # Where the REST API listens: no job may send there.
    rest_host: str = "127.0.0.1"
    rest_port: int = 0
    # Networks every tenant's default send rule allows besides the request's address and loopback.
    send_allow: tuple[str, ...] = ()
    # The most NCA processes one job may start (a request with many sends or shuffles otherwise
    # starts any number on a few cores).
    max_ncas_per_job: int = 64
    # A job compiled and never executed gives back everything it holds after this long (seconds).
    compiled_ttl_s: float = 600.0
    # The longest a job waits in the run queue for cores before it fails (seconds).
    queue_max_wait_s: float = 300.0
    # A client (a send's receiver) that takes no data for this long while an NCA has data for it
    # fails its job at once (docs/nca-process-protocol.md, "Client destinations"); 0 = never.
    client_stall_s: float = 10.0
    # What one request may contain (dataflow/limits.py, docs/limits.md).
    limits: RequestLimits = field(default_factory=RequestLimits)
    # Where jobs are recorded so that they outlive the server (runtime/history.py); None: the
    # cache directory's state.db. Ended jobs kept: the newest `keep_jobs`, none older than
    # `keep_days` (0: no such limit); cleanup after dead servers and pruning rerun this often.
    state_db: Path | None = None
    keep_jobs: int = 10_000
    keep_days: float = 30.0
    history_upkeep_s: float = 600.0
    # Runtime filters from hash joins' build sides to the scans of their probe sides
    # (docs/runtime-filters.md); False (`serve --no-runtime-filters`) plans none, for comparison.
    runtime_filters: bool = True
    # Shared scans (docs/shared-scans.md): scans of the same files that run at the same time, in
    # one job or several, read them once. A scan waits up to `shared_scan_wait_s` for the scans
    # announced for its files to arrive or requests are being planned, and at least
    # `shared_scan_linger_s`.
    shared_scans: bool = False
    shared_scan_wait_s: float = 0.2
    shared_scan_linger_s: float = 0.05


class JumpgateService:
    """`deployer` says where NCAs run (its hosts); by default this machine (LocalDeployer)."""

    def __init__(self, settings: Settings, registry: Registry | None = None,
                 deployer: Deployer | None = None) -> None:
        self.settings = settings
        self.data_root = Path(settings.data_root).resolve()
        self.registry = registry or load_registry(settings.plugins)
        self.metrics = ServiceMetrics(self)  # GET /metrics; the store tells it of every job's changes
        self.sharing = Sharing(settings.shared_scan_wait_s, settings.shared_scan_linger_s) \
            if settings.shared_scans else None
        self.store = JobStore(observer=self.metrics)
        self.cache_dir = Path(settings.cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        # Before this server makes its work root or starts an NCA: what dead servers left here
        # goes, and their jobs that were not over are marked so (runtime/history.py).
        self.history = JobHistory(HistorySettings(settings.state_db or self.cache_dir / "state.db",
                                                  settings.keep_jobs, settings.keep_days,
                                                  settings.history_upkeep_s), self.cache_dir)
        self.store.journal = self.history
        self.work_root = Path(settings.work_root or self.cache_dir / "jobs" / str(os.getpid()))
        self.work_root.mkdir(parents=True, exist_ok=True)
        self.history.claim(self.work_root)
        # spares live in their own directory: a job's directory goes when the job ends
        self.deployer = deployer or self._default_deployer()
        # where reads' paths are resolved: the nodes' data roots, or this machine's
        self.storage: Storage = (self.deployer.storage(self.data_root) if isinstance(self.deployer, FleetDeployer)
                                 else LocalStorage(self.data_root))
        # Nodes of Kubernetes sources come and go while the server runs (deploy/kube_source.py):
        # then no node may be up yet, and the resource view follows the nodes at each compile.
        self.dynamic = isinstance(self.deployer, FleetDeployer) and self.deployer.dynamic
        if not self.deployer.hosts() and not self.dynamic:
            raise NoNodeUp("no node is up: " + "; ".join(f"{h.name}: {why}" for h, _, why in
                                                             self.deployer.node_states()))
        # Every node the deployer knows, up or not: a down node that comes back is counted at once.
        self.all_hosts = [h for h, _, _ in self.deployer.node_states()]
        self.cores = HostCores(self.all_hosts, settings.cores, dynamic=self.dynamic, overcommit=settings.overcommit)
        self.access = Access(TokenFile(settings.tokens) if settings.tokens else None, self._reserved,
                             self._data_roots, settings.send_allow)
        self.queue = RunQueue(self.cores, self._limits, settings.queue_max_wait_s)
        self.pools = {name: pool for impl in self.registry.all() for name, pool in impl.resource_pools().items()}

    def _default_deployer(self) -> Deployer:
        s = self.settings
        if s.nodes is not None:
            return FleetDeployer(load_inventory(s.nodes), s.warm, self.work_root / "warm", data_root=self.data_root)
        return LocalDeployer(s.bind_host, s.warm, self.work_root / "warm", s.cores, data_root=self.data_root)

    # ---------------------------------------------------------------- use cases

    def _reserved(self) -> Reserved:
        s = self.settings
        return Reserved(s.rest_port, frozenset({s.rest_host}), frozenset(self.deployer.control_ports()))

    def _data_roots(self) -> list[str]:
        roots = self.storage.roots.values() if isinstance(self.storage, FleetStorage) else [self.storage]
        return [os.path.realpath(r.root) for r in roots if hasattr(r, "root")]

    def submit(self, body: object, who: Principal = LOCAL, source: str | None = None) -> Job:
        """Compile a request for `who`; its sends and reads are admitted by the tenant's policy
        first (Forbidden, 403), sends from `source` (the request's address) allowed by default."""
        if self.sharing is not None:  # its scans may share with running ones: they wait for it
            with self.sharing.planning():
                return self._submit(body, who, source)
        return self._submit(body, who, source)

    def _submit(self, body: object, who: Principal, source: str | None) -> Job:
        timeline = Timeline()
        t = time.monotonic_ns()
        self._current_nodes()  # first: without nodes, every file would seem missing
        plan = self.access.admit(parse_request(body, self.storage, self.settings.limits), who, source)
        t_parse = time.monotonic_ns()
        # Thread counts follow the cores free now; the job's demand is checked again at execute.
        states = self._current_nodes()
        up = [h for h, state, _ in states if state == "up"]
        pipeline = compile_plan(plan, self.registry.all(), capacity_check=self.capacity_check,
                                op_paths=plan.op_paths, thread_budget=max(1, self.cores.thread_budget),
                                hosts=up, runtime_filters=self.settings.runtime_filters)
        processes = sum(1 for n in pipeline.ncas if n.host is not None)
        if processes > self.settings.max_ncas_per_job:
            raise RequestError(f"the request needs {processes} NCA processes; this server runs at most "
                               f"{self.settings.max_ncas_per_job} per job (fewer sends or shuffle partitions)",
                               path="operations")
        down = {h.name: why for h, state, why in states if state != "up"}
        if down:  # the mapping's answer says which nodes it could not use, and why
            pipeline = replace(pipeline, stats={**pipeline.stats, "nodes_skipped": down})
        t_map = time.monotonic_ns()
        timeline.record("parse", t, t_parse)
        timeline.record("mapping", t_parse, t_map)
        job = Job(id=self.store.new_id(), name=plan.name, plan=plan, pipeline=pipeline, timeline=timeline,
                  tenant=who.tenant)
        self.store.add(job)
        self._expire_compiled()
        return job

    def submit_and_execute(self, body: object, who: Principal = LOCAL, source: str | None = None) -> Job:
        """`submit` and `execute` in one step, for a client that already listens at every `send`
        address (`POST /v1/jobs?execute=true`): one round trip less before the data flows. A job
        that compiled but cannot start is cancelled, so nothing compiled is left behind."""
        job = self.submit(body, who, source)
        try:
            return self.execute(job.id, who)
        except Exception:
            self.cancel(job.id, who)
            raise

    def _expire_compiled(self) -> None:
        """Cancel jobs compiled longer ago than the TTL and never executed (a client that compiles
        and walks away must not hold memory forever); checked at each submit, which is when they
        pile up."""
        ttl = self.settings.compiled_ttl_s
        if ttl <= 0:
            return
        now = time.time()
        for job in self.store.all():
            if job.state is JobState.COMPILED and now - job.created > ttl:
                job.error = {"message": f"compiled {now - job.created:.0f} s ago and never executed: expired "
                                        f"(the server keeps compiled jobs {ttl:g} s)"}
                try:
                    self.store.transition(job, JobState.CANCELLED, (JobState.COMPILED,))
                except JobStateError:
                    job.error = None  # executed meanwhile

    def execute(self, job_id: str, who: Principal = LOCAL) -> Job:
        job = self.view(job_id, who)
        if not isinstance(job, Job) or job.state is not JobState.COMPILED:  # a stored job never runs
            raise JobStateError(f"job {job_id} is {job.state.value}; only a compiled job can execute",
                                state=job.state.value)
        if self.dynamic:  # a node may have gone since the compile (deploy/kube_source.py)
            up = {h.name for h, state, _ in self.deployer.node_states() if state == "up"}
            gone = sorted({n.host for n in job.pipeline.ncas if n.host is not None} - up)
            if gone:
                raise NoResources(f"no resources: the job was placed on {', '.join(gone)}, no longer up; "
                                  "submit it again")
        self.store.transition(job, JobState.RUNNING, (JobState.COMPILED,))
        runner = JobRunner(job, self.store, self.registry, self.deployer, self.cache_dir, self.work_root,
                           on_finish=self._finished, stall_timeout=self.settings.stall_timeout_s,
                           client_stall=self.settings.client_stall_s,
                           on_stages_done=lambda done: self.queue.release(done.id), sharing=self.sharing)
        job.runner = runner
        # Runs now if its cores are free and its tenant under its limits, else waits its turn
        # (runtime/queue.py): `running` to the client either way, the status says which.
        self.queue.enter(Waiting(job.id, job.tenant, cores_by_host(job.pipeline, self.default_host()),
                                 start=runner.start, fail=lambda message: self._fail_waiting(job, message)))
        return job

    def _current_nodes(self) -> list[tuple]:
        """The nodes now, the resource view following them; with nodes that come and go, a 503
        saying why when none is up."""
        states = self.deployer.node_states()
        if self.dynamic:
            self.all_hosts = [h for h, _, _ in states]
            self.cores.sync(self.all_hosts)
            if not any(state == "up" for _, state, _ in states):
                raise NoResources("no resources: no node is up" + "".join(
                    f"; {h.name}: {why}" for h, _, why in states) + self._sources_said())
        return states

    def default_host(self) -> str:
        """Where instances placed on no host (a switch's driver) are counted: the first node."""
        hosts = self.all_hosts or [h for h, _, _ in self.deployer.node_states()]
        return hosts[0].name if hosts else "-"

    def node_sources(self) -> list[dict]:
        """The inventory's Kubernetes sources: each one's API server, state and reason."""
        return self.deployer.source_states() if isinstance(self.deployer, FleetDeployer) else []

    def _sources_said(self) -> str:
        troubled = [s for s in self.node_sources() if s["state"] != "watching"]
        return "".join(f"; node source {s['namespace']} is {s['state']}: {s['reason']}" for s in troubled)

    def _fail_waiting(self, job: Job, message: str) -> None:
        job.error = {"message": message, "queued": True}
        try:
            self.store.transition(job, JobState.FAILED, (JobState.RUNNING,))
        except JobStateError:
            pass  # cancelled meanwhile

    def _limits(self, tenant: str) -> TenantLimits:
        policy = self.access.policy(tenant)
        return TenantLimits(policy.max_jobs, policy.max_cores)

    def cancel(self, job_id: str, who: Principal = LOCAL) -> Job | StoredJob:
        job = self.view(job_id, who)
        if not isinstance(job, Job) or job.state.terminal:
            return job
        if job.state is JobState.COMPILED:
            self.store.transition(job, JobState.CANCELLED, (JobState.COMPILED,))
            return job
        if self.queue.leave(job.id):  # still waiting for cores: nothing was started
            self.store.transition(job, JobState.CANCELLED, (JobState.RUNNING,))
            return job
        if job.runner is not None:
            job.runner.cancel()  # destroys every NCA before we answer
        try:
            self.store.transition(job, JobState.CANCELLED, (JobState.RUNNING,))
        except JobStateError:
            pass  # it finished (or failed) while being cancelled; keep that state
        return job

    def capacity_check(self, request: ResourceRequest) -> Verdict:
        """The mapping's veto: an NCA whose pools (a switch's register slots) have no free units
        now is not chosen, so the job goes to other NCAs. Cores are checked at execute."""
        for name, units in request.pools.items():
            pool = self.pools.get(name)
            if pool is None:
                return Verdict.no(f"no registered NCA provides the resource pool {name!r}")
            if not pool.can_acquire(units):
                return Verdict.no(f"resource pool {name!r} has no free block of {units} units "
                                  f"({pool.free} of {pool.capacity} free; other jobs hold the rest)")
        return Verdict.yes()

    def nodes(self) -> list[dict]:
        """Each host of the deployment with its state, its cores in use, the NCAs running on it
        and its data root as the node sees it (GET /v1/nodes)."""
        if self.dynamic:  # a node that came since the last compile is counted at once
            self.cores.sync([h for h, _, _ in self.deployer.node_states()])
        cores = self.cores.snapshot()
        running: dict[str, int] = {}
        for channel in self.deployer.running():
            running[channel.host.name] = running.get(channel.host.name, 0) + 1
        info = self.deployer.node_info()
        roots = self.node_data_roots()
        return [{**h.to_json(), "state": state, "reason": reason,
                 "cores_in_use": sum(cores[h.name]["used"].values()) if h.name in cores else 0,
                 "ncas_running": running.get(h.name, 0), "data_root": roots.get(h.name), **info.get(h.name, {})}
                for h, state, reason in self.deployer.node_states()]

    def node_data_roots(self) -> dict[str, str]:
        """Each node's data root as that node sees it: the inventory's (or this server's
        --data-root where it names none); without an inventory, this machine's."""
        if isinstance(self.storage, FleetStorage):
            return {name: str(r.root) for name, r in self.storage.roots.items() if hasattr(r, "root")}
        return {h.name: str(self.data_root) for h, _, _ in self.deployer.node_states()}

    def client_data_root(self) -> str | None:
        """The directory a client names its files under (GET /v1/nodes `data_root`; the Spark
        plugin's `spark.jumpgate.dataRoot` when that is unset): a read's relative path is resolved
        under every node's data root, so this is the data root when all nodes have the same one
        (one machine, or nodes sharing a path); None when the nodes' roots differ, and a client
        must then say which of them it sees (docs/spark.md)."""
        roots = set(self.node_data_roots().values())
        return roots.pop() if len(roots) == 1 else None

    def health(self) -> dict:
        """GET /v1/health: liveness, cores in use per node and job, NCA processes running and
        kept warm. No data root: anyone may ask this (Prometheus does, without a token), and
        where the files are is for the callers GET /v1/nodes admits."""
        out = {"status": "ok", "cores": self.cores.snapshot(), "nodes": [h.name for h in self.deployer.hosts()],
               "ncas_running": len(self.deployer.running()), "ncas_warm": self.deployer.spares()}
        sources = self.node_sources()
        if sources:  # a watch lost or refused shows here and on GET /v1/nodes' pods
            out["node_sources"] = sources
        return out

    def status(self, job_id: str, who: Principal = LOCAL) -> Job:
        job = self.store.get(job_id)
        self.access.visible(job.tenant, who, job_id)
        return job

    def view(self, job_id: str, who: Principal = LOCAL) -> Job | StoredJob:
        """A job this server holds, or one recorded earlier (runtime/history.py): this server's
        past jobs it no longer keeps in memory, and those of servers that are gone."""
        try:
            return self.status(job_id, who)
        except UnknownJob:
            stored = self.history.get(job_id)
            if stored is None:
                raise
        self.access.visible(stored.tenant, who, job_id)
        return stored

    def jobs(self, who: Principal = LOCAL) -> list[JobSummary]:
        """The jobs `who` may see (its tenant's, or all for an admin), live and recorded, oldest
        first."""
        return self.history.summaries(who, self.store.all())

    def shutdown(self) -> None:
        self.queue.close()
        self.deployer.close_spares()  # first: jobs cancelled below must not start new spares
        for job in self.store.all():
            if not job.state.terminal:
                try:
                    self.cancel(job.id)
                except Exception:
                    log.exception("cancelling job %s at shutdown", job.id)
        self.deployer.shutdown()
        self.history.close()  # last: the cancels above are recorded

    def _finished(self, job: Job) -> None:
        # and the jobs waiting for these cores may start (a job that ended well gave them back
        # when its last stage ended: releasing twice is harmless)
        self.queue.release(job.id)
