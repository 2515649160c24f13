"""Per-job and per-NCA timelines (thesis Figure 3.7/3.8: "where did the time go").

Times are milliseconds since the job was submitted, so one job's timeline reads as a Gantt chart:
compile (mapping, staging), then per NCA its compile, allocate, configure, and one entry per stage
it ran in with busy vs waiting time and tuple/byte counts reported by the NCA itself.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from ..nca.interface import PhaseStats


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)


@dataclass
class Span:
    start_ns: int
    end_ns: int | None = None
    info: dict = field(default_factory=dict)

    def to_json(self, t0: int) -> dict:
        out = {"start_ms": _ms(self.start_ns - t0)}
        if self.end_ns is not None:
            out["end_ms"] = _ms(self.end_ns - t0)
            out["duration_ms"] = _ms(self.end_ns - self.start_ns)
        out.update(self.info)
        return out


class Timeline:
    """Thread-safe recorder; executor threads write, the REST layer reads."""

    def __init__(self) -> None:
        self.t0 = time.monotonic_ns()
        self._lock = threading.Lock()
        self.phases: dict[str, Span] = {}  # job-level: parse, mapping, setup, stage:N, ...
        self.ncas: dict[str, dict[str, Span]] = {}  # nca id -> step -> span
        self.nca_stages: dict[str, list[dict]] = {}

    def begin(self, name: str, nca: str | None = None) -> Span:
        span = Span(time.monotonic_ns())
        with self._lock:
            if nca is None:
                self.phases[name] = span
            else:
                self.ncas.setdefault(nca, {})[name] = span
        return span

    def end(self, span: Span, **info: object) -> None:
        with self._lock:
            span.end_ns = time.monotonic_ns()
            span.info.update({k: v for k, v in info.items() if v is not None})

    def record(self, name: str, start_ns: int, end_ns: int, **info: object) -> None:
        with self._lock:
            self.phases[name] = Span(start_ns, end_ns, dict(info))

    def stage_result(self, nca: str, stage: int, phase: int, span: Span, stats: PhaseStats | None) -> None:
        with self._lock:
            entry = {"stage": stage, "phase": phase, **span.to_json(self.t0)}
            if stats is not None:
                entry.update(stats.to_json())
            self.nca_stages.setdefault(nca, []).append(entry)

    def to_json(self) -> dict:
        with self._lock:
            phases = {k: v.to_json(self.t0) for k, v in self.phases.items()}
            ncas = {}
            for nca, steps in self.ncas.items():
                ncas[nca] = {k: v.to_json(self.t0) for k, v in steps.items()}
                ncas[nca]["stages"] = list(self.nca_stages.get(nca, []))
            for nca, stages in self.nca_stages.items():
                ncas.setdefault(nca, {"stages": list(stages)})
        return {"phases": phases, "ncas": ncas}
