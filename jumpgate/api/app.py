"""The REST API of contract §4, on FastAPI.

Handlers are thin: they parse the body, call `JumpgateService`, and shape the answer. Every error
becomes `{"error": {"message", "path"?, ...}}` with a fitting status; nothing a client sends can
raise past these handlers (a bug answers 500 with a message, and the service keeps running).
"""
from __future__ import annotations

import json
import logging
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from ..contract.errors import JumpgateError, PayloadTooLarge, RequestError
from ..runtime.jobs import Job, until_done
from ..runtime.service import JumpgateService
from ..tenancy.tokens import Principal, bearer
from ..web.pages import router as pages_router
from .answers import (
    CompileAnswer,
    Health,
    JobLine,
    JobStateAnswer,
    JobStatus,
    NcaImplementation,
    Node,
    errors,
)
from .docs import REQUEST_BODY, install_docs
from .guards import refuse_cross_site

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024 * 1024


def _error(status: int, message: str, **context: object) -> JSONResponse:
    body = {"message": message, **{k: v for k, v in context.items() if v is not None}}
    headers = {"Retry-After": "1"} if status == 503 else None
    return JSONResponse({"error": body}, status_code=status, headers=headers)


async def _body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) as soon as it is known to exceed `limit`: by its declared
    length before a byte is read, or while it streams in, so an oversized body never sits in
    memory whole."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {int(declared):,} bytes is larger than the limit of {limit:,} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body is larger than the limit of {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _caller(request: Request) -> Principal:
    """Who is asking: from the bearer token (401 without a known one, when the server has tokens).
    The API takes the header only, never the pages' cookie: a cookie would ride along with requests
    other sites make the browser send."""
    service: JumpgateService = request.app.state.service
    return service.access.principal(bearer(request.headers.get("authorization")))


Who = Annotated[Principal, Depends(_caller)]


def compile_answer(job: Job) -> dict:
    return {"job_id": job.id, "state": job.state.value, **job.pipeline_json()}


class CrossSiteGuard:
    """Refuses what a browser may send across sites (api/guards.py) before any route sees it. A
    plain ASGI middleware: Starlette's BaseHTTPMiddleware (`@app.middleware`) would run every
    request through a task group and re-stream every answer, a cost on each of a job's REST calls."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = refuse_cross_site(Request(scope))
            if refused is not None:
                await _error(*refused)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(service: JumpgateService, metrics: bool = True) -> FastAPI:
    """`metrics`: serve GET /metrics here (False when `serve --metrics-port` serves it elsewhere)."""
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        service.shutdown()

    app = FastAPI(title="Jumpgate", version="1",
                  description="In-network processing as a service: submit a dataflow request, "
                              "receive NTF tuples from network-connected accelerators (contract v1).",
                  lifespan=lifespan, docs_url=None, redoc_url=None)  # install_docs serves them offline
    app.state.service = service
    install_docs(app)


    app.add_middleware(CrossSiteGuard)

    @app.exception_handler(JumpgateError)
    async def _jumpgate_error(request: Request, exc: JumpgateError):
        return _error(exc.status, exc.message, **exc.context)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        return _error(422, first.get("msg", "invalid request"),
                      path=".".join(str(p) for p in first.get("loc", ())) or None)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return _error(500, f"internal error: {type(exc).__name__}: {exc}")

    # The routes' `responses` document their answers (api/answers.py); the handlers still answer
    # with the runtime's dicts as they are.
    @app.post("/v1/jobs", status_code=201, summary="Compile a dataflow request (contract §1)",
              openapi_extra=REQUEST_BODY,
              responses={201: {"model": CompileAnswer, "description": "Compiled."},
                         **errors(400, 401, 403, 413, 415, 422, 500)})
    async def submit(request: Request, who: Who, execute: bool = False):
        """`execute=true` also runs the job (as `POST /v1/jobs/{id}/execute` would), for a client
        that already listens at every `send` address; the answer is the compile answer with the
        state the execute left (`running`)."""
        raw = await _body(request, MAX_BODY_BYTES)
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise RequestError(f"request body is not valid JSON: {e}") from None
        except RecursionError:  # [[[[... nested deeper than the JSON decoder's stack
            raise RequestError("request body is nested too deeply to be a request") from None
        source = request.client.host if request.client else None
        job = await run_in_threadpool(service.submit_and_execute if execute else service.submit, body, who, source)
        return JSONResponse(compile_answer(job), status_code=201)

    @app.post("/v1/jobs/{job_id}/execute", status_code=202, summary="Run a compiled job",
              responses={202: {"model": JobStateAnswer, "description": "Running (or waiting for cores)."},
                         **errors(401, 403, 404, 409, 500, s409="The job is not compiled (it ran, or was "
                                                                "cancelled).")})
    async def execute(job_id: str, who: Who):
        job = await run_in_threadpool(service.execute, job_id, who)
        return JSONResponse({"job_id": job.id, "state": job.state.value}, status_code=202)

    @app.get("/v1/jobs/{job_id}", summary="Job status, error and timeline",
             responses={200: {"model": JobStatus, "description": "The job."},
                        **errors(401, 404, 422, 500, s422="`wait` is not a number.")})
    async def status(job_id: str, who: Who, wait: float = 0.0):
        """`wait` (seconds, at most 30) holds the answer until the job ends or the time is up, so
        clients learn of the end at once instead of polling."""
        job = service.view(job_id, who)  # a live job, or a recorded one (never waited for: it cannot change)
        if isinstance(job, Job) and wait > 0 and not job.state.terminal:
            await until_done(job, min(wait, 30.0))
        answer = job.status_json()
        queued = service.queue.position(job.id)
        if queued is not None:  # running, but still waiting for cores (runtime/queue.py)
            answer["queue"] = queued
        pipeline = job.pipeline_json()
        answer["ncas"] = pipeline.get("ncas", [])
        answer["decisions"] = pipeline.get("decisions")
        # Plain JSON already: skipping FastAPI's encoder walk saves ~1 ms on every (long) poll.
        return JSONResponse(answer)

    @app.delete("/v1/jobs/{job_id}", summary="Cancel a job and clean up its NCAs",
                responses={200: {"model": JobStateAnswer, "description": "Cancelled, or the state it ended in."},
                           **errors(401, 403, 404, 500)})
    async def cancel(job_id: str, who: Who):
        job = await run_in_threadpool(service.cancel, job_id, who)
        return {"job_id": job.id, "state": job.state.value}

    @app.get("/v1/jobs", summary="Jobs known to this server",
             responses={200: {"model": list[JobLine], "description": "Oldest first."}, **errors(401, 500)})
    async def jobs(who: Who):
        """The caller's tenant's jobs (every tenant's for an admin), those of earlier servers too,
        oldest first."""
        listed = await run_in_threadpool(service.jobs, who)  # reads the job database
        return JSONResponse([j.to_json() for j in listed])

    @app.get("/v1/ncas", summary="Registered NCA implementations and what each can do",
             dependencies=[Depends(_caller)],
             responses={200: {"model": list[NcaImplementation], "description": "Every plugin."},
                        **errors(401, 500)})
    async def ncas():
        return service.registry.describe()

    @app.get("/v1/nodes", summary="The nodes NCAs run on: state, cores in use, NCAs running",
             dependencies=[Depends(_caller)],
             responses={200: {"model": list[Node], "description": "Every node."}, **errors(401, 500)})
    async def nodes():
        return service.nodes()

    @app.get("/v1/health", summary="Liveness and resources",
             responses={200: {"model": Health, "description": "Alive."}, **errors(500)})
    async def health():
        return service.health()

    if metrics:
        # No token, as /v1/health: Prometheus scrapes it (docs/operations.md says why, and how to
        # keep it private).
        @app.get("/metrics", summary="Prometheus metrics (docs/operations.md)")
        async def prometheus(request: Request):
            body, content_type = await run_in_threadpool(service.metrics.render, request.headers.get("accept"))
            return Response(body, media_type=content_type)

    app.include_router(pages_router(service))
    return app
