"""Bad input never crashes the service: malformed requests get a 4xx naming the JSON path, bad
data fails the job with file and line, and nothing is left running afterwards."""
from __future__ import annotations

import os
import time

import pytest

from jumpgate.client import JobFailed, Jumpgate

from .helpers import read_op

pytestmark = pytest.mark.e2e

SEND = {"kind": "send", "name": "o", "input": "r", "transport": "tcp", "host": "127.0.0.1", "port": 9}


def with_read(*ops, **read_changes) -> dict:
    return {"operations": [{**read_op(), **read_changes}, *ops]}


def filt(cond, name="f", inp="r"):
    return {"kind": "filter", "name": name, "input": inp, "condition": cond}


def send_of(inp):
    return {**SEND, "input": inp}


# (case, body, expected status, expected error path or None when the body is not JSON at all)
MALFORMED = [
    ("not_json", b"{nope", 400, None),
    ("not_an_object", [1, 2], 400, ""),
    ("operations_missing", {"name": "x"}, 400, "operations"),
    ("operations_empty", {"operations": []}, 400, "operations"),
    ("operation_not_object", {"operations": [read_op(), 7, SEND]}, 400, "operations[1]"),
    ("unknown_kind", with_read({"kind": "teleport", "name": "z", "input": "r"}, SEND), 400, "operations[1].kind"),
    ("bad_name", with_read({**SEND, "name": "9lives"}), 400, "operations[1].name"),
    ("duplicate_name", with_read({**SEND, "name": "r"}), 400, "operations[1].name"),
    ("unknown_input", with_read(send_of("nothere")), 400, "operations[1].input"),
    ("unknown_field", with_read({**SEND, "colour": "red"}), 400, "operations[1].colour"),
    ("bad_expression", with_read(filt("a >> > 3"), send_of("f")), 400, "operations[1].condition"),
    ("unknown_column", with_read(filt("nosuch > 3"), send_of("f")), 400, "operations[1].condition"),
    ("non_boolean_filter", with_read(filt("a + 1"), send_of("f")), 400, "operations[1].condition"),
    ("type_mismatch", with_read(filt("s > 3"), send_of("f")), 400, "operations[1].condition"),
    ("unknown_function", with_read(filt("sqrt(x) > 1"), send_of("f")), 400, "operations[1].condition"),
    ("sql_injection", with_read(filt("a > 1; DROP TABLE t"), send_of("f")), 400, "operations[1].condition"),
    ("path_traversal", with_read(SEND, path="../../etc/passwd"), 400, "operations[0].path"),
    ("absolute_path", with_read(SEND, path="/etc/passwd"), 400, "operations[0].path"),
    ("missing_file", with_read(SEND, path="nope.jsonl"), 400, "operations[0].path"),
    ("bad_format", with_read(SEND, format="xml"), 400, "operations[0].format"),
    ("bad_type", with_read(SEND, schema=[{"name": "a", "type": "int128"}]), 400, "operations[0].schema[0].type"),
    ("duplicate_column", with_read(SEND, schema=[{"name": "a", "type": "int32"}, {"name": "a", "type": "int64"}]),
     400, "operations[0].schema[1].name"),
    ("cycle", {"operations": [read_op(), filt("a > 1", "f", "g"), filt("a > 1", "g", "f"), send_of("g")]}, 400,
     None),
    ("no_send", {"operations": [read_op()]}, 400, None),
    ("bad_port", with_read({**SEND, "port": 70000}), 400, "operations[1].port"),
    ("shuffle_index_out_of_range", with_read({"kind": "shuffle", "name": "sh", "input": "r", "keys": ["a"],
                                              "partitions": 2}, send_of("sh[2]"), send_of("sh[0]") | {"name": "o2"},
                                             send_of("sh[1]") | {"name": "o3"}), 400, "operations[2].input"),
    ("unsupported_transport", with_read({**SEND, "transport": "sctp"}), 422, "operations[0]"),  # udp: docs/udp-transport.md
    ("bad_transport_name", with_read({**SEND, "transport": "carrier pigeon"}), 400, "operations[1].transport"),
    ("like_non_literal", with_read(filt("s LIKE s"), send_of("f")), 400, "operations[1].condition"),
]


@pytest.mark.parametrize("case,body,status,path", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_request_is_4xx_with_path(server, case, body, status, path):
    content = body if isinstance(body, bytes) else None
    r = server.http.post("/v1/jobs", content=content, json=None if content else body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["message"], err
    if path:
        assert err.get("path") == path, err
    assert server.proc.poll() is None


def _chain_of(n: int) -> dict:
    ops = [read_op()] + [filt("a > 0", f"f{i}", f"f{i - 1}" if i else "r") for i in range(n)]
    return {"operations": ops + [send_of(ops[-1]["name"])]}


# (case, body, status, path, limit): beyond the limits of dataflow/limits.py, checked before the
# work they protect; the answer names the JSON path and the limit
BEYOND_LIMITS = [
    ("one_megabyte_literal", with_read(filt("s = '" + "x" * (1 << 20) + "'"), send_of("f")), 413,
     "operations[1].condition", "max_expression_chars"),
    ("hundred_kilobyte_literal", with_read(filt("s = '" + "x" * 100_000 + "'"), send_of("f")), 413,
     "operations[1].condition", "max_literal_bytes"),
    ("hundred_thousand_operations", _chain_of(99_998), 413, "operations", "max_operations"),
    ("five_thousand_parentheses", with_read(filt("(" * 5000 + "a > 0" + ")" * 5000), send_of("f")), 400,
     "operations[1].condition", "max_expression_depth"),
]


@pytest.mark.parametrize("case,body,status,path,limit", BEYOND_LIMITS, ids=[b[0] for b in BEYOND_LIMITS])
def test_request_beyond_a_limit_is_a_quick_4xx_naming_path_and_limit(server, case, body, status, path, limit):
    started = time.monotonic()
    r = server.http.post("/v1/jobs", json=body)
    elapsed = time.monotonic() - started
    assert r.status_code == status, r.text[:500]
    err = r.json()["error"]
    assert err["path"] == path and err["limit"] == limit and limit in err["message"], err
    assert len(r.content) < 2000, "the answer never echoes the request"
    assert elapsed < 10, f"{case} took {elapsed:.1f} s"
    assert server.proc.poll() is None


def test_unknown_job_is_404_and_wrong_state_is_409(server):
    assert server.http.get("/v1/jobs/nope").status_code == 404
    assert server.http.post("/v1/jobs/nope/execute").status_code == 404
    r = server.http.post("/v1/jobs", json=with_read({**SEND, "port": 9}))
    job = r.json()["job_id"]
    assert server.http.delete(f"/v1/jobs/{job}").json()["state"] == "cancelled"
    assert server.http.post(f"/v1/jobs/{job}/execute").status_code == 409


def wait_no_children(server, timeout=10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = server.children()
        if not left:
            return []
        time.sleep(0.1)
    return server.children()


SCHEMA = [{"name": "a", "type": "int32"}, {"name": "s", "type": "string"}, {"name": "dt", "type": "date"},
          {"name": "d", "type": "decimal(5,2)"}]

BAD_DATA = [
    ("bad_json", '{"a": 1, "s": "x"\n', "JSON"),
    ("wrong_type", '{"a": "one"}\n', "int32"),
    ("int32_overflow", '{"a": 3000000000}\n', "int32"),
    ("not_an_object", '[1, 2, 3]\n', "object"),
    ("bad_date", '{"dt": "2021-02-30"}\n', "date"),
    ("decimal_too_wide", '{"d": 12345.6}\n', "decimal"),
]


@pytest.mark.parametrize("case,bad_line,words", BAD_DATA, ids=[b[0] for b in BAD_DATA])
def test_bad_data_fails_job_with_file_and_line(server, data_root, case, bad_line, words):
    name = f"bad_{case}.jsonl"
    good = '{"a": 1, "s": "ok", "dt": "2020-01-01", "d": 1.5}\n'
    # the bad line sits after enough good data that the NCA has already streamed tuples out
    (data_root / name).write_text(good * 20000 + bad_line + good * 10)
    with Jumpgate(server.url) as jg:
        node = jg.read(name, format="json", schema=SCHEMA).filter("a > 0")
        with pytest.raises(JobFailed) as e:
            node.collect(timeout=120)
    err = e.value.error
    assert err["file"].endswith(name), err
    assert err["record"] == 20001, err
    assert words.lower() in err["message"].lower(), err
    assert err["nca"] == "nca0" and err["stage"] == 0
    assert wait_no_children(server) == []
    os.remove(data_root / name)


def test_hostile_text_never_reaches_generated_source(server, data_root, tmp_path):
    """Hostile names and literals run as data; nothing is executed (no marker file appears)."""
    marker = tmp_path / "pwned"
    evil = f'\'); system("touch {marker}"); //'
    name = "hostile.jsonl"
    (data_root / name).write_text('{"' + evil.replace('"', '\\"') + '": "x", "b": "*/ #include <x>"}\n')
    schema = [{"name": evil, "type": "string"}, {"name": "\"; */ #include", "type": "string"},
              {"name": "b", "type": "string"}]
    col = '"' + evil.replace('"', '""') + '"'
    with Jumpgate(server.url) as jg:
        t = jg.read(name, format="json", schema=schema).filter(f"{col} = 'x' OR b = '\"); system(\"id\"); /*'")
        out = t.project(v=col, w="'\"; */ #include <stdio.h>\\n'").collect(timeout=120)
    assert out.to_pylist() == [{"v": "x", "w": "\"; */ #include <stdio.h>\\n"}]
    assert not marker.exists()
    os.remove(data_root / name)


def test_client_that_stops_reading_fails_the_job_after_the_stall_timeout(data_root, tmp_path):
    """A client that accepts the stream and then never reads: once the socket buffers are full the
    scan NCA can neither send nor compute, and after the server's stall timeout the job fails,
    naming the stage and the NCA, and leaves nothing running (instead of running forever)."""
    import socket

    from jumpgate.local_server import LocalServer

    name = "stall.jsonl"
    (data_root / name).write_text(('{"a": 1, "s": "' + "x" * 2000 + '"}\n') * 20000)  # 40 MB out
    srv = LocalServer(data_root, tmp_path / "cache", tmp_path / "server.log", extra_args=["--stall-timeout", "3"])
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        body = {"operations": [
            {"kind": "read", "name": "r", "path": name, "format": "json",
             "schema": [{"name": "a", "type": "int32"}, {"name": "s", "type": "string"}]},
            {**SEND, "input": "r", "port": listener.getsockname()[1]}]}
        with Jumpgate(srv.url) as jg:
            job = jg.submit(body)
            job.execute()
            conn, _ = listener.accept()  # and never read from it
            status = job.status(wait=60)
            while status["state"] == "running":
                status = job.status(wait=60)
            conn.close()
        assert status["state"] == "failed", status
        err = status["error"]
        assert err["nca"] == "nca0" and err["stage"] == 0 and err["stalled"] == ["nca0"], err
        assert "made no progress for 3 s" in err["message"], err
        assert wait_no_children(srv) == []
    finally:
        listener.close()
        srv.stop()
        os.remove(data_root / name)
