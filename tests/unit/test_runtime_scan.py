"""The JSON Lines scan NCA as a real process: protocol, contract §1 value reading, NTF bytes
(contract §2) and TCP framing (contract §3), data errors with file and line, threads, cancellation.

The query is tests/unit/fixtures/copy_query.c (hand-written to jg.h), built with build_nca.
"""
from __future__ import annotations

import json
import os
import random
import socket
import time

import pytest

from jumpgate.ncas.software.build import build_nca

from .fixtures.runtime_harness import (
    FIXTURES,
    NcaProcess,
    Receiver,
    decode_tuple,
    encode_tuple,
    run_scan,
)


@pytest.fixture(scope="module")
def scan(tmp_path_factory) -> os.PathLike:
    cache = tmp_path_factory.getbasetemp() / "nca-cache"
    return build_nca((FIXTURES / "copy_query.c").read_text(), "scan_json", cache).path


def write(path, text: str):
    path.write_bytes(text.encode())
    return path


def jl(*rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


NULLS = dict.fromkeys(["b", "i", "l", "f", "d", "s", "dt"])


def expect(**kw) -> dict:
    return {**NULLS, **kw}


def rows_of(streams) -> list[dict]:
    return [decode_tuple(t) for s in streams for t in s.tuples]


# ------------------------------------------------------------------ values and bytes

def test_every_type_exact_bytes(scan, tmp_path):
    text = (
        '{"b": true, "i": 1, "l": 1234567890123, "f": 1.5, "d": 12.345, "s": "hello", "dt": "2024-02-29"}\n'
        '{"b": null, "i": null, "l": null, "f": null, "d": null, "s": null, "dt": null}\n'
        '{}\n'
        '{"other": [1, {"x": 2}], "zzz": "q", "i": 7, "nested": {"i": 8}}\n'
        '{"b": false, "i": -2147483648, "l": -9223372036854775808, "f": -0.0, "d": "-0.005",'
        ' "s": "\\u00fc\\"\\\\\\n\\u00e9 \u2603", "dt": "1970-01-01"}\n'
        '{"i": 2147483647, "l": 9223372036854775807, "f": 1e300, "d": "99999999.99", "s": "", "dt": "1969-12-31"}\n'
        '{"f": 3, "d": 7, "dt": "2000-03-01", "i": 0}\n'
        '{"\\u0073": "escaped key", "d": 1e2}\n'
        '{"d": 0.125}\n{"d": -0.125}\n{"d": "1.005"}\n{"d": 99999999.994}\n{"d": 0.0000001}\n'
        '{"d": -12345678.9e0}\n{"d": "+5"}\n{"d": 5E-1}\n'
    )
    f = write(tmp_path / "all.jsonl", text)
    ev, streams, _ = run_scan(scan, [f])
    assert ev["event"] == "done" and ev["phase"] == 0
    [st] = streams
    assert st.stream_id == 0 and st.count == len(st.tuples) == 16
    want = [
        expect(b=True, i=1, l=1234567890123, f=1.5, d=1235, s="hello", dt=19782),
        expect(), expect(), expect(i=7),
        expect(b=False, i=-2**31, l=-2**63, f=-0.0, d=-1, s='ü"\\\né ☃', dt=0),
        expect(i=2**31 - 1, l=2**63 - 1, f=1e300, d=9999999999, s="", dt=-1),
        expect(f=3.0, d=700, dt=11017, i=0),
        expect(s="escaped key", d=10000),
        expect(d=13), expect(d=-13), expect(d=101), expect(d=9999999999), expect(d=0),
        expect(d=-1234567890), expect(d=500), expect(d=50),
    ]
    assert [decode_tuple(t) for t in st.tuples] == want
    # exact bytes: layout, zeroed padding and NULL fields, string placement
    assert st.tuples == [encode_tuple(w) for w in want]
    stats = ev["stats"]
    assert stats["tuples_in"] == 16 and stats["tuples_out"] == 16
    assert stats["bytes_in"] == len(text.encode())
    assert stats["bytes_out"] == len(st.raw)
    assert set(stats) == {"wall_ns", "wait_in_ns", "wait_out_ns", "tuples_in", "bytes_in", "tuples_out", "bytes_out",
                          "threads", "cpu_ns"}


def test_empty_file(scan, tmp_path):
    ev, [st], _ = run_scan(scan, [write(tmp_path / "e.jsonl", "")])
    assert ev["event"] == "done" and st.tuples == [] and st.count == 0
    assert st.raw == b"NTF1" + bytes(4) + bytes(12)


def test_no_trailing_newline_and_blank_lines(scan, tmp_path):
    f = write(tmp_path / "x.jsonl", '\n\n{"i": 1}\r\n   \n\t\n{"i": 2}\n\n{"i": 3}')
    ev, [st], _ = run_scan(scan, [f])
    assert [r["i"] for r in rows_of([st])] == [1, 2, 3]


def test_fan_out_sends_identical_bytes(scan, tmp_path):
    f = write(tmp_path / "x.jsonl", jl(*({"i": i, "s": "x" * i} for i in range(100))))
    ev, streams, _ = run_scan(scan, [f], fanout=2)
    assert len(streams) == 2 and streams[0].raw == streams[1].raw and len(streams[0].tuples) == 100


def random_rows(rng: random.Random, n: int) -> list[dict]:
    out = []
    for k in range(n):
        r = {"i": k}
        if rng.random() < 0.8:
            r["s"] = "".join(rng.choice("ab\"\\é☃{}[],: \t") for _ in range(rng.choice([0, 1, 5, 50, 3000])))
        if rng.random() < 0.5:
            r["l"] = rng.randint(-2**63, 2**63 - 1)
        if rng.random() < 0.5:
            r["f"] = rng.uniform(-1e6, 1e6)
        if rng.random() < 0.3:
            r["junk"] = {"a": [1, 2, {"s": "}"}], "b": None}
        out.append(r)
    return out


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_chunk_and_batch_boundaries(scan, tmp_path, threads):
    """Tiny chunks and stage-1 windows: partial lines carried over, documents larger than a
    window (simdjson CAPACITY, retried with a larger window), lines longer than a chunk."""
    rng = random.Random(threads)
    rows = random_rows(rng, 1500)
    files = [write(tmp_path / "a.jsonl", jl(*rows[:700])), write(tmp_path / "empty.jsonl", ""),
             write(tmp_path / "b.jsonl", jl(*rows[700:]).rstrip("\n"))]
    ev, streams, _ = run_scan(scan, files, threads=threads, first_stream=5,
                              params={"scan.chunk_bytes": 4096, "scan.batch_bytes": 1024})
    assert ev["event"] == "done", ev
    assert [s.stream_id for s in streams] == [5 + w for w in range(threads)]
    got = sorted(rows_of(streams), key=lambda r: r["i"])
    assert got == [expect(**{k: v for k, v in r.items() if k != "junk"}) for r in rows]
    if threads > 1:
        assert all(s.tuples for s in streams), "every worker should get a share"


def test_huge_line_and_tuple(scan, tmp_path):
    """A 3 MiB string: larger than the default stage-1 window and than the 1 MiB output buffer."""
    big = "x" * (3 << 20)
    f = write(tmp_path / "big.jsonl", jl({"i": 1}, {"i": 2, "s": big}, {"i": 3}))
    for params in ({}, {"scan.chunk_bytes": 65536}):
        ev, [st], _ = run_scan(scan, [f], params=params)
        assert [r["i"] for r in rows_of([st])] == [1, 2, 3]
        assert rows_of([st])[1]["s"] == big


def test_two_threads_split_one_file(scan, tmp_path):
    rows = [{"i": k, "s": f"row {k}"} for k in range(20000)]
    ev, streams, _ = run_scan(scan, [write(tmp_path / "x.jsonl", jl(*rows))], threads=2)
    assert [s.stream_id for s in streams] == [0, 1]
    assert all(s.count == len(s.tuples) > 0 for s in streams)
    assert sorted(r["i"] for r in rows_of(streams)) == list(range(20000))
    assert ev["stats"]["tuples_out"] == 20000


def test_keys_in_changing_order_long_and_escaped(scan, tmp_path):
    """The scan remembers each field position's key from the previous line: lines whose keys move,
    long unrequested keys (around the 32-byte compare), escaped keys, duplicates (the last wins)."""
    long31, long32, long40 = "k" * 31, "s" * 32, "i" * 40
    text = "".join(line + "\n" for line in [
        '{"i": 1, "s": "a", "d": 1.5}',
        '{"i": 2, "s": "b", "d": 2.5}',
        '{"s": "c", "i": 3, "d": 3.5}',
        '{"d": 4.5, "s": "d", "i": 4}',
        f'{{"{long31}": 0, "{long32}": "x", "{long40}": 7, "i": 5, "s": "e"}}',
        f'{{"{long31}": 0, "{long32}": "x", "{long40}": 7, "i": 6, "s": "f"}}',
        f'{{"{long31}": 0, "{long32}": "x", "{long40}": 7, "ii": 7, "s": "g"}}',
        '{"\\u0069": 8, "s": "h", "d\\u0074": "2000-01-01"}',
        '{"i": 9, "s": "i", "dt": "2000-01-02"}',
        '{"\\u0069": 10, "s": "j", "dt": "2000-01-03"}',
        '{"i": 11, "i": 12, "s\\"": "not s", "s": "k"}',
        '{"i\\"": 13, "s": "l"}',
        '{}',
        '{"i": 14}',
    ])
    ev, [st], _ = run_scan(scan, [write(tmp_path / "k.jsonl", text)])
    assert ev["event"] == "done", ev
    assert rows_of([st]) == [
        expect(i=1, s="a", d=150), expect(i=2, s="b", d=250), expect(i=3, s="c", d=350),
        expect(i=4, s="d", d=450), expect(i=5, s="e"), expect(i=6, s="f"), expect(s="g"),
        expect(i=8, s="h", dt=10957), expect(i=9, s="i", dt=10958), expect(i=10, s="j", dt=10959),
        expect(i=12, s="k"), expect(s="l"), expect(), expect(i=14),
    ]


@pytest.mark.parametrize("size", [4096 - 70, 4096 - 64, 4096 - 63, 4096 - 1, 4096, 4097, 8192 - 10, 8192])
@pytest.mark.parametrize("last", ['{"i": 77}', '{"i": 77}\n', '{"d": 7.75}'])
def test_file_ends_near_a_page_boundary(scan, tmp_path, size, last):
    """The input is mapped, and simdjson reads up to 64 bytes past what it parses: at the end of a
    file they come from spaces written after it, whatever the file's size modulo the page size."""
    lines, n = [], 0
    while n + len(line := f'{{"i": {len(lines)}, "s": "xxxx"}}\n') + len(last) <= size:
        lines.append(line)
        n += len(line)
    text = "".join(lines) + " " * (size - n - len(last)) + last
    assert len(text) == size
    for params in (None, {"scan.chunk_bytes": 1000}):
        ev, [st], _ = run_scan(scan, [write(tmp_path / "p.jsonl", text)], params=params)
        assert ev["event"] == "done", ev
        rows = rows_of([st])
        assert len(rows) == len(lines) + 1
        assert rows[-1] == (expect(i=77) if '"i"' in last else expect(d=775))
    bad = text[:-1] if last.endswith("}") else text[:-2]  # the last object left open
    ev, _, _ = run_scan(scan, [write(tmp_path / "p.jsonl", bad)])
    assert ev["event"] == "error" and "invalid JSON" in ev["message"] and ev["record"] == len(lines) + 1


def test_values_inline_and_general_paths(scan, tmp_path):
    """Common values are converted inline from the raw token, the rest by the general path: both
    must give what contract §1 says."""
    text = "".join(line + "\n" for line in [
        '{"d": 12.3, "s": "plain", "dt": "1998-12-01", "l": -5}',
        '{"d": 12.345, "s": "tab\\there", "dt": "1998\\u002d12-01", "l": 0}',
        '{"d": -0.00, "s": "", "dt": "2000-02-29"}',
        '{"d": 99999999.99, "s": "%s"}' % ("y" * 100),
        '{"d": 1E1, "s": "\\u00e9"}',
        '{"d": "12.34 "}',
    ])
    ev, _, _ = run_scan(scan, [write(tmp_path / "v.jsonl", text)])
    assert ev["event"] == "error" and ev["record"] == 6 and "not a decimal number" in ev["message"]
    ev, [st], _ = run_scan(scan, [write(tmp_path / "v.jsonl", text.rsplit("\n", 2)[0] + "\n")])
    assert rows_of([st]) == [
        expect(d=1230, s="plain", dt=10561, l=-5), expect(d=1235, s="tab\there", dt=10561, l=0),
        expect(d=0, s="", dt=11016), expect(d=9999999999, s="y" * 100), expect(d=1000, s="é"),
    ]


# ------------------------------------------------------------------ data errors

BAD = [
    ('{"i": 1}\n{"i": 1,}\n', 2, "invalid JSON"),
    ('{"i": 1}\n\n{"i": "x"}\n', 3, 'column "i": expected int32, got string'),
    ('{"i": 2147483648}\n', 1, 'column "i": number out of range for int32'),
    ('{"l": 9223372036854775808}\n', 1, 'column "l": number out of range for int64'),
    ('{"l": 1.5}\n', 1, 'column "l": expected int64, got non-integer number'),
    ('{"i": 1}\n{"dt": "2023-02-29"}\n', 2, 'column "dt": expected date'),
    ('{"dt": "2023-1-01"}\n', 1, 'column "dt": expected date'),
    ('{"dt": 20230101}\n', 1, 'column "dt": expected date, got number'),
    ('{"d": 123456789.5}\n', 1, 'column "d": value does not fit decimal(10,2)'),
    ('{"d": 99999999.995}\n', 1, 'column "d": value does not fit decimal(10,2)'),
    ('{"d": "12a"}\n', 1, 'column "d": expected decimal(10,2), got string that is not a decimal number'),
    ('{"d": true}\n', 1, 'column "d": expected decimal(10,2), got boolean'),
    ('{"b": 1}\n', 1, 'column "b": expected boolean, got number'),
    ('{"f": "1.5"}\n', 1, 'column "f": expected float64, got string'),
    ('{"s": 5}\n', 1, 'column "s": expected string, got number'),
    ('{"s": {"a": 1}}\n', 1, 'column "s": expected string, got object'),
    ('{"i": 1}\n[1, 2]\n', 2, "line is not a JSON object (got array)"),
    ('{"i": 1}\n"text"\n', 2, "line is not a JSON object (got string)"),
    ('{"i": 1}\n{"s": "open\n{"i": 2}\n', 2, "invalid JSON"),
    ('{"i": 1}\n{"i": 2\n', 2, "invalid JSON"),
    ('{"i": 1}\n{"i": 2}}\n', 2, "invalid JSON"),
    ('{"l": -999}\n', 1, "fixture failure: l is -999"),
]


@pytest.mark.parametrize("text,line,message", BAD)
def test_data_errors(scan, tmp_path, text, line, message):
    f = write(tmp_path / "bad.jsonl", text)
    ev, _, nca = run_scan(scan, [f])
    assert ev["event"] == "error" and ev["phase"] == 0, ev
    assert message in ev["message"]
    assert ev["file"] == str(f) and ev["record"] == line
    assert nca.proc.returncode == 1


def test_invalid_utf8(scan, tmp_path):
    f = tmp_path / "u.jsonl"
    f.write_bytes(b'{"i": 1}\n{"s": "\xff\xfe"}\n')
    ev, _, _ = run_scan(scan, [f])
    assert ev["event"] == "error" and ev["record"] == 2 and "invalid JSON" in ev["message"]


@pytest.mark.parametrize("threads", [1, 2])
def test_error_line_far_into_the_file(scan, tmp_path, threads):
    lines = [json.dumps({"i": k, "s": "y" * (k % 37)}) for k in range(30000)]
    lines[23456] = '{"i": "oops"}'
    f = write(tmp_path / "far.jsonl", "\n".join(lines) + "\n")
    ev, _, _ = run_scan(scan, [f], threads=threads, params={"scan.chunk_bytes": 10000})
    assert ev["event"] == "error" and ev["record"] == 23457 and ev["file"] == str(f)


def test_missing_file(scan, tmp_path):
    ev, _, _ = run_scan(scan, [tmp_path / "nope.jsonl"])
    assert ev["event"] == "error" and ev["file"] == str(tmp_path / "nope.jsonl")


def test_path_with_spaces_and_percent(scan, tmp_path):
    f = write(tmp_path / "a b%20c ü.jsonl", '{"i": 9}\n')
    ev, [st], _ = run_scan(scan, [f])
    assert rows_of([st]) == [expect(i=9)]


# ------------------------------------------------------------------ protocol and failures

def test_bad_commands(scan):
    for line in ["bogus 1", "threads 0", "dest 1 127.0.0.1 9 0 1", "expect 0 1", "file a b", "dest 0 h 0 0 1",
                 "dest 0 127.0.0.1 9 0 1 client", "dest 0 127.0.0.1 9 0 1 client 1s"]:
        nca = NcaProcess(scan)
        try:
            nca.send(line)
            ev = nca.event("error")
            assert ev["phase"] is None
            assert nca.wait() == 2
        finally:
            nca.kill()


def test_unknown_phase_and_stream_mismatch(scan, tmp_path):
    f = write(tmp_path / "x.jsonl", '{"i": 1}\n')
    nca = NcaProcess(scan)
    try:
        nca.send("execute 1")
        assert "no phase 1" in nca.event("error")["message"]
        assert nca.wait() == 1
    finally:
        nca.kill()
    r = Receiver()
    nca = NcaProcess(scan)
    try:
        nca.configure([f], [(0, r.port, 0, 1)], threads=2)
        nca.send("execute 0")
        assert "2 threads" in nca.event("error")["message"]
    finally:
        nca.kill()
        r.close()


def test_exit_command_and_stdin_eof(scan):
    nca = NcaProcess(scan)
    nca.send("exit")
    assert nca.wait() == 0
    nca.kill()
    nca = NcaProcess(scan)
    assert nca.close() == 0
    nca.kill()


def dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_connect_failure(scan, tmp_path):
    f = write(tmp_path / "x.jsonl", '{"i": 1}\n')
    nca = NcaProcess(scan)
    try:
        nca.configure([f], [(0, dead_port(), 0, 1)], params={"connect_timeout_ms": 300})
        t0 = time.monotonic()
        nca.send("execute 0")
        ev = nca.event("error")
        assert "cannot connect" in ev["message"] and time.monotonic() - t0 < 5
        assert nca.wait() == 1
    finally:
        nca.kill()


def test_connect_retries_until_the_receiver_listens(scan, tmp_path):
    f = write(tmp_path / "x.jsonl", '{"i": 1}\n')
    port = dead_port()
    nca = NcaProcess(scan)
    try:
        nca.configure([f], [(0, port, 0, 1)])
        nca.send("execute 0")
        time.sleep(0.5)
        r = Receiver.__new__(Receiver)  # listen on the announced port, late
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(4)
        conn, _ = sock.accept()
        data = b""
        while b := conn.recv(65536):
            data += b
        assert nca.event("done")["stats"]["tuples_out"] == 1
        assert data.startswith(b"NTF1") and len(data) == 8 + 4 + 64 + 12
        conn.close()
        sock.close()
        del r
    finally:
        nca.kill()


@pytest.mark.parametrize("where", ["sending", "connecting"])
def test_stdin_eof_mid_run_ends_the_process(scan, tmp_path, where):
    """The control plane cancels by closing stdin: the process must exit at once even while a
    worker is blocked (on a receiver that does not read, or in connect retries)."""
    f = write(tmp_path / "x.jsonl", jl(*({"i": k, "s": "z" * 200} for k in range(100000))))
    r = Receiver(read=False)
    port = r.port if where == "sending" else dead_port()
    nca = NcaProcess(scan)
    try:
        nca.configure([f], [(0, port, 0, 1)])
        nca.send("execute 0")
        time.sleep(1.0)
        assert nca.proc.poll() is None, "should be blocked"
        t0 = time.monotonic()
        nca.proc.stdin.close()
        nca.wait(timeout=5)
        assert time.monotonic() - t0 < 2
        with pytest.raises(ProcessLookupError):  # nothing left in its process group
            os.killpg(nca.proc.pid, 0)
    finally:
        nca.kill()
        r.close()


def test_receiver_hangs_up(scan, tmp_path):
    """A destination that closes mid-stream fails the phase (no SIGPIPE death)."""
    f = write(tmp_path / "x.jsonl", jl(*({"i": k, "s": "z" * 200} for k in range(100000))))
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    nca = NcaProcess(scan)
    try:
        nca.configure([f], [(0, srv.getsockname()[1], 0, 1)])
        nca.send("execute 0")
        c, _ = srv.accept()
        c.recv(1000)
        c.close()
        ev = nca.event("error")
        assert "output port 0" in ev["message"]
        assert nca.wait() == 1
    finally:
        nca.kill()
        srv.close()


# ------------------------------------------------------------------ client destinations

def big_file(tmp_path, rows: int = 100000):
    """~270 bytes a tuple: 100000 rows are ~27 MB, far more than the socket buffers hold."""
    return write(tmp_path / "big.jsonl", jl(*({"i": k, "s": "z" * 200} for k in range(rows))))


@pytest.mark.parametrize("client", ["never accepts", "accepts and never reads"])
def test_a_client_that_takes_no_data_fails_the_stream(scan, tmp_path, client):
    """`dest ... client MS` (docs/nca-process-protocol.md, "Client destinations"): a client that
    listens but never accepts (the kernel takes data into the connection's receive buffer until
    it is full), or accepts and never reads, fails the phase once it has taken nothing for MS ms."""
    f = big_file(tmp_path)
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    nca = NcaProcess(scan)
    conn = None
    try:
        nca.configure([f], [(0, port, 3, 2)], threads=2, client=500)
        t0 = time.monotonic()
        nca.send("execute 0")
        if client == "accepts and never reads":
            conn, _ = srv.accept()
        ev = nca.event("error", timeout=20)
        took = time.monotonic() - t0
        assert ev["phase"] == 0
        assert ev["message"] in [f"the client at 127.0.0.1:{port} took no data for 0.5 s: it is not reading (or "
                                 f"never accepted the connection) [output port 0, stream {s}]" for s in (3, 4)], ev
        assert 0.5 <= took < 5
        assert nca.wait() == 1
    finally:
        nca.kill()
        if conn is not None:
            conn.close()
        srv.close()


def test_a_stalled_nca_destination_is_waited_for(scan, tmp_path):
    """Without `client` the receiver is an NCA: its slowness is backpressure, never a failure."""
    f = big_file(tmp_path)
    r = Receiver(read=False)
    nca = NcaProcess(scan)
    try:
        nca.configure([f], [(0, r.port, 0, 1)])
        nca.send("execute 0")
        time.sleep(2.0)
        assert nca.proc.poll() is None and nca.events.empty(), "should still be blocked"
    finally:
        nca.kill()
        r.close()


def test_a_client_that_reads_slowly_but_steadily_is_not_failed(scan, tmp_path):
    """A client reading ~5 MB/s in 256 KiB steps (with a small receive buffer, so that nothing
    piles up there) keeps a 300 ms `client` limit: every step is acknowledged bytes (SIOCOUTQ
    shrinks, send takes bytes again). Waiting for POLLOUT alone would take it for stalled: that
    comes only once a third of the sender's send buffer (8 MiB where net.core.wmem_max allows it)
    is free, 0.5 s at this rate."""
    rows = 60000  # ~16 MB
    f = big_file(tmp_path, rows)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 << 10)  # inherited by the accepted socket
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    nca = NcaProcess(scan)
    conn = None
    try:
        nca.configure([f], [(0, srv.getsockname()[1], 0, 1)], client=300)
        nca.send("execute 0")
        conn, _ = srv.accept()
        data = bytearray()
        while True:
            step = 0
            while step < 256 << 10:
                b = conn.recv((256 << 10) - step)
                if not b:
                    break
                data += b
                step += len(b)
            if not b:
                break
            time.sleep(0.05)
        ev = nca.event("done", timeout=30)
        assert ev["stats"]["tuples_out"] == rows and ev["stats"]["bytes_out"] == len(data)
        assert nca.close() == 0
    finally:
        nca.kill()
        if conn is not None:
            conn.close()
        srv.close()


def test_client_over_udp_is_accepted_and_changes_nothing(scan, tmp_path):
    """A UDP sender never waits for its receiver, so `client` has nothing to watch there: a client
    that never reads loses datagrams (its receiver reports that), the sender finishes."""
    f = big_file(tmp_path, 5000)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))  # bound, never read
    nca = NcaProcess(scan)
    try:
        nca.send("threads 1", f"file {f}", f"dest 0 127.0.0.1 {rx.getsockname()[1]} 0 1 udp 0 0 client 100",
                 "execute 0")
        assert nca.event("done", timeout=30)["stats"]["tuples_out"] == 5000
        assert nca.close() == 0
    finally:
        nca.kill()
        rx.close()
