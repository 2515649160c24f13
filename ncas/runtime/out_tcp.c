/* TCP output (contract §3): one jg_out per worker per output port, one connection per destination.
 *
 * Tuples are batched into a >= 1 MiB buffer as (u32 length, bytes) and sent with blocking send
 * loops; the time spent inside send() is the worker's wait_out. A port that fans out to several
 * destinations sends the same bytes to each (one after the other: the slowest receiver paces).
 * Send failures cannot be returned from jg_emit, so they set a flag on the context that the
 * driver checks after every row (jgr_call_row).
 *
 * A client's receiver (`dest ... client MS`) is not waited for without end, though: a slow NCA
 * downstream is backpressure, but a client that stops reading, or listens and never accepts, would
 * hold the job and its cores until the control plane's stall watchdog. Its bytes are sent without
 * blocking, and while they do not fit, the worker sleeps in poll(POLLOUT) and looks, at least once
 * a second, whether the client took anything; when it took nothing for MS ms the stream fails
 * (send_client).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h> /* SIOCOUTQ */
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "jgrt.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the runtime writes NTF integers in host order and needs a little-endian host"
#endif

#define SNDBUF_BYTES (4 << 20)

static void out_fail(jg_out *o, const char *what, size_t dest, int errnum) {
  jg_ctx *c = o->ctx;
  if (!(c->flags & JGR_OUT_FAILED)) {
    jgr_error_set(&c->out_error, "output port %d: %s %s: %s", o->port, what,
                  dest < o->nfds ? o->names[dest] : "?", strerror(errnum));
    c->flags |= JGR_OUT_FAILED;
  }
  for (size_t i = 0; i < o->nfds; i++)
    if (o->fds[i] >= 0) close(o->fds[i]), o->fds[i] = -1;
}

/* Send all `n` bytes to a client's stream, like jgr_send_all, but return -2 once the client has
 * taken no byte for `stall_ms` while some were waiting for it. Taken means acknowledged by its
 * kernel (a listener that never accepts takes bytes until the connection's receive buffer is full,
 * then its window stays closed). The worker does not wait for POLLOUT alone, which comes only once
 * a third of the send buffer (up to 8 MiB) is free: a client reading slowly but steadily may take
 * longer than `stall_ms` to free that much. It wakes at least once a second and counts as progress
 * any byte send takes (it does as soon as an acknowledgement frees some room) and any shrinking of
 * SIOCOUTQ (bytes sent and not yet acknowledged; it moves even while the buffer stays too full for
 * send). No progress otherwise: the sender writes nothing else on this connection meanwhile. */
static int send_client(int fd, const uint8_t *p, size_t n, uint32_t stall_ms) {
  const uint64_t stall_ns = (uint64_t)stall_ms * 1000000u;
  uint64_t since = 0; /* when the client last took a byte, as far as we know; 0 = not waiting */
  int unacked = -1;   /* SIOCOUTQ then */
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= (size_t)k;
      since = 0;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    uint64_t now = jgr_now_ns();
    int q;
    if (ioctl(fd, SIOCOUTQ, &q) != 0) q = -1; /* then only what send takes counts */
    if (since == 0 || q != unacked) { /* we start waiting, or the client took bytes meanwhile */
      since = now;
      unacked = q;
    } else if (now - since >= stall_ns) {
      return -2;
    }
    uint64_t left = since + stall_ns - now;
    struct pollfd pfd = {fd, POLLOUT, 0};
    if (poll(&pfd, 1, left >= 1000000000u ? 1000 : (int)(left / 1000000u) + 1) < 0 && errno != EINTR) return -1;
  }
  return 0;
}

/* A client's stream failed by send_client. */
static void client_stalled(jg_out *o, size_t dest, const jgr_dest *dst) {
  jg_ctx *c = o->ctx;
  if (!(c->flags & JGR_OUT_FAILED)) {
    int v6 = strchr(dst->host, ':') != NULL;
    jgr_error_set(&c->out_error,
                  "the client at %s%s%s:%s took no data for %g s: it is not reading (or never accepted the "
                  "connection) [output port %d, stream %u]",
                  v6 ? "[" : "", dst->host, v6 ? "]" : "", dst->port, dst->client_stall_ms / 1000.0, o->port,
                  dst->first_stream + (uint32_t)c->worker);
    c->flags |= JGR_OUT_FAILED;
  }
  out_fail(o, "sending to", dest, ETIMEDOUT); /* closes the port's connections */
}

/* Send `n` bytes to every destination of the port. */
static int out_send(jg_out *o, const uint8_t *p, size_t n) {
  jg_ctx *c = o->ctx;
  if (c->flags & JGR_OUT_FAILED) return -1;
  uint64_t t0 = jgr_now_ns();
  for (size_t i = 0; i < o->nfds; i++) {
    if (o->fds[i] < 0) continue; /* a UDP destination (out_udp.c) */
    const jgr_dest *dst = &c->proc->outputs[o->port].dests[i];
    int r = dst->client_stall_ms ? send_client(o->fds[i], p, n, dst->client_stall_ms)
                                 : jgr_send_all(o->fds[i], p, n);
    if (r == -2) {
      client_stalled(o, i, dst);
      return -1;
    }
    if (r != 0) {
      out_fail(o, "sending to", i, errno);
      return -1;
    }
    c->stats.bytes_out += n;
  }
  c->stats.wait_out_ns += jgr_now_ns() - t0;
  return 0;
}

/* The buffer holds whole records (u32 length + tuple): TCP destinations get the bytes, UDP ones
 * the same records cut into datagrams. */
static void out_flush(jg_out *o) {
  if (o->used) {
    out_send(o, o->buf, o->used);
    if (o->udp) jgr_udp_send(o, o->buf, o->used);
  }
  o->used = 0;
}

/* Slow path of jg_emit: flush, and grow the buffer when one tuple does not fit in it. */
static uint8_t *emit_slow(jg_out *o, uint32_t len) {
  size_t need = 4 + (size_t)len;
  if (len == 0 || len >= 0x80000000u) { /* contract §3: 1 <= L < 2^31 */
    jg_ctx *c = o->ctx;
    if (!(c->flags & JGR_OUT_FAILED)) {
      jgr_error_set(&c->out_error, "output port %d: invalid tuple length %u", o->port, len);
      c->flags |= JGR_OUT_FAILED;
    }
    if (o->junk_cap < len || !o->junk) {
      free(o->junk);
      o->junk = calloc(1, len ? len : 1);
      if (!o->junk) abort();
      o->junk_cap = len;
    }
    return o->junk;
  }
  out_flush(o);
  if (need > o->cap) {
    uint8_t *nb = realloc(o->buf, need);
    if (!nb) abort();
    o->buf = nb;
    o->cap = need;
  }
  memcpy(o->buf, &len, 4);
  memset(o->buf + 4, 0, len);
  o->used = need;
  o->count++;
  return o->buf + 4;
}

uint8_t *jg_emit(jg_out *o, uint32_t len) {
  size_t need = 4 + (size_t)len;
  if (JGR_UNLIKELY(need > o->cap - o->used || len == 0 || len >= 0x80000000u)) return emit_slow(o, len);
  uint8_t *p = o->buf + o->used;
  memcpy(p, &len, 4);
  memset(p + 4, 0, len);
  o->used += need;
  o->count++;
  return p + 4;
}

/* Whether `fd` is connected to itself: a connect to a loopback port nobody listens on any more can
 * be given that very port as its own (TCP's simultaneous open), and would then take the stream as
 * a receiver's. Nobody listening is what it is. */
static int self_connected(int fd) {
  struct sockaddr_storage a, b;
  socklen_t la = sizeof a, lb = sizeof b;
  if (getsockname(fd, (struct sockaddr *)&a, &la) != 0 || getpeername(fd, (struct sockaddr *)&b, &lb) != 0) return 0;
  return la == lb && memcmp(&a, &b, la) == 0;
}

/* Non-blocking connect bounded by the deadline, then back to blocking. */
static int connect_once(const char *host, const char *port, uint64_t deadline, int *err) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int gai = getaddrinfo(host, port, &hints, &res);
  if (gai != 0) {
    *err = gai == EAI_SYSTEM ? errno : EHOSTUNREACH;
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      *err = errno;
      continue;
    }
    int sndbuf = SNDBUF_BYTES;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    if (errno == EINPROGRESS) {
      uint64_t now = jgr_now_ns();
      int ms = now < deadline ? (int)((deadline - now) / 1000000u) + 1 : 1;
      struct pollfd pfd = {fd, POLLOUT, 0};
      int soerr = 0;
      socklen_t sl = sizeof soerr;
      int r = poll(&pfd, 1, ms);
      if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0) break;
      *err = r == 0 ? ETIMEDOUT : soerr ? soerr : errno;
    } else {
      *err = errno;
    }
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0 && self_connected(fd)) {
    close(fd);
    fd = -1;
    *err = ECONNREFUSED;
  }
  if (fd >= 0) {
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  }
  return fd;
}

/* Retry until the deadline: the receiver may start listening a moment after we execute. */
static int connect_retry(const char *host, const char *port, uint64_t timeout_ns, int *err) {
  uint64_t deadline = jgr_now_ns() + timeout_ns;
  for (;;) {
    int fd = connect_once(host, port, deadline, err);
    if (fd >= 0) return fd;
    if (jgr_now_ns() >= deadline) return -1;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

int jgr_outputs_open(jg_ctx *c, jgr_error *err) {
  jgr_proc *p = c->proc;
  uint64_t timeout_ms;
  if (jgr_param_u64(p, "connect_timeout_ms", 10000, 1, 3600000, &timeout_ms, err)) return -1;
  for (uint32_t port = 0; port < c->nouts; port++) {
    jg_out *o = c->outs[port];
    const jgr_out_cfg *cfg = &p->outputs[o->port]; /* a member's view numbers its ports from 0 */
    o->fds = malloc(sizeof(int) * (cfg->ndests ? cfg->ndests : 1));
    o->names = calloc(cfg->ndests ? cfg->ndests : 1, sizeof(char *));
    if (!o->fds || !o->names) abort();
    for (size_t d = 0; d < cfg->ndests; d++) {
      const jgr_dest *dst = &cfg->dests[d];
      uint32_t stream = dst->first_stream + (uint32_t)c->worker;
      size_t nl = strlen(dst->host) + strlen(dst->port) + 32;
      o->names[d] = malloc(nl);
      snprintf(o->names[d], nl, "%s:%s (stream %u)", dst->host, dst->port, stream);
      o->nfds = d + 1;
      if (dst->udp) { /* docs/udp-transport.md */
        o->fds[d] = -1;
        if (jgr_udp_open(o, dst, stream, err) != 0) return -1;
        continue;
      }
      int e = 0;
      o->fds[d] = connect_retry(dst->host, dst->port, timeout_ms * 1000000u, &e);
      if (o->fds[d] < 0) {
        jgr_error_set(err, "output port %d: cannot connect to %s:%s within %llu ms: %s", o->port,
                      dst->host, dst->port, (unsigned long long)timeout_ms, strerror(e));
        return -1;
      }
      /* contract §3 header, or the keyed header of docs/contract.md when the receiver asked for
       * one: `NTFK`, the stream id, then the receiver's 64-bit key */
      uint8_t hdr[16] = {'N', 'T', 'F', '1'};
      size_t hlen = 8;
      memcpy(hdr + 4, &stream, 4);
      if (dst->key) {
        hdr[3] = 'K';
        memcpy(hdr + 8, &dst->key, 8);
        hlen = 16;
      }
      if (jgr_send_all(o->fds[d], hdr, hlen) != 0) {
        jgr_error_set(err, "output port %d: sending to %s: %s", o->port, o->names[d], strerror(errno));
        return -1;
      }
      c->stats.bytes_out += hlen;
    }
  }
  return 0;
}

/* Close every connection of `c`'s ports without the end marker: each receiver sees its stream
 * break, never a short stream that looks complete (a shared scan's member that failed). */
void jgr_outputs_abort(jg_ctx *c) {
  for (uint32_t port = 0; port < c->nouts; port++) {
    jg_out *o = c->outs[port];
    for (size_t i = 0; i < o->nfds; i++)
      if (o->fds[i] >= 0) close(o->fds[i]), o->fds[i] = -1;
  }
}

int jgr_outputs_finish(jg_ctx *c, jgr_error *err) {
  for (uint32_t port = 0; port < c->nouts; port++) {
    jg_out *o = c->outs[port];
    out_flush(o);
    uint8_t end[12] = {0};
    memcpy(end + 4, &o->count, 8);
    out_send(o, end, sizeof end);
    if (o->udp && !(c->flags & JGR_OUT_FAILED)) jgr_udp_finish(o, err);
    c->stats.tuples_out += o->count;
    if (c->flags & JGR_OUT_FAILED) break;
    for (size_t i = 0; i < o->nfds; i++) {
      if (o->fds[i] < 0) continue; /* UDP: closed by jgr_udp_free */
      /* close() after the last send: the kernel still delivers the queued bytes. A receiver that
       * needs them all reads to EOF; we do not wait for it (the count makes loss detectable). */
      if (close(o->fds[i]) != 0 && !(c->flags & JGR_OUT_FAILED)) out_fail(o, "closing", i, errno);
      o->fds[i] = -1;
    }
  }
  if (c->flags & JGR_OUT_FAILED) {
    jgr_error_set(err, "%s", c->out_error.message);
    return -1;
  }
  return 0;
}
