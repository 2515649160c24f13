"""The API's description (/openapi.json) and its pages (/docs, /redoc), in process: every
endpoint documents its answer and the errors it really answers, POST /v1/jobs its request body
(while still reading it raw), the pages work offline, and real answers fit their models."""
from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel, TypeAdapter

from jumpgate.api import answers
from jumpgate.api.app import MAX_BODY_BYTES, create_app
from jumpgate.runtime.service import JumpgateService, Settings

BASE = "http://127.0.0.1:8470"
SEND = {"kind": "send", "name": "o", "input": "r", "transport": "tcp", "host": "127.0.0.1", "port": 9}
REQUEST = {"operations": [{"kind": "read", "name": "r", "path": "t.jsonl", "format": "json",
                           "schema": [{"name": "a", "type": "int64"}]}, SEND]}

# What each endpoint answers: its success, and the errors it can really answer (api/app.py,
# contract/errors.py, api/guards.py).
ENDPOINTS = {
    ("post", "/v1/jobs"): ("201", "CompileAnswer", {"400", "401", "403", "413", "415", "422", "500"}),
    ("post", "/v1/jobs/{job_id}/execute"): ("202", "JobStateAnswer", {"401", "403", "404", "409", "500"}),
    ("get", "/v1/jobs/{job_id}"): ("200", "JobStatus", {"401", "404", "422", "500"}),
    ("delete", "/v1/jobs/{job_id}"): ("200", "JobStateAnswer", {"401", "403", "404", "500"}),
    ("get", "/v1/jobs"): ("200", "JobLine", {"401", "500"}),
    ("get", "/v1/ncas"): ("200", "NcaImplementation", {"401", "500"}),
    ("get", "/v1/nodes"): ("200", "Node", {"401", "500"}),
    ("get", "/v1/health"): ("200", "Health", {"500"}),
}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    (data / "t.jsonl").write_text('{"a": 1}\n')
    service = JumpgateService(Settings(data_root=data, cache_dir=tmp_path_factory.mktemp("cache")))
    yield create_app(service)
    service.shutdown()


def fetch(app, *calls: tuple[str, str, dict]) -> list[httpx.Response]:
    """Send the calls in order to the app in this process (no server, no network)."""
    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
            return [await client.request(method, url, **kw) for method, url, kw in calls]
    return asyncio.run(run())


@pytest.fixture(scope="module")
def spec(app) -> dict:
    (r,) = fetch(app, ("GET", "/openapi.json", {}))
    assert r.status_code == 200
    return r.json()


def _ref(schema: dict) -> str:
    """The component a response's schema names (itself, or the items of an array of it)."""
    return (schema.get("$ref") or schema.get("items", {}).get("$ref", "")).rsplit("/", 1)[-1]


@pytest.mark.parametrize("method, path", list(ENDPOINTS), ids=[f"{m} {p}" for m, p in ENDPOINTS])
def test_each_endpoint_documents_its_answer_and_its_real_error_statuses(spec, method, path):
    success, model, failures = ENDPOINTS[(method, path)]
    responses = spec["paths"][path][method]["responses"]
    assert set(responses) == {success, *failures}
    assert _ref(responses[success]["content"]["application/json"]["schema"]) == model
    for status in failures:
        assert _ref(responses[status]["content"]["application/json"]["schema"]) == "ErrorAnswer", status


def test_no_route_documents_fastapis_own_validation_error(spec):
    assert "HTTPValidationError" not in str(spec) and "ValidationError" not in spec["components"]["schemas"]


def test_the_request_body_is_documented_by_the_request_models(spec):
    body = spec["paths"]["/v1/jobs"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/DataflowRequest"}
    schemas = spec["components"]["schemas"]
    union = schemas["DataflowRequest"]["properties"]["operations"]["items"]
    assert union["discriminator"]["propertyName"] == "kind"
    assert set(union["discriminator"]["mapping"]) == {"read", "filter", "project", "join", "aggregate", "shuffle",
                                                      "send"}
    refs = set(re.findall(r'"\$ref": "#/components/schemas/(\w+)"', str(spec).replace("'", '"')))
    assert refs <= set(schemas), refs - set(schemas)  # every reference resolves


def test_the_body_is_still_read_raw_and_answered_in_todays_words(app):
    too_big, bad, typo = fetch(
        app,
        ("POST", "/v1/jobs", {"content": b"{" + b" " * MAX_BODY_BYTES + b"}"}),
        ("POST", "/v1/jobs", {"content": b"{nope"}),
        ("POST", "/v1/jobs", {"json": {"operations": [{**SEND, "colour": "red"}]}}),
    )
    assert too_big.status_code == 413 and f"{MAX_BODY_BYTES:,}" in too_big.json()["error"]["message"]
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("request body is not valid JSON")
    assert typo.status_code == 400 and typo.json()["error"] == {
        "message": "unknown field 'colour' in a send operation; allowed fields: kind, name, input, transport, host, "
                   "port, udp_version", "path": "operations[0].colour"}


def _fits(model, value) -> None:
    TypeAdapter(model).validate_python(value)


def test_real_answers_fit_their_models(app):
    (compiled,) = fetch(app, ("POST", "/v1/jobs", {"json": REQUEST}))
    assert compiled.status_code == 201, compiled.text
    job = compiled.json()["job_id"]
    status, listing, cancelled, again, unknown, ncas, nodes, health, bad_wait = fetch(
        app, ("GET", f"/v1/jobs/{job}", {}), ("GET", "/v1/jobs", {}), ("DELETE", f"/v1/jobs/{job}", {}),
        ("POST", f"/v1/jobs/{job}/execute", {}), ("GET", "/v1/jobs/nope", {}), ("GET", "/v1/ncas", {}),
        ("GET", "/v1/nodes", {}), ("GET", "/v1/health", {}), ("GET", f"/v1/jobs/{job}?wait=soon", {}))
    _fits(answers.CompileAnswer, compiled.json())
    _fits(answers.JobStatus, status.json())
    _fits(list[answers.JobLine], listing.json())
    _fits(answers.JobStateAnswer, cancelled.json())
    _fits(list[answers.NcaImplementation], ncas.json())
    _fits(list[answers.Node], nodes.json())
    _fits(answers.Health, health.json())
    for error, code in ((again, 409), (unknown, 404), (bad_wait, 422)):
        assert error.status_code == code, error.text
        _fits(answers.ErrorAnswer, error.json())


def test_answer_models_allow_additions():
    """Additions are fine (contract): a new field in an answer never breaks its description."""
    for model in vars(answers).values():
        if isinstance(model, type) and issubclass(model, BaseModel) and model.__module__ == answers.__name__:
            assert model.model_config.get("extra") == "allow", model


def test_the_docs_pages_load_everything_from_this_server(app):
    docs, redoc = fetch(app, ("GET", "/docs", {}), ("GET", "/redoc", {}))
    assets = []
    for page in (docs, redoc):
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert not re.search(r"https?://", page.text), "the pages must not load anything from elsewhere"
        assets += re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert {Path(a).name for a in assets} >= {"swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"}
    for asset, answer in zip(assets, fetch(app, *[("GET", a, {}) for a in assets])):
        assert asset.startswith("/") and answer.status_code == 200 and len(answer.content) > 1000, asset
    assert "SwaggerUIBundle" in fetch(app, ("GET", "/docs-assets/swagger-ui-bundle.js", {}))[0].text
