/* Sizes and constants of the switch aggregator, in one file shared by everything that must agree
 * on them: both P4 programs (#include), the switch model (p4/model/switch_model.c includes this
 * very file: it holds only #defines and comments, which C reads alike), and the plugin
 * (jumpgate/ncas/switch/defs.py parses it). tests/unit/test_p4.py checks that they do.
 * docs/switch.md explains every one of them. */
#ifndef JUMPGATE_DEFS_P4
#define JUMPGATE_DEFS_P4

/* The register hash table: 64K slots, leased to jobs in aligned power-of-two blocks. */
#define JG_TABLE_SLOTS 65536
#define JG_SLOT_BITS 16
#define JG_BLOCK_SLOTS 1024          /* the smallest lease */
#define JG_MAX_JOBS 64               /* JG_TABLE_SLOTS / JG_BLOCK_SLOTS: job numbers 0 .. 63 */

/* Per-job counters: one per (job, input stream). */
#define JG_MAX_STREAMS 64
#define JG_STREAM_COUNTERS 4096      /* JG_MAX_JOBS * JG_MAX_STREAMS */

/* What the parser reads of a tuple: its null vector and up to 8 fixed 8-byte fields. */
#define JG_MAX_IN_FIELDS 8
#define JG_MIN_TUPLE_BYTES 16
#define JG_MAX_TUPLE_BYTES 72

/* Sums never wrap: values outside [-2^58, 2^58) go downstream untouched, and a slot's sum is kept
 * inside [-2^58, 2^58) by sending its high half downstream (a spill) when the high 32 bits leave
 * [-2^26, 2^26). Counts spill at 2^31 - 1. */
#define JG_SUM_SAFE_BITS 58
#define JG_HI_SAFE_BITS 26
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

/* Output words of a record (after its key): count, sum 0, sum 1 in the order the job asks. */
#define JG_MAX_OUT_WORDS 3

#endif
