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
 * Load factor at most 1/4. Strings (group keys, min/max values) are copied into an arena of
 * chunks owned by the table.
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
