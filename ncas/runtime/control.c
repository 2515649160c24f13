/* The process side of docs/nca-process-protocol.md.
 *
 * The main thread owns stdin and stdout. Between phases it executes commands; during a phase it
 * keeps polling stdin (so that end of input, i.e. a cancelled or crashed control plane, ends the
 * process at once) and a pipe on which workers signal that they finished. Commands that arrive
 * during a phase wait until it is done, except `exit`, which like end of input ends the process
 * immediately, `senders_done`, a notice the phase's UDP inputs need while they run, and `stats`,
 * answered at once with the running phase's counters so far (the control plane's live progress).
 * After a failed phase the process reports and exits without joining the other workers: they may
 * be blocked on a peer, and exiting closes every socket anyway.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "jgrt.h"

#define EXIT_PHASE_FAILED 1
#define EXIT_BAD_COMMAND 2
#define MAX_TOKENS 16
#define UDP_RCVBUF_BYTES (64 << 20) /* UDP has no flow control: room for bursts (docs/udp-transport.md) */

static pthread_mutex_t event_mu = PTHREAD_MUTEX_INITIALIZER;

void (*jgr_extra_stats)(jgr_proc *p, int phase, char *buf, size_t cap);

void jgr_event(const char *json) {
  pthread_mutex_lock(&event_mu);
  fputs(json, stdout);
  fputc('\n', stdout);
  fflush(stdout);
  pthread_mutex_unlock(&event_mu);
}

/* JSON-escape into a malloc'd buffer (inside of a string literal). */
static char *esc(const char *s) {
  size_t n = strlen(s);
  char *out = malloc(6 * n + 1);
  if (!out) abort();
  jgr_json_escape(out, s, n);
  return out;
}

void jgr_log(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *e = esc(msg);
  char *line = malloc(strlen(e) + 64);
  sprintf(line, "{\"event\":\"log\",\"message\":\"%s\"}", e);
  jgr_event(line);
  free(line);
  free(e);
}

/* phase < 0: the error is not about a phase (a bad command); "phase" is then null. */
static void error_event(int phase, const jgr_error *err) {
  char *m = esc(err->message);
  char *f = err->file ? esc(err->file) : NULL;
  size_t n = strlen(m) + (f ? strlen(f) : 0) + 160;
  char *line = malloc(n);
  int o = phase >= 0 ? snprintf(line, n, "{\"event\":\"error\",\"phase\":%d,\"message\":\"%s\"", phase, m)
                     : snprintf(line, n, "{\"event\":\"error\",\"phase\":null,\"message\":\"%s\"", m);
  if (f) o += snprintf(line + o, n - (size_t)o, ",\"file\":\"%s\"", f);
  if (err->record > 0) o += snprintf(line + o, n - (size_t)o, ",\"record\":%lld", (long long)err->record);
  snprintf(line + o, n - (size_t)o, "}");
  jgr_event(line);
  free(line);
  free(m);
  free(f);
}

static _Noreturn void fail_exit(int phase, const jgr_error *err, int code) {
  error_event(phase, err);
  _exit(code); /* no atexit/static destructors while workers may still run */
}

static _Noreturn void bad_command(const char *fmt, ...) {
  jgr_error e = {0};
  va_list ap;
  va_start(ap, fmt);
  jgr_error_vset(&e, fmt, ap);
  va_end(ap);
  fail_exit(-1, &e, EXIT_BAD_COMMAND);
}

/* ------------------------------------------------------------------ start-up */

static int parse_u32(const char *s, uint32_t max, uint32_t *out) {
  if (!*s) return -1;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    v = v * 10 + (uint64_t)(*s - '0');
    if (v > max) return -1;
  }
  *out = (uint32_t)v;
  return 0;
}

/* A stream key: exactly 16 hex digits, not all zero (zero means "no key"). */
static int parse_key(const char *s, uint64_t *out) {
  uint64_t v = 0;
  int n = 0;
  for (; *s; s++, n++) {
    int d = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
          : *s >= 'A' && *s <= 'F' ? *s - 'A' + 10 : -1;
    if (d < 0 || n >= 16) return -1;
    v = v << 4 | (uint64_t)d;
  }
  if (n != 16 || v == 0) return -1;
  *out = v;
  return 0;
}

static void bind_inputs(jgr_proc *p, const char *host) {
  for (int i = 0; i < p->ninputs; i++) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = p->inputs[i].udp ? SOCK_DGRAM : SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gai = getaddrinfo(host, "0", &hints, &res);
    if (gai != 0) bad_command("--bind %s: %s", host, gai_strerror(gai));
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    int one = 1, rcvbuf = 4 << 20;
    if (fd >= 0) {
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      /* set before listen so that accepted connections get a large window from the start */
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    }
    if (fd >= 0 && p->inputs[i].udp) { /* the kernel may refuse FORCE without CAP_NET_ADMIN */
      int big = UDP_RCVBUF_BYTES;
      if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
      /* a sender's GSO run stays one buffer, which in_udp.c cuts into its datagrams: a tenth of
       * the buffer space of the same datagrams queued one by one (docs/udp-transport.md) */
      setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one);
    }
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
        (!p->inputs[i].udp && listen(fd, SOMAXCONN) != 0))
      bad_command("cannot listen on %s: %s", host, strerror(errno));
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    p->inputs[i].listen_fd = fd;
    p->inputs[i].port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                       : ((struct sockaddr_in *)&ss)->sin_port);
  }
  char line[96 + 8 * 64] = "{\"event\":\"ready\",\"ports\":[";
  size_t o = strlen(line);
  for (int i = 0; i < p->ninputs && o + 16 < sizeof line; i++)
    o += (size_t)snprintf(line + o, sizeof line - o, "%s%d", i ? "," : "", p->inputs[i].port);
  /* "stats": this process answers the `stats` command (docs/nca-process-protocol.md, "Live
   * counters"); the control plane sends it to no process that does not say so */
  snprintf(line + o, sizeof line - o, "],\"stats\":true}");
  jgr_event(line);
}

/* ------------------------------------------------------------------ phases */

typedef struct {
  pthread_t th;
  jg_ctx *ctx;
  jgr_error err;
  int rc;
} worker_t;

static struct {
  const jgr_driver *drv;
  jgr_proc *proc;
  int phase, running, nfinished, failed_worker;
  uint64_t t0, cpu0; /* wall and process CPU clocks when the phase started */
  worker_t *workers;
  int done_pipe[2];
  pthread_mutex_t mu;
  /* the latest finished phase's totals, for a `stats` between phases; last_phase -1: none yet */
  int last_phase;
  jgr_stats last;
} ph = {.mu = PTHREAD_MUTEX_INITIALIZER, .failed_worker = -1, .last_phase = -1};

static uint64_t cpu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  jg_ctx *c = w->ctx;
  int outputs = ph.phase == ph.drv->output_phase;
  uint64_t t0 = jgr_now_ns();
  w->rc = outputs ? jgr_outputs_open(c, &w->err) : 0;
  if (w->rc == 0) w->rc = ph.drv->work(ph.proc, ph.phase, c, &w->err);
  if (w->rc == 0 && outputs) w->rc = jgr_outputs_finish(c, &w->err);
  c->stats.wall_ns = jgr_now_ns() - t0;
  pthread_mutex_lock(&ph.mu);
  ph.nfinished++;
  if (w->rc != 0 && ph.failed_worker < 0) ph.failed_worker = c->worker;
  pthread_mutex_unlock(&ph.mu);
  char b = 1;
  ssize_t r = write(ph.done_pipe[1], &b, 1);
  (void)r;
  return NULL;
}

static void start_phase(jgr_proc *p, int phase) {
  jgr_error err = {0};
  if (phase < 0 || phase >= ph.drv->nphases) {
    jgr_error_set(&err, "%s NCA has no phase %d", ph.drv->name, phase);
    fail_exit(phase, &err, EXIT_PHASE_FAILED);
  }
  if (phase == ph.drv->output_phase) {
    for (uint32_t port = 0; port < p->noutputs; port++) {
      if (p->outputs[port].ndests == 0) jgr_log("output port %u has no destination; its tuples are discarded", port);
      for (size_t d = 0; d < p->outputs[port].ndests; d++)
        if (p->outputs[port].dests[d].streams != (uint32_t)p->threads) {
          jgr_error_set(&err, "dest on output port %u has %u streams, but the NCA runs %d threads", port,
                        p->outputs[port].dests[d].streams, p->threads);
          fail_exit(phase, &err, EXIT_PHASE_FAILED);
        }
    }
  }
  ph.phase = phase;
  ph.t0 = jgr_now_ns();
  ph.cpu0 = cpu_now_ns();
  if (ph.drv->prepare && ph.drv->prepare(p, phase, &err) != 0) fail_exit(phase, &err, EXIT_PHASE_FAILED);
  ph.running = 1;
  ph.nfinished = 0;
  ph.failed_worker = -1;
  ph.workers = calloc((size_t)p->threads, sizeof *ph.workers);
  for (int w = 0; w < p->threads; w++) ph.workers[w].ctx = jgr_ctx_new(p, w);
  for (int w = 0; w < p->threads; w++)
    if (pthread_create(&ph.workers[w].th, NULL, worker_main, &ph.workers[w]) != 0) {
      jgr_error_set(&err, "cannot start worker thread %d", w);
      fail_exit(phase, &err, EXIT_PHASE_FAILED);
    }
}

/* Called when a worker signalled. Reports and exits on failure; prints `done` when all ended. */
static void check_phase(jgr_proc *p) {
  pthread_mutex_lock(&ph.mu);
  int failed = ph.failed_worker, finished = ph.nfinished;
  pthread_mutex_unlock(&ph.mu);
  if (failed >= 0) fail_exit(ph.phase, &ph.workers[failed].err, EXIT_PHASE_FAILED);
  if (finished < p->threads) return;
  jgr_stats s = {0};
  for (int w = 0; w < p->threads; w++) {
    pthread_join(ph.workers[w].th, NULL);
    const jgr_stats *x = &ph.workers[w].ctx->stats;
    s.wait_in_ns += x->wait_in_ns, s.wait_out_ns += x->wait_out_ns;
    s.tuples_in += x->tuples_in, s.bytes_in += x->bytes_in;
    s.tuples_out += x->tuples_out, s.bytes_out += x->bytes_out;
    s.rf_tested += x->rf_tested, s.rf_removed += x->rf_removed;
    s.udp_sent += x->udp_sent, s.udp_retransmitted += x->udp_retransmitted;
    s.udp_received += x->udp_received, s.udp_duplicates += x->udp_duplicates;
    s.udp_acks += x->udp_acks, s.udp_gap_reports += x->udp_gap_reports;
    jgr_ctx_free(ph.workers[w].ctx);
    jgr_error_clear(&ph.workers[w].err);
  }
  free(ph.workers);
  ph.workers = NULL;
  s.wall_ns = jgr_now_ns() - ph.t0;
  uint64_t cpu_ns = cpu_now_ns() - ph.cpu0;
  char extra[512] = "";
  if (jgr_extra_stats) jgr_extra_stats(p, ph.phase, extra, sizeof extra);
  char rf[160] = ""; /* runtime filters applied (rfilter.c, docs/runtime-filters.md) */
  if (jgr_rf_installed())
    snprintf(rf, sizeof rf, ",\"runtime_filters\":%u,\"rf_rows_tested\":%llu,\"rf_rows_removed\":%llu",
             jgr_rf_installed(), (unsigned long long)s.rf_tested, (unsigned long long)s.rf_removed);
  char udp[384] = ""; /* the UDP transport's counters (docs/udp-transport.md), for phases that used it */
  size_t uo = 0;
  if (s.udp_sent)
    uo += (size_t)snprintf(udp, sizeof udp, ",\"udp_sent\":%llu,\"udp_retransmitted\":%llu,"
                           "\"udp_retransmitted_share\":%.6f", (unsigned long long)s.udp_sent,
                           (unsigned long long)s.udp_retransmitted, (double)s.udp_retransmitted / (double)s.udp_sent);
  if (s.udp_received)
    snprintf(udp + uo, sizeof udp - uo, ",\"udp_received\":%llu,\"udp_duplicates\":%llu,\"udp_acks\":%llu,"
             "\"udp_gap_reports\":%llu", (unsigned long long)s.udp_received, (unsigned long long)s.udp_duplicates,
             (unsigned long long)s.udp_acks, (unsigned long long)s.udp_gap_reports);
  char line[1664];
  snprintf(line, sizeof line,
           "{\"event\":\"done\",\"phase\":%d,\"stats\":{\"wall_ns\":%llu,\"wait_in_ns\":%llu,"
           "\"wait_out_ns\":%llu,\"tuples_in\":%llu,\"bytes_in\":%llu,\"tuples_out\":%llu,"
           "\"bytes_out\":%llu,\"threads\":%d,\"cpu_ns\":%llu%s%s%s}}",
           ph.phase, (unsigned long long)s.wall_ns, (unsigned long long)s.wait_in_ns,
           (unsigned long long)s.wait_out_ns, (unsigned long long)s.tuples_in,
           (unsigned long long)s.bytes_in, (unsigned long long)s.tuples_out,
           (unsigned long long)s.bytes_out, p->threads, (unsigned long long)cpu_ns, extra, rf, udp);
  ph.running = 0;
  ph.last_phase = ph.phase;
  ph.last = s;
  jgr_event(line);
}

/* `stats` (docs/nca-process-protocol.md, "Live counters"): while a phase runs, its counters so far,
 * summed over the workers as they work; between phases, the latest finished phase's totals. The
 * workers keep counting while the main thread reads: each counter is an aligned 64-bit word that
 * only grows, read whole (relaxed atomic loads), so a sum may lag a worker by a few tuples but is
 * never torn. Tuples out are the ports' emit counts, which grow with every row (a worker's
 * stats.tuples_out is only added when its outputs finish). */
static void stats_event(void) {
  jgr_stats s = {0};
  int phase = ph.running ? ph.phase : ph.last_phase;
  if (ph.running) {
    for (int w = 0; w < ph.proc->threads; w++) {
      const jg_ctx *c = ph.workers[w].ctx;
      const jgr_stats *x = &c->stats;
      s.tuples_in += __atomic_load_n(&x->tuples_in, __ATOMIC_RELAXED);
      s.bytes_in += __atomic_load_n(&x->bytes_in, __ATOMIC_RELAXED);
      s.bytes_out += __atomic_load_n(&x->bytes_out, __ATOMIC_RELAXED);
      s.rf_removed += __atomic_load_n(&x->rf_removed, __ATOMIC_RELAXED);
      s.udp_sent += __atomic_load_n(&x->udp_sent, __ATOMIC_RELAXED);
      s.udp_retransmitted += __atomic_load_n(&x->udp_retransmitted, __ATOMIC_RELAXED);
      for (uint32_t port = 0; port < c->nouts; port++)
        s.tuples_out += __atomic_load_n(&c->outs[port]->count, __ATOMIC_RELAXED);
    }
    s.wall_ns = jgr_now_ns() - ph.t0;
  } else if (phase >= 0) {
    s = ph.last;
  }
  char line[640], num[16] = "null", rf[64] = "", udp[96] = "";
  if (phase >= 0) snprintf(num, sizeof num, "%d", phase);
  if (jgr_rf_installed()) snprintf(rf, sizeof rf, ",\"rf_rows_removed\":%llu", (unsigned long long)s.rf_removed);
  if (s.udp_sent) /* docs/udp-transport.md: repeats so far */
    snprintf(udp, sizeof udp, ",\"udp_sent\":%llu,\"udp_retransmitted\":%llu", (unsigned long long)s.udp_sent,
             (unsigned long long)s.udp_retransmitted);
  snprintf(line, sizeof line,
           "{\"event\":\"stats\",\"phase\":%s,\"running\":%s,\"stats\":{\"wall_ns\":%llu,"
           "\"tuples_in\":%llu,\"bytes_in\":%llu,\"tuples_out\":%llu,\"bytes_out\":%llu,\"threads\":%d%s%s}}",
           num, ph.running ? "true" : "false", (unsigned long long)s.wall_ns,
           (unsigned long long)s.tuples_in, (unsigned long long)s.bytes_in, (unsigned long long)s.tuples_out,
           (unsigned long long)s.bytes_out, ph.proc->threads, rf, udp);
  jgr_event(line);
}

/* ------------------------------------------------------------------ commands */

#define GROW(arr, n) (arr = realloc(arr, sizeof *(arr) * ((n) + 1)))

/* `senders_done PORT`: every sender of the input port has finished (docs/nca-process-protocol.md).
 * Only UDP inputs use it (in_udp.c: a stream still without END has lost it); the first notice
 * counts, a repeated one (a line seen during a phase is handled again after it) changes nothing. */
static void senders_done(jgr_proc *p, uint32_t port) {
  uint64_t none = 0;
  if (p->inputs[port].udp)
    __atomic_compare_exchange_n(&p->inputs[port].senders_done_ns, &none, jgr_now_ns(), 0, __ATOMIC_RELEASE,
                                __ATOMIC_RELAXED);
}

static int is_stats(const char *s, size_t n) { return n == 5 && memcmp(s, "stats", 5) == 0; }

/* During a phase: the commands that cannot wait for its end, among the complete lines of buf.
 * `stats` lines are answered and taken out of buf (each is answered once); the others stay, to be
 * handled (again, harmlessly) after the phase. Returns buf's new length. */
static size_t immediate_commands(jgr_proc *p, char *buf, size_t len) {
  size_t pos = 0, kept = 0; /* reading at pos; buf[0..kept) holds the lines kept so far (kept <= pos) */
  for (char *e; (e = memchr(buf + pos, '\n', len - pos)); pos = (size_t)(e - buf) + 1) {
    const char *s = buf + pos;
    size_t n = (size_t)(e - s) - (e > s && e[-1] == '\r');
    if (is_stats(s, n)) {
      stats_event();
      continue;
    }
    if (n == 4 && memcmp(s, "exit", 4) == 0) _exit(0);
    uint32_t port;
    char num[16];
    if (n > 13 && n - 13 < sizeof num && memcmp(s, "senders_done ", 13) == 0) {
      memcpy(num, s + 13, n - 13);
      num[n - 13] = 0;
      if (parse_u32(num, 1u << 30, &port) == 0 && (int)port < p->ninputs) senders_done(p, port);
    }
    size_t line = (size_t)(e - s) + 1;
    memmove(buf + kept, s, line); /* no-op until a `stats` line was taken out */
    kept += line;
  }
  memmove(buf + kept, buf + pos, len - pos); /* an incomplete last line */
  return kept + (len - pos);
}

static void handle_command(jgr_proc *p, char *line) {
  char *tok[MAX_TOKENS] = {0};
  int nt = 0;
  for (char *s = line, *sp; nt < MAX_TOKENS && s; s = sp ? sp + 1 : NULL) {
    sp = strchr(s, ' ');
    if (sp) *sp = 0;
    if (jgr_percent_decode(s) != 0) bad_command("malformed percent-encoding in command");
    tok[nt++] = s;
    if (nt == MAX_TOKENS && sp) bad_command("more than %d tokens in a command", MAX_TOKENS);
  }
  const char *cmd = tok[0];
  uint32_t a, b, c, d;
  if (nt == 1 && cmd[0] == 0) return; /* blank line */
  if (strcmp(cmd, "threads") == 0 && nt == 2) {
    if (parse_u32(tok[1], 1024, &a) || a == 0) bad_command("threads: expected 1..1024");
    p->threads = (int)a;
  } else if (strcmp(cmd, "file") == 0 && nt == 2) {
    GROW(p->files, p->nfiles);
    p->files[p->nfiles++] = strdup(tok[1]);
  } else if (strcmp(cmd, "root") == 0 && nt == 2) {
    /* the data root files are opened beneath (input_file.c); must be absolute, so that it does not
     * depend on the working directory (a spare's is the pool's) */
    if (tok[1][0] != '/') bad_command("root: expected an absolute path");
    jgr_set_root(p, tok[1]);
  } else if (strcmp(cmd, "param") == 0 && nt == 3) {
    GROW(p->param_keys, p->nparams);
    GROW(p->param_vals, p->nparams);
    p->param_keys[p->nparams] = strdup(tok[1]);
    p->param_vals[p->nparams++] = strdup(tok[2]);
  } else if (strcmp(cmd, "expect") == 0 && nt == 3) {
    if (parse_u32(tok[1], 1u << 30, &a) || (int)a >= p->ninputs) bad_command("expect: no input port %s", tok[1]);
    if (parse_u32(tok[2], 1u << 20, &b)) bad_command("expect: bad stream count %s", tok[2]);
    p->inputs[a].expected = b;
  } else if (strcmp(cmd, "key") == 0 && nt == 3) {
    /* keyed streams (docs/contract.md): only streams opening with this key are taken */
    uint64_t key;
    if (parse_u32(tok[1], 1u << 30, &a) || (int)a >= p->ninputs) bad_command("key: no input port %s", tok[1]);
    if (p->inputs[a].udp) bad_command("key: input port %s receives UDP; keys are for TCP streams", tok[1]);
    if (parse_key(tok[2], &key)) bad_command("key: expected 16 hex digits, not zero: %.32s", tok[2]);
    p->inputs[a].key = key;
  } else if (strcmp(cmd, "dest") == 0 && nt >= 6) {
    /* dest PORT HOST TCPPORT FIRST STREAMS [tcp | udp MAX_BYTES MAX_TUPLES [v2 [window N]]] [key HEX] [client MS] */
    if (parse_u32(tok[1], 1u << 30, &a) || a >= p->noutputs) bad_command("dest: no output port %s", tok[1]);
    if (parse_u32(tok[3], 65535, &b) || b == 0) bad_command("dest: bad TCP port %s", tok[3]);
    if (parse_u32(tok[4], 1u << 30, &c) || parse_u32(tok[5], 1u << 20, &d) || d == 0)
      bad_command("dest: bad stream ids %s %s", tok[4], tok[5]);
    jgr_dest dst = {.host = strdup(tok[2]), .port = strdup(tok[3]), .first_stream = c, .streams = d};
    int i = 6;
    if (i < nt && strcmp(tok[i], "tcp") == 0) {
      i++;
    } else if (i < nt && strcmp(tok[i], "udp") == 0) { /* docs/udp-transport.md; 0 = the defaults */
      uint32_t mb, mt;
      if (i + 2 >= nt || parse_u32(tok[i + 1], 65507, &mb) || parse_u32(tok[i + 2], 65535, &mt))
        bad_command("dest: bad UDP limits");
      dst.udp = 1, dst.udp_version = 1, dst.max_bytes = mb, dst.max_tuples = mt;
      i += 3;
      if (i < nt && strcmp(tok[i], "v2") == 0) { /* the receiver acknowledges (docs/udp-transport.md) */
        dst.udp_version = 2;
        i++;
        if (i < nt && strcmp(tok[i], "window") == 0) { /* the receiver's bound on datagrams in flight */
          if (i + 1 >= nt || parse_u32(tok[i + 1], 1u << 30, &dst.window_datagrams) || dst.window_datagrams == 0)
            bad_command("dest: window: expected datagrams in flight (1..%u)", 1u << 30);
          i += 2;
        }
      }
    }
    if (i + 1 < nt && strcmp(tok[i], "key") == 0) {
      if (dst.udp) bad_command("dest: keys are for TCP streams");
      if (parse_key(tok[i + 1], &dst.key)) bad_command("dest: expected 16 hex digits, not zero: %.32s", tok[i + 1]);
      i += 2;
    }
    if (i < nt && strcmp(tok[i], "client") == 0) { /* a client's receiver (out_tcp.c); 0 = never */
      if (i + 1 >= nt || parse_u32(tok[i + 1], 86400000u, &dst.client_stall_ms))
        bad_command("dest: client: expected milliseconds (0..86400000)");
      i += 2;
    }
    if (i != nt) bad_command("dest: unexpected %.32s", tok[i]);
    jgr_out_cfg *o = &p->outputs[a];
    GROW(o->dests, o->ndests);
    o->dests[o->ndests++] = dst;
  } else if (strcmp(cmd, "senders_done") == 0 && nt == 2) {
    if (parse_u32(tok[1], 1u << 30, &a) || (int)a >= p->ninputs) bad_command("senders_done: no input port %s", tok[1]);
    senders_done(p, a);
  } else if (strcmp(cmd, "rfilter") == 0 && nt == 3) { /* docs/runtime-filters.md */
    jgr_error err = {0};
    if (parse_u32(tok[1], 1000, &a)) bad_command("rfilter: bad slot %s", tok[1]);
    if (jgr_rf_install(a, tok[2], &err) != 0) bad_command("%s", err.message);
  } else if (strcmp(cmd, "stats") == 0 && nt == 1) {
    stats_event(); /* between phases: the latest finished phase's totals */
  } else if (strcmp(cmd, "execute") == 0 && nt == 2) {
    if (parse_u32(tok[1], 1000, &a)) bad_command("execute: bad phase %s", tok[1]);
    start_phase(p, (int)a);
  } else if (strcmp(cmd, "exit") == 0 && nt == 1) {
    exit(0);
  } else {
    bad_command("unknown command or wrong number of arguments: %.64s", cmd);
  }
}

/* ------------------------------------------------------------------ main loop */

int jgr_main(int argc, char **argv, const jgr_driver *drv) {
  /* a fork server returns here only in a child it forked, with that child's arguments */
  if (argc >= 2 && strcmp(argv[1], "--fork-server") == 0) jgr_fork_server(&argc, &argv);
  signal(SIGPIPE, SIG_IGN); /* a closed peer must be an error return, not a silent death */
  const char *host = NULL, *udp_inputs = NULL;
  uint32_t ninputs = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--bind") == 0 && i + 1 < argc) host = argv[++i];
    else if (strcmp(argv[i], "--inputs") == 0 && i + 1 < argc) {
      if (parse_u32(argv[++i], 64, &ninputs)) bad_command("--inputs: expected 0..64");
    } else if (strcmp(argv[i], "--udp-inputs") == 0 && i + 1 < argc) {
      udp_inputs = argv[++i]; /* input ports that receive UDP (docs/udp-transport.md) */
    } else bad_command("usage: %s --bind HOST --inputs N [--udp-inputs I,J,...] | --fork-server [ROOM]", argv[0]);
  }
  if (!host) host = "127.0.0.1";
  static jgr_proc proc;
  jgr_proc *p = &proc;
  p->threads = 1;
  p->ninputs = (int)ninputs;
  p->inputs = calloc(ninputs ? ninputs : 1, sizeof *p->inputs);
  for (char *list = udp_inputs ? strdup(udp_inputs) : NULL, *tok = list, *next; tok; tok = next) {
    next = strchr(tok, ',');
    if (next) *next++ = 0;
    uint32_t k;
    if (parse_u32(tok, 63, &k) || k >= ninputs) bad_command("--udp-inputs: no input port %s", tok);
    p->inputs[k].udp = 1;
  }
  p->noutputs = JG_QUERY.noutputs;
  p->outputs = calloc(p->noutputs ? p->noutputs : 1, sizeof *p->outputs);
  ph.drv = drv;
  ph.proc = p;
  if (pipe(ph.done_pipe) != 0) bad_command("pipe: %s", strerror(errno));
  bind_inputs(p, host);

  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    /* execute complete lines while no phase runs */
    while (!ph.running) {
      char *nl = memchr(buf, '\n', len);
      if (!nl) break;
      *nl = 0;
      size_t used = (size_t)(nl - buf) + 1;
      char *line = strdup(buf);
      memmove(buf, buf + used, len - used);
      len -= used;
      size_t ll = strlen(line);
      if (ll && line[ll - 1] == '\r') line[ll - 1] = 0;
      handle_command(p, line);
      free(line);
    }
    /* lines that came with or after `execute` and cannot wait for the phase's end */
    if (ph.running) len = immediate_commands(p, buf, len);
    struct pollfd pfd[2] = {{0, POLLIN, 0}, {ph.done_pipe[0], POLLIN, 0}};
    int r = poll(pfd, ph.running ? 2 : 1, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      _exit(EXIT_PHASE_FAILED);
    }
    if (pfd[0].revents) {
      if (len + 4096 > cap) buf = realloc(buf, cap *= 2);
      ssize_t k = read(0, buf + len, cap - len);
      if (k <= 0) {
        if (k < 0 && errno == EINTR) continue;
        _exit(0); /* end of input: the control plane is gone or cancelled us */
      }
      len += (size_t)k;
    }
    if (ph.running && pfd[1].revents) {
      char drain[64];
      ssize_t k = read(ph.done_pipe[0], drain, sizeof drain);
      (void)k;
      check_phase(p);
    }
  }
}
