"""Shared scans as real processes (docs/shared-scans.md): one read of a JSON Lines file serves the
scan queries of several requests, each with its own schema, filter and projection, each to its own
output port. Every member's streams are byte for byte what its own scan sends alone; a member that
fails is cut off alone, its streams broken, while the others finish.
"""
from __future__ import annotations

import json
import socket
import struct
import time
from pathlib import Path

import pytest

from jumpgate.compiler.compile import compile_plan
from jumpgate.dataflow.request import parse_request
from jumpgate.nca.interface import InstanceContext
from jumpgate.ncas.software.build import build_nca, build_shared_nca
from jumpgate.ncas.software.codegen.messages import message_params
from jumpgate.ncas.software.codegen.shared import SharedMember, generate_shared_scan, member_symbol
from jumpgate.ncas.software.scan_json import JsonScanNca

from .fixtures.runtime_harness import NcaProcess, Receiver, parse_stream

THREADS = 2
ROWS = 3000
SCHEMA = [{"name": "i", "type": "int64"}, {"name": "s", "type": "string"},
          {"name": "d", "type": "decimal(9,2)"}, {"name": "l", "type": "int64"}]


def request(name: str, schema: list[dict], *ops: dict) -> dict:
    last = ops[-1]["name"] if ops else "r"
    return {"name": name, "operations": [
        {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": schema}, *ops,
        {"kind": "send", "name": "out", "input": last, "transport": "tcp", "host": "127.0.0.1", "port": 9}]}


MEMBERS = {
    # every column, every third row, a computed string
    "thirds": request("thirds", SCHEMA,
                      {"kind": "filter", "name": "f", "input": "r", "condition": "i % 3 = 0"},
                      {"kind": "project", "name": "p", "input": "f",
                       "columns": [{"name": "s2", "expr": "upper(s)"}, {"name": "i2", "expr": "i * 2"},
                                   {"name": "d", "expr": "d"}]}),
    # another schema: two of the columns in another order, another filter
    "dear": request("dear", [SCHEMA[2], SCHEMA[0]],
                    {"kind": "filter", "name": "f", "input": "r", "condition": "d > 10.5"}),
    # a cast that fails on the rows whose l does not fit 32 bits
    "narrow": request("narrow", [SCHEMA[3]],
                      {"kind": "project", "name": "p", "input": "r",
                       "columns": [{"name": "l32", "expr": "CAST(l AS int32)"}]}),
    # aggregations fused into the scan: their workers' tables merge at a barrier in every worker
    "groups": request("groups", SCHEMA,
                      {"kind": "aggregate", "name": "g", "input": "r", "group_by": [{"name": "k", "expr": "i % 7"}],
                       "aggregates": [{"name": "n", "fn": "count_star"}, {"name": "sd", "fn": "sum", "expr": "d"}]}),
    "total": request("total", [SCHEMA[1], SCHEMA[0]],
                     {"kind": "filter", "name": "f", "input": "r", "condition": "i > 100"},
                     {"kind": "aggregate", "name": "g", "input": "f", "group_by": [],
                      "aggregates": [{"name": "n", "fn": "count", "expr": "s"}, {"name": "lo", "fn": "min", "expr": "s"}]}),
}


def rows(n: int, big_from: int | None) -> str:
    out = []
    for i in range(n):
        row = {"i": i, "s": f"row{i}" * (i % 4), "d": f"{i % 97}.{i % 100:02d}",
               "l": 2**40 + i if big_from is not None and i >= big_from else i}
        if i % 11 == 0:
            del row["s"]
        out.append(json.dumps(row))
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "nca-cache"


def scan_source(data: Path, cache: Path, req: dict) -> str:
    """The scan query the compiler generates for `req` alone (read, filter, project fused)."""
    pipeline = compile_plan(parse_request(req, data), [JsonScanNca()])
    [node] = pipeline.ncas
    spec = pipeline.build_spec(node, "job")
    inst = JsonScanNca().instantiate(spec, InstanceContext(None, str(data), str(cache)))
    return inst.generate_source()


def run(binary: Path, data: Path, ports: int, params: dict, settle: float = 30.0):
    """Execute the scan over t.jsonl with `ports` output ports: the events up to `done` (or the
    failure), and each port's streams as received, by stream id (a stream cut off has no end)."""
    receivers = [Receiver() for _ in range(ports)]
    nca = NcaProcess(binary)
    try:
        nca.configure([data / "t.jsonl"], [(p, r.port, 0, THREADS) for p, r in enumerate(receivers)], THREADS, params)
        nca.send("execute 0")
        events = []
        while not events or events[-1] is not None and events[-1]["event"] not in ("done", "error"):
            events.append(nca.event(timeout=60))
        nca.close()
        return events, [received(r, settle) for r in receivers]
    finally:
        nca.kill()
        for r in receivers:
            r.close()


def received(r: Receiver, settle: float) -> list[bytes]:
    """The streams `r` read to their end (waiting up to `settle` s for all THREADS of them)."""
    deadline = time.monotonic() + settle
    while len(r.data) < THREADS and time.monotonic() < deadline:
        time.sleep(0.01)
    with r._lock:
        return sorted(r.data, key=lambda d: d[4:8])


def _ends(data: bytes) -> bool:
    try:
        parse_stream(data)
        return True
    except (AssertionError, struct.error):
        return False


def alone(data: Path, cache: Path, source: str) -> list[bytes]:
    events, [streams] = run(build_nca(source, "scan_json", cache).path, data, 1, message_params(source))
    assert events[-1]["event"] == "done", events
    return streams


def shared(data: Path, cache: Path, sources: list[str], settle: float = 30.0):
    table = generate_shared_scan([SharedMember(s, 1) for s in sources])
    binary = build_shared_nca(sources, table, "scan_json", cache).path
    return run(binary, data, len(sources), message_params(table), settle)


def test_members_get_what_each_scan_sends_alone(tmp_path, cache):
    (tmp_path / "t.jsonl").write_text(rows(ROWS, None))
    sources = [scan_source(tmp_path, cache, MEMBERS[k]) for k in ("thirds", "dear", "narrow")]
    events, streams = shared(tmp_path, cache, sources)
    done = events[-1]
    assert done["event"] == "done", events
    members = [e for e in events if e["event"] == "member"]
    assert [m["member"] for m in members] == [0, 1, 2] and not any("error" in m for m in members)
    for k, source in enumerate(sources):
        assert streams[k] == alone(tmp_path, cache, source), f"member {k}"
        assert members[k]["tuples_out"] == sum(len(parse_stream(s).tuples) for s in streams[k])
    # one read for all three: the rows and bytes of the file once, the output of all three
    size = (tmp_path / "t.jsonl").stat().st_size
    assert done["stats"]["tuples_in"] == ROWS and done["stats"]["bytes_in"] == size
    assert done["stats"]["tuples_out"] == sum(m["tuples_out"] for m in members)
    assert members[0]["tuples_out"] == ROWS // 3 and members[2]["tuples_out"] == ROWS


def tuples(streams: list[bytes]) -> list[bytes]:
    return sorted(t for s in streams for t in parse_stream(s).tuples)


def test_fused_aggregations_share_a_read(tmp_path, cache):
    """Complete aggregations over two threads merge their workers' tables at a barrier: each
    member's merge runs in every worker, the cut-off one's too, so none waits for ever."""
    (tmp_path / "t.jsonl").write_text(rows(ROWS, big_from=ROWS // 3))
    sources = [scan_source(tmp_path, cache, MEMBERS[k]) for k in ("groups", "narrow", "total", "thirds")]
    events, streams = shared(tmp_path, cache, sources, settle=2.0)
    assert events[-1]["event"] == "done", events
    members = {e["member"]: e for e in events if e["event"] == "member"}
    assert "int32" in members[1]["error"] and not any("error" in members[k] for k in (0, 2, 3))
    for k in (0, 2, 3):
        assert tuples(streams[k]) == tuples(alone(tmp_path, cache, sources[k])), f"member {k}"
    assert members[0]["tuples_out"] == 7 and members[2]["tuples_out"] == 1


def test_a_failing_member_is_cut_off_alone(tmp_path, cache):
    (tmp_path / "t.jsonl").write_text(rows(ROWS, big_from=ROWS // 2))
    sources = [scan_source(tmp_path, cache, MEMBERS[k]) for k in ("thirds", "narrow", "dear")]
    events, streams = shared(tmp_path, cache, sources, settle=2.0)
    assert events[-1]["event"] == "done", events
    members = {e["member"]: e for e in events if e["event"] == "member"}
    assert "error" not in members[0] and "error" not in members[2]
    assert "int32" in members[1]["error"] and "l32" in members[1]["error"], members[1]
    assert streams[0] == alone(tmp_path, cache, sources[0])
    assert streams[2] == alone(tmp_path, cache, sources[2])
    # its receiver never sees a complete stream: no end marker on the streams it was cut off from
    assert len(streams[1]) < THREADS or not all(_ends(s) for s in streams[1])


def test_a_member_whose_consumer_is_gone_is_cut_off_alone(tmp_path, cache):
    (tmp_path / "t.jsonl").write_text(rows(ROWS, None))
    sources = [scan_source(tmp_path, cache, MEMBERS[k]) for k in ("dear", "dear")]  # one query, two jobs
    table = generate_shared_scan([SharedMember(s, 1) for s in sources])
    binary = build_shared_nca(sources, table, "scan_json", cache).path
    live = Receiver()
    gone = socket.socket()  # a port held but not listened on: its consumer went away
    gone.bind(("127.0.0.1", 0))
    gone_port = gone.getsockname()[1]
    nca = NcaProcess(binary)
    try:
        nca.configure([tmp_path / "t.jsonl"], [(0, live.port, 0, THREADS), (1, gone_port, 0, THREADS)], THREADS,
                      {**message_params(table), "connect_timeout_ms": 200})
        nca.send("execute 0")
        events = [nca.event(timeout=60) for _ in range(3)]
        assert [e["event"] for e in events] == ["member", "member", "done"], events
        assert "error" not in events[0] and "cannot connect" in events[1]["error"]
        assert received(live, 30.0) == alone(tmp_path, cache, sources[0])
        assert nca.close() == 0
    finally:
        nca.kill()
        live.close()
        gone.close()


def test_a_shared_scan_lists_its_members_and_numbers_their_messages(tmp_path, cache):
    (tmp_path / "t.jsonl").write_text(rows(10, None))
    sources = [scan_source(tmp_path, cache, MEMBERS[k]) for k in ("narrow", "narrow")]
    table = generate_shared_scan([SharedMember(sources[0], 1, runtime_filters=1), SharedMember(sources[1], 2)])
    # the same query twice: one object, listed twice with its own ports, messages and filter slots
    symbol = member_symbol(sources[0])
    assert table.count(f"extern const jg_query {symbol};") == 1
    assert f"{{ &{symbol}, 1u, {len(sources[0].messages)}u, 1u }}" in table
    assert table.messages == sources[0].messages + sources[1].messages
    assert "CAST" not in table and "l32" not in table  # no request text in the source
