"""Runtime filters in the native runtime (docs/runtime-filters.md): the split-block Bloom filter of
ncas/runtime/jg_rfilter.h has no false negatives (and few false positives); the hash join's build
phase makes a filter (`param rf.out 1`, the `rfilter` event) that every build key passes, with each
integral key's range; a scan given it (`rfilter SLOT HEX`) drops exactly rows that cannot match,
after its own filter, and counts them."""
from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess

import pytest

from jumpgate.contract.ntf import generate_ntf
from jumpgate.ncas.software.build import build_nca, runtime_dir
from jumpgate.ncas.software.codegen.golden import join_chain, scan_chain
from jumpgate.ncas.software.codegen.join import generate_join_query
from jumpgate.ncas.software.codegen.scan import generate_scan_query
from jumpgate.ncas.software.hashing import row_hash

from .fixtures.runtime_harness import NcaProcess, Receiver, decode_tuple, encode_tuple, token
from .test_join_runtime import feed, fields

SALTS = (0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31)
M32 = (1 << 32) - 1

BLOOM_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "jg_hash.h"
#include "jg_rfilter.h"

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int main(int argc, char **argv) {
  uint64_t n = strtoull(argv[1], NULL, 10), others = strtoull(argv[2], NULL, 10), seed = strtoull(argv[3], NULL, 10);
  jg_rfilter f = {0};
  f.nkeys = 1;
  f.rows = n;
  f.nblocks = jg_rf_blocks_for(n, (uint64_t)1 << 30);
  f.has_range = calloc(1, 1);
  f.min = calloc(1, 8);
  f.max = calloc(1, 8);
  f.blocks = calloc(f.nblocks, JG_RF_BLOCK);
  uint64_t s = seed;
  for (uint64_t i = 0; i < n; i++) jg_rf_insert(&f, jg_hash_combine(JG_HASH_SEED, jg_hash_int((int64_t)splitmix(&s))));
  size_t size = jg_rf_blob_size(f.nkeys, f.nblocks);
  uint8_t *blob = malloc(size);
  jg_rf_write(&f, blob);
  jg_rfilter g;
  const char *why = "";
  if (jg_rf_read(&g, blob, size, &why) != 0) { printf("read failed: %s\n", why); return 1; }
  if (jg_rf_read(&g, blob, size - 1, &why) == 0) { printf("a short blob was accepted\n"); return 1; }
  jg_rf_read(&g, blob, size, &why);
  uint64_t missing = 0, false_pos = 0;
  s = seed;
  for (uint64_t i = 0; i < n; i++)
    missing += !jg_rf_maybe(&g, jg_hash_combine(JG_HASH_SEED, jg_hash_int((int64_t)splitmix(&s))));
  uint64_t t = seed ^ 0x5555555555555555ULL;
  for (uint64_t i = 0; i < others; i++)
    false_pos += jg_rf_maybe(&g, jg_hash_combine(JG_HASH_SEED, jg_hash_int((int64_t)splitmix(&t))));
  printf("%llu %llu %u\n", (unsigned long long)missing, (unsigned long long)false_pos, g.nblocks);
  return 0;
}
"""


@pytest.fixture(scope="module")
def bloom_binary(tmp_path_factory):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("bloom")
    (d / "bloom.c").write_text(BLOOM_PROGRAM)
    subprocess.run([cc, "-O2", "-std=c11", f"-I{runtime_dir()}", str(d / "bloom.c"), "-o", str(d / "bloom")],
                   check=True, capture_output=True)
    return d / "bloom"


@pytest.mark.parametrize("n", [1, 7, 1000, 200_000])
def test_bloom_filter_has_no_false_negatives(bloom_binary, n):
    for seed in (1, 2, 3):
        out = subprocess.run([str(bloom_binary), str(n), "200000", str(seed)], check=True, capture_output=True,
                             text=True).stdout.split()
        missing, false_pos, blocks = int(out[0]), int(out[1]), int(out[2])
        assert missing == 0, f"{missing} of {n} inserted keys were not found"
        assert blocks * 256 >= 10 * n  # about 10 bits per key
        assert false_pos / 200_000 < (0.03 if n >= 1000 else 0.01), false_pos


# ------------------------------------------------------------------ a Python reader of the blob


def parse_blob(blob: bytes) -> dict:
    magic, version, nkeys, nblocks, rows = struct.unpack_from("<IIIIQ", blob, 0)
    assert (magic, version) == (0x46524746, 1)
    keys = [struct.unpack_from("<Qqq", blob, 24 + 24 * k) for k in range(nkeys)]
    off = 24 + 24 * nkeys
    words = struct.unpack_from(f"<{8 * nblocks}I", blob, off)
    assert len(blob) == off + 32 * nblocks
    return {"rows": rows, "nblocks": nblocks, "ranges": [(bool(h), lo, hi) for h, lo, hi in keys], "words": words}


def maybe(f: dict, h: int) -> bool:
    """jg_rf_maybe in Python."""
    if not f["nblocks"]:
        return True
    b = ((h >> 32) * f["nblocks"]) >> 32
    x = h & M32
    return all(f["words"][8 * b + i] >> (((x * s) & M32) >> 27) & 1 for i, s in enumerate(SALTS))


# ------------------------------------------------------------------ the join makes it, a scan applies it

PROBE = {"pk": "int64", "ps": "string", "pv": "int64"}
BUILD = {"bk": "int64", "bs": "string"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "nca-cache"


def build_filter(cache, keys: list[int | None], join: dict, build=BUILD, params=None) -> tuple[dict, dict]:
    """Run a join's build phase over build rows with these keys; (the rfilter event, done event)."""
    ops, probe_schema, build_schema, layout = join_chain(PROBE, build, join)
    binary = build_nca(generate_join_query(ops, probe_schema, build_schema, layout), "join", cache).path
    bfields, bfixed = fields(generate_ntf(build_schema))
    rows = [encode_tuple({"bk": k, "bs": None if k is None else f"s{k}"}, bfields, bfixed) for k in keys]
    r = Receiver()
    nca = NcaProcess(binary, inputs=2)
    try:
        nca.configure(dests=[(0, r.port, 0, 1)], threads=2, expect=[(0, 2), (1, 1)],
                      params={"rf.out": "1", **(params or {})})
        nca.send("execute 0")
        for t in feed(nca.ports[0], [rows[0::2], rows[1::2]]):
            t.join()
        rf = nca.event("rfilter")
        done = nca.event("done")
        return rf, done
    finally:
        nca.kill()
        r.close()


def test_join_build_makes_a_filter_every_build_key_passes(cache):
    rng = random.Random(7)
    keys = rng.sample(range(-10**12, 10**12), 5000) + [None, None]
    rf, done = build_filter(cache, keys, {"build_keys": ["bk"], "probe_keys": ["pk"]})
    assert rf["rows"] == 5000  # NULL keys are not stored: they match nothing
    f = parse_blob(bytes.fromhex(rf["data"]))
    assert f["rows"] == 5000 and f["nblocks"] > 0
    present = [k for k in keys if k is not None]
    assert f["ranges"] == [(True, min(present), max(present))]
    assert all(maybe(f, row_hash([k], ["int64"])) for k in present)
    others = [k for k in (rng.randrange(-10**12, 10**12) for _ in range(20000)) if k not in set(present)]
    assert sum(maybe(f, row_hash([k], ["int64"])) for k in others) / len(others) < 0.03
    assert done["stats"]["rf_bytes"] == len(rf["data"]) // 2


def test_multi_key_filter_hashes_the_key_tuple(cache):
    build = {"bk": "int64", "bs": "string"}
    keys = list(range(100, 400))
    rf, _ = build_filter(cache, keys, {"build_keys": ["bk", "bs"], "probe_keys": ["pk", "ps"]}, build=build)
    f = parse_blob(bytes.fromhex(rf["data"]))
    assert f["ranges"][0] == (True, 100, 399)
    assert not f["ranges"][1][0]  # a string key has no range
    assert all(maybe(f, row_hash([k, f"s{k}"], ["int64", "string"])) for k in keys)


def test_too_large_a_build_side_sends_only_the_range(cache):
    rf, _ = build_filter(cache, list(range(1000)), {"build_keys": ["bk"], "probe_keys": ["pk"]},
                         params={"rf.max_bytes": "64"})
    f = parse_blob(bytes.fromhex(rf["data"]))
    assert f["nblocks"] == 0 and f["ranges"] == [(True, 0, 999)]
    rf, _ = build_filter(cache, list(range(1000)),
                         {"build_keys": ["bs"], "probe_keys": ["ps"]}, params={"rf.max_bytes": "64"})
    assert rf["data"] is None  # a string key without a Bloom filter could remove nothing


def run_filtered_scan(cache, tmp_path, rows: list[dict], blob_hex: str | None, steps=()) -> tuple[dict, list[dict]]:
    ops, layout = scan_chain(PROBE, list(steps))
    binary = build_nca(generate_scan_query(ops, layout, runtime_filters=[(0,)]), "scan_json", cache).path
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = Receiver()
    nca = NcaProcess(binary)
    try:
        nca.configure([path], [(0, r.port, 0, 1)], 1)
        if blob_hex is not None:
            nca.send(f"rfilter 0 {token(blob_hex)}")
        nca.send("execute 0")
        done = nca.event("done")
        [stream] = r.streams(1)
        out_fields, _ = fields(layout)
        assert nca.close() == 0
        return done, [decode_tuple(t, out_fields) for t in stream.tuples]
    finally:
        nca.kill()
        r.close()


def test_scan_drops_only_rows_that_cannot_match(cache, tmp_path):
    rng = random.Random(11)
    build_keys = rng.sample(range(10**6), 2000)
    rf, _ = build_filter(cache, build_keys, {"build_keys": ["bk"], "probe_keys": ["pk"]})
    probe = [{"pk": k, "ps": "x", "pv": i} for i, k in enumerate(rng.sample(range(10**6), 20000) + build_keys)]
    probe += [{"pk": None, "ps": "null key", "pv": -1}, {"pk": 5 * 10**6, "ps": "out of range", "pv": -2}]
    done, got = run_filtered_scan(cache, tmp_path, probe, rf["data"])
    kept = {r["pk"] for r in got}
    assert set(build_keys) <= kept  # no false negatives through the whole path
    assert None not in kept and 5 * 10**6 not in kept
    stats = done["stats"]
    assert stats["runtime_filters"] == 1 and stats["rf_rows_tested"] == len(probe)
    assert stats["rf_rows_removed"] == len(probe) - len(got) > 18000
    assert stats["tuples_out"] == len(got)


def test_scan_applies_it_after_its_own_filter(cache, tmp_path):
    rf, _ = build_filter(cache, [1, 2, 3], {"build_keys": ["bk"], "probe_keys": ["pk"]})
    probe = [{"pk": k, "ps": "x", "pv": k} for k in range(10)]
    done, got = run_filtered_scan(cache, tmp_path, probe, rf["data"], steps=[("filter", "pv <> 2")])
    assert sorted(r["pk"] for r in got) == [1, 3]
    assert done["stats"]["rf_rows_tested"] == 9  # the row its own filter dropped is not tested


def test_scan_without_a_filter_keeps_every_row(cache, tmp_path):
    probe = [{"pk": k, "ps": "x", "pv": k} for k in range(10)]
    done, got = run_filtered_scan(cache, tmp_path, probe, None)
    assert len(got) == 10 and "rf_rows_removed" not in done["stats"]


def test_an_empty_build_side_passes_nothing(cache, tmp_path):
    rf, _ = build_filter(cache, [], {"build_keys": ["bk"], "probe_keys": ["pk"]})
    done, got = run_filtered_scan(cache, tmp_path, [{"pk": k, "ps": "x", "pv": k} for k in range(10)], rf["data"])
    assert got == [] and done["stats"]["rf_rows_removed"] == 10


def test_a_bad_filter_is_refused(cache, tmp_path):
    ops, layout = scan_chain(PROBE, [])
    binary = build_nca(generate_scan_query(ops, layout, runtime_filters=[(0,)]), "scan_json", cache).path
    nca = NcaProcess(binary)
    try:
        nca.send("rfilter 0 00ff")
        assert nca.wait() != 0
    finally:
        nca.kill()

