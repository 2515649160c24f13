/* Runtime filters on the probe side (docs/runtime-filters.md): the filters handed to this NCA with
 * `rfilter SLOT HEX` before its phase runs, and jg_rf_test, which a probe-side scan's generated row
 * function calls after its own filters and before it encodes the row as NTF. Filters are installed
 * by the main thread between phases only and read by the workers during a phase, so no lock. */
#include "jg_hash.h"
#include "jg_rfilter.h"

#include <stdlib.h>
#include <string.h>

#include "jgrt.h"

#define RF_SLOTS 16

static jg_rfilter *slots[RF_SLOTS];

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int jgr_rf_install(uint32_t slot, const char *hex, jgr_error *err) {
  if (slot >= RF_SLOTS) {
    jgr_error_set(err, "rfilter: slot %u out of range (0..%d)", slot, RF_SLOTS - 1);
    return -1;
  }
  if (slots[slot]) {
    jg_rf_free(slots[slot]);
    free(slots[slot]);
    slots[slot] = NULL;
  }
  if (strcmp(hex, "none") == 0) return 0;
  size_t n = strlen(hex);
  if (n % 2) {
    jgr_error_set(err, "rfilter: odd number of hex digits");
    return -1;
  }
  uint8_t *blob = malloc(n / 2 + 1);
  jg_rfilter *f = calloc(1, sizeof *f);
  if (!blob || !f) {
    free(blob);
    free(f);
    jgr_error_set(err, "rfilter: out of memory");
    return -1;
  }
  for (size_t i = 0; i < n / 2; i++) {
    int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      free(blob);
      free(f);
      jgr_error_set(err, "rfilter: not hex");
      return -1;
    }
    blob[i] = (uint8_t)(hi << 4 | lo);
  }
  const char *why = "";
  int rc = jg_rf_read(f, blob, n / 2, &why);
  free(blob);
  if (rc != 0) {
    jg_rf_free(f);
    free(f);
    jgr_error_set(err, "rfilter: %s", why);
    return -1;
  }
  slots[slot] = f;
  return 0;
}

uint32_t jgr_rf_installed(void) {
  uint32_t n = 0;
  for (int i = 0; i < RF_SLOTS; i++) n += slots[i] != NULL;
  return n;
}

static int test(jg_ctx *ctx, const jg_rfilter *f, int null, uint64_t hash, const int64_t *ints) {
  ctx->stats.rf_tested++;
  int keep = !null;
  for (uint32_t k = 0; keep && k < f->nkeys; k++)
    if (f->has_range[k] && (ints[k] < f->min[k] || ints[k] > f->max[k])) keep = 0;
  if (keep && f->nblocks) keep = jg_rf_maybe(f, hash);
  if (!keep) ctx->stats.rf_removed++;
  return keep;
}

int jg_rf_test(jg_ctx *ctx, uint32_t slot, int null, uint64_t hash, const int64_t *ints) {
  slot += ctx->rf_base; /* a shared scan's member numbers its slots from 0 */
  const jg_rfilter *f = slot < RF_SLOTS ? slots[slot] : NULL;
  if (!f || ctx->rf_pretested) return 1;
  return test(ctx, f, null, hash, ints);
}

/* One filter over the tile's rows keep[0..n): hash[], ok[] per row, then the Bloom blocks, then the
 * kept rows compacted. The key columns are looped over outside the rows, so the type switch is
 * once per key and tile; a null key drops the row (its hash is then never looked at, and a null
 * string's bytes never read). */
static int tile_filter(jg_ctx *ctx, const jg_rfilter *f, uint32_t s, const jg_val *rows, size_t stride,
                       uint32_t *keep, int n) {
  uint64_t hash[JGR_RF_TILE_MAX];
  uint8_t ok[JGR_RF_TILE_MAX];
  for (int i = 0; i < n; i++) hash[i] = JG_HASH_SEED, ok[i] = 1;
  const uint32_t nk = JG_QUERY.rf_nkeys[s], *keys = JG_QUERY.rf_keys[s];
  for (uint32_t k = 0; k < nk && k < 64; k++) {
    const jg_val *col = rows + keys[k];
    const int ranged = k < f->nkeys && f->has_range[k];
    const int64_t lo = ranged ? f->min[k] : INT64_MIN, hi = ranged ? f->max[k] : INT64_MAX;
    switch (JG_QUERY.columns[keys[k]].type) {
      case JG_FLOAT64:
        for (int i = 0; i < n; i++) {
          const jg_val *v = col + keep[i] * stride;
          ok[i] &= !v->null & (v->v.i >= lo) & (v->v.i <= hi);
          hash[i] = jg_hash_combine(hash[i], jg_hash_float(v->v.f));
        }
        break;
      case JG_STRING:
        for (int i = 0; i < n; i++) {
          const jg_val *v = col + keep[i] * stride;
          ok[i] &= !v->null & (v->v.i >= lo) & (v->v.i <= hi);
          if (!v->null) hash[i] = jg_hash_combine(hash[i], jg_hash_bytes(v->v.s.p, v->v.s.n));
        }
        break;
      default:
        for (int i = 0; i < n; i++) {
          const jg_val *v = col + keep[i] * stride;
          ok[i] &= !v->null & (v->v.i >= lo) & (v->v.i <= hi);
          hash[i] = jg_hash_combine(hash[i], jg_hash_int(v->v.i));
        }
        break;
    }
  }
  if (f->nblocks) {
    /* A tile's blocks are scattered over the filter: asking for each some rows ahead lets their
     * misses overlap instead of each row waiting for its own. */
    enum { AHEAD = 16 };
    for (int i = 0; i < n && i < AHEAD; i++) __builtin_prefetch(jg_rf_block(f, hash[i]));
    for (int i = 0; i < n; i++) {
      if (i + AHEAD < n) __builtin_prefetch(jg_rf_block(f, hash[i + AHEAD]));
      ok[i] &= (uint8_t)jg_rf_maybe(f, hash[i]);
    }
  }
  int out = 0;
  for (int i = 0; i < n; i++) {
    keep[out] = keep[i];
    out += ok[i];
  }
  ctx->stats.rf_tested += (uint64_t)n;
  ctx->stats.rf_removed += (uint64_t)(n - out);
  return out;
}

const jg_rfilter *jgr_rf_slot(uint32_t slot) { return slot < RF_SLOTS ? slots[slot] : NULL; }

int jgr_rf_tile(jg_ctx *ctx, const jg_val *rows, size_t stride, int m, uint32_t *keep, uint32_t skip) {
  int kept = 0;
  for (int base = 0; base < m; base += JGR_RF_TILE_MAX) { /* tile_filter's arrays hold that many */
    int n = m - base < (int)JGR_RF_TILE_MAX ? m - base : (int)JGR_RF_TILE_MAX;
    uint32_t *k = keep + kept;
    for (int i = 0; i < n; i++) k[i] = (uint32_t)(base + i);
    for (uint32_t s = 0; n > 0 && s < JG_QUERY.nrf && s < RF_SLOTS; s++)
      if (slots[s] && !(skip >> s & 1u)) n = tile_filter(ctx, slots[s], s, rows, stride, k, n);
    kept += n;
  }
  return kept;
}
