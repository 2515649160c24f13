/* The aggregation hash table's query-independent half (see jg_agg.h): memory, growth, the partial
 * mode's bound and evictions, and merging the workers' tables at the end of input. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "jg_agg.h"
#include "jgrt.h"

/* Slots per entry (the load factor's inverse): at 1/4 a probe mostly ends at its first slot, so
 * the probe loop's branch is predictable; at 1/2 a group of 1000 took 2.5 ns longer per row. A
 * slot costs 8 bytes, an entry 32 to 128. */
#define LOAD 4u
#define INITIAL_SLOTS 1024u
#define MIN_SLOTS 16u
#define MAX_ENTRIES (1u << 31)
#define CHUNK_MAX (256u << 10)
#define CHUNK_MIN 256u

typedef struct chunk {
  struct chunk *next;
  uint64_t size;
} chunk;

/* Out of memory outside the row path (merging, strings) ends the process, as in ctx.c; growing
 * the table on the row path is a data error instead (see jg_agg_insert). */
static _Noreturn void oom(size_t n) {
  fprintf(stderr, "jgrt: aggregation: out of memory (%zu bytes)\n", n);
  abort();
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) oom(n);
  return p;
}

/* Slots and entries are aligned to cache lines: generated entries of up to 64 bytes are aligned to
 * their power-of-two size, so none straddles two lines (one miss per probed group). Arrays of 2 MiB
 * or more are whole huge pages, asked of the kernel (transparent huge pages are often enabled for
 * madvise only): a probe into a table of many groups then rarely misses the TLB as well as the
 * cache (5-10% fewer ns per row at 100K groups). */
#define HUGE_PAGE (2u << 20)

static void *line_alloc(size_t n, int zero) {
  void *p = NULL;
  if (n >= HUGE_PAGE) {
    n = (n + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
    if (posix_memalign(&p, HUGE_PAGE, n) != 0) return NULL;
    (void)madvise(p, n, MADV_HUGEPAGE); /* advice: without it the table works as before */
  } else if (posix_memalign(&p, 64, n ? n : 64) != 0) {
    return NULL;
  }
  if (zero) memset(p, 0, n);
  return p;
}

static uint64_t arrays_bytes(uint64_t nslots, uint64_t entry_size) { return nslots * 8 + nslots / LOAD * entry_size; }

static char *entry_at(const jg_agg_table *t, uint64_t i) { return t->entries + i * t->entry_size; }

static uint64_t entry_hash(const void *e) {
  uint64_t h;
  memcpy(&h, e, 8);
  return h;
}

static void note_bytes(jg_agg_table *t) {
  if (t->bytes > t->peak_bytes) t->peak_bytes = t->bytes;
}

/* ------------------------------------------------------------------ create, grow, clear */

/* A table for `groups` entries without growing (0: the initial size), within `bound` (0: none). */
static jg_agg_table *table_new(jg_ctx *ctx, const jg_agg_desc *desc, uint64_t bound, uint64_t groups) {
  jg_agg_table *t = xmalloc(sizeof *t);
  memset(t, 0, sizeof *t);
  t->ctx = ctx;
  t->desc = desc;
  t->entry_size = desc->entry_size;
  t->bound = bound;
  uint64_t n = INITIAL_SLOTS;
  while (bound && n > MIN_SLOTS && arrays_bytes(n, t->entry_size) > bound / 2) n /= 2;
  while (!bound && n / LOAD < groups && n / LOAD < MAX_ENTRIES) n *= 2;
  t->slots = line_alloc(n * 8, 1);
  t->entries = line_alloc(n / LOAD * t->entry_size, 0);
  if (!t->slots || !t->entries) oom(arrays_bytes(n, t->entry_size));
  t->mask = n - 1;
  t->limit = (uint32_t)(n / LOAD);
  t->bytes = arrays_bytes(n, t->entry_size);
  /* arena chunks: a small fraction of a bound, so a tiny bound still holds several entries */
  t->chunk_size = bound ? bound / 16 : CHUNK_MAX;
  if (t->chunk_size > CHUNK_MAX) t->chunk_size = CHUNK_MAX;
  if (t->chunk_size < CHUNK_MIN) t->chunk_size = CHUNK_MIN;
  note_bytes(t);
  return t;
}

static void arena_free(jg_agg_table *t) {
  for (chunk *c = t->chunks, *next; c; c = next) {
    next = c->next;
    t->bytes -= c->size;
    free(c);
  }
  t->chunks = NULL;
  t->arena_at = NULL;
  t->arena_left = 0;
}

static void table_free(jg_agg_table *t) {
  if (!t) return;
  arena_free(t);
  free(t->slots);
  free(t->entries);
  free(t);
}

/* Make `n` contiguous arena bytes available. */
static void arena_reserve(jg_agg_table *t, uint64_t n) {
  if (n <= t->arena_left) return;
  uint64_t size = n > t->chunk_size ? n : t->chunk_size;
  chunk *c = xmalloc(sizeof(chunk) + size);
  c->next = t->chunks;
  c->size = size;
  t->chunks = c;
  t->arena_at = (char *)(c + 1);
  t->arena_left = size;
  t->bytes += size;
  note_bytes(t);
}

static char *arena_alloc(jg_agg_table *t, uint64_t n) {
  arena_reserve(t, n);
  char *p = t->arena_at;
  t->arena_at += n;
  t->arena_left -= n;
  return p;
}

jg_str jg_agg_store_str(jg_agg_table *t, jg_str s) {
  jg_str out = {"", 0};
  if (s.n == 0) return out;
  char *p = arena_alloc(t, s.n);
  memcpy(p, s.p, s.n);
  out.p = p;
  out.n = s.n;
  return out;
}

void jg_agg_set_str(jg_agg_table *t, jg_str *dst, uint32_t *cap, jg_str s) {
  if (s.n > *cap) {
    dst->p = arena_alloc(t, s.n);
    *cap = s.n;
  } else if (!dst->p) {
    dst->p = ""; /* the empty string, as the first value */
  }
  if (s.n) memcpy((char *)dst->p, s.p, s.n);
  dst->n = s.n;
}

static void place(jg_agg_table *t, uint64_t h, uint64_t index) {
  uint64_t i = h & t->mask;
  while (t->slots[i]) i = (i + 1) & t->mask;
  t->slots[i] = (h >> 32 << 32) | (index + 1);
}

/* Double the slots and the entry array; entries stay where they are, slots are rebuilt. */
static int grow(jg_agg_table *t) {
  uint64_t n = (t->mask + 1) * 2;
  if (n / LOAD > MAX_ENTRIES) return -1;
  uint64_t *slots = line_alloc(n * 8, 1);
  char *entries = slots ? line_alloc(n / LOAD * t->entry_size, 0) : NULL;
  if (!slots || !entries) {
    free(slots);
    return -1;
  }
  memcpy(entries, t->entries, (size_t)t->count * t->entry_size);
  free(t->entries);
  free(t->slots);
  t->slots = slots;
  t->entries = entries;
  t->bytes += arrays_bytes(n, t->entry_size) - arrays_bytes(t->mask + 1, t->entry_size);
  t->mask = n - 1;
  t->limit = (uint32_t)(n / LOAD);
  for (uint64_t i = 0; i < t->count; i++) place(t, entry_hash(entry_at(t, i)), i);
  note_bytes(t);
  return 0;
}

static void clear(jg_agg_table *t) {
  memset(t->slots, 0, (t->mask + 1) * 8);
  t->count = 0;
  arena_free(t);
}

/* Emit every entry. Called between rows (end of input) or in the middle of one (an eviction):
 * then the row's scratch strings (its keys, maybe) must survive, so each emit rewinds scratch
 * memory only to where it stood, and only while no overflow block was taken. */
static int emit_all(jg_agg_table *t, jg_ctx *ctx) {
  const size_t mark = ctx->scratch_used;
  for (uint64_t i = 0; i < t->count; i++) {
    if (!ctx->scratch_more) ctx->scratch_used = mark;
    if (t->desc->emit(ctx, entry_at(t, i)) != JG_ROW_OK || ctx->flags) return -1;
  }
  t->emitted += t->count;
  return 0;
}

/* ------------------------------------------------------------------ the row path */

static int out_of_memory(jg_agg_table *t) {
  char msg[160];
  snprintf(msg, sizeof msg, "aggregation: out of memory growing the table beyond %u groups", t->count);
  jg_fail(t->ctx, msg);
  return -1;
}

void *jg_agg_insert(jg_agg_table *t, uint64_t h, uint64_t slot, uint64_t extra) {
  int moved = 0;
  if (t->bound && t->count > 0) {
    uint64_t need = 0;
    if (t->count == t->limit) need += arrays_bytes((t->mask + 1) * 2, t->entry_size) - arrays_bytes(t->mask + 1, t->entry_size);
    if (extra > t->arena_left) need += extra > t->chunk_size ? extra : t->chunk_size;
    if (t->bytes + need > t->bound) { /* evict everything as partial rows */
      if (emit_all(t, t->ctx) != 0) return NULL;
      clear(t);
      t->flushes++;
      moved = 1;
    }
  }
  if (t->count == t->limit) {
    if (grow(t) != 0) return out_of_memory(t), NULL;
    moved = 1;
  }
  arena_reserve(t, extra);
  if (moved) {
    slot = h & t->mask;
    while (t->slots[slot]) slot = (slot + 1) & t->mask;
  }
  char *e = entry_at(t, t->count);
  memset(e, 0, t->entry_size);
  memcpy(e, &h, 8);
  t->slots[slot] = (h >> 32 << 32) | ((uint64_t)t->count + 1);
  t->count++;
  return e;
}

/* ------------------------------------------------------------------ workers and the end of input */

/* The workers of the running phase: one table each, merged in complete and final mode. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  jg_agg_table **tables;
  int ntables;
  int waiting;
  unsigned generation;
} reg = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0};

/* Wait until all `n` workers got here. A failing worker makes the process exit (control.c), so
 * nobody waits for a worker that will never come. */
static void barrier(int n) {
  pthread_mutex_lock(&reg.mu);
  unsigned gen = reg.generation;
  if (++reg.waiting == n) {
    reg.waiting = 0;
    reg.generation++;
    pthread_cond_broadcast(&reg.cv);
  } else {
    while (gen == reg.generation) pthread_cond_wait(&reg.cv, &reg.mu);
  }
  pthread_mutex_unlock(&reg.mu);
}

jg_agg_table *jg_agg_open(jg_ctx *ctx, const jg_agg_desc *desc) {
  uint64_t bound = 0;
  if (desc->mode == JG_AGG_PARTIAL) {
    jgr_error err = {0};
    if (jgr_param_u64(ctx->proc, "agg.table_bytes", JG_AGG_DEFAULT_TABLE_BYTES, 1024, 1ull << 40, &bound, &err) != 0) {
      jg_fail(ctx, err.message);
      return NULL;
    }
  }
  return table_new(ctx, desc, bound, 0);
}

/* Partition of a hash among n workers: from the bits the slot index does not use first. */
static int partition(uint64_t h, int n) { return (int)(((h >> 32) * (uint64_t)n) >> 32); }

/* Worker `w`'s share of every worker's table, merged into a new table. */
static jg_agg_table *merge_partition(jg_ctx *ctx, const jg_agg_desc *desc, int w) {
  /* Sized for its share of all the groups up front: growing it by doubling as groups arrive
   * (1.4 M groups in TPC-H Q4's distinct order keys) rehashed and copied it some 20 times. */
  uint64_t all = 0;
  for (int k = 0; k < reg.ntables; k++) all += reg.tables[k]->count;
  jg_agg_table *p = table_new(ctx, desc, 0, all / (uint64_t)reg.ntables + all / 16);
  for (int k = 0; k < reg.ntables; k++) {
    const jg_agg_table *src = reg.tables[k];
    for (uint64_t i = 0; i < src->count; i++) {
      const char *e = entry_at(src, i);
      uint64_t h = entry_hash(e);
      if (partition(h, reg.ntables) != w) continue;
      uint64_t slot = h & p->mask;
      void *dst = NULL;
      for (uint64_t s; (s = p->slots[slot]) != 0; slot = (slot + 1) & p->mask) {
        char *cand = entry_at(p, (uint32_t)s - 1);
        if ((s >> 32) == (h >> 32) && desc->same_key(cand, e)) {
          dst = cand;
          break;
        }
      }
      if (dst) {
        desc->merge(p, dst, e);
      } else {
        dst = jg_agg_insert(p, h, slot, 0);
        if (!dst) {
          table_free(p);
          return NULL;
        }
        desc->copy(p, dst, e);
      }
    }
  }
  return p;
}

/* Counters of the phase for the `done` event (control.c's jgr_extra_stats hook), summed over
 * workers: groups emitted, peak table bytes, and the partial mode's evictions. */
static struct {
  uint64_t groups, bytes, evictions;
  int partial;
  void (*next)(jgr_proc *p, int phase, char *buf, size_t cap);
} stats;

static void extra_stats(jgr_proc *p, int phase, char *buf, size_t cap) {
  size_t n = 0;
  if (stats.next) {
    stats.next(p, phase, buf, cap);
    n = strlen(buf);
  }
  if (stats.partial)
    snprintf(buf + n, cap - n, ",\"agg_groups_out\":%llu,\"agg_table_bytes\":%llu,\"agg_evictions\":%llu",
             (unsigned long long)stats.groups, (unsigned long long)stats.bytes, (unsigned long long)stats.evictions);
  else
    snprintf(buf + n, cap - n, ",\"agg_groups_out\":%llu,\"agg_table_bytes\":%llu",
             (unsigned long long)stats.groups, (unsigned long long)stats.bytes);
  stats.groups = stats.bytes = stats.evictions = 0;
}

static void hook_stats(void) {
  stats.next = jgr_extra_stats;
  jgr_extra_stats = extra_stats;
}

static void report(const jg_agg_table *t) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, hook_stats);
  pthread_mutex_lock(&reg.mu);
  stats.groups += t->emitted;
  stats.bytes += t->peak_bytes;
  stats.evictions += t->flushes;
  stats.partial = t->desc->mode == JG_AGG_PARTIAL;
  pthread_mutex_unlock(&reg.mu);
}

int jg_agg_finish(jg_ctx *ctx, jg_agg_table *t) {
  const int n = ctx->proc->threads;
  if (t->desc->mode == JG_AGG_PARTIAL || n == 1) { /* partial: every worker emits its own groups */
    int rc = emit_all(t, ctx);
    report(t);
    table_free(t);
    return rc == 0 ? JG_ROW_OK : JG_ROW_ERROR;
  }
  pthread_mutex_lock(&reg.mu);
  if (!reg.tables) {
    reg.tables = xmalloc(sizeof *reg.tables * (size_t)n);
    reg.ntables = n;
  }
  reg.tables[ctx->worker] = t;
  pthread_mutex_unlock(&reg.mu);
  barrier(n); /* every table is complete */
  jg_agg_table *p = merge_partition(ctx, t->desc, ctx->worker);
  int rc = p ? emit_all(p, ctx) : -1;
  barrier(n); /* nobody reads the tables any more */
  if (p) {
    p->peak_bytes += t->peak_bytes;
    report(p);
  }
  table_free(p);
  table_free(t);
  return rc == 0 ? JG_ROW_OK : JG_ROW_ERROR;
}
