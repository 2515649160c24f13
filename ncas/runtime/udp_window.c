/* The sender's window of a version 2 UDP stream: see udp_window.h. */
#include "udp_window.h"

#include <stdlib.h>
#include <string.h>

#define MIN_SLOTS 64u
#define INITIAL_RTO_NS 200000000u /* before the first round trip is measured */

static jg_win_slot *slot_of(const jg_udp_window *w, uint64_t seq) { return &w->slot[seq & (w->nslots - 1)]; }

static uint64_t clamp(uint64_t v, uint64_t lo, uint64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

int jg_win_init(jg_udp_window *w, uint64_t window_bytes, uint64_t rto_min_ns, uint64_t rto_max_ns,
                unsigned max_tries) {
  memset(w, 0, sizeof *w);
  uint64_t n = MIN_SLOTS;
  while (n < window_bytes / JG_WIN_SLOT_BYTES) n *= 2;
  /* malloc, not calloc: the kernel hands out the pages only as the stream first reaches them,
   * so a short stream costs little whatever the window */
  w->ring = malloc(window_bytes ? window_bytes : 1);
  w->slot = malloc(sizeof *w->slot * n);
  if (!w->ring || !w->slot) {
    jg_win_free(w);
    return -1;
  }
  w->ring_bytes = window_bytes;
  w->nslots = n;
  w->max_inflight = n;
  w->rto_min = rto_min_ns;
  w->rto_max = rto_max_ns < rto_min_ns ? rto_min_ns : rto_max_ns;
  w->rto = clamp(INITIAL_RTO_NS, w->rto_min, w->rto_max);
  w->max_tries = max_tries ? max_tries : 1;
  return 0;
}

void jg_win_free(jg_udp_window *w) {
  free(w->ring);
  free(w->slot);
  w->ring = NULL;
  w->slot = NULL;
}

uint8_t *jg_win_reserve(jg_udp_window *w, uint32_t len) {
  if (w->next - w->base >= w->max_inflight || len > w->ring_bytes) return NULL;
  uint64_t pos = w->tail % w->ring_bytes;
  uint64_t skip = pos + len > w->ring_bytes ? w->ring_bytes - pos : 0; /* a datagram never wraps */
  if (w->tail + skip + len - w->head > w->ring_bytes) return NULL;
  w->skip = skip;
  return w->ring + (skip ? 0 : pos);
}

uint64_t jg_win_commit(jg_udp_window *w, uint32_t len, int is_end, uint64_t now) {
  uint64_t seq = w->next++;
  jg_win_slot *s = slot_of(w, seq);
  s->off = w->tail + w->skip;
  s->len = len;
  s->tries = 1;
  s->timeouts = 0;
  s->sacked = 0;
  s->sent_ns = now;
  w->tail = s->off + len;
  w->skip = 0;
  if (is_end) {
    w->has_end = 1;
    w->end_seq = seq;
  }
  w->sent++;
  return seq;
}

uint8_t *jg_win_datagram(jg_udp_window *w, uint64_t seq, uint32_t *len) {
  if (seq < w->base || seq >= w->next) return NULL;
  const jg_win_slot *s = slot_of(w, seq);
  *len = s->len;
  return w->ring + s->off % w->ring_bytes;
}

void jg_win_resent(jg_udp_window *w, uint64_t seq, uint64_t now, int timeout) {
  jg_win_slot *s = slot_of(w, seq);
  if (s->tries < UINT16_MAX) s->tries++;
  if (timeout && s->timeouts < UINT16_MAX) s->timeouts++;
  s->sent_ns = now;
  w->sent++;
  w->retransmitted++;
}

uint64_t jg_win_rto(const jg_udp_window *w, unsigned timeouts) {
  unsigned shift = timeouts > 30 ? 30 : timeouts;
  uint64_t r = w->rto << shift;
  return r > w->rto_max || r < w->rto ? w->rto_max : r;
}

/* RFC 6298's estimator, on datagrams sent once only (Karn). */
static void rtt_sample(jg_udp_window *w, uint64_t r) {
  if (!w->rtt_sampled) {
    w->srtt = r;
    w->rttvar = r / 2;
    w->rtt_sampled = 1;
  } else {
    uint64_t d = w->srtt > r ? w->srtt - r : r - w->srtt;
    w->rttvar = (3 * w->rttvar + d) / 4;
    w->srtt = (7 * w->srtt + r) / 8;
  }
  w->rto = clamp(w->srtt + 4 * w->rttvar, w->rto_min, w->rto_max);
}

/* Everything below `upto` has arrived: free it. A round trip is measured on the newest datagram
 * it acknowledges, when that was sent once and no gap was known (`sample`): after a gap is filled
 * the cumulative number jumps over datagrams that arrived long ago, and their age is not a round
 * trip (it would inflate the timeout, and with it every repair after). */
static void advance(jg_udp_window *w, uint64_t upto, uint64_t now, int sample) {
  if (upto <= w->base) return;
  const jg_win_slot *last = slot_of(w, upto - 1);
  if (sample && last->tries == 1 && now >= last->sent_ns) rtt_sample(w, now - last->sent_ns);
  w->base = upto;
  w->head = w->base < w->next ? slot_of(w, w->base)->off : w->tail;
}

/* The datagrams below `hi` (one past the highest reported as arrived) by at least JG_WIN_REORDER
 * that have not arrived, into out: at once the first time, a repeat of one only a timeout after its
 * last copy. */
static int gaps(jg_udp_window *w, uint64_t hi, uint64_t now, uint64_t *out, int max) {
  int n = 0;
  for (uint64_t seq = w->base; seq + JG_WIN_REORDER < hi && n < max; seq++) {
    const jg_win_slot *s = slot_of(w, seq);
    if (s->sacked || (s->tries > 1 && now - s->sent_ns < w->rto)) continue;
    out[n++] = seq;
  }
  return n;
}

int jg_win_ack(jg_udp_window *w, uint64_t cum, int end, const uint8_t *report, uint32_t report_bytes,
               uint64_t rtt_ns, uint64_t now, uint64_t *out, int max) {
  if (w->done) return 0;
  uint64_t data_sent = w->has_end ? w->end_seq : w->next;
  if (cum > data_sent) return -1;
  if (rtt_ns) rtt_sample(w, rtt_ns);
  int gap = w->high > w->base; /* an earlier ACK reported datagrams past the gap we were stuck at */
  for (uint32_t j = 0; j < report_bytes && !gap; j++) gap = report[j] != 0;
  int sample = !gap && !rtt_ns;
  if (end) {
    if (!w->has_end || cum != w->end_seq) return -1;
    advance(w, w->next, now, sample);
    w->done = 1;
    return 0;
  }
  int stale = cum < w->base; /* an ACK overtaken by a later one (reordered on the way) */
  advance(w, cum, now, sample);
  uint64_t hi = 0;
  for (uint32_t j = 0; j < report_bytes; j++) {
    if (!report[j]) continue;
    for (unsigned i = 0; i < 8; i++) {
      uint64_t seq = cum + 1 + 8 * (uint64_t)j + i;
      if (seq >= data_sent) break;
      if (!(report[j] >> i & 1)) continue;
      if (seq >= w->base) slot_of(w, seq)->sacked = 1;
      hi = seq + 1;
    }
  }
  if (hi > w->high) w->high = hi;
  if (stale) return 0; /* what it says missing may have arrived since */
  return gaps(w, hi, now, out, max);
}

int jg_win_sack(jg_udp_window *w, uint64_t seq, uint64_t rtt_ns, uint64_t now, uint64_t *out, int max) {
  if (w->done) return 0;
  uint64_t data_sent = w->has_end ? w->end_seq : w->next;
  if (seq >= data_sent) return -1; /* never sent, or the END (whose answer is a cumulative ACK) */
  /* the echoed timestamp is that of the copy that arrived: a round trip even for a repeat */
  if (rtt_ns) rtt_sample(w, rtt_ns);
  if (seq < w->base || slot_of(w, seq)->sacked) return 0;
  slot_of(w, seq)->sacked = 1;
  if (seq + 1 > w->high) w->high = seq + 1;
  uint64_t upto = w->base;
  while (upto < data_sent && slot_of(w, upto)->sacked) upto++;
  advance(w, upto, now, 0); /* no sample here: the echo above measured it */
  return gaps(w, w->high, now, out, max);
}

void jg_win_limit(jg_udp_window *w, uint64_t datagrams) {
  w->max_inflight = datagrams && datagrams < w->nslots ? datagrams : w->nslots;
}

int jg_win_due(jg_udp_window *w, uint64_t now, uint64_t *out, int max, uint64_t *failed) {
  int n = 0;
  for (uint64_t seq = w->base; seq < w->next && n < max; seq++) {
    const jg_win_slot *s = slot_of(w, seq);
    if (s->sacked) continue;
    if (now - s->sent_ns < jg_win_rto(w, s->timeouts)) {
      /* datagrams sent once went out in order: the later ones are not due either */
      if (s->tries == 1) break;
      continue;
    }
    if (s->timeouts + 1u >= w->max_tries) {
      *failed = seq;
      return -1;
    }
    out[n++] = seq;
  }
  return n;
}
