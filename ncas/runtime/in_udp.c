/* UDP input (docs/udp-transport.md): the `expect`ed streams of one input port arrive as datagrams
 * on one bound UDP socket (control.c binds it for --udp-inputs).
 *
 * Every worker reads the shared socket with recvmmsg (the kernel hands each datagram to one of
 * them), so a stream's datagrams may be spread over workers; the per-stream bookkeeping (which
 * sequence numbers arrived, tuples, the END datagram) is shared under one mutex, taken once per
 * batch. A duplicate datagram is dropped before its tuples are used. A stream is complete when its
 * END has arrived and exactly the datagrams 0 .. END.seq-1 and END.tuples tuples did; the port is
 * complete when all of its streams are. Missing datagrams after an END are waited for
 * `param udp.grace_ms` (default 2000: reordering is rare, loss is not), then the phase fails
 * naming the stream and the first missing sequence number. A stream whose END never comes (every
 * copy lost, or a sender that died) would leave the phase waiting for ever: after `param
 * udp.idle_ms` (default 60000, 0 = wait for ever) without a datagram of a stream that has no END
 * yet, the phase fails naming the port, the stream and the last datagram seen. The clock of a stream
 * starts with its first datagram, so a sender that has not started yet (a switch before its flush, a
 * scan whose filter passes nothing for a while) is not taken for a lost one; a stream of which
 * nothing at all arrived is failed the same way once all the port's other streams are complete and
 * the port has been quiet for as long. With `param udp.dpdk` worker 0 polls the DPDK port instead
 * (dpdk_io.c) and the other workers only wait.
 *
 * The socket takes coalesced datagrams (UDP_GRO, set where control.c binds it): a sender's GSO
 * run of equal-size datagrams (out_udp.c, the switch model) arrives as one buffer, with the size of
 * its datagrams in a control message, and `receive` cuts it into them (the last may be shorter).
 * Queued one by one, a small datagram costs the receive buffer ~830 bytes of kernel accounting, so
 * 64 MB would hold only ~150,000 of a switch's 52-byte records; coalesced it costs a tenth of that,
 * and the kernel's work of delivering the run shrinks with it.
 *
 * The idle timeout is for a sender the control plane knows nothing about. It usually does know:
 * `senders_done PORT` (control.c) says that every sender of the port has finished, i.e. sent all
 * its datagrams and its ENDs. From then on a stream without END fails as soon as the grace period
 * has passed since the notice and a worker finds the socket empty while no other worker holds
 * datagrams it has not yet counted: whatever was sent before the notice has then been read, so an
 * END that is not among it was lost. Reading the socket dry first is what keeps a receiver that
 * is merely behind (its buffer still full of the stream, the END at the back) from being failed.
 *
 * Version 2 streams (magic NTU2, docs/udp-transport.md "Version 2") are acknowledged: a stream's
 * first datagram fixes its version, and for version 2 the receiver sends ACK datagrams back to the
 * address its datagrams come from, from this socket: the cumulative number and a gap report of
 * what arrived past it. A worker acknowledges at the end of a batch every stream that got a repeat,
 * its END or a datagram that left a gap behind, every ACK_EVERY datagrams, and, once the socket is
 * read dry, whatever it has not acknowledged for ACK_DELAY_NS (the sender may be waiting for room
 * in its window). A complete stream is acknowledged with END, and so again whenever anything of it
 * comes after (the first such ACK may be lost). Missing datagrams are the sender's to repeat, so a
 * version 2 stream whose END has come is not failed after the grace period but only when nothing of
 * it has arrived for the idle timeout (the sender is gone) or its senders are done. After the phase
 * a thread keeps answering the port's complete version 2 streams (linger) until the process ends,
 * since a sender waits for the ACK of its END and may repeat the END after the last worker is gone.
 * An acknowledgement that reaches the port (version 2, flag ACK: meant for a sender) is ignored.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "jg_udp.h"
#include "jgrt.h"

#define BATCH 64
#define SLOT_BYTES 65536
#define MAX_DGRAMS (BATCH * (SLOT_BYTES / JG_UDP_HEADER)) /* a batch of coalesced runs, cut up */
#define POLL_MS 50
#define MAX_SEQ (1ull << 40) /* a sanity bound on sequence numbers (bitmap growth) */
#define ACK_EVERY 256u          /* version 2: acknowledge at least every this many datagrams */
#define ACK_DELAY_NS 1000000u   /* ... and what waits longer than this once the socket is dry */
#define ACKS_PER_BATCH 64       /* acknowledgements one worker sends after one batch */
#define LINGER_SLOTS 4          /* receive buffers of the thread that answers after the phase */

typedef struct {
  uint64_t *seen; /* bitmap of data sequence numbers received */
  uint64_t words;
  uint64_t datagrams, tuples, duplicates;
  int ended;
  uint64_t end_seq, end_tuples, end_ns;
  uint64_t last_ns, last_seq; /* when its latest datagram arrived (0: none yet), and its number */
  /* version 2 (acknowledged) */
  uint8_t version; /* 0 until its first datagram, then 1 or 2 */
  uint8_t urgent;  /* acknowledge at the end of this batch */
  uint8_t listed;  /* in the port's list of streams to acknowledge */
  uint32_t since_ack; /* datagrams (new or repeated) since its latest ACK */
  uint64_t cum;       /* data datagrams 0 .. cum-1 have all arrived */
  uint64_t high;      /* 1 + the highest data datagram that arrived */
  uint64_t ack_ns;    /* when its latest ACK went */
  uint32_t stamp;     /* the timestamp of its latest datagram, echoed in ACKs (jg_udp.h) */
  struct sockaddr_storage peer; /* where its datagrams come from: where ACKs go */
  socklen_t peer_len;
} stream_state;

struct jgr_udp_in {
  int fd, port, udp_port, nworkers, dpdk;
  uint32_t expected, complete;
  uint64_t grace_ns, idle_ns; /* idle_ns 0: no idle timeout */
  uint64_t last_ns;           /* the port's latest datagram of any stream */
  const uint64_t *senders_done_ns; /* jgr_in_cfg's: when every sender finished (0: not yet) */
  int holding; /* atomic: workers between taking datagrams off the socket and counting them */
  stream_state *streams;
  uint32_t *pending, npending; /* version 2 streams with something to acknowledge */
  int has_v2;                  /* a version 2 stream arrived: answer after the phase (linger) */
  int left;                    /* atomic: workers that returned from jgr_udp_in_run */
  int lingering;               /* the linger thread owns this struct: never freed */
  pthread_mutex_t mu;
  int failed; /* atomic */
  jgr_error err;
};

static void in_fail(struct jgr_udp_in *in, const char *fmt, ...) JGR_PRINTF(2, 3);
static void in_fail(struct jgr_udp_in *in, const char *fmt, ...) {
  /* called with in->mu held */
  if (!in->failed) {
    va_list ap;
    va_start(ap, fmt);
    jgr_error_vset(&in->err, fmt, ap);
    va_end(ap);
    __atomic_store_n(&in->failed, 1, __ATOMIC_RELEASE);
  }
}

struct jgr_udp_in *jgr_udp_in_start(jgr_proc *p, int port, int nworkers, jgr_error *err) {
  uint64_t grace_ms, idle_ms;
  if (jgr_param_u64(p, "udp.grace_ms", 2000, 0, 3600000, &grace_ms, err) ||
      jgr_param_u64(p, "udp.idle_ms", 60000, 0, 86400000, &idle_ms, err))
    return NULL;
  struct jgr_udp_in *in = calloc(1, sizeof *in);
  in->fd = p->inputs[port].listen_fd;
  in->port = port;
  in->udp_port = p->inputs[port].port;
  in->nworkers = nworkers;
  in->expected = p->inputs[port].expected;
  in->grace_ns = grace_ms * 1000000u;
  in->idle_ns = idle_ms * 1000000u;
  in->senders_done_ns = &p->inputs[port].senders_done_ns;
  in->streams = calloc(in->expected ? in->expected : 1, sizeof *in->streams);
  in->pending = malloc(sizeof *in->pending * (in->expected ? in->expected : 1));
  if (!in->streams || !in->pending) abort();
  pthread_mutex_init(&in->mu, NULL);
  if (jgr_param(p, "udp.dpdk")) {
    if (!jgr_dpdk) {
      jgr_error_set(err, "input port %d: param udp.dpdk is set, but this NCA was built without DPDK", port);
      return NULL;
    }
    if (jgr_dpdk->init(p, err) != 0) return NULL;
    in->dpdk = 1;
  }
  return in;
}

/* One datagram's header, checked before any bookkeeping. */
typedef struct {
  const uint8_t *data;
  uint32_t len;
  jg_udp_header h;
  int use;     /* a data datagram to process (not a duplicate, not control) */
  int stray;   /* a version 2 acknowledgement (flag ACK): meant for a sender, ignored here */
  int version; /* 1 or 2 */
  const struct sockaddr_storage *peer; /* where it came from (NULL under DPDK) */
  socklen_t peer_len;
} dgram;

static int check_datagram(struct jgr_udp_in *in, dgram *g, jgr_error *err) {
  g->version = jg_udp_get_header_v(g->data, g->len, &g->h);
  if (g->version < 0) {
    jgr_error_set(err, "input port %d: a %u-byte UDP datagram that is not NTU1 or NTU2 arrived", in->port, g->len);
    return -1;
  }
  if (g->version != 1 && g->version != 2) {
    jgr_error_set(err, "input port %d: a datagram of UDP transport version %d (magic NTU%d) arrived; this receiver "
                  "takes versions 1 and 2", in->port, g->version, g->version);
    return -1;
  }
  if (g->version == 2 && (g->h.flags & JG_UDP_F_ACK)) {
    /* An acknowledgement (cumulative, or a switch's receipt with SACK) travels from a receiver to a
     * sender; one that reaches a receiver (sent astray, looped back) is nobody's data and says
     * nothing about this port's streams, so it is dropped rather than failing one of them. */
    g->stray = 1;
    return 0;
  }
  if (g->h.stream >= in->expected) {
    jgr_error_set(err, "input port %d: UDP stream id %u, but %u streams are expected", in->port, g->h.stream,
                  in->expected);
    return -1;
  }
  if (g->version == 2 && !g->peer) { /* DPDK: no way back for acknowledgements */
    jgr_error_set(err, "input port %d stream %u: a version 2 (acknowledged) UDP stream arrived, but this input runs "
                  "on DPDK (param udp.dpdk), which takes version 1 only", in->port, g->h.stream);
    return -1;
  }
  uint16_t retx = g->version == 2 ? JG_UDP_F_RETX : 0; /* a repeat: allowed in version 2 */
  if (g->h.flags & JG_UDP_F_END) {
    if (g->len < JG_UDP_HEADER + JG_UDP_END_PAYLOAD || (g->h.flags & ~(JG_UDP_F_END | JG_UDP_F_LOSS | retx))) {
      jgr_error_set(err, "input port %d stream %u: END datagram of %u bytes with flags 0x%x", in->port, g->h.stream,
                    g->len, g->h.flags);
      return -1;
    }
    return 0;
  }
  if (g->h.flags & ~retx) {
    jgr_error_set(err, "input port %d stream %u: datagram with unexpected flags 0x%x", in->port, g->h.stream,
                  g->h.flags);
    return -1;
  }
  /* framing: exactly `count` whole tuples fill the datagram */
  size_t pos = JG_UDP_HEADER;
  for (uint32_t i = 0; i < g->h.count; i++) {
    uint32_t L;
    if (g->len - pos < 4 || (memcpy(&L, g->data + pos, 4), L == 0) || L >= 0x80000000u || g->len - pos - 4 < L) {
      jgr_error_set(err, "input port %d stream %u: datagram %llu is malformed (tuple %u of %u)", in->port,
                    g->h.stream, (unsigned long long)g->h.seq, i, g->h.count);
      return -1;
    }
    pos += 4 + (size_t)L;
  }
  if (pos != g->len || g->h.seq >= MAX_SEQ) {
    jgr_error_set(err, "input port %d stream %u: datagram %llu is malformed (%zu bytes after its %u tuples)",
                  in->port, g->h.stream, (unsigned long long)g->h.seq, g->len - pos, g->h.count);
    return -1;
  }
  return 0;
}

static int first_missing(const stream_state *s, uint64_t *seq) {
  for (uint64_t i = 0; i < s->end_seq; i++)
    if (i / 64 >= s->words || !(s->seen[i / 64] >> (i % 64) & 1)) {
      *seq = i;
      return 1;
    }
  return 0;
}

/* With in->mu held: the stream's state after its END or a new datagram. */
static void check_stream(struct jgr_udp_in *in, uint32_t id, stream_state *s) {
  if (!s->ended || s->ended == 2) return;
  if (s->datagrams > s->end_seq) {
    in_fail(in, "input port %d stream %u: %llu data datagrams arrived, but END says %llu were sent", in->port,
            id, (unsigned long long)s->datagrams, (unsigned long long)s->end_seq);
  } else if (s->datagrams == s->end_seq) {
    if (s->tuples != s->end_tuples)
      in_fail(in, "input port %d stream %u: END counts %llu tuples, received %llu", in->port, id,
              (unsigned long long)s->end_tuples, (unsigned long long)s->tuples);
    s->ended = 2;
    __atomic_add_fetch(&in->complete, 1, __ATOMIC_RELEASE);
  }
}

static int is_seen(const stream_state *s, uint64_t q) { return q / 64 < s->words && (s->seen[q / 64] >> (q % 64) & 1); }

/* With in->mu held: a version 2 stream has something to acknowledge. */
static void to_ack(struct jgr_udp_in *in, uint32_t id, stream_state *s, int urgent) {
  s->since_ack++;
  s->urgent |= (uint8_t)urgent;
  if (!s->listed) {
    s->listed = 1;
    in->pending[in->npending++] = id;
  }
}

/* Bookkeeping of one batch (with in->mu held): mark data datagrams seen (use = 1 unless a
 * duplicate), record ENDs, note what version 2 streams must acknowledge. Returns -1 after in_fail. */
static int account(struct jgr_udp_in *in, dgram *g, int n, jg_ctx *ctx) {
  uint64_t now = n ? jgr_now_ns() : 0; /* once a batch: the idle clock needs no finer time */
  for (int i = 0; i < n; i++) {
    stream_state *s = &in->streams[g[i].h.stream];
    uint32_t id = g[i].h.stream;
    g[i].use = 0;
    s->last_ns = in->last_ns = now;
    s->last_seq = g[i].h.seq;
    ctx->stats.udp_received++;
    if (s->version != g[i].version) {
      if (s->version) {
        in_fail(in, "input port %d stream %u: a version %d datagram on a version %d stream", in->port, id,
                g[i].version, s->version);
        return -1;
      }
      s->version = (uint8_t)g[i].version;
      if (s->version == 2) in->has_v2 = 1;
    }
    int v2 = s->version == 2;
    if (v2) { /* ACKs go where the stream comes from, echoing its latest timestamp */
      memcpy(&s->peer, g[i].peer, sizeof(struct sockaddr_in6)); /* IPv4 or IPv6: a fixed, inlined copy */
      s->peer_len = g[i].peer_len;
      memcpy(&s->stamp, g[i].data + JG_UDP_STAMP_AT, 4);
    }
    if (g[i].h.flags & JG_UDP_F_END) {
      uint64_t tuples;
      memcpy(&tuples, g[i].data + JG_UDP_HEADER, 8);
      if (g[i].h.flags & JG_UDP_F_LOSS) {
        in_fail(in, "input port %d stream %u: the sender reports UDP loss upstream of it", in->port, id);
        return -1;
      }
      if (s->ended) {
        if (s->end_seq != g[i].h.seq || s->end_tuples != tuples) {
          in_fail(in, "input port %d stream %u: two END datagrams disagree", in->port, id);
          return -1;
        }
        if (v2) to_ack(in, id, s, 1); /* a repeated END: our ACK of it was lost, or is slow */
        continue;
      }
      if (v2 && g[i].h.seq < s->high) {
        in_fail(in, "input port %d stream %u: END says %llu datagrams were sent, but datagram %llu arrived", in->port,
                id, (unsigned long long)g[i].h.seq, (unsigned long long)(s->high - 1));
        return -1;
      }
      s->ended = 1;
      s->end_seq = g[i].h.seq;
      s->end_tuples = tuples;
      s->end_ns = jgr_now_ns();
      check_stream(in, id, s);
      if (v2) to_ack(in, id, s, 1);
      continue;
    }
    uint64_t q = g[i].h.seq;
    if (q / 64 >= s->words) {
      uint64_t w = s->words ? s->words : 1024;
      while (w <= q / 64) w *= 2;
      s->seen = realloc(s->seen, w * 8);
      if (!s->seen) abort();
      memset(s->seen + s->words, 0, (w - s->words) * 8);
      s->words = w;
    }
    if (s->seen[q / 64] >> (q % 64) & 1) {
      s->duplicates++;
      ctx->stats.udp_duplicates++;
      if (v2) to_ack(in, id, s, 1); /* a repeat: the sender did not hear of it, or did not wait */
      continue;
    }
    if (s->ended && q >= s->end_seq) {
      in_fail(in, "input port %d stream %u: datagram %llu arrived after END said %llu were sent", in->port, id,
              (unsigned long long)q, (unsigned long long)s->end_seq);
      return -1;
    }
    s->seen[q / 64] |= 1ull << (q % 64);
    s->datagrams++;
    s->tuples += g[i].h.count;
    ctx->stats.bytes_in += g[i].len;
    g[i].use = 1;
    if (v2) {
      if (q + 1 > s->high) s->high = q + 1;
      while (is_seen(s, s->cum)) s->cum++;
      to_ack(in, id, s, s->cum < s->high); /* a gap behind it: report it now */
    }
    check_stream(in, id, s);
  }
  return in->failed ? -1 : 0;
}

/* An ACK of stream `id` (jg_udp.h), ready to send. */
typedef struct {
  uint8_t buf[JG_UDP_HEADER + JG_UDP_ACK_REPORT];
  uint32_t len;
  int gaps; /* it reports missing datagrams */
  struct sockaddr_storage peer;
  socklen_t peer_len;
} ack_msg;

/* With in->mu held: the ACK of s as it stands (the END flag once it is complete). */
static void make_ack(const stream_state *s, uint32_t id, ack_msg *a) {
  int complete = s->ended == 2;
  uint64_t cum = complete ? s->end_seq : s->cum;
  uint32_t bytes = 0;
  uint8_t *rep = a->buf + JG_UDP_HEADER;
  if (!complete && s->high > cum + 1) {
    uint64_t last = s->high, first = cum + 1;
    if (last - first > 8ull * JG_UDP_ACK_REPORT) last = first + 8ull * JG_UDP_ACK_REPORT;
    bytes = (uint32_t)((last - first + 7) / 8);
    memset(rep, 0, bytes);
    for (uint64_t q = first; q < last; q++)
      if (is_seen(s, q)) rep[(q - first) / 8] |= (uint8_t)(1u << ((q - first) % 8));
  }
  jg_udp_put_header_v(a->buf, 2, id, cum, (uint16_t)bytes, JG_UDP_F_ACK | (complete ? JG_UDP_F_END : 0));
  memcpy(a->buf + JG_UDP_STAMP_AT, &s->stamp, 4);
  a->len = JG_UDP_HEADER + bytes;
  a->gaps = bytes > 0;
  memcpy(&a->peer, &s->peer, s->peer_len);
  a->peer_len = s->peer_len;
}

/* With in->mu held, after a batch: the ACKs due now into a[0 .. return) (ACK policy: file comment).
 * `drained`: this worker found the socket empty. *waiting: streams left to acknowledge later. */
static int collect_acks(struct jgr_udp_in *in, int drained, uint64_t now, ack_msg *a, int max, uint32_t *waiting) {
  int n = 0;
  uint32_t kept = 0;
  for (uint32_t k = 0; k < in->npending; k++) {
    uint32_t id = in->pending[k];
    stream_state *s = &in->streams[id];
    int due = s->urgent || s->since_ack >= ACK_EVERY || s->cum < s->high ||
              (drained && now - s->ack_ns >= ACK_DELAY_NS);
    if (!due || n == max) {
      in->pending[kept++] = id;
      continue;
    }
    make_ack(s, id, &a[n++]);
    s->urgent = 0;
    s->since_ack = 0;
    s->ack_ns = now;
    s->listed = 0;
  }
  in->npending = kept;
  *waiting = kept;
  return n;
}

/* Send ACKs (without the mutex: the socket is shared and sendto is safe on it). A lost ACK is
 * harmless (the next one says more), so failures to send are not errors. */
static void send_acks(struct jgr_udp_in *in, const ack_msg *a, int n, jg_ctx *ctx) {
  for (int i = 0; i < n; i++) {
    if (sendto(in->fd, a[i].buf, a[i].len, MSG_DONTWAIT, (const struct sockaddr *)&a[i].peer, a[i].peer_len) < 0)
      continue;
    if (ctx) {
      ctx->stats.udp_acks++;
      ctx->stats.udp_gap_reports += (uint64_t)a[i].gaps;
    }
  }
}

/* With in->mu held, after this worker found the socket empty (`drained`): have the port's
 * senders all finished at least the grace period ago, with every datagram taken off the socket
 * counted? Then a stream's END that has not arrived was lost (file comment). */
static int ends_overdue(struct jgr_udp_in *in, int drained, uint64_t now) {
  uint64_t done = __atomic_load_n(in->senders_done_ns, __ATOMIC_ACQUIRE);
  return drained && done && now >= done && now - done >= in->grace_ns &&
         __atomic_load_n(&in->holding, __ATOMIC_ACQUIRE) == 0;
}

/* With in->mu held: fail a stream whose END arrived more than the grace period ago, one without
 * END after its senders finished (ends_overdue), and one without END that has been quiet for the
 * idle timeout. */
static void check_grace(struct jgr_udp_in *in, int drained) {
  uint64_t now = jgr_now_ns();
  uint32_t silent = in->expected; /* the first stream of which nothing arrived */
  int others_done = 1, overdue = ends_overdue(in, drained, now);
  for (uint32_t i = 0; i < in->expected; i++) {
    stream_state *s = &in->streams[i];
    if (s->ended == 1 && s->version == 2) {
      /* the sender repeats what is missing: fail only when it has stopped (file comment) */
      uint64_t quiet = now - s->last_ns;
      if (overdue || (in->idle_ns && quiet >= in->idle_ns)) {
        uint64_t miss = 0;
        first_missing(s, &miss);
        in_fail(in, "input port %d stream %u: UDP loss: %llu of %llu datagrams arrived (first missing: %llu) and "
                "nothing more for %llu ms: the sender stopped repeating them (%s)", in->port, i,
                (unsigned long long)s->datagrams, (unsigned long long)s->end_seq, (unsigned long long)miss,
                (unsigned long long)(quiet / 1000000u), overdue ? "its senders finished" : "param udp.idle_ms");
        return;
      }
      continue;
    }
    if (s->ended == 1 && now - s->end_ns >= in->grace_ns) {
      uint64_t miss = 0;
      first_missing(s, &miss);
      in_fail(in, "input port %d stream %u: UDP loss: %llu of %llu datagrams arrived (first missing: %llu)",
              in->port, i, (unsigned long long)s->datagrams, (unsigned long long)s->end_seq,
              (unsigned long long)miss);
      return;
    }
    if (s->ended) continue;
    if (overdue) {
      uint64_t done = __atomic_load_n(in->senders_done_ns, __ATOMIC_ACQUIRE);
      in_fail(in, "input port %d stream %u: no END datagram: its senders finished %llu ms ago and everything "
              "that arrived has been read (%llu data datagrams, %llu tuples received); the END was lost "
              "(UDP loss)", in->port, i, (unsigned long long)((now - done) / 1000000u),
              (unsigned long long)s->datagrams, (unsigned long long)s->tuples);
      return;
    }
    if (!s->last_ns) {
      if (silent == in->expected) silent = i;
      continue;
    }
    others_done = 0;
    if (in->idle_ns && now - s->last_ns >= in->idle_ns) {
      in_fail(in, "input port %d stream %u: no END datagram: nothing arrived for %llu ms after datagram %llu "
              "(%llu data datagrams, %llu tuples received); the END was lost or the sender stopped "
              "(param udp.idle_ms)", in->port, i, (unsigned long long)((now - s->last_ns) / 1000000u),
              (unsigned long long)s->last_seq, (unsigned long long)s->datagrams, (unsigned long long)s->tuples);
      return;
    }
  }
  /* Nothing at all of `silent`, while every stream that sent something is complete. */
  if (silent < in->expected && others_done && in->last_ns && in->idle_ns && now - in->last_ns >= in->idle_ns)
    in_fail(in, "input port %d stream %u: no datagram arrived (not even END) in the %llu ms since the port's "
            "other streams ended; the END was lost or the sender stopped (param udp.idle_ms)", in->port, silent,
            (unsigned long long)((now - in->last_ns) / 1000000u));
}

/* Hand the tuples of the usable datagrams to fn in batches. */
static int deliver(dgram *g, int n, jg_ctx *ctx, jgr_tuples_fn fn, void *arg, jgr_error *err) {
  enum { MAXT = 1024 };
  const uint8_t *tuples[MAXT];
  uint32_t lens[MAXT];
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    if (!g[i].use) continue;
    size_t pos = JG_UDP_HEADER;
    for (uint32_t t = 0; t < g[i].h.count; t++) {
      uint32_t L;
      memcpy(&L, g[i].data + pos, 4);
      tuples[k] = g[i].data + pos + 4;
      lens[k++] = L;
      pos += 4 + (size_t)L;
      if (k == MAXT) {
        ctx->stats.tuples_in += k; /* per batch, as in_tcp.c counts them */
        if (fn(arg, ctx, tuples, lens, k, err) != 0) return -1;
        k = 0;
      }
    }
  }
  ctx->stats.tuples_in += k;
  return k ? fn(arg, ctx, tuples, lens, k, err) : 0;
}

static int done_or_failed(struct jgr_udp_in *in, jgr_error *err) {
  if (__atomic_load_n(&in->failed, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&in->mu);
    jgr_error_set(err, "%s", in->err.message);
    pthread_mutex_unlock(&in->mu);
    return -1;
  }
  return __atomic_load_n(&in->complete, __ATOMIC_ACQUIRE) >= in->expected ? 1 : 0;
}

/* Receive a batch into g (kernel socket or DPDK): up to BATCH buffers, each cut into its datagrams
 * (cut_run). Returns how many datagrams, 0 on a quiet poll. */
typedef struct {
  uint8_t *bufs;
  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
  char ctrl[BATCH][CMSG_SPACE(sizeof(int))];
  struct sockaddr_storage names[BATCH]; /* the senders' addresses: where version 2 ACKs go */
  void *mbufs[BATCH];
  int nmbufs;
} rx_state;

/* recvmmsg into rx's first `slots` buffers, without blocking: how many buffers, or -1 (errno). */
static int recv_batch(int fd, rx_state *rx, int slots) {
  for (int i = 0; i < slots; i++)
    rx->msgs[i].msg_hdr = (struct msghdr){.msg_name = &rx->names[i], .msg_namelen = sizeof rx->names[i],
                                          .msg_iov = &rx->iov[i], .msg_iovlen = 1, .msg_control = rx->ctrl[i],
                                          .msg_controllen = sizeof rx->ctrl[i]};
  return recvmmsg(fd, rx->msgs, (unsigned)slots, MSG_DONTWAIT, NULL);
}

/* The datagrams of one received buffer into g: one, or a coalesced run cut at the size the
 * kernel reports (UDP_GRO). Returns how many. */
static int cut_run(const uint8_t *data, size_t len, struct msghdr *h, dgram *g) {
  size_t seg = 0;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR(h, cm))
    if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
      int v;
      memcpy(&v, CMSG_DATA(cm), sizeof v);
      seg = v > 0 ? (size_t)v : 0;
    }
  if (!seg || seg >= len) seg = len;
  int n = 0;
  for (size_t at = 0; at < len || n == 0; at += seg)
    g[n++] = (dgram){.data = data + at, .len = (uint32_t)(len - at < seg ? len - at : seg),
                     .peer = (const struct sockaddr_storage *)h->msg_name, .peer_len = h->msg_namelen};
  return n;
}

/* A batch: up to BATCH buffers (kernel socket, waiting up to `poll_ms`) or a DPDK burst. Returns
 * how many datagrams, -1 on error; *drained when the socket had no more. */
static int receive(struct jgr_udp_in *in, rx_state *rx, dgram *g, jg_ctx *ctx, int poll_ms, int *drained,
                   jgr_error *err) {
  uint64_t t0 = jgr_now_ns();
  int n = 0;
  if (in->dpdk) {
    const uint8_t *data[BATCH];
    uint32_t lens[BATCH];
    __atomic_add_fetch(&in->holding, 1, __ATOMIC_ACQ_REL); /* counted in jgr_udp_in_run */
    n = jgr_dpdk->rx_burst(in->udp_port, data, lens, rx->mbufs, BATCH);
    if (n <= 0) __atomic_sub_fetch(&in->holding, 1, __ATOMIC_ACQ_REL);
    rx->nmbufs = n;
    *drained = n < BATCH;
    for (int i = 0; i < n; i++) g[i] = (dgram){.data = data[i], .len = lens[i]};
  } else {
    struct pollfd pfd = {in->fd, POLLIN, 0};
    int r = poll(&pfd, 1, poll_ms);
    *drained = 1;
    if (r > 0) {
      __atomic_add_fetch(&in->holding, 1, __ATOMIC_ACQ_REL); /* counted in jgr_udp_in_run */
      int m = recv_batch(in->fd, rx, BATCH);
      if (m <= 0) __atomic_sub_fetch(&in->holding, 1, __ATOMIC_ACQ_REL);
      *drained = m < BATCH;
      if (m < 0) {
        if (errno == EAGAIN || errno == EINTR) m = 0;
        else {
          jgr_error_set(err, "input port %d: recvmmsg: %s", in->port, strerror(errno));
          return -1;
        }
      }
      for (int i = 0; i < m; i++)
        n += cut_run(rx->bufs + (size_t)i * SLOT_BYTES, rx->msgs[i].msg_len, &rx->msgs[i].msg_hdr, g + n);
    }
  }
  ctx->stats.wait_in_ns += jgr_now_ns() - t0;
  return n;
}

static void start_linger(struct jgr_udp_in *in);

int jgr_udp_in_run(struct jgr_udp_in *in, jg_ctx *ctx, jgr_tuples_fn fn, void *arg, jgr_error *err) {
  rx_state *rx = calloc(1, sizeof *rx);
  dgram *g = malloc(sizeof *g * MAX_DGRAMS); /* only the part a batch fills is ever touched */
  ack_msg *acks = malloc(sizeof *acks * ACKS_PER_BATCH);
  if (!rx || !g || !acks) abort();
  int rc = 0, idle = in->dpdk && ctx->worker != 0;
  uint64_t strays = 0;  /* acknowledgements that reached this receiver (check_datagram) */
  uint32_t waiting = 0; /* streams with an ACK still to send: look again within a millisecond */
  if (!in->dpdk) {
    rx->bufs = malloc((size_t)BATCH * SLOT_BYTES);
    if (!rx->bufs) abort();
    for (int i = 0; i < BATCH; i++) rx->iov[i] = (struct iovec){rx->bufs + (size_t)i * SLOT_BYTES, SLOT_BYTES};
  }
  for (;;) {
    int st = done_or_failed(in, err);
    if (st != 0) {
      rc = st < 0 ? -1 : 0;
      break;
    }
    int n = 0, drained = 0;
    if (idle) {
      struct timespec ts = {0, POLL_MS * 1000000L};
      nanosleep(&ts, NULL);
    } else if ((n = receive(in, rx, g, ctx, waiting ? 1 : POLL_MS, &drained, err)) < 0) {
      rc = -1;
      break;
    }
    int got = n; /* datagrams read: the batch holds the socket's datagrams until counted (below) */
    n = 0;       /* of them, those for this port's streams, moved to the front */
    for (int i = 0; i < got && rc == 0; i++) {
      if (check_datagram(in, &g[i], err) != 0) rc = -1;
      else if (g[i].stray) strays++;
      else g[n++] = g[i];
    }
    if (rc) {
      pthread_mutex_lock(&in->mu);
      in_fail(in, "%s", err->message);
      pthread_mutex_unlock(&in->mu);
      break;
    }
    pthread_mutex_lock(&in->mu);
    int ok = account(in, g, n, ctx) == 0;
    if (got > 0) __atomic_sub_fetch(&in->holding, 1, __ATOMIC_ACQ_REL); /* taken in receive */
    check_grace(in, !idle && got == 0);
    int nacks = ok && in->npending ? collect_acks(in, drained, jgr_now_ns(), acks, ACKS_PER_BATCH, &waiting) : 0;
    if (!in->npending) waiting = 0;
    pthread_mutex_unlock(&in->mu);
    send_acks(in, acks, nacks, ctx); /* before the tuples are used: the sender's window frees sooner */
    if (ok && deliver(g, n, ctx, fn, arg, err) != 0) {
      pthread_mutex_lock(&in->mu);
      in_fail(in, "%s", err->message);
      pthread_mutex_unlock(&in->mu);
      rc = -1;
    }
    if (in->dpdk && rx->nmbufs) jgr_dpdk->rx_release(rx->mbufs, rx->nmbufs), rx->nmbufs = 0;
    if (rc) break;
  }
  uint64_t dups = 0;
  pthread_mutex_lock(&in->mu);
  for (uint32_t i = 0; i < in->expected; i++) dups += in->streams[i].duplicates;
  pthread_mutex_unlock(&in->mu);
  if (dups && ctx->worker == 0 && rc == 0) jgr_log("input port %d: dropped %llu duplicate UDP datagrams", in->port,
                                                   (unsigned long long)dups);
  if (strays && rc == 0)
    jgr_log("input port %d: ignored %llu UDP acknowledgements (meant for a sender)", in->port,
            (unsigned long long)strays);
  free(rx->bufs);
  free(rx);
  free(g);
  free(acks);
  /* the last worker out hands the socket to the linger thread (file comment) */
  if (__atomic_add_fetch(&in->left, 1, __ATOMIC_ACQ_REL) == in->nworkers && rc == 0) start_linger(in);
  return rc;
}

/* After the phase (file comment): answer anything of a complete version 2 stream with its final
 * ACK, until the process ends. It owns `in` from jgr_udp_in_free on, and reads the socket alone. */
static void *linger_main(void *arg) {
  struct jgr_udp_in *in = arg;
  rx_state *rx = calloc(1, sizeof *rx);
  dgram *g = malloc(sizeof *g * LINGER_SLOTS * (SLOT_BYTES / JG_UDP_HEADER));
  ack_msg *acks = malloc(sizeof *acks * ACKS_PER_BATCH);
  uint8_t *bufs = malloc((size_t)LINGER_SLOTS * SLOT_BYTES);
  if (!rx || !g || !acks || !bufs) return NULL; /* no memory: senders then fail on their own timers */
  for (int i = 0; i < LINGER_SLOTS; i++) rx->iov[i] = (struct iovec){bufs + (size_t)i * SLOT_BYTES, SLOT_BYTES};
  for (;;) {
    struct pollfd pfd = {in->fd, POLLIN, 0};
    if (poll(&pfd, 1, 1000) <= 0) continue;
    int m = recv_batch(in->fd, rx, LINGER_SLOTS), n = 0;
    for (int i = 0; i < m; i++) n += cut_run(bufs + (size_t)i * SLOT_BYTES, rx->msgs[i].msg_len, &rx->msgs[i].msg_hdr, g + n);
    pthread_mutex_lock(&in->mu);
    for (int i = 0; i < n; i++) {
      jg_udp_header h;
      if (jg_udp_get_header_v(g[i].data, g[i].len, &h) != 2 || h.stream >= in->expected) continue;
      if (h.flags & JG_UDP_F_ACK) continue; /* meant for a sender (check_datagram): answering it could loop */
      stream_state *s = &in->streams[h.stream];
      if (s->version != 2 || s->ended != 2) continue; /* the phase is over: nothing else is answered */
      memcpy(&s->peer, g[i].peer, g[i].peer_len);
      s->peer_len = g[i].peer_len;
      memcpy(&s->stamp, g[i].data + JG_UDP_STAMP_AT, 4);
      to_ack(in, h.stream, s, 1);
    }
    uint32_t waiting;
    int nacks = in->npending ? collect_acks(in, 1, jgr_now_ns(), acks, ACKS_PER_BATCH, &waiting) : 0;
    pthread_mutex_unlock(&in->mu);
    send_acks(in, acks, nacks, NULL);
  }
  return NULL;
}

/* After the phase, by the last worker out: keep answering complete version 2 streams. */
static void start_linger(struct jgr_udp_in *in) {
  if (!in->has_v2 || in->dpdk || __atomic_load_n(&in->failed, __ATOMIC_ACQUIRE)) return;
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, linger_main, in) == 0) in->lingering = 1;
  pthread_attr_destroy(&attr);
}

void jgr_udp_in_free(struct jgr_udp_in *in) {
  if (!in || in->lingering) return; /* `in` is the linger thread's until the process ends */
  for (uint32_t i = 0; i < in->expected; i++) free(in->streams[i].seen);
  free(in->streams);
  free(in->pending);
  pthread_mutex_destroy(&in->mu);
  jgr_error_clear(&in->err);
  free(in);
}
