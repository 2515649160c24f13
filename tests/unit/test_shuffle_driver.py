"""The shuffle and NTF filter/project NCAs as processes (docs/nca-process-protocol.md): generated
queries on the ntf_relay driver, NTF streams in on Python sockets, P receivers out.

Checked: every tuple reaches exactly the output that the Python reference of jg_hash v1 names,
byte for byte when the shuffle forwards; equal keys (NULL, -0.0 and 0.0, every NaN, int32 and
int64) never split; several input streams on one or two worker threads; P = 1; re-encoding after
a projection; a failing key expression fails the phase with its location.
"""
from __future__ import annotations

import decimal
import math
import random
import struct
import threading

import pytest

from jumpgate.contract.ntf import generate_ntf
from jumpgate.dataflow.request import parse_request
from jumpgate.ncas.software import hashing
from jumpgate.ncas.software.build import build_nca
from jumpgate.ncas.software.codegen.messages import message_params
from jumpgate.ncas.software.codegen.shuffle import generate_relay_query

from .fixtures.runtime_harness import (
    COPY_FIELDS,
    COPY_FIXED,
    NcaProcess,
    Receiver,
    decode_tuple,
    encode_tuple,
    stream_bytes,
)

SCHEMA = [{"name": "b", "type": "boolean"}, {"name": "i", "type": "int32"}, {"name": "l", "type": "int64"},
          {"name": "f", "type": "float64"}, {"name": "d", "type": "decimal(10,2)"}, {"name": "s", "type": "string"},
          {"name": "dt", "type": "date"}]
TYPES = {c["name"]: c["type"] for c in SCHEMA}
WORDS = ["alpha", "Alpha", "ALPHA", "beta", "naïve", "NAÏVE", "日本語", "", "O'Neil", "x" * 300]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    (root / "t.jsonl").write_text("{}\n")
    return root, tmp_path_factory.getbasetemp() / "nca-cache"


# The message table of the source last built into each binary, which `run` sends as ProcessNca
# does with the configuration (the binary holds message numbers only, and serves every request of
# its shape: a later request of one shape with other names replaces the table).
MESSAGES: dict = {}


def relay_binary(env, ops: list[dict], chain: list[str], partitions: int = 0):
    """Build the relay NCA for operations `chain` of a request reading the copy schema."""
    root, cache = env
    read = {"kind": "read", "name": "r", "path": "t.jsonl", "format": "json", "schema": SCHEMA}
    last = chain[-1]
    outs = [f"{last}[{i}]" for i in range(partitions)] if partitions else [last]
    sends = [{"kind": "send", "name": f"o{k}", "input": o, "transport": "tcp", "host": "127.0.0.1", "port": 9}
             for k, o in enumerate(outs)]
    plan = parse_request({"operations": [read, *ops, *sends]}, root)
    in_layout = generate_ntf(plan.schemas["r"])
    assert [(f.name, f.offset) for f in in_layout.fields] == [(n, o) for n, _, o in COPY_FIELDS]
    assert in_layout.fixed_size == COPY_FIXED
    out_layout = generate_ntf(plan.schemas[last])
    src = generate_relay_query([plan.op(n) for n in chain], plan.schemas["r"], in_layout, out_layout)
    path = build_nca(src, "ntf_relay", cache).path
    MESSAGES[path] = message_params(src)
    return path, out_layout


def shuffle_binary(env, keys: list[str], partitions: int):
    op = {"kind": "shuffle", "name": "s", "input": "r", "keys": keys, "partitions": partitions}
    return relay_binary(env, [op], ["s"], partitions)[0]


def rows(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    specials = [0.0, -0.0, float("nan"), struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000001))[0],
                float("inf"), 1.5]
    out = []
    for _ in range(n):
        row = {"b": rng.random() < 0.5, "i": rng.randint(-3, 3), "l": rng.choice([rng.randint(-2**63, 2**63 - 1),
                                                                                 rng.randint(-5, 5)]),
               "f": rng.choice(specials + [rng.uniform(-2, 2)]), "d": rng.randint(-300, 300),
               "s": rng.choice(WORDS), "dt": rng.randint(-3, 3)}
        for name in rng.sample(sorted(row), rng.randint(0, 2)):
            row[name] = None
        out.append(row)
    return out


def run(binary, payloads: list[bytes], ports: int, threads: int = 1):
    """Run the NCA on `payloads` (one stream each); returns (done event, [tuples per port])."""
    receivers = [Receiver() for _ in range(ports)]
    nca = NcaProcess(binary, inputs=1)
    try:
        nca.configure(dests=[(p, r.port, 0, threads) for p, r in enumerate(receivers)], threads=threads,
                      expect=[(0, len(payloads))], params=MESSAGES.get(binary))
        nca.send("execute 0")
        feeders = [threading.Thread(target=_feed, args=(nca.ports[0], p), daemon=True) for p in payloads]
        for t in feeders:
            t.start()
        ev = nca.event()
        for t in feeders:
            t.join(10)
        if ev["event"] != "done":
            assert nca.wait() == 1
            return ev, []
        got = []
        for r in receivers:
            streams = r.streams(threads)
            assert [s.stream_id for s in streams] == list(range(threads))
            assert all(s.count == len(s.tuples) for s in streams)
            got.append([t for s in streams for t in s.tuples])
        assert nca.close() == 0
        return ev, got
    finally:
        nca.kill()
        for r in receivers:
            r.close()


def _feed(port: int, data: bytes) -> None:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(10)
            s.recv(1)
    except OSError:
        pass


def key_value(row: dict, name: str):
    v = row[name]
    if name == "d" and v is not None:
        return decimal.Decimal(v).scaleb(-2)  # the decoder's unscaled value, as the decimal it is
    return v


def check_routing(got: list[list[bytes]], sent: list[bytes], key_fn, types, partitions: int) -> None:
    assert sorted(t for port in got for t in port) == sorted(sent), "tuples lost, duplicated or changed"
    for p, tuples in enumerate(got):
        for t in tuples:
            keys = key_fn(decode_tuple(t))
            assert hashing.partition(keys, partitions, types) == p, keys


# ------------------------------------------------------------------ routing


@pytest.mark.parametrize("threads,nstreams,partitions", [(1, 1, 3), (1, 3, 2), (2, 4, 3), (1, 2, 1)])
def test_shuffle_routes_every_tuple_by_the_reference_hash(env, threads, nstreams, partitions):
    keys = ["s", "i", "d", "dt", "f", "b", "l"]
    binary = shuffle_binary(env, keys, partitions)
    inputs = [[encode_tuple(r) for r in rows(100 * seed + partitions, 1500)] for seed in range(nstreams)]
    ev, got = run(binary, [stream_bytes(k, ts) for k, ts in enumerate(inputs)], partitions, threads)
    assert ev["event"] == "done", ev
    sent = [t for ts in inputs for t in ts]
    check_routing(got, sent, lambda r: [key_value(r, k) for k in keys], [TYPES[k] for k in keys], partitions)
    assert ev["stats"]["tuples_in"] == ev["stats"]["tuples_out"] == len(sent)
    if partitions > 1:
        assert all(got), "a partition got nothing: the hash does not spread"


def test_equal_keys_never_split(env):
    """NULL with NULL, -0.0 with 0.0, every NaN with every NaN, whatever else the row holds."""
    binary = shuffle_binary(env, ["f"], 7)
    nan2 = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000001))[0]
    floats = [0.0, -0.0, float("nan"), -float("nan"), nan2, None, 1.0, -1.0]
    sent = [encode_tuple({"f": floats[k % len(floats)], "l": k, "s": str(k)}) for k in range(800)]
    ev, got = run(binary, [stream_bytes(0, sent)], 7)
    assert ev["event"] == "done", ev
    where: dict[str, set[int]] = {}
    for p, tuples in enumerate(got):
        for t in tuples:
            f = decode_tuple(t)["f"]
            cls = "null" if f is None else "nan" if math.isnan(f) else repr(f + 0.0)  # -0.0 + 0.0 is 0.0
            where.setdefault(cls, set()).add(p)
    assert set(where) == {"null", "nan", "0.0", "1.0", "-1.0"}
    assert all(len(ports) == 1 for ports in where.values()), where
    check_routing(got, sent, lambda r: [r["f"]], ["float64"], 7)


def test_int32_and_int64_keys_route_alike(env):
    a = shuffle_binary(env, ["i", "s"], 5)
    b = shuffle_binary(env, ["CAST(i AS int64)", "s"], 5)
    sent = [encode_tuple(r) for r in rows(7, 1000)]
    _, got_a = run(a, [stream_bytes(0, sent)], 5)
    _, got_b = run(b, [stream_bytes(0, sent)], 5)
    assert [sorted(p) for p in got_a] == [sorted(p) for p in got_b]


def test_expression_keys(env):
    keys = ["lower(s)", "l % 3", "dt IS NULL"]
    binary = shuffle_binary(env, keys, 4)
    sent = [encode_tuple(r) for r in rows(11, 1200)]
    ev, got = run(binary, [stream_bytes(0, sent)], 4)
    assert ev["event"] == "done", ev

    def key_fn(r):
        lm = None if r["l"] is None else (abs(r["l"]) % 3) * (1 if r["l"] >= 0 else -1)  # SQL %: the dividend's sign
        return [None if r["s"] is None else r["s"].lower(), lm, r["dt"] is None]

    check_routing(got, sent, key_fn, ["string", "int64", "boolean"], 4)
    # rows whose strings differ only in case meet in one output
    where: dict[str, set[int]] = {}
    for p, tuples in enumerate(got):
        for t in tuples:
            r = decode_tuple(t)
            where.setdefault(repr(key_fn(r)), set()).add(p)
    assert all(len(v) == 1 for v in where.values())


def test_empty_and_huge_tuples(env):
    binary = shuffle_binary(env, ["s"], 2)
    big = encode_tuple({"s": "q" * (3 << 20)})
    ev, got = run(binary, [stream_bytes(0, []), stream_bytes(1, [big, encode_tuple({})])], 2)
    assert ev["event"] == "done", ev
    check_routing(got, [big, encode_tuple({})], lambda r: [r["s"]], ["string"], 2)


def test_failing_key_expression_fails_the_phase(env):
    binary = shuffle_binary(env, ["l + 9223372036854775807"], 2)
    ev, _ = run(binary, [stream_bytes(0, [encode_tuple({"l": 0}), encode_tuple({"l": 5})])], 2)
    assert ev["event"] == "error" and "overflow" in ev["message"] and "key 1 of shuffle 's'" in ev["message"], ev


# ------------------------------------------------------------------ NTF filter/project


def test_filter_project_reencodes(env):
    ops = [{"kind": "filter", "name": "f", "input": "r", "condition": "l > 0 AND s IS NOT NULL"},
           {"kind": "project", "name": "p", "input": "f",
            "columns": [{"name": "u", "expr": "upper(s)"}, {"name": "h", "expr": "l / 2"},
                        {"name": "i", "expr": "i"}, {"name": "dd", "expr": "d * 2"}]}]
    binary, layout = relay_binary(env, ops, ["f", "p"])
    src = rows(5, 2000)
    ev, got = run(binary, [stream_bytes(0, [encode_tuple(r) for r in src[:1000]]),
                           stream_bytes(1, [encode_tuple(r) for r in src[1000:]])], 1)
    assert ev["event"] == "done", ev
    fields = [(f.name, str(f.type).split("(")[0], f.offset) for f in layout.fields]
    out = sorted((decode_tuple(t, fields) for t in got[0]), key=repr)
    want = sorted(({"u": r["s"].upper(), "h": r["l"] / 2, "i": r["i"], "dd": None if r["d"] is None else r["d"] * 2}
                   for r in src if r["l"] is not None and r["l"] > 0 and r["s"] is not None), key=repr)
    assert out == want


def test_filter_only_chain_forwards_bytes(env):
    binary, _ = relay_binary(env, [{"kind": "filter", "name": "f", "input": "r", "condition": "b"}], ["f"])
    sent = [encode_tuple(r) for r in rows(9, 1000)]
    ev, got = run(binary, [stream_bytes(0, sent)], 1)
    assert ev["event"] == "done", ev
    assert sorted(got[0]) == sorted(t for t in sent if decode_tuple(t)["b"] is True)


def test_project_then_shuffle_reencodes_to_the_hashed_port(env):
    ops = [{"kind": "project", "name": "p", "input": "r",
            "columns": [{"name": "k", "expr": "coalesce(lower(s), 'none')"}, {"name": "l", "expr": "l"}]},
           {"kind": "shuffle", "name": "s", "input": "p", "keys": ["k"], "partitions": 3}]
    binary, layout = relay_binary(env, ops, ["p", "s"], 3)
    src = rows(3, 900)
    ev, got = run(binary, [stream_bytes(0, [encode_tuple(r) for r in src])], 3)
    assert ev["event"] == "done", ev
    fields = [(f.name, str(f.type), f.offset) for f in layout.fields]
    seen = []
    for p, tuples in enumerate(got):
        for t in tuples:
            r = decode_tuple(t, fields)
            assert hashing.partition([r["k"]], 3, ["string"]) == p
            seen.append((r["k"], r["l"]))
    want = [("none" if r["s"] is None else r["s"].lower(), r["l"]) for r in src]
    assert sorted(seen, key=repr) == sorted(want, key=repr)
