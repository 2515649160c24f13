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
 *   - JG_JOIN (below): the build schema, the key functions, key equality and the extra condition.
 *
 * The driver owns everything else: receiving both sides, the hash table (open addressing keyed by
 * jg_hash v1 of the key values, see jg_hash.h), which rows match, and the join type's rules.
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
  jg_keys_equal_fn keys_equal;
  jg_condition_fn condition; /* NULL: no extra condition */
  /* whether the build half of the joined row must be decoded for the condition / the output */
  uint8_t condition_reads_build;
  uint8_t output_reads_build;
  /* per column, 1 when some generated function reads it: the driver decodes only those */
  const uint8_t *probe_used; /* JG_QUERY.ncolumns entries */
  const uint8_t *build_used; /* nbuild entries */
} jg_join_query;

/* Defined by generated join code. */
extern const jg_join_query JG_JOIN;

#ifdef __cplusplus
}
#endif
#endif /* JG_JOIN_H */
