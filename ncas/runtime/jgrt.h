/* Jumpgate software-NCA runtime: internal interface shared by the runtime's own files and the
 * NCA drivers (scan_json.cpp, ntf_relay.c). Generated query code never includes this header;
 * it only sees jg.h.
 *
 * Shape of a process: a driver (one per NCA kind) provides `main`, which calls jgr_main() with a
 * jgr_driver. jgr_main speaks the control protocol (docs/nca-process-protocol.md) and, for every
 * `execute PHASE`, starts `threads` workers. Each worker gets its own jg_ctx (scratch memory,
 * output senders, counters) and runs driver->work(); the runtime connects the outputs before and
 * sends the end markers after.
 */
#ifndef JGRT_H
#define JGRT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jg.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define JGR_LIKELY(x) __builtin_expect(!!(x), 1)
#define JGR_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define JGR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define JGR_LIKELY(x) (x)
#define JGR_UNLIKELY(x) (x)
#define JGR_PRINTF(a, b)
#endif

/* ------------------------------------------------------------------ errors and stats */

/* What a failed phase reports: the `error` event's message, and file/record for bad data. */
typedef struct {
  char message[1024];
  char *file;     /* malloc'd path or NULL */
  int64_t record; /* 1-based line/record number, 0 = none */
} jgr_error;

void jgr_error_set(jgr_error *e, const char *fmt, ...) JGR_PRINTF(2, 3);
void jgr_error_vset(jgr_error *e, const char *fmt, va_list ap);
void jgr_error_set_file(jgr_error *e, const char *path, int64_t record);
void jgr_error_clear(jgr_error *e);

/* Counters and timers of one worker; summed into the `done` event's stats. */
typedef struct {
  uint64_t wall_ns, wait_in_ns, wait_out_ns;
  uint64_t tuples_in, bytes_in, tuples_out, bytes_out;
  /* runtime filters (jg_rf_test, docs/runtime-filters.md): rows tested, rows removed */
  uint64_t rf_tested, rf_removed;
  /* UDP (docs/udp-transport.md): datagrams sent (repeats included) and the repeats among them;
   * datagrams received (duplicates included), the duplicates, the acknowledgements sent and those
   * of them that reported missing datagrams */
  uint64_t udp_sent, udp_retransmitted;
  uint64_t udp_received, udp_duplicates, udp_acks, udp_gap_reports;
} jgr_stats;

uint64_t jgr_now_ns(void); /* CLOCK_MONOTONIC */

/* ------------------------------------------------------------------ process configuration */

typedef struct {
  char *host;
  char *port; /* service text for getaddrinfo */
  uint32_t first_stream, streams;
  /* UDP transport (docs/udp-transport.md): `dest ... udp MAX_BYTES MAX_TUPLES [v2 [window N]]`; 0 = TCP */
  uint8_t udp;
  uint8_t udp_version;            /* 1, or 2 with `v2` (the receiver acknowledges) */
  uint32_t max_bytes, max_tuples; /* 0 = the defaults */
  /* version 2, `window N`: the receiver's bound on data datagrams in flight per stream (a switch's
   * ring of sequence numbers: JG_UDP_SACK_WINDOW); 0 = none announced, udp.window_bytes alone */
  uint32_t window_datagrams;
  /* Keyed TCP stream (docs/contract.md, "Keyed streams between NCAs"): `dest ... key HEX`;
   * 0 = a plain NTF1 stream. */
  uint64_t key;
  /* A client's receiver (docs/nca-process-protocol.md, "Client destinations"): `dest ... client MS`
   * fails the stream when the client takes no byte for MS ms while there is data for it; 0 = an
   * NCA (whose slowness is backpressure) or never. TCP only: a UDP sender never waits. */
  uint32_t client_stall_ms;
} jgr_dest;

typedef struct {
  jgr_dest *dests;
  size_t ndests;
} jgr_out_cfg;

typedef struct {
  int listen_fd;
  int port;          /* the kernel-chosen TCP port, printed in `ready` */
  uint32_t expected; /* from `expect`; 0 = not configured */
  uint8_t udp;       /* --udp-inputs: listen_fd is a bound UDP socket and `port` its UDP port */
  /* from `key PORT HEX`: every stream must open with the keyed header carrying this key, and
   * connections that do not are closed and ignored; 0 = plain NTF1 streams */
  uint64_t key;
  /* from `senders_done PORT`: when the control plane said that every sender of this port has
   * finished (jgr_now_ns; 0 = not yet). Set by the main thread, also during a phase, and read by
   * the UDP input's workers (atomically): a stream still without END then has lost it. */
  uint64_t senders_done_ns;
} jgr_in_cfg;

typedef struct jgr_proc {
  int threads;
  char **files; /* `file` paths as sent: relative to `root` when there is one */
  size_t nfiles;
  /* `root PATH` (docs/nca-process-protocol.md): the data root every file is opened beneath
   * (jgr_open_input); NULL: none was sent. root_fd is its directory, opened when the command came,
   * or -1 with root_errno saying why it could not be. */
  char *root;
  int root_fd, root_errno;
  char **param_keys, **param_vals;
  size_t nparams;
  jgr_in_cfg *inputs;
  int ninputs;
  jgr_out_cfg *outputs; /* JG_QUERY.noutputs entries */
  uint32_t noutputs;
  void *driver_state; /* owned by the driver, set in prepare() */
} jgr_proc;

/* Value of the last `param KEY VALUE` with that key, or NULL. */
const char *jgr_param(const jgr_proc *p, const char *key);
/* Integer param with a default; returns -1 and fills err when it is not a valid integer in range. */
int jgr_param_u64(const jgr_proc *p, const char *key, uint64_t dflt, uint64_t min, uint64_t max,
                  uint64_t *out, jgr_error *err);

/* ------------------------------------------------------------------ runtime filters (rfilter.c) */

/* `rfilter SLOT HEX` (docs/nca-process-protocol.md): install the runtime filter blob (jg_rfilter.h)
 * for slot SLOT of this NCA's generated code; `rfilter SLOT none` clears it. 0, or -1 with err. */
int jgr_rf_install(uint32_t slot, const char *hex, jgr_error *err);
/* Slots with a filter installed (for the `done` stats); 0 when the NCA has none. */
uint32_t jgr_rf_installed(void);
/* A driver's early test (the columnar scans) of a tile of rows[0..m) (`stride` jg_val apart)
 * whose key columns (JG_QUERY.rf_keys; the rest may be unset) are set: keep[0..m) gets the
 * indexes of the rows that pass every installed filter, in order, and their number is returned,
 * the rows counted as jg_rf_test counts them. Each filter makes one pass over the tile (up to
 * JGR_RF_TILE_MAX rows at a time): the keys' hashes, then the Bloom blocks fetched some rows
 * ahead (a row's block is a cache miss, and a row at a time waits for each in turn), then the
 * kept rows compacted without a branch per row. A driver that tested rows so sets
 * ctx->rf_pretested while the row function runs on them, and jg_rf_test then keeps them without
 * testing or counting them again. */
#define JGR_RF_TILE_MAX 1024 /* rows a pass takes at a time (its hashes stay in L1) */
/* Filters whose bit is set in `skip` are not applied (the driver has tested them another way). */
int jgr_rf_tile(jg_ctx *ctx, const jg_val *rows, size_t stride, int m, uint32_t *keep, uint32_t skip);
/* The filter installed in `slot` (JG_QUERY's numbering), or NULL: for a driver that tests a
 * filter on its own representation of the keys (the columnar scans' integer keys, on the Arrow
 * values), hashing them as jg_rf_test does and counting the rows in ctx->stats as it counts. */
struct jg_rfilter;
const struct jg_rfilter *jgr_rf_slot(uint32_t slot);

/* ------------------------------------------------------------------ input files (input_file.c) */

/* `root PATH`: open the data root the files are relative to. */
void jgr_set_root(jgr_proc *p, const char *path);
/* Open the input file `path` (one of p->files) for reading: the only way a driver may open one.
 * With a root, beneath it (openat2 RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS: a symlink leading
 * outside the root is refused); without one, by the path as given, following no symlink. Returns
 * an O_RDONLY | O_CLOEXEC descriptor of a regular file, or -1 with err filled: a message naming
 * the file and the reason, and the file. Thread-safe. */
int jgr_open_input(const jgr_proc *p, const char *path, jgr_error *err);

/* ------------------------------------------------------------------ drivers */

typedef struct {
  const char *name;
  int nphases;      /* phases 0 .. nphases-1 */
  int output_phase; /* the phase whose workers connect and write the output ports */
  /* Main thread, before the workers of `phase` start. May be NULL. */
  int (*prepare)(jgr_proc *p, int phase, jgr_error *err);
  /* Body of one worker (ctx knows its index). Returns 0, or -1 with err filled. */
  int (*work)(jgr_proc *p, int phase, jg_ctx *ctx, jgr_error *err);
} jgr_driver;

/* Optional, set by a driver's main before jgr_main: called on the main thread after every worker
 * of a successful `phase` ended, it writes extra keys of the `done` event's stats to buf as
 * `,"key":number` pairs (NUL-terminated, fewer than cap bytes). */
extern void (*jgr_extra_stats)(jgr_proc *p, int phase, char *buf, size_t cap);

/* The process: parse arguments, bind inputs, print ready, serve commands until stdin closes. */
int jgr_main(int argc, char **argv, const jgr_driver *driver);

/* `BINARY --fork-server [ROOM]` (fork_server.c): serve fork requests on stdin, a SOCK_SEQPACKET
 * socket; ROOM, any text, reserves room for the children's command lines.
 * Returns only in a forked child, with *argc and *argv replaced by the child's; exits otherwise. */
void jgr_fork_server(int *argc, char ***argv);

/* Print one event line on stdout (thread-safe). `json` is a complete JSON object. */
void jgr_event(const char *json);
/* {"event":"log","message":...} */
void jgr_log(const char *fmt, ...) JGR_PRINTF(1, 2);

/* ------------------------------------------------------------------ per-worker context */

struct jg_out {
  jg_ctx *ctx;
  int port;
  int *fds; /* one connection per destination; identical bytes go to each */
  char **names;
  size_t nfds;
  uint8_t *buf; /* tuples batched here: u32 length + bytes, flushed when full */
  size_t cap, used;
  uint64_t count;
  uint8_t *junk; /* where jg_emit points after a failure, so the row function can still write */
  size_t junk_cap;
  struct jgr_udp_out *udp; /* the port's UDP destinations (out_udp.c); NULL when it has none */
};

/* Bits of jg_ctx.flags: checked once per row after the row function returns. */
#define JGR_FAILED 1u     /* jg_fail was called */
#define JGR_OUT_FAILED 2u /* an output send failed or jg_emit was misused; see out_error */

struct jg_ctx {
  jgr_proc *proc;
  int worker;
  unsigned flags;
  /* scratch arena: one block reused per row; overflow blocks are freed at reset */
  char *scratch;
  size_t scratch_cap, scratch_used;
  void *scratch_more; /* linked list of overflow blocks */
  size_t scratch_more_bytes;
  jg_out **outs;
  uint32_t nouts;
  jg_out *discard; /* handed out for a port that does not exist (a generated-code bug) */
  char fail_msg[512];
  jgr_error out_error;
  jgr_stats stats;
  /* the current input tuple of an NTF-reading driver (jg_input_tuple); NULL otherwise */
  const uint8_t *in_tuple;
  uint32_t in_len;
  /* the driver already tested the rows the row function now runs on (jgr_rf_tile) */
  int rf_pretested;
  /* A shared scan's member (shared_scan.cpp) sees its own message numbers and runtime filter
   * slots from 0: these are added to what its row function asks for. 0 for every other ctx. */
  uint32_t msg_base, rf_base;
};

jg_ctx *jgr_ctx_new(jgr_proc *p, int worker);
/* A member's view of worker `parent`'s process (shared_scan.cpp): its own scratch, failure and
 * output ports `port_base` .. `port_base + nports - 1` of the process, numbered from 0. */
jg_ctx *jgr_ctx_view(const jg_ctx *parent, uint32_t port_base, uint32_t nports, uint32_t msg_base, uint32_t rf_base);
void jgr_ctx_free(jg_ctx *c);
/* Whether the worker contexts own the process's output ports (1), or the query's member views do
 * (0: a shared scan, which opens and ends each member's ports itself). Defined weak as 1 in ctx.c;
 * shared_scan.cpp overrides it. */
extern const int jgr_worker_outputs;
void jgr_scratch_compact(jg_ctx *c);

static inline void jgr_scratch_reset(jg_ctx *c) {
  if (JGR_UNLIKELY(c->scratch_more != NULL)) jgr_scratch_compact(c);
  c->scratch_used = 0;
}

/* Run the query's row function on one row. Returns 0, or -1 when the row failed (jg_fail) or an
 * output failed; then jgr_row_error() describes it. */
static inline int jgr_call_row(jg_ctx *c, const jg_val *row) {
  jgr_scratch_reset(c);
  int r = JG_QUERY.row(c, row);
  if (JGR_UNLIKELY(r != JG_ROW_OK || c->flags != 0)) return -1;
  return 0;
}
void jgr_row_error(jg_ctx *c, jgr_error *err);

/* Run the query's optional batch function (JG_QUERY.rows) on `n` consecutive rows; as jgr_call_row. */
static inline int jgr_call_rows(jg_ctx *c, const jg_val *rows, uint32_t n) {
  jgr_scratch_reset(c);
  int r = JG_QUERY.rows(c, rows, n);
  if (JGR_UNLIKELY(r != JG_ROW_OK || c->flags != 0)) return -1;
  return 0;
}

/* End of this worker's input: run the query's optional `finish` (an aggregation emits its groups
 * there). Returns 0, or -1 with err filled. Every driver calls it once per worker after its last
 * row. */
static inline int jgr_call_finish(jg_ctx *c, jgr_error *err) {
  if (!JG_QUERY.finish) return 0;
  jgr_scratch_reset(c);
  if (JGR_UNLIKELY(JG_QUERY.finish(c) != JG_ROW_OK || c->flags != 0)) {
    jgr_row_error(c, err);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------ TCP output (contract §3) */

/* Connect every output port of this worker to each of its destinations (retrying up to 10 s),
 * stream id first_stream + worker, and write the NTF1 headers. */
int jgr_outputs_open(jg_ctx *c, jgr_error *err);
/* Flush, write the end markers (u32 0, u64 count), close. */
int jgr_outputs_finish(jg_ctx *c, jgr_error *err);
/* Close every connection without an end marker: the receivers see their streams break. */
void jgr_outputs_abort(jg_ctx *c);

/* ------------------------------------------------------------------ TCP input (contract §3) */

typedef struct jgr_in jgr_in;
/* Called with a batch of complete tuples (pointers valid during the call only). Return 0, or -1
 * with err filled to fail the phase. */
typedef int (*jgr_tuples_fn)(void *arg, jg_ctx *ctx, const uint8_t *const *tuples,
                             const uint32_t *lens, size_t n, jgr_error *err);

/* Start accepting the `expected` streams of input port `port` (an acceptor thread). Accepted
 * streams are dealt to `nworkers` workers in accept order. */
jgr_in *jgr_in_start(jgr_proc *p, int port, int nworkers, jgr_error *err);
/* Worker `ctx->worker`: read its share of the streams to their end markers, calling fn. */
int jgr_in_run(jgr_in *in, jg_ctx *ctx, jgr_tuples_fn fn, void *arg, jgr_error *err);
/* After all workers returned. */
void jgr_in_free(jgr_in *in);

/* ------------------------------------------------------------------ UDP transport (docs/udp-transport.md)
 * The same output and input abstractions as TCP: a `dest ... udp` destination gets the tuples a
 * port's buffer holds, cut into datagrams (out_udp.c); an input port started with --udp-inputs
 * receives datagrams of its `expect`ed streams (in_udp.c). jgr_outputs_* and jgr_in_* dispatch, so
 * drivers do not know which transport they use. With `param udp.dpdk EAL-ARGS` both sides use DPDK
 * (dpdk_io.c) when the binary was linked with it. */

struct jgr_udp_out;
/* Open the UDP destination `d` of port `o` with stream id `stream` (a connected socket, or DPDK). */
int jgr_udp_open(jg_out *o, const jgr_dest *d, uint32_t stream, jgr_error *err);
/* Send the port's buffered records (u32 length + tuple, back to back) to every UDP destination. */
int jgr_udp_send(jg_out *o, const uint8_t *records, size_t n);
/* Send the end-of-stream datagrams (with the port's tuple count); for version 2 streams, wait
 * until the receivers have acknowledged them whole. */
int jgr_udp_finish(jg_out *o, jgr_error *err);
void jgr_udp_free(jg_out *o);

struct jgr_udp_in;
struct jgr_udp_in *jgr_udp_in_start(jgr_proc *p, int port, int nworkers, jgr_error *err);
int jgr_udp_in_run(struct jgr_udp_in *in, jg_ctx *ctx, jgr_tuples_fn fn, void *arg, jgr_error *err);
void jgr_udp_in_free(struct jgr_udp_in *in);

/* DPDK (dpdk_io.c, linked only into binaries built with it): NULL when absent. */
typedef struct jgr_dpdk_ops {
  /* Initialise EAL and the port once per process from `param udp.dpdk` (EAL arguments). */
  int (*init)(jgr_proc *p, jgr_error *err);
  /* Transmit UDP payloads to host:port on this worker's TX queue: datagram i is the 24-byte
   * header hdrs[i] followed by body_lens[i] bytes at bodies[i]. Returns 0 or -1 (errno). */
  void *(*tx_open)(jgr_proc *p, int worker, const char *host, const char *port, jgr_error *err);
  int (*tx_send)(void *tx, const uint8_t *const *hdrs, const uint8_t *const *bodies,
                 const uint32_t *body_lens, size_t n);
  void (*tx_close)(void *tx);
  /* Receive UDP payloads addressed to `udp_port`: fills up to `max` (pointer, length) pairs and
   * returns how many (0 after a short poll); `jgr_dpdk_ops.rx_release` frees them. */
  int (*rx_burst)(int udp_port, const uint8_t **data, uint32_t *lens, void **bufs, int max);
  void (*rx_release)(void **bufs, int n);
} jgr_dpdk_ops;
extern const jgr_dpdk_ops *jgr_dpdk;

/* ------------------------------------------------------------------ NTF decoding (contract §2) */

typedef struct {
  uint8_t type; /* enum jg_type */
  uint32_t offset;
  uint32_t null_bit;
} jgr_ntf_field;

typedef struct {
  jgr_ntf_field *fields;
  uint32_t nfields;
  uint32_t null_bytes;
  uint32_t fixed_size;
} jgr_ntf_layout;

/* The contract §2 layout of a schema given as columns (in field order). */
int jgr_ntf_layout_from_columns(jgr_ntf_layout *l, const jg_column *cols, uint32_t n);
void jgr_ntf_layout_free(jgr_ntf_layout *l);
/* Decode one field of a tuple `len` bytes long whose fixed part is known to be complete (the
 * caller checked len >= fixed_size); strings point into the tuple. Returns 0, or -1 with *why set
 * when a string points outside the tuple. Inline: it is the inner loop of every NTF consumer. */
static inline int jgr_ntf_decode_field(const jgr_ntf_field *f, const uint8_t *t, uint32_t len, jg_val *v,
                                       const char **why) {
  v->null = (t[f->null_bit >> 3] >> (f->null_bit & 7)) & 1;
  v->v.i = 0;
  if (v->null) return 0;
  const uint8_t *p = t + f->offset;
  switch (f->type) {
    case JG_BOOLEAN: v->v.i = p[0] != 0; break;
    case JG_INT32:
    case JG_DATE: {
      int32_t x;
      memcpy(&x, p, 4);
      v->v.i = x;
      break;
    }
    case JG_STRING: {
      uint32_t h[2]; /* offset, length */
      memcpy(h, p, 8);
      if (JGR_UNLIKELY(h[0] > len || h[1] > len - h[0])) {
        *why = "string field points outside the tuple";
        return -1;
      }
      v->v.s.p = (const char *)t + h[0];
      v->v.s.n = h[1];
      break;
    }
    case JG_DECIMAL128: {
      __int128 w; /* 16 bytes, little-endian two's complement (x86-64's own order) */
      memcpy(&w, p, 16);
      v->v.w = w;
      break;
    }
    default: memcpy(&v->v.i, p, 8); break; /* int64, decimal, float64 (the same 8 bytes) */
  }
  return 0;
}
/* Decode one tuple into row[0 .. nfields-1]; strings point into the tuple. Returns 0, or -1 with
 * *why set when the tuple is malformed (too short, string out of bounds). */
int jgr_ntf_decode(const jgr_ntf_layout *l, const uint8_t *t, uint32_t len, jg_val *row,
                   const char **why);
/* The same for the `n` listed fields only, into row[field index] (the fields some generated
 * function reads; the join's probe loop, hence inline). */
static inline int jgr_ntf_decode_fields(const jgr_ntf_layout *l, const uint32_t *fields, uint32_t n,
                                        const uint8_t *t, uint32_t len, jg_val *row, const char **why) {
  if (JGR_UNLIKELY(len < l->fixed_size)) {
    *why = "tuple shorter than the layout's fixed size";
    return -1;
  }
  for (uint32_t k = 0; k < n; k++)
    if (JGR_UNLIKELY(jgr_ntf_decode_field(&l->fields[fields[k]], t, len, &row[fields[k]], why) != 0)) return -1;
  return 0;
}

/* ------------------------------------------------------------------ value parsing (JSON input)
 * Own strict parsers rather than expr_support.c's, so that the scan's behaviour on input data is
 * fixed here, next to the contract text it implements. Return 0 on success. */

/* [+-]digits[.digits][(e|E)[+-]digits] (at least one digit), exact, rounded half away from zero
 * to `scale`; -1 = not a number, -2 = does not fit `precision` digits. */
int jgr_parse_decimal(const char *p, size_t n, int precision, int scale, int64_t *out);
/* The same for wide decimals (19..38 digits). */
int jgr_parse_decimal128(const char *p, size_t n, int precision, int scale, __int128 *out);
/* YYYY-MM-DD with a valid month and day; days since 1970-01-01. */
int jgr_parse_date(const char *p, size_t n, int64_t *days);
int64_t jgr_days_from_civil(int64_t y, unsigned m, unsigned d);

/* ------------------------------------------------------------------ small helpers */

/* Append `s` (n bytes) to `out` as the inside of a JSON string: escapes quotes, backslashes and
 * control characters, replaces invalid UTF-8 with U+FFFD. out must hold 6*n+1 bytes. */
size_t jgr_json_escape(char *out, const char *s, size_t n);
/* Decode %XX escapes in place; returns -1 on a malformed escape. */
int jgr_percent_decode(char *s);
/* Blocking send of all n bytes (MSG_NOSIGNAL); returns 0 or -1 with errno. */
int jgr_send_all(int fd, const uint8_t *p, size_t n);
/* Count '\n' in the bytes [0, offset) of the open file `fd` (read with pread): the 1-based line
 * number of `offset` minus 1. Used only when reporting an error, never on the hot path. */
int64_t jgr_count_newlines(int fd, uint64_t offset);

#ifdef __cplusplus
}
#endif
#endif /* JGRT_H */
