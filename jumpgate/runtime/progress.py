"""Live progress of a job: per NCA, the tuples and bytes it has taken in and sent out so far, for
`GET /v1/jobs/{id}`'s `progress` object (docs/contract.md §4, "Live progress").

Two sources make one answer. A phase that finished is in the job's timeline, with the counters its
NCA reported at its end (the `done` stats). A phase that runs has only the latest reading the
executor took from its instance (`NcaInstance.progress`, every PROGRESS_INTERVAL_S): `LiveReadings`
keeps those. So the answer is the timeline's sums plus the running phases' readings, and once the
job has ended it is the timeline's alone: the same for a job in memory and one read back from the
job database, and final (the NCAs' own totals).

An instance that cannot report (a plugin without `progress`, the switch) shows its counters as
null while its phase runs: unknown, never an error.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ..nca.interface import PhaseStats

COUNTERS = ("tuples_in", "bytes_in", "tuples_out", "bytes_out")


@dataclass(frozen=True, slots=True)
class Reading:
    stage: int  # the global stage the instance runs in
    stats: PhaseStats | None  # None: not read yet, or the instance cannot tell
    at_ns: int  # time.monotonic_ns() of the reading


class LiveReadings:
    """The running phases' latest counters (executor threads write, status answers read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readings: dict[str, Reading] = {}
        self.stage: int | None = None  # the job's stage now running; None before and after them
        self.updated_ns: int | None = None  # when the latest reading was taken

    def stage_started(self, stage: int | None) -> None:
        with self._lock:
            self.stage = stage

    def started(self, nca: str, stage: int) -> None:
        """`nca` starts its phase of `stage`: running, its counters not read yet."""
        with self._lock:
            self._readings[nca] = Reading(stage, None, time.monotonic_ns())

    def read(self, nca: str, stage: int, stats: PhaseStats | None) -> None:
        now = time.monotonic_ns()
        with self._lock:
            current = self._readings.get(nca)
            if current is None or current.stage != stage:
                return  # a reading of a phase that is no longer the instance's current one
            self._readings[nca] = Reading(stage, stats, now)
            if stats is not None:
                self.updated_ns = now

    def snapshot(self) -> tuple[dict[str, Reading], int | None, int | None]:
        with self._lock:
            return dict(self._readings), self.stage, self.updated_ns


def _ms(ns: int, t0: int) -> float:
    return round((ns - t0) / 1e6, 3)


def _client_senders(pipeline: dict) -> set[str] | None:
    """The NCAs whose every output edge goes to a client: their tuples out are the rows the
    clients get. None when an NCA sends to a client and to an NCA too (its count mixes both), or
    when the pipeline does not say."""
    edges = pipeline.get("edges")
    if not isinstance(edges, list):
        return None
    to_client = {e.get("from") for e in edges if e.get("client")}
    to_nca = {e.get("from") for e in edges if not e.get("client")}
    return None if to_client & to_nca else to_client


def progress_json(pipeline: dict, timeline: dict, live: LiveReadings | None, *, final: bool,
                  t0_ns: int | None = None) -> dict:
    """The `progress` object of a job's status. `pipeline` and `timeline` are the job's JSON;
    `live` (with `t0_ns`, the timeline's origin) the running phases' readings, None once the job
    has ended (`final`)."""
    readings, stage, updated_ns = live.snapshot() if live is not None else ({}, None, None)
    timeline_ncas = timeline.get("ncas", {}) if isinstance(timeline, dict) else {}
    ncas: dict[str, dict] = {}
    latest_end: float | None = None
    for node in pipeline.get("ncas", []):
        nid = node.get("id") if isinstance(node, dict) else None
        if not isinstance(nid, str):
            continue
        finished = [e for e in timeline_ncas.get(nid, {}).get("stages", []) if isinstance(e, dict)]
        counts: dict[str, int] | None = dict.fromkeys(COUNTERS, 0)
        for entry in finished:
            if counts is not None and all(isinstance(entry.get(k), int) for k in COUNTERS):
                counts = {k: counts[k] + entry[k] for k in COUNTERS}
            else:
                counts = None  # a phase that failed or was cancelled reported nothing
            if isinstance(entry.get("end_ms"), (int, float)):
                latest_end = max(latest_end or 0.0, float(entry["end_ms"]))
        done_stages = {e.get("stage") for e in finished}
        reading = readings.get(nid)
        state, at_stage = "waiting", (finished[-1].get("stage") if finished else None)
        if reading is not None and reading.stage not in done_stages and not final:
            state, at_stage = "running", reading.stage
            if reading.stats is None or counts is None:
                counts = None
            else:
                counts = {k: counts[k] + getattr(reading.stats, k) for k in COUNTERS}
        elif len(finished) >= len(node.get("stages") or ()) and finished:
            state = "done"
        elif final:
            state = "stopped"  # the job ended before this NCA's last phase did
        entry = {"state": state, "stage": at_stage}
        entry.update(counts if counts is not None else dict.fromkeys(COUNTERS))
        ncas[nid] = entry
    senders = _client_senders(pipeline)
    rows: int | None = None
    if senders:
        outs = [ncas[n]["tuples_out"] for n in senders if n in ncas]
        rows = sum(outs) if outs and all(isinstance(v, int) for v in outs) else None
    if updated_ns is not None and t0_ns is not None:
        updated: float | None = _ms(updated_ns, t0_ns)
        updated = max(updated, latest_end) if latest_end is not None else updated
    else:
        updated = latest_end
    return {"final": final, "updated_ms": updated, "stage": None if final else stage,
            "stages": len(pipeline.get("stages", [])), "ncas": ncas, "rows_to_clients": rows}
