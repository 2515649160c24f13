"""Server-rendered pages for people (design: jumpgate/web, Jinja2): the jobs, and for one job its
staged networked pipeline, why each operation went where it did, and where the time went.

The pages read the same job objects the REST API serves; they add no state of their own.
"""
from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from ..runtime.service import JumpgateService

_env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                   autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)


def _bars(timeline: dict) -> tuple[list[dict], float]:
    """Gantt rows: one per (NCA, step) with start and length in ms."""
    rows = []
    for nca, steps in sorted(timeline.get("ncas", {}).items()):
        for step in ("compile", "allocate", "configure"):
            span = steps.get(step)
            if span and "end_ms" in span:
                rows.append({"nca": nca, "step": step, "start": span["start_ms"], "length": span["duration_ms"],
                             "note": "cached" if span.get("cached") else ""})
        for st in steps.get("stages", []):
            busy = st.get("busy_ms", 0.0)
            note = (f"busy {busy:.1f} ms, waiting in {st.get('wait_input_ms', 0):.1f} / out "
                    f"{st.get('wait_output_ms', 0):.1f} ms; {st.get('tuples_in', 0):,} tuples in, "
                    f"{st.get('tuples_out', 0):,} out")
            rows.append({"nca": nca, "step": f"stage {st['stage']}", "start": st["start_ms"],
                         "length": st.get("duration_ms", 0.0), "note": note})
    end = max([r["start"] + r["length"] for r in rows] + [1.0])
    return rows, end


def router(service: JumpgateService) -> APIRouter:
    r = APIRouter(include_in_schema=False)

    @r.get("/", response_class=HTMLResponse)
    @r.get("/ui/jobs", response_class=HTMLResponse)
    async def jobs(request: Request):
        items = [{"id": j.id, "name": j.name, "state": j.state.value, "ncas": len(j.pipeline.ncas),
                  "stages": len(j.pipeline.stages)} for j in reversed(service.store.all())]
        return _env.get_template("jobs.html").render(jobs=items, ncas=service.registry.describe(),
                                                     nodes=service.nodes())

    @r.get("/ui/jobs/{job_id}", response_class=HTMLResponse)
    async def job(job_id: str):
        j = service.status(job_id)
        answer = j.pipeline.to_json()
        status = j.status_json()
        rows, end = _bars(status["timeline"])
        return _env.get_template("job.html").render(job=status, pipeline=answer, bars=rows, end_ms=end)

    return r
