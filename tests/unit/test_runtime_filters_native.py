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

from .fixtures.c_driver import build_c_driver
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


# ------------------------------------------------------------------ a columnar scan's test of a tile

# jgr_rf_tile (rfilter.c), which the ORC and Parquet scans call on a tile of rows, against each row
# put through the filters on its own (docs/runtime-filters.md): three filters over int64, string,
# float64 and date keys (one of them ranges only), rows with NULL keys, rows made of build tuples
# (which must pass), tiles of 1 to 2500 rows, rows wider than their keys. Prints the rows decided
# differently, the build rows dropped, and the rows tested and removed as counted and as expected.
TILE_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jg.h"
#include "jg_hash.h"
#include "jg_rfilter.h"
#include "jgrt.h"

/* Columns: 0 int64, 1 string, 2 float64, 3 date. Filters: slot 0 on (0), slot 1 on (1, 2),
 * slot 2 on (3, 0); each slot's filter is made from its own set of build key tuples. */
static const jg_column cols[4] = {{"i", 1, JG_INT64, 0, 0}, {"s", 1, JG_STRING, 0, 0},
                                  {"f", 1, JG_FLOAT64, 0, 0}, {"d", 1, JG_DATE, 0, 0}};
static const uint32_t k0[] = {0}, k1[] = {1, 2}, k2[] = {3, 0};
static const uint32_t nkeys[] = {1, 2, 2};
static const uint32_t *const keys[] = {k0, k1, k2};
static int row_fn(jg_ctx *c, const jg_val *r) { (void)c; (void)r; return 0; }
const jg_query JG_QUERY = {.columns = cols, .ncolumns = 4, .noutputs = 0, .row = row_fn,
                           .nrf = 3, .rf_nkeys = nkeys, .rf_keys = keys};

static uint64_t rng;
static uint64_t next(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

#define NB 300   /* build key tuples per filter */
#define NR 5000  /* probe rows */
static char strs[NR + 3 * NB][16];

static uint64_t key_hash(const jg_val *row, uint32_t s) {
  uint64_t h = JG_HASH_SEED;
  for (uint32_t k = 0; k < nkeys[s]; k++) {
    const jg_val *v = &row[keys[s][k]];
    switch (cols[keys[s][k]].type) {
      case JG_FLOAT64: h = jg_hash_combine(h, jg_hash_float(v->v.f)); break;
      case JG_STRING: h = jg_hash_combine(h, jg_hash_bytes(v->v.s.p, v->v.s.n)); break;
      default: h = jg_hash_combine(h, jg_hash_int(v->v.i)); break;
    }
  }
  return h;
}

static void random_row(jg_val *r, int i, int nulls) {
  r[0].v.i = (int64_t)(next() % 2000) - 500;
  snprintf(strs[i], sizeof strs[i], "s%d", (int)(next() % 1000));
  r[1].v.s.p = strs[i], r[1].v.s.n = (uint32_t)strlen(strs[i]);
  r[2].v.f = (double)(next() % 100) / 4.0;
  r[3].v.i = 18000 + (int64_t)(next() % 400);
  for (int c = 0; c < 4; c++) r[c].null = nulls && next() % 20 == 0;
}

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  rng = strtoull(argv[1], NULL, 10);
  int stride = atoi(argv[2]); /* jg_val per row, >= 4 */
  static jg_val build[3][NB][4];
  jg_rfilter f[3];
  for (int s = 0; s < 3; s++) {
    memset(&f[s], 0, sizeof f[s]);
    f[s].nkeys = nkeys[s];
    f[s].rows = NB;
    f[s].nblocks = s == 2 ? 0 : jg_rf_blocks_for(NB, 1 << 20); /* slot 2: ranges only */
    f[s].has_range = calloc(2, 1), f[s].min = calloc(2, 8), f[s].max = calloc(2, 8);
    f[s].blocks = f[s].nblocks ? calloc(f[s].nblocks, JG_RF_BLOCK) : NULL;
    for (uint32_t k = 0; k < nkeys[s]; k++) f[s].min[k] = INT64_MAX, f[s].max[k] = INT64_MIN;
    for (int b = 0; b < NB; b++) {
      random_row(build[s][b], NR + s * NB + b, 0);
      if (f[s].nblocks) jg_rf_insert(&f[s], key_hash(build[s][b], s));
      for (uint32_t k = 0; k < nkeys[s]; k++) {
        uint8_t t = cols[keys[s][k]].type;
        if (t == JG_STRING || t == JG_FLOAT64) continue;
        int64_t v = build[s][b][keys[s][k]].v.i;
        f[s].has_range[k] = 1;
        if (v < f[s].min[k]) f[s].min[k] = v;
        if (v > f[s].max[k]) f[s].max[k] = v;
      }
    }
    size_t n = jg_rf_blob_size(f[s].nkeys, f[s].nblocks);
    uint8_t *blob = malloc(n);
    jg_rf_write(&f[s], blob);
    char *hex = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) sprintf(hex + 2 * i, "%02x", blob[i]);
    jgr_error err = {0};
    if (jgr_rf_install((uint32_t)s, hex, &err) != 0) { printf("install failed\n"); return 1; }
  }
  /* probe rows: random ones, with NULLs, and every tenth one a build tuple of each slot (a row
   * that must pass every filter: no false negatives) */
  jg_val *rows = calloc((size_t)NR * stride, sizeof(jg_val));
  char *must = calloc(NR, 1);
  for (int i = 0; i < NR; i++) {
    jg_val *r = rows + (size_t)i * stride;
    random_row(r, i, 1);
    if (i % 10 == 0) {
      int b = (int)(next() % NB);
      r[0] = build[0][b][0];
      r[1] = build[1][b][1], r[2] = build[1][b][2];
      r[3] = build[2][b][3];
      r[0].null = r[1].null = r[2].null = r[3].null = 0;
      /* slot 2 also keys on column 0, which slot 0's tuple set: keep it only if in slot 2's range */
      must[i] = r[0].v.i >= f[2].min[1] && r[0].v.i <= f[2].max[1];
    }
  }
  jg_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  uint64_t want_tested = 0, want_removed = 0, mismatches = 0, false_neg = 0, kept_total = 0;
  static uint32_t keep[4096];
  const int sizes[] = {1, 7, 64, 1000, JGR_RF_TILE_MAX, 2500}; /* 2500: more than one pass */
  int i = 0, t = 0;
  while (i < NR) {
    int m = sizes[t++ % 6];
    if (m > NR - i) m = NR - i;
    /* the reference: each row on its own through the filters in slot order */
    char pass[4096];
    for (int r = 0; r < m; r++) {
      const jg_val *row = rows + (size_t)(i + r) * stride;
      pass[r] = 1;
      for (uint32_t s = 0; s < 3 && pass[r]; s++) {
        want_tested++;
        int ok = 1;
        for (uint32_t k = 0; k < nkeys[s]; k++) {
          const jg_val *v = &row[keys[s][k]];
          if (v->null) ok = 0;
          else if (f[s].has_range[k] && (v->v.i < f[s].min[k] || v->v.i > f[s].max[k])) ok = 0;
        }
        if (ok) ok = jg_rf_maybe(&f[s], key_hash(row, s));
        if (!ok) pass[r] = 0, want_removed++;
      }
    }
    int n = jgr_rf_tile(&ctx, rows + (size_t)i * stride, (size_t)stride, m, keep, 0);
    int j = 0;
    for (int r = 0; r < m; r++) {
      int got = j < n && keep[j] == (uint32_t)r;
      if (got) j++;
      mismatches += got != pass[r];
      false_neg += must[i + r] && !got;
    }
    if (j != n) mismatches++;
    kept_total += (uint64_t)n;
    i += m;
  }
  printf("%llu %llu %llu %llu %llu %llu %llu\n", (unsigned long long)mismatches, (unsigned long long)false_neg,
         (unsigned long long)ctx.stats.rf_tested, (unsigned long long)want_tested,
         (unsigned long long)ctx.stats.rf_removed, (unsigned long long)want_removed, (unsigned long long)kept_total);
  return 0;
}
"""


@pytest.fixture(scope="module")
def tile_binary():
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    return build_c_driver("rftile", TILE_PROGRAM, ("rfilter.c", "util.c"))


@pytest.mark.parametrize("stride", [4, 7])
def test_a_tile_keeps_the_rows_each_row_alone_keeps(tile_binary, stride):
    for seed in (1, 2, 3):
        out = subprocess.run([str(tile_binary), str(seed), str(stride)], check=True, capture_output=True,
                             text=True).stdout.split()
        mismatches, false_neg, tested, want_tested, removed, want_removed, kept = map(int, out)
        assert mismatches == 0, f"{mismatches} rows decided differently from the row-at-a-time rule"
        assert false_neg == 0, f"{false_neg} rows made of build tuples were dropped"
        assert (tested, removed) == (want_tested, want_removed)
        assert 0 < kept < 5000 and removed > 0  # the case has rows both ways


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

