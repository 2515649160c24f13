/* Runtime filters (docs/runtime-filters.md): what a hash join's build side tells the scans feeding
 * its probe side, so that they drop rows that cannot match before encoding them as NTF.
 *
 * A filter is one blob, made by the join (join.c) when its build phase ends and handed by the
 * control plane to each probe-side scan (the `rfilter SLOT HEX` command, control.c), which tests
 * every row that passed its own filters (jg_rf_test, rfilter.c). It holds, for a join on K keys:
 *   - per key whose type is integral (boolean, int32, int64, date, decimal): the smallest and the
 *     largest build value (a key range); a row whose key lies outside cannot match;
 *   - a split-block Bloom filter over jg_hash v1 of the key tuple (docs/hashing.md), the hash the
 *     join's table is keyed by: 256-bit blocks of eight 32-bit words, one bit set per word (the
 *     layout of Parquet's SBBF); the block is chosen by the hash's high 32 bits, the bits by its
 *     low 32 bits times eight odd salts. About 10 bits per distinct key: ~1 % false positives,
 *     and never a false negative (every inserted hash tests positive). No Bloom (nblocks = 0)
 *     when it would exceed the join's `rf.max_bytes`: then only the ranges filter.
 * A build side without rows gives a filter that passes nothing (no range, an empty Bloom).
 *
 * Blob layout (little-endian, 8-aligned):
 *   u32 magic "JGRF" (0x46524746), u32 version (1), u32 nkeys, u32 nblocks, u64 build rows,
 *   per key: u64 has_range (0/1), i64 min, i64 max,
 *   nblocks * 32 bytes of Bloom blocks.
 * Header-only: used by join.c, rfilter.c, scan_arrow.cpp and the C test of no false negatives. */
#ifndef JG_RFILTER_H
#define JG_RFILTER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JG_RF_MAGIC 0x46524746u
#define JG_RF_VERSION 1u
#define JG_RF_HEADER 24u
#define JG_RF_KEY 24u
#define JG_RF_BLOCK 32u
#define JG_RF_BITS_PER_KEY 10u

typedef struct jg_rfilter {
  uint32_t nkeys, nblocks;
  uint64_t rows;
  uint8_t *has_range; /* nkeys */
  int64_t *min, *max; /* nkeys */
  uint32_t *blocks;   /* nblocks * 8 words; NULL when nblocks = 0 */
} jg_rfilter;

static const uint32_t jg_rf_salt[8] = {0x47b6137bu, 0x44974d91u, 0x8824ad5bu, 0xa2b7289du,
                                       0x705495c7u, 0x2df1424bu, 0x9efc4947u, 0x5c6bfb31u};

/* Bloom blocks for `distinct` keys, at most `max_bytes` of them; 0 = no Bloom. */
static inline uint32_t jg_rf_blocks_for(uint64_t distinct, uint64_t max_bytes) {
  uint64_t bits = distinct * JG_RF_BITS_PER_KEY;
  uint64_t blocks = (bits + 255) / 256;
  if (blocks < 1) blocks = 1;
  if (blocks * JG_RF_BLOCK > max_bytes || blocks > UINT32_MAX / 2) return 0;
  return (uint32_t)blocks;
}

/* The block of `hash`: chosen by its high 32 bits. */
static inline uint32_t jg_rf_block_index(const jg_rfilter *f, uint64_t hash) {
  return (uint32_t)(((hash >> 32) * (uint64_t)f->nblocks) >> 32);
}

static inline uint32_t *jg_rf_block(const jg_rfilter *f, uint64_t hash) {
  return f->blocks + 8 * (size_t)jg_rf_block_index(f, hash);
}

/* 1 when block `w` has every bit of the hash whose low 32 bits are `x`. */
static inline int jg_rf_block_has(const uint32_t *w, uint32_t x) {
  uint32_t miss = 0;
  for (int i = 0; i < 8; i++) miss |= ~w[i] & (1u << ((x * jg_rf_salt[i]) >> 27));
  return miss == 0;
}

static inline void jg_rf_insert(jg_rfilter *f, uint64_t hash) {
  uint32_t *w = jg_rf_block(f, hash), x = (uint32_t)hash;
  for (int i = 0; i < 8; i++) w[i] |= 1u << ((x * jg_rf_salt[i]) >> 27);
}

/* 1 when `hash` may be in the set (always, when there is no Bloom). */
static inline int jg_rf_maybe(const jg_rfilter *f, uint64_t hash) {
  if (!f->nblocks) return 1;
  return jg_rf_block_has(jg_rf_block(f, hash), (uint32_t)hash);
}

static inline size_t jg_rf_blob_size(uint32_t nkeys, uint32_t nblocks) {
  return JG_RF_HEADER + (size_t)JG_RF_KEY * nkeys + (size_t)JG_RF_BLOCK * nblocks;
}

/* Serialise `f` into `out` (jg_rf_blob_size bytes). */
static inline void jg_rf_write(const jg_rfilter *f, uint8_t *out) {
  uint32_t h[4] = {JG_RF_MAGIC, JG_RF_VERSION, f->nkeys, f->nblocks};
  memcpy(out, h, 16);
  memcpy(out + 16, &f->rows, 8);
  uint8_t *p = out + JG_RF_HEADER;
  for (uint32_t k = 0; k < f->nkeys; k++, p += JG_RF_KEY) {
    uint64_t has = f->has_range[k];
    memcpy(p, &has, 8);
    memcpy(p + 8, &f->min[k], 8);
    memcpy(p + 16, &f->max[k], 8);
  }
  if (f->nblocks) memcpy(p, f->blocks, (size_t)JG_RF_BLOCK * f->nblocks);
}

/* Parse a blob into `f` (malloc'd arrays; jg_rf_free releases them). 0, or -1 with *why set. */
static inline int jg_rf_read(jg_rfilter *f, const uint8_t *in, size_t n, const char **why) {
  memset(f, 0, sizeof *f);
  uint32_t h[4];
  if (n < JG_RF_HEADER) return *why = "shorter than its header", -1;
  memcpy(h, in, 16);
  if (h[0] != JG_RF_MAGIC || h[1] != JG_RF_VERSION) return *why = "not a version 1 runtime filter", -1;
  if (h[2] == 0 || h[2] > 64) return *why = "bad key count", -1;
  if (jg_rf_blob_size(h[2], h[3]) != n) return *why = "length does not match its header", -1;
  f->nkeys = h[2];
  f->nblocks = h[3];
  memcpy(&f->rows, in + 16, 8);
  f->has_range = (uint8_t *)calloc(f->nkeys, 1);
  f->min = (int64_t *)calloc(f->nkeys, 8);
  f->max = (int64_t *)calloc(f->nkeys, 8);
  if (f->nblocks) f->blocks = (uint32_t *)aligned_alloc(64, ((size_t)JG_RF_BLOCK * f->nblocks + 63) & ~(size_t)63);
  if (!f->has_range || !f->min || !f->max || (f->nblocks && !f->blocks)) return *why = "out of memory", -1;
  const uint8_t *p = in + JG_RF_HEADER;
  for (uint32_t k = 0; k < f->nkeys; k++, p += JG_RF_KEY) {
    uint64_t has;
    memcpy(&has, p, 8);
    f->has_range[k] = has != 0;
    memcpy(&f->min[k], p + 8, 8);
    memcpy(&f->max[k], p + 16, 8);
  }
  if (f->nblocks) memcpy(f->blocks, p, (size_t)JG_RF_BLOCK * f->nblocks);
  return 0;
}

static inline void jg_rf_free(jg_rfilter *f) {
  free(f->has_range);
  free(f->min);
  free(f->max);
  free(f->blocks);
  memset(f, 0, sizeof *f);
}

#endif /* JG_RFILTER_H */
