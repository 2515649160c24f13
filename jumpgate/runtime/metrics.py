"""The service's Prometheus metrics (GET /metrics; docs/operations.md lists them).

Two kinds, fed two ways:

- What happens to jobs (submitted, finished, how long each phase and stage took, what each NCA
  implementation moved, compile-cache hits) is counted when it happens, from the job store: it
  tells `ServiceMetrics` when a job is added and when its state changes. The durations and counts
  come from the job's timeline, which the executor already fills, so the executor itself carries
  no metrics code; everything the timeline holds at a job's end is observed at that end (an NCA's
  counters arrive only when its execute call returns anyway).
- What the service holds right now (jobs by state, nodes, cores, NCA processes, pre-started
  spares) is read when Prometheus scrapes (`_StateCollector`): cheap to read, so there is nothing
  to keep up to date and nothing that can drift.

Each service has its own `CollectorRegistry`, never prometheus_client's global one, so several
services in one process (tests, an embedding application) do not collide.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .jobs import Job, JobState

if TYPE_CHECKING:
    from .service import JumpgateService

# Seconds, from a millisecond (a parse, a cached compile) to half an hour (a long stage).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
           120.0, 300.0, 600.0, 1800.0)

# Job-level phases the service records before the job exists (observed when it is added) and the
# ones the executor records as the job runs (observed when it ends).
SUBMIT_PHASES = ("parse", "mapping")
RUN_PHASES = ("setup", "execute", "destroy")
# Steps each NCA takes on its own; the job's phase of the same name is their extent (first start
# to last end), because allocate overlaps other NCAs' compiles (runtime/executor.py).
NCA_STEPS = ("compile", "allocate", "configure")


def _seconds(span: dict) -> float | None:
    """A timeline span's duration in seconds; None for a span that never ended (a failed step)."""
    ms = span.get("duration_ms")
    return None if ms is None else ms / 1000.0


class ServiceMetrics:
    """The registry of one service and the job events that feed it (`JobStore` calls
    `job_added` and `job_changed`; `render` answers a scrape)."""

    def __init__(self, service: JumpgateService) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.submitted = Counter("jumpgate_jobs_submitted", "Jobs compiled (accepted by POST /v1/jobs)",
                                 ["tenant"], registry=r)
        self.finished = Counter("jumpgate_jobs_finished", "Jobs that ended, by their final state",
                                ["tenant", "state"], registry=r)
        self.phase = Histogram("jumpgate_job_phase_seconds", "Duration of each phase of a job",
                               ["phase"], buckets=BUCKETS, registry=r)
        self.stage = Histogram("jumpgate_job_stage_seconds",
                               "Duration of each stage of a job (all of its NCAs' execute calls)",
                               ["stage"], buckets=BUCKETS, registry=r)
        self.nca_step = Histogram("jumpgate_nca_step_seconds",
                                  "Duration of each NCA's life-cycle steps (execute: one call per stage)",
                                  ["implementation", "step"], buckets=BUCKETS, registry=r)
        self.tuples = Counter("jumpgate_nca_tuples", "Tuples NCAs read (in) and wrote (out), as they report them",
                              ["implementation", "direction"], registry=r)
        self.bytes = Counter("jumpgate_nca_bytes", "Bytes NCAs read (in) and wrote (out), as they report them",
                             ["implementation", "direction"], registry=r)
        self.compiles = Counter("jumpgate_compile_cache", "NCA compiles, answered from the build cache or not",
                                ["implementation", "result"], registry=r)
        r.register(_StateCollector(service))

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The scrape's body and content type, in the format the scraper asks for (Prometheus'
        text format unless it accepts OpenMetrics)."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type

    # ---------------------------------------------------------------- job events (JobStore)

    def job_added(self, job: Job) -> None:
        self.submitted.labels(job.tenant).inc()
        phases = job.timeline.to_json()["phases"]
        self._observe_phases(phases, SUBMIT_PHASES)

    def job_changed(self, job: Job, old: JobState) -> None:
        if not job.state.terminal:
            return
        self.finished.labels(job.tenant, job.state.value).inc()
        timeline = job.timeline.to_json()
        self._observe_phases(timeline["phases"], RUN_PHASES)
        for name, span in timeline["phases"].items():
            if name.startswith("stage:") and (s := _seconds(span)) is not None:
                self.stage.labels(name.removeprefix("stage:")).observe(s)
        ncas = timeline["ncas"]
        for step in NCA_STEPS:
            spans = [steps[step] for steps in ncas.values() if step in steps]
            # A step some NCA began and never ended (it failed there) has no duration for the job.
            if spans and all("end_ms" in s for s in spans):
                self.phase.labels(step).observe(
                    (max(s["end_ms"] for s in spans) - min(s["start_ms"] for s in spans)) / 1000.0)
        for nid, steps in ncas.items():
            self._observe_nca(self._implementation(job, nid), steps)

    # ---------------------------------------------------------------- helpers

    def _observe_phases(self, phases: dict[str, dict], names: Iterable[str]) -> None:
        for name in names:
            if name in phases and (s := _seconds(phases[name])) is not None:
                self.phase.labels(name).observe(s)

    def _observe_nca(self, impl: str, steps: dict) -> None:
        for step in NCA_STEPS:
            if step in steps and (s := _seconds(steps[step])) is not None:
                self.nca_step.labels(impl, step).observe(s)
        cached = steps.get("compile", {}).get("cached")
        if cached is not None:
            self.compiles.labels(impl, "hit" if cached else "miss").inc()
        for entry in steps.get("stages", []):
            if "tuples_in" not in entry:
                continue  # the execute call failed: the NCA reported nothing
            if (s := _seconds(entry)) is not None:
                self.nca_step.labels(impl, "execute").observe(s)
            for direction in ("in", "out"):
                self.tuples.labels(impl, direction).inc(entry[f"tuples_{direction}"])
                self.bytes.labels(impl, direction).inc(entry[f"bytes_{direction}"])

    @staticmethod
    def _implementation(job: Job, nid: str) -> str:
        try:
            return job.pipeline.node(nid).implementation
        except (AttributeError, KeyError):
            return "unknown"


class _StateCollector(Collector):
    """Gauges read at scrape time from what the service holds now."""

    def __init__(self, service: JumpgateService) -> None:
        self.service = service

    def describe(self) -> Iterator[Metric]:
        return iter(())  # families are known only when collected; nothing to check for clashes

    def collect(self) -> Iterator[Metric]:
        s = self.service
        jobs = GaugeMetricFamily("jumpgate_jobs", "Jobs the server holds, by state (ended ones: the newest "
                                                  "it keeps, see the counters for totals)", labels=["tenant", "state"])
        counts: dict[tuple[str, str], int] = {}
        for job in s.store.all():
            key = (job.tenant, job.state.value)
            counts[key] = counts.get(key, 0) + 1
        for (tenant, state), n in sorted(counts.items()):
            jobs.add_metric([tenant, state], n)
        yield jobs

        states = s.deployer.node_states()
        up = GaugeMetricFamily("jumpgate_node_up", "1 when the node is up (NCAs can run there), else 0",
                               labels=["node"])
        for host, state, _ in states:
            up.add_metric([host.name], 1 if state == "up" else 0)
        yield up

        cores = s.cores.snapshot()
        capacity = GaugeMetricFamily("jumpgate_node_cores", "Cores NCAs may use on the node", labels=["node"])
        used = GaugeMetricFamily("jumpgate_node_cores_in_use", "Cores running jobs hold on the node",
                                 labels=["node"])
        for name, view in sorted(cores.items()):
            capacity.add_metric([name], view["capacity"])
            used.add_metric([name], sum(view["used"].values()))
        yield capacity
        yield used

        running = GaugeMetricFamily("jumpgate_ncas_running", "NCA processes of jobs running on the node",
                                    labels=["node"])
        per_node = dict.fromkeys((h.name for h, _, _ in states), 0)
        for channel in s.deployer.running():
            per_node[channel.host.name] = per_node.get(channel.host.name, 0) + 1
        for name, n in sorted(per_node.items()):
            running.add_metric([name], n)
        yield running

        queue = s.queue.snapshot()
        waiting = GaugeMetricFamily("jumpgate_queue_waiting", "Jobs executed and waiting in the run queue for cores "
                                                              "(runtime/queue.py)", labels=["tenant"])
        per_tenant = {tenant: 0 for tenant, _ in counts} | queue["by_tenant"]  # 0 for tenants not waiting
        for tenant, n in sorted(per_tenant.items()):
            waiting.add_metric([tenant], n)
        yield waiting
        yield GaugeMetricFamily("jumpgate_queue_oldest_wait_seconds",
                                "How long the job waiting longest in the run queue has waited",
                                value=queue["oldest_s"])

        yield GaugeMetricFamily("jumpgate_ncas_prestarted",
                                "Pre-started NCA processes waiting for the next job (the warm pool)",
                                value=len(s.deployer.spares()))
