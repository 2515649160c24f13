"""Progress of a job the client runs, for people: `collect(..., progress=True)` shows a Rich
progress display on standard error; `progress=callback` calls `callback(ProgressUpdate)` instead.

What it shows comes from two places: the client's own steps (compiling the request, then waiting
for the job to end, then the last bytes), and the `progress` object of each `GET /v1/jobs/{id}`
answer (docs/contract.md §4, "Live progress"): per NCA, the tuples and bytes so far, and
`rows_to_clients`, the rows the NCAs have sent to the job's clients. The client polls the status
anyway (a long poll of a quarter second), so progress costs no extra call.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import BuilderError


@dataclass(frozen=True)
class ProgressUpdate:
    """One look at a job the client runs.

    `step`: "compiling" (the server compiles the request), "queued" (waiting for cores),
    "starting" (the server builds and starts the NCAs), "running" (a stage runs), "receiving"
    (the job ended; the last bytes arrive) or "done". `rows`: the rows the NCAs have sent to the
    client so far, by the server's count (None: not known, e.g. an NCA that cannot tell).
    `tuples_in`: tuples all NCAs have taken in so far, summed (a measure of work done; None when
    one of them cannot tell). `bytes_received`: what this client's receivers have read.
    `progress`: the server's `progress` object as it came."""

    step: str
    elapsed_s: float
    job_id: str | None = None
    state: str | None = None
    stage: int | None = None
    stages: int | None = None
    rows: int | None = None
    tuples_in: int | None = None
    bytes_in: int | None = None
    bytes_received: int = 0
    queue: Any = None
    progress: dict = field(default_factory=dict)


ProgressCallback = Callable[[ProgressUpdate], None]


def _sum(ncas: dict, key: str) -> int | None:
    values = [n.get(key) for n in ncas.values() if isinstance(n, dict)]
    return sum(values) if values and all(isinstance(v, int) for v in values) else None


def update_from_status(status: dict, *, elapsed_s: float, bytes_received: int = 0) -> ProgressUpdate:
    """A `GET /v1/jobs/{id}` answer as a progress update."""
    progress = status.get("progress") if isinstance(status.get("progress"), dict) else {}
    ncas = progress.get("ncas") if isinstance(progress.get("ncas"), dict) else {}
    state = status.get("state")
    stage = progress.get("stage") if isinstance(progress.get("stage"), int) else None
    if state in ("succeeded", "failed", "cancelled"):
        step = "receiving"
    elif status.get("queue") is not None:
        step = "queued"
    elif stage is not None or any(isinstance(n, dict) and n.get("state") in ("running", "done")
                                  for n in ncas.values()):
        step = "running"
    else:
        step = "starting"
    rows = progress.get("rows_to_clients")
    stages = progress.get("stages")
    return ProgressUpdate(step=step, elapsed_s=elapsed_s, job_id=status.get("job_id"), state=state, stage=stage,
                          stages=stages if isinstance(stages, int) else None,
                          rows=rows if isinstance(rows, int) else None, tuples_in=_sum(ncas, "tuples_in"),
                          bytes_in=_sum(ncas, "bytes_in"), bytes_received=bytes_received,
                          queue=status.get("queue"), progress=progress)


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"  # pragma: no cover - the loop always returns


def describe(u: ProgressUpdate) -> str:
    """One line for a person: what the job does now, and the counts so far."""
    job = f"job {u.job_id}: " if u.job_id else ""
    if u.step == "compiling":
        return "compiling the request ..."
    if u.step == "queued":
        return f"{job}waiting for cores ..."
    if u.step == "starting":
        return f"{job}building and starting its NCAs (the first time, building can take seconds) ..."
    counts = []
    if u.rows is not None:
        counts.append(f"{u.rows:,} rows sent")
    if u.tuples_in is not None:
        read = f"{u.tuples_in:,} tuples in"
        counts.append(read + (f" ({human_bytes(u.bytes_in)})" if u.bytes_in else ""))
    if u.bytes_received:
        counts.append(f"{human_bytes(u.bytes_received)} received")
    tail = (": " + ", ".join(counts)) if counts else ""
    if u.step == "running":
        where = f"stage {u.stage + 1}/{u.stages}" if u.stage is not None and u.stages else "running"
        return f"{job}{where}{tail}"
    if u.step == "receiving":
        return f"{job}{u.state or 'ended'}, receiving the last bytes{tail}"
    return f"{job}done{tail}"


class RichProgress:
    """A Rich progress display (spinner, what happens now, elapsed time) on standard error, or on
    `console`. `transient`: erase it when done. Usable as the `progress` argument of `collect`,
    `collect_many`, `run` and `to_pandas`; `progress=True` makes one."""

    def __init__(self, console: Any = None, *, transient: bool = True) -> None:
        self.console = console
        self.transient = transient
        self._progress: Any = None
        self._task: Any = None

    def __call__(self, update: ProgressUpdate) -> None:
        if self._progress is None:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            console = self.console if self.console is not None else Console(stderr=True)
            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                      console=console, transient=self.transient)
            self._progress.start()
            self._task = self._progress.add_task(describe(update), total=None)
        else:
            self._progress.update(self._task, description=describe(update))
        if update.step == "done":
            self.close()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


class Reporter:
    """What the client's run calls at each step: makes the updates and hands them to the display
    or callback. `None`/False: does nothing."""

    def __init__(self, progress: bool | ProgressCallback | None) -> None:
        if progress is True:
            progress = RichProgress()
        elif progress is False:
            progress = None
        if progress is not None and not callable(progress):
            raise BuilderError(f"progress must be True, False, None or a callable taking a ProgressUpdate, "
                            f"not {progress!r}")
        self.callback: ProgressCallback | None = progress
        self.started = time.monotonic()

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def step(self, step: str, *, job_id: str | None = None, bytes_received: int = 0) -> None:
        if self.callback is not None:
            self.callback(ProgressUpdate(step=step, elapsed_s=self._elapsed(), job_id=job_id,
                                         bytes_received=bytes_received))

    def status(self, status: dict, receivers: Iterable[Any] = ()) -> ProgressUpdate | None:
        if self.callback is None:
            return None
        update = update_from_status(status, elapsed_s=self._elapsed(), bytes_received=received(receivers))
        self.callback(update)
        return update

    def done(self, status: dict, receivers: Iterable[Any] = ()) -> None:
        if self.callback is None:
            return
        u = update_from_status(status, elapsed_s=self._elapsed(), bytes_received=received(receivers))
        self.callback(replace(u, step="done"))

    def close(self) -> None:
        close = getattr(self.callback, "close", None)
        if callable(close):
            close()


def received(receivers: Iterable[Any]) -> int:
    return sum(int(getattr(r, "bytes_so_far", getattr(r, "bytes_received", 0)) or 0) for r in receivers)
