"""The newcomer's CLI (`jumpgate run`, `jobs`, `job`, `ncas`, `--version`), as a user types it:
the venv's `jumpgate` executable against a real server with tokens. Every user error must end in
one clear line and the right exit code, never a traceback."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from jumpgate.local_server import LocalServer, free_port

EXE = str(Path(sys.executable).with_name("jumpgate"))
SCHEMA = [{"name": "id", "type": "int64"}, {"name": "name", "type": "string"},
          {"name": "price", "type": "decimal(10,2)"}]
ROWS = [{"id": i, "name": f"item{i}", "price": f"{i * 1.5:.2f}"} for i in range(1, 31)]
WANT = [{"id": r["id"], "name": r["name"], "price": Decimal(r["price"])} for r in ROWS if r["id"] > 5]  # 25 rows


def request(*sends: str, cond: str = "id > 5") -> dict:
    ops = [{"kind": "read", "name": "r", "path": "items.jsonl", "format": "json", "schema": SCHEMA},
           {"kind": "filter", "name": "f", "input": "r", "condition": cond}]
    for s in sends or ("out",):
        ops.append({"kind": "send", "name": s, "input": "f", "transport": "tcp", "host": "127.0.0.1", "port": 0})
    return {"name": "cli", "operations": ops}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A server with tokens over a small data root; yields (server, the environment with a token)."""
    work = tmp_path_factory.mktemp("cli")
    root = work / "data"
    root.mkdir()
    (root / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    tokens = work / "tokens.yaml"
    made = subprocess.run([EXE, "tokens", "add", "--file", str(tokens), "--tenant", "acme"],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    cache = Path(os.environ.get("JUMPGATE_TEST_CACHE") or work / "cache")
    srv = LocalServer(root, cache, work / "server.log", extra_args=["--tokens", str(tokens)])
    environ = {**os.environ, "JUMPGATE_TOKEN": made.stdout.strip(), "COLUMNS": "200"}
    environ.pop("JUMPGATE_URL", None)
    yield srv, environ
    srv.stop()


def jg(env_, *args: str, token: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
    srv, environ = env_
    e = dict(environ)
    if not token:
        e.pop("JUMPGATE_TOKEN")
    argv = [EXE, *args]
    if args and args[0] in ("run", "jobs", "job") and "--url" not in args:
        argv += ["--url", srv.url]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=e, cwd=cwd)
    assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    return p


def write_request(tmp_path: Path, req: dict, name: str = "req.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(req, indent=2))
    return path


def one_line_error(p: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_run_prints_the_rows_as_a_table(env, tmp_path):
    p = jg(env, "run", str(write_request(tmp_path, request())), "--limit", "0")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""  # stderr is no terminal: no progress display
    for r in WANT:
        assert f"item{r['id']} " in p.stdout and str(r["price"]) in p.stdout
    assert "item5 " not in p.stdout and "25 row(s)" in p.stdout


def test_run_table_limit_says_how_many_there_were(env, tmp_path):
    p = jg(env, "run", str(write_request(tmp_path, request())), "--limit", "3")
    assert p.returncode == 0, p.stderr
    assert "3 of 25 rows shown" in p.stdout
    assert sum(f"item{i} " in p.stdout for i in range(6, 31)) == 3


def test_run_format_json(env, tmp_path):
    p = jg(env, "run", str(write_request(tmp_path, request())), "--format", "json")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert sorted(got, key=lambda r: r["id"]) == [{**r, "price": str(r["price"])} for r in WANT]


def test_run_format_csv(env, tmp_path):
    p = jg(env, "run", str(write_request(tmp_path, request())), "--format", "csv")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert lines[0] == '"id","name","price"' and len(lines) == 26


@pytest.mark.parametrize("ext", ["parquet", "csv", "jsonl"])
def test_run_out_writes_the_rows(env, tmp_path, ext):
    out = tmp_path / f"x.{ext}"
    p = jg(env, "run", str(write_request(tmp_path, request())), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "" and f"wrote 25 row(s) of send 'out' to {out}" in p.stderr
    if ext == "parquet":
        got = pq.read_table(out).to_pylist()
    elif ext == "csv":
        t = pcsv.read_csv(out)
        got = [{**r, "price": Decimal(f"{r['price']:.2f}")} for r in t.to_pylist()]
    else:
        got = [json.loads(line) for line in out.read_text().splitlines()]
        got = [{**r, "price": Decimal(r["price"])} for r in got]
    assert sorted(got, key=lambda r: r["id"]) == WANT
    assert [f.name for f in tmp_path.iterdir() if f.name.startswith(".")] == []  # no temporary left


def test_run_several_sends(env, tmp_path):
    req = write_request(tmp_path, request("left", "right"))
    p = jg(env, "run", str(req), "--limit", "0")
    assert p.returncode == 0, p.stderr
    assert "send left" in p.stdout and "send right" in p.stdout and p.stdout.count("25 row(s)") == 2
    out = tmp_path / "both.parquet"
    p = jg(env, "run", str(req), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert not out.exists()
    for s in ("left", "right"):
        f = tmp_path / f"both-{s}.parquet"
        assert f"to {f}" in p.stderr
        assert sorted(pq.read_table(f).to_pylist(), key=lambda r: r["id"]) == WANT


# ------------------------------------------------------------------ user errors

def test_missing_request_file(env, tmp_path):
    one_line_error(jg(env, "run", str(tmp_path / "nope.json")), 2, "nope.json", "no such file")


def test_unreadable_request_file(env, tmp_path):
    one_line_error(jg(env, "run", str(tmp_path)), 2, "is a directory")
    if os.geteuid() != 0:  # root reads anything
        f = write_request(tmp_path, request())
        f.chmod(0)
        one_line_error(jg(env, "run", str(f)), 2, "cannot read")


def test_invalid_json_says_line_and_column(env, tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{\n  "operations": [\n    {"kind": "read",, }\n  ]\n}\n')
    one_line_error(jg(env, "run", str(f)), 2, "bad.json", "invalid JSON at line 3, column 21")


def test_not_a_request(env, tmp_path):
    f = write_request(tmp_path, {"ops": []})
    one_line_error(jg(env, "run", str(f)), 2, '"operations"')
    f = write_request(tmp_path, {"operations": request()["operations"][:2]})
    one_line_error(jg(env, "run", str(f)), 2, "no send operation")


def test_unsupported_out_extension(env, tmp_path):
    one_line_error(jg(env, "run", str(write_request(tmp_path, request())), "--out", str(tmp_path / "x.xlsx")),
                   2, "unsupported extension '.xlsx'", ".parquet")


def test_out_directory_does_not_exist(env, tmp_path):
    one_line_error(jg(env, "run", str(write_request(tmp_path, request())), "--out", str(tmp_path / "no/x.csv")),
                   2, "does not exist", str(tmp_path / "no"))


def test_server_cannot_be_reached(env, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    for args in (["run", str(write_request(tmp_path, request()))], ["jobs"], ["job", "j1"]):
        one_line_error(jg(env, *args, "--url", url), 1, f"cannot reach a Jumpgate server at {url}", "jumpgate serve")


def test_server_refuses_the_request(env, tmp_path):
    p = jg(env, "run", str(write_request(tmp_path, request(cond="no_such_column > 1"))))
    one_line_error(p, 1, "the server refused the request", "no_such_column", "operations[1].condition")


def test_job_fails(env, tmp_path):
    p = jg(env, "run", str(write_request(tmp_path, request(cond="id / (id - id) > 1 AND CAST(name AS int32) > 0"))))
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and "failed" in p.stderr


def test_no_token_or_a_wrong_one(env, tmp_path):
    req = str(write_request(tmp_path, request()))
    for args in (["run", req], ["jobs"], ["run", req, "--token", "jg_wrong"]):
        one_line_error(jg(env, *args, token=False), 2, "--token", "JUMPGATE_TOKEN")


def test_usage_errors_exit_2(env):
    p = jg(env, "run")
    assert p.returncode == 2 and "REQUEST.json" in p.stderr
    p = jg(env, "run", "x.json", "--format", "xml")
    assert p.returncode == 2 and "invalid choice" in p.stderr


# ------------------------------------------------------------------ jobs, job, ncas, version, help

def test_jobs_and_job(env, tmp_path):
    p = jg(env, "run", str(write_request(tmp_path, request())), "--format", "json")
    assert p.returncode == 0, p.stderr
    listed = jg(env, "jobs", "--json")
    assert listed.returncode == 0, listed.stderr
    jobs = json.loads(listed.stdout)
    assert jobs and {"job_id", "name", "state", "tenant"} <= set(jobs[-1])
    last = jobs[-1]
    assert last["state"] == "succeeded" and last["tenant"] == "acme" and last["name"] == "cli"

    table = jg(env, "jobs")
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[1]
    for col in ("id", "name", "tenant", "state", "created", "finished"):
        assert col in header
    assert last["job_id"] in table.stdout and "succeeded" in table.stdout and f"{len(jobs)} job(s)" in table.stdout

    one = jg(env, "job", last["job_id"])
    assert one.returncode == 0, one.stderr
    out = one.stdout
    assert f"job {last['job_id']} (cli), tenant acme: succeeded" in out
    for needle in ("pipeline", "software.scan_json", "local", "compile", "allocate", "configure",
                   "tuples in", "wall ms"):
        assert needle in out, (needle, out)
    as_json = json.loads(jg(env, "job", last["job_id"], "--json").stdout)
    assert as_json["job_id"] == last["job_id"] and as_json["timeline"]["ncas"]

    one_line_error(jg(env, "job", "no-such-job"), 1, "404")


def test_job_shows_a_failed_jobs_error(env, tmp_path):
    jg(env, "run", str(write_request(tmp_path, request(cond="CAST(name AS int32) > 0"))))
    jobs = json.loads(jg(env, "jobs", "--json").stdout)
    p = jg(env, "job", jobs[-1]["job_id"])
    assert p.returncode == 0
    if jobs[-1]["state"] == "failed":
        assert "error:" in p.stdout


def test_ncas_table_and_json(env):
    p = jg(env, "ncas")
    assert p.returncode == 0, p.stderr
    assert "software.scan_json" in p.stdout and "operations" in p.stdout
    described = json.loads(jg(env, "ncas", "--json").stdout)
    assert any(n["name"] == "software.scan_json" for n in described)
    srv, _ = env
    remote = json.loads(jg(env, "ncas", "--json", "--url", srv.url).stdout)
    assert {n["name"] for n in remote} <= {n["name"] for n in described}


def test_version(env):
    from importlib.metadata import version

    p = jg(env, "--version")
    assert p.returncode == 0 and p.stdout.strip() == f"jumpgate {version('jumpgate')}"


@pytest.mark.parametrize("command, defaults", [
    ("run", ["http://127.0.0.1:8470", "JUMPGATE_TOKEN", "default: table", "default: 20", "default: print"]),
    ("jobs", ["http://127.0.0.1:8470", "JUMPGATE_TOKEN"]),
    ("job", ["http://127.0.0.1:8470", "JUMPGATE_TOKEN"]),
    ("ncas", ["default: this installation"]),
    ("serve", ["default: 8470", "default: loopback", "default 300", "default text"]),
    ("tokens", ["default user"]),
    ("example", ["default: http://127.0.0.1:8470", "default: 1000000"]),
    ("datagen", ["default 1", "default: json"]),
])
def test_every_help_shows_its_defaults(env, command, defaults):
    p = jg(env, command, "--help")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())  # undo the wrapping
    for d in defaults:
        assert d in text, (command, d, text)


def test_every_option_with_a_default_says_it():
    """In-process, over the parser itself: each option of each subcommand with a default worth
    saying has "default" in its help text as printed."""
    import argparse

    from jumpgate.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        formatter = parser.formatter_class(prog=parser.prog)
        for action in parser._actions:
            if not action.option_strings or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            if action.default in (None, False, []) and not action.required:
                continue
            if action.required:
                continue
            assert action.help, (name, action.option_strings)
            assert "default" in formatter._get_help_string(action).lower(), (name, action.option_strings)


def test_progress_on_a_terminal_only(env, tmp_path):
    """With stderr a terminal, a progress display says it compiles, then runs, with the rows the
    server's live progress counts; stdout keeps the rows."""
    import pty

    srv, environ = env
    leader, follower = pty.openpty()
    try:
        p = subprocess.run([EXE, "run", str(write_request(tmp_path, request(cond="id > 6"))), "--url", srv.url,
                            "--format", "json"], stdout=subprocess.PIPE, stderr=follower, env=environ, timeout=300)
        os.close(follower)
        follower = -1
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert p.returncode == 0
    assert len(json.loads(p.stdout)) == 24
    text = seen.decode("utf-8", "replace")
    assert "compiling the request" in text and "Traceback" not in text
    assert "24 rows sent" in text, text  # the last look before the display goes: the server's count


def test_serve_says_where_it_listens_once_it_is_ready(tmp_path):
    """A newcomer sees that the server is up and where its pages are (before: nothing at the
    default log level)."""
    (tmp_path / "data").mkdir()
    for fmt in ("text", "json"):
        log = tmp_path / f"serve-{fmt}.log"
        srv = LocalServer(tmp_path / "data", tmp_path / "cache", log, extra_args=["--log-format", fmt])
        try:
            want = f"listening on {srv.url}, UI at {srv.url}/ui/jobs, API docs at {srv.url}/docs"
            deadline = time.monotonic() + 5
            while want not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)
            text = log.read_text()
            assert want in text, text
            if fmt == "json":
                assert all(json.loads(line) for line in text.splitlines() if line.strip())
        finally:
            srv.stop()
