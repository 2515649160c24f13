"""The hash-join driver (ncas/runtime/join.c) with generated queries, through the process protocol
and real sockets: build streams on input port 0 in phase 0, probe streams on input port 1 in
phase 1, joined tuples out. Answers are checked against a nested-loop oracle in Python."""
from __future__ import annotations

import random
import socket
import struct
import threading
from collections.abc import Callable

import pytest

from jumpgate.compiler.join_sides import as_right_outer
from jumpgate.contract.ntf import generate_ntf
from jumpgate.ncas.software.build import build_nca
from jumpgate.ncas.software.codegen.golden import join_chain
from jumpgate.ncas.software.codegen.join import generate_join_query

from .fixtures.runtime_harness import NcaProcess, Receiver, decode_tuple, encode_tuple, stream_bytes

PROBE = {"pk": "int64", "ps": "string", "pv": "int64"}
BUILD = {"bk": "int32", "bs": "string", "bw": "int64"}
TYPES = ("inner", "left_semi", "left_anti", "left_outer")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "nca-cache"


class JoinQuery:
    """A generated join query, built, with the NTF fields of its inputs and output."""

    def __init__(self, cache, join: dict, steps=(), probe=PROBE, build=BUILD) -> None:
        ops, self.probe_schema, self.build_schema, self.layout = join_chain(probe, build, join, list(steps))
        self.source = generate_join_query(ops, self.probe_schema, self.build_schema, self.layout)
        self.binary = build_nca(self.source, "join", cache).path
        self.probe_fields, self.probe_fixed = fields(generate_ntf(self.probe_schema))
        self.build_fields, self.build_fixed = fields(generate_ntf(self.build_schema))
        self.out_fields, _ = fields(self.layout)

    def probe_tuple(self, row: dict) -> bytes:
        return encode_tuple(row, self.probe_fields, self.probe_fixed)

    def build_tuple(self, row: dict) -> bytes:
        return encode_tuple(row, self.build_fields, self.build_fixed)

    def decode(self, t: bytes) -> tuple:
        row = decode_tuple(t, self.out_fields)
        return tuple(row[name] for name, _, _ in self.out_fields)


def fields(layout) -> tuple[list[tuple[str, str, int]], int]:
    return [(f.name, "int128" if f.type.is_wide_decimal else f.type.kind.value, f.offset) for f in layout.fields], \
        layout.fixed_size


def send(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)  # then wait for the NCA to close its side
            s.settimeout(20)
            s.recv(1)
        except OSError:
            pass


def feed(port: int, streams: list[list[bytes]]) -> list[threading.Thread]:
    ts = [threading.Thread(target=send, args=(port, stream_bytes(i, tuples)), daemon=True)
          for i, tuples in enumerate(streams)]
    for t in ts:
        t.start()
    return ts


def split(rows: list[bytes], n: int) -> list[list[bytes]]:
    return [rows[i::n] for i in range(n)]


def run_join(q: JoinQuery, build: list[list[bytes]], probe: list[list[bytes]], threads: int = 1):
    """Both phases; returns (build done event, probe done event, output rows)."""
    r = Receiver()
    nca = NcaProcess(q.binary, inputs=2)
    try:
        assert len(nca.ports) == 2
        nca.configure(dests=[(0, r.port, 0, threads)], threads=threads, expect=[(0, len(build)), (1, len(probe))])
        nca.send("execute 0")
        for t in feed(nca.ports[0], build):
            t.join()
        ev0 = nca.event("done")
        nca.send("execute 1")
        for t in feed(nca.ports[1], probe):
            t.join()
        ev1 = nca.event("done")
        streams = r.streams(threads)
        assert [s.stream_id for s in streams] == list(range(threads))
        assert all(s.count == len(s.tuples) for s in streams)
        rows = [q.decode(t) for s in streams for t in s.tuples]
        assert nca.close() == 0
        return ev0, ev1, rows
    finally:
        nca.kill()
        r.close()


# ------------------------------------------------------------------ the oracle


def oracle(jtype: str, probe: list[dict], build: list[dict], pkey: Callable, bkey: Callable,
           cond: Callable | None = None, out: Callable | None = None) -> list[tuple]:
    """Nested loops with SQL semantics: a NULL key matches nothing; the condition must be TRUE."""
    rows = []
    for p in probe:
        pk = pkey(p)
        matches = [b for b in build if None not in pk and bkey(b) == pk and (cond is None or cond(p, b) is True)]
        if jtype in ("inner", "left_outer"):
            rows += [out(p, b) for b in matches]
            if jtype == "left_outer" and not matches:
                rows.append(out(p, dict.fromkeys(build[0] if build else BUILD)))
        elif (jtype == "left_semi") == bool(matches):
            rows.append(out(p, None))
    return rows


def default_out(jtype: str):
    if jtype in ("left_semi", "left_anti"):
        return lambda p, b: tuple(p.values())
    return lambda p, b: (*p.values(), *b.values())


def sql_gt(a, b):
    return None if a is None or b is None else a > b


def random_rows(seed: int, n_probe: int, n_build: int, nkeys: int = 30):
    """Keys with NULLs and duplicates on both sides; strings with a few non-ASCII bytes."""
    rng = random.Random(seed)
    words = ["a", "b", "é", "日本", ""]

    def maybe(v, p=0.1):
        return None if rng.random() < p else v

    probe = [{"pk": maybe(rng.randrange(nkeys)), "ps": maybe(rng.choice(words)), "pv": maybe(rng.randrange(100))}
             for _ in range(n_probe)]
    build = [{"bk": maybe(rng.randrange(nkeys + 10) - 5), "bs": maybe(rng.choice(words)), "bw": maybe(rng.randrange(100))}
             for _ in range(n_build)]
    return probe, build


def same(got: list[tuple], want: list[tuple]) -> None:
    assert len(got) == len(want)
    assert sorted(map(repr, got)) == sorted(map(repr, want))


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("jtype", TYPES)
@pytest.mark.parametrize("with_condition", [False, True], ids=["keys", "keys+condition"])
def test_join_types_two_keys(cache, jtype, with_condition):
    join = {"build_keys": ["bk", "bs"], "probe_keys": ["pk", "ps"], "type": jtype}
    if with_condition:
        join["condition"] = "pv > bw"
    q = JoinQuery(cache, join)
    probe, build = random_rows(1, 1500, 600)
    _, ev, got = run_join(q, [[q.build_tuple(b) for b in build]], [[q.probe_tuple(p) for p in probe]])
    want = oracle(jtype, probe, build, lambda p: (p["pk"], p["ps"]), lambda b: (b["bk"], b["bs"]),
                  (lambda p, b: sql_gt(p["pv"], b["bw"])) if with_condition else None, default_out(jtype))
    same(got, want)
    assert ev["stats"]["tuples_out"] == len(want)
    assert ev["stats"]["tuples_in"] == len(probe)


@pytest.mark.parametrize("jtype", TYPES)
def test_join_threads_and_many_streams(cache, jtype):
    """Two workers in each phase: build rows land in two arenas, probe streams are split between
    workers that share the table and write their own output streams."""
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"], "type": jtype, "condition": "pv <> bw"})
    probe, build = random_rows(2, 3000, 900)
    ev0, ev1, got = run_join(q, split([q.build_tuple(b) for b in build], 3),
                             split([q.probe_tuple(p) for p in probe], 5), threads=2)
    want = oracle(jtype, probe, build, lambda p: (p["pk"],), lambda b: (b["bk"],),
                  lambda p, b: None if p["pv"] is None or b["bw"] is None else p["pv"] != b["bw"], default_out(jtype))
    same(got, want)
    assert ev0["stats"]["build_rows"] == sum(b["bk"] is not None for b in build)
    assert ev0["stats"]["build_null_key_rows"] == sum(b["bk"] is None for b in build)


class SwappedLeftOuter(JoinQuery):
    """A left_outer join run as the compiler's right_outer (compiler/join_sides.py): the kept side
    (PROBE rows) is built on port 0, the other side (BUILD rows) probes on port 1."""

    def __init__(self, cache, join: dict) -> None:
        ops, probe_schema, build_schema, self.layout = join_chain(PROBE, BUILD, {**join, "type": "left_outer"})
        ops[0] = as_right_outer(ops[0], probe_schema, build_schema)
        self.source = generate_join_query(ops, build_schema, probe_schema, self.layout)
        self.binary = build_nca(self.source, "join", cache).path
        self.probe_fields, self.probe_fixed = fields(generate_ntf(build_schema))
        self.build_fields, self.build_fixed = fields(generate_ntf(probe_schema))
        self.out_fields, _ = fields(self.layout)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("with_condition", [False, True], ids=["keys", "keys+condition"])
def test_right_outer_gives_the_left_outers_rows(cache, threads, with_condition):
    """Kept rows nothing matched (NULL keys included) come out once, after every probe row, with
    the other side NULL, whichever worker ends last; matched ones only with their matches."""
    join = {"build_keys": ["bk", "bs"], "probe_keys": ["pk", "ps"]}
    if with_condition:
        join["condition"] = "pv > bw"
    q = SwappedLeftOuter(cache, join)
    kept, other = random_rows(3, 700, 2500)
    _, ev1, got = run_join(q, split([q.build_tuple(p) for p in kept], 2),
                           split([q.probe_tuple(b) for b in other], 5), threads=threads)
    want = oracle("left_outer", kept, other, lambda p: (p["pk"], p["ps"]), lambda b: (b["bk"], b["bs"]),
                  (lambda p, b: sql_gt(p["pv"], b["bw"])) if with_condition else None, default_out("left_outer"))
    same(got, want)
    alone = sum(1 for r in want if r[3:] == (None, None, None))
    assert 0 < ev1["stats"]["unmatched_build_rows"] == alone
    assert ev1["stats"]["tuples_out"] == len(want)


def test_join_build_stats_report_memory(cache):
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"]})
    build = [{"bk": k % 100, "bs": "x" * (k % 7), "bw": k} for k in range(1000)] + [{"bk": None, "bs": "n", "bw": 0}]
    probe = [{"pk": k, "ps": None, "pv": None} for k in range(-5, 105)]
    ev0, ev1, got = run_join(q, [[q.build_tuple(b) for b in build]], [[q.probe_tuple(p) for p in probe]])
    s0 = ev0["stats"]
    assert (s0["tuples_in"], s0["build_rows"], s0["build_null_key_rows"], s0["build_distinct_keys"]) == (1001, 1000, 1, 100)
    assert s0["build_table_bytes"] == 4096 * 8  # 4 * 1000 rows rounded up to a power of two, 8 bytes a slot
    assert s0["build_arena_bytes"] >= 1000 * 64
    assert s0["build_bytes"] == s0["build_arena_bytes"] + s0["build_table_bytes"]
    assert s0["tuples_out"] == 0 and s0["bytes_out"] == 0
    assert ev1["stats"]["matches"] == len(got) == 1000
    assert ev1["stats"]["build_bytes"] == s0["build_bytes"]


@pytest.mark.parametrize("jtype,expected", [("inner", 0), ("left_semi", 0), ("left_anti", 50), ("left_outer", 50)])
def test_join_empty_build_side(cache, jtype, expected):
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"], "type": jtype})
    probe = [{"pk": k, "ps": "p", "pv": k} for k in range(50)]
    ev0, _, got = run_join(q, [[], []], [[q.probe_tuple(p) for p in probe]])
    assert ev0["stats"]["build_rows"] == 0
    assert len(got) == expected
    if jtype == "left_outer":
        assert all(r[3:] == (None, None, None) for r in got)


@pytest.mark.parametrize("jtype", TYPES)
def test_join_empty_probe_side(cache, jtype):
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"], "type": jtype})
    build = [{"bk": k, "bs": "b", "bw": k} for k in range(50)]
    _, ev1, got = run_join(q, [[q.build_tuple(b) for b in build]], [[], []], threads=2)
    assert got == [] and ev1["stats"]["tuples_out"] == 0


def test_join_computed_string_keys_and_fused_projection(cache):
    """Keys computed into scratch memory (lower/upper) are copied into the build table; the
    fused filter and projection run over the joined row, including build columns."""
    q = JoinQuery(cache, {"build_keys": ["lower(bs)", "bk + 1"], "probe_keys": ["lower(ps)", "pk"],
                          "columns": [{"name": "pv", "expr": "pv"}, {"name": "bs", "expr": "bs"},
                                      {"name": "bw", "expr": "bw"}]},
                  [("filter", "bw % 2 = 0"), ("project", [("pv", "pv"), ("tag", "upper(bs) = 'AB'"),
                                                          ("bw", "bw")])])
    rng = random.Random(5)
    build = [{"bk": rng.randrange(20), "bs": rng.choice(["Ab", "AB", "x", "é"]), "bw": i} for i in range(400)]
    probe = [{"pk": rng.randrange(22), "ps": rng.choice(["ab", "aB", "É", "x", None]), "pv": i} for i in range(800)]
    _, _, got = run_join(q, [[q.build_tuple(b) for b in build]], [[q.probe_tuple(p) for p in probe]])
    want = [(p["pv"], b["bs"].upper() == "AB", b["bw"]) for p in probe for b in build
            if p["ps"] is not None and b["bs"].lower() == p["ps"].lower() and b["bk"] + 1 == p["pk"]
            and b["bw"] % 2 == 0]
    assert len(want) > 100
    same(got, want)


def test_join_many_to_many_with_scratch_strings(cache):
    """300 x 300 rows on one key: every output row computes upper() of a build string, and the
    scratch memory of each output row is given back."""
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"],
                          "columns": [{"name": "pv", "expr": "pv"}, {"name": "u", "expr": "upper(bs)"}]})
    build = [{"bk": 7, "bs": "s" * 200 + str(i), "bw": i} for i in range(300)]
    probe = [{"pk": 7, "ps": None, "pv": i} for i in range(300)] + [{"pk": 8, "ps": None, "pv": -1}]
    _, ev1, got = run_join(q, [[q.build_tuple(b) for b in build]], [[q.probe_tuple(p) for p in probe]])
    assert ev1["stats"]["matches"] == 90000
    same(got, [(p["pv"], b["bs"].upper()) for p in probe[:-1] for b in build])


def test_join_build_tuples_larger_than_an_arena_chunk(cache):
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"], "type": "left_outer"})
    big = "x" * (5 << 20)
    build = [{"bk": 1, "bs": big, "bw": 1}, {"bk": 2, "bs": "small", "bw": 2}, {"bk": 1, "bs": "y", "bw": 3}]
    probe = [{"pk": k, "ps": None, "pv": k} for k in (1, 2, 3)]
    _, _, got = run_join(q, [[q.build_tuple(b) for b in build]], [[q.probe_tuple(p) for p in probe]])
    same(got, [(1, None, 1, 1, big, 1), (1, None, 1, 1, "y", 3), (2, None, 2, 2, "small", 2),
               (3, None, 3, None, None, None)])


def test_join_float_and_boolean_keys(cache):
    """-0.0 joins 0.0 and NaN joins NaN (consistent with jg_hash v1 and DuckDB)."""
    q = JoinQuery(cache, {"build_keys": ["y", "z > 0"], "probe_keys": ["x", "b"], "type": "left_semi"},
                  probe={"x": "float64", "b": "boolean"}, build={"y": "float64", "z": "int32"})
    nan = float("nan")
    build = [{"y": 0.0, "z": 1}, {"y": nan, "z": 0}, {"y": 2.5, "z": None}, {"y": 1.5, "z": 3}]
    probe = [{"x": -0.0, "b": True}, {"x": nan, "b": False}, {"x": 2.5, "b": None}, {"x": 1.5, "b": False},
             {"x": 1.5, "b": True}, {"x": None, "b": True}]
    _, _, got = run_join(q, [[q.build_tuple(b) for b in build]], [[q.probe_tuple(p) for p in probe]])
    assert sorted(repr(r) for r in got) == sorted(repr(r) for r in [(-0.0, True), (nan, False), (1.5, True)])


def test_join_carries_wide_decimals_whole(cache):
    """Wide decimals (16 bytes in NTF) on either side come out with all their digits: the batch
    functions read them as 128-bit values, not as their low 8 bytes."""
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"], "type": "inner"},
                  probe={"pk": "int64", "pw": "decimal(25,2)"}, build={"bk": "int64", "bw": "decimal(38,0)"})
    big = [10**24 - 1, -(10**24) + 7, 2**64 + 5, -(2**63) - 1, 0, None]
    build = [{"bk": i, "bw": (-1) ** i * (10**37 + i) if i < 5 else None} for i in range(6)]
    probe = [{"pk": i, "pw": w} for i, w in enumerate(big)]
    _, _, got = run_join(q, [[q.build_tuple(b) for b in build]], [[q.probe_tuple(p) for p in probe]])
    want = [(p["pk"], p["pw"], b["bk"], b["bw"]) for p in probe for b in build if b["bk"] == p["pk"]]
    assert sorted(got, key=repr) == sorted(want, key=repr)


def test_join_key_error_fails_the_phase(cache):
    q = JoinQuery(cache, {"build_keys": ["CAST(bs AS int64)"], "probe_keys": ["pk"]})
    r = Receiver()
    nca = NcaProcess(q.binary, inputs=2)
    try:
        nca.configure(dests=[(0, r.port, 0, 1)], expect=[(0, 1), (1, 1)])
        nca.send("execute 0")
        feed(nca.ports[0], [[q.build_tuple({"bk": 1, "bs": "12", "bw": 0}), q.build_tuple({"bk": 1, "bs": "zz", "bw": 0})]])
        ev = nca.event("error")
        assert ev["phase"] == 0 and "zz" in ev["message"], ev
        assert nca.wait() == 1
    finally:
        nca.kill()
        r.close()


def test_join_probe_before_build_is_an_error(cache):
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"]})
    nca = NcaProcess(q.binary, inputs=2)
    try:
        nca.configure(expect=[(0, 1), (1, 1)])
        nca.send("execute 1")
        assert "build phase" in nca.event("error")["message"]
    finally:
        nca.kill()


@pytest.mark.parametrize("phase", [0, 1])
def test_join_needs_expected_streams(cache, phase):
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"]})
    nca = NcaProcess(q.binary, inputs=2)
    r = Receiver()
    try:
        nca.configure(dests=[(0, r.port, 0, 1)], expect=[(0, 1)] if phase else [(1, 1)])
        if phase:
            nca.send("execute 0")
            feed(nca.ports[0], [[]])[0].join()
            nca.event("done")
        nca.send(f"execute {phase}")
        assert f"expect {phase} N" in nca.event("error")["message"]
    finally:
        nca.kill()
        r.close()


def test_join_malformed_build_tuple(cache):
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"]})
    nca = NcaProcess(q.binary, inputs=2)
    try:
        nca.configure(expect=[(0, 1), (1, 1)])
        nca.send("execute 0")
        feed(nca.ports[0], [[b"\x00" * 8]])
        ev = nca.event("error")
        assert "build side" in ev["message"] and "shorter" in ev["message"], ev
    finally:
        nca.kill()


def _string_out_of_bounds(q: JoinQuery, row: dict, column: str, side: str) -> bytes:
    """A tuple of `side` whose string field `column` points past the tuple's end."""
    t = bytearray(q.build_tuple(row) if side == "build" else q.probe_tuple(row))
    fields = q.build_fields if side == "build" else q.probe_fields
    offset = next(off for name, _, off in fields if name == column)
    t[offset:offset + 8] = struct.pack("<II", len(t) - 1, 5)
    return bytes(t)


def _phase_error(q: JoinQuery, build: list[bytes], probe: list[bytes] | None) -> dict:
    """The `error` event of the build phase (probe None) or of the probe phase."""
    r = Receiver()
    nca = NcaProcess(q.binary, inputs=2)
    try:
        nca.configure(dests=[(0, r.port, 0, 1)], expect=[(0, 1), (1, 1)])
        nca.send("execute 0")
        feed(nca.ports[0], [build])
        if probe is None:
            return nca.event("error")
        nca.event("done")
        nca.send("execute 1")
        feed(nca.ports[1], [probe])
        return nca.event("error")
    finally:
        nca.kill()
        r.close()


def test_join_malformed_probe_tuple(cache):
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"]})
    good = [q.probe_tuple({"pk": i, "ps": "x", "pv": i}) for i in range(100)]
    ev = _phase_error(q, [q.build_tuple({"bk": 1, "bs": "a", "bw": 2})], good + [b"\x00" * 8])
    assert ev["phase"] == 1, ev
    assert ev["message"] == "input port 1 (probe side): malformed tuple: tuple shorter than the layout's fixed size", ev


@pytest.mark.parametrize("side", ["build", "probe"])
def test_join_string_outside_the_tuple(cache, side):
    """Every string of a build tuple is checked (the whole tuple is stored); a probe tuple's strings
    when some function reads them."""
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["pk"]})
    build = [q.build_tuple({"bk": i, "bs": "a", "bw": i}) for i in range(3)]
    probe = [q.probe_tuple({"pk": i, "ps": "x", "pv": i}) for i in range(3)]
    if side == "build":
        ev = _phase_error(q, build + [_string_out_of_bounds(q, {"bk": 9, "bs": "abc", "bw": 1}, "bs", "build")], None)
    else:
        ev = _phase_error(q, build, probe + [_string_out_of_bounds(q, {"pk": 9, "ps": "abc", "pv": 1}, "ps", "probe")])
    assert ev["message"] == (f"input port {0 if side == 'build' else 1} ({side} side): malformed tuple: "
                             "string field points outside the tuple"), ev


def test_join_probe_key_error_fails_the_phase(cache):
    q = JoinQuery(cache, {"build_keys": ["bk"], "probe_keys": ["CAST(ps AS int32)"]})
    probe = [q.probe_tuple({"pk": 1, "ps": str(i), "pv": 0}) for i in range(70)] + \
        [q.probe_tuple({"pk": 1, "ps": "zz", "pv": 0})]
    ev = _phase_error(q, [q.build_tuple({"bk": 1, "bs": "a", "bw": 2})], probe)
    assert ev["phase"] == 1 and "zz" in ev["message"], ev
