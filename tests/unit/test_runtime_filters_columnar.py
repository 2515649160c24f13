"""Runtime filters in the ORC and Parquet scans (docs/runtime-filters.md; ncas/runtime/scan_arrow.cpp):
a filter on one integer key (int32, int64, date, an int64 column Parquet stores as a dictionary)
is tested on the key's Arrow values, any other (a decimal key) through converted tiles
(jgr_rf_tile); either way the scan keeps exactly the rows the filter's rule keeps (a key that is
not NULL, in the key's range, whose jg_hash v1 the Bloom filter may hold), with several filters at
once, NULL keys, more than one batch and two threads, and counts what it tested and removed as
the row-at-a-time test counts."""
from __future__ import annotations

import datetime as dt
import decimal
import random
import struct

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from jumpgate.contract.ntf import generate_ntf
from jumpgate.dataflow.request import parse_request
from jumpgate.ncas.software.arrow_cpp import unavailable_reason
from jumpgate.ncas.software.build import build_nca
from jumpgate.ncas.software.codegen import generate_scan_query
from jumpgate.ncas.software.hashing import row_hash

from .fixtures.columnar import cache_dir
from .fixtures.runtime_harness import NcaProcess, Receiver, decode_tuple, token

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=f"Arrow C++: {unavailable_reason()}")

SALTS = (0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31)
M32 = (1 << 32) - 1
EPOCH = dt.date(1970, 1, 1)
N = 6000
# The keys (column, contract type); slot s of the generated code filters on column s.
KEYS = [("k64", "int64"), ("k32", "int32"), ("kd", "date"), ("kdict", "int64"), ("kdec", "decimal(12,2)")]
SCHEMA = [*KEYS, ("v", "int64")]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return cache_dir(tmp_path_factory)


def unscaled(t: str, x: object) -> int:
    """A key as jg_val holds it: dates as days, decimals unscaled."""
    if t == "date":
        return (x - EPOCH).days  # type: ignore[operator]
    if t.startswith("decimal"):
        return int(x.scaleb(2))  # type: ignore[union-attr]
    return int(x)  # type: ignore[call-overload]


def table(seed: int) -> tuple[pa.Table, list[dict]]:
    rnd = random.Random(seed)

    def maybe(v):
        return None if rnd.random() < 0.05 else v

    rows = [{"k64": maybe(rnd.randint(-10**12, 10**12) if rnd.random() < 0.5 else rnd.randint(0, 3000)),
             "k32": maybe(rnd.randint(-2**31, 2**31 - 1) if rnd.random() < 0.3 else rnd.randint(-500, 500)),
             "kd": maybe(EPOCH + dt.timedelta(days=rnd.randint(9000, 11000))),
             "kdict": maybe(rnd.choice([7, 11, 13, -2**40, 2**50, 0])),
             "kdec": maybe(decimal.Decimal(rnd.randint(-5000, 5000)).scaleb(-2)),
             "v": i} for i in range(N)]
    types = {"k64": pa.int64(), "k32": pa.int32(), "kd": pa.date32(), "kdict": pa.int64(),
             "kdec": pa.decimal128(12, 2), "v": pa.int64()}
    return pa.table({c: pa.array([r[c] for r in rows], t) for c, t in types.items()}), rows


def make_filter(t: str, build: list[object], bloom: bool = True) -> tuple[str, dict]:
    """The blob (hex) a join's build side would send for these build keys of contract type `t`
    (jg_rfilter.h), and the filter as a dict for `passes`."""
    keys = [unscaled(t, b) for b in build]
    nblocks = max(1, (len(keys) * 10 + 255) // 256) if bloom else 0
    words = [0] * (8 * nblocks)
    for k in keys if nblocks else ():
        h = row_hash([k], ["int64"])
        b = ((h >> 32) * nblocks) >> 32
        for i, s in enumerate(SALTS):
            words[8 * b + i] |= 1 << ((((h & M32) * s) & M32) >> 27)
    has = bool(keys)
    lo, hi = (min(keys), max(keys)) if keys else (0, 0)
    blob = struct.pack("<IIIIQ", 0x46524746, 1, 1, nblocks, len(keys)) + struct.pack("<Qqq", int(has), lo, hi)
    blob += struct.pack(f"<{len(words)}I", *words)
    return blob.hex(), {"has": has, "lo": lo, "hi": hi, "nblocks": nblocks, "words": words}


def passes(f: dict, t: str, x: object) -> bool:
    """jg_rf_test's rule for one key."""
    if x is None:
        return False
    k = unscaled(t, x)
    if f["has"] and not f["lo"] <= k <= f["hi"]:
        return False
    if not f["nblocks"]:
        return True
    h = row_hash([k], ["int64"])
    b = ((h >> 32) * f["nblocks"]) >> 32
    return all(f["words"][8 * b + i] >> ((((h & M32) * s) & M32) >> 27) & 1 for i, s in enumerate(SALTS))


def scan_binary(tmp_path, fmt: str, cache):
    ops = [{"kind": "read", "name": "r", "path": "*", "format": fmt,
            "schema": [{"name": n, "type": t} for n, t in SCHEMA]},
           {"kind": "project", "name": "p", "input": "r", "columns": [{"name": "v", "expr": "v"}]},
           {"kind": "send", "name": "o", "input": "p", "transport": "tcp", "host": "127.0.0.1", "port": 9}]
    plan = parse_request({"operations": ops}, tmp_path)
    scan_ops = [op for op in plan.ops if op.kind != "send"]
    layout = generate_ntf(plan.schemas["p"])
    query = generate_scan_query(scan_ops, layout, runtime_filters=[(s,) for s in range(len(KEYS))])
    return build_nca(query, f"scan_{fmt}", cache).path, [(f.name, "int64", f.offset) for f in layout.fields]


def run(binary, fields, files, filters: dict[int, str], threads: int) -> tuple[dict, list[int]]:
    r = Receiver()
    nca = NcaProcess(binary)
    try:
        nca.configure([str(f) for f in files], [(0, r.port, 0, threads)], threads, {"scan.batch_rows": "1000"})
        for slot, blob in filters.items():
            nca.send(f"rfilter {slot} {token(blob)}")
        nca.send("execute 0")
        ev = nca.event("done")
        got = sorted(decode_tuple(t, fields)["v"] for s in r.streams(threads) for t in s.tuples)
        assert nca.close() == 0
        return ev, got
    finally:
        nca.kill()
        r.close()


@pytest.fixture(scope="module", params=["orc", "parquet"])
def case(request, tmp_path_factory, cache):
    fmt = request.param
    d = tmp_path_factory.mktemp(f"rf-{fmt}")
    t, rows = table(3)
    path = d / f"t.{fmt}"
    if fmt == "orc":
        orc.write_table(t, str(path), stripe_size=4096, batch_size=2000)
    else:
        pq.write_table(t, str(path), row_group_size=2500, use_dictionary=["kdict"])
        assert "RLE_DICTIONARY" in str(pq.ParquetFile(path).metadata.row_group(0).column(3).encodings)
    binary, fields = scan_binary(d, fmt, cache)
    return binary, fields, [path], rows


def build_keys(rows: list[dict], col: str, seed: int) -> list[object]:
    """Some of the column's values (the rows holding them must all pass) and some others."""
    rnd = random.Random(seed)
    present = sorted({r[col] for r in rows if r[col] is not None}, key=str)
    return rnd.sample(present, max(1, len(present) // 4))


@pytest.mark.parametrize("slot", range(len(KEYS)))
@pytest.mark.parametrize("threads", [1, 2])
def test_one_filter_keeps_exactly_the_rows_its_rule_keeps(case, slot, threads):
    binary, fields, files, rows = case
    col, t = KEYS[slot]
    build = build_keys(rows, col, slot)
    blob, f = make_filter(t, build)
    ev, got = run(binary, fields, files, {slot: blob}, threads)
    want = sorted(r["v"] for r in rows if passes(f, t, r[col]))
    assert got == want, f"{col}: {len(got)} rows kept, {len(want)} expected"
    must = {r["v"] for r in rows if r[col] in set(build)}
    assert must <= set(got)  # no false negatives
    assert 0 < len(got) < N
    st = ev["stats"]
    assert (st["rf_rows_tested"], st["rf_rows_removed"]) == (N, N - len(got)), st


@pytest.mark.parametrize("threads", [1, 2])
def test_every_filter_at_once_and_a_range_only_one(case, threads):
    """All five filters installed (four tested on Arrow values, the decimal one on tiles), one of
    them without a Bloom filter; then the empty build side, which passes nothing."""
    binary, fields, files, rows = case
    # build sets of every third row's keys, so that some rows pass all five
    made = {s: make_filter(t, [r[c] for r in rows if r[c] is not None and r["v"] % 3 == 0], bloom=s != 2)
            for s, (c, t) in enumerate(KEYS)}
    ev, got = run(binary, fields, files, {s: b for s, (b, _) in made.items()}, threads)
    want = sorted(r["v"] for r in rows if all(passes(made[s][1], t, r[c]) for s, (c, t) in enumerate(KEYS)))
    assert got == want
    assert {r["v"] for r in rows if r["v"] % 3 == 0 and all(r[c] is not None for c, _ in KEYS)} <= set(got)
    assert ev["stats"]["rf_rows_removed"] > 0
    ev, got = run(binary, fields, files, {0: make_filter("int64", [])[0]}, threads)
    assert got == [] and ev["stats"]["rf_rows_removed"] == N
