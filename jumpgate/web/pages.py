"""Server-rendered pages for people (design: jumpgate/web, Jinja2): the jobs, and for one job its
staged networked pipeline, why each operation went where it did, and where the time went.

The pages read the same job objects the REST API serves, live or recorded by an earlier server
(runtime/history.py); they add no state of their own.
"""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool

from ..contract.errors import Unauthorized, UnknownJob
from ..runtime.jobdb import StoredJob
from ..runtime.service import JumpgateService
from ..tenancy.tokens import Principal

COOKIE = "jumpgate_token"
# The jobs page lists the newest this many (the job database may hold many thousands).
PAGE_JOBS = 500

_env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                   autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


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
    """The pages. With tokens (docs/security.md), a person signs in with one; it is kept in an
    HttpOnly, SameSite=Strict cookie (no script reads it, no other site's request carries it), and
    the pages show that tenant's jobs only (every tenant's to an admin)."""
    r = APIRouter(include_in_schema=False)

    def viewer(request: Request) -> Principal | None:
        try:
            return service.access.principal(request.cookies.get(COOKIE))
        except Unauthorized:
            return None

    def page(name: str, who: Principal, **values: object) -> HTMLResponse:
        html = _env.get_template(name).render(viewer=who, signed_in=service.access.enabled, **values)
        return HTMLResponse(html)

    def to_login() -> RedirectResponse:
        return RedirectResponse("/ui/login", status_code=303)

    @r.get("/", response_class=HTMLResponse)
    @r.get("/ui/jobs", response_class=HTMLResponse)
    async def jobs(request: Request):
        who = viewer(request)
        if who is None:
            return to_login()
        listed = await run_in_threadpool(service.jobs, who)  # reads the job database
        items = [{"id": j.id, "name": j.name, "state": j.state.value, "tenant": j.tenant, "ncas": j.ncas,
                  "stages": j.stages, "created": _when(j.created)}
                 for j in reversed(listed[-PAGE_JOBS:])]
        return page("jobs.html", who, jobs=items, more=max(0, len(listed) - PAGE_JOBS),
                    ncas=service.registry.describe(), nodes=service.nodes())

    @r.get("/ui/jobs/{job_id}", response_class=HTMLResponse)
    async def job(request: Request, job_id: str):
        who = viewer(request)
        if who is None:
            return to_login()
        try:
            j = service.view(job_id, who)  # live, or recorded (an earlier server's)
        except UnknownJob as e:
            return HTMLResponse(_env.get_template("login.html").render(viewer=who, message=e.message),
                                status_code=404)
        answer = j.pipeline_json()
        status = j.status_json()
        rows, end = _bars(status["timeline"])
        return page("job.html", who, job=status, pipeline=answer, bars=rows, end_ms=end,
                    recorded=(j.server_pid, _when(j.server_started)) if isinstance(j, StoredJob) else None,
                    queue=service.queue.position(j.id))

    @r.get("/ui/login", response_class=HTMLResponse)
    async def login_form():
        return HTMLResponse(_env.get_template("login.html").render(viewer=None, message=""))

    @r.post("/ui/login", response_class=HTMLResponse)
    async def login(request: Request):
        form = parse_qs((await request.body()).decode(errors="replace"))
        token = (form.get("token") or [""])[0].strip()
        try:
            service.access.principal(token)
        except Unauthorized as e:
            return HTMLResponse(_env.get_template("login.html").render(viewer=None, message=e.message),
                                status_code=401)
        answer = RedirectResponse("/ui/jobs", status_code=303)
        answer.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https",
                          path="/")
        return answer

    @r.get("/ui/logout")
    async def logout():
        answer = to_login()
        answer.delete_cookie(COOKIE, path="/")
        return answer

    return r
