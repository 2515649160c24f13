/* Sizes and constants of the switch aggregator, in one file shared by everything that must agree
 * on them: both P4 programs (#include), the switch model (p4/model/switch_model.c includes this
 * very file: it holds only #defines and comments, which C reads alike), and the plugin
 * (jumpgate/ncas/switch/defs.py parses it). tests/unit/test_p4.py checks that they do.
 * docs/switch.md explains every one of them. */
#ifndef JUMPGATE_DEFS_P4
#define JUMPGATE_DEFS_P4

/* The register hash table: JG_WAYS ways, each its own register arrays in its own MAU stages and its
 * own hash of the key (CRC-32 of the key's 8 bytes rotated by the way's number of bytes), each of
 * JG_WAY_SLOTS slots. A key tries way 0, 1, .. and stays in the first that holds it or has room.
 * Jobs lease an aligned power-of-two block of slot indices, the same block in every way. Seven ways,
 * not eight: the eighth's five register arrays are what Tofino 1 needed for the ring `seen` below
 * (docs/switch.md, "Does it fit one Tofino pipe?"); seven still project 55.9x at sf 100. */
#define JG_WAYS 7
#define JG_WAY_SLOTS 32768
#define JG_SLOT_BITS 15
#define JG_TABLE_SLOTS 229376        /* JG_WAYS * JG_WAY_SLOTS */
#define JG_BLOCK_SLOTS 512           /* the smallest lease, per way */
#define JG_MAX_JOBS 64               /* JG_WAY_SLOTS / JG_BLOCK_SLOTS: job numbers 0 .. 63 */
#define JG_FLUSH_WAY_SHIFT 16        /* a FLUSH's seq: way << 16 | slot index in the job's block */

/* Per-job counters: one per (job, input stream). */
#define JG_MAX_STREAMS 64
#define JG_STREAM_COUNTERS 4096      /* JG_MAX_JOBS * JG_MAX_STREAMS */

/* Version 2 (acknowledged) input streams (docs/udp-transport.md, "A switch in a version 2 path"):
 * register `seen`, a ring of JG_SEEN 16-bit cells per (job, stream), at (job * JG_MAX_STREAMS +
 * stream) * JG_SEEN + seq mod JG_SEEN. Data datagram seq's mark is (seq >> JG_SEEN_BITS) + 1
 * modulo 2^16, the ring's pass over the stream counted from 1 (0 = empty: older than any pass).
 * Senders keep at most JG_SEEN datagrams in flight towards the switch (jg_udp.h:
 * JG_UDP_SACK_WINDOW): seq + JG_SEEN leaves only once every datagram up to seq was acknowledged,
 * that is taken. So a datagram whose mark is not newer than its cell's, (int16)(cell - mark) >= 0,
 * was taken before, even when a held-back repeat arrives after a later pass took the cell: it is
 * dropped (counted in `repeats` per job). Otherwise the cell takes the mark and it is taken. One
 * subtraction and its sign: what a stateful ALU's condition computes. */
#define JG_SEEN 64
#define JG_SEEN_BITS 6               /* log2(JG_SEEN) */
#define JG_SEEN_CELLS 262144         /* JG_STREAM_COUNTERS * JG_SEEN */
/* Receipts and END answers (the switch's answers to version 2 senders) leave through clone
 * (BMv2) or ingress mirror (Tofino) session JG_RECEIPT_SESSION_BASE + p towards the sender on
 * port p: the operator maps each port the switch's senders are on to such a session (the BMv2 and
 * the BF Runtime backend write them for the ports of the `forward` table; docs/switch.md). On
 * Tofino 1 a mirror session id has 10 bits: 512 + a 9-bit port fits. */
#define JG_RECEIPT_SESSION_BASE 512

/* What the parser reads of a tuple: its null vector and up to 8 fixed 8-byte fields. */
#define JG_MAX_IN_FIELDS 8
#define JG_MIN_TUPLE_BYTES 16
#define JG_MAX_TUPLE_BYTES 72

/* Tuples per data datagram towards the switch: 1 .. JG_TUPLES_PER_DATAGRAM of the job's length.
 * The pipeline takes one tuple per pass and recirculates the rest; the records a datagram's
 * tuples leave (bypasses, spills) ride along in a header stack of this many entries and leave
 * together in one datagram. The stack is what bounds it: docs/switch.md, "Several tuples per
 * datagram", has the PHV arithmetic. */
#define JG_TUPLES_PER_DATAGRAM 4

/* Sums never wrap. A slot's sum is a 32-bit register holding 0 (no value yet) or the sum plus
 * JG_SUM_BIAS, kept inside [1, 2^31): the sum inside (-2^30, 2^30). A value outside (-2^30, 2^30)
 * sends its tuple downstream untouched (a bypass); a value the slot's sum cannot take (it would
 * leave its range) goes downstream in a record of its own (a spill). Counts spill at 2^31 - 1. */
#define JG_VALUE_BITS 30
#define JG_SUM_BIAS 0x40000000
#define JG_SUM_SPAN 0x7fffffff       /* 1 <= stored sum < 2^31: (stored + value - 1) < JG_SUM_SPAN */
#define JG_COUNT_SPILL 0x7fffffff

/* The UDP transport (docs/udp-transport.md, ncas/runtime/jg_udp.h). */
#define JG_UDP_HEADER_BYTES 24
#define JG_UDP_MAGIC_BE 0x4e545531     /* "NTU1" as a big-endian 32-bit field */
#define JG_F_END 0x0100              /* flags as the P4 programs read the little-endian u16 field */
#define JG_F_LOSS 0x0200
#define JG_F_FLUSH 0x0400
#define JG_F_FINISH 0x0800
#define JG_F_DISCARD 0x1000
#define JG_F_ERROR 0x2000
#define JG_UDP_MAGIC2_BE 0x4e545532    /* "NTU2": version 2, acknowledged */
#define JG_F_RETX 0x4000             /* version 2: a repeat */
#define JG_F_ACK 0x8000              /* version 2: an acknowledgement (a receipt: with SACK) */
#define JG_F_SACK 0x0001
#define JG_F_PASS 0x0080             /* 0x8000: a datagram the switch recirculates (only inside it) */

/* Output words of a record (after its key): count, sum 0, sum 1 in the order the job asks. */
#define JG_MAX_OUT_WORDS 3

#endif
