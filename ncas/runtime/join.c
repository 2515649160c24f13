/* Hash-join NCA driver: phase 0 (build) receives input port 0 and builds a hash table, phase 1
 * (probe) receives input port 1, looks every row up and emits joined rows on output port 0
 * (thesis §3.3.5: the build side is complete before the probe side starts; the table lives in
 * this process between the two `execute` commands).
 *
 * Build. Each worker decodes its build streams (contract §2, by the layout of
 * JG_JOIN.build_columns), evaluates the generated build keys and copies the raw NTF tuple, with
 * its packed key values (jg_join.h), into its own chunked arena (no allocation per tuple). Rows
 * with a NULL key can match nothing: they are dropped, except by a right_outer join, which keeps
 * them aside (flagged, not in the table) to output at the end. The last worker to finish inserts every
 * entry into one open-addressing table (linear probing, sized for a load factor <= 1/2, never
 * resized). A slot holds an entry pointer, the top 16 bits of the key hash (jg_hash v1) as a tag
 * in bits 48..63, and in bit 0 whether the entry spans two cache lines; the entries of one
 * distinct key are chained behind the entry in the slot, so duplicate keys never lengthen probe
 * sequences. Arena chunks and the table are mapped in 2 MiB pages where the kernel allows.
 *
 * Probe. Workers run independently on their share of the probe streams over the read-only table,
 * each with its own output connection. Rows move through a three-stage software pipeline so that
 * table and entry loads are prefetched well before they are needed (see probe_tuples). For each
 * row the keys are compared exactly with every candidate's (generated equality), the extra
 * condition is evaluated over (probe row, build row) with the matched build tuple decoded into
 * the second half of the joined row, and rows are emitted by the join type: inner (every match),
 * left_outer (every match, or once with the build half NULL), left_semi (once if any match),
 * left_anti (once if none), right_outer (every match, flagging the build row as matched). Only the
 * columns some generated function reads are decoded.
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
#define PTR_MASK (((UINT64_C(1) << 48) - 1) & ~UINT64_C(7))
#define SPANS_TWO_LINES UINT64_C(1)
#define TAG(h) ((h) >> 48)

/* ------------------------------------------------------------------ build storage */

/* One build row. Followed by its packed keys (8 bytes a key), the NTF tuple (len bytes, padded
 * to 8), then the bytes of string keys that do not point into the tuple (computed keys). */
typedef struct jn_entry {
  union {
    uint64_t hash;          /* until the entry is in the table */
    struct jn_entry *next;  /* then: the next build row with equal keys */
  } u;
  uint32_t len;  /* tuple bytes */
  uint32_t size; /* bytes of the whole entry, to walk a chunk (ENTRY_BYTES), and two flags */
} jn_entry;

#define ENTRY_MATCHED 0x80000000u  /* right_outer: some probe row matched it */
#define ENTRY_NULL_KEY 0x40000000u /* right_outer: a NULL key, kept to output; not in the table */
#define ENTRY_BYTES 0x3fffffffu

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
} jn_arena;

static inline size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static inline const uint8_t *entry_keys(const jn_entry *e) { return (const uint8_t *)(e + 1); }

static inline const uint8_t *entry_tuple(const jn_entry *e) { return entry_keys(e) + 8 * (size_t)JG_JOIN.nkeys; }

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
  jgr_ntf_layout build_layout, probe_layout;
  uint32_t nprobe, nbuild, nkeys, width;
  uint32_t *probe_fields, nprobe_fields; /* the probe columns to decode */
  uint32_t *build_fields, nbuild_fields; /* the build columns to decode for matches */
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

/* Indexes of the columns flagged in `used` (all when `used` is NULL). */
static uint32_t *used_fields(const uint8_t *used, uint32_t n, uint32_t *count) {
  uint32_t *idx = calloc(n ? n : 1, sizeof *idx);
  *count = 0;
  for (uint32_t i = 0; idx && i < n; i++)
    if (!used || used[i]) idx[(*count)++] = i;
  return idx;
}

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
    st->probe_fields = used_fields(JG_JOIN.probe_used, st->nprobe, &st->nprobe_fields);
    st->build_fields = used_fields(JG_JOIN.build_used, st->nbuild, &st->nbuild_fields);
    st->narenas = p->threads;
    st->arenas = calloc((size_t)p->threads, sizeof *st->arenas);
    if (jgr_ntf_layout_from_columns(&st->build_layout, JG_JOIN.build_columns, st->nbuild) != 0 ||
        jgr_ntf_layout_from_columns(&st->probe_layout, JG_QUERY.columns, st->nprobe) != 0 || !st->arenas ||
        !st->probe_fields || !st->build_fields) {
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

typedef struct {
  join_state *st;
  jn_arena *arena;
  jg_val *row;  /* nbuild */
  jg_val *keys; /* nkeys */
} build_arg;

/* Copy one build row (packed keys and tuple) into the arena. String keys pointing into the tuple
 * refer to its copy; others (computed into scratch memory) are copied after it. */
static jn_entry *store_row(build_arg *a, const uint8_t *t, uint32_t len, uint64_t hash) {
  const uint32_t nkeys = a->st->nkeys;
  size_t extra = 0;
  for (uint32_t k = 0; k < nkeys; k++)
    if (JG_JOIN.key_types[k] == JG_STRING) {
      const uint8_t *s = (const uint8_t *)a->keys[k].v.s.p;
      if (!(s >= t && s + a->keys[k].v.s.n <= t + len)) extra += a->keys[k].v.s.n;
    }
  size_t size = align8(sizeof(jn_entry) + 8 * (size_t)nkeys + align8(len) + extra);
  if (size > ENTRY_BYTES) return NULL;
  jn_entry *e = arena_alloc(a->arena, size);
  if (!e) return NULL;
  e->u.hash = hash;
  e->len = len;
  e->size = (uint32_t)size;
  uint8_t *packed = (uint8_t *)(e + 1);
  uint8_t *copy = packed + 8 * (size_t)nkeys;
  memcpy(copy, t, len);
  uint8_t *var = copy + align8(len);
  for (uint32_t k = 0; k < nkeys; k++) {
    const jg_val *v = &a->keys[k];
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

static int build_tuples(void *arg, jg_ctx *ctx, const uint8_t *const *tuples, const uint32_t *lens,
                        size_t n, jgr_error *err) {
  build_arg *a = arg;
  for (size_t i = 0; i < n; i++) {
    const char *why;
    if (JGR_UNLIKELY(jgr_ntf_decode(&a->st->build_layout, tuples[i], lens[i], a->row, &why) != 0)) {
      jgr_error_set(err, "input port 0 (build side): malformed tuple: %s", why);
      return -1;
    }
    jgr_scratch_reset(ctx);
    uint64_t hash = 0;
    int r = JG_JOIN.build_keys(ctx, a->row, a->keys, &hash);
    if (JGR_UNLIKELY(r == JG_ROW_ERROR || ctx->flags != 0)) {
      jgr_row_error(ctx, err);
      return -1;
    }
    const int null_key = r == JG_KEY_NULL;
    if (null_key) {
      a->arena->null_key_rows++;
      if (JG_JOIN.type != JG_JOIN_RIGHT_OUTER) continue;
      for (uint32_t k = 0; k < a->st->nkeys; k++) a->keys[k].v.s.n = 0; /* nothing to pack */
    }
    jn_entry *e = store_row(a, tuples[i], lens[i], hash);
    if (JGR_UNLIKELY(!e)) {
      jgr_error_set(err, "hash join: out of memory holding the build side (%llu rows, %zu bytes so far)",
                    (unsigned long long)a->arena->rows, a->arena->bytes);
      return -1;
    }
    if (null_key) e->size |= ENTRY_NULL_KEY;
    else a->arena->rows++;
  }
  return 0;
}

static uint64_t table_capacity(uint64_t rows) {
  uint64_t cap = 16;
  while (cap < 2 * rows) cap <<= 1;
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
      uint64_t spans = (((uintptr_t)e & 63) + entry_bytes(e) > 64) ? SPANS_TWO_LINES : 0;
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

#define INSERT_AHEAD 16 /* entries whose home slots are prefetched before they are inserted */

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
  build_arg a = {st, &st->arenas[ctx->worker], calloc(st->nbuild ? st->nbuild : 1, sizeof(jg_val)),
                 calloc(st->nkeys, sizeof(jg_val))};
  int rc = (a.row && a.keys) ? jgr_in_run(st->in, ctx, build_tuples, &a, err) : -1;
  if (!a.row || !a.keys) jgr_error_set(err, "out of memory");
  free(a.row);
  free(a.keys);
  if (rc != 0) return rc;
  if (__atomic_add_fetch(&st->finished, 1, __ATOMIC_ACQ_REL) == st->narenas) {
    if (st->rf_out && emit_runtime_filter(st, err) != 0) return -1;
    if (build_table(st, err) != 0) return -1;
    __atomic_store_n(&st->built, 1, __ATOMIC_RELEASE);
  }
  return 0;
}

/* ------------------------------------------------------------------ probe phase */

/* Probe rows move through three stages, each a fixed distance behind the previous one, so that
 * memory loads have time to arrive: (1) decode, keys, hash, prefetch the home slot; (2) AHEAD_SLOT
 * rows later, find the first slot with the row's tag and prefetch its entry; (3) AHEAD_ENTRY rows
 * later still, compare keys and emit. In-flight rows live in a ring of RING joined rows. */
#define AHEAD_SLOT 8
#define AHEAD_ENTRY 8
#define RING 32 /* a power of two > AHEAD_SLOT + AHEAD_ENTRY */

typedef struct {
  join_state *st;
  uint64_t matches;
  jg_val *rows; /* RING joined rows of `width` values */
  jg_val *keys; /* RING * nkeys */
  uint64_t hash[RING];
  uint64_t pos[RING];   /* slot of the candidate */
  jn_entry *cand[RING]; /* first entry whose slot tag matched, or NULL */
  uint8_t null_key[RING];
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

static inline int decode_build(const join_state *st, const jn_entry *e, jg_val *half, jgr_error *err) {
  const char *why;
  if (JGR_UNLIKELY(jgr_ntf_decode_fields(&st->build_layout, st->build_fields, st->nbuild_fields, entry_tuple(e), e->len,
                                 half, &why) != 0)) {
    jgr_error_set(err, "hash join: stored build tuple does not decode: %s", why);
    return -1;
  }
  return 0;
}

/* The first slot at or after `*pos` whose tag is `tag` (its value), or 0 at an empty slot. */
static inline uint64_t next_candidate(const jn_table *t, uint64_t *pos, uint64_t tag) {
  for (uint64_t i = *pos;; i = (i + 1) & t->mask) {
    uint64_t s = t->slots[i];
    if (s == 0 || (s >> 48) == tag) {
      *pos = i;
      return s;
    }
  }
}

static inline jn_entry *slot_entry(uint64_t s) { return (jn_entry *)(uintptr_t)(s & PTR_MASK); }

/* All rules of the join type for one probe row (its keys already evaluated). */
static int probe_row(probe_arg *a, jg_ctx *ctx, jg_val *row, const jg_val *keys, int k, jgr_error *err) {
  const join_state *st = a->st;
  const jn_table *t = &st->table;
  const int type = JG_JOIN.type;
  const int emits_pairs = type == JG_JOIN_INNER || type == JG_JOIN_LEFT_OUTER || type == JG_JOIN_RIGHT_OUTER;
  const int decode = JG_JOIN.condition_reads_build || (emits_pairs && JG_JOIN.output_reads_build);
  jg_val *half = row + st->nprobe;
  int matched = 0;
  if (!a->null_key[k]) {
    const uint64_t tag = TAG(a->hash[k]);
    uint64_t pos = a->pos[k];
    for (jn_entry *e = a->cand[k]; e;) {
      if (JG_JOIN.keys_equal(keys, entry_keys(e))) {
        for (const jn_entry *x = e; x; x = x->u.next) {
          if (decode && decode_build(st, x, half, err) != 0) return -1;
          if (JG_JOIN.condition) {
            size_t mark = ctx->scratch_used;
            int c = JG_JOIN.condition(ctx, row);
            if (JGR_UNLIKELY(c < 0 || (ctx->flags & JGR_FAILED))) {
              jgr_row_error(ctx, err);
              return -1;
            }
            if (JGR_LIKELY(ctx->scratch_more == NULL)) ctx->scratch_used = mark;
            if (!c) continue;
          }
          matched = 1;
          a->matches++;
          if (type == JG_JOIN_RIGHT_OUTER && !(__atomic_load_n(&x->size, __ATOMIC_RELAXED) & ENTRY_MATCHED))
            __atomic_fetch_or((uint32_t *)&x->size, ENTRY_MATCHED, __ATOMIC_RELAXED);
          if (!emits_pairs) break;
          if (output_row(ctx, row, err) != 0) return -1;
        }
        break; /* equal keys share one slot: no other slot can match */
      }
      pos = (pos + 1) & t->mask;
      e = slot_entry(next_candidate(t, &pos, tag));
    }
  }
  if (type == JG_JOIN_LEFT_SEMI ? matched : type == JG_JOIN_LEFT_ANTI ? !matched : 0)
    return output_row(ctx, row, err);
  if (type == JG_JOIN_LEFT_OUTER && !matched) {
    memset(half, 0, st->nbuild * sizeof *half);
    for (uint32_t j = 0; j < st->nbuild; j++) half[j].null = 1;
    return output_row(ctx, row, err);
  }
  return 0;
}

static int probe_tuples(void *arg, jg_ctx *ctx, const uint8_t *const *tuples, const uint32_t *lens,
                        size_t n, jgr_error *err) {
  probe_arg *a = arg;
  const join_state *st = a->st;
  const jn_table *t = &st->table;
  const uint32_t width = st->width, nkeys = st->nkeys;
  /* Keys of in-flight rows may live in scratch memory: reset only between batches. */
  jgr_scratch_reset(ctx);
  for (size_t i = 0; i < n + AHEAD_SLOT + AHEAD_ENTRY; i++) {
    if (i < n) { /* stage 1 */
      const int k = (int)(i & (RING - 1));
      jg_val *row = a->rows + (size_t)k * width;
      const char *why;
      if (JGR_UNLIKELY(jgr_ntf_decode_fields(&st->probe_layout, st->probe_fields, st->nprobe_fields, tuples[i], lens[i],
                                     row, &why) != 0)) {
        jgr_error_set(err, "input port 1 (probe side): malformed tuple: %s", why);
        return -1;
      }
      int r = JG_JOIN.probe_keys(ctx, row, a->keys + (size_t)k * nkeys, &a->hash[k]);
      if (JGR_UNLIKELY(r == JG_ROW_ERROR || (ctx->flags & JGR_FAILED))) {
        jgr_row_error(ctx, err);
        return -1;
      }
      a->null_key[k] = r == JG_KEY_NULL;
      if (r == JG_ROW_OK) __builtin_prefetch(&t->slots[a->hash[k] & t->mask]);
    }
    if (i >= AHEAD_SLOT && i - AHEAD_SLOT < n) { /* stage 2 */
      const int k = (int)((i - AHEAD_SLOT) & (RING - 1));
      a->cand[k] = NULL;
      if (!a->null_key[k]) {
        a->pos[k] = a->hash[k] & t->mask;
        uint64_t s = next_candidate(t, &a->pos[k], TAG(a->hash[k]));
        jn_entry *e = slot_entry(s);
        if (e) {
          __builtin_prefetch(e);
          if (s & SPANS_TWO_LINES) __builtin_prefetch((const uint8_t *)e + 64);
        }
        a->cand[k] = e;
      }
    }
    if (i >= AHEAD_SLOT + AHEAD_ENTRY) { /* stage 3 */
      const int k = (int)((i - AHEAD_SLOT - AHEAD_ENTRY) & (RING - 1));
      if (probe_row(a, ctx, a->rows + (size_t)k * width, a->keys + (size_t)k * nkeys, k, err) != 0) return -1;
    }
  }
  return 0;
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
        if (decode_build(st, e, row + st->nprobe, err) != 0 || output_row(ctx, row, err) != 0) return -1;
        st->unmatched++;
      }
  return 0;
}

static int probe_work(jgr_proc *p, jg_ctx *ctx, jgr_error *err) {
  join_state *st = p->driver_state;
  probe_arg *a = calloc(1, sizeof *a);
  if (a) {
    a->st = st;
    a->rows = calloc((size_t)RING * (st->width ? st->width : 1), sizeof(jg_val));
    a->keys = calloc((size_t)RING * st->nkeys, sizeof(jg_val));
  }
  int rc;
  if (!a || !a->rows || !a->keys) {
    jgr_error_set(err, "out of memory");
    rc = -1;
  } else {
    rc = jgr_in_run(st->in, ctx, probe_tuples, a, err);
    /* every worker counts itself done, failed or not, so that the last one is known */
    const int last = __atomic_add_fetch(&st->probed, 1, __ATOMIC_ACQ_REL) == st->nmatch_slots;
    if (rc == 0 && last && JG_JOIN.type == JG_JOIN_RIGHT_OUTER) rc = emit_unmatched(st, ctx, a->rows, err);
    if (rc == 0) rc = jgr_call_finish(ctx, err); /* the query's end-of-input hook (jgrt.h) */
    st->matches[ctx->worker] = a->matches;
  }
  if (a) {
    free(a->rows);
    free(a->keys);
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
