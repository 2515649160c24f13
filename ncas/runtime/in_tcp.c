/* TCP input (contract §3): receive the `expected` streams of one input port.
 *
 * An acceptor thread accepts connections, reads and checks each header (magic, stream id in
 * range, not seen before; on a keyed port also the key, docs/contract.md) and deals the connection
 * to worker (k % nworkers) for the k-th accepted stream, so every worker knows in advance how
 * many streams it owns. When all streams are in, it closes the listening socket. A worker polls all
 * its connections at once, because reading them one after another can deadlock a DAG in which
 * one upstream sender feeds us and another of our senders. Complete tuples are handed to the
 * callback in batches straight from the receive buffer; the end marker's count is checked.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jgrt.h"

#define RECV_BUFFER (1u << 20)
#define RCVBUF_BYTES (4 << 20)
#define BATCH 1024
#define HEADER_TIMEOUT_MS 10000

typedef struct {
  int fd;
  uint32_t stream;
} pending_conn;

typedef struct {
  pthread_mutex_t mu;
  pending_conn *queue; /* accepted, not yet taken by the worker */
  size_t nqueue;
  int wake[2]; /* pipe: the acceptor writes a byte when it queued a connection or failed */
  uint32_t share; /* how many streams this worker owns */
} worker_slot;

struct jgr_in {
  int listen_fd, port, nworkers;
  int *listen_fd_slot; /* the process' copy of listen_fd, set to -1 once it is closed */
  uint32_t expected;
  uint64_t key; /* keyed streams (docs/contract.md); 0 = plain NTF1 */
  worker_slot *slots;
  pthread_t acceptor;
  int acceptor_started;
  int failed; /* acceptor error (atomic), read by workers after a wake-up */
  jgr_error err;
  pthread_mutex_t err_mu;
  struct jgr_udp_in *udp; /* a --udp-inputs port: everything goes to in_udp.c */
};

static void wake_all(jgr_in *in) {
  for (int w = 0; w < in->nworkers; w++) {
    char b = 1;
    ssize_t r = write(in->slots[w].wake[1], &b, 1);
    (void)r;
  }
}

static int read_exact_timeout(int fd, uint8_t *p, size_t n, int timeout_ms) {
  uint64_t deadline = jgr_now_ns() + (uint64_t)timeout_ms * 1000000u;
  while (n > 0) {
    uint64_t now = jgr_now_ns();
    if (now >= deadline) return -2;
    struct pollfd pfd = {fd, POLLIN, 0};
    int r = poll(&pfd, 1, (int)((deadline - now) / 1000000u) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r == 0 ? -2 : -1;
    ssize_t k = recv(fd, p, n, 0);
    if (k == 0) return -3;
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static void acceptor_fail(jgr_in *in, const char *fmt, ...) JGR_PRINTF(2, 3);
static void acceptor_fail(jgr_in *in, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&in->err_mu);
  jgr_error_vset(&in->err, fmt, ap);
  pthread_mutex_unlock(&in->err_mu);
  va_end(ap);
  __atomic_store_n(&in->failed, 1, __ATOMIC_RELEASE);
  wake_all(in);
}

/* Read and check a stream's header. Returns 0 and the stream id when the header is good, 1 when a
 * keyed port got a connection that is not one of its streams (ignore it), -1 after acceptor_fail. */
static int read_header(jgr_in *in, int fd, uint32_t *stream, const char **why) {
  uint8_t hdr[16];
  int r = read_exact_timeout(fd, hdr, 8, HEADER_TIMEOUT_MS);
  if (r == 0 && in->key && memcmp(hdr, "NTFK", 4) == 0) r = read_exact_timeout(fd, hdr + 8, 8, HEADER_TIMEOUT_MS);
  const char *err = r == -2 ? "timed out" : r == -3 ? "connection closed" : r ? strerror(errno) : NULL;
  if (in->key) {
    /* A keyed port takes only streams that open with its key. Anything else is a connection that
     * is not part of this job (a stale sender reusing a port number, say): it must neither count
     * as one of our streams nor fail the job, so it is closed and the port keeps accepting. */
    uint64_t key;
    memcpy(&key, hdr + 8, 8);
    if (err) *why = err;
    else if (memcmp(hdr, "NTFK", 4) != 0) *why = "no keyed stream header";
    else if (key != in->key) *why = "wrong stream key";
    else *why = NULL;
    if (*why) return 1;
  } else if (err) {
    acceptor_fail(in, "input port %d: stream header not received: %s", in->port, err);
    return -1;
  } else if (memcmp(hdr, "NTF1", 4) != 0) {
    acceptor_fail(in, "input port %d: stream header is not NTF1", in->port);
    return -1;
  }
  memcpy(stream, hdr + 4, 4);
  return 0;
}

static void *acceptor_main(void *arg) {
  jgr_in *in = arg;
  uint8_t *seen = calloc(in->expected, 1);
  for (uint32_t k = 0; k < in->expected;) {
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    int fd = accept4(in->listen_fd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      acceptor_fail(in, "input port %d: accept failed: %s", in->port, strerror(errno));
      break;
    }
    int rcvbuf = RCVBUF_BYTES;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    uint32_t stream = 0;
    const char *why = NULL;
    int h = read_header(in, fd, &stream, &why);
    if (h == 1) {
      char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
      getnameinfo((struct sockaddr *)&peer, plen, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV);
      jgr_log("input port %d: ignored a connection from %s:%s (%s)", in->port, host, serv, why);
      close(fd);
      continue;
    }
    if (h == 0 && stream >= in->expected) {
      acceptor_fail(in, "input port %d: stream id %u, but %u streams are expected", in->port, stream,
                    in->expected);
    } else if (h == 0 && seen[stream]) {
      acceptor_fail(in, "input port %d: stream id %u received twice", in->port, stream);
    }
    if (__atomic_load_n(&in->failed, __ATOMIC_ACQUIRE)) {
      close(fd);
      break;
    }
    seen[stream] = 1;
    worker_slot *s = &in->slots[k % (uint32_t)in->nworkers];
    pthread_mutex_lock(&s->mu);
    s->queue[s->nqueue++] = (pending_conn){fd, stream};
    pthread_mutex_unlock(&s->mu);
    char b = 1;
    ssize_t wr = write(s->wake[1], &b, 1);
    (void)wr;
    k++;
  }
  /* Every expected stream is here (or the port failed): stop listening, so that a connection
   * still queued behind them is refused at once instead of waiting for a reader that will never
   * come. Its sender then fails with a clear error rather than hanging the job. */
  close(in->listen_fd);
  *in->listen_fd_slot = -1;
  free(seen);
  return NULL;
}

jgr_in *jgr_in_start(jgr_proc *p, int port, int nworkers, jgr_error *err) {
  if (port < 0 || port >= p->ninputs) {
    jgr_error_set(err, "input port %d does not exist (the process was started with --inputs %d)", port,
                  p->ninputs);
    return NULL;
  }
  jgr_in *in = calloc(1, sizeof *in);
  if (p->inputs[port].udp) { /* docs/udp-transport.md */
    in->udp = jgr_udp_in_start(p, port, nworkers, err);
    if (!in->udp) {
      free(in);
      return NULL;
    }
    return in;
  }
  if (p->inputs[port].listen_fd < 0) {
    jgr_error_set(err, "input port %d was already received in an earlier phase", port);
    free(in);
    return NULL;
  }
  in->listen_fd = p->inputs[port].listen_fd;
  in->listen_fd_slot = &p->inputs[port].listen_fd;
  in->key = p->inputs[port].key;
  in->port = port;
  in->nworkers = nworkers;
  in->expected = p->inputs[port].expected;
  pthread_mutex_init(&in->err_mu, NULL);
  in->slots = calloc((size_t)nworkers, sizeof *in->slots);
  for (int w = 0; w < nworkers; w++) {
    worker_slot *s = &in->slots[w];
    pthread_mutex_init(&s->mu, NULL);
    s->share = in->expected / (uint32_t)nworkers + ((uint32_t)w < in->expected % (uint32_t)nworkers);
    s->queue = calloc(s->share ? s->share : 1, sizeof *s->queue);
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
      jgr_error_set(err, "pipe: %s", strerror(errno));
      return NULL;
    }
  }
  if (in->expected > 0) {
    if (pthread_create(&in->acceptor, NULL, acceptor_main, in) != 0) {
      jgr_error_set(err, "cannot start the acceptor thread");
      return NULL;
    }
    in->acceptor_started = 1;
  }
  return in;
}

/* One connection being read by a worker. */
typedef struct {
  int fd;
  uint32_t stream;
  uint8_t *buf;
  size_t cap, len; /* unparsed bytes are buf[0 .. len) */
  uint64_t count;  /* tuples received */
} conn;

/* Parse complete tuples from c->buf and hand them over. Returns 1 when the end marker was seen,
 * 0 when more bytes are needed, -1 on error. */
static int conn_parse(jgr_in *in, conn *c, jg_ctx *ctx, jgr_tuples_fn fn, void *arg, jgr_error *err) {
  const uint8_t *tuples[BATCH];
  uint32_t lens[BATCH];
  size_t n = 0, pos = 0;
  int ended = 0;
  while (c->len - pos >= 4) {
    uint32_t L;
    memcpy(&L, c->buf + pos, 4);
    if (L == 0) {
      if (c->len - pos < 12) break;
      uint64_t count;
      memcpy(&count, c->buf + pos + 4, 8);
      if (count != c->count + n) {
        jgr_error_set(err, "input port %d stream %u: end marker counts %llu tuples, received %llu",
                      in->port, c->stream, (unsigned long long)count, (unsigned long long)(c->count + n));
        return -1;
      }
      if (c->len - pos > 12) {
        jgr_error_set(err, "input port %d stream %u: bytes after the end marker", in->port, c->stream);
        return -1;
      }
      pos += 12;
      ended = 1;
      break;
    }
    if (L >= 0x80000000u) {
      jgr_error_set(err, "input port %d stream %u: invalid tuple length %u", in->port, c->stream, L);
      return -1;
    }
    if (c->len - pos - 4 < L) {
      if (4 + (size_t)L > c->cap) { /* a tuple larger than the buffer: grow to fit it */
        if (n > 0) { /* hand over the batch first: its pointers are into the old buffer */
          ctx->stats.tuples_in += n; /* per batch: per tuple it was a load-add-store in the loop */
          if (fn(arg, ctx, tuples, lens, n, err) != 0) return -1;
          c->count += n;
          n = 0;
        }
        memmove(c->buf, c->buf + pos, c->len - pos);
        c->len -= pos;
        pos = 0;
        uint8_t *nb = realloc(c->buf, 4 + (size_t)L);
        if (!nb) abort();
        c->buf = nb;
        c->cap = 4 + (size_t)L;
      }
      break;
    }
    tuples[n] = c->buf + pos + 4;
    lens[n] = L;
    pos += 4 + (size_t)L;
    if (++n == BATCH) {
      ctx->stats.tuples_in += n; /* per batch: per tuple it was a load-add-store in the loop */
      if (fn(arg, ctx, tuples, lens, n, err) != 0) return -1;
      c->count += n;
      n = 0;
    }
  }
  if (n > 0) {
    ctx->stats.tuples_in += n; /* per batch: per tuple it was a load-add-store in the loop */
    if (fn(arg, ctx, tuples, lens, n, err) != 0) return -1;
    c->count += n;
  }
  memmove(c->buf, c->buf + pos, c->len - pos);
  c->len -= pos;
  return ended;
}

static int take_error(jgr_in *in, jgr_error *err) {
  pthread_mutex_lock(&in->err_mu);
  jgr_error_set(err, "%s", in->err.message);
  pthread_mutex_unlock(&in->err_mu);
  return -1;
}

int jgr_in_run(jgr_in *in, jg_ctx *ctx, jgr_tuples_fn fn, void *arg, jgr_error *err) {
  if (in->udp) return jgr_udp_in_run(in->udp, ctx, fn, arg, err);
  worker_slot *s = &in->slots[ctx->worker];
  conn *conns = calloc(s->share ? s->share : 1, sizeof *conns);
  struct pollfd *pfds = calloc((size_t)s->share + 1, sizeof *pfds);
  size_t nconns = 0, taken = 0;
  uint32_t ended = 0;
  int rc = 0;
  while (ended < s->share) {
    /* pick up connections the acceptor dealt to us */
    pthread_mutex_lock(&s->mu);
    for (; taken < s->nqueue; taken++) {
      conn *c = &conns[nconns++];
      c->fd = s->queue[taken].fd;
      c->stream = s->queue[taken].stream;
      c->cap = RECV_BUFFER;
      c->buf = malloc(c->cap);
      ctx->stats.bytes_in += in->key ? 16 : 8; /* the header */
    }
    pthread_mutex_unlock(&s->mu);
    if (__atomic_load_n(&in->failed, __ATOMIC_ACQUIRE)) {
      rc = take_error(in, err);
      break;
    }
    size_t np = 0;
    pfds[np++] = (struct pollfd){s->wake[0], POLLIN, 0};
    for (size_t i = 0; i < nconns; i++)
      if (conns[i].fd >= 0) pfds[np++] = (struct pollfd){conns[i].fd, POLLIN, 0};
    uint64_t t0 = jgr_now_ns();
    int r = poll(pfds, np, -1);
    ctx->stats.wait_in_ns += jgr_now_ns() - t0;
    if (r < 0) {
      if (errno == EINTR) continue;
      jgr_error_set(err, "poll: %s", strerror(errno));
      rc = -1;
      break;
    }
    if (pfds[0].revents) {
      char drain[64];
      while (read(s->wake[0], drain, sizeof drain) > 0) {
      }
    }
    for (size_t i = 0, j = 1; i < nconns && rc == 0; i++) {
      conn *c = &conns[i];
      if (c->fd < 0) continue;
      short rev = pfds[j++].revents;
      if (!rev) continue;
      ssize_t k = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
      if (k < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        jgr_error_set(err, "input port %d stream %u: %s", in->port, c->stream, strerror(errno));
        rc = -1;
        break;
      }
      if (k == 0) {
        jgr_error_set(err, "input port %d stream %u: connection closed before the end marker",
                      in->port, c->stream);
        rc = -1;
        break;
      }
      c->len += (size_t)k;
      ctx->stats.bytes_in += (uint64_t)k;
      int pr = conn_parse(in, c, ctx, fn, arg, err);
      if (pr < 0) rc = -1;
      else if (pr == 1) {
        close(c->fd);
        c->fd = -1;
        ended++;
      }
    }
    if (rc) break;
  }
  for (size_t i = 0; i < nconns; i++) {
    if (conns[i].fd >= 0) close(conns[i].fd);
    free(conns[i].buf);
  }
  free(conns);
  free(pfds);
  return rc;
}

void jgr_in_free(jgr_in *in) {
  if (!in) return;
  if (in->udp) {
    jgr_udp_in_free(in->udp);
    free(in);
    return;
  }
  if (in->acceptor_started) pthread_join(in->acceptor, NULL);
  for (int w = 0; w < in->nworkers; w++) {
    close(in->slots[w].wake[0]);
    close(in->slots[w].wake[1]);
    free(in->slots[w].queue);
  }
  free(in->slots);
  jgr_error_clear(&in->err);
  free(in);
}
