/* UDP output (docs/udp-transport.md): the UDP destinations of one output port of one worker.
 *
 * jg_emit batches tuples in the port's buffer as (u32 length, bytes) whatever the transport, so the
 * records a flush hands over are already the data of datagrams: each datagram is a 24-byte header
 * and a run of whole records, cut where the destination's size or tuple limit would be passed
 * (a switch: up to its max_tuples). Nothing is copied: a datagram is two iovecs, sent
 * with sendmmsg in batches of `param udp.batch` (default 256), or handed to DPDK (dpdk_io.c) with
 * `param udp.dpdk`.
 *
 * Version 1 (towards a switch, and wherever the receiver does not announce version 2) has no flow
 * control: `param udp.max_pps N` paces each destination to N datagrams per second (0, the default,
 * does not pace); a receiver that falls behind loses datagrams, and it reports that loss (the
 * sequence numbers and the END counts) as a failed stream.
 *
 * Version 2 (`dest ... udp MAX_BYTES MAX_TUPLES v2`: the receiver acknowledges) survives loss: each
 * datagram is copied into the stream's window (udp_window.c, `param udp.window_bytes`) and sent
 * from there, so it can be sent again; the receiver's ACKs come back on the same connected socket.
 * They are read without blocking at every flush, and while the window is full the worker waits for
 * them (flow control: a receiver that falls behind slows its senders instead of losing data). A
 * datagram the receiver reports missing, or not acknowledged within the retransmission timeout,
 * goes again, flagged RETX; after `param udp.max_tries` timeouts of one datagram the stream fails
 * naming the stream, the datagram and the receiver. A receiver that bounds the datagrams in flight
 * (`dest ... v2 window N`: the switch, which acknowledges datagram by datagram with receipts, flag
 * SACK, docs/udp-transport.md "A switch in a version 2 path") gets at most N per stream from the
 * first datagram on; one that announced no bound gets the whole window at once, and a receipt from
 * it fails the stream (take_acks). The END is sent once and repeated
 * likewise until the receiver acknowledges it, and the port's outputs end only when every version 2
 * stream has been acknowledged whole: the phase's `done` then means the data arrived. DPDK carries
 * version 1 only.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "jg_udp.h"
#include "jgrt.h"
#include "udp_window.h"

#define BATCH 256 /* datagrams per sendmmsg */
#define ACK_BYTES (JG_UDP_HEADER + JG_UDP_ACK_REPORT)
#define WAIT_MS_MAX 100 /* a waiting sender looks at its timers at least this often */
#define TIMER_BURST 32  /* repeats per look at the timers (udp_window.h: slow more likely than lossy) */
#define GSO_SEGMENTS 64 /* the kernel's UDP_MAX_SEGMENTS on older kernels */
#define SNDBUF_BYTES (8 << 20)

const jgr_dpdk_ops *jgr_dpdk; /* set by dpdk_io.o's constructor when the binary links it */

typedef struct {
  int fd;       /* connected UDP socket, or -1 with DPDK */
  void *dpdk;   /* DPDK TX handle */
  char *name;   /* "udp HOST:PORT (stream S)" */
  char *peer;   /* "HOST:PORT" (IPv6 in brackets), for version 2's messages */
  uint32_t stream, max_bytes, max_tuples;
  uint64_t seq; /* data datagrams sent */
  uint64_t pace_ns, next_ns;
  unsigned batch; /* datagrams per sendmmsg (param udp.batch; 1 = one system call per datagram) */
  int gso;        /* equal-size datagrams go out as one UDP GSO send (param udp.gso, default on) */
  int version;    /* 1, or 2: acknowledged, with the window below */
  uint32_t bound; /* version 2: the receiver's announced bound on datagrams in flight (`window N`), or 0 */
  jg_udp_window win;
  uint64_t timer_ns; /* version 2: when to look for datagrams whose timeout passed */
} udp_dest;

struct jgr_udp_out {
  udp_dest *d;
  size_t n;
  uint8_t (*hdr)[JG_UDP_HEADER];
  const uint8_t **hdrp, **body;
  uint32_t *body_len;
  struct mmsghdr *msgs;
  struct iovec *iov;
  uint64_t *seqs; /* version 2: datagrams to send again */
};

static void udp_fail(jg_out *o, const udp_dest *d, const char *what, int errnum) {
  jg_ctx *c = o->ctx;
  if (!(c->flags & JGR_OUT_FAILED)) {
    jgr_error_set(&c->out_error, "output port %d: %s %s: %s", o->port, what, d->name, strerror(errnum));
    c->flags |= JGR_OUT_FAILED;
  }
}

static struct jgr_udp_out *udp_state(jg_out *o) {
  if (!o->udp) {
    struct jgr_udp_out *u = calloc(1, sizeof *u);
    u->hdr = malloc(sizeof *u->hdr * BATCH);
    u->hdrp = malloc(sizeof *u->hdrp * BATCH);
    u->body = malloc(sizeof *u->body * BATCH);
    u->body_len = malloc(sizeof *u->body_len * BATCH);
    u->msgs = calloc(BATCH, sizeof *u->msgs);
    u->iov = calloc(2 * BATCH, sizeof *u->iov);
    u->seqs = malloc(sizeof *u->seqs * BATCH);
    if (!u->hdr || !u->hdrp || !u->body || !u->body_len || !u->msgs || !u->iov || !u->seqs) abort();
    for (int i = 0; i < BATCH; i++) {
      u->hdrp[i] = u->hdr[i];
      u->msgs[i].msg_hdr.msg_iov = &u->iov[2 * i];
      u->msgs[i].msg_hdr.msg_iovlen = 2;
    }
    o->udp = u;
  }
  return o->udp;
}

static int connect_udp(const char *host, const char *port, int *err) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  int gai = getaddrinfo(host, port, &hints, &res);
  if (gai != 0) {
    *err = gai == EAI_SYSTEM ? errno : EHOSTUNREACH;
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      *err = errno;
      continue;
    }
    int sndbuf = SNDBUF_BYTES;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    *err = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

int jgr_udp_open(jg_out *o, const jgr_dest *dst, uint32_t stream, jgr_error *err) {
  jgr_proc *p = o->ctx->proc;
  struct jgr_udp_out *u = udp_state(o);
  u->d = realloc(u->d, sizeof *u->d * (u->n + 1));
  if (!u->d) abort();
  udp_dest *d = &u->d[u->n];
  memset(d, 0, sizeof *d);
  d->fd = -1;
  d->stream = stream;
  uint64_t dflt_bytes, pps, batch, gso, window, rto_min, rto_max, tries;
  if (jgr_param_u64(p, "udp.max_datagram", JG_UDP_DEFAULT_MAX_BYTES, JG_UDP_HEADER + 5, JG_UDP_MAX_BYTES,
                    &dflt_bytes, err) ||
      jgr_param_u64(p, "udp.max_pps", 0, 0, 1000000000, &pps, err) ||
      jgr_param_u64(p, "udp.batch", BATCH, 1, BATCH, &batch, err) ||
      jgr_param_u64(p, "udp.gso", 1, 0, 1, &gso, err) ||
      jgr_param_u64(p, "udp.window_bytes", 2u << 20, 2 * JG_UDP_MAX_BYTES, 1u << 30, &window, err) ||
      jgr_param_u64(p, "udp.rto_min_ms", 10, 1, 60000, &rto_min, err) ||
      jgr_param_u64(p, "udp.rto_max_ms", 1000, 1, 600000, &rto_max, err) ||
      jgr_param_u64(p, "udp.max_tries", 60, 2, 1000, &tries, err))
    return -1;
  d->batch = (unsigned)batch;
  d->gso = gso && batch > 1;
  d->max_bytes = dst->max_bytes ? dst->max_bytes : (uint32_t)dflt_bytes;
  d->max_tuples = dst->max_tuples ? dst->max_tuples : 0xffffu;
  if (d->max_bytes < JG_UDP_HEADER + 5 || d->max_bytes > JG_UDP_MAX_BYTES) {
    jgr_error_set(err, "output port %d: UDP datagrams of %u bytes are outside %u..%u", o->port, d->max_bytes,
                  JG_UDP_HEADER + 5, JG_UDP_MAX_BYTES);
    return -1;
  }
  d->pace_ns = pps ? 1000000000u / pps : 0;
  size_t nl = strlen(dst->host) + strlen(dst->port) + 48;
  d->name = malloc(nl);
  snprintf(d->name, nl, "udp %s:%s (stream %u)", dst->host, dst->port, stream);
  d->peer = malloc(nl);
  int v6 = strchr(dst->host, ':') != NULL;
  snprintf(d->peer, nl, "%s%s%s:%s", v6 ? "[" : "", dst->host, v6 ? "]" : "", dst->port);
  u->n++;
  d->version = dst->udp_version == 2 ? 2 : 1;
  if (d->version == 2 && jg_win_init(&d->win, window, rto_min * 1000000u, rto_max * 1000000u, (unsigned)tries) != 0) {
    jgr_error_set(err, "output port %d: no memory for the %llu-byte window of %s", o->port,
                  (unsigned long long)window, d->name);
    return -1;
  }
  if (d->version == 2 && dst->window_datagrams) {
    /* A receiver that answers with receipts (a switch) deduplicates with a ring of sequence numbers
     * per stream (JG_UDP_SACK_WINDOW), which holds only while datagram s + N leaves after s was
     * acknowledged, from the first datagram on: the receiver says N with its endpoint, since it
     * cannot say it in band before the stream starts. Receivers that track the whole stream
     * announce nothing and get the whole window at once. */
    jg_win_limit(&d->win, dst->window_datagrams);
    d->bound = dst->window_datagrams;
  }
  if (jgr_param(p, "udp.dpdk")) {
    if (d->version == 2) { /* docs/udp-transport.md, "DPDK": no acknowledgements come back through it */
      jgr_error_set(err, "output port %d: %s asks for UDP version 2 (acknowledged), which DPDK (param udp.dpdk) "
                    "does not carry: it sends version 1 only", o->port, d->name);
      return -1;
    }
    if (!jgr_dpdk) {
      jgr_error_set(err, "output port %d: param udp.dpdk is set, but this NCA was built without DPDK", o->port);
      return -1;
    }
    if (jgr_dpdk->init(p, err) != 0) return -1;
    d->dpdk = jgr_dpdk->tx_open(p, o->ctx->worker, dst->host, dst->port, err);
    return d->dpdk ? 0 : -1;
  }
  int e = 0;
  d->fd = connect_udp(dst->host, dst->port, &e);
  if (d->fd < 0) {
    jgr_error_set(err, "output port %d: cannot open %s: %s", o->port, d->name, strerror(e));
    return -1;
  }
  return 0;
}

static void pace(udp_dest *d, size_t n) {
  if (!d->pace_ns) return;
  uint64_t now = jgr_now_ns();
  if (d->next_ns > now) {
    uint64_t w = d->next_ns - now;
    struct timespec ts = {(time_t)(w / 1000000000u), (long)(w % 1000000000u)};
    nanosleep(&ts, NULL);
  } else if (now - d->next_ns > 1000000u) {
    d->next_ns = now; /* do not bank more than a millisecond of credit */
  }
  d->next_ns += d->pace_ns * n;
}

/* UDP GSO: a run of datagrams of one size is one sendmsg whose payload is their concatenation
 * (header and records of each, as iovecs) with UDP_SEGMENT = that size; the kernel cuts it into
 * the datagrams, at a fraction of the per-datagram cost. Returns 0, or -1 with errno (the caller
 * falls back to sendmmsg when the kernel does not support it). */
/* Makes `m` one UDP GSO send: the kernel cuts its payload into datagrams of `seg` bytes (the last
 * may be shorter). `ctrl` holds the control message: CMSG_SPACE(sizeof(uint16_t)) bytes. */
static void gso_segments(struct msghdr *m, char *ctrl, size_t ctrl_size, uint16_t seg) {
  m->msg_control = ctrl;
  m->msg_controllen = ctrl_size;
  struct cmsghdr *cm = CMSG_FIRSTHDR(m);
  cm->cmsg_level = SOL_UDP;
  cm->cmsg_type = UDP_SEGMENT;
  cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
  memcpy(CMSG_DATA(cm), &seg, sizeof seg);
}

static int gso_send(udp_dest *d, struct jgr_udp_out *u, size_t n) {
  char ctrl[CMSG_SPACE(sizeof(uint16_t))];
  for (size_t at = 0; at < n;) {
    size_t size = JG_UDP_HEADER + u->body_len[at], k = 1;
    while (at + k < n && k < GSO_SEGMENTS && JG_UDP_HEADER + u->body_len[at + k] == size &&
           (k + 1) * size <= 65000)
      k++;
    for (size_t i = 0; i < k; i++) {
      u->iov[2 * i] = (struct iovec){u->hdr[at + i], JG_UDP_HEADER};
      u->iov[2 * i + 1] = (struct iovec){(void *)u->body[at + i], u->body_len[at + i]};
    }
    struct msghdr m = {.msg_iov = u->iov, .msg_iovlen = 2 * k};
    if (k > 1) gso_segments(&m, ctrl, sizeof ctrl, (uint16_t)size);
    if (sendmsg(d->fd, &m, 0) < 0) {
      if (errno == EINTR || errno == ENOBUFS) continue;
      return -1;
    }
    at += k;
  }
  return 0;
}

/* Send datagrams 0..n-1 prepared in u (headers and bodies) to d. */
static int send_batch(jg_out *o, struct jgr_udp_out *u, udp_dest *d, size_t n) {
  jg_ctx *c = o->ctx;
  pace(d, n);
  uint64_t t0 = jgr_now_ns();
  if (d->dpdk) {
    if (jgr_dpdk->tx_send(d->dpdk, u->hdrp, u->body, u->body_len, n) != 0) {
      udp_fail(o, d, "sending (DPDK) to", errno);
      return -1;
    }
  } else if (d->gso && gso_send(d, u, n) == 0) {
    /* sent as runs of equal-size datagrams, each run one system call (UDP GSO) */
  } else if (d->gso && errno != EINVAL && errno != EIO && errno != ENOPROTOOPT) {
    udp_fail(o, d, "sending (GSO) to", errno);
    return -1;
  } else {
    d->gso = 0; /* not supported here (EINVAL, EIO): plain sendmmsg from now on */
    for (size_t i = 0; i < n; i++) {
      u->iov[2 * i] = (struct iovec){u->hdr[i], JG_UDP_HEADER};
      u->iov[2 * i + 1] = (struct iovec){(void *)u->body[i], u->body_len[i]};
      u->msgs[i].msg_hdr.msg_iov = &u->iov[2 * i]; /* send_whole (version 2) points them elsewhere */
      u->msgs[i].msg_hdr.msg_iovlen = u->body_len[i] ? 2 : 1;
    }
    for (size_t at = 0; at < n;) {
      int k = sendmmsg(d->fd, u->msgs + at, (unsigned)(n - at < d->batch ? n - at : d->batch), 0);
      if (k < 0) {
        if (errno == EINTR || errno == ENOBUFS) continue;
        udp_fail(o, d, "sending to", errno);
        return -1;
      }
      at += (size_t)k;
    }
  }
  for (size_t i = 0; i < n; i++) c->stats.bytes_out += JG_UDP_HEADER + u->body_len[i];
  c->stats.udp_sent += n;
  c->stats.wait_out_ns += jgr_now_ns() - t0;
  return 0;
}

static __attribute__((noinline, cold)) void too_big(jg_out *o, const udp_dest *d, const uint8_t *record) {
  uint32_t L;
  memcpy(&L, record, 4);
  jg_ctx *c = o->ctx;
  if (!(c->flags & JGR_OUT_FAILED)) {
    jgr_error_set(&c->out_error, "output port %d: a tuple of %u bytes does not fit a UDP datagram of %u "
                  "bytes (%s)", o->port, L, d->max_bytes, d->name);
    c->flags |= JGR_OUT_FAILED;
  }
}

/* The next datagram's records from records[*pos ..): as many whole ones as fit d's limits. Returns
 * their bytes (and count), or 0 after failing the port when the first one does not fit at all.
 * Inlined: it runs once per datagram. */
static inline __attribute__((always_inline)) size_t cut_datagram(jg_out *o, const udp_dest *d, const uint8_t *records,
                                                                size_t nbytes, size_t *pos, uint32_t *count) {
  const size_t room = d->max_bytes - JG_UDP_HEADER;
  size_t bytes = 0;
  *count = 0;
  while (*pos < nbytes && *count < d->max_tuples) {
    uint32_t L;
    memcpy(&L, records + *pos, 4);
    if (bytes + 4 + (size_t)L > room) break;
    bytes += 4 + (size_t)L;
    *pos += 4 + (size_t)L;
    ++*count;
  }
  if (JGR_UNLIKELY(*count == 0)) too_big(o, d, records + *pos);
  return bytes;
}

/* ------------------------------------------------------------------ version 2 (acknowledged) */

static void v2_fail(jg_out *o, const udp_dest *d, const char *fmt, ...) JGR_PRINTF(3, 4);
static void v2_fail(jg_out *o, const udp_dest *d, const char *fmt, ...) {
  jg_ctx *c = o->ctx;
  if (c->flags & JGR_OUT_FAILED) return;
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  jgr_error_set(&c->out_error, "output port %d: UDP stream %u to %s: %s", o->port, d->stream, d->peer, what);
  c->flags |= JGR_OUT_FAILED;
}

/* A version 2 stream's send failed: ECONNREFUSED means the kernel heard that nothing listens at
 * the receiver's port any more (its process is gone). */
static void v2_send_failed(jg_out *o, const udp_dest *d, int errnum) {
  if (errnum == ECONNREFUSED)
    v2_fail(o, d, "the receiver is gone (%s) with %llu datagrams not acknowledged", strerror(errnum),
            (unsigned long long)jg_win_inflight(&d->win));
  else
    v2_fail(o, d, "sending: %s", strerror(errnum));
}

/* Send whole datagrams (header and body back to back in the window): u->body[i], u->body_len[i]
 * bytes. Runs of one size go as one UDP GSO send each, as in version 1, else sendmmsg. */
static int send_whole(jg_out *o, struct jgr_udp_out *u, udp_dest *d, size_t n) {
  jg_ctx *c = o->ctx;
  char ctrl[CMSG_SPACE(sizeof(uint16_t))];
  size_t at = 0;
  while (d->gso && at < n) {
    size_t size = u->body_len[at], k = 1;
    while (at + k < n && k < GSO_SEGMENTS && u->body_len[at + k] == size && (k + 1) * size <= 65000) k++;
    for (size_t i = 0; i < k; i++) u->iov[i] = (struct iovec){(void *)u->body[at + i], u->body_len[at + i]};
    struct msghdr m = {.msg_iov = u->iov, .msg_iovlen = k};
    if (k > 1) gso_segments(&m, ctrl, sizeof ctrl, (uint16_t)size);
    if (sendmsg(d->fd, &m, 0) < 0) {
      if (errno == EINTR || errno == ENOBUFS) continue;
      if (errno == EINVAL || errno == EIO || errno == ENOPROTOOPT) {
        d->gso = 0; /* not supported here: sendmmsg from now on */
        break;
      }
      v2_send_failed(o, d, errno);
      return -1;
    }
    at += k;
  }
  for (size_t i = at; i < n; i++) {
    u->iov[i - at] = (struct iovec){(void *)u->body[i], u->body_len[i]};
    u->msgs[i - at].msg_hdr = (struct msghdr){.msg_iov = &u->iov[i - at], .msg_iovlen = 1};
  }
  for (size_t done = 0; done < n - at;) {
    size_t left = n - at - done;
    int k = sendmmsg(d->fd, u->msgs + done, (unsigned)(left < d->batch ? left : d->batch), 0);
    if (k < 0) {
      if (errno == EINTR || errno == ENOBUFS) continue;
      v2_send_failed(o, d, errno);
      return -1;
    }
    done += (size_t)k;
  }
  for (size_t i = 0; i < n; i++) c->stats.bytes_out += u->body_len[i];
  c->stats.udp_sent += n;
  return 0;
}

/* Version 2 timestamps (jg_udp.h): the clock in microseconds, modulo 2^32, never 0 (none). */
static uint32_t stamp(uint64_t now) {
  uint32_t us = (uint32_t)(now / 1000u);
  return us ? us : 1;
}

/* Send the window's datagrams u->seqs[0 .. n) again, flagged RETX and stamped now: their timeout
 * passed (`timeout`), or the receiver reported them missing. */
static int resend(jg_out *o, struct jgr_udp_out *u, udp_dest *d, int n, uint64_t now, int timeout) {
  uint32_t ts = stamp(now);
  for (int i = 0; i < n; i++) {
    uint32_t len = 0;
    uint8_t *g = jg_win_datagram(&d->win, u->seqs[i], &len);
    uint16_t flags;
    memcpy(&flags, g + 18, 2);
    flags |= JG_UDP_F_RETX;
    memcpy(g + 18, &flags, 2);
    memcpy(g + JG_UDP_STAMP_AT, &ts, 4);
    u->body[i] = g;
    u->body_len[i] = len;
    jg_win_resent(&d->win, u->seqs[i], now, timeout);
  }
  o->ctx->stats.udp_retransmitted += (uint64_t)n;
  return send_whole(o, u, d, (size_t)n);
}

/* Take the ACKs waiting on d's socket (without blocking) and send again what they report missing.
 * 0, or -1 after failing the port. */
static int take_acks(jg_out *o, struct jgr_udp_out *u, udp_dest *d) {
  uint8_t buf[ACK_BYTES + 64];
  for (;;) {
    ssize_t k = recv(d->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      if (errno == EINTR) continue;
      v2_send_failed(o, d, errno);
      return -1;
    }
    jg_udp_header h;
    if (jg_udp_get_header_v(buf, (size_t)k, &h) != 2 || !(h.flags & JG_UDP_F_ACK) || h.stream != d->stream ||
        h.count > JG_UDP_ACK_REPORT || (size_t)k != JG_UDP_HEADER + h.count) {
      v2_fail(o, d, "the receiver sent a %zd-byte datagram that is not a version 2 acknowledgement of the stream", k);
      return -1;
    }
    uint64_t now = jgr_now_ns();
    uint32_t echo, age;
    memcpy(&echo, buf + JG_UDP_STAMP_AT, 4);
    age = stamp(now) - echo; /* modulo 2^32 microseconds */
    uint64_t rtt = echo && age < 60000000u ? (uint64_t)age * 1000u : 0;
    int sack = (h.flags & JG_UDP_F_SACK) != 0, end = (h.flags & JG_UDP_F_END) != 0;
    if (sack && (end || h.count)) {
      v2_fail(o, d, "the receiver sent a receipt (SACK) with %s", end ? "END" : "a gap report");
      return -1;
    }
    if (sack && !d->bound) {
      /* Receipts come from a ring of sequence numbers (a switch) that deduplicates only while the
       * sender keeps its bound; this one announced none, so up to the whole window went out at once
       * and a repeat may already have been added twice. Nothing the sender does now can tell, so it
       * fails, naming what is misconfigured, rather than keep a bound from here on. */
      v2_fail(o, d, "the receiver sent a receipt (SACK) for datagram %llu but announced no bound on datagrams in "
              "flight (dest ... v2 window N; the endpoint's udp_window_datagrams), and %llu were sent: it may have "
              "taken a repeat twice", (unsigned long long)h.seq, (unsigned long long)d->win.next);
      return -1;
    }
    int n = sack ? jg_win_sack(&d->win, h.seq, rtt, now, u->seqs, BATCH)
                 : jg_win_ack(&d->win, h.seq, end, buf + JG_UDP_HEADER, h.count, rtt, now, u->seqs, BATCH);
    if (n < 0) {
      unsigned long long data_sent = (unsigned long long)(d->win.has_end ? d->win.end_seq : d->win.next);
      if (sack)
        v2_fail(o, d, "the receiver sent a receipt for datagram %llu, but %llu data datagrams were sent",
                (unsigned long long)h.seq, data_sent);
      else
        v2_fail(o, d, "the receiver acknowledges %s%llu datagrams, but %llu were sent", end ? "END and " : "",
                (unsigned long long)h.seq, data_sent);
      return -1;
    }
    if (n > 0 && resend(o, u, d, n, now, 0) != 0) return -1;
  }
}

/* Send again what waited longer than its retransmission timeout; fail the stream for a datagram
 * that timed out max_tries times. Looks only every quarter timeout (the scan walks the window). */
static int timers(jg_out *o, struct jgr_udp_out *u, udp_dest *d, uint64_t now) {
  if (now < d->timer_ns || d->win.done) return 0;
  uint64_t failed = 0;
  int n = jg_win_due(&d->win, now, u->seqs, TIMER_BURST, &failed);
  if (n < 0) {
    v2_fail(o, d, "datagram %llu%s timed out %u times without an acknowledgement (the receiver stopped "
            "acknowledging: it is gone or stalled, or the path loses everything; param udp.max_tries)",
            (unsigned long long)failed, d->win.has_end && failed == d->win.end_seq ? " (END)" : "",
            d->win.max_tries);
    return -1;
  }
  uint64_t step = d->win.rto / 4 > 1000000u ? d->win.rto / 4 : 1000000u;
  d->timer_ns = now + step;
  return n > 0 ? resend(o, u, d, n, now, 1) : 0;
}

/* The window is full: wait for acknowledgements (flow control), keeping the timers. */
static int wait_window(jg_out *o, struct jgr_udp_out *u, udp_dest *d) {
  uint64_t now = jgr_now_ns();
  uint64_t ms = d->timer_ns > now ? (d->timer_ns - now) / 1000000u + 1 : 1;
  struct pollfd pfd = {d->fd, POLLIN, 0};
  poll(&pfd, 1, (int)(ms < WAIT_MS_MAX ? ms : WAIT_MS_MAX));
  int rc = take_acks(o, u, d) != 0 || timers(o, u, d, jgr_now_ns()) != 0 ? -1 : 0;
  o->ctx->stats.wait_out_ns += jgr_now_ns() - now;
  return rc;
}

/* Copy the records into d's window as datagrams and send them. */
static int send_v2(jg_out *o, struct jgr_udp_out *u, udp_dest *d, const uint8_t *records, size_t nbytes) {
  if (take_acks(o, u, d) != 0 || timers(o, u, d, jgr_now_ns()) != 0) return -1;
  uint64_t now = jgr_now_ns();
  uint32_t ts = stamp(now);
  size_t pos = 0, nb = 0;
  while (pos < nbytes) {
    size_t start = pos;
    uint32_t count;
    size_t bytes = cut_datagram(o, d, records, nbytes, &pos, &count);
    if (!bytes) return -1;
    uint32_t len = JG_UDP_HEADER + (uint32_t)bytes;
    uint8_t *g;
    while (!(g = jg_win_reserve(&d->win, len))) {
      if (nb && send_whole(o, u, d, nb) != 0) return -1;
      nb = 0;
      if (wait_window(o, u, d) != 0) return -1;
      now = jgr_now_ns();
      ts = stamp(now);
    }
    jg_udp_put_header_v(g, 2, d->stream, d->win.next, (uint16_t)count, 0);
    memcpy(g + JG_UDP_STAMP_AT, &ts, 4);
    memcpy(g + JG_UDP_HEADER, records + start, bytes);
    jg_win_commit(&d->win, len, 0, now);
    u->body[nb] = g;
    u->body_len[nb] = len;
    if (++nb == BATCH) {
      if (send_whole(o, u, d, nb) != 0) return -1;
      nb = 0;
    }
  }
  return nb ? send_whole(o, u, d, nb) : 0;
}

/* END of a version 2 stream: into the window and out once; the timers repeat it. */
static int send_end_v2(jg_out *o, struct jgr_udp_out *u, udp_dest *d) {
  uint8_t *g;
  while (!(g = jg_win_reserve(&d->win, JG_UDP_HEADER + JG_UDP_END_PAYLOAD)))
    if (wait_window(o, u, d) != 0) return -1;
  uint64_t now = jgr_now_ns();
  uint32_t ts = stamp(now);
  jg_udp_put_header_v(g, 2, d->stream, d->win.next, 0, JG_UDP_F_END);
  memcpy(g + JG_UDP_STAMP_AT, &ts, 4);
  memcpy(g + JG_UDP_HEADER, &o->count, 8);
  memset(g + JG_UDP_HEADER + 8, 0, 8);
  jg_win_commit(&d->win, JG_UDP_HEADER + JG_UDP_END_PAYLOAD, 1, now);
  u->body[0] = g;
  u->body_len[0] = JG_UDP_HEADER + JG_UDP_END_PAYLOAD;
  return send_whole(o, u, d, 1);
}

/* Wait until the receivers have acknowledged every version 2 stream of the port whole. */
static int await_acks(jg_out *o, struct jgr_udp_out *u) {
  struct pollfd *pfd = calloc(u->n ? u->n : 1, sizeof *pfd);
  if (!pfd) abort();
  uint64_t t0 = jgr_now_ns();
  int rc = 0;
  for (;;) {
    size_t np = 0;
    uint64_t now = jgr_now_ns(), wake = now + WAIT_MS_MAX * 1000000u;
    for (size_t di = 0; di < u->n && rc == 0; di++) {
      udp_dest *d = &u->d[di];
      if (d->version != 2 || d->win.done) continue;
      if (take_acks(o, u, d) != 0 || timers(o, u, d, now) != 0) rc = -1;
      if (d->win.done) continue;
      pfd[np++] = (struct pollfd){d->fd, POLLIN, 0};
      if (d->timer_ns < wake) wake = d->timer_ns;
    }
    if (rc != 0 || np == 0) break;
    uint64_t ms = wake > now ? (wake - now) / 1000000u + 1 : 1;
    poll(pfd, np, (int)ms);
  }
  free(pfd);
  o->ctx->stats.wait_out_ns += jgr_now_ns() - t0;
  return rc;
}

int jgr_udp_send(jg_out *o, const uint8_t *records, size_t nbytes) {
  struct jgr_udp_out *u = o->udp;
  if (o->ctx->flags & JGR_OUT_FAILED) return -1;
  for (size_t di = 0; di < u->n; di++) {
    udp_dest *d = &u->d[di];
    if (d->version == 2) {
      if (send_v2(o, u, d, records, nbytes) != 0) return -1;
      continue;
    }
    size_t pos = 0, nb = 0;
    while (pos < nbytes) {
      size_t start = pos;
      uint32_t count;
      size_t bytes = cut_datagram(o, d, records, nbytes, &pos, &count);
      if (!bytes) return -1;
      jg_udp_put_header(u->hdr[nb], d->stream, d->seq++, (uint16_t)count, 0);
      u->body[nb] = records + start;
      u->body_len[nb] = (uint32_t)bytes;
      if (++nb == BATCH) {
        if (send_batch(o, u, d, nb) != 0) return -1;
        nb = 0;
      }
    }
    if (nb && send_batch(o, u, d, nb) != 0) return -1;
  }
  return 0;
}

int jgr_udp_finish(jg_out *o, jgr_error *err) {
  struct jgr_udp_out *u = o->udp;
  uint8_t end[JG_UDP_END_PAYLOAD] = {0};
  memcpy(end, &o->count, 8);
  int acked = 0; /* version 2 streams to wait for */
  for (size_t di = 0; di < u->n && !(o->ctx->flags & JGR_OUT_FAILED); di++) {
    udp_dest *d = &u->d[di];
    if (d->version == 2) {
      send_end_v2(o, u, d);
      acked = 1;
      continue;
    }
    for (unsigned k = 0; k < JG_UDP_END_COPIES; k++) {
      jg_udp_put_header(u->hdr[k], d->stream, d->seq, 0, JG_UDP_F_END);
      u->body[k] = end;
      u->body_len[k] = sizeof end;
    }
    send_batch(o, u, d, JG_UDP_END_COPIES);
  }
  if (acked && !(o->ctx->flags & JGR_OUT_FAILED)) await_acks(o, u);
  if (o->ctx->flags & JGR_OUT_FAILED) {
    jgr_error_set(err, "%s", o->ctx->out_error.message);
    return -1;
  }
  return 0;
}

void jgr_udp_free(jg_out *o) {
  struct jgr_udp_out *u = o->udp;
  if (!u) return;
  for (size_t i = 0; i < u->n; i++) {
    if (u->d[i].fd >= 0) close(u->d[i].fd);
    if (u->d[i].dpdk) jgr_dpdk->tx_close(u->d[i].dpdk);
    if (u->d[i].version == 2) jg_win_free(&u->d[i].win);
    free(u->d[i].name);
    free(u->d[i].peer);
  }
  free(u->d);
  free(u->hdr);
  free(u->hdrp);
  free(u->body);
  free(u->body_len);
  free(u->msgs);
  free(u->iov);
  free(u->seqs);
  free(u);
  o->udp = NULL;
}
