/* Jumpgate software-NCA runtime: the interface between a generated hash-join query and the join
 * driver (join.c). An addition to jg.h, which it includes; only generated join files and join.c
 * include it.
 *
 * A join query file defines two descriptors:
 *   - JG_QUERY (jg.h): `columns` is the whole *probe* schema in field order (the probe NTF),
 *     `noutputs` is 1, and `row` is the output function: it receives one joined row, the probe's
 *     values followed by the build's (row[0 .. nprobe) then row[nprobe .. nprobe + nbuild)),
 *     runs the fused filters and projection, and emits at most one tuple. For a left_outer row
 *     without a match the build half is all NULL (for a right_outer build row without one, the
 *     probe half); for left_semi/left_anti it is not filled.
 *   - JG_JOIN (below): the build schema, the key functions, key equality and the extra condition,
 *     and the functions the driver calls once per batch of tuples: each side's batch function
 *     (typed reads of the side's NTF layout, keys and hashes), the decoding of a matched build
 *     tuple, and the probe's compare-and-emit stage (probe_emit, generated per join type with
 *     the functions above inlined).
 *
 * The driver owns everything else: receiving both sides, building the hash table (open addressing
 * keyed by jg_hash v1 of the key values, see jg_hash.h; its format is below, as probe_emit walks
 * it), finding each probe row's first candidate, and a right_outer join's unmatched build rows.
 * String values in `row` and `keys` point into network buffers, the build table, or jg_scratch
 * memory; the driver keeps them valid while it needs them.
 */
#ifndef JG_JOIN_H
#define JG_JOIN_H

#include "jg.h"
#include "jg_hash.h"

#ifdef __cplusplus
extern "C" {
#endif

enum jg_join_type {
  JG_JOIN_INNER = 0,      /* every matching (probe, build) pair */
  JG_JOIN_LEFT_SEMI = 1,  /* a probe row once when some build row matches */
  JG_JOIN_LEFT_ANTI = 2,  /* a probe row once when no build row matches */
  JG_JOIN_LEFT_OUTER = 3, /* every match, or the probe row once with the build half NULL */
  JG_JOIN_RIGHT_OUTER = 4 /* every match, then each build row no probe row matched, the probe half NULL */
};

/* A key function's answer besides JG_ROW_OK (keys and *hash filled) and JG_ROW_ERROR (after
 * jg_fail): some key is NULL, so the row matches nothing; *hash is not set. */
#define JG_KEY_NULL 1

/* Evaluate the key expressions of one side over one row of that side into keys[0 .. nkeys), all
 * of the key types (identical on both sides), and their jg_hash v1 into *hash. */
typedef int (*jg_keys_fn)(jg_ctx *ctx, const jg_val *row, jg_val *keys, uint64_t *hash);

/* Packed keys: how the build table stores a build row's key values, 8 bytes per key at offset
 * 8 * k of the block: boolean, int32, int64, date and decimal as the int64 of jg_val.v.i;
 * float64 as the double; string as a u32 offset of its bytes, counted from the block's first
 * byte, then its u32 length. Unaligned: read with these helpers. */
static inline int64_t jg_packed_i64(const uint8_t *b, uint32_t off) {
  int64_t x;
  __builtin_memcpy(&x, b + off, 8);
  return x;
}
static inline double jg_packed_f64(const uint8_t *b, uint32_t off) {
  double x;
  __builtin_memcpy(&x, b + off, 8);
  return x;
}
static inline jg_str jg_packed_str(const uint8_t *b, uint32_t off) {
  uint32_t h[2];
  __builtin_memcpy(h, b + off, 8);
  jg_str s = {(const char *)b + h[0], h[1]};
  return s;
}
static inline int jg_str_eq(jg_str a, jg_str b) {
  return a.n == b.n && (a.n == 0 || __builtin_memcmp(a.p, b.p, a.n) == 0);
}
static inline int jg_f64_eq(double x, double y) { /* -0.0 = 0.0 and NaN = NaN, as jg_hash */
  return x == y || (x != x && y != y);
}

/* Batch functions (generated per layout: typed reads at the fields' offsets, no per-field
 * dispatch). A side's batch function reads tuples[0 .. n) of that side's NTF: the columns some
 * generated function reads into rows (row i at rows + i * stride, column j at row[j]), then the
 * row's keys (as jg_keys_fn) into keys + i * nkeys, hash[i] and status[i] (JG_ROW_OK or
 * JG_KEY_NULL). It returns n, or the index of the first tuple that failed, whose status is then
 * one of these: */
#define JG_BATCH_ROW_ERROR 2  /* a key function failed (jg_fail) */
#define JG_BATCH_SHORT 3      /* the tuple is shorter than the layout's fixed size */
#define JG_BATCH_BAD_STRING 4 /* a string field points outside the tuple */
typedef uint32_t (*jg_batch_fn)(jg_ctx *ctx, const uint8_t *const *tuples, const uint32_t *lens, uint32_t n,
                                jg_val *rows, uint32_t stride, jg_val *keys, uint64_t *hash, uint8_t *status);
/* The build columns some generated function reads of one stored build tuple into row[0 .. nbuild):
 * 0, or JG_BATCH_SHORT / JG_BATCH_BAD_STRING. */
typedef int (*jg_decode_fn)(const uint8_t *t, uint32_t len, jg_val *row);

/* ------------------------------------------------------------------ the build table
 * Shared by the driver, which builds it, and the generated probe stage (probe_emit), which reads
 * it. A stored build row: this header, its packed keys (8 bytes a key), the NTF tuple (len bytes,
 * padded to 8), then the bytes of string keys that do not point into the tuple (computed keys). */
typedef struct jg_join_entry {
  union {
    uint64_t hash;               /* until the entry is in the table */
    struct jg_join_entry *next;  /* then: the next build row with equal keys */
  } u;
  uint32_t len;  /* tuple bytes */
  uint32_t size; /* bytes of the whole entry, to walk a chunk (JG_ENTRY_BYTES), and two flags */
} jg_join_entry;

#define JG_ENTRY_MATCHED 0x80000000u  /* right_outer: some probe row matched it */
#define JG_ENTRY_NULL_KEY 0x40000000u /* right_outer: a NULL key, kept to output; not in the table */
#define JG_ENTRY_BYTES 0x3fffffffu

static inline const uint8_t *jg_entry_keys(const jg_join_entry *e) { return (const uint8_t *)(e + 1); }
static inline const uint8_t *jg_entry_tuple(const jg_join_entry *e, uint32_t nkeys) {
  return jg_entry_keys(e) + 8 * (size_t)nkeys;
}

/* The table: open addressing, linear probing. A slot holds an entry pointer, the top 16 bits of
 * the key hash as a tag in bits 48..63, and in bit 0 whether the entry spans two cache lines;
 * 0 is an empty slot. */
#define JG_SLOT_PTR (((UINT64_C(1) << 48) - 1) & ~UINT64_C(7))
#define JG_SLOT_SPANS_TWO_LINES UINT64_C(1)
#define JG_SLOT_TAG(h) ((h) >> 48)

static inline jg_join_entry *jg_slot_entry(uint64_t s) { return (jg_join_entry *)(uintptr_t)(s & JG_SLOT_PTR); }

/* The first slot at or after `*pos` whose tag is `tag` (its value), or 0 at an empty slot. */
static inline uint64_t jg_next_candidate(const uint64_t *slots, uint64_t mask, uint64_t *pos, uint64_t tag) {
  for (uint64_t i = *pos;; i = (i + 1) & mask) {
    uint64_t s = slots[i];
    if (s == 0 || (s >> 48) == tag) {
      *pos = i;
      return s;
    }
  }
}

/* Probe rows between the driver's stages 2 and 3: keys evaluated, first candidates found. */
typedef struct {
  const uint64_t *slots; /* the table */
  uint64_t mask;
  /* the worker's scratch cursor (jgrt.h): what an output or condition took of it is given back
   * when it did not overflow into extra blocks */
  size_t *scratch_used;
  void *const *scratch_more;
  uint32_t n;
  jg_val *rows;                 /* n joined rows of nprobe + nbuild values, the probe half decoded */
  const jg_val *keys;           /* n * nkeys */
  const uint64_t *hash;         /* the keys' hashes */
  const uint8_t *status;        /* JG_ROW_OK, or JG_KEY_NULL (the row matches nothing) */
  const uint64_t *pos;          /* the slot of the first candidate */
  jg_join_entry *const *cand;   /* the first entry whose slot tag matched, or NULL */
} jg_probe_rows;

/* Stage 3 of the probe (generated per join type): for each row, compare its keys with the
 * candidates', decode the matched build rows into the build half, evaluate the condition, flag
 * right_outer matches, emit by the join type's rules; adds the (probe, build) pairs that passed
 * keys and condition to *matches. Returns n, or the index of the row that failed with *code
 * JG_BATCH_ROW_ERROR (jg_fail), or JG_BATCH_SHORT / JG_BATCH_BAD_STRING (a stored build tuple
 * does not decode). */
typedef uint32_t (*jg_probe_emit_fn)(jg_ctx *ctx, const jg_probe_rows *b, uint64_t *matches, uint8_t *code);

/* 1 when non-NULL keys `a` equal the packed keys `b` of a stored build row. */
typedef int (*jg_keys_equal_fn)(const jg_val *a, const uint8_t *b);
/* The join's extra condition over one joined row: 1 when TRUE, 0 when FALSE or NULL,
 * JG_ROW_ERROR after jg_fail. */
typedef int (*jg_condition_fn)(jg_ctx *ctx, const jg_val *row);

typedef struct {
  uint8_t type;   /* enum jg_join_type */
  uint32_t nkeys; /* >= 1 */
  const uint8_t *key_types; /* enum jg_type of each key (the same on both sides) */
  /* the build side's schema in field order (its NTF is the contract layout of these) */
  const jg_column *build_columns;
  uint32_t nbuild;
  jg_keys_fn build_keys; /* over a build row (nbuild values) */
  jg_keys_fn probe_keys; /* over a probe row (the first nprobe values of a joined row) */
  jg_batch_fn build_batch; /* build tuples: key columns decoded (strings all checked), build_keys */
  jg_batch_fn probe_batch; /* probe tuples: probe_used columns decoded, probe_keys */
  jg_decode_fn build_decode; /* a matched build tuple: build_used columns */
  jg_probe_emit_fn probe_emit;
  jg_keys_equal_fn keys_equal;
  jg_condition_fn condition; /* NULL: no extra condition */
  /* whether the build half of the joined row must be decoded for the condition / the output */
  uint8_t condition_reads_build;
  uint8_t output_reads_build;
  /* per column, 1 when some generated function reads it (the batch functions decode only those) */
  const uint8_t *probe_used; /* JG_QUERY.ncolumns entries */
  const uint8_t *build_used; /* nbuild entries */
} jg_join_query;

/* Defined by generated join code. */
extern const jg_join_query JG_JOIN;

#ifdef __cplusplus
}
#endif
#endif /* JG_JOIN_H */
