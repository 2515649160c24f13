/* The aggregation hash table shared by the aggregation NCA and the scan with a fused aggregation.
 *
 * Split of work, as everywhere in the runtime: this header and agg_table.c hold what is the same
 * for every query (memory, growth, the partial mode's bound and evictions, merging the tables of
 * several workers, counters); generated code (ncas/templates/agg_query.c.j2) holds everything
 * that depends on the query's types: the entry struct, hashing the keys (jg_hash v1), the probe
 * loop with its key comparison, the accumulator updates and the output. So the row path has no
 * per-value type dispatch and no indirect calls; the runtime calls back into generated code only
 * to emit, copy or merge whole entries.
 *
 * The table: open addressing with linear probing over a power-of-two array of 8-byte slots, each
 * 0 (empty) or (upper 32 bits of the hash) << 32 | (entry index + 1); entries live densely in
 * insertion order in a separate array (so emitting, merging and clearing touch only used memory,
 * and growth rehashes slots without moving entries). Every entry starts with its 64-bit hash.
 * Load factor at most 1/4. String group keys of up to 12 bytes live in the entry (jg_key_str,
 * below); longer ones and min/max strings are copied into an arena of chunks owned by the table.
 *
 * Modes (contract §1): partial keeps the table within `param agg.table_bytes` (default 8 MiB,
 * counting slots, entries and arena chunks) and, when an insert would exceed it, emits every entry
 * as a partial row and clears the table (Spark's partial aggregation does the same). Complete
 * and final grow without bound; at the end of input the workers' tables are merged by hash
 * partition (worker w merges partition w of every table and emits it) so that each group is
 * emitted exactly once.
 */
#ifndef JG_AGG_H
#define JG_AGG_H

#include <stdint.h>

#include "jg.h"
#include "jg_hash.h"

#ifdef __cplusplus
extern "C" {
#endif

enum jg_agg_mode { JG_AGG_COMPLETE = 0, JG_AGG_PARTIAL = 1, JG_AGG_FINAL = 2 };

#define JG_AGG_DEFAULT_TABLE_BYTES (8u << 20)

typedef struct jg_agg_table jg_agg_table;

/* What the runtime needs to know about a query's entries (generated, one per query). */
typedef struct {
  uint32_t entry_size; /* sizeof the generated entry struct; its first member is `uint64_t hash` */
  int mode;            /* enum jg_agg_mode */
  /* two entries have equal group keys (merging tables) */
  int (*same_key)(const void *a, const void *b);
  /* fill fresh entry `dst` of table `t` with `src`'s keys and states (strings copied into t) */
  void (*copy)(jg_agg_table *t, void *dst, const void *src);
  /* merge `src`'s states into `dst` (same keys) */
  void (*merge)(jg_agg_table *t, void *dst, const void *src);
  /* write the output of one entry (partial states, or final values through the trailing
   * filter/project); JG_ROW_OK, or JG_ROW_ERROR after jg_fail */
  int (*emit)(jg_ctx *ctx, const void *entry);
} jg_agg_desc;

struct jg_agg_table {
  /* read by the generated probe loop */
  uint64_t *slots;
  uint64_t mask;
  char *entries;
  /* the rest is the runtime's */
  uint32_t count, limit; /* entries in use; entries allowed before the next growth */
  uint32_t entry_size;
  const jg_agg_desc *desc;
  jg_ctx *ctx;
  uint64_t bound;      /* partial mode: bytes; 0 = unbounded */
  uint64_t bytes;      /* slots + entries + arena chunks allocated */
  uint64_t peak_bytes;
  /* arena: a list of chunks; strings are bump-allocated from the current one */
  void *chunks;
  char *arena_at;
  uint64_t arena_left, chunk_size;
  /* counters for the `done` event */
  uint64_t flushes, emitted;
};

/* The calling worker's table for a query (created on first use; `param agg.table_bytes` is read
 * then). NULL after jg_fail (bad parameter, out of memory). */
jg_agg_table *jg_agg_open(jg_ctx *ctx, const jg_agg_desc *desc);

/* Add an entry for hash `h`, whose key the caller found absent at empty slot `slot`. `extra` is
 * the bytes of key strings the caller will copy with jg_agg_key_str (reserved contiguously, so
 * those copies never allocate). In partial mode this may first emit and clear the whole table.
 * Returns the zeroed entry with its hash set, or NULL after jg_fail. */
void *jg_agg_insert(jg_agg_table *t, uint64_t h, uint64_t slot, uint64_t extra);

/* Copy a key string into the space jg_agg_insert reserved. */
static inline jg_str jg_agg_key_str(jg_agg_table *t, jg_str s) {
  if (s.n == 0) return (jg_str){"", 0};
  jg_str out = {t->arena_at, s.n};
  __builtin_memcpy(t->arena_at, s.p, s.n);
  t->arena_at += s.n;
  t->arena_left -= s.n;
  return out;
}

/* A copy of `s` in the table's arena (copying entries between tables). */
jg_str jg_agg_store_str(jg_agg_table *t, jg_str s);

/* A string group key as an entry holds it, in the 16 bytes of a jg_str: its length, then the key
 * itself when it has at most 12 bytes (zero-padded), else its first 4 bytes and a pointer to all
 * of it in the table's arena (the representation of Umbra's and DuckDB's strings). Two keys
 * compare without touching other memory unless both are longer than 12 bytes and agree on length
 * and first 4 bytes: a probe that finds its group's entry needs no second cache miss for the key's
 * bytes, and no memcmp call. */
#define JG_KEY_INLINE 12u
typedef struct {
  uint32_t n;
  char b[12];
} __attribute__((aligned(8))) jg_key_str;

static inline const char *jg_key_ptr(const jg_key_str *k) {
  const char *p;
  __builtin_memcpy(&p, k->b + 4, 8);
  return p;
}

/* The key form of `s`; a key longer than 12 bytes points at s's own bytes (a probe's key). Built
 * in two 64-bit words from loads that stay within the string (overlapping ones for 4 to 12 bytes),
 * never from byte copies into memory, which the probe's 8-byte loads would then wait for. */
static inline uint64_t jg_key_load4(const char *p) {
  uint32_t x;
  __builtin_memcpy(&x, p, 4);
  return x;
}
static inline jg_key_str jg_key_of(jg_str s) {
  const uint64_t n = s.n;
  uint64_t w0 = n, w1 = 0; /* w0: length, then bytes 0..3; w1: bytes 4..11, or the pointer */
  if (n > JG_KEY_INLINE) {
    w0 |= jg_key_load4(s.p) << 32;
    __builtin_memcpy(&w1, &s.p, 8);
  } else if (n >= 8) {
    uint64_t a;
    __builtin_memcpy(&a, s.p, 8);
    w0 |= a << 32;
    w1 = (a >> 32) | (jg_key_load4(s.p + n - 4) >> (8 * (12 - n)) << 32);
  } else if (n >= 4) {
    w0 |= jg_key_load4(s.p) << 32;
    w1 = jg_key_load4(s.p + n - 4) >> (8 * (8 - n));
  } else if (n > 0) {
    const uint64_t b = (uint64_t)(uint8_t)s.p[0] | (uint64_t)(uint8_t)s.p[n >> 1] << 8 | (uint64_t)(uint8_t)s.p[n - 1] << 16;
    w0 |= (b & ((1ull << (8 * n)) - 1)) << 32;
  }
  jg_key_str k;
  __builtin_memcpy(&k, &w0, 8);
  __builtin_memcpy((char *)&k + 8, &w1, 8);
  return k;
}

static inline int jg_key_eq(const jg_key_str *a, const jg_key_str *b) {
  uint64_t x, y;
  __builtin_memcpy(&x, a, 8); /* length and first 4 bytes */
  __builtin_memcpy(&y, b, 8);
  if (x != y) return 0;
  if (a->n <= JG_KEY_INLINE) {
    __builtin_memcpy(&x, a->b + 4, 8);
    __builtin_memcpy(&y, b->b + 4, 8);
    return x == y;
  }
  return __builtin_memcmp(jg_key_ptr(a) + 4, jg_key_ptr(b) + 4, a->n - 4) == 0;
}

/* ------------------------------------------------------------------ the table's hash of a group
 * A table is private to its NCA (its workers merge their tables; no other process sees the
 * hashes), so with several keys, or a string key, it need not hash by jg_hash v1 (docs/
 * hashing.md), only well enough for the table (slot: the low bits; tag: the high 32): each key's
 * raw 64-bit words are mixed in with a multiply and a rotation, and one fmix64 ends it. jg_hash v1
 * takes an fmix64 per value and per combining step, four for TPC-H Q1's two one-byte strings, and
 * FNV-1a's multiply per byte of a string (a chain of dependent multiplies). A table grouped by one
 * non-string key still hashes with that key's value hash (one fmix64). */
static inline uint64_t jg_agg_mix(uint64_t h, uint64_t x) {
  h = (h ^ x) * 0x9e3779b97f4a7c15ULL;
  return h << 29 | h >> 35;
}

/* A float key's word: its bits, with -0.0 as 0.0 and every NaN as one NaN (keys compare so). */
static inline uint64_t jg_agg_float_word(double x) {
  uint64_t bits;
  if (x == 0.0) x = 0.0;
  if (x != x) return 0x7ff8000000000000ULL;
  __builtin_memcpy(&bits, &x, 8);
  return bits;
}

/* Mix in a string key from its key form `k` (jg_key_of(s)): a key of up to 12 bytes is the form's
 * two words; a longer one its length and first 4 bytes, then its bytes 8 at a time, the last 8
 * overlapping the ones before (it has more than 12). */
static inline uint64_t jg_agg_mix_str(uint64_t h, const jg_key_str *k, jg_str s) {
  uint64_t w0, w1;
  __builtin_memcpy(&w0, k, 8);
  h = jg_agg_mix(h, w0);
  if (s.n <= JG_KEY_INLINE) {
    __builtin_memcpy(&w1, (const char *)k + 8, 8);
    return jg_agg_mix(h, w1);
  }
  uint32_t i = 4;
  for (; i + 8 <= s.n; i += 8) {
    __builtin_memcpy(&w1, s.p + i, 8);
    h = jg_agg_mix(h, w1);
  }
  if (i < s.n) {
    __builtin_memcpy(&w1, s.p + s.n - 8, 8);
    h = jg_agg_mix(h, w1);
  }
  return h;
}

/* The key's bytes, as long as `k` stays where it is (an entry's key: inline bytes are in the entry). */
static inline jg_str jg_key_view(const jg_key_str *k) {
  jg_str s = {k->n <= JG_KEY_INLINE ? k->b : jg_key_ptr(k), k->n};
  return s;
}

/* A probe's key `k` as the new entry of table `t` keeps it: a long key's bytes copied into the
 * space jg_agg_insert reserved (the caller passed `extra` = jg_key_extra of its keys). */
static inline uint64_t jg_key_extra(jg_str s) { return s.n > JG_KEY_INLINE ? s.n : 0; }
static inline jg_key_str jg_agg_key_keep(jg_agg_table *t, jg_key_str k) {
  if (k.n > JG_KEY_INLINE) {
    const jg_str s = jg_agg_key_str(t, (jg_str){jg_key_ptr(&k), k.n});
    __builtin_memcpy(k.b + 4, &s.p, 8);
  }
  return k;
}

/* Another table's entry key `k` copied into table `t` (merging; allocates). */
static inline jg_key_str jg_agg_key_store(jg_agg_table *t, jg_key_str k) {
  if (k.n > JG_KEY_INLINE) {
    const jg_str s = jg_agg_store_str(t, (jg_str){jg_key_ptr(&k), k.n});
    __builtin_memcpy(k.b + 4, &s.p, 8);
  }
  return k;
}

/* Store string `s` as an entry's min/max value `*dst`, whose buffer holds `*cap` bytes: in place
 * when it fits, else in new arena space (in partial mode the bound is checked at the next
 * insert, so one row may exceed it by that row's strings). */
void jg_agg_set_str(jg_agg_table *t, jg_str *dst, uint32_t *cap, jg_str s);

/* End of this worker's input: partial mode emits its table; complete and final merge all
 * workers' tables (waiting for the others) and emit this worker's share. Frees the table.
 * JG_ROW_OK, or JG_ROW_ERROR after jg_fail. */
int jg_agg_finish(jg_ctx *ctx, jg_agg_table *t);

#ifdef __cplusplus
}
#endif
#endif /* JG_AGG_H */
