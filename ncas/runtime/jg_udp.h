/* The UDP NTF transport's datagram format (docs/udp-transport.md), header only: used by the
 * runtime's UDP output and input (out_udp.c, in_udp.c) and by the switch model (p4/model/), and
 * restated by the P4 programs (p4/include/headers.p4) and the contract layer (jumpgate/contract/udp.py).
 *
 *   offset size  field (integers little-endian, as everywhere in NTF)
 *   0      4     magic "NTU1" (the last byte is the version)
 *   4      4     stream id: the sender's index among its destination's expected streams
 *   8      8     sequence number: data datagrams of a stream are 0, 1, 2, ...; an END datagram
 *                carries the number of data datagrams sent; a FLUSH carries a slot index
 *   16     2     tuples in this datagram (0 in control datagrams)
 *   18     2     flags (JG_UDP_F_*)
 *   20     4     zero
 *   24     ...   data: that many tuples, each a u32 length L then L bytes (contract §3 framing);
 *                END: u64 tuples sent, u64 datagrams a switch received from the stream (senders 0);
 *                FINISH: u64 FLUSH datagrams the controller sent.
 */
#ifndef JG_UDP_H
#define JG_UDP_H

#include <stdint.h>
#include <string.h>

#define JG_UDP_MAGIC "NTU1"
#define JG_UDP_HEADER 24u
#define JG_UDP_END_PAYLOAD 16u
#define JG_UDP_DEFAULT_MAX_BYTES 1472u /* a 1500-byte Ethernet MTU less IPv4 and UDP headers */
#define JG_UDP_MAX_BYTES 65507u        /* the largest IPv4 UDP payload */
#define JG_UDP_END_COPIES 3u           /* END datagrams are sent this many times */

#define JG_UDP_F_END 0x1u     /* end of stream */
#define JG_UDP_F_LOSS 0x2u    /* the sender saw loss upstream of it (a switch): the stream failed */
#define JG_UDP_F_FLUSH 0x4u   /* switch control: emit and clear one slot */
#define JG_UDP_F_FINISH 0x8u  /* switch control: end the switch's output stream */
#define JG_UDP_F_DISCARD 0x10u /* with FLUSH: clear the slot without emitting it */
#define JG_UDP_F_ERROR 0x20u  /* a switch forwards a datagram it could not parse to its controller */

typedef struct {
  uint32_t stream;
  uint64_t seq;
  uint16_t count;
  uint16_t flags;
} jg_udp_header;

static inline void jg_udp_put_header(uint8_t *p, uint32_t stream, uint64_t seq, uint16_t count,
                                     uint16_t flags) {
  memcpy(p, JG_UDP_MAGIC, 4);
  memcpy(p + 4, &stream, 4);
  memcpy(p + 8, &seq, 8);
  memcpy(p + 16, &count, 2);
  memcpy(p + 18, &flags, 2);
  memset(p + 20, 0, 4);
}

/* 0 when `p` (n bytes) starts with a version 1 header. */
static inline int jg_udp_get_header(const uint8_t *p, size_t n, jg_udp_header *h) {
  if (n < JG_UDP_HEADER || memcmp(p, JG_UDP_MAGIC, 4) != 0) return -1;
  memcpy(&h->stream, p + 4, 4);
  memcpy(&h->seq, p + 8, 8);
  memcpy(&h->count, p + 16, 2);
  memcpy(&h->flags, p + 18, 2);
  return 0;
}

/* ------------------------------------------------------------------ version 2: acknowledged streams
 * (docs/udp-transport.md, "Version 2"). The same 24-byte header with the magic "NTU2": data and
 * END datagrams as in version 1 (data flagged RETX when it is a repeat; the END is sent once and
 * repeated by the sender's timer until acknowledged), and ACK datagrams from the receiver back to
 * the address the stream's datagrams came from:
 *
 *   seq    cumulative: the stream's data datagrams 0 .. seq-1 have all arrived
 *   count  bytes of gap report after the header (0 .. JG_UDP_ACK_REPORT)
 *   flags  ACK, plus END once the stream is complete (its END and all its data arrived, and the
 *          tuples add up): the sender's stream is then done; or ACK with SACK, a receipt (below)
 *   20     the timestamp of the latest datagram of the stream that arrived (below), echoed
 *   24...  gap report: bit i (LSB first) of byte j says that data datagram seq + 1 + 8j + i has
 *          arrived; datagram `seq` itself has not (or the cumulative number would be larger), nor
 *          has any other whose bit is 0 below the highest bit set.
 * In version 2 data and END datagrams, the header's last 4 bytes (zero in version 1) are the
 * sender's clock when it sent that copy, in microseconds (any origin, modulo 2^32; 0 = none): the
 * echo in an ACK measures a round trip even while gaps are being repaired, when the cumulative
 * number jumps over datagrams that arrived long before.
 * Version 1 senders and receivers (the switch) are unchanged: a receiver takes both versions, a
 * sender sends version 2 only to receivers that announce it. */
#define JG_UDP_MAGIC2 "NTU2"
#define JG_UDP_F_RETX 0x40u /* version 2 data or END: a repeat of a datagram sent before */
#define JG_UDP_F_ACK 0x80u  /* version 2: an acknowledgement, receiver to sender */
/* version 2, with ACK: a receipt, "datagram `seq` has arrived" (not "all below it"), header only
 * (count 0), the timestamp of that copy echoed. A switch sends one for every data datagram it
 * takes or drops, since a pipeline cannot compute a cumulative number over gaps (docs/udp-transport.md,
 * "A switch in a version 2 path"); its END answer is an ordinary cumulative ACK with END. A sender
 * marks the one datagram acknowledged; receivers that are not senders never see it. */
#define JG_UDP_F_SACK 0x100u
/* Datagrams a sender keeps in flight towards a receiver that answers with receipts: the switch's
 * ring `seen` has this many cells per stream, and cell s mod 64 is reused by datagram s + 64 only
 * once s has been acknowledged (p4/include/jumpgate_defs.p4: JG_SEEN). The switch's endpoint
 * announces it (udp_window_datagrams; the sender's `dest ... v2 window 64`): a receipt from a
 * receiver that announced no bound fails the stream (out_udp.c). */
#define JG_UDP_SACK_WINDOW 64u
#define JG_UDP_ACK_REPORT 1024u /* gap-report bytes at most: 8192 datagrams past the cumulative number */
#define JG_UDP_STAMP_AT 20u     /* version 2: where the timestamp (and its echo in an ACK) is */

static inline void jg_udp_put_header_v(uint8_t *p, int version, uint32_t stream, uint64_t seq, uint16_t count,
                                       uint16_t flags) {
  jg_udp_put_header(p, stream, seq, count, flags);
  if (version == 2) memcpy(p, JG_UDP_MAGIC2, 4);
}

/* The transport version of a datagram (the digit after "NTU"), its header in h: 1 or 2 for the
 * versions known here, another digit for one that is not (the caller names it), -1 when the
 * datagram does not start with a header at all. */
static inline int jg_udp_get_header_v(const uint8_t *p, size_t n, jg_udp_header *h) {
  if (n < JG_UDP_HEADER || memcmp(p, "NTU", 3) != 0 || p[3] < '0' || p[3] > '9') return -1;
  memcpy(&h->stream, p + 4, 4);
  memcpy(&h->seq, p + 8, 8);
  memcpy(&h->count, p + 16, 2);
  memcpy(&h->flags, p + 18, 2);
  return p[3] - '0';
}

#endif /* JG_UDP_H */
