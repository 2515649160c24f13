/* jg_hash v1: the hash of a row's key values, shared by the shuffle (which destination a row goes
 * to), the hash join and the aggregation. It is part of Jumpgate's public behaviour: other systems
 * reproduce it to co-partition their data with Jumpgate's shuffle output. docs/hashing.md
 * specifies it and jumpgate/ncas/software/hashing.py is the reference implementation in Python;
 * tests check both agree.
 *
 *   value hash  v(x):  NULL                           -> 0x5bd1e9955bd1e995
 *                      boolean/int32/int64/date/decimal -> fmix64((uint64)(int64) x)
 *                          (decimals by their unscaled value at the key's scale)
 *                      float64                        -> fmix64(bits(x)), with -0.0 read as 0.0
 *                                                        and every NaN as 0x7ff8000000000000
 *                      string                         -> fmix64(FNV-1a-64 of its UTF-8 bytes)
 *   row hash    h = 0x9e3779b97f4a7c15; for each key k in order:
 *                 h = fmix64(h ^ (v(k) + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)))
 *   partition   p = h mod P
 *
 * fmix64 is MurmurHash3's 64-bit finalizer. All arithmetic is on uint64 with wrap-around.
 */
#ifndef JG_HASH_H
#define JG_HASH_H

#include <stdint.h>
#include <string.h>

#define JG_HASH_SEED 0x9e3779b97f4a7c15ULL
#define JG_HASH_NULL 0x5bd1e9955bd1e995ULL

static inline uint64_t jg_fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

static inline uint64_t jg_hash_int(int64_t x) { return jg_fmix64((uint64_t)x); }

/* A wide decimal (p > 18, 128-bit unscaled): as jg_hash_int when the value fits int64, so that
 * it hashes as the same value of a narrow decimal of its scale; else both halves combined. */
static inline uint64_t jg_hash_i128(__int128 x) {
  if (x >= INT64_MIN && x <= INT64_MAX) return jg_hash_int((int64_t)x);
  return jg_fmix64(jg_fmix64((uint64_t)(x >> 64)) ^ (uint64_t)x);
}

static inline uint64_t jg_hash_float(double x) {
  uint64_t bits;
  if (x == 0.0) x = 0.0; /* -0.0 == 0.0 */
  if (x != x) {
    bits = 0x7ff8000000000000ULL;
  } else {
    memcpy(&bits, &x, 8);
  }
  return jg_fmix64(bits);
}

static inline uint64_t jg_hash_bytes(const char *p, uint32_t n) {
  uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
  for (uint32_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 0x100000001b3ULL;
  }
  return jg_fmix64(h);
}

static inline uint64_t jg_hash_combine(uint64_t h, uint64_t v) {
  return jg_fmix64(h ^ (v + JG_HASH_SEED + (h << 6) + (h >> 2)));
}

#endif /* JG_HASH_H */
