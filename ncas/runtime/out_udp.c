/* UDP output (docs/udp-transport.md): the UDP destinations of one output port of one worker.
 *
 * jg_emit batches tuples in the port's buffer as (u32 length, bytes) whatever the transport, so the
 * records a flush hands over are already the data of datagrams: each datagram is a 24-byte header
 * and a run of whole records, cut where the destination's size or tuple limit would be passed
 * (a switch takes one tuple per datagram). Nothing is copied: a datagram is two iovecs, sent
 * with sendmmsg in batches of `param udp.batch` (default 256), or handed to DPDK (dpdk_io.c) with
 * `param udp.dpdk`.
 *
 * UDP has no flow control. `param udp.max_pps N` paces each destination to N datagrams per second
 * (0, the default, does not pace); a receiver that falls behind loses datagrams, and it reports
 * that loss (the sequence numbers and the END counts) as a failed stream.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "jg_udp.h"
#include "jgrt.h"

#define BATCH 256 /* datagrams per sendmmsg */
#define GSO_SEGMENTS 64 /* the kernel's UDP_MAX_SEGMENTS on older kernels */
#define SNDBUF_BYTES (8 << 20)

const jgr_dpdk_ops *jgr_dpdk; /* set by dpdk_io.o's constructor when the binary links it */

typedef struct {
  int fd;       /* connected UDP socket, or -1 with DPDK */
  void *dpdk;   /* DPDK TX handle */
  char *name;
  uint32_t stream, max_bytes, max_tuples;
  uint64_t seq; /* data datagrams sent */
  uint64_t pace_ns, next_ns;
  unsigned batch; /* datagrams per sendmmsg (param udp.batch; 1 = one system call per datagram) */
  int gso;        /* equal-size datagrams go out as one UDP GSO send (param udp.gso, default on) */
} udp_dest;

struct jgr_udp_out {
  udp_dest *d;
  size_t n;
  uint8_t (*hdr)[JG_UDP_HEADER];
  const uint8_t **hdrp, **body;
  uint32_t *body_len;
  struct mmsghdr *msgs;
  struct iovec *iov;
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
    if (!u->hdr || !u->hdrp || !u->body || !u->body_len || !u->msgs || !u->iov) abort();
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
  uint64_t dflt_bytes, pps, batch, gso;
  if (jgr_param_u64(p, "udp.max_datagram", JG_UDP_DEFAULT_MAX_BYTES, JG_UDP_HEADER + 5, JG_UDP_MAX_BYTES,
                    &dflt_bytes, err) ||
      jgr_param_u64(p, "udp.max_pps", 0, 0, 1000000000, &pps, err) ||
      jgr_param_u64(p, "udp.batch", BATCH, 1, BATCH, &batch, err) ||
      jgr_param_u64(p, "udp.gso", 1, 0, 1, &gso, err))
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
  u->n++;
  if (jgr_param(p, "udp.dpdk")) {
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
    if (k > 1) {
      m.msg_control = ctrl;
      m.msg_controllen = sizeof ctrl;
      struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
      cm->cmsg_level = SOL_UDP;
      cm->cmsg_type = UDP_SEGMENT;
      cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      uint16_t seg = (uint16_t)size;
      memcpy(CMSG_DATA(cm), &seg, sizeof seg);
    }
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
  c->stats.wait_out_ns += jgr_now_ns() - t0;
  return 0;
}

int jgr_udp_send(jg_out *o, const uint8_t *records, size_t nbytes) {
  struct jgr_udp_out *u = o->udp;
  if (o->ctx->flags & JGR_OUT_FAILED) return -1;
  for (size_t di = 0; di < u->n; di++) {
    udp_dest *d = &u->d[di];
    const size_t room = d->max_bytes - JG_UDP_HEADER;
    size_t pos = 0, nb = 0;
    while (pos < nbytes) {
      size_t start = pos, bytes = 0;
      uint32_t count = 0;
      while (pos < nbytes && count < d->max_tuples) {
        uint32_t L;
        memcpy(&L, records + pos, 4);
        if (bytes + 4 + (size_t)L > room) break;
        bytes += 4 + (size_t)L;
        pos += 4 + (size_t)L;
        count++;
      }
      if (count == 0) {
        uint32_t L;
        memcpy(&L, records + pos, 4);
        jg_ctx *c = o->ctx;
        if (!(c->flags & JGR_OUT_FAILED)) {
          jgr_error_set(&c->out_error, "output port %d: a tuple of %u bytes does not fit a UDP datagram of %u "
                        "bytes (%s)", o->port, L, d->max_bytes, d->name);
          c->flags |= JGR_OUT_FAILED;
        }
        return -1;
      }
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
  for (size_t di = 0; di < u->n && !(o->ctx->flags & JGR_OUT_FAILED); di++) {
    udp_dest *d = &u->d[di];
    for (unsigned k = 0; k < JG_UDP_END_COPIES; k++) {
      jg_udp_put_header(u->hdr[k], d->stream, d->seq, 0, JG_UDP_F_END);
      u->body[k] = end;
      u->body_len[k] = sizeof end;
    }
    send_batch(o, u, d, JG_UDP_END_COPIES);
  }
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
    free(u->d[i].name);
  }
  free(u->d);
  free(u->hdr);
  free(u->hdrp);
  free(u->body);
  free(u->body_len);
  free(u->msgs);
  free(u->iov);
  free(u);
  o->udp = NULL;
}
