/* Per-worker context: scratch arena, output ports, row failures (the jg.h side of jg_ctx). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jgrt.h"

#define SCRATCH_INITIAL (64u << 10)
#define OUT_BUFFER (1u << 20) /* >= 1 MiB: few large sends per destination */

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "jgrt: out of memory (%zu bytes)\n", n);
    abort();
  }
  return p;
}

static jg_out *out_new(jg_ctx *c, int port) {
  jg_out *o = xmalloc(sizeof *o);
  memset(o, 0, sizeof *o);
  o->ctx = c;
  o->port = port;
  o->cap = OUT_BUFFER;
  o->buf = xmalloc(o->cap);
  return o;
}

static void out_free(jg_out *o) {
  if (!o) return;
  jgr_udp_free(o);
  for (size_t i = 0; i < o->nfds; i++) free(o->names[i]);
  free(o->fds);
  free(o->names);
  free(o->buf);
  free(o->junk);
  free(o);
}

__attribute__((weak)) const int jgr_worker_outputs = 1;

static jg_ctx *ctx_new(jgr_proc *p, int worker, uint32_t port_base, uint32_t nports) {
  jg_ctx *c = xmalloc(sizeof *c);
  memset(c, 0, sizeof *c);
  c->proc = p;
  c->worker = worker;
  c->scratch_cap = SCRATCH_INITIAL;
  c->scratch = xmalloc(c->scratch_cap);
  c->nouts = nports;
  c->outs = xmalloc(sizeof(jg_out *) * (c->nouts ? c->nouts : 1));
  for (uint32_t i = 0; i < c->nouts; i++) c->outs[i] = out_new(c, (int)(port_base + i));
  c->discard = out_new(c, -1);
  return c;
}

jg_ctx *jgr_ctx_new(jgr_proc *p, int worker) {
  /* read through volatile: the compiler would otherwise take this file's weak default for the
   * value, not the definition the linker picks */
  return ctx_new(p, worker, 0, *(volatile const int *)&jgr_worker_outputs ? p->noutputs : 0);
}

jg_ctx *jgr_ctx_view(const jg_ctx *parent, uint32_t port_base, uint32_t nports, uint32_t msg_base, uint32_t rf_base) {
  jg_ctx *c = ctx_new(parent->proc, parent->worker, port_base, nports);
  c->msg_base = msg_base;
  c->rf_base = rf_base;
  return c;
}

void jgr_ctx_free(jg_ctx *c) {
  if (!c) return;
  for (uint32_t i = 0; i < c->nouts; i++) out_free(c->outs[i]);
  free(c->outs);
  out_free(c->discard);
  jgr_scratch_compact(c);
  free(c->scratch);
  jgr_error_clear(&c->out_error);
  free(c);
}

/* Overflow blocks: a header followed by the memory handed out. */
typedef struct scratch_block {
  struct scratch_block *next;
  size_t size;
} scratch_block;

char *jg_scratch(jg_ctx *c, size_t n) {
  size_t need = (n + 7) & ~(size_t)7; /* keep every allocation 8-aligned */
  if (JGR_LIKELY(need <= c->scratch_cap - c->scratch_used)) {
    char *p = c->scratch + c->scratch_used;
    c->scratch_used += need;
    return p;
  }
  /* Rare: this row needs more than the block. Allocate aside; the next reset grows the block so
   * later rows fit without mallocs. */
  scratch_block *b = xmalloc(sizeof(scratch_block) + need + 8);
  b->next = c->scratch_more;
  b->size = need;
  c->scratch_more = b;
  c->scratch_more_bytes += need;
  return (char *)(b + 1);
}

void jgr_scratch_compact(jg_ctx *c) {
  size_t total = c->scratch_cap + c->scratch_more_bytes;
  for (scratch_block *b = c->scratch_more, *nx; b; b = nx) {
    nx = b->next;
    free(b);
  }
  c->scratch_more = NULL;
  c->scratch_more_bytes = 0;
  if (total > c->scratch_cap && total <= ((size_t)256 << 20)) {
    free(c->scratch);
    c->scratch_cap = total;
    c->scratch = xmalloc(total);
  }
  c->scratch_used = 0;
}

jg_out *jg_output(jg_ctx *c, int port) {
  if (JGR_LIKELY(port >= 0 && (uint32_t)port < c->nouts)) return c->outs[port];
  if (!(c->flags & JGR_OUT_FAILED)) {
    jgr_error_set(&c->out_error, "query wrote to output port %d, but it has %u", port, c->nouts);
    c->flags |= JGR_OUT_FAILED;
  }
  return c->discard;
}

void jg_fail(jg_ctx *c, const char *msg) {
  if (c->flags & JGR_FAILED) return; /* keep the first reason */
  snprintf(c->fail_msg, sizeof c->fail_msg, "%s", msg ? msg : "row failed");
  c->flags |= JGR_FAILED;
}

const char *jg_message(jg_ctx *c, uint32_t k) {
  char key[24];
  snprintf(key, sizeof key, "msg.%u", (unsigned)(c->msg_base + k));
  const char *msg = jgr_param(c->proc, key); /* a linear search, on the error path only */
  if (msg) return msg;
  char *fallback = jg_scratch(c, 96); /* jg_fail copies it before the scratch is reset */
  snprintf(fallback, 96, "data error (message %u of the NCA's message table was not sent)", (unsigned)k);
  return fallback;
}

const uint8_t *jg_input_tuple(jg_ctx *c, uint32_t *len) {
  if (len) *len = c->in_tuple ? c->in_len : 0;
  return c->in_tuple;
}

void jgr_row_error(jg_ctx *c, jgr_error *err) {
  if (c->flags & JGR_OUT_FAILED) jgr_error_set(err, "%s", c->out_error.message);
  else if (c->flags & JGR_FAILED) jgr_error_set(err, "%s", c->fail_msg);
  else jgr_error_set(err, "row function failed without a message");
}
