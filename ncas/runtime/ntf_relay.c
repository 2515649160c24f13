/* NTF relay NCA: read NTF tuples from input port 0, run the generated row function on each,
 * write output port 0 (or whatever the row function emits). The smallest real user of the TCP
 * receiver and the NTF decoder, which join and aggregation NCAs reuse. It is the driver of the
 * NTF filter/project NCA (generated code re-encodes) and of the shuffle NCA (generated code hashes
 * the keys and forwards the raw input tuple, jg_input_tuple, to one of its output ports), and of
 * the aggregation NCA, whose generated JG_QUERY.tuples reads the tuples itself.
 *
 * The input layout is the contract §2 layout of JG_QUERY.columns, so for an NTF-reading query the
 * generator lists every field of the upstream schema, in order (not only the referenced ones).
 */
#include <stdlib.h>

#include "jgrt.h"

typedef struct {
  jgr_ntf_layout layout;
  jgr_in *in;
} relay_state;

static int relay_prepare(jgr_proc *p, int phase, jgr_error *err) {
  (void)phase;
  if (p->ninputs < 1 || p->inputs[0].expected == 0) {
    jgr_error_set(err, "ntf relay needs --inputs 1 and `expect 0 N` with N >= 1");
    return -1;
  }
  relay_state *st = calloc(1, sizeof *st);
  p->driver_state = st;
  if (jgr_ntf_layout_from_columns(&st->layout, JG_QUERY.columns, JG_QUERY.ncolumns) != 0) {
    jgr_error_set(err, "out of memory");
    return -1;
  }
  st->in = jgr_in_start(p, 0, p->threads, err);
  return st->in ? 0 : -1;
}

typedef struct {
  const jgr_ntf_layout *layout;
  jg_val *row;
} batch_arg;

static int relay_tuples(void *arg, jg_ctx *ctx, const uint8_t *const *tuples, const uint32_t *lens,
                        size_t n, jgr_error *err) {
  batch_arg *a = arg;
  for (size_t i = 0; i < n; i++) {
    const char *why;
    if (JGR_UNLIKELY(jgr_ntf_decode(a->layout, tuples[i], lens[i], a->row, &why) != 0)) {
      jgr_error_set(err, "input port 0: malformed tuple: %s", why);
      return -1;
    }
    ctx->in_tuple = tuples[i]; /* jg_input_tuple: a shuffle forwards these bytes unchanged */
    ctx->in_len = lens[i];
    if (JGR_UNLIKELY(jgr_call_row(ctx, a->row) != 0)) {
      ctx->in_tuple = NULL;
      jgr_row_error(ctx, err);
      return -1;
    }
  }
  ctx->in_tuple = NULL; /* the batch's bytes are not ours after we return */
  return 0;
}

/* A query with a batch function (JG_QUERY.rows, an aggregation) gets the rows of a batch at once. */
#define ROWS_PER_CALL 256

static int relay_rows(void *arg, jg_ctx *ctx, const uint8_t *const *tuples, const uint32_t *lens, size_t n,
                      jgr_error *err) {
  batch_arg *a = arg;
  const uint32_t nf = a->layout->nfields;
  for (size_t at = 0; at < n; at += ROWS_PER_CALL) {
    const uint32_t m = n - at < ROWS_PER_CALL ? (uint32_t)(n - at) : ROWS_PER_CALL;
    for (uint32_t i = 0; i < m; i++) {
      const char *why;
      if (JGR_UNLIKELY(jgr_ntf_decode(a->layout, tuples[at + i], lens[at + i], a->row + (size_t)i * nf, &why) != 0)) {
        jgr_error_set(err, "input port 0: malformed tuple: %s", why);
        return -1;
      }
    }
    if (JGR_UNLIKELY(jgr_call_rows(ctx, a->row, m) != 0)) {
      jgr_row_error(ctx, err);
      return -1;
    }
  }
  return 0;
}

/* A query that reads NTF tuples itself (JG_QUERY.tuples, an aggregation) gets them as they came. */
static int relay_query_tuples(void *arg, jg_ctx *ctx, const uint8_t *const *tuples, const uint32_t *lens,
                              size_t n, jgr_error *err) {
  (void)arg;
  for (size_t at = 0; at < n; at += ROWS_PER_CALL) {
    const uint32_t m = n - at < ROWS_PER_CALL ? (uint32_t)(n - at) : ROWS_PER_CALL;
    const char *why = "malformed";
    jgr_scratch_reset(ctx);
    const int r = JG_QUERY.tuples(ctx, tuples + at, lens + at, m, &why);
    if (JGR_UNLIKELY(r == JG_TUPLE_MALFORMED)) {
      jgr_error_set(err, "input port 0: malformed tuple: %s", why);
      return -1;
    }
    if (JGR_UNLIKELY(r != JG_ROW_OK || ctx->flags != 0)) {
      jgr_row_error(ctx, err);
      return -1;
    }
  }
  return 0;
}

static int relay_work(jgr_proc *p, int phase, jg_ctx *ctx, jgr_error *err) {
  (void)phase;
  relay_state *st = p->driver_state;
  size_t nrows = JG_QUERY.rows ? ROWS_PER_CALL : 1;
  jg_val *row = calloc(nrows * (st->layout.nfields ? st->layout.nfields : 1), sizeof *row);
  batch_arg a = {&st->layout, row};
  jgr_tuples_fn fn = JG_QUERY.tuples ? relay_query_tuples : JG_QUERY.rows ? relay_rows : relay_tuples;
  int rc = jgr_in_run(st->in, ctx, fn, &a, err);
  free(row);
  return rc == 0 ? jgr_call_finish(ctx, err) : rc;
}

static const jgr_driver relay_driver = {"ntf_relay", 1, 0, relay_prepare, relay_work};

int main(int argc, char **argv) { return jgr_main(argc, argv, &relay_driver); }
