"""Tenants, tokens and the send and read policies (docs/security.md), against a real server: who
sees and acts on which jobs (every endpoint and page, two tenants and an admin, no token and a
wrong one), where jobs may send (403 naming the operation and the rule, no NCA started), what
they may read, requests a foreign web page could make (refused), and the token commands."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from jumpgate.client import Jumpgate
from jumpgate.local_server import LocalServer, free_port

from .helpers import read_op

pytestmark = pytest.mark.e2e

SCHEMA = [{"name": "a", "type": "int64"}, {"name": "s", "type": "string"}]
EXE = str(Path(sys.executable).with_name("jumpgate"))


def tokens_cmd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, "tokens", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tenant-data")
    for tenant in ("acme", "globex"):
        (root / tenant).mkdir()
        (root / tenant / "t.jsonl").write_text("".join(f'{{"a": {i}, "s": "{tenant}{i}"}}\n' for i in range(100)))
    (root / "shared.jsonl").write_text('{"a": 1, "s": "x"}\n')
    (root / "acme" / "sneak.jsonl").symlink_to(root / "globex" / "t.jsonl")  # inside the root, outside acme/
    return root


@pytest.fixture(scope="module")
def tenants(root, tmp_path_factory):
    """A server with tokens: acme (may send to 127.0.0.1 ports 1024-65535, reads under acme/),
    globex (default send rule), and an admin of tenant ops."""
    work = tmp_path_factory.mktemp("tenants")
    file = work / "tokens.yaml"
    file.write_text("tenants:\n"
                    "  acme: {send: {networks: [127.0.0.1/32], ports: ['1024-65535']}, read_prefix: acme/}\n"
                    "  globex: {read_prefix: globex}\n")
    made = {name: tokens_cmd("add", "--file", str(file), "--tenant", name, *(["--role", "admin"] if name == "ops"
                                                                             else [])).stdout.strip()
            for name in ("acme", "globex", "ops")}
    assert all(t.startswith("jg_") for t in made.values()), made
    srv = LocalServer(root, work / "cache", work / "server.log", extra_args=["--tokens", str(file)])
    yield srv, made, file
    srv.stop()


def request(path: str, host: str = "127.0.0.1", port: int = 0, expr: str = "s") -> dict:
    return {"name": "tenant-job", "operations": [
        read_op("r", path, SCHEMA),
        {"kind": "project", "name": "p", "input": "r", "columns": [{"name": "v", "expr": expr}]},
        {"kind": "send", "name": "out", "input": "p", "transport": "tcp", "host": host, "port": port}]}


def http(srv: LocalServer, token: str | None) -> httpx.Client:
    """A client with the token as a bearer header and as the pages' cookie (as a browser that
    signed in with it has)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    cookies = {"jumpgate_token": token} if token else {}
    return httpx.Client(base_url=srv.url, headers=headers, cookies=cookies, timeout=60)


def test_each_tenant_sees_and_acts_on_its_own_jobs_and_an_admin_on_all(tenants):
    srv, tok, _ = tenants
    with Jumpgate(srv.url, token=tok["acme"]) as acme, Jumpgate(srv.url, token=tok["globex"]) as globex:
        rows = acme.run(request("acme/t.jsonl"), timeout=120)["out"]
        assert sorted(rows.column("v").to_pylist()) == sorted(f"acme{i}" for i in range(100))
        a_job = acme.last_job.job_id
        g_pending = globex.submit(request("globex/t.jsonl", port=9)).job_id  # compiled, not run
    for who, sees in (("acme", {a_job}), ("globex", {g_pending}), ("ops", {a_job, g_pending})):
        with http(srv, tok[who]) as c:
            listed = {j["job_id"] for j in c.get("/v1/jobs").json()}
            assert listed == sees, (who, listed)
            for job in (a_job, g_pending):
                code = c.get(f"/v1/jobs/{job}").status_code
                assert code == (200 if job in sees else 404), (who, job, code)
                page = c.get(f"/ui/jobs/{job}")
                assert page.status_code == (200 if job in sees else 404), (who, job, page.status_code)
            jobs_page = c.get("/ui/jobs").text
            assert all((j in jobs_page) == (j in sees) for j in (a_job, g_pending)), who
    with http(srv, tok["acme"]) as c:  # acme cannot run or cancel globex's job: it does not exist for acme
        assert c.post(f"/v1/jobs/{g_pending}/execute").status_code == 404
        assert c.delete(f"/v1/jobs/{g_pending}").status_code == 404
    with http(srv, tok["ops"]) as c:  # the admin can
        assert c.delete(f"/v1/jobs/{g_pending}").json()["state"] == "cancelled"


@pytest.mark.parametrize("token", [None, "jg_000000000000_" + "0" * 64, "not a token"])
def test_no_token_or_an_unknown_one_is_401_everywhere_and_pages_ask_to_sign_in(tenants, token):
    srv, _, _ = tenants
    with http(srv, token) as c:
        for method, path in (("GET", "/v1/jobs"), ("GET", "/v1/jobs/abc"), ("POST", "/v1/jobs/abc/execute"),
                             ("DELETE", "/v1/jobs/abc"), ("GET", "/v1/ncas"), ("GET", "/v1/nodes")):
            r = c.request(method, path)
            assert r.status_code == 401, (method, path, r.status_code, r.text)
            assert "token" in r.json()["error"]["message"]
        r = c.post("/v1/jobs", json=request("acme/t.jsonl"))
        assert r.status_code == 401
        page = c.get("/ui/jobs", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == "/ui/login"
        assert c.get("/v1/health").status_code == 200  # liveness stays open for probes


def test_signing_in_sets_a_strict_http_only_cookie_and_escapes_what_requests_contain(tenants):
    srv, tok, _ = tenants
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        bad = c.post("/ui/login", data={"token": "nope"})
        assert bad.status_code == 401 and "not known" in bad.text
        ok = c.post("/ui/login", data={"token": tok["acme"]}, follow_redirects=False)
        assert ok.status_code == 303
        cookie = ok.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        with Jumpgate(srv.url, token=tok["acme"]) as acme:
            evil = request("acme/t.jsonl", port=9000)
            evil["name"] = "<script>alert(1)</script>"
            job = acme.submit(evil).job_id
        page = c.get("/ui/jobs").text  # the cookie from the sign-in
        assert job in page and "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
        assert c.get("/ui/logout", follow_redirects=False).status_code == 303


def test_sends_the_policy_refuses_are_403_naming_the_rule_and_start_nothing(tenants):
    srv, tok, _ = tenants
    line_service = socket.create_server(("127.0.0.9", 0))  # a line-based service on another loopback address
    cases = {
        "the REST port": (request("acme/t.jsonl", port=srv.port), "own REST port", "operations[2].port"),
        "a port outside the rule": (request("acme/t.jsonl", port=80), "may not go to port 80", "operations[2].port"),
        "another tenant's address": (request("acme/t.jsonl", host="127.0.0.3", port=9000), "may not go to 127.0.0.3",
                                     "operations[2].host"),
        "line injection": (request("acme/t.jsonl", host="127.0.0.9", port=line_service.getsockname()[1],
                                   expr="'\r\nSET pwned 1\r\nQUIT\r\n'"), "may not go to 127.0.0.9",
                           "operations[2].host"),
        "a name resolving elsewhere": (request("acme/t.jsonl", host="example.invalid", port=9000), "cannot resolve",
                                       "operations[2].host"),
    }
    try:
        with http(srv, tok["acme"]) as c:
            for what, (body, message, path) in cases.items():
                r = c.post("/v1/jobs", json=body)
                assert r.status_code == 403, (what, r.status_code, r.text)
                err = r.json()["error"]
                assert message in err["message"] and err["path"] == path, (what, err)
                assert any(rule in err["message"] for rule in ("tenant 'acme'", "resolve", "own REST port")), err
            line_service.settimeout(0.2)
            with pytest.raises(TimeoutError):
                line_service.accept()  # nothing ever connected
        assert httpx.get(srv.url + "/v1/health").json()["ncas_running"] == 0
    finally:
        line_service.close()


def test_reads_stay_in_the_tenants_directory_symlinks_included(tenants):
    srv, tok, _ = tenants
    with http(srv, tok["acme"]) as c:
        for path in ("shared.jsonl", "globex/t.jsonl", "acme/sneak.jsonl"):
            r = c.post("/v1/jobs", json=request(path, port=9000))
            assert r.status_code == 403, (path, r.text)
            assert "reads only under 'acme/'" in r.json()["error"]["message"], r.text
        assert c.post("/v1/jobs", json=request("acme/t.jsonl", port=9000)).status_code == 201


def test_a_revoked_token_stops_working_at_once(tenants):
    srv, _, file = tenants
    token = tokens_cmd("add", "--file", str(file), "--tenant", "acme").stdout.strip()
    with http(srv, token) as c:
        assert c.get("/v1/jobs").status_code == 200
        listed = tokens_cmd("list", "--file", str(file)).stdout
        token_id = token.split("_")[1]
        assert token_id in listed and token.split("_")[2] not in file.read_text()  # only hashes are stored
        assert tokens_cmd("revoke", token_id, "--file", str(file)).returncode == 0
        assert c.get("/v1/jobs").status_code == 401
    assert tokens_cmd("revoke", token_id, "--file", str(file)).returncode == 1


def test_a_foreign_web_page_cannot_drive_a_local_server(server):
    """The finding: a POST with Content-Type text/plain and a foreign Origin was accepted (201, then
    execute 202) by a server without tokens on loopback."""
    body = request("t.jsonl", port=9000)
    import json
    with httpx.Client(base_url=server.url, timeout=60) as c:
        # what a page's form or fetch without a preflight sends: a browser marks it (Sec-Fetch-*)
        plain = c.post("/v1/jobs", content=json.dumps(body), headers={"Content-Type": "text/plain",
                                                                       "Sec-Fetch-Mode": "no-cors"})
        assert plain.status_code == 415, plain.text
        plain_foreign = c.post("/v1/jobs", content=json.dumps(body), headers={"Content-Type": "text/plain",
                                                                               "Origin": "http://evil.example"})
        assert plain_foreign.status_code == 403, plain_foreign.text
        foreign = c.post("/v1/jobs", json=body, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403 and "cross-origin" in foreign.text
        job = c.post("/v1/jobs", json=body).json()["job_id"]  # the server's own origin, or none: fine
        for method, path in (("POST", f"/v1/jobs/{job}/execute"), ("DELETE", f"/v1/jobs/{job}")):
            r = c.request(method, path, headers={"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
            assert r.status_code == 403, (method, r.text)
        assert "access-control-allow-origin" not in {k.lower() for k in c.get("/v1/jobs").headers}
        assert c.delete(f"/v1/jobs/{job}").json()["state"] == "cancelled"


def test_serve_refuses_a_public_address_without_tokens_unless_insecure(root, tmp_path):
    argv = [EXE, "serve", "--data-root", str(root), "--host", "0.0.0.0", "--port", str(free_port())]
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--tokens" in refused.stderr and "Traceback" not in refused.stderr
    env = {**os.environ}
    srv = LocalServer(root, tmp_path / "cache", tmp_path / "log", extra_args=["--host", "0.0.0.0", "--insecure"],
                      env=env)
    try:
        assert "without tokens (--insecure)" in (tmp_path / "log").read_text()
    finally:
        srv.stop()
