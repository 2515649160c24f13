/* The sender's window of a version 2 UDP stream (docs/udp-transport.md, "Version 2"): the datagrams
 * sent and not yet acknowledged, kept so that they can be sent again, and the rules that decide
 * what to send again and when. No sockets and no clock of its own (the caller passes `now`), so
 * tests drive it directly (tests/unit/test_udp_window.py loads it as a shared object).
 *
 * The window is bounded in bytes (`param udp.window_bytes`): the datagrams, headers included, are
 * copied into a ring of that size, and a sender whose next datagram does not fit waits for
 * acknowledgements. That is also the transport's flow control: a receiver that falls behind acks
 * late, and its sender waits instead of overrunning it. Slots are kept per sequence number in a
 * second ring of window_bytes / 32 entries (at most that many datagrams in flight).
 *
 * What goes again:
 *   - a datagram the receiver reports missing (a 0 in an ACK's gap report) once at least
 *     JG_WIN_REORDER later datagrams have arrived (so that mere reordering rarely costs a repeat):
 *     at once the first time, and a repeat of it only a retransmission timeout after the last (a
 *     repeat in flight is reported missing by every ACK sent before it arrives);
 *   - a datagram not acknowledged within the retransmission timeout: the smoothed round trip plus
 *     four times its variation (RFC 6298), within [rto_min, rto_max], doubled for each timeout of
 *     that datagram up to rto_max. At most `max` of them per look (jg_win_due): when many are due
 *     at once the receiver or the path is more likely slow than lossy, and a flood of repeats would
 *     only make it slower. After max_tries timeouts of one datagram the stream fails: a receiver
 *     that reports gaps is alive, so repeats for a gap report do not count.
 * Round trips are measured on the timestamp an ACK echoes (jg_udp.h); without one, on the newest
 * datagram a cumulative number acknowledges when it was sent once only (Karn's rule) and no gap
 * was known (the number then jumps over datagrams that arrived long before).
 */
#ifndef JG_UDP_WINDOW_H
#define JG_UDP_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define JG_WIN_REORDER 3u     /* later datagrams that must have arrived before a gap is repeated */
#define JG_WIN_SLOT_BYTES 32u /* window_bytes / this = slots (datagrams in flight at most) */

typedef struct {
  uint64_t off;     /* where the datagram starts, in bytes since the stream's first (mod ring size) */
  uint64_t sent_ns; /* its latest transmission */
  uint32_t len;     /* header included */
  uint16_t tries;    /* transmissions so far (saturates) */
  uint16_t timeouts; /* of them, repeats because its timeout passed (saturates) */
  uint8_t sacked;    /* the receiver reported it arrived (above the cumulative number) */
} jg_win_slot;

typedef struct jg_udp_window {
  uint8_t *ring;
  uint64_t ring_bytes;
  jg_win_slot *slot;
  uint64_t nslots; /* a power of two */
  uint64_t base;   /* the oldest datagram not acknowledged cumulatively */
  uint64_t next;   /* the next sequence number to store */
  uint64_t head, tail, skip; /* bytes in use: [head, tail); skip: bytes the reserved one skips at the ring's end */
  uint64_t end_seq;          /* the END's sequence number (the number of data datagrams) once stored */
  int has_end, done;         /* END stored; END acknowledged: the stream arrived */
  uint64_t high;             /* 1 + the highest datagram the receiver reported (0: none) */
  uint64_t srtt, rttvar, rto; /* ns; rto for a first repeat */
  uint64_t rto_min, rto_max;
  unsigned max_tries;
  int rtt_sampled;
  uint64_t sent, retransmitted; /* datagrams put on the wire, and the repeats among them */
  uint64_t max_inflight;        /* datagrams in flight at most (<= nslots; jg_win_limit) */
} jg_udp_window;

/* 0, or -1 when the memory cannot be had. */
int jg_win_init(jg_udp_window *w, uint64_t window_bytes, uint64_t rto_min_ns, uint64_t rto_max_ns,
                unsigned max_tries);
void jg_win_free(jg_udp_window *w);

/* Room for the next datagram of `len` bytes: where to write it, or NULL while the window is full. */
uint8_t *jg_win_reserve(jg_udp_window *w, uint32_t len);
/* The datagram written at the reserved place is sent now: its sequence number. */
uint64_t jg_win_commit(jg_udp_window *w, uint32_t len, int is_end, uint64_t now);
/* A stored datagram (NULL when `seq` is not in the window). */
uint8_t *jg_win_datagram(jg_udp_window *w, uint64_t seq, uint32_t *len);
/* Datagram `seq` was sent again now: because its timeout passed (`timeout`), or reported missing. */
void jg_win_resent(jg_udp_window *w, uint64_t seq, uint64_t now, int timeout);

/* An ACK (jg_udp.h): `cum`, the END flag, the gap report, and the round trip its echoed timestamp
 * measures (0: none). Fills out[0 .. return) with the datagrams to send again now (at most `max`).
 * Returns -1 for an acknowledgement of what was never sent (a cumulative number past the datagrams
 * sent, an END acknowledged before it was sent or at another number): the caller fails the
 * stream. An ACK older than what is known is harmless. */
int jg_win_ack(jg_udp_window *w, uint64_t cum, int end, const uint8_t *report, uint32_t report_bytes,
               uint64_t rtt_ns, uint64_t now, uint64_t *out, int max);

/* A receipt (jg_udp.h, flag SACK): datagram `seq` alone has arrived. It is marked acknowledged, and
 * the cumulative base moves over every acknowledged datagram at its base (freeing them); then, as
 * for an ACK's gap report, the datagrams below the highest one acknowledged by at least
 * JG_WIN_REORDER and not acknowledged themselves go again (out[0 .. return), at most `max`). A
 * receipt for what is already acknowledged is harmless (a repeat's, or one that was reordered).
 * Returns -1 for a receipt of a datagram that was never sent, or of the END: the caller fails the
 * stream. */
int jg_win_sack(jg_udp_window *w, uint64_t seq, uint64_t rtt_ns, uint64_t now, uint64_t *out, int max);

/* Keep at most `datagrams` in flight (0: as many as the window's slots hold). Towards a receiver
 * that deduplicates with a ring of sequence numbers (a switch: JG_UDP_SACK_WINDOW cells per
 * stream), datagram s + n may leave only once s has been acknowledged. */
void jg_win_limit(jg_udp_window *w, uint64_t datagrams);

/* The datagrams whose retransmission timeout has passed, oldest first (at most `max` into out).
 * Returns how many, or -1 when one of them has already timed out max_tries times (*failed is its
 * number). */
int jg_win_due(jg_udp_window *w, uint64_t now, uint64_t *out, int max, uint64_t *failed);

/* The timeout of a datagram that timed out `timeouts` times already (backed off), in ns. */
uint64_t jg_win_rto(const jg_udp_window *w, unsigned timeouts);

/* Datagrams in flight (not acknowledged). */
static inline uint64_t jg_win_inflight(const jg_udp_window *w) { return w->next - w->base; }

#ifdef __cplusplus
}
#endif
#endif /* JG_UDP_WINDOW_H */
