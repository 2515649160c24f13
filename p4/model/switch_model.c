/* The switch MODEL: a software stand-in for the P4 partial aggregator (p4/v1model, p4/tna), for
 * machines without a programmable switch. It is not an aggregator of its own design: it runs the
 * P4 pipeline's per-packet logic step for step, with the same tables (written by the plugin's
 * ModelBackend exactly as P4Runtime or BF Runtime would write them), the same registers (7 ways of
 * 32K slots, the same encodings and spills), the same hashes (CRC-32 of the key's 8 wire bytes, rotated
 * by the way's number of bytes) and the
 * same output datagrams. docs/switch.md specifies the pipeline; p4/README.md maps each step to the
 * P4 source.
 *
 * What it does not model: Ethernet/IP forwarding and everything below UDP (it receives UDP payloads
 * on sockets it binds, one per job port, where a switch matches the UDP destination port), and
 * line rate (it is one thread).
 *
 * Keeping up. A switch forwards at line rate; the model is one thread on a host, and UDP has no
 * flow control, so whatever it cannot keep up with waits in its socket's receive buffer, and what
 * does not fit there is lost (the sender's END copies, which come last, first of all). Two things
 * keep that from happening to a healthy host. Its ingress sockets take coalesced datagrams
 * (UDP_GRO): a sender's GSO burst (out_udp.c sends runs of equal datagrams of up to
 * JG_TUPLES_PER_DATAGRAM tuples that way) stays one buffer of up to 64 datagrams, which the model
 * cuts into its datagrams itself, instead of 64 buffers of ~800 bytes of kernel accounting each for
 * datagrams of 50 to 140 bytes; the same receive buffer then holds several times as many datagrams,
 * and a receive returns up to 64 of them. And it sends its own output the same way (UDP_SEGMENT):
 * runs of its output datagrams of one size towards one destination (a flush's records, one each)
 * are one send, where handing them to the kernel one by one cost the model most of its time (each
 * is routed and delivered separately; a receiver with UDP_GRO, as the runtime's UDP input, takes a
 * run whole). The datagrams on the wire are the same either way.
 *
 * Several tuples per datagram. The switch takes a data datagram's tuples one per pass of its
 * pipeline, recirculating the rest, and the records they leave gather in the datagram and leave
 * together after its last pass (docs/switch.md, "Several tuples per datagram"). The model runs the
 * passes of a datagram one after the other at once (packet, tuple_pass) with the same counters
 * and the same output datagram.
 *
 * Version 2 (acknowledged) input streams (docs/udp-transport.md, "A switch in a version 2 path").
 * The model takes both versions, stream by stream. A version 2 data datagram passes the ring `seen`
 * (jumpgate_defs.p4: one cell per sequence number modulo JG_SEEN per (job, stream)): taken before,
 * it is dropped (`repeats`); else it is marked and taken exactly as a version 1 datagram. Either
 * way its sender gets a receipt (ACK with SACK, header only, its timestamp echoed), sent from the
 * ingress port it came to back to its source, as a switch swaps the addresses and ports. A version
 * 2 END goes to the controller as ever, and is answered (ACK with END, at its number) when
 * `received`, which counts taken datagrams only, equals its number. The P4 programs do not do this
 * yet: they take version 1 only.
 *
 *   switch_model --bind HOST
 *
 * Prints {"event":"ready"}, then answers each command on standard input with one line:
 *   port                          bind a UDP socket (a job's ingress port) -> {"event":"port","port":P}
 *   unport P                      close it -> {"event":"ok"}
 *   add TABLE KEY ACTION [N=V..]  add or replace an entry -> {"event":"ok"}
 *   del TABLE KEY                 -> {"event":"ok"}
 *   write REGISTER INDEX VALUE    -> {"event":"ok"}
 *   read REGISTER INDEX COUNT     -> {"event":"values","values":[...]}
 *   fill REGISTER INDEX COUNT V   write V into COUNT cells from INDEX -> {"event":"ok"}
 * Errors: {"event":"error","message":...}. End of standard input ends the process.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../include/jumpgate_defs.p4"
#include "jg_udp.h"

#define MAX_PORTS 128
#define BATCH 64
#define SLOT 65536 /* a receive may hold a coalesced run of datagrams (UDP_GRO), up to 64 KB */
#define GSO_SEGMENTS 64 /* datagrams per GSO send: the kernel's UDP_MAX_SEGMENTS on older kernels */
#define GSO_BYTES 65000 /* and their bytes, within one IPv4 UDP payload */

/* ------------------------------------------------------------------ tables (p4/include/tables.p4) */

typedef struct {
  int valid;
  uint32_t job, tag, base, mask, in_len, flags;
  uint64_t key_null, v0_null, v1_null, cnt_null;
} job_entry; /* table job, action set_job; key: UDP destination port */

typedef struct {
  int valid;
  uint32_t dst_ip, dst_port, out_stream, ctrl_ip, ctrl_port, out_words, s0_out_null, s1_out_null;
} route_entry; /* table route, action set_route; key: job */

enum { PICK_NONE = -1 };
enum { OUT_COUNT = 0, OUT_S0 = 1, OUT_S1 = 2 };

#define V0_INT32 1u /* set_job flags */
#define V1_INT32 2u

static job_entry jobs[65536];
static route_entry routes[JG_MAX_JOBS];
static int key_select[JG_MAX_JOBS], v0_select[JG_MAX_JOBS], v1_select[JG_MAX_JOBS];
static int key_set[JG_MAX_JOBS], v0_set[JG_MAX_JOBS], v1_set[JG_MAX_JOBS];
static int out_select[JG_MAX_OUT_WORDS][JG_MAX_JOBS], out_set[JG_MAX_OUT_WORDS][JG_MAX_JOBS];

/* ------------------------------------------------------------------ registers (p4/v1model and p4/tna jumpgate_agg.p4) */

/* Per way w (docs/switch.md, "The pipeline"): kl<w> the key's first four wire bytes XOR the job's
 * tag (0: the slot is empty), kh<w> the last four, cn<w> the count, s0_<w> and s1_<w> the sums, each
 * 0 (no value yet) or sum + JG_SUM_BIAS. Five 32-bit registers: a Tofino 1 stateful ALU reads out one
 * 32-bit word per packet, and a FLUSH takes every register of its way in one pass. */
static uint32_t kl[JG_WAYS][JG_WAY_SLOTS], kh[JG_WAYS][JG_WAY_SLOTS], cn[JG_WAYS][JG_WAY_SLOTS];
static uint32_t s0r[JG_WAYS][JG_WAY_SLOTS], s1r[JG_WAYS][JG_WAY_SLOTS];
static uint32_t received[JG_STREAM_COUNTERS], out_seq[JG_MAX_JOBS], flushed[JG_MAX_JOBS];
static uint32_t bypassed[JG_MAX_JOBS], spilled[JG_MAX_JOBS];
/* tuples: input tuples taken through the table (received counts datagrams, which carry 1 ..
 * JG_TUPLES_PER_DATAGRAM of them); records: tuples in the job's output datagrams (out_seq counts
 * those datagrams, which carry a datagram's records together) */
static uint32_t tuples[JG_MAX_JOBS], records[JG_MAX_JOBS];
/* Version 2 input streams: the ring `seen` (16-bit cells, kept here in 32-bit words as every
 * register the control commands reach; jumpgate_defs.p4 says how a cell is used) and `repeats`,
 * the datagrams per job the ring dropped as taken before. `received` counts taken datagrams only. */
static uint32_t seen[JG_SEEN_CELLS], repeats[JG_MAX_JOBS];

typedef struct {
  const char *name;
  void *cells;
  uint32_t size;
} reg_desc;

#define WAY_REGS(w)                                                                               \
  {"kl" #w, kl[w], JG_WAY_SLOTS}, {"kh" #w, kh[w], JG_WAY_SLOTS}, {"cn" #w, cn[w], JG_WAY_SLOTS},         \
      {"s0_" #w, s0r[w], JG_WAY_SLOTS}, {"s1_" #w, s1r[w], JG_WAY_SLOTS}
static const reg_desc REGISTERS[] = {
    WAY_REGS(0), WAY_REGS(1), WAY_REGS(2), WAY_REGS(3), WAY_REGS(4), WAY_REGS(5), WAY_REGS(6),
    {"received", received, JG_STREAM_COUNTERS}, {"out_seq", out_seq, JG_MAX_JOBS},
    {"flushed", flushed, JG_MAX_JOBS},      {"bypassed", bypassed, JG_MAX_JOBS},
    {"spilled", spilled, JG_MAX_JOBS},      {"tuples", tuples, JG_MAX_JOBS},
    {"records", records, JG_MAX_JOBS},      {"seen", seen, JG_SEEN_CELLS},
    {"repeats", repeats, JG_MAX_JOBS},
};
#define NREGISTERS (sizeof REGISTERS / sizeof REGISTERS[0])
_Static_assert(JG_WAYS == 7, "WAY_REGS lists seven ways");
_Static_assert(JG_WAY_SLOTS == 1 << JG_SLOT_BITS && JG_TABLE_SLOTS == JG_WAYS * JG_WAY_SLOTS, "sizes");
_Static_assert(JG_SEEN == 1 << JG_SEEN_BITS && JG_SEEN_CELLS == JG_STREAM_COUNTERS * JG_SEEN, "ring sizes");
_Static_assert(JG_SEEN == JG_UDP_SACK_WINDOW, "the senders' window towards the switch is the ring's reach");

/* ------------------------------------------------------------------ the hash (docs/switch.md) */

static uint32_t crc_table[256];

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
}

/* CRC-32 (IEEE 802.3, as zlib, BMv2's crc32 and Tofino's CRC32) of the key's 8 bytes as they
 * stand in the tuple. */
static uint32_t crc32_8(const uint8_t *p) {
  uint32_t c = 0xffffffffu;
  for (int i = 0; i < 8; i++) c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

/* Way w's hash: the CRC-32 of the key's bytes rotated left by w bytes (bytes w..7, then 0..w-1),
 * which is what the P4 programs' field lists { key[63-8w:0], key[63:64-8w] } feed their CRC-32. */
static uint32_t way_hash(const uint8_t *key_wire, int w) {
  uint8_t r[8];
  for (int i = 0; i < 8; i++) r[i] = key_wire[(i + w) % 8];
  return crc32_8(r);
}

/* ------------------------------------------------------------------ output */

/* A queue of datagrams to send from one socket. Two of them: `out`, what the switch sends to the
 * job's destination and controller (records, its END, notices) from a socket of its own, and
 * `receipts`, the answers to version 2 senders (receipts and END answers), which must leave from
 * the ingress port the sender's datagram came to: a sender's socket is connected to that address
 * and takes nothing from any other (a switch swaps the addresses and ports, docs/udp-transport.md
 * "A switch in a version 2 path"). */
#define DATAGRAM_MAX (JG_UDP_HEADER + JG_TUPLES_PER_DATAGRAM * RECORD_MAX + JG_UDP_END_PAYLOAD)
#define RECORD_MAX (4 + 16 + 8 * JG_MAX_OUT_WORDS) /* a record: u32 length, null vector, key, words */
typedef struct {
  int fd;
  int gso; /* send runs of equal datagrams as one UDP GSO send (off if the kernel refuses) */
  int n;
  struct mmsghdr msgs[2 * BATCH];
  struct iovec iov[2 * BATCH];
  struct sockaddr_in addr[2 * BATCH];
  uint8_t buf[2 * BATCH][DATAGRAM_MAX];
  char ctrl[2 * BATCH][CMSG_SPACE(sizeof(uint16_t))];
} out_queue;

static out_queue out = {.fd = -1, .gso = 1}, receipts = {.fd = -1, .gso = 1};

static int same_dest(const out_queue *q, int a, int b) {
  return q->addr[a].sin_addr.s_addr == q->addr[b].sin_addr.s_addr && q->addr[a].sin_port == q->addr[b].sin_port;
}

/* Group the queued datagrams into messages: a run of datagrams of one size to one destination is
 * one message with UDP_SEGMENT (the kernel cuts it into exactly those datagrams), anything else a
 * message of its own. Returns the number of messages; first[m] is message m's first datagram. */
static int group_out(out_queue *q, int from, int *first) {
  int m = 0;
  for (int i = from; i < q->n; m++) {
    int k = 1;
    size_t size = q->iov[i].iov_len;
    while (q->gso && i + k < q->n && k < GSO_SEGMENTS && q->iov[i + k].iov_len == size && same_dest(q, i, i + k) &&
           (size_t)(k + 1) * size <= GSO_BYTES)
      k++;
    first[m] = i;
    q->msgs[m].msg_hdr = (struct msghdr){.msg_name = &q->addr[i], .msg_namelen = sizeof q->addr[i],
                                         .msg_iov = &q->iov[i], .msg_iovlen = (size_t)k};
    if (k > 1) {
      struct msghdr *h = &q->msgs[m].msg_hdr;
      h->msg_control = q->ctrl[m];
      h->msg_controllen = sizeof q->ctrl[m];
      struct cmsghdr *cm = CMSG_FIRSTHDR(h);
      cm->cmsg_level = SOL_UDP;
      cm->cmsg_type = UDP_SEGMENT;
      cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      uint16_t seg = (uint16_t)size;
      memcpy(CMSG_DATA(cm), &seg, sizeof seg);
    }
    i += k;
  }
  first[m] = q->n;
  return m;
}

static void flush_queue(out_queue *q) {
  int first[2 * BATCH + 1];
  int nmsg = group_out(q, 0, first);
  for (int at = 0; at < nmsg;) {
    int k = sendmmsg(q->fd, q->msgs + at, (unsigned)(nmsg - at), 0);
    if (k >= 0) {
      at += k;
      continue;
    }
    if (errno == EINTR || errno == ENOBUFS || errno == EAGAIN) continue; /* a port queues; it does not drop */
    if (q->gso && (errno == EINVAL || errno == EIO || errno == ENOPROTOOPT)) {
      q->gso = 0; /* no UDP GSO here: the rest one datagram per message */
      int from = first[at];
      nmsg = group_out(q, from, first);
      at = 0;
      continue;
    }
    /* like a switch port: a datagram that cannot leave is dropped (the receiver's sequence
     * numbers and END counts turn that into a failed stream; a lost receipt costs a repeat) */
    at++;
  }
  q->n = 0;
}

static void flush_out(void) {
  flush_queue(&out);
  flush_queue(&receipts);
}

static uint8_t *queue_datagram(out_queue *q, const struct sockaddr_in *to, size_t len) {
  if (q->n == 2 * BATCH) flush_queue(q);
  int i = q->n++;
  q->addr[i] = *to;
  q->iov[i] = (struct iovec){q->buf[i], len};
  return q->buf[i];
}

static uint8_t *out_datagram(uint32_t ip, uint32_t port, size_t len) {
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(ip)};
  return queue_datagram(&out, &to, len);
}

/* ------------------------------------------------------------------ the pipeline */

static uint64_t load_wire(const uint8_t *p) { /* a bit<64> field as the P4 parser extracts it */
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | p[i];
  return v;
}

static void store_le64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static int fits_value(int64_t v) { /* -2^30 < v < 2^30: a value a slot's sum can take */
  return v > -((int64_t)1 << JG_VALUE_BITS) && v < ((int64_t)1 << JG_VALUE_BITS);
}

typedef struct {
  const job_entry *job;
  const route_entry *route;
  uint32_t j;
} ctx_t;

/* A datagram's records, as the P4 programs' header stack rec<k> holds them while the datagram
 * recirculates: each pass that leaves a record pushes it to the front (push_front), so they leave
 * newest first. */
typedef struct {
  int n;
  size_t bytes;
  uint8_t rec[JG_TUPLES_PER_DATAGRAM][RECORD_MAX];
} rec_stack;

/* Push one record (a partial-state tuple of the job's output layout) onto `rs`. */
static void push_record(const ctx_t *c, rec_stack *rs, const uint8_t key_wire[8], uint8_t nulls, uint64_t count,
                        int64_t s0, int64_t s1) {
  const route_entry *r = c->route;
  size_t tlen = 16 + 8 * (size_t)r->out_words;
  memmove(rs->rec[1], rs->rec[0], (size_t)rs->n * RECORD_MAX);
  rs->n++;
  rs->bytes += 4 + tlen;
  uint32_t L = (uint32_t)tlen;
  memcpy(rs->rec[0], &L, 4);
  uint8_t *t = rs->rec[0] + 4;
  memset(t, 0, tlen);
  t[0] = nulls;
  memcpy(t + 8, key_wire, 8);
  for (uint32_t w = 0; w < r->out_words; w++) {
    int what = out_set[w][c->j] ? out_select[w][c->j] : OUT_COUNT;
    uint64_t v = what == OUT_COUNT ? count : what == OUT_S0 ? (uint64_t)s0 : (uint64_t)s1;
    store_le64(t + 16 + 8 * w, v);
  }
}

/* The datagram leaves with its records: one data datagram of the job's output stream, numbered
 * out_seq[job] (+1), its records counted in records[job]. Without records it is dropped. */
static void emit_records(const ctx_t *c, const rec_stack *rs) {
  if (rs->n == 0) return;
  const route_entry *r = c->route;
  uint8_t *d = out_datagram(r->dst_ip, r->dst_port, JG_UDP_HEADER + rs->bytes);
  jg_udp_put_header(d, r->out_stream, out_seq[c->j]++, (uint16_t)rs->n, 0);
  records[c->j] += (uint32_t)rs->n;
  size_t at = JG_UDP_HEADER, each = rs->bytes / (size_t)rs->n;
  for (int i = 0; i < rs->n; i++, at += each) memcpy(d + at, rs->rec[i], each);
}

static void to_controller(const ctx_t *c, const uint8_t *dg, size_t len, uint16_t add_flags, uint64_t rcv, int set_rcv) {
  if (len > JG_UDP_HEADER + JG_UDP_END_PAYLOAD) len = JG_UDP_HEADER + JG_UDP_END_PAYLOAD;
  uint8_t *d = out_datagram(c->route->ctrl_ip, c->route->ctrl_port, len < JG_UDP_HEADER ? JG_UDP_HEADER : len);
  memset(d, 0, len < JG_UDP_HEADER ? JG_UDP_HEADER : len);
  memcpy(d, dg, len);
  uint16_t flags;
  memcpy(&flags, d + 18, 2);
  flags |= add_flags;
  memcpy(d + 18, &flags, 2);
  if (set_rcv) memcpy(d + JG_UDP_HEADER + 8, &rcv, 8);
}

/* FLUSH: seq = way << JG_FLUSH_WAY_SHIFT | slot index in the job's block. Read and clear the slot
 * of that way; emit it when it holds a key (kl != 0) and this is not a DISCARD. */
static void flush_slot(const ctx_t *c, uint64_t seq, int discard) {
  const job_entry *jb = c->job;
  uint32_t w = (uint32_t)(seq >> JG_FLUSH_WAY_SHIFT) & 7u;
  uint32_t idx = jb->base | ((uint32_t)seq & jb->mask & (JG_WAY_SLOTS - 1));
  flushed[c->j]++;
  if (w >= JG_WAYS) return; /* no such way (the field has room for eight): nothing taken, as in the P4 programs */
  uint32_t lo = kl[w][idx], last = kh[w][idx], count = cn[w][idx], t0 = s0r[w][idx], t1 = s1r[w][idx];
  kl[w][idx] = kh[w][idx] = cn[w][idx] = s0r[w][idx] = s1r[w][idx] = 0; /* read and clear, as the P4 does */
  if (lo == 0 || discard) return;
  uint32_t first = lo ^ jb->tag;
  uint8_t key_wire[8];
  for (int b = 0; b < 4; b++) key_wire[b] = (uint8_t)(first >> (24 - 8 * b)), key_wire[4 + b] = (uint8_t)(last >> (24 - 8 * b));
  uint8_t nulls = (uint8_t)((t0 ? 0 : c->route->s0_out_null) | (t1 ? 0 : c->route->s1_out_null));
  int64_t a = t0 ? (int64_t)t0 - JG_SUM_BIAS : 0, b = t1 ? (int64_t)t1 - JG_SUM_BIAS : 0;
  rec_stack rs = {0};
  push_record(c, &rs, key_wire, nulls, count, a, b);
  emit_records(c, &rs);
}

static void finish(const ctx_t *c, const uint8_t *dg, size_t len) {
  uint64_t sent = 0;
  if (len >= JG_UDP_HEADER + 8) memcpy(&sent, dg + JG_UDP_HEADER, 8);
  const route_entry *r = c->route;
  uint8_t *d = out_datagram(r->dst_ip, r->dst_port, JG_UDP_HEADER + JG_UDP_END_PAYLOAD);
  uint16_t flags = JG_UDP_F_END | (flushed[c->j] != sent ? JG_UDP_F_LOSS : 0);
  jg_udp_put_header(d, r->out_stream, out_seq[c->j], 0, flags);
  uint64_t n = records[c->j], zero = 0;
  memcpy(d + JG_UDP_HEADER, &n, 8);
  memcpy(d + JG_UDP_HEADER + 8, &zero, 8);
}

static int64_t sext32(uint64_t v) { return (int64_t)(int32_t)(uint32_t)v; }

/* One sum's register (s0_<w> or s1_<w>) for a non-NULL value v: 0 (no value yet) becomes
 * v + JG_SUM_BIAS; otherwise it adds v when the result stays in [1, 2^31), and else leaves the slot
 * as it is and says the value must go on downstream (returns 1). */
static int add_sum(uint32_t *t, int64_t v) {
  uint32_t vb = (uint32_t)(v + JG_SUM_BIAS), vm1 = (uint32_t)(v - 1);
  if (*t == 0) {
    *t = vb;
    return 0;
  }
  if (*t + vm1 < (uint32_t)JG_SUM_SPAN) { /* the SALU's range test */
    *t += (uint32_t)v;
    return 0;
  }
  return 1;
}

/* One pass of the pipeline: the tuple `t` (after its length) through the slot table; a record it
 * leaves (a bypass, a spill) is pushed onto the datagram's records. */
static void tuple_pass(const ctx_t *c, const uint8_t *t, rec_stack *rs) {
  const job_entry *jb = c->job;
  tuples[c->j]++;
  uint64_t nulls = load_wire(t);
  int kw = key_set[c->j] ? key_select[c->j] : 0;
  int a0 = v0_set[c->j] ? v0_select[c->j] : PICK_NONE, a1 = v1_set[c->j] ? v1_select[c->j] : PICK_NONE;
  const uint8_t *key_wire = t + 8 + 8 * kw;
  uint64_t w0 = a0 == PICK_NONE ? 0 : __builtin_bswap64(load_wire(t + 8 + 8 * a0));
  uint64_t w1 = a1 == PICK_NONE ? 0 : __builtin_bswap64(load_wire(t + 8 + 8 * a1));
  int64_t v0 = jb->flags & V0_INT32 ? sext32(w0) : (int64_t)w0;
  int64_t v1 = jb->flags & V1_INT32 ? sext32(w1) : (int64_t)w1;
  int key_null = (nulls & jb->key_null) != 0, n0 = (nulls & jb->v0_null) != 0, n1 = (nulls & jb->v1_null) != 0;
  uint32_t inc = (nulls & jb->cnt_null) == 0;
  uint8_t out_nulls = (uint8_t)((key_null ? 1 : 0) | (n0 ? c->route->s0_out_null : 0) | (n1 ? c->route->s1_out_null : 0));
  if (n0) v0 = 0; /* a NULL value's bytes are zero (contract §2) */
  if (n1) v1 = 0;
  uint64_t kwv = load_wire(key_wire);
  /* kl holds the key's first four wire bytes (an integer's low-order bytes: they tell keys apart
   * the soonest), kh the last four */
  uint32_t key_hi = (uint32_t)kwv, klo = (uint32_t)(kwv >> 32) ^ jb->tag;
  /* a NULL key, or the one key whose stored first half would read as empty: on at once */
  int bypass = key_null || klo == 0;
  if (!bypass) {
    int way = -1, fresh = 0;
    uint32_t idx = 0;
    for (int w = 0; w < JG_WAYS; w++) { /* stage by stage: way w's kl, only while every earlier way missed */
      idx = jb->base | (way_hash(key_wire, w) & jb->mask & (JG_WAY_SLOTS - 1));
      if (kl[w][idx] == klo) { way = w; break; }                 /* the low half matches: this way */
      if (kl[w][idx] == 0) { kl[w][idx] = klo, way = w, fresh = 1; break; } /* empty: claimed */
    }
    if (way >= 0) {
      uint64_t spill_c = 0;
      int any = 0;
      /* the next stage: kh<way> claims the slot's last half, or checks it */
      if (fresh) kh[way][idx] = key_hi;
      else if (kh[way][idx] != key_hi) bypass = 1; /* another key with the same first half holds the slot
                                                    * (the later ways were not tried) */
      if (!bypass) {
        /* the stage after: cn<way> (the count) and the sums, for the key that holds the slot */
        uint32_t *cnt = &cn[way][idx];
        if (fresh) *cnt = inc; /* claimed: the count starts at this tuple's */
        else if (*cnt >= JG_COUNT_SPILL) spill_c = (uint64_t)*cnt + inc, *cnt = 0, any = 1;
        else *cnt += inc;
        /* a value no slot's sum can take (outside (-2^30, 2^30)) goes on like one its sum refused */
        int r0 = n0 ? 0 : !fits_value(v0) ? 1 : add_sum(&s0r[way][idx], v0);
        int r1 = n1 ? 0 : !fits_value(v1) ? 1 : add_sum(&s1r[way][idx], v1);
        if (any || r0 || r1) {
          spilled[c->j]++;
          uint8_t sn = (uint8_t)((r0 ? 0 : c->route->s0_out_null) | (r1 ? 0 : c->route->s1_out_null));
          push_record(c, rs, key_wire, sn, spill_c, r0 ? v0 : 0, r1 ? v1 : 0);
        }
        return;
      }
    }
  }
  bypassed[c->j]++;
  push_record(c, rs, key_wire, out_nulls, inc, v0, v1);
}

/* A version 2 answer to the sender of `dg` (its header), from the port it came to, back to where
 * it came from: the header with `seq`, count 0 and `flags`, the timestamp of that copy echoed. */
static void answer(const uint8_t *dg, const struct sockaddr_in *from, uint64_t seq, uint16_t flags) {
  uint8_t *d = queue_datagram(&receipts, from, JG_UDP_HEADER);
  memcpy(d, dg, JG_UDP_HEADER);
  uint16_t zero = 0;
  memcpy(d + 8, &seq, 8);
  memcpy(d + 16, &zero, 2);
  memcpy(d + 18, &flags, 2);
}

/* A version 2 data datagram's pass through the ring (jumpgate_defs.p4): 1 when it was taken
 * before (its mark is not newer than its cell's: a repeat, also one held back past a later pass
 * over the cell) and is dropped, else 0 after marking it taken. Either way its sender gets a
 * receipt: a lost receipt costs a repeat, which is dropped here and receipted again. */
static int seen_before(const ctx_t *c, const jg_udp_header *h, const uint8_t *dg, const struct sockaddr_in *from) {
  uint32_t cell = (c->j * JG_MAX_STREAMS + h->stream) * JG_SEEN + (uint32_t)(h->seq & (JG_SEEN - 1));
  uint16_t mark = (uint16_t)((h->seq >> JG_SEEN_BITS) + 1);
  answer(dg, from, h->seq, JG_UDP_F_ACK | JG_UDP_F_SACK);
  if ((int16_t)(uint16_t)(seen[cell] - mark) >= 0) {
    repeats[c->j]++;
    return 1;
  }
  seen[cell] = mark;
  return 0;
}

static void packet(uint16_t udp_port, const struct sockaddr_in *from, const uint8_t *dg, size_t len) {
  const job_entry *jb = &jobs[udp_port];
  if (!jb->valid || !routes[jb->job].valid) return; /* not a job's port: dropped */
  ctx_t c = {jb, &routes[jb->job], jb->job};
  jg_udp_header h;
  /* version 1 (the controller's datagrams, and senders that do not acknowledge) or 2 */
  int version = jg_udp_get_header_v(dg, len, &h);
  if (version != 1 && version != 2) {
    to_controller(&c, dg, len, JG_UDP_F_ERROR, 0, 0);
    return;
  }
  uint16_t retx = version == 2 ? JG_UDP_F_RETX : 0; /* a version 2 repeat is flagged so; it changes nothing here */
  if (h.flags & JG_UDP_F_END) {
    if (h.stream >= JG_MAX_STREAMS || len < JG_UDP_HEADER + JG_UDP_END_PAYLOAD) {
      to_controller(&c, dg, len, JG_UDP_F_ERROR, 0, 0);
      return;
    }
    uint32_t taken = received[c.j * JG_MAX_STREAMS + h.stream];
    to_controller(&c, dg, len, 0, taken, 1);
    /* version 2: every datagram before the END was taken: the stream is complete, and the
     * cumulative answer (ACK with END at the END's number) ends its sender's stream; otherwise
     * nothing, and the sender repeats the END while it repeats what is missing */
    if (version == 2 && taken == h.seq) answer(dg, from, h.seq, JG_UDP_F_ACK | JG_UDP_F_END);
    return;
  }
  if (h.flags & JG_UDP_F_FLUSH) {
    flush_slot(&c, h.seq, (h.flags & JG_UDP_F_DISCARD) != 0);
    return;
  }
  if (h.flags & JG_UDP_F_FINISH) {
    finish(&c, dg, len);
    return;
  }
  /* the first pass: 1 .. JG_TUPLES_PER_DATAGRAM tuples of the job's length fill the datagram (the
   * P4 programs compare the UDP length with 32 + count * (4 + in_len)) */
  size_t L = jb->in_len;
  if ((h.flags & ~retx) || h.count < 1 || h.count > JG_TUPLES_PER_DATAGRAM || h.stream >= JG_MAX_STREAMS ||
      len != JG_UDP_HEADER + (size_t)h.count * (4 + L) || L < JG_MIN_TUPLE_BYTES || L > JG_MAX_TUPLE_BYTES || L % 8) {
    to_controller(&c, dg, len, JG_UDP_F_ERROR, 0, 0);
    return;
  }
  if (version == 2 && seen_before(&c, &h, dg, from)) return;
  received[c.j * JG_MAX_STREAMS + h.stream]++;
  /* then a pass per tuple, each checking its own length, as the recirculating datagram does */
  rec_stack rs = {0};
  for (size_t i = 0; i < h.count; i++) {
    const uint8_t *at = dg + JG_UDP_HEADER + i * (4 + L);
    uint32_t Li;
    memcpy(&Li, at, 4);
    if (Li != L) {
      to_controller(&c, dg, len, JG_UDP_F_ERROR, 0, 0);
      return;
    }
    tuple_pass(&c, at + 4, &rs);
  }
  emit_records(&c, &rs);
}

/* One receive: a datagram, or with UDP_GRO a run of datagrams of `seg` bytes each (the last may be
 * shorter) as the sender's GSO send cut them; each goes through the pipeline on its own. */
static void received_run(uint16_t udp_port, const uint8_t *data, size_t len, struct msghdr *h) {
  const struct sockaddr_in *from = h->msg_name; /* a run comes from one sender (GRO keeps flows apart) */
  size_t seg = 0;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR(h, cm))
    if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
      int v;
      memcpy(&v, CMSG_DATA(cm), sizeof v);
      seg = v > 0 ? (size_t)v : 0;
    }
  if (!seg || seg >= len) {
    packet(udp_port, from, data, len);
    return;
  }
  for (size_t at = 0; at < len; at += seg) packet(udp_port, from, data + at, len - at < seg ? len - at : seg);
}

/* ------------------------------------------------------------------ control (stdin) */

static int ports_fd[MAX_PORTS], ports_num[MAX_PORTS], nports;
static const char *bind_host = "127.0.0.1";

static void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  fflush(stdout);
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  *out = strtoull(s, &end, 0);
  return errno || end == s || *end ? -1 : 0;
}

static int pick(const char *action, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(action, prefix, n) != 0) return -2;
  if (strcmp(action + n, "none") == 0) return PICK_NONE;
  if (action[n] == 'w' && action[n + 1] >= '0' && action[n + 1] < '0' + JG_MAX_IN_FIELDS && !action[n + 2])
    return action[n + 1] - '0';
  return -2;
}

static int param(char **toks, int nt, const char *name, uint64_t *out) {
  size_t n = strlen(name);
  for (int i = 0; i < nt; i++)
    if (strncmp(toks[i], name, n) == 0 && toks[i][n] == '=') return parse_u64(toks[i] + n + 1, out);
  return -1;
}

#define NEED(name, var)                                                                     \
  do {                                                                                      \
    uint64_t tmp_;                                                                          \
    if (param(toks + 4, nt - 4, name, &tmp_) != 0) return reply("{\"event\":\"error\",\"message\":\"%s: missing or bad parameter %s\"}", action, name); \
    var = tmp_;                                                                             \
  } while (0)

static void table_add(char **toks, int nt) {
  const char *table = toks[1], *action = toks[3];
  uint64_t key;
  if (parse_u64(toks[2], &key) != 0) return reply("{\"event\":\"error\",\"message\":\"bad key\"}");
  if (strcmp(table, "job") == 0 && strcmp(action, "set_job") == 0 && key < 65536) {
    job_entry e = {.valid = 1};
    NEED("job", e.job);
    NEED("tag", e.tag);
    NEED("base", e.base);
    NEED("mask", e.mask);
    NEED("in_len", e.in_len);
    NEED("flags", e.flags);
    NEED("key_null", e.key_null);
    NEED("v0_null", e.v0_null);
    NEED("v1_null", e.v1_null);
    NEED("cnt_null", e.cnt_null);
    if (e.job >= JG_MAX_JOBS) return reply("{\"event\":\"error\",\"message\":\"job out of range\"}");
    jobs[key] = e;
    return reply("{\"event\":\"ok\"}");
  }
  if (key >= JG_MAX_JOBS) return reply("{\"event\":\"error\",\"message\":\"job out of range\"}");
  if (strcmp(table, "route") == 0 && strcmp(action, "set_route") == 0) {
    route_entry e = {.valid = 1};
    NEED("dst_ip", e.dst_ip);
    NEED("dst_port", e.dst_port);
    NEED("out_stream", e.out_stream);
    NEED("ctrl_ip", e.ctrl_ip);
    NEED("ctrl_port", e.ctrl_port);
    NEED("out_words", e.out_words);
    NEED("s0_out_null", e.s0_out_null);
    NEED("s1_out_null", e.s1_out_null);
    if (e.out_words > JG_MAX_OUT_WORDS) return reply("{\"event\":\"error\",\"message\":\"out_words out of range\"}");
    routes[key] = e;
    return reply("{\"event\":\"ok\"}");
  }
  int w;
  if (strcmp(table, "key_select") == 0 && (w = pick(action, "key_")) >= 0) {
    key_select[key] = w, key_set[key] = 1;
  } else if (strcmp(table, "v0_select") == 0 && (w = pick(action, "v0_")) != -2) {
    v0_select[key] = w, v0_set[key] = 1;
  } else if (strcmp(table, "v1_select") == 0 && (w = pick(action, "v1_")) != -2) {
    v1_select[key] = w, v1_set[key] = 1;
  } else if (strncmp(table, "out", 3) == 0 && table[3] >= '0' && table[3] < '0' + JG_MAX_OUT_WORDS &&
             strcmp(table + 4, "_select") == 0) {
    int k = table[3] - '0';
    char prefix[8];
    snprintf(prefix, sizeof prefix, "out%d_", k);
    const char *what = strncmp(action, prefix, 5) == 0 ? action + 5 : "";
    int v = strcmp(what, "count") == 0 ? OUT_COUNT : strcmp(what, "s0") == 0 ? OUT_S0 : strcmp(what, "s1") == 0 ? OUT_S1 : -1;
    if (v < 0) return reply("{\"event\":\"error\",\"message\":\"table %s has no action %s\"}", table, action);
    out_select[k][key] = v, out_set[k][key] = 1;
  } else {
    return reply("{\"event\":\"error\",\"message\":\"no table %s with action %s\"}", table, action);
  }
  reply("{\"event\":\"ok\"}");
}

static void table_del(const char *table, const char *keytext) {
  uint64_t key;
  if (parse_u64(keytext, &key) != 0) return reply("{\"event\":\"error\",\"message\":\"bad key\"}");
  if (strcmp(table, "job") == 0 && key < 65536) jobs[key].valid = 0;
  else if (key >= JG_MAX_JOBS) return reply("{\"event\":\"error\",\"message\":\"job out of range\"}");
  else if (strcmp(table, "route") == 0) routes[key].valid = 0;
  else if (strcmp(table, "key_select") == 0) key_set[key] = 0;
  else if (strcmp(table, "v0_select") == 0) v0_set[key] = 0;
  else if (strcmp(table, "v1_select") == 0) v1_set[key] = 0;
  else if (strncmp(table, "out", 3) == 0 && table[3] >= '0' && table[3] < '0' + JG_MAX_OUT_WORDS) out_set[table[3] - '0'][key] = 0;
  else return reply("{\"event\":\"error\",\"message\":\"no table %s\"}", table);
  reply("{\"event\":\"ok\"}");
}

static const reg_desc *find_register(const char *name) {
  for (size_t i = 0; i < NREGISTERS; i++)
    if (strcmp(REGISTERS[i].name, name) == 0) return &REGISTERS[i];
  return NULL;
}

static void reg_access(char **toks, int nt) {
  const reg_desc *r = find_register(toks[1]);
  uint64_t idx, v;
  if (!r) return reply("{\"event\":\"error\",\"message\":\"no register %s\"}", toks[1]);
  if (parse_u64(toks[2], &idx) != 0 || parse_u64(toks[3], &v) != 0)
    return reply("{\"event\":\"error\",\"message\":\"bad index or value\"}");
  if (strcmp(toks[0], "write") == 0) {
    if (idx >= r->size) return reply("{\"event\":\"error\",\"message\":\"index out of range\"}");
    ((uint32_t *)r->cells)[idx] = (uint32_t)v;
    return reply("{\"event\":\"ok\"}");
  }
  if (idx > r->size || v > r->size - idx) return reply("{\"event\":\"error\",\"message\":\"range out of bounds\"}");
  fputs("{\"event\":\"values\",\"values\":[", stdout);
  for (uint64_t i = idx; i < idx + v; i++)
    printf("%s%u", i == idx ? "" : ",", ((uint32_t *)r->cells)[i]);
  (void)nt;
  reply("]}");
}

/* fill REGISTER INDEX COUNT VALUE: what a controller writes cell by cell (a job's ring, reset at
 * configure: 4096 cells), in one command. */
static void reg_fill(char **toks) {
  const reg_desc *r = find_register(toks[1]);
  uint64_t idx, n, v;
  if (!r) return reply("{\"event\":\"error\",\"message\":\"no register %s\"}", toks[1]);
  if (parse_u64(toks[2], &idx) != 0 || parse_u64(toks[3], &n) != 0 || parse_u64(toks[4], &v) != 0)
    return reply("{\"event\":\"error\",\"message\":\"bad index, count or value\"}");
  if (idx > r->size || n > r->size - idx) return reply("{\"event\":\"error\",\"message\":\"range out of bounds\"}");
  for (uint64_t i = idx; i < idx + n; i++) ((uint32_t *)r->cells)[i] = (uint32_t)v;
  reply("{\"event\":\"ok\"}");
}

static void add_port(void) {
  if (nports == MAX_PORTS) return reply("{\"event\":\"error\",\"message\":\"too many ports\"}");
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  int big = 64 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) != 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  int one = 1; /* coalesced runs of datagrams (header comment, "Keeping up"); without it, one by one */
  setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one);
  if (inet_pton(AF_INET, bind_host, &a.sin_addr) != 1 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return reply("{\"event\":\"error\",\"message\":\"cannot bind a UDP port on %s: %s\"}", bind_host, strerror(errno));
  }
  socklen_t sl = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &sl);
  ports_fd[nports] = fd;
  ports_num[nports++] = ntohs(a.sin_port);
  reply("{\"event\":\"port\",\"port\":%d}", ntohs(a.sin_port));
}

static void del_port(const char *text) {
  uint64_t p;
  if (parse_u64(text, &p) != 0) return reply("{\"event\":\"error\",\"message\":\"bad port\"}");
  for (int i = 0; i < nports; i++)
    if ((uint64_t)ports_num[i] == p) {
      close(ports_fd[i]);
      ports_fd[i] = ports_fd[nports - 1], ports_num[i] = ports_num[nports - 1];
      nports--;
      return reply("{\"event\":\"ok\"}");
    }
  reply("{\"event\":\"error\",\"message\":\"no port %s\"}", text);
}

static void command(char *line) {
  char *toks[32];
  int nt = 0;
  for (char *s = strtok(line, " \r"); s && nt < 32; s = strtok(NULL, " \r")) toks[nt++] = s;
  if (nt == 0) return;
  if (strcmp(toks[0], "port") == 0 && nt == 1) add_port();
  else if (strcmp(toks[0], "unport") == 0 && nt == 2) del_port(toks[1]);
  else if (strcmp(toks[0], "add") == 0 && nt >= 4) table_add(toks, nt);
  else if (strcmp(toks[0], "del") == 0 && nt == 3) table_del(toks[1], toks[2]);
  else if ((strcmp(toks[0], "write") == 0 || strcmp(toks[0], "read") == 0) && nt == 4) reg_access(toks, nt);
  else if (strcmp(toks[0], "fill") == 0 && nt == 5) reg_fill(toks);
  else reply("{\"event\":\"error\",\"message\":\"unknown command %s\"}", toks[0]);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--bind") == 0 && i + 1 < argc) bind_host = argv[++i];
  crc_init();
  out.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int big = 16 << 20;
  setsockopt(out.fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  static uint8_t bufs[BATCH][SLOT];
  static char ctrl[BATCH][CMSG_SPACE(sizeof(int))];
  static struct mmsghdr msgs[BATCH];
  static struct iovec iov[BATCH];
  static struct sockaddr_in names[BATCH]; /* the senders' addresses: where version 2 answers go */
  for (int i = 0; i < BATCH; i++) iov[i] = (struct iovec){bufs[i], SLOT};
  reply("{\"event\":\"ready\"}");
  size_t cap = 1 << 16, len = 0;
  char *cmd = malloc(cap);
  for (;;) {
    struct pollfd pfd[MAX_PORTS + 1];
    pfd[0] = (struct pollfd){0, POLLIN, 0};
    for (int i = 0; i < nports; i++) pfd[i + 1] = (struct pollfd){ports_fd[i], POLLIN, 0};
    int np = nports;
    if (poll(pfd, (nfds_t)np + 1, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    /* packets before commands: a command that follows a packet on the wire sees its effects */
    for (int i = 0; i < np; i++) {
      if (!pfd[i + 1].revents) continue;
      receipts.fd = ports_fd[i]; /* answers leave from the port the datagrams came to */
      for (int rounds = 0; rounds < 64; rounds++) {
        for (int k = 0; k < BATCH; k++)
          msgs[k].msg_hdr = (struct msghdr){.msg_name = &names[k], .msg_namelen = sizeof names[k],
                                            .msg_iov = &iov[k], .msg_iovlen = 1, .msg_control = ctrl[k],
                                            .msg_controllen = sizeof ctrl[k]};
        int n = recvmmsg(pfd[i + 1].fd, msgs, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) break;
        for (int k = 0; k < n; k++) received_run((uint16_t)ports_num[i], bufs[k], msgs[k].msg_len, &msgs[k].msg_hdr);
        flush_out();
      }
    }
    if (pfd[0].revents) {
      if (len + 4096 > cap) cmd = realloc(cmd, cap *= 2);
      ssize_t k = read(0, cmd + len, cap - len - 1);
      if (k <= 0) {
        if (k < 0 && errno == EINTR) continue;
        return 0; /* end of input: the control plane is gone */
      }
      len += (size_t)k;
      char *nl;
      while ((nl = memchr(cmd, '\n', len))) {
        *nl = 0;
        size_t used = (size_t)(nl - cmd) + 1;
        command(cmd);
        memmove(cmd, cmd + used, len - used);
        len -= used;
      }
    }
  }
}
