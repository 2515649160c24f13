"""Server-rendered pages for people (design: jumpgate/web, Jinja2): the jobs, and for one job its
staged networked pipeline drawn as a graph (graph.py), what each operation asks and why it went
where it did, and where the time went; docs/web-ui.md.

The pages read the same job objects the REST API serves, live or recorded by an earlier server
(runtime/history.py); they add no state of their own. A page of a job that is not over refreshes
a part of itself from `/ui/jobs/{id}/live`, which answers when the job ends or after a second: the
REST API takes only a bearer token, never the pages' cookie, so the page cannot ask it.
"""
from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from ..contract.errors import Unauthorized, UnknownJob
from ..runtime.jobdb import JobSummary, StoredJob
from ..runtime.jobs import Job, JobState, until_done
from ..runtime.service import JumpgateService
from ..tenancy.tokens import Principal
from . import jobview

COOKIE = "jumpgate_token"
PAGE_JOBS = 50  # jobs per page of the jobs list, unless ?per= says otherwise
MAX_PER_PAGE = 500
LIVE_WAIT_S = 1.0  # how long a live refresh waits for the job's end before answering anyway
MAX_LIVE_WAIT_S = 10.0

_env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                   autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)
_env.filters["size"] = jobview.size
_env.filters["num"] = lambda n: "" if n is None else f"{n:,}"


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


def _number(value: str | None, default: int, low: int, high: int) -> int:
    """A page's number parameter; anything that is not a number is the default (a page never
    answers 422 to a hand-edited address)."""
    try:
        return min(high, max(low, int(value))) if value is not None else default
    except ValueError:
        return default


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

    def is_dry_run(s: JobSummary, live: dict[str, Job], recorded: set[str]) -> bool:
        if s.state is not JobState.CANCELLED:
            return False
        job = live.get(s.id)
        return jobview.never_ran(s.state.value, job.timeline.to_json()) if job is not None else s.id in recorded

    def listing(who: Principal, number: int, per: int, dry: bool) -> dict:
        """One page of the jobs list, newest first; runs in a thread (it reads the job database)."""
        newest = list(reversed(service.jobs(who)))
        live = {j.id: j for j in service.store.all()}
        recorded = service.history.never_ran(who)
        dry_runs = {s.id for s in newest if is_dry_run(s, live, recorded)}
        shown = newest if dry else [s for s in newest if s.id not in dry_runs]
        pages = max(1, -(-len(shown) // per))
        number = min(number, pages)
        now = time.time()
        items = []
        for s in shown[(number - 1) * per: number * per]:
            job: Job | StoredJob | None = live.get(s.id)
            if job is None:
                try:
                    job = service.view(s.id, who)
                except UnknownJob:  # pruned meanwhile
                    job = None
            rows = None
            if job is not None:
                status = job.status_json()
                rows = jobview.rows_sent(job.pipeline_json(), status.get("timeline") or {}, status.get("progress"))
            items.append({"id": s.id, "name": s.name, "state": s.state.value, "tenant": s.tenant, "ncas": s.ncas,
                          "stages": s.stages, "created": _when(s.created), "rows": rows,
                          "duration": jobview.job_duration(s.created, s.finished, s.state.value, now),
                          "dry_run": s.id in dry_runs})

        def link(**change: object) -> str:
            query = {"page": number, "per": per, "dry": 1 if dry else None, **change}
            if query["per"] == PAGE_JOBS:
                query["per"] = None
            if query["page"] == 1:
                query["page"] = None
            return "/ui/jobs" + ("?" + urlencode({k: v for k, v in query.items() if v is not None})
                                 if any(v is not None for v in query.values()) else "")
        return {"jobs": items, "page": number, "pages": pages, "total": len(shown), "dry": dry,
                "dry_runs": len(dry_runs), "newer": link(page=number - 1) if number > 1 else None,
                "older": link(page=number + 1) if number < pages else None,
                "toggle_dry": link(page=1, dry=None if dry else 1)}

    @r.get("/", response_class=HTMLResponse)
    @r.get("/ui/jobs", response_class=HTMLResponse)
    async def jobs(request: Request):
        """?page=N (newest first), ?per=N jobs a page, ?dry=1 to list dry runs too."""
        who = viewer(request)
        if who is None:
            return to_login()
        q = request.query_params
        listed = await run_in_threadpool(listing, who, _number(q.get("page"), 1, 1, 1 << 30),
                                         _number(q.get("per"), PAGE_JOBS, 1, MAX_PER_PAGE),
                                         q.get("dry", "") in ("1", "true", "yes", "on"))
        return page("jobs.html", who, **listed, ncas=service.registry.describe(), nodes=service.nodes(),
                    node_sources=service.node_sources())

    def live_values(j: Job | StoredJob, status: dict) -> dict:
        """What the live part of a job's page shows (templates/live.html), refreshed while the
        job is not over."""
        pipeline = j.pipeline_json()
        progress = status.get("progress")
        return {"terminal": j.state.terminal, "queue": service.queue.position(j.id),
                "progress": jobview.progress_rows(progress, pipeline),
                "progress_ms": progress.get("updated_ms") if isinstance(progress, dict) else None,
                "rows": jobview.rows_sent(pipeline, status.get("timeline") or {}, progress),
                "submitted": _when(j.created),
                "duration": jobview.job_duration(j.created, j.finished, j.state.value, time.time())}

    def not_found(who: Principal | None, e: UnknownJob) -> HTMLResponse:
        return HTMLResponse(_env.get_template("login.html").render(viewer=who, message=e.message), status_code=404)

    def job_page(who: Principal, j: Job | StoredJob) -> str:
        """A job's page; runs in a thread (a pipeline of thousands of operations takes a while)."""
        answer = j.pipeline_json()
        status = j.status_json()
        timeline = status.get("timeline") or {}
        rows, end = _bars(timeline)
        held = isinstance(j, Job)  # else recorded: its JSON only, not the request or the pipeline object
        plan, compiled = (j.plan, j.pipeline) if held else (None, None)
        svg = jobview.pipeline_svg(answer, jobview.threads_of(compiled, timeline),
                                   jobview.edge_columns(answer, compiled), jobview.sends_of(plan))
        return _env.get_template("job.html").render(
            viewer=who, signed_in=service.access.enabled, job=status, pipeline=answer, bars=rows, end_ms=end,
            graph=Markup(svg), edges=jobview.edge_rows(answer), operations=jobview.operations(answer, plan),
            held=held, recorded=(j.server_pid, _when(j.server_started)) if isinstance(j, StoredJob) else None,
            **live_values(j, status))

    @r.get("/ui/jobs/{job_id}", response_class=HTMLResponse)
    async def job(request: Request, job_id: str):
        who = viewer(request)
        if who is None:
            return to_login()
        try:
            j = service.view(job_id, who)  # live, or recorded (an earlier server's)
        except UnknownJob as e:
            return not_found(who, e)
        return HTMLResponse(await run_in_threadpool(job_page, who, j))

    @r.get("/ui/jobs/{job_id}/live", response_class=HTMLResponse)
    async def live(request: Request, job_id: str):
        """The live part of a job's page, once the job ends or after ?wait= seconds (at most 10)."""
        who = viewer(request)
        if who is None:
            return HTMLResponse("", status_code=401)
        try:
            j = service.view(job_id, who)
        except UnknownJob as e:
            return not_found(who, e)
        try:
            wait = min(MAX_LIVE_WAIT_S, max(0.0, float(request.query_params.get("wait", LIVE_WAIT_S))))
        except ValueError:
            wait = LIVE_WAIT_S
        if isinstance(j, Job) and wait > 0 and not j.state.terminal:
            await until_done(j, wait)
        status = j.status_json()
        html = _env.get_template("live.html").render(job=status, **live_values(j, status))
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

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
