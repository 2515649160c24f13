/* Jumpgate's switch aggregator for Tofino (TNA): the partial aggregation of docs/switch.md.
 *
 * Shared with the BMv2 program (p4/v1model/jumpgate_agg.p4): sizes (../include/jumpgate_defs.p4),
 * headers and metadata, parser states, the table-owning controls JobConfig, Output and Emit, and
 * Admit and Passes (a datagram of several tuples, a pass per tuple). Here: the registers as
 * Tofino RegisterActions (one access per register array per packet, one 32-bit output each; way
 * w's kl in one stage, its kh in the next, its count and sums in the one after), a CRC32 Hash
 * extern per way, recirculation (a datagram's next pass goes out of the pipe's recirculation port
 * and back into its ingress parser), forwarding and the TNA package.
 *
 *   p4test -D__TARGET_TOFINO__=1 p4/tna/jumpgate_agg.p4                    (passes, no warning)
 *   bf-p4c --target tofino --arch tna -o build p4/tna/jumpgate_agg.p4      (Intel's SDE)
 *
 * The open-source Tofino back end of p4c (p4c --target tofino) stops in PHV allocation, and the 8
 * ways need more MAU stages than Tofino 1 has: docs/switch.md, "Does it fit one Tofino pipe?",
 * says what it rejected, what was changed for it, and the options.
 */
#include <core.p4>
#include <tna.p4>

#include "../include/jumpgate_defs.p4"
#include "../include/headers.p4"
#include "../include/job_config.p4"
#include "../include/output.p4"
#include "../include/passes.p4"

/* Pipe 0's recirculation port on Tofino 1 (ports 68-71 loop back into pipe 0's ingress): a datagram
 * with tuples left goes there for its next pass. Another pipe p: p * 128 + 68. */
#define RECIRC_PORT 68

parser SwitchIngressParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                           out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        /* every metadata field 0 (`...`: the default of each): TNA's `out meta` is otherwise
         * undefined until written, and the pipeline reads flags such as meta.spilled, meta.rej0 and
         * meta.rec that only some paths set. bf-p4c drops the assignments that merely repeat the
         * parser's own zero-initialisation. */
        meta = { ... };
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        transition parse_ethernet;
    }
#include "../include/parser_states.p4"
}

#define NO_WAY 15
#define KL_MISS 0
#define KL_MATCH 1
#define KL_FRESH 2
#define KH_SAME 0
#define KH_OTHER 1
#define KH_FRESH 2
#define CN_COUNTED 0
#define CN_SPILL 1

/* Way w's hash input: the key's 8 wire bytes rotated left by w bytes (CRC-32 over them). */
#define ROT0 { meta.key }
#define ROT1 { meta.key[55:0], meta.key[63:56] }
#define ROT2 { meta.key[47:0], meta.key[63:48] }
#define ROT3 { meta.key[39:0], meta.key[63:40] }
#define ROT4 { meta.key[31:0], meta.key[63:32] }
#define ROT5 { meta.key[23:0], meta.key[63:24] }
#define ROT6 { meta.key[15:0], meta.key[63:16] }
#define ROT7 { meta.key[7:0], meta.key[63:8] }

/* The stateful ALU programs of way W (docs/switch.md, "The pipeline"; one access per register per
 * packet, one 32-bit output each, as Tofino 1's RegisterAction has): kl<W> tries (the key's, empty
 * and taken, or another key's); kh<W> is claimed or checked; cn<W>, for the key that holds the slot
 * after kh<W>, starts at the tuple's count (a claim) or counts it (spilling at JG_COUNT_SPILL);
 * s0_/s1_<W> add a value or refuse it; a FLUSH takes each (reads and clears it). */
#define WAY_ACTIONS(W)                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<8>>(kl##W) kl##W##_try = {                              \
        void apply(inout bit<32> v, out bit<8> r) {                                               \
            if (v == meta.klo) { r = KL_MATCH; }                                                  \
            else if (v == 0) { v = meta.klo; r = KL_FRESH; }                                      \
            else { r = KL_MISS; }                                                                 \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<32>>(kl##W) kl##W##_take = {                            \
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }                          \
    };                                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<8>>(kh##W) kh##W##_claim = {                            \
        void apply(inout bit<32> v, out bit<8> r) { v = meta.khi; r = KH_FRESH; }                 \
    };                                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<8>>(kh##W) kh##W##_check = {                            \
        void apply(inout bit<32> v, out bit<8> r) {                                               \
            if (v == meta.khi) { r = KH_SAME; } else { r = KH_OTHER; }                            \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<32>>(kh##W) kh##W##_take = {                            \
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }                          \
    };                                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<8>>(cn##W) cn##W##_claim = {                            \
        void apply(inout bit<32> v, out bit<8> r) { v = meta.cnt_inc; r = CN_COUNTED; }           \
    };                                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<8>>(cn##W) cn##W##_count = {                            \
        void apply(inout bit<32> v, out bit<8> r) {                                               \
            if (v >= JG_COUNT_SPILL) { v = 0; r = CN_SPILL; }                                     \
            else { v = v + meta.cnt_inc; r = CN_COUNTED; }                                        \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<32>>(cn##W) cn##W##_take = {                            \
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }                          \
    };                                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<8>>(s0_##W) s0_##W##_add = {                            \
        void apply(inout bit<32> v, out bit<8> rej) {                                             \
            if (v == 0) { v = meta.x0b; rej = 0; }                                                \
            else if (v + meta.x0m1 < JG_SUM_SPAN) { v = v + meta.x0; rej = 0; }                   \
            else { rej = 1; }                                                                     \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<32>>(s0_##W) s0_##W##_take = {                          \
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }                          \
    };                                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<8>>(s1_##W) s1_##W##_add = {                            \
        void apply(inout bit<32> v, out bit<8> rej) {                                             \
            if (v == 0) { v = meta.x1b; rej = 0; }                                                \
            else if (v + meta.x1m1 < JG_SUM_SPAN) { v = v + meta.x1; rej = 0; }                   \
            else { rej = 1; }                                                                     \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<15>, bit<32>>(s1_##W) s1_##W##_take = {                          \
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }                          \
    };

/* Way W's slot index, base | (hash & mask), into a field of its own ahead of the way's first
 * stage: a stateful ALU takes its index from a field or a hash as it is, not computed. */
#define WAY_INDEX(W) i##W = hash##W.get(ROT##W) & meta.mask; i##W = i##W | meta.base;

/* Way W's first stage, tried only while every earlier way missed. */
#define TRY_WAY(W)                                                                                \
    if (meta.way == NO_WAY) {                                                                     \
        r = kl##W##_try.execute((bit<15>)i##W);                                                   \
        if (r != KL_MISS) { meta.way = W; meta.idx = i##W; }                                      \
        if (r == KL_FRESH) { meta.fresh = 1; }                                                    \
    }

/* The way that took the key: kh<W> claims or checks the key's last half; for the key that holds
 * the slot, the count (cn<W>) and the sums (a NULL value leaves its sum alone). */
#define AT_WAY(W)                                                                                 \
    if (meta.way == W) {                                                                          \
        idx = (bit<15>)meta.idx;                                                                  \
        if (meta.fresh == 1) { r = kh##W##_claim.execute(idx); }                                  \
        else { r = kh##W##_check.execute(idx); }                                                  \
        if (r == KH_OTHER) { meta.bypass = 1; }                                                   \
        if (r == KH_FRESH) { cn##W##_claim.execute(idx); }                                        \
        else if (r == KH_SAME) {                                                                  \
            if (cn##W##_count.execute(idx) == CN_SPILL) {                                         \
                meta.spilled = 1; meta.spill_c = JG_COUNT_SPILL + meta.cnt_inc;                   \
            }                                                                                     \
        }                                                                                         \
        if (meta.bypass == 0 && meta.v0_null_hit == 0) {                                          \
            if (meta.fit0 == 0) { meta.rej0 = 1; } else { meta.rej0 = (bit<1>)s0_##W##_add.execute(idx); } \
        }                                                                                         \
        if (meta.bypass == 0 && meta.v1_null_hit == 0) {                                          \
            if (meta.fit1 == 0) { meta.rej1 = 1; } else { meta.rej1 = (bit<1>)s1_##W##_add.execute(idx); } \
        }                                                                                         \
    }

#define TAKE_WAY(W)                                                                               \
    if (way == W) {                                                                               \
        x = kl##W##_take.execute((bit<15>)fi);                                              \
        kh_last = kh##W##_take.execute((bit<15>)fi);                                        \
        c = cn##W##_take.execute((bit<15>)fi);                                              \
        t0 = s0_##W##_take.execute((bit<15>)fi);                                            \
        t1 = s1_##W##_take.execute((bit<15>)fi);                                            \
    }

/* The slot table: JG_WAYS ways of JG_WAY_SLOTS slots, each way its own registers, in its own MAU
 * stages, and its own CRC32 hash (docs/switch.md, "Resources" for the stage and memory budget). */
control Aggregator(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kl0;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kh0;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) cn0;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s0_0;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s1_0;
    Hash<bit<16>>(HashAlgorithm_t.IDENTITY) flush_index;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash0;
    WAY_ACTIONS(0)
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kl1;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kh1;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) cn1;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s0_1;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s1_1;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash1;
    WAY_ACTIONS(1)
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kl2;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kh2;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) cn2;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s0_2;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s1_2;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash2;
    WAY_ACTIONS(2)
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kl3;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kh3;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) cn3;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s0_3;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s1_3;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash3;
    WAY_ACTIONS(3)
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kl4;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kh4;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) cn4;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s0_4;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s1_4;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash4;
    WAY_ACTIONS(4)
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kl5;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kh5;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) cn5;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s0_5;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s1_5;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash5;
    WAY_ACTIONS(5)
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kl6;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kh6;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) cn6;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s0_6;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s1_6;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash6;
    WAY_ACTIONS(6)
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kl7;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) kh7;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) cn7;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s0_7;
    Register<bit<32>, bit<15>>(JG_WAY_SLOTS, 0) s1_7;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash7;
    WAY_ACTIONS(7)

    apply {
        bit<15> idx;
        bit<16> fi;
        bit<16> i0; bit<16> i1; bit<16> i2; bit<16> i3; bit<16> i4; bit<16> i5; bit<16> i6; bit<16> i7;
        bit<8> r;
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            bit<64> seq = SWAP64(hdr.ntu.seq);
            bit<3> way = seq[18:16];
            bit<32> x = 0;
            bit<32> kh_last = 0;
            bit<32> c = 0;
            bit<32> t0 = 0;
            bit<32> t1 = 0;
            /* the slot index, as a way's: from a hash unit (identity: seq's two low bytes, swapped
             * from little-endian), masked, or'ed with the block's base, one operand a statement */
            fi = flush_index.get({ hdr.ntu.seq[55:48], hdr.ntu.seq[63:56] }) & meta.mask;
            fi = fi | meta.base;
            TAKE_WAY(0) TAKE_WAY(1) TAKE_WAY(2) TAKE_WAY(3) TAKE_WAY(4) TAKE_WAY(5) TAKE_WAY(6) TAKE_WAY(7)
            if (x != 0 && (hdr.ntu.flags & JG_F_DISCARD) == 0) {
                meta.key = (x ^ meta.tag) ++ kh_last;
                meta.r_count = (bit<64>)c;
                meta.r_s0 = 0;
                meta.r_s1 = 0;
                /* a NULL bit for each sum without a value (set, never cleared: one operand a statement) */
                meta.r_nulls = 0;
                if (t0 == 0) { meta.r_nulls = meta.r_nulls | meta.s0_out_null; }
                if (t1 == 0) { meta.r_nulls = meta.r_nulls | meta.s1_out_null; }
                /* sum = register - bias, sign-extended (slices and ifs: Tofino takes neither casts of
                 * casts nor conditional expressions in an action; r_s0/r_s1 are 0 before) */
                if (t0 != 0) {
                    meta.r_s0[31:0] = t0 - JG_SUM_BIAS;
                    if (t0[31:30] == 0) { meta.r_s0[63:32] = 0xffffffff; }  /* below the bias: negative */
                }
                if (t1 != 0) {
                    meta.r_s1[31:0] = t1 - JG_SUM_BIAS;
                    if (t1[31:30] == 0) { meta.r_s1[63:32] = 0xffffffff; }  /* below the bias: negative */
                }
                meta.rec = 1;
            }
        } else if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {  /* this pass's tuple */
            bit<1> key_is_null = 0;
            if ((hdr.nulls.data & meta.key_null) != 0) { key_is_null = 1; }
            meta.v0_null_hit = 0;
            meta.v1_null_hit = 0;
            if ((hdr.nulls.data & meta.v0_null) != 0) { meta.v0_null_hit = 1; meta.v0 = 0; }
            if ((hdr.nulls.data & meta.v1_null) != 0) { meta.v1_null_hit = 1; meta.v1 = 0; }
            meta.cnt_inc = 1;
            if ((hdr.nulls.data & meta.cnt_null) != 0) { meta.cnt_inc = 0; }
            meta.x0 = meta.v0[31:0];
            meta.x1 = meta.v1[31:0];
            meta.x0b = meta.v0[31:0] + JG_SUM_BIAS;
            meta.x1b = meta.v1[31:0] + JG_SUM_BIAS;
            meta.x0m1 = meta.v0[31:0] - 1;
            meta.x1m1 = meta.v1[31:0] - 1;
            meta.bypass = key_is_null;
            if (meta.klo == 0) { meta.bypass = 1; }
            /* -2^30 < v < 2^30: a value a slot's sum can take; another goes on in a spill record */
            meta.fit0 = 1;
            meta.fit1 = 1;
            if (!(meta.v0[63:30] == 0 || meta.v0[63:30] == 0x3ffffffff) || meta.v0 == 0xffffffffc0000000) { meta.fit0 = 0; }
            if (!(meta.v1[63:30] == 0 || meta.v1[63:30] == 0x3ffffffff) || meta.v1 == 0xffffffffc0000000) { meta.fit1 = 0; }
            meta.way = NO_WAY;
            meta.fresh = 0;
            if (meta.bypass == 0) {
                WAY_INDEX(0) WAY_INDEX(1) WAY_INDEX(2) WAY_INDEX(3) WAY_INDEX(4) WAY_INDEX(5) WAY_INDEX(6)
                WAY_INDEX(7)
                TRY_WAY(0) TRY_WAY(1) TRY_WAY(2) TRY_WAY(3) TRY_WAY(4) TRY_WAY(5) TRY_WAY(6) TRY_WAY(7)
                if (meta.way == NO_WAY) { meta.bypass = 1; }
            }
            if (meta.bypass == 0) {
                AT_WAY(0) AT_WAY(1) AT_WAY(2) AT_WAY(3) AT_WAY(4) AT_WAY(5) AT_WAY(6) AT_WAY(7)
            }
            if (meta.bypass == 1) {
                meta.r_count = (bit<64>)meta.cnt_inc;
                meta.r_s0 = meta.v0;
                meta.r_s1 = meta.v1;
                meta.r_nulls = (bit<8>)key_is_null;
                if (meta.v0_null_hit == 1) { meta.r_nulls = meta.r_nulls | meta.s0_out_null; }
                if (meta.v1_null_hit == 1) { meta.r_nulls = meta.r_nulls | meta.s1_out_null; }
                meta.rec = 1;
            } else if (meta.spilled == 1 || meta.rej0 == 1 || meta.rej1 == 1) {
                meta.spilled = 1;
                meta.r_count = (bit<64>)meta.spill_c;  /* a count spills at exactly JG_COUNT_SPILL */
                meta.r_s0 = 0;
                meta.r_s1 = 0;
                meta.r_nulls = 0;  /* a sum that did not spill is NULL in the record */
                if (meta.rej0 == 1) { meta.r_s0 = meta.v0; } else { meta.r_nulls = meta.r_nulls | meta.s0_out_null; }
                if (meta.rej1 == 1) { meta.r_s1 = meta.v1; } else { meta.r_nulls = meta.r_nulls | meta.s1_out_null; }
                meta.rec = 1;
            }
        }
    }
}

/* Per job: data datagrams received per input stream (on their first pass), tuples taken through
 * the table (a pass each), output datagrams (out_seq numbers them) and the records in them,
 * FLUSHes processed, bypasses, spills. */
control StreamCounters(inout headers_t hdr, inout metadata_t meta, out bit<64> seq) {
    Register<bit<32>, bit<12>>(JG_STREAM_COUNTERS, 0) received;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) tuples;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) out_seq;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) records;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) flushed;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) bypassed;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) spilled;

    RegisterAction<bit<32>, bit<12>, bit<32>>(received) received_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    RegisterAction<bit<32>, bit<12>, bit<32>>(received) received_read = {
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(tuples) tuples_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(records) records_add = {
        void apply(inout bit<32> v) { v = v + (bit<32>)meta.n_rec; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(records) records_read = {
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(out_seq) out_seq_next = {
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; v = v + 1; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(out_seq) out_seq_read = {
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(flushed) flushed_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(flushed) flushed_read = {
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(bypassed) bypassed_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(spilled) spilled_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };

    apply {
        seq = 0;
        meta.counter = ((bit<12>)meta.job << 6) | (bit<12>)(SWAP32(hdr.ntu.stream)[5:0]);
        if ((hdr.ntu.flags & JG_F_END) != 0) {
            bit<64> got = (bit<64>)received_read.execute(meta.counter);  /* once: SWAP64 slices it 8 times */
            hdr.end.received = SWAP64(got);
            meta.out_kind = OUT_NOTICE;
        } else if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            flushed_inc.execute(meta.job);
        } else if ((hdr.ntu.flags & JG_F_FINISH) != 0) {
            bit<32> f = flushed_read.execute(meta.job);
            seq = (bit<64>)out_seq_read.execute(meta.job);
            meta.out_records = records_read.execute(meta.job);
            hdr.ntu.flags = JG_F_END;
            if ((bit<64>)f != SWAP64(hdr.finish.flushes)) { hdr.ntu.flags = JG_F_END | JG_F_LOSS; }
            meta.out_kind = OUT_END;
        } else {
            if (hdr.ntu.flags == 0) { received_inc.execute(meta.counter); }  /* a datagram's first pass */
            tuples_inc.execute(meta.job);
            if (meta.bypass == 1) { bypassed_inc.execute(meta.job); }
            if (meta.spilled == 1) { spilled_inc.execute(meta.job); }
        }
        if (meta.out_kind == OUT_RECORD) {
            seq = (bit<64>)out_seq_next.execute(meta.job);
            records_add.execute(meta.job);
        }
    }
}

control SwitchIngress(inout headers_t hdr, inout metadata_t meta,
                      in ingress_intrinsic_metadata_t ig_intr_md,
                      in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                      inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                      inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    JobConfig() job_config;
    Output() output;
    Admit() admit;
    Aggregator() aggregator;
    Passes() passes;
    StreamCounters() counters;
    Emit() emit;

    /* out of `port` to the host at `dst_mac`, from the MAC the frame was sent to (the switch's) */
    action send(PortId_t port, bit<48> dst_mac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = dst_mac;
    }
    action drop() { ig_dprsr_md.drop_ctl = 1; }
    /* plain IPv4 forwarding, filled by the operator for the hosts on the switch (docs/switch.md) */
    table forward {
        key = { hdr.ipv4.dst_addr : exact; }
        actions = { send; drop; }
        default_action = drop();
        size = 1024;
    }

    apply {
        bool hit = false;
        bool ok = true;
        bit<64> seq = 0;
        meta.out_kind = OUT_NONE;
        meta.recirculated = 0;
        if (ig_intr_md.ingress_port == RECIRC_PORT) { meta.recirculated = 1; }
        if (hdr.ntu.isValid()) {
            job_config.apply(hdr, meta, hit);
        }
        if (hit) {
            output.apply(hdr, meta);
            admit.apply(hdr, meta, ok);
            if (!ok) {
                hdr.ntu.flags = hdr.ntu.flags | JG_F_ERROR;  /* not tuples of the job's layout: tell the controller */
                meta.out_kind = OUT_NOTICE;
            } else {
                aggregator.apply(hdr, meta);
                passes.apply(hdr, meta);
                counters.apply(hdr, meta, seq);
            }
            emit.apply(hdr, meta, seq);
        }
        if (hit && meta.out_kind == OUT_NONE) {
            drop();
        } else if (meta.out_kind == OUT_PASS) {
            ig_tm_md.ucast_egress_port = RECIRC_PORT;  /* the next pass: out and back into this ingress */
            ig_tm_md.bypass_egress = 1;
        } else if (hdr.ipv4.isValid()) {
            forward.apply();
        }
    }
}

control SwitchIngressDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                              in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        hdr.ipv4.hdr_checksum = ipv4_checksum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification,
            hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr,
            hdr.ipv4.dst_addr });
        pkt.emit(hdr);  /* every valid header, in headers_t order */
    }
}

struct egress_headers_t { }
struct egress_metadata_t { }

parser SwitchEgressParser(packet_in pkt, out egress_headers_t hdr, out egress_metadata_t meta,
                          out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        transition accept;
    }
}

control SwitchEgress(inout egress_headers_t hdr, inout egress_metadata_t meta,
                     in egress_intrinsic_metadata_t eg_intr_md,
                     in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                     inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                     inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply { }
}

control SwitchEgressDeparser(packet_out pkt, inout egress_headers_t hdr, in egress_metadata_t meta,
                             in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply { pkt.emit(hdr); }
}

Pipeline(SwitchIngressParser(), SwitchIngress(), SwitchIngressDeparser(),
         SwitchEgressParser(), SwitchEgress(), SwitchEgressDeparser()) pipe;

Switch(pipe) main;
