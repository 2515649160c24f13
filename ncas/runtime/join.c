/* Hash-join NCA driver: phase 0 (build) receives input port 0 and builds a hash table, phase 1
 * (probe) receives input port 1, looks every row up and emits joined rows on output port 0
 * (thesis §3.3.5: the build side is complete before the probe side starts; the table lives in
 * this process between the two `execute` commands).
 *
 * Work goes BATCH tuples at a time through functions generated per query (jg_join.h): they read
 * the NTF fields at their layout's offsets with typed loads, decoding only the columns some
 * generated function reads, and evaluate keys and hashes in one loop; the probe's compare-and-emit
 * stage is generated per join type, with key equality, build decoding, the condition and the
 * output function inlined into it.
 *
 * Build. Each worker runs the generated build batch function over its build streams (the key
 * columns decoded, every string field checked) and copies each raw NTF tuple, with its packed key
 * values (jg_join.h), into its own chunked arena (no allocation per tuple); an entry that fits a
 * cache line is not placed across two. Rows with a NULL key can match nothing: they are dropped,
 * except by a right_outer join, which keeps them aside (flagged, not in the table) to output at
 * the end. The last worker to finish inserts every entry, with the hash computed when it arrived,
 * into one open-addressing table (linear probing, never resized; a load factor <= 1/4 up to 32 MiB
 * of slots, else <= 1/2), prefetching home slots INSERT_AHEAD entries ahead. A slot holds an entry
 * pointer, the top 16 bits of the key hash (jg_hash v1) as a tag in bits 48..63, and in bit 0
 * whether the entry spans two cache lines; the entries of one distinct key are chained behind the
 * entry in the slot, so duplicate keys never lengthen probe sequences. Arena chunks and the table
 * are mapped in 2 MiB pages where the kernel allows.
 *
 * Probe. Workers run independently on their share of the probe streams over the read-only table,
 * each with its own output connection. Batches move through three stages so that table and entry
 * loads are prefetched well before they are needed (see probe_tuples). For each row the keys are
 * compared exactly with every candidate's (generated equality), the extra condition is evaluated
 * over (probe row, build row) with the matched build tuple decoded into the second half of the
 * joined row, and rows are emitted by the join type: inner (every match), left_outer (every
 * match, or once with the build half NULL), left_semi (once if any match), left_anti (once if
 * none), right_outer (every match, flagging the build row as matched).
 *
 * Right outer. The compiler runs a left outer join whose preserved side is the smaller one this
 * way round (compiler/join_sides.py): the small side is built, the large one streams through as
 * the probe side. Matched build rows are flagged in their entry (an atomic OR: workers share the
 * table); the last probe worker to finish walks every stored build row and emits each one no probe
 * row matched, once, with the probe half NULL, before its own end-of-input hook.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "jg_join.h"
#include "jg_rfilter.h"
#include "jgrt.h"

#define HUGE_PAGE ((size_t)2 << 20)
#define FIRST_CHUNK ((size_t)64 << 10) /* arena chunks double from here up to MAX_CHUNK */
#define MAX_CHUNK ((size_t)4 << 20)    /* a multiple of HUGE_PAGE */
#define PTR_MASK JG_SLOT_PTR
#define SPANS_TWO_LINES JG_SLOT_SPANS_TWO_LINES
#define TAG(h) JG_SLOT_TAG(h)

/* ------------------------------------------------------------------ build storage */

typedef jg_join_entry jn_entry; /* jg_join.h */

#define ENTRY_MATCHED JG_ENTRY_MATCHED
#define ENTRY_NULL_KEY JG_ENTRY_NULL_KEY
#define ENTRY_BYTES JG_ENTRY_BYTES

static inline uint32_t entry_bytes(const jn_entry *e) { return e->size & ENTRY_BYTES; }

typedef struct jn_chunk {
  struct jn_chunk *next;
  size_t cap, used;
  uint64_t data[]; /* 8-aligned */
} jn_chunk;

typedef struct {
  jn_chunk *first, *last;
  size_t next_chunk; /* bytes of the next chunk */
  size_t bytes;      /* allocated, headers included */
  uint64_t rows, null_key_rows;
  jg_join_entry *prev; /* the last entry of the last chunk (it absorbs padding after it) */
} jn_arena;

static inline size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static inline const uint8_t *entry_keys(const jn_entry *e) { return jg_entry_keys(e); }

static inline const uint8_t *entry_tuple(const jn_entry *e) { return jg_entry_tuple(e, JG_JOIN.nkeys); }

/* Zeroed memory for the build side, in 2 MiB pages where the kernel allows (transparent huge
 * pages on request): probes touch it at random, and 4 KiB pages would make nearly every probe a
 * TLB miss. Never freed: the table lives until the process exits. */
static void *map_big(size_t size) {
  size = (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  uint8_t *raw = mmap(NULL, size + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
  if (p > raw) munmap(raw, (size_t)(p - raw));
  if (p + size < raw + size + HUGE_PAGE) munmap(p + size, (size_t)(raw + size + HUGE_PAGE - (p + size)));
  madvise(p, size, MADV_HUGEPAGE);
  return p;
}

static void *arena_alloc(jn_arena *a, size_t n) {
  jn_chunk *c = a->last;
  if (!c || c->cap - c->used < n) {
    a->prev = NULL;
    size_t bytes = a->next_chunk ? a->next_chunk : FIRST_CHUNK;
    if (bytes < MAX_CHUNK) a->next_chunk = 2 * bytes;
    if (n + sizeof *c > bytes) bytes = n + sizeof *c;
    if (bytes >= HUGE_PAGE) bytes = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    c = bytes >= HUGE_PAGE ? map_big(bytes) : malloc(bytes);
    if (!c) return NULL;
    c->next = NULL;
    c->cap = bytes - sizeof *c;
    c->used = 0;
    if (a->last) a->last->next = c;
    else a->first = c;
    a->last = c;
    a->bytes += bytes;
  }
  void *p = (uint8_t *)c->data + c->used;
  c->used += n;
  return p;
}

/* ------------------------------------------------------------------ driver state */

typedef struct {
  uint64_t *slots;
  uint64_t mask;
  uint64_t distinct;
} jn_table;

typedef struct {
  uint32_t nprobe, nbuild, nkeys, width;
  int built;        /* phase 0 completed */
  jgr_in *in;       /* the receiver of the running phase */
  jn_arena *arenas; /* one per build worker */
  int narenas;
  int finished; /* build workers done (atomic); the last one builds the table */
  int probed;   /* probe workers done (atomic); the last one emits a right_outer's unmatched rows */
  uint64_t unmatched; /* right_outer: build rows emitted with the probe half NULL */
  jn_table table;
  uint64_t table_ns;
  uint64_t *matches; /* per probe worker: (probe, build) pairs that passed keys and condition */
  int nmatch_slots;
  /* the runtime filter made at the end of the build (`param rf.out 1`, docs/runtime-filters.md) */
  int rf_out;
  uint64_t rf_max_bytes, rf_bytes, rf_ns;
} join_state;

static int join_prepare(jgr_proc *p, int phase, jgr_error *err) {
  join_state *st = p->driver_state;
  if (p->ninputs < 2) {
    jgr_error_set(err, "hash join needs --inputs 2 (port 0 = build, port 1 = probe)");
    return -1;
  }
  if (p->inputs[phase].expected == 0) {
    jgr_error_set(err, "hash join needs `expect %d N` with N >= 1 (the %s side's streams)", phase,
                  phase == 0 ? "build" : "probe");
    return -1;
  }
  if (phase == 0) {
    if (st) {
      jgr_error_set(err, "hash join: the build phase ran already");
      return -1;
    }
    st = calloc(1, sizeof *st);
    if (!st) {
      jgr_error_set(err, "out of memory");
      return -1;
    }
    p->driver_state = st;
    st->nprobe = JG_QUERY.ncolumns;
    st->nbuild = JG_JOIN.nbuild;
    st->nkeys = JG_JOIN.nkeys;
    st->width = st->nprobe + st->nbuild;
    st->narenas = p->threads;
    st->arenas = calloc((size_t)p->threads, sizeof *st->arenas);
    if (!st->arenas) {
      jgr_error_set(err, "out of memory");
      return -1;
    }
    const char *rf = jgr_param(p, "rf.out");
    st->rf_out = rf && strcmp(rf, "1") == 0;
    if (jgr_param_u64(p, "rf.max_bytes", (uint64_t)4 << 20, 0, (uint64_t)1 << 30, &st->rf_max_bytes, err) != 0)
      return -1;
    st->in = jgr_in_start(p, 0, p->threads, err);
    return st->in ? 0 : -1;
  }
  if (!st || !st->built) {
    jgr_error_set(err, "hash join: the probe phase (1) needs the build phase (0) first");
    return -1;
  }
  jgr_in_free(st->in); /* the build receiver: all its streams ended */
  free(st->matches);
  st->nmatch_slots = p->threads;
  st->matches = calloc((size_t)p->threads, sizeof *st->matches);
  st->in = jgr_in_start(p, 1, p->threads, err);
  return st->in ? 0 : -1;
}

/* ------------------------------------------------------------------ build phase */

#define BATCH 64 /* tuples a batch function reads at a time */
#define LINE_PLACED_BYTES ((size_t)64 << 20)

typedef struct {
  join_state *st;
  jn_arena *arena;
  jg_val *rows; /* BATCH rows of nbuild values */
  jg_val *keys; /* BATCH * nkeys */
  uint64_t hash[BATCH];
  uint8_t status[BATCH];
} build_arg;

/* Copy one build row (packed keys and tuple) into the arena. String keys pointing into the tuple
 * refer to its copy; others (computed into scratch memory) are copied after it. */
static jn_entry *store_row(build_arg *a, const jg_val *keys, const uint8_t *t, uint32_t len, uint64_t hash) {
  const uint32_t nkeys = a->st->nkeys;
  size_t extra = 0;
  for (uint32_t k = 0; k < nkeys; k++)
    if (JG_JOIN.key_types[k] == JG_STRING) {
      const uint8_t *s = (const uint8_t *)keys[k].v.s.p;
      if (!(s >= t && s + keys[k].v.s.n <= t + len)) extra += keys[k].v.s.n;
    }
  size_t size = align8(sizeof(jn_entry) + 8 * (size_t)nkeys + align8(len) + extra);
  if (size > ENTRY_BYTES) return NULL;
  jn_arena *ar = a->arena;
  /* An entry that fits one cache line is not placed across two (a probe then loads one line): the
   * entry before it in its chunk grows by the gap (chunk walks step over it with entry_bytes).
   * That takes up to a third more memory, so only the first LINE_PLACED_BYTES of an arena are
   * placed so: beyond, faulting in more memory costs more than the probes' second lines. */
  if (size <= 64 && ar->prev && ar->last && ar->bytes < LINE_PLACED_BYTES) {
    const size_t at = (uintptr_t)((uint8_t *)ar->last->data + ar->last->used);
    const size_t gap = (64 - (at & 63)) & 63;
    if ((at & 63) + size > 64 && ar->last->cap - ar->last->used >= gap + size &&
        entry_bytes(ar->prev) + gap <= ENTRY_BYTES) {
      ar->last->used += gap;
      ar->prev->size += (uint32_t)gap;
    }
  }
  jn_entry *e = arena_alloc(ar, size);
  if (!e) return NULL;
  ar->prev = e;
  e->u.hash = hash;
  e->len = len;
  e->size = (uint32_t)size;
  uint8_t *packed = (uint8_t *)(e + 1);
  uint8_t *copy = packed + 8 * (size_t)nkeys;
  memcpy(copy, t, len);
  uint8_t *var = copy + align8(len);
  for (uint32_t k = 0; k < nkeys; k++) {
    const jg_val *v = &keys[k];
    if (JG_JOIN.key_types[k] != JG_STRING) {
      memcpy(packed + 8 * k, &v->v, 8); /* v.i or v.f */
      continue;
    }
    const uint8_t *s = (const uint8_t *)v->v.s.p;
    uint32_t h[2] = {0, v->v.s.n};
    if (s >= t && s + v->v.s.n <= t + len) {
      h[0] = (uint32_t)(copy - packed + (s - t));
    } else {
      if (v->v.s.n) memcpy(var, s, v->v.s.n);
      h[0] = (uint32_t)(var - packed);
      var += v->v.s.n;
    }
    memcpy(packed + 8 * k, h, 8);
  }
  return e;
}

/* What a batch function's failure code says about the tuple. */
static const char *batch_why(uint8_t status) {
  return status == JG_BATCH_SHORT ? "tuple shorter than the layout's fixed size" : "string field points outside the tuple";
}

/* Build tuples BATCH at a time: the generated batch function decodes their key columns and
 * evaluates their keys and hashes, then each row is stored (its keys may be in scratch memory,
 * which is reset between batches only). */
static int build_tuples(void *arg, jg_ctx *ctx, const uint8_t *const *tuples, const uint32_t *lens,
                        size_t n, jgr_error *err) {
  build_arg *a = arg;
  const uint32_t nkeys = a->st->nkeys;
  for (size_t base = 0; base < n; base += BATCH) {
    const uint32_t m = n - base < BATCH ? (uint32_t)(n - base) : BATCH;
    jgr_scratch_reset(ctx);
    const uint32_t done = JG_JOIN.build_batch(ctx, tuples + base, lens + base, m, a->rows, a->st->nbuild, a->keys,
                                              a->hash, a->status);
    for (uint32_t i = 0; i < done; i++) {
      jg_val *keys = a->keys + (size_t)i * nkeys;
      const int null_key = a->status[i] == JG_KEY_NULL;
      if (null_key) {
        a->arena->null_key_rows++;
        if (JG_JOIN.type != JG_JOIN_RIGHT_OUTER) continue;
        for (uint32_t k = 0; k < nkeys; k++) keys[k].v.s.n = 0; /* nothing to pack */
      }
      jn_entry *e = store_row(a, keys, tuples[base + i], lens[base + i], a->hash[i]);
      if (JGR_UNLIKELY(!e)) {
        jgr_error_set(err, "hash join: out of memory holding the build side (%llu rows, %zu bytes so far)",
                      (unsigned long long)a->arena->rows, a->arena->bytes);
        return -1;
      }
      if (null_key) e->size |= ENTRY_NULL_KEY;
      else a->arena->rows++;
    }
    if (JGR_UNLIKELY(done < m && a->status[done] != JG_BATCH_ROW_ERROR)) {
      jgr_error_set(err, "input port 0 (build side): malformed tuple: %s", batch_why(a->status[done]));
      return -1;
    }
    if (JGR_UNLIKELY(done < m || ctx->flags != 0)) {
      jgr_row_error(ctx, err);
      return -1;
    }
  }
  return 0;
}

#define SPARSE_TABLE_SLOTS ((uint64_t)4 << 20) /* 32 MiB of slots */

/* Slots for `rows` build rows: a load factor <= 1/4 while that takes at most SPARSE_TABLE_SLOTS
 * (fewer probes step past a slot of another key), else <= 1/2 (a larger table costs more to
 * allocate and fault in than the probes save). */
static uint64_t table_capacity(uint64_t rows) {
  uint64_t cap = 16;
  while (cap < 2 * rows) cap <<= 1;
  if (cap < 4 * rows && 2 * cap <= SPARSE_TABLE_SLOTS) cap <<= 1;
  return cap;
}

/* The packed keys of a stored row as jg_vals, to compare two stored rows with the generated
 * equality (which compares jg_vals with packed keys). */
static void unpack_keys(const jn_entry *e, jg_val *keys) {
  const uint8_t *b = entry_keys(e);
  for (uint32_t k = 0; k < JG_JOIN.nkeys; k++) {
    keys[k].null = 0;
    if (JG_JOIN.key_types[k] == JG_STRING) keys[k].v.s = jg_packed_str(b, 8 * k);
    else memcpy(&keys[k].v, b + 8 * k, 8);
  }
}

static void insert_entry(join_state *st, jn_entry *e, jg_val *keys) {
  uint64_t *slots = st->table.slots, mask = st->table.mask, hash = e->u.hash, tag = TAG(hash);
  e->u.next = NULL;
  int unpacked = 0;
  for (uint64_t i = hash & mask;; i = (i + 1) & mask) {
    uint64_t s = slots[i];
    if (s == 0) {
      const size_t bytes = sizeof(jn_entry) + 8 * (size_t)JG_JOIN.nkeys + e->len; /* padding aside */
      uint64_t spans = (((uintptr_t)e & 63) + bytes > 64) ? SPANS_TWO_LINES : 0;
      slots[i] = (tag << 48) | (uintptr_t)e | spans;
      st->table.distinct++;
      return;
    }
    if ((s >> 48) != tag) continue;
    jn_entry *head = (jn_entry *)(uintptr_t)(s & PTR_MASK);
    if (!unpacked) unpack_keys(e, keys), unpacked = 1;
    if (JG_JOIN.keys_equal(keys, entry_keys(head))) {
      e->u.next = head->u.next;
      head->u.next = e;
      return;
    }
  }
}

#define INSERT_AHEAD 64 /* entries whose home slots are prefetched before they are inserted */

/* Insert every stored row (all workers' arenas) into a table sized for them. The arenas are
 * walked in order; home slots are prefetched INSERT_AHEAD entries before their insertion. */
static int build_table(join_state *st, jgr_error *err) {
  uint64_t t0 = jgr_now_ns(), rows = 0;
  for (int w = 0; w < st->narenas; w++) rows += st->arenas[w].rows;
  uint64_t cap = table_capacity(rows);
  st->table.slots = cap * sizeof(uint64_t) >= HUGE_PAGE ? map_big(cap * sizeof(uint64_t)) : calloc(cap, sizeof(uint64_t));
  jg_val *keys = calloc(st->nkeys, sizeof *keys);
  if (!st->table.slots || !keys) {
    jgr_error_set(err, "hash join: out of memory for a table of %llu slots", (unsigned long long)cap);
    return -1;
  }
  st->table.mask = cap - 1;
  jn_entry *ring[INSERT_AHEAD];
  uint64_t queued = 0;
  for (int w = 0; w < st->narenas; w++)
    for (jn_chunk *c = st->arenas[w].first; c; c = c->next)
      for (size_t off = 0; off < c->used;) {
        jn_entry *e = (jn_entry *)(void *)((uint8_t *)c->data + off);
        off += entry_bytes(e);
        if (e->size & ENTRY_NULL_KEY) continue;
        if (JGR_UNLIKELY((uintptr_t)e & ~PTR_MASK)) {
          jgr_error_set(err, "hash join: build memory above 2^48 (pointer tags need 48-bit addresses)");
          free(keys);
          return -1;
        }
        __builtin_prefetch(&st->table.slots[e->u.hash & st->table.mask], 1);
        jn_entry **slot = &ring[queued++ % INSERT_AHEAD];
        if (queued > INSERT_AHEAD) insert_entry(st, *slot, keys);
        *slot = e;
      }
  for (uint64_t k = queued > INSERT_AHEAD ? queued - INSERT_AHEAD : 0; k < queued; k++)
    insert_entry(st, ring[k % INSERT_AHEAD], keys);
  free(keys);
  st->table_ns = jgr_now_ns() - t0;
  return 0;
}

/* ------------------------------------------------------------------ the runtime filter */

static int integral_key(uint8_t type) { return type != JG_STRING && type != JG_FLOAT64; }

/* Make the runtime filter (jg_rfilter.h) from every stored build row, before they enter the table
 * (which overwrites their hashes), and emit it as an `rfilter` event, hex-encoded, for the control
 * plane to hand to the probe side's scans (docs/runtime-filters.md). A filter that could remove
 * nothing (no Bloom because the build side is too large for rf.max_bytes, and no key range) is
 * not sent: the event says `"data":null`. */
static int emit_runtime_filter(join_state *st, jgr_error *err) {
  uint64_t t0 = jgr_now_ns(), rows = 0;
  for (int w = 0; w < st->narenas; w++) rows += st->arenas[w].rows;
  jg_rfilter f = {0};
  f.nkeys = st->nkeys;
  f.rows = rows;
  f.nblocks = jg_rf_blocks_for(rows, st->rf_max_bytes);
  f.has_range = calloc(st->nkeys, 1);
  f.min = calloc(st->nkeys, 8);
  f.max = calloc(st->nkeys, 8);
  if (f.nblocks) f.blocks = calloc((size_t)f.nblocks, JG_RF_BLOCK);
  if (!f.has_range || !f.min || !f.max || (f.nblocks && !f.blocks)) {
    jg_rf_free(&f);
    jgr_error_set(err, "hash join: out of memory for the runtime filter");
    return -1;
  }
  int ranged = 0;
  for (uint32_t k = 0; k < st->nkeys; k++) {
    f.min[k] = INT64_MAX, f.max[k] = INT64_MIN;
    ranged |= integral_key(JG_JOIN.key_types[k]);
  }
  for (int w = 0; w < st->narenas; w++)
    for (jn_chunk *c = st->arenas[w].first; c; c = c->next)
      for (size_t off = 0; off < c->used;) {
        const jn_entry *e = (const jn_entry *)(const void *)((const uint8_t *)c->data + off);
        off += entry_bytes(e);
        if (e->size & ENTRY_NULL_KEY) continue;
        if (f.nblocks) jg_rf_insert(&f, e->u.hash);
        for (uint32_t k = 0; k < st->nkeys; k++)
          if (integral_key(JG_JOIN.key_types[k])) {
            int64_t v = jg_packed_i64(entry_keys(e), 8 * k);
            if (v < f.min[k]) f.min[k] = v;
            if (v > f.max[k]) f.max[k] = v;
            f.has_range[k] = 1;
          }
      }
  char head[160];
  if (!f.nblocks && !(ranged && rows)) {
    snprintf(head, sizeof head, "{\"event\":\"rfilter\",\"rows\":%llu,\"data\":null}", (unsigned long long)rows);
    jgr_event(head);
    jg_rf_free(&f);
    st->rf_ns = jgr_now_ns() - t0;
    return 0;
  }
  size_t n = jg_rf_blob_size(f.nkeys, f.nblocks);
  uint8_t *blob = malloc(n);
  int len = snprintf(head, sizeof head, "{\"event\":\"rfilter\",\"rows\":%llu,\"bytes\":%zu,\"bloom_bytes\":%zu,\"data\":\"",
                     (unsigned long long)rows, n, (size_t)f.nblocks * JG_RF_BLOCK);
  char *line = blob ? malloc((size_t)len + 2 * n + 3) : NULL;
  if (!line) {
    free(blob);
    jg_rf_free(&f);
    jgr_error_set(err, "hash join: out of memory for the runtime filter");
    return -1;
  }
  jg_rf_write(&f, blob);
  memcpy(line, head, (size_t)len);
  static const char digits[] = "0123456789abcdef";
  char *o = line + len;
  for (size_t i = 0; i < n; i++) {
    *o++ = digits[blob[i] >> 4];
    *o++ = digits[blob[i] & 15];
  }
  memcpy(o, "\"}", 3);
  jgr_event(line);
  free(line);
  free(blob);
  jg_rf_free(&f);
  st->rf_bytes = n;
  st->rf_ns = jgr_now_ns() - t0;
  return 0;
}

static int build_work(jgr_proc *p, jg_ctx *ctx, jgr_error *err) {
  join_state *st = p->driver_state;
  build_arg *a = calloc(1, sizeof *a);
  if (a) {
    a->st = st;
    a->arena = &st->arenas[ctx->worker];
    a->rows = calloc((size_t)BATCH * (st->nbuild ? st->nbuild : 1), sizeof(jg_val));
    a->keys = calloc((size_t)BATCH * st->nkeys, sizeof(jg_val));
  }
  int rc = (a && a->rows && a->keys) ? jgr_in_run(st->in, ctx, build_tuples, a, err) : -1;
  if (!a || !a->rows || !a->keys) jgr_error_set(err, "out of memory");
  if (a) {
    free(a->rows);
    free(a->keys);
    free(a);
  }
  if (rc != 0) return rc;
  if (__atomic_add_fetch(&st->finished, 1, __ATOMIC_ACQ_REL) == st->narenas) {
    if (st->rf_out && emit_runtime_filter(st, err) != 0) return -1;
    if (build_table(st, err) != 0) return -1;
    __atomic_store_n(&st->built, 1, __ATOMIC_RELEASE);
  }
  return 0;
}

/* ------------------------------------------------------------------ probe phase */

/* Probe rows go BATCH at a time through three stages, so that memory loads have time to arrive:
 * (1) the generated batch function decodes the batch's used columns and evaluates keys and
 * hashes, then every row's home slot is prefetched; (2) each row's first slot with its tag is
 * found and its entry prefetched; (3) the generated probe_emit compares keys and emits by the
 * join type. The stages of two batches interleave: stage 3 of the previous batch runs between
 * stages 1 and 2 of the current one, and stage 1 of the next batch between stages 2 and 3, each
 * covering the other's loads. */
typedef struct {
  uint32_t n;
  jg_val *rows; /* BATCH joined rows of `width` values */
  jg_val *keys; /* BATCH * nkeys */
  uint64_t hash[BATCH];
  uint64_t pos[BATCH];   /* slot of the candidate */
  jn_entry *cand[BATCH]; /* first entry whose slot tag matched, or NULL */
  uint8_t status[BATCH]; /* JG_ROW_OK or JG_KEY_NULL */
} jn_batch;

typedef struct {
  join_state *st;
  uint64_t matches;
  jn_batch b[2];
} probe_arg;

/* Run the generated output function on one joined row. Scratch memory it takes is given back
 * (unless it overflowed into extra blocks), so one probe row with many matches stays bounded. */
static inline int output_row(jg_ctx *ctx, const jg_val *row, jgr_error *err) {
  size_t mark = ctx->scratch_used;
  int r = JG_QUERY.row(ctx, row);
  if (JGR_UNLIKELY(r != JG_ROW_OK || ctx->flags != 0)) {
    jgr_row_error(ctx, err);
    return -1;
  }
  if (JGR_LIKELY(ctx->scratch_more == NULL)) ctx->scratch_used = mark;
  return 0;
}

static void decode_error(uint8_t code, jgr_error *err) {
  jgr_error_set(err, "hash join: stored build tuple does not decode: %s", batch_why(code));
}

static inline int decode_build(const jn_entry *e, jg_val *half, jgr_error *err) {
  const int r = JG_JOIN.build_decode(entry_tuple(e), e->len, half);
  if (JGR_UNLIKELY(r != 0)) {
    decode_error((uint8_t)r, err);
    return -1;
  }
  return 0;
}

/* Stage 1: decode, keys, hashes; prefetch the home slots. */
static int probe_stage1(probe_arg *a, jg_ctx *ctx, jn_batch *b, const uint8_t *const *tuples, const uint32_t *lens,
                        uint32_t n, jgr_error *err) {
  const jn_table *t = &a->st->table;
  b->n = n;
  const uint32_t done = JG_JOIN.probe_batch(ctx, tuples, lens, n, b->rows, a->st->width, b->keys, b->hash, b->status);
  if (JGR_UNLIKELY(done < n && b->status[done] != JG_BATCH_ROW_ERROR)) {
    jgr_error_set(err, "input port 1 (probe side): malformed tuple: %s", batch_why(b->status[done]));
    return -1;
  }
  if (JGR_UNLIKELY(done < n || (ctx->flags & JGR_FAILED))) {
    jgr_row_error(ctx, err);
    return -1;
  }
  for (uint32_t i = 0; i < n; i++)
    if (b->status[i] == JG_ROW_OK) __builtin_prefetch(&t->slots[b->hash[i] & t->mask]);
  return 0;
}

/* Stage 2: the first slot with the row's tag; prefetch its entry. */
static void probe_stage2(const jn_table *t, jn_batch *b) {
  for (uint32_t i = 0; i < b->n; i++) {
    b->cand[i] = NULL;
    if (b->status[i] != JG_ROW_OK) continue;
    b->pos[i] = b->hash[i] & t->mask;
    const uint64_t s = jg_next_candidate(t->slots, t->mask, &b->pos[i], TAG(b->hash[i]));
    jn_entry *e = jg_slot_entry(s);
    if (e) {
      __builtin_prefetch(e);
      if (s & SPANS_TWO_LINES) __builtin_prefetch((const uint8_t *)e + 64);
    }
    b->cand[i] = e;
  }
}

/* Stage 3: compare and emit (generated). */
static int probe_stage3(probe_arg *a, jg_ctx *ctx, jn_batch *b, jgr_error *err) {
  const jn_table *t = &a->st->table;
  const jg_probe_rows rows = {t->slots, t->mask, &ctx->scratch_used, &ctx->scratch_more, b->n,
                              b->rows, b->keys, b->hash, b->status, b->pos, b->cand};
  uint8_t code = 0;
  const uint32_t done = JG_JOIN.probe_emit(ctx, &rows, &a->matches, &code);
  if (JGR_UNLIKELY(done < b->n && code != JG_BATCH_ROW_ERROR)) {
    decode_error(code, err);
    return -1;
  }
  if (JGR_UNLIKELY(done < b->n || ctx->flags != 0)) {
    jgr_row_error(ctx, err);
    return -1;
  }
  return 0;
}

static int probe_tuples(void *arg, jg_ctx *ctx, const uint8_t *const *tuples, const uint32_t *lens,
                        size_t n, jgr_error *err) {
  probe_arg *a = arg;
  const jn_table *t = &a->st->table;
  jn_batch *prev = NULL;
  /* Keys of in-flight rows may live in scratch memory: reset only between calls. */
  jgr_scratch_reset(ctx);
  for (size_t base = 0, k = 0; base < n; base += BATCH, k ^= 1) {
    jn_batch *b = &a->b[k];
    const uint32_t m = n - base < BATCH ? (uint32_t)(n - base) : BATCH;
    if (probe_stage1(a, ctx, b, tuples + base, lens + base, m, err) != 0) return -1;
    if (prev && probe_stage3(a, ctx, prev, err) != 0) return -1;
    probe_stage2(t, b);
    prev = b;
  }
  return prev ? probe_stage3(a, ctx, prev, err) : 0;
}

/* right_outer, once every probe row is in: each stored build row that no probe row matched (NULL
 * keys included), with the probe half of the joined row NULL. */
static int emit_unmatched(join_state *st, jg_ctx *ctx, jg_val *row, jgr_error *err) {
  memset(row, 0, st->nprobe * sizeof *row);
  for (uint32_t j = 0; j < st->nprobe; j++) row[j].null = 1;
  jgr_scratch_reset(ctx);
  for (int w = 0; w < st->narenas; w++)
    for (jn_chunk *c = st->arenas[w].first; c; c = c->next)
      for (size_t off = 0; off < c->used;) {
        const jn_entry *e = (const jn_entry *)(const void *)((const uint8_t *)c->data + off);
        off += entry_bytes(e);
        if (__atomic_load_n(&e->size, __ATOMIC_RELAXED) & ENTRY_MATCHED) continue;
        if (decode_build(e, row + st->nprobe, err) != 0 || output_row(ctx, row, err) != 0) return -1;
        st->unmatched++;
      }
  return 0;
}

static int probe_work(jgr_proc *p, jg_ctx *ctx, jgr_error *err) {
  join_state *st = p->driver_state;
  probe_arg *a = calloc(1, sizeof *a);
  if (a) {
    a->st = st;
    for (int k = 0; k < 2; k++) {
      a->b[k].rows = calloc((size_t)BATCH * (st->width ? st->width : 1), sizeof(jg_val));
      a->b[k].keys = calloc((size_t)BATCH * st->nkeys, sizeof(jg_val));
    }
  }
  int rc;
  if (!a || !a->b[0].rows || !a->b[0].keys || !a->b[1].rows || !a->b[1].keys) {
    jgr_error_set(err, "out of memory");
    rc = -1;
  } else {
    rc = jgr_in_run(st->in, ctx, probe_tuples, a, err);
    /* every worker counts itself done, failed or not, so that the last one is known */
    const int last = __atomic_add_fetch(&st->probed, 1, __ATOMIC_ACQ_REL) == st->nmatch_slots;
    if (rc == 0 && last && JG_JOIN.type == JG_JOIN_RIGHT_OUTER) rc = emit_unmatched(st, ctx, a->b[0].rows, err);
    if (rc == 0) rc = jgr_call_finish(ctx, err); /* the query's end-of-input hook (jgrt.h) */
    st->matches[ctx->worker] = a->matches;
  }
  if (a) {
    for (int k = 0; k < 2; k++) {
      free(a->b[k].rows);
      free(a->b[k].keys);
    }
    free(a);
  }
  return rc;
}

/* ------------------------------------------------------------------ the driver */

static int join_work(jgr_proc *p, int phase, jg_ctx *ctx, jgr_error *err) {
  return phase == 0 ? build_work(p, ctx, err) : probe_work(p, ctx, err);
}

/* Extra `done` stats: what the build side holds (rows, distinct keys, bytes), probe matches. */
static void join_stats(jgr_proc *p, int phase, char *buf, size_t cap) {
  const join_state *st = p->driver_state;
  if (!st) return;
  uint64_t rows = 0, nulls = 0, arena = 0;
  for (int w = 0; w < st->narenas; w++) {
    rows += st->arenas[w].rows;
    nulls += st->arenas[w].null_key_rows;
    arena += st->arenas[w].bytes;
  }
  const uint64_t table = (st->table.mask + 1) * sizeof(uint64_t) * (st->table.slots != NULL);
  if (phase == 0) {
    snprintf(buf, cap,
             ",\"build_rows\":%llu,\"build_null_key_rows\":%llu,\"build_distinct_keys\":%llu,"
             "\"build_arena_bytes\":%llu,\"build_table_bytes\":%llu,\"build_bytes\":%llu,\"table_ns\":%llu",
             (unsigned long long)rows, (unsigned long long)nulls, (unsigned long long)st->table.distinct,
             (unsigned long long)arena, (unsigned long long)table, (unsigned long long)(arena + table),
             (unsigned long long)st->table_ns);
    if (st->rf_out) {
      size_t used = strlen(buf);
      snprintf(buf + used, cap - used, ",\"rf_bytes\":%llu,\"rf_ns\":%llu", (unsigned long long)st->rf_bytes,
               (unsigned long long)st->rf_ns);
    }
  } else {
    uint64_t matches = 0;
    for (int w = 0; w < st->nmatch_slots; w++) matches += st->matches[w];
    snprintf(buf, cap, ",\"matches\":%llu,\"build_bytes\":%llu", (unsigned long long)matches,
             (unsigned long long)(arena + table));
    if (JG_JOIN.type == JG_JOIN_RIGHT_OUTER) {
      size_t used = strlen(buf);
      snprintf(buf + used, cap - used, ",\"unmatched_build_rows\":%llu", (unsigned long long)st->unmatched);
    }
  }
}

static const jgr_driver join_driver = {"hash_join", 2, 1, join_prepare, join_work};

int main(int argc, char **argv) {
  jgr_extra_stats = join_stats;
  return jgr_main(argc, argv, &join_driver);
}
