"""The API's description and its pages: `/openapi.json`, Swagger UI at `/docs`, ReDoc at `/redoc`.

The pages load their JavaScript and CSS from this server, never from a CDN, so they work where the
server has no internet (FastAPI's "Self-hosting JavaScript and CSS for docs"). The files come from
the `fastapi-offline` package, a dependency installed from PyPI like any other (pyproject.toml):
it ships Swagger UI's and ReDoc's distribution files and nothing we run; we serve them ourselves.

`POST /v1/jobs` reads its body raw (the 16 MiB limit is enforced while it streams in, and the
request's own validation words every error), so FastAPI knows no body model for it. Its request
body is documented here instead, from the request's pydantic models (dataflow/models.py), whose
definitions join the description's components.
"""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from ..dataflow.models import DataflowRequest

ASSETS = "/docs-assets"  # where the pages' JavaScript and CSS are served
REQUEST_SCHEMA = "DataflowRequest"
# What `openapi_extra` gives POST /v1/jobs: the body it reads itself.
REQUEST_BODY: dict[str, Any] = {"requestBody": {
    "required": True, "description": "A dataflow request (contract §1).",
    "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{REQUEST_SCHEMA}"}}}}}
_FASTAPI_422 = ("HTTPValidationError", "ValidationError")


def assets_dir() -> Path:
    """Swagger UI's and ReDoc's files, as the installed `fastapi-offline` package holds them."""
    return Path(str(files("fastapi_offline") / "static"))


def install_docs(app: FastAPI) -> None:
    """Serve the pages and the assets, and describe the request body (create the app with
    `docs_url=None, redoc_url=None`: FastAPI's own pages load from a CDN)."""
    app.mount(ASSETS, StaticFiles(directory=assets_dir()), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} API",
                                   swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{root}{ASSETS}/favicon.png")

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} API",
                              redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js",
                              redoc_favicon_url=f"{root}{ASSETS}/favicon.png", with_google_fonts=False)

    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            _complete(generate())
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]


def _complete(schema: dict[str, Any]) -> None:
    """Add the request's definitions; drop FastAPI's 422 "Validation Error", which it documents for
    every route with a parameter but this server never answers with that body (its 422s are
    documented where they happen, with the error body of every other status)."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    request = DataflowRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in {**request.pop("$defs", {}), REQUEST_SCHEMA: request}.items():
        if components.get(name, definition) != definition:
            raise RuntimeError(f"two different schemas are named {name!r} in the API's description")
        components[name] = definition
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            answers = operation.get("responses", {})
            if "HTTPValidationError" in str(answers.get("422", "")):
                del answers["422"]
    for name in _FASTAPI_422:
        components.pop(name, None)
