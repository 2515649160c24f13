/* Jumpgate's switch aggregator for Tofino (TNA): the partial aggregation of docs/switch.md.
 *
 * Shared with the BMv2 program (p4/v1model/jumpgate_agg.p4): sizes (../include/jumpgate_defs.p4),
 * headers and metadata, parser states, the table-owning controls JobConfig, ValueSelect, Output
 * and Emit, and Admit and Passes (a datagram of several tuples, a pass per tuple).
 *
 * Here the slot table is split between the two pipes of one Tofino 1 pipe's 2 x 12 MAU stages
 * (docs/switch.md, "Does it fit one Tofino pipe?"): the INGRESS pipe finds the job, checks the
 * datagram, counts it, and tries the ways: kl<w> (way w's first stage, tried while every earlier
 * way missed) and kh<w> (the stage after, for the way that took the key's first half) for the
 * JG_WAYS = 7 ways; it then chooses the egress port (the recirculation port while tuples remain, else the
 * destination's) and tells the EGRESS pipe in a bridge header what it found. The egress pipe holds
 * every way's count and sums (cn<w>, s0_<w>, s1_<w>: a tuple uses one way, so these form no
 * chain and need no stage order among ways), decides the record (a bypass, a spill, a flushed
 * slot), numbers and counts the output, and rewrites the datagram (Emit), or drops it when it
 * leaves nothing. END notices and malformed datagrams go to the controller from ingress. Version 2
 * (acknowledged) input streams, as in the BMv2 program and the model: the ingress pipe drops a data
 * datagram taken before (the ring `seen`, control SeenRing) and mirrors every one, and an END taken
 * whole, to the session of its port; the egress pipe makes that copy its sender's answer.
 *
 * Tofino has no byte swap, and the NTF fields are little-endian: fields are compared and copied as
 * their wire bytes, and where a number must be computed with, its bytes are reordered by an
 * identity hash (the input crossbar picks bytes in any order).
 *
 *   p4c --target tofino --arch tna -I p4/include -o build p4/tna/jumpgate_agg.p4   (p4c's Tofino back end)
 *   bf-p4c --target tofino --arch tna -o build p4/tna/jumpgate_agg.p4              (Intel's SDE)
 */
#include <core.p4>
/* Tofino 1 (tna.p4) by default; the same program for Tofino 2 (p4c --target tofino2 --arch t2na,
 * 20 MAU stages) with t2na.p4 and its recirculation port */
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

#define JG_TAKES_UDP_V2  /* the shared parser also takes "NTU2" datagrams: control SeenRing */
#include "../include/jumpgate_defs.p4"
#include "../include/headers.p4"
#define STAGE(n) @stage(n)
#include "../include/job_config.p4"
/* Emit runs in the egress pipe, whose parser stops after the pass header (Tofino 1's egress parser
 * reads at most 160 bytes): the new record is emitted in front of the earlier ones, unparsed */
#define REC_PUSH_FRONT(K)
/* and it writes one record, of K words: rec0[0] (length, null vector, key), then K of the tuple's
 * word headers (never valid in egress otherwise): the bytes of a rec<K>, in a third of the PHV four
 * record headers would take */
#define REC_HEAD(K) hdr.rec0[0]
#define REC_WORD(K, I) hdr.w##I.data
#define REC_WORDS_VALID(K) REC_WORDS_VALID_##K
#define REC_WORDS_VALID_0
#define REC_WORDS_VALID_1 hdr.w0.setValid();
#define REC_WORDS_VALID_2 hdr.w0.setValid();
#define REC_WORDS_VALID_3 hdr.w0.setValid();
/* (words 1 and 2 are made valid where they are written: Emit's rec_word1, rec_word2) */
#define REC_WORD_VALID(K, I) hdr.w##I.setValid();
/* The egress pipe never has the tuple's headers (ingress took them out; its parser stops before)
 * nor an END's: Emit has no tuple to strip (a FINISH's payload is invalidated where the END is
 * made) */
#define EMIT_NO_STRIP
/* OutputCounters writes the output's number and an END's count into the header itself */
#define EMIT_SEQ(x)
#define EMIT_END_TUPLES(x)
#include "../include/output.p4"
/* the egress parser sets n_rec and rec_bytes from the pass header (0 without one), and the record's
 * decision (Accumulator's bypass, spill, a flushed slot) counts this pass's record in them
 * (REC_COUNTED): the counters of the output key on them a stage sooner */
#define PASS_COUNTS_PARSED
#define PASS_REC_COUNTED
#include "../include/passes.p4"

/* Pipe 0's recirculation port on Tofino 1 (ports 68-71 loop back into pipe 0's ingress): a datagram
 * with tuples left goes there for its next pass. Another pipe p: p * 128 + 68. (Tofino 2: pipe 0's
 * port 6.) */
#if __TARGET_TOFINO__ == 2
#define RECIRC_PORT 6
#else
#define RECIRC_PORT 68
#endif

/* A version 2 sender's answer (SeenRing, Answer) leaves by ingress mirroring: mirror type
 * MIRROR_ANSWER, whose mirror header is one byte, ANSWER_KIND, where a bridge header has the job
 * (below 64): the egress parser tells them apart by it */
#define ANSWER_KIND 0x80
#define MIRROR_ANSWER 1
header answer_h { bit<8> kind; }

/* A job's records are of one kind (rec<out_words>): the four stacks are never valid together, so
 * the compiler may overlay them (in PHV and tagalong containers). */
#define REC_STR(x) #x
#define REC_NAME(K, I) REC_STR(hdr.rec##K[I])
#define REC_MUTEX(G, A, B)                                                                          \
    @pa_mutually_exclusive(G, REC_NAME(A, 0), REC_NAME(B, 0))                                      \
    @pa_mutually_exclusive(G, REC_NAME(A, 1), REC_NAME(B, 1))                                      \
    @pa_mutually_exclusive(G, REC_NAME(A, 2), REC_NAME(B, 2))                                      \
    @pa_mutually_exclusive(G, REC_NAME(A, 3), REC_NAME(B, 3))
#define REC_MUTEXES(G) REC_MUTEX(G, 0, 1) REC_MUTEX(G, 0, 2) REC_MUTEX(G, 0, 3) REC_MUTEX(G, 1, 2) \
    REC_MUTEX(G, 1, 3) REC_MUTEX(G, 2, 3)

/* kl<w>'s outcomes. A stateful ALU's output of 0 costs nothing and a power of two can come from
 * its predicate; any other constant takes one of its two high ALUs (the "instruction slot used
 * multiple times" of three constants in one program): the try's three outcomes are 0, 1, 2. */
#define KL_MISS 0    /* another key holds the slot: the next way (after the last: no room) */
#define KL_MATCH 1
#define KL_FRESH 2
#define KL_NONE 3    /* not tried: a NULL key, or the one key whose first half equals the tag */
#define KH_NONE 0
#define KH_SAME 1
#define KH_OTHER 2
#define KH_FRESH 3
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

/* A 32-bit number's bytes reversed (little-endian wire bytes <-> a number), by an identity hash */
#define BYTES_REVERSED(x) { x[7:0], x[15:8], x[23:16], x[31:24] }

/* ------------------------------------------------------------------ ingress */

parser SwitchIngressParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                           out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        /* every metadata field 0 (`...`: the default of each): TNA's `out meta` is otherwise
         * undefined until written */
        meta = { ... };
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        transition parse_ethernet;
    }
#include "../include/parser_states.p4"
}

/* Where the register arrays go (@stage). A stage has 4 stateful ALUs for both pipes, 48 for the
 * 44 arrays: ingress's kl<w> in stage 4 + w and kh<w> in the stage after (two a stage from 5 on),
 * the ring `seen` in stage 3 (SeenRing: its mark and index need the job, stage 0, and the mark's
 * + 1, stage 1 or 2; the ways, from stage 4, wait for its outcome). The ring's 262,144 16-bit
 * cells take 33 SRAM blocks and as many map RAMs of the stage's 48, so one 32,768-cell array (9
 * map RAMs) shares stage 3 with it and its stage's other two stateful ALUs stay unused. Egress's
 * 21 arrays (its counts read only the bridge: from stage 0; its sums the bridged numbers and x - 1:
 * from stage 1) take what is left of 0..7: 0: cn0..cn3; 1: cn4..cn6; 2: s0_0, s1_0, s0_1, s1_1; 3:
 * s0_3 (beside `seen`); 4: kl0, s1_3, s0_4, s1_4; 5, 6: kh<w>, kl<w+1> and way 5's, 6's sums; 7:
 * kh2, kl3, s0_2, s1_2. The counters take what is left in 8..11 after the record's decision (egress
 * stage 8). */
#define KL_STAGE_0 4
#define KL_STAGE_1 5
#define KL_STAGE_2 6
#define KL_STAGE_3 7
#define KL_STAGE_4 8
#define KL_STAGE_5 9
#define KL_STAGE_6 10
#define KH_STAGE_0 5
#define KH_STAGE_1 6
#define KH_STAGE_2 7
#define KH_STAGE_3 8
#define KH_STAGE_4 9
#define KH_STAGE_5 10
#define KH_STAGE_6 11
#define CN_STAGE_0 0
#define CN_STAGE_1 0
#define CN_STAGE_2 0
#define CN_STAGE_3 0
#define CN_STAGE_4 1
#define CN_STAGE_5 1
#define CN_STAGE_6 1
#define s0_STAGE_0 2
#define s1_STAGE_0 2
#define s0_STAGE_1 2
#define s1_STAGE_1 2
#define s0_STAGE_2 7
#define s1_STAGE_2 7
#define s0_STAGE_3 3
#define s1_STAGE_3 4
#define s0_STAGE_4 4
#define s1_STAGE_4 4
#define s0_STAGE_5 5
#define s1_STAGE_5 5
#define s0_STAGE_6 6
#define s1_STAGE_6 6
/* The counters, two a stage in 8..11 beside the ways' kh and kl. Egress: the arrays end in stage 7,
 * the record's decision is in 8, out_kinds and the output's counters in 9 (they key on what
 * out_kinds keys on: records and out_seq, whose numbers go into the header in 10 and 11), a
 * FINISH's flags (end_loss, after `flushed`: flushed in 8) and bypassed and spilled (before Emit in
 * its sequence) by 10, Emit's tests in 10 and its record words in 11. Ingress: received in 8 (an
 * END's count into its header in 9), tuples in 11 (nothing follows it). One stateful ALU of the 48
 * is left, in stage 11. (Each counter's index takes a hash output of its stage, shared by one
 * pipe's counters there: docs/switch.md, steps 37 and 38.) */
#define RECEIVED_STAGE 8
#define TUPLES_STAGE 11
#define REPEATS_STAGE 11
#define SEEN_STAGE 3
#define FLUSHED_STAGE 8
#define OUT_SEQ_STAGE 9
#define RECORDS_STAGE 9
#define BYPASSED_STAGE 10
#define SPILLED_STAGE 10

/* Way W's kl and kh programs (one access per register array per packet, one 32-bit output each, as
 * Tofino 1's RegisterAction has): kl<W> tries (the key's first half, empty and now the key's, or
 * another key's); kh<W> is claimed or checked; a FLUSH takes each (reads and clears it). */
#define KL_ACTIONS(W)                                                                             \
    RegisterAction<bit<32>, bit<16>, bit<8>>(kl##W) kl##W##_try = {                              \
        void apply(inout bit<32> v, out bit<8> r) {                                               \
            if (v == meta.klo) { r = KL_MATCH; }                                                  \
            else if (v == 0) { v = meta.klo; r = KL_FRESH; }                                      \
            else { r = KL_MISS; }                                                                 \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<32>>(kl##W) kl##W##_take = {                            \
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }                          \
    };
#define KH_ACTIONS(W, KHI)                                                                        \
    RegisterAction<bit<32>, bit<16>, bit<8>>(kh##W) kh##W##_claim = {                            \
        void apply(inout bit<32> v, out bit<8> r) { v = KHI; r = KH_FRESH; }                      \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<8>>(kh##W) kh##W##_check = {                            \
        void apply(inout bit<32> v, out bit<8> r) {                                               \
            if (v == KHI) { r = KH_SAME; } else { r = KH_OTHER; }                                 \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<32>>(kh##W) kh##W##_take = {                            \
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }                          \
    };

/* The ways' slot indexes, base | (hash & mask), into fields of their own ahead of way 0's stage: a
 * stateful ALU takes its index from a field or a hash as it is, not computed. Two steps (only a
 * key that is tried needs them), each way's a table of its own: one hash output each (an action's
 * immediate pathway takes 32 bits, and a 16-bit hash output takes 32 of them), and a way's OR
 * waits only for its own AND. */
#define WAY_HASH(W)                                                                               \
    action way_hash##W##_a() { meta.i##W = hash##W.get(ROT##W) & meta.mask; }                     \
    @stage(WAY_HASH_STAGE_##W)                                                                    \
    table way_hash##W { actions = { way_hash##W##_a; } default_action = way_hash##W##_a(); size = 1; }
/* The ORs of up to four ways (ways 0..3, then 4..6), one table (and logical table) a stage: they
 * need no hash output, and their ANDs are all in the stage before */
#define WAY_BASE(ORS, N)                                                                          \
    action way_base##N##_a() { ORS }                                                              \
    @stage(WAY_BASE_STAGE_##N)                                                                    \
    table way_base##N { actions = { way_base##N##_a; } default_action = way_base##N##_a(); size = 1; }
/* The stages: a stage has 6 hash distribution outputs, for both pipes, and a stateful ALU's index
 * from a field takes one too (arrays indexed by the same field in one stage share it); ways 0..3
 * and a FLUSH's index take stage 2's (one left for the egress arrays there), ways 4..7 stage 3's, so
 * that way 0's index is ready for its stage (4) and each later way's by its own (the placement,
 * left to itself, put ways 0..2 last) */
#define WAY_HASH_STAGE_0 2
#define WAY_HASH_STAGE_1 2
#define WAY_HASH_STAGE_2 2
#define WAY_HASH_STAGE_3 2
#define WAY_HASH_STAGE_4 3
#define WAY_HASH_STAGE_5 3
#define WAY_HASH_STAGE_6 3
#define WAY_BASE_STAGE_03 3
#define WAY_BASE_STAGE_46 4
#define OR_BASE(W) meta.i##W = meta.i##W | meta.base;

/* Way W's first stage: kl<W> tried by a tuple while every earlier way missed (the outcome, the way
 * and the index go to the bridge; a later way that is tried overwrites them), or taken by a FLUSH
 * of way W (read and cleared; its index is i<W> too: WayIndex). One table of the array's two
 * RegisterActions, chosen by constant entries on the flags, the chain's outcome so far and the way.
 * One field `r` carries the chain: each stage reads the one before's outcome, so way w+1 is tried
 * in the very next stage. */
#define TRY_WAY(W)                                                                                \
    action kl##W##_try_a() {                                                                      \
        hdr.bridge.r = kl##W##_try.execute(meta.i##W);                                            \
        hdr.bridge.way = W;                                                                       \
        hdr.bridge.idx = meta.i##W;                                                               \
    }                                                                                             \
    action kl##W##_take_a() { hdr.bridge.key_hi = kl##W##_take.execute(meta.i##W); }             \
    @stage(KL_STAGE_##W)                                                                          \
    table kl##W##_t {                                                                             \
        key = { hdr.ntu.flags : ternary; hdr.bridge.r : ternary; hdr.bridge.way : ternary; }     \
        actions = { kl##W##_try_a; kl##W##_take_a; NoAction; }                                    \
        const entries = {                                                                         \
            (JG_F_FLUSH &&& JG_F_FLUSH, _, W &&& 7): kl##W##_take_a();                             \
            (0, KL_MISS, _): kl##W##_try_a(); (JG_F_PASS, KL_MISS, _): kl##W##_try_a();            \
        }                                                                                         \
        default_action = NoAction();                                                              \
        size = 4;                                                                                 \
    }

/* The way that took the key's first half, in the stage after its kl: kh<W> claims the last half
 * (a fresh slot) or checks it, writing the outcome to OUT; a FLUSH of way W takes it (into the
 * bridge's key_lo). Applied right after kl<W>'s table, so that it reads that stage's outcome
 * (kl<W+1>'s table writes the same fields in the same stage, which a stage's reads do not see). */
#define KEY_WAY(W, OUT)                                                                           \
    action kh##W##_take_a() { hdr.bridge.key_lo = kh##W##_take.execute(hdr.bridge.idx); }        \
    action kh##W##_claim_a() { OUT = kh##W##_claim.execute(hdr.bridge.idx); }                    \
    action kh##W##_check_a() { OUT = kh##W##_check.execute(hdr.bridge.idx); }                    \
    @stage(KH_STAGE_##W)                                                                          \
    table kh##W##_t {                                                                             \
        key = { hdr.ntu.flags : ternary; hdr.bridge.way : ternary; hdr.bridge.r : ternary; }     \
        actions = { kh##W##_take_a; kh##W##_claim_a; kh##W##_check_a; NoAction; }                 \
        const entries = {                                                                         \
            (JG_F_FLUSH &&& JG_F_FLUSH, W &&& 7, _): kh##W##_take_a();                             \
            (0, W &&& 7, KL_FRESH): kh##W##_claim_a(); (JG_F_PASS, W &&& 7, KL_FRESH): kh##W##_claim_a(); \
            (0, W &&& 7, KL_MATCH): kh##W##_check_a(); (JG_F_PASS, W &&& 7, KL_MATCH): kh##W##_check_a(); \
        }                                                                                         \
        default_action = NoAction();                                                              \
        size = 8;                                                                                 \
    }

/* The slot indexes of the ways (a tuple's) or of the slot (a FLUSH's), a FLUSH's way, and a tuple's
 * first bridge fields (its key halves, NULL bits, count increment, whether it is tried), before
 * Admit's outcome is known: they change nothing, and way 0's stage (4) needs its index and `r` from
 * stage 3 on, Admit decides in stage 2. */
control WayIndex(inout headers_t hdr, inout metadata_t meta) {
    Hash<bit<16>>(HashAlgorithm_t.IDENTITY) flush_index;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash0;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash1;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash2;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash3;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash4;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash5;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash6;
    /* A tuple's NULL bits (the job table's action ANDed the null vector's first byte with each
     * mask: 0 or not), its count's increment, and whether the key is tried: a NULL key, or the one
     * key whose first half equals the tag (it would store the 0 of an empty slot), is not (a
     * bypass). One table of constants (first match wins: an entry for every set of fields that are
     * 0, most fields first), not a test per field. */
    action tuple_bits(bit<8> key_null_hit, bit<8> v0_null_hit, bit<8> v1_null_hit, bit<8> cnt_inc, bit<8> r) {
        hdr.bridge.key_null_hit = key_null_hit;
        hdr.bridge.v0_null_hit = v0_null_hit;
        hdr.bridge.v1_null_hit = v1_null_hit;
        hdr.bridge.cnt_inc = cnt_inc;
        hdr.bridge.r = r;
    }
    table tuple_nulls {
        key = { meta.key_nulls : ternary; meta.v0_nulls : ternary; meta.v1_nulls : ternary;
                meta.cnt_nulls : ternary; meta.klo : ternary; }
        actions = { tuple_bits; }
        const entries = {
            (0, 0, 0, 0, 0): tuple_bits(0, 0, 0, 1, KL_NONE); (0, 0, 0, 0, _): tuple_bits(0, 0, 0, 1, KL_MISS);
            (0, 0, 0, _, 0): tuple_bits(0, 0, 0, 0, KL_NONE); (0, 0, _, 0, 0): tuple_bits(0, 0, 1, 1, KL_NONE);
            (0, _, 0, 0, 0): tuple_bits(0, 1, 0, 1, KL_NONE); (_, 0, 0, 0, 0): tuple_bits(1, 0, 0, 1, KL_NONE);
            (0, 0, 0, _, _): tuple_bits(0, 0, 0, 0, KL_MISS); (0, 0, _, 0, _): tuple_bits(0, 0, 1, 1, KL_MISS);
            (0, 0, _, _, 0): tuple_bits(0, 0, 1, 0, KL_NONE); (0, _, 0, 0, _): tuple_bits(0, 1, 0, 1, KL_MISS);
            (0, _, 0, _, 0): tuple_bits(0, 1, 0, 0, KL_NONE); (0, _, _, 0, 0): tuple_bits(0, 1, 1, 1, KL_NONE);
            (_, 0, 0, 0, _): tuple_bits(1, 0, 0, 1, KL_NONE); (_, 0, 0, _, 0): tuple_bits(1, 0, 0, 0, KL_NONE);
            (_, 0, _, 0, 0): tuple_bits(1, 0, 1, 1, KL_NONE); (_, _, 0, 0, 0): tuple_bits(1, 1, 0, 1, KL_NONE);
            (0, 0, _, _, _): tuple_bits(0, 0, 1, 0, KL_MISS); (0, _, 0, _, _): tuple_bits(0, 1, 0, 0, KL_MISS);
            (0, _, _, 0, _): tuple_bits(0, 1, 1, 1, KL_MISS); (0, _, _, _, 0): tuple_bits(0, 1, 1, 0, KL_NONE);
            (_, 0, 0, _, _): tuple_bits(1, 0, 0, 0, KL_NONE); (_, 0, _, 0, _): tuple_bits(1, 0, 1, 1, KL_NONE);
            (_, 0, _, _, 0): tuple_bits(1, 0, 1, 0, KL_NONE); (_, _, 0, 0, _): tuple_bits(1, 1, 0, 1, KL_NONE);
            (_, _, 0, _, 0): tuple_bits(1, 1, 0, 0, KL_NONE); (_, _, _, 0, 0): tuple_bits(1, 1, 1, 1, KL_NONE);
            (0, _, _, _, _): tuple_bits(0, 1, 1, 0, KL_MISS); (_, 0, _, _, _): tuple_bits(1, 0, 1, 0, KL_NONE);
            (_, _, 0, _, _): tuple_bits(1, 1, 0, 0, KL_NONE); (_, _, _, 0, _): tuple_bits(1, 1, 1, 1, KL_NONE);
            (_, _, _, _, 0): tuple_bits(1, 1, 1, 0, KL_NONE); (_, _, _, _, _): tuple_bits(1, 1, 1, 0, KL_NONE);
        }
        default_action = tuple_bits(1, 1, 1, 0, KL_NONE);  /* (never: the last entry matches all) */
        size = 32;
    }
    WAY_HASH(0) WAY_HASH(1) WAY_HASH(2) WAY_HASH(3) WAY_HASH(4) WAY_HASH(5) WAY_HASH(6)
    WAY_BASE(OR_BASE(0) OR_BASE(1) OR_BASE(2) OR_BASE(3), 03) WAY_BASE(OR_BASE(4) OR_BASE(5) OR_BASE(6), 46)

    apply {
        /* FLUSH: seq = way << 16 | slot index in the job's block, little-endian: the way is bits
         * 2:0 of its third byte (hdr.ntu.seq[42:40]), the index its first two bytes (swapped by an
         * identity hash). The whole byte goes to the bridge (a cast to 8 bits would be two writes,
         * the second a stage later, and the index's OR a stage after it): the kl and kh tables
         * match its bits 2:0 (W &&& 7), egress tests them (way[2:0]) */
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            hdr.bridge.way = hdr.ntu.seq[47:40];  /* the way's byte; tables and tests read its bits 2:0 */
            meta.fi = flush_index.get({ hdr.ntu.seq[55:48], hdr.ntu.seq[63:56] }) & meta.mask;
            /* a FLUSH's index is every way's (kl<way>'s table takes its index from i<way> either
             * way) and the bridge's (kh<way>'s), written in this branch, exclusive with the ways'
             * hashes, which write them too (a write in the Aggregator would order way 0's table,
             * which writes the bridge's, a stage later) */
            meta.i0 = meta.fi | meta.base; meta.i1 = meta.fi | meta.base; meta.i2 = meta.fi | meta.base;
            meta.i3 = meta.fi | meta.base; meta.i4 = meta.fi | meta.base; meta.i5 = meta.fi | meta.base;
            meta.i6 = meta.fi | meta.base;
            hdr.bridge.idx = meta.fi | meta.base;
        } else if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {  /* this pass's tuple */
            /* the bridge fields the ways write are first written here, before Admit's outcome is
             * known (they change nothing when it fails: the bridge stays invalid), so that way 0
             * can start in stage 4; each once per branch */
            hdr.bridge.key_hi = meta.key[63:32];
            hdr.bridge.key_lo = meta.key[31:0];
            hdr.bridge.rh = KH_NONE;
            hdr.bridge.way = 0;  /* (the index: the way that is tried writes it) */
            tuple_nulls.apply();  /* the NULL bits, the count's increment, r */
            if (meta.klo != 0) {
                way_hash0.apply(); way_hash1.apply(); way_hash2.apply(); way_hash3.apply();
                way_hash4.apply(); way_hash5.apply(); way_hash6.apply();
            }
        }
        /* the ways' ORs, under a test of their own (klo is 0 without a tuple: a FLUSH's are above) */
        if (meta.klo != 0) {
            way_base03.apply(); way_base46.apply();
        }
    }
}

/* The ways' keys: kl<w> and kh<w> of every way (kl0 in stage 4 .. kh6 in 11). */
control Aggregator(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kl0;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kh0;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kl1;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kh1;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kl2;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kh2;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kl3;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kh3;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kl4;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kh4;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kl5;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kh5;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kl6;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kh6;
    KL_ACTIONS(0) KH_ACTIONS(0, meta.khi)
    KL_ACTIONS(1) KH_ACTIONS(1, meta.khi)
    KL_ACTIONS(2) KH_ACTIONS(2, meta.khi)
    KL_ACTIONS(3) KH_ACTIONS(3, meta.khi)
    KL_ACTIONS(4) KH_ACTIONS(4, meta.khi)
    KL_ACTIONS(5) KH_ACTIONS(5, meta.khi)
    KL_ACTIONS(6) KH_ACTIONS(6, meta.khi)
    TRY_WAY(0) KEY_WAY(0, hdr.bridge.rh) TRY_WAY(1) KEY_WAY(1, hdr.bridge.rh) TRY_WAY(2) KEY_WAY(2, hdr.bridge.rh)
    TRY_WAY(3) KEY_WAY(3, hdr.bridge.rh) TRY_WAY(4) KEY_WAY(4, hdr.bridge.rh) TRY_WAY(5) KEY_WAY(5, hdr.bridge.rh)
    TRY_WAY(6) KEY_WAY(6, hdr.bridge.rh)

    apply {
        /* the ways' indexes, a FLUSH's way, a tuple's first bridge fields: WayIndex; a FLUSH takes
         * way <way>'s key halves, a tuple tries the ways */
        kl0_t.apply(); kh0_t.apply(); kl1_t.apply(); kh1_t.apply(); kl2_t.apply(); kh2_t.apply();
        kl3_t.apply(); kh3_t.apply(); kl4_t.apply(); kh4_t.apply(); kl5_t.apply(); kh5_t.apply();
        kl6_t.apply(); kh6_t.apply();
    }
}

/* Per job and input stream: data datagrams received (on their first pass); per job: tuples taken
 * (a pass each). An END from a sender goes to the controller with its stream's count. */
control StreamCounters(inout headers_t hdr, inout metadata_t meta,
                       inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Register<bit<32>, bit<12>>(JG_STREAM_COUNTERS, 0) received;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) tuples;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) received_bytes;

    RegisterAction<bit<32>, bit<12>, bit<32>>(received) received_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    RegisterAction<bit<32>, bit<12>, bit<32>>(received) received_read = {
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(tuples) tuples_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    /* a pass's tuple counted (flags 0 or PASS): the test is the table's key, not a gateway around it
     * (Tofino 1 runs tables by next-table: the placement finishes a test's block before it goes on
     * with the sequence around it, the ways) */
    action tuples_inc_a() { tuples_inc.execute(meta.job); }
    @stage(TUPLES_STAGE)
    table tuples_t {
        key = { hdr.ntu.flags : ternary; }
        actions = { tuples_inc_a; NoAction; }
        const entries = { (0): tuples_inc_a(); (JG_F_PASS): tuples_inc_a(); }
        default_action = NoAction();
        size = 2;
    }
    /* an END's count, little-endian, into its header: a table on the flags too */
    action end_count_a() {
        hdr.end.received[63:32] = received_bytes.get(BYTES_REVERSED(meta.got));  /* little-endian u64 */
        hdr.end.received[31:0] = 0;
    }
    table end_count_t {
        key = { hdr.ntu.flags : ternary; }
        actions = { end_count_a; NoAction; }
        const entries = { (JG_F_END &&& JG_F_END): end_count_a(); }
        default_action = NoAction();
        size = 1;
    }
    /* the END's read and a datagram's count (on its first pass): one table of the register's two
     * RegisterActions */
    action received_read_a() { meta.got = received_read.execute(meta.counter); }
    action received_inc_a() { received_inc.execute(meta.counter); }
    @stage(RECEIVED_STAGE)
    table received_t {
        key = { hdr.ntu.flags : ternary; }
        actions = { received_read_a; received_inc_a; NoAction; }
        const entries = {
            (JG_F_END &&& JG_F_END): received_read_a();
            (0): received_inc_a();
        }
        default_action = NoAction();
        size = 2;
    }

    action receipt_a() { ig_dprsr_md.mirror_type = MIRROR_ANSWER; }
    table receipt_t {
        key = { meta.ring : exact; }
        actions = { receipt_a; NoAction; }
        const entries = { (1): receipt_a(); }
        default_action = NoAction();
        size = 1;
    }

    apply {
        /* the stream number is below 64 (Admit): its first wire byte's bits 5:0 */
        meta.counter = meta.job[5:0] ++ hdr.ntu.stream[29:24];
        received_t.apply();
        end_count_t.apply();
        tuples_t.apply();
        /* a version 2 sender's answer (SeenRing): a data datagram's receipt (taken now; a repeat's
         * is SwitchIngress's), and an END's once the switch has taken every datagram before it
         * (`received` equals its number; else its sender repeats what is missing and the END) */
        receipt_t.apply();
        if (meta.v2 == 1 && hdr.end.received[63:32] == hdr.ntu.seq[63:32]) {  /* (v2: SeenRing's v2_t) */
            ig_dprsr_md.mirror_type = MIRROR_ANSWER;
        }
    }
}

/* Version 2 (acknowledged) input streams (docs/udp-transport.md, "A switch in a version 2 path"),
 * as the BMv2 program's SeenRing and the model: a version 2 datagram is made a version 1 one for the
 * rest of the pipeline (its records go out in the switch's own version 1 stream); its mirror copy,
 * made by the ingress deparser (mirror session JG_RECEIPT_SESSION_BASE + its ingress port: the
 * datagram as it arrived), becomes its sender's answer in the egress pipe (control Answer). The
 * ring `seen`: a cell per sequence number modulo JG_SEEN per (job, stream), holding the mark of
 * the datagram last taken in it, its pass over the ring counted from 1; a data datagram whose mark
 * is not newer than its cell's, (int16)(cell - mark) >= 0, was taken before (also a repeat held
 * back past a later pass over the cell, which the senders' window of JG_SEEN datagrams allows):
 * it is dropped and counted in `repeats`; otherwise the cell takes its mark. */
control SeenRing(inout headers_t hdr, inout metadata_t meta) {
    Register<int<16>, bit<18>>(JG_SEEN_CELLS, 0) seen;
    /* the cell: (job * JG_MAX_STREAMS + stream) * JG_SEEN + seq mod JG_SEEN, each below 64 (the
     * stream: Admit refuses another; its first wire byte's 5:0), the sequence number's first wire
     * byte's 5:0 */
    Hash<bit<18>>(HashAlgorithm_t.IDENTITY) cell_index;

    /* the mark's test and its write in one stateful ALU: the subtraction's sign, as BMv2's */
    RegisterAction<int<16>, bit<18>, bit<8>>(seen) seen_mark = {
        void apply(inout int<16> v, out bit<8> rep) {
            if (v - (int<16>)meta.mark >= 0) { rep = 1; } else { v = (int<16>)meta.mark; rep = 0; }
        }
    };

    /* the mark counts the ring's passes from 1 (0: an empty cell, older than any pass) */
    action mark_a() {
        meta.mark = meta.mark + 1;
        hdr.ntu.magic = JG_UDP_MAGIC_BE;  /* (the rest of the version 1 header: SwitchIngress's v2_t) */
        hdr.ntu.zero = 0;
    }
    table mark_t {
        key = { meta.ring : exact; }
        actions = { mark_a; NoAction; }
        const entries = { (1): mark_a(); }
        default_action = NoAction();
        size = 1;
    }
    action seen_a() {
        meta.repeat = seen_mark.execute(cell_index.get({ meta.job[5:0], hdr.ntu.stream[29:24], hdr.ntu.seq[61:56] }));
    }
    @stage(SEEN_STAGE)
    table seen_t {
        key = { meta.ring : exact; }
        actions = { seen_a; NoAction; }
        const entries = { (1): seen_a(); }
        default_action = NoAction();
        size = 1;
    }

    apply {
        mark_t.apply();
        seen_t.apply();
    }
}

/* Per job: the version 2 data datagrams the ring dropped as taken before (SeenRing's outcome). A
 * control of its own, applied at the end of the ways' sequence (its stage, 11, has a stateful ALU
 * left), not in SeenRing's block, which the ways wait for. */
control RepeatCounter(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) repeats;
    RegisterAction<bit<32>, bit<8>, bit<32>>(repeats) repeats_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    action repeats_a() { repeats_inc.execute(meta.job); }
    @stage(REPEATS_STAGE)
    table repeats_t {
        key = { meta.repeat : exact; }
        actions = { repeats_a; NoAction; }
        const entries = { (1): repeats_a(); }
        default_action = NoAction();
        size = 1;
    }

    apply {
        repeats_t.apply();
    }
}

control SwitchIngress(inout headers_t hdr, inout metadata_t meta,
                      in ingress_intrinsic_metadata_t ig_intr_md,
                      in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                      inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                      inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    JobConfig() job_config;
    WayIndex() way_index;
    ValueSelect() value_select;
    Output() output;
    Admit() admit;
    Aggregator() aggregator;
    StreamCounters() counters;
    SeenRing() seen_ring;
    RepeatCounter() repeat_counter;
    /* the mark's bits, (seq >> JG_SEEN_BITS) mod 2^16 of the little-endian u64: bits 21:16 of the
     * number are its third wire byte's 5:0, 15:8 its second byte, 7:6 its first byte's 7:6 */
    Hash<bit<16>>(HashAlgorithm_t.IDENTITY) mark_bits;
    /* A version 2 datagram: a data datagram (a first copy or a repeat, RETX) is made version 1
     * data for the rest of the pipeline (its flags 0 here, in stage 0, beside the job table: every
     * test of the flags from stage 1 on sees them, Admit's in stage 1 among them; its magic and
     * timestamp once the job is known, SeenRing's mark_t), goes through the ring (SeenRing) and is
     * answered with a receipt; an END is answered once every datagram before it was taken
     * (StreamCounters). A datagram to no job's port gets its flags back (the `forward` branch): it
     * is some host's, passing through. */
    action v2_data(bit<8> retx) {
        meta.v2 = 1;
        meta.ring = 1;
        meta.retx = retx;
        hdr.ntu.flags = 0;
        meta.mark = mark_bits.get({ hdr.ntu.seq[45:40], hdr.ntu.seq[55:48], hdr.ntu.seq[63:62] });
        meta.session = (bit<10>)ig_intr_md.ingress_port | JG_RECEIPT_SESSION_BASE;
        meta.answer = ANSWER_KIND;
    }
    action v2_end() {
        meta.v2 = 1;
        meta.session = (bit<10>)ig_intr_md.ingress_port | JG_RECEIPT_SESSION_BASE;
        meta.answer = ANSWER_KIND;
    }
    @stage(0)
    table v2_t {
        key = { hdr.ntu.magic : exact; hdr.ntu.flags : ternary; hdr.ntu.seq[31:0] : ternary; }
        actions = { v2_data; v2_end; NoAction; }
        /* an END's number's high word (its last four wire bytes) must be 0 to equal a 32-bit
         * `received`: tested here, the rest by StreamCounters (a gateway compares 4 bytes at most) */
        const entries = {
            (JG_UDP_MAGIC2_BE, 0, _): v2_data(0);
            (JG_UDP_MAGIC2_BE, JG_F_RETX, _): v2_data(1);
            (JG_UDP_MAGIC2_BE, JG_F_END &&& JG_F_END, 0): v2_end();
        }
        default_action = NoAction();
        size = 4;
    }
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) stream_bytes;
    /* the output stream's number as wire bytes, for the bridge (written before the bridge is made
     * valid: on Tofino that sets its validity bit and leaves the fields as they are; a datagram
     * whose bridge stays invalid never sends it). In the first block, stage 4: two of its hash
     * outputs (the ways' first stage leaves four), so that stages 5..11 have theirs for the values'
     * numbers, the ways and the output's numbers (docs/switch.md, step 38) */
    action out_stream_a() { hdr.bridge.out_stream = stream_bytes.get(BYTES_REVERSED(meta.out_stream)); }
    @stage(4)
    table out_stream_t { actions = { out_stream_a; } default_action = out_stream_a(); size = 1; }
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) x0_bytes;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) x1_bytes;
    action x0_a() { hdr.bridge.x0 = x0_bytes.get(BYTES_REVERSED(meta.v0w[63:32])); }
    @stage(5)
    table x0_t { actions = { x0_a; } default_action = x0_a(); size = 1; }
    action x1_a() { hdr.bridge.x1 = x1_bytes.get(BYTES_REVERSED(meta.v1w[63:32])); }
    @stage(6)
    table x1_t { actions = { x1_a; } default_action = x1_a(); size = 1; }

    /* out of `port` to the host at `dst_mac`, from the MAC the frame was sent to (the switch's) */
    action send(PortId_t port, bit<48> dst_mac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = dst_mac;
    }
    action drop() { ig_dprsr_md.drop_ctl = 1; }
    /* to the controller, from here (a notice: an END, a refused datagram): the egress pipe has
     * nothing to add */
    action to_controller() {
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.udp.src_port = hdr.udp.dst_port;
        hdr.ipv4.dst_addr = meta.ctrl_ip;
        hdr.udp.dst_port = meta.ctrl_port;
        hdr.udp.checksum = 0;
        hdr.ipv4.total_len = hdr.udp.len + 20;
        ig_tm_md.bypass_egress = 1;
    }
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
        bit<1> more = 0;
        bit<1> is_end = 0;
        bit<1> fwd = 0;  /* forward applied once, at the end (a table applied in several places
                          * must end the control flow) */
        meta.recirculated = 0;
        if (ig_intr_md.ingress_port == RECIRC_PORT) { meta.recirculated = 1; }
        if (hdr.ntu.isValid()) {
            job_config.apply(hdr, meta, hit);
            v2_t.apply();
        }
        /* Two blocks under `hit`: the ways' indexes, Admit and Output; then the ways, the counters,
         * the bridge and the egress port, in Admit's branches. On Tofino 1 a block that reads what
         * an earlier block of its sequence writes (the ways read Admit's `ok`) waits for that whole
         * block, so the first ends with Admit (stage 3) and Output; what the port and the bridge
         * need of it is known by then, and they follow the ways in the second block's sequence
         * without waiting for them (they read nothing the ways write) */
        if (hit) {
            /* tuples remain after this pass's, or a sender's END: tested here, on the flags as
             * parsed (a version 2 sender's made version 1), not where the egress port is chosen (after ERROR may have been added
             * to the flags, which would order that choice after every table of the ways) */
            if ((hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) && hdr.ntu.count[15:8] > 1) { more = 1; }
            if ((hdr.ntu.flags & JG_F_END) != 0) { is_end = 1; }
            way_index.apply(hdr, meta);
            admit.apply(hdr, meta, ok);
            output.apply(hdr, meta);
            out_stream_t.apply();
            /* the values to the egress pipe (ValueSelect, in stage 3: it reads only the job) and,
             * in the ways' block, as numbers for its sums (x0_t, x1_t). Whatever else passes here
             * (a FLUSH, a FINISH, an END, a datagram Admit refuses) has no tuple: the egress pipe
             * reads none of these for it, and an invalid bridge is not sent */
            value_select.apply(hdr, meta);
            hdr.bridge.v0w = meta.v0w;
            hdr.bridge.v1w = meta.v1w;
            /* a version 2 data datagram through the ring, in stage 3 (its outcome `repeat` gates
             * the ways, from stage 4): last in this block, which holds nothing else back */
            seen_ring.apply(hdr, meta);
        } else if (hdr.ipv4.isValid()) {
            ig_tm_md.bypass_egress = 1;
            fwd = 1;
            if (meta.retx == 1) { hdr.ntu.flags = JG_F_RETX; }  /* a host's repeat, passing through (v2_t) */
        }
        if (hit) {
            /* a version 2 data datagram the ring has seen taken (`repeat`, SeenRing) is dropped,
             * and answered (its receipt: a lost receipt costs a repeat); one Admit refuses goes to
             * the controller as any other */
            if (ok && meta.repeat == 0) {
                aggregator.apply(hdr, meta);
                counters.apply(hdr, meta, ig_dprsr_md);
                /* the values as numbers for the egress sums (their first four wire bytes reversed: a
                 * slot's sum takes values inside (-2^30, 2^30), whose high word is the sign): here,
                 * not in egress stage 0, whose hash outputs then go to the register arrays' indexes
                 * (even one there moves the counts to stage 1); one table each (an action's
                 * immediate pathway takes one 32-bit hash output), in stages 5 and 6, where the ways
                 * leave two hash outputs. In this sequence, not under a test of the flags: Tofino 1
                 * runs tables by next-table, so once a nested block's first table is placed the
                 * placement finishes that block before it goes on with the sequence around it (the
                 * ways), and a block ending in stage 7 held the ways back (docs/switch.md, "Does it
                 * fit one Tofino pipe?", step 35) */
                x0_t.apply();
                x1_t.apply();
                if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {
                    /* the tuple out of the datagram (Emit counts its bytes): the egress parser does
                     * not reach it */
                    hdr.tlen.setInvalid(); hdr.nulls.setInvalid();
                    hdr.w0.setInvalid(); hdr.w1.setInvalid(); hdr.w2.setInvalid(); hdr.w3.setInvalid();
                    hdr.w4.setInvalid(); hdr.w5.setInvalid(); hdr.w6.setInvalid(); hdr.w7.setInvalid();
                }
                /* what the switch sends leaves from the address and port it was sent to (the
                 * switch's data address, the job's port), as a host's answer would: its receivers'
                 * route back to the source is the switch, which reverse-path filters check */
                if (is_end == 1) {
                    to_controller();  /* a sender's END, with its stream's count (counters) */
                    fwd = 1;
                } else {
                    /* what the egress pipe reads of every datagram is written here (a header's
                     * fields are not zeroed); what the ways write (r, rh, way, idx, the key, the NULL
                     * bits) is written first by the Aggregator's branch that needs it */
                    hdr.bridge.setValid();
                    hdr.bridge.job = meta.job;
                    hdr.bridge.tag = meta.tag;
                    hdr.bridge.len_d0 = meta.len_d0;
                    hdr.bridge.int32s = meta.flags & 3;  /* bit 0: value 0 is an int32, bit 1: value 1 */
                    hdr.bridge.out_words = meta.out_words;
                    hdr.bridge.s0_out_null = meta.s0_out_null;
                    hdr.bridge.s1_out_null = meta.s1_out_null;
                    /* bits 1:0, which is all that the egress parser reads: a cast would be written
                     * as two slices, each action after the one before */
                    hdr.bridge.o0[1:0] = meta.o0;
                    hdr.bridge.o1[1:0] = meta.o1;
                    hdr.bridge.o2[1:0] = meta.o2;
                    if (more == 1) {
                        /* tuples remain: the next pass, out of the recirculation port (the egress
                         * pipe takes this pass's counts and sums on the way) and back into this
                         * ingress */
                        ig_tm_md.ucast_egress_port = RECIRC_PORT;
                    } else {
                        /* the last pass, a FLUSH, a FINISH: the egress pipe makes it the
                         * destination's datagram, or drops it when it leaves nothing */
                        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
                        hdr.udp.src_port = hdr.udp.dst_port;
                        hdr.ipv4.dst_addr = meta.dst_ip;
                        hdr.udp.dst_port = meta.dst_port;
                        fwd = 1;
                    }
                }
            } else if (ok) {
                ig_dprsr_md.drop_ctl = 1;  /* (the unicast copy: not the mirror copy) */
                ig_dprsr_md.mirror_type = MIRROR_ANSWER;
            } else {
                /* not tuples of the job's layout: to the controller, flagged ERROR (in the branch
                 * exclusive with everything that tests the flags: a write after them in a later
                 * block would order that block after them). (SeenRing decides in Admit's stage: a
                 * version 2 datagram refused here has marked its cell, which the model and the
                 * BMv2 program leave alone; the job fails on the ERROR either way.) Not a repeat */
                hdr.ntu.flags = hdr.ntu.flags | JG_F_ERROR;
                meta.repeat = 0;
                to_controller();
                fwd = 1;
            }
            repeat_counter.apply(hdr, meta);
        }
        /* last in the control flow: Tofino 1 places a table no earlier than the tables and tests
         * before it in its sequence, and the ways' first stage (4) cannot wait for this one's */
        if (fwd == 1) { forward.apply(); }
    }
}

control SwitchIngressDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                              in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum;
    Mirror() mirror;

    apply {
        /* a version 2 sender's answer: a copy of the datagram as it arrived, to the mirror session
         * of its ingress port (JG_RECEIPT_SESSION_BASE + port; the operator's or the backend's,
         * which cuts it to the header: its max_pkt_len), made the answer by the egress pipe */
        if (ig_dprsr_md.mirror_type == MIRROR_ANSWER) {
            mirror.emit<answer_h>(meta.session, { meta.answer });
        }
        hdr.ipv4.hdr_checksum = ipv4_checksum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification,
            hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr,
            hdr.ipv4.dst_addr });
        pkt.emit(hdr);  /* every valid header, in headers_t order: the bridge first */
    }
}

/* ------------------------------------------------------------------ egress */

parser SwitchEgressParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                          out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        meta = { ... };
        pkt.extract(eg_intr_md);
        /* a version 2 sender's answer (its mirror header) or what the ingress pipe sent on (its
         * bridge header, whose first byte, the job, is below 64) */
        transition select(pkt.lookahead<bit<8>>()) {
            ANSWER_KIND: eg_answer;
            default: eg_bridged;
        }
    }
    /* the datagram as it arrived, up to its NTU header: the rest (its tuples, an END's payload) is
     * cut off by its mirror session (max_pkt_len) */
    state eg_answer {
        pkt.advance(8);
        meta.answer = 1;
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.ntu);
        transition accept;
    }
    state eg_bridged {
        pkt.extract(hdr.bridge);  /* every datagram the ingress pipe sends here carries it */
        meta.job = hdr.bridge.job;
        meta.len_d0 = hdr.bridge.len_d0;
        meta.out_words = hdr.bridge.out_words;
        meta.s0_out_null = hdr.bridge.s0_out_null;
        meta.s1_out_null = hdr.bridge.s1_out_null;
        meta.o0 = hdr.bridge.o0[1:0];
        meta.o1 = hdr.bridge.o1[1:0];
        meta.o2 = hdr.bridge.o2[1:0];
        /* a record's bytes, 20 + 8 x out_words (what Output's rec_lens sets in ingress): set here,
         * not bridged (the egress parser's 160 bytes) */
        transition select(hdr.bridge.out_words) {
            0: eg_rec_len0;
            1: eg_rec_len1;
            2: eg_rec_len2;
            default: eg_rec_len3;
        }
    }
    state eg_rec_len0 { meta.rec_len = 20; transition eg_ethernet; }
    state eg_rec_len1 { meta.rec_len = 28; transition eg_ethernet; }
    state eg_rec_len2 { meta.rec_len = 36; transition eg_ethernet; }
    state eg_rec_len3 { meta.rec_len = 44; transition eg_ethernet; }
    /* up to the pass header (or a FINISH's payload): the earlier records and the tuples still to
     * come stay payload (Tofino 1's egress parser reads at most 160 bytes; the tuple of this pass
     * left the datagram in ingress) */
    state eg_ethernet { pkt.extract(hdr.ethernet); transition eg_ipv4; }
    state eg_ipv4 { pkt.extract(hdr.ipv4); transition eg_udp; }
    state eg_udp { pkt.extract(hdr.udp); transition eg_ntu; }
    state eg_ntu {
        pkt.extract(hdr.ntu);
        transition select(hdr.ntu.flags) {
            JG_F_PASS: eg_pass;
            JG_F_FINISH &&& JG_F_FINISH: eg_finish;
            default: accept;
        }
    }
    /* what Passes and SwitchEgress would otherwise set in the first stages: the datagram's records
     * so far, and a FINISH's output kind (meta is 0 otherwise: n_rec, rec_bytes, OUT_NONE) */
    state eg_pass {
        pkt.extract(hdr.pass);
        meta.n_rec = hdr.pass.records;
        meta.rec_bytes = hdr.pass.bytes;
        transition accept;
    }
    state eg_finish { pkt.extract(hdr.finish); meta.out_kind = OUT_END; transition accept; }
}

/* The count and sums of way W: cn<W> starts at the tuple's count (a claim) or counts it (spilling
 * at JG_COUNT_SPILL); s0_/s1_<W> add a value or refuse it; a FLUSH takes each (reads and clears
 * it; a sum's output is the sum itself, register - bias, which is -2^30 exactly for an empty one). */
#define VALUE_ACTIONS(W)                                                                          \
    RegisterAction<bit<32>, bit<16>, bit<8>>(cn##W) cn##W##_claim = {                            \
        void apply(inout bit<32> v, out bit<8> r) { v = (bit<32>)hdr.bridge.cnt_inc; r = CN_COUNTED; } \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<8>>(cn##W) cn##W##_count = {                            \
        void apply(inout bit<32> v, out bit<8> r) {                                               \
            if (v >= JG_COUNT_SPILL) { v = 0; r = CN_SPILL; }                                     \
            else { v = v + (bit<32>)hdr.bridge.cnt_inc; r = CN_COUNTED; }                         \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<32>>(cn##W) cn##W##_take = {                            \
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }                          \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<8>>(s0_##W) s0_##W##_add = {                            \
        void apply(inout bit<32> v, out bit<8> rej) {                                             \
            if (v == 0) { v = hdr.bridge.x0 + JG_SUM_BIAS; rej = 0; }                                   \
            else if (v + meta.x0m1 < JG_SUM_SPAN) { v = v + hdr.bridge.x0; rej = 0; }                   \
            else { rej = 1; }                                                                     \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<32>>(s0_##W) s0_##W##_take = {                          \
        void apply(inout bit<32> v, out bit<32> old) { old = v - JG_SUM_BIAS; v = 0; }            \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<8>>(s1_##W) s1_##W##_add = {                            \
        void apply(inout bit<32> v, out bit<8> rej) {                                             \
            if (v == 0) { v = hdr.bridge.x1 + JG_SUM_BIAS; rej = 0; }                                   \
            else if (v + meta.x1m1 < JG_SUM_SPAN) { v = v + hdr.bridge.x1; rej = 0; }                   \
            else { rej = 1; }                                                                     \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<32>>(s1_##W) s1_##W##_take = {                          \
        void apply(inout bit<32> v, out bit<32> old) { old = v - JG_SUM_BIAS; v = 0; }            \
    };

/* Way W's count and sums: one table per register array, whose actions are the array's
 * RegisterActions (a stateful ALU holds up to four programs, and the table's entry chooses one),
 * chosen by constant entries on the flags, the way's kh outcome RH and, for a sum, the value's NULL
 * bit and range test: a FLUSH takes it, a tuple of the key that holds the slot claims or counts
 * (spilling at JG_COUNT_SPILL) and adds (a NULL value leaves its sum alone, a value outside
 * (-2^30, 2^30) goes on in a spill record, `refuse`). The way's test is the gateway of its three
 * tables, and the ways are an else-chain (they exclude each other: their writes of the same fields
 * need no order). */
#define COUNT_WAY(W, RH)                                                                            \
    action cn##W##_take_a() { meta.fl_c = cn##W##_take.execute(hdr.bridge.idx); }                \
    action cn##W##_claim_a() { cn##W##_claim.execute(hdr.bridge.idx); }                          \
    action cn##W##_count_a() { meta.rc = cn##W##_count.execute(hdr.bridge.idx); }                 \
    @stage(CN_STAGE_##W)                                                                          \
    table cn##W##_t {                                                                             \
        key = { hdr.ntu.flags : ternary; RH : ternary; }                                          \
        actions = { cn##W##_take_a; cn##W##_claim_a; cn##W##_count_a; NoAction; }                 \
        const entries = {                                                                         \
            (JG_F_FLUSH &&& JG_F_FLUSH, _): cn##W##_take_a();                                      \
            (0, KH_FRESH): cn##W##_claim_a(); (JG_F_PASS, KH_FRESH): cn##W##_claim_a();            \
            (0, KH_SAME): cn##W##_count_a(); (JG_F_PASS, KH_SAME): cn##W##_count_a();              \
        }                                                                                         \
        default_action = NoAction();                                                              \
        size = 8;                                                                                 \
    }
#define SUM_TABLE(S, W, RH, N)                                                                      \
    action S##_##W##_take_a() { meta.fl_t##N = S##_##W##_take.execute(hdr.bridge.idx); }         \
    action S##_##W##_add_a() { meta.rej##N = (bit<1>)S##_##W##_add.execute(hdr.bridge.idx); }   \
    @stage(S##_STAGE_##W)                                                                         \
    table S##_##W##_t {                                                                           \
        key = { hdr.ntu.flags : ternary; RH : ternary; hdr.bridge.v##N##_null_hit : ternary;       \
                meta.fit##N : ternary; }                                                          \
        actions = { S##_##W##_take_a; S##_##W##_add_a; refuse##N; NoAction; }                     \
        const entries = {                                                                         \
            (JG_F_FLUSH &&& JG_F_FLUSH, _, _, _): S##_##W##_take_a();                              \
            (0, KH_FRESH, 0, 1): S##_##W##_add_a(); (0, KH_FRESH, 0, 0): refuse##N();               \
            (0, KH_SAME, 0, 1): S##_##W##_add_a(); (0, KH_SAME, 0, 0): refuse##N();                 \
            (JG_F_PASS, KH_FRESH, 0, 1): S##_##W##_add_a(); (JG_F_PASS, KH_FRESH, 0, 0): refuse##N(); \
            (JG_F_PASS, KH_SAME, 0, 1): S##_##W##_add_a(); (JG_F_PASS, KH_SAME, 0, 0): refuse##N(); \
        }                                                                                         \
        default_action = NoAction();                                                              \
        size = 16;                                                                                \
    }
#define SUM_WAY(W, RH) SUM_TABLE(s0, W, RH, 0) SUM_TABLE(s1, W, RH, 1)
#define VALUES_AT(W) if (hdr.bridge.way[2:0] == W) { cn##W##_t.apply(); s0_##W##_t.apply(); s1_##W##_t.apply(); }

/* -2^30 < v < 2^30 for value N (its wire bytes v<N>w, int32 flag: bit I32V of the bridged byte),
 * fit<N> = 1: the first wire word's top two bits (the number's bits 31:30) equal, and the high word
 * equal to them (an int32's is its sign extension), and not -2^30 itself (wire 00 00 00 c0, then
 * ff ff ff ff); and an int32 value's high word made its sign (the record's int64). One table of
 * constants (first match wins), not a test per comparison. */
#define FIT_TABLE(N, I32V)                                                                          \
    action fit##N##_pos() { meta.fit##N = 1; meta.v##N##w[31:0] = 0; }                             \
    action fit##N##_neg() { meta.fit##N = 1; meta.v##N##w[31:0] = 0xffffffff; }                    \
    action sign##N##_pos() { meta.v##N##w[31:0] = 0; }                                             \
    action sign##N##_neg() { meta.v##N##w[31:0] = 0xffffffff; }                                    \
    action fit##N##_only() { meta.fit##N = 1; }                                                    \
    table fit##N {                                                                                \
        key = { meta.v##N##w[63:32] : ternary; meta.v##N##w[31:0] : ternary;                       \
                hdr.bridge.int32s : ternary; }                                                    \
        actions = { fit##N##_pos; fit##N##_neg; sign##N##_pos; sign##N##_neg; fit##N##_only; NoAction; } \
        const entries = {                                                                         \
            (0x000000c0, _, I32V &&& I32V): sign##N##_neg();                                       \
            (0x000000c0, _, _): NoAction();                                                        \
            (0x00000000 &&& 0x000000c0, _, I32V &&& I32V): fit##N##_pos();                         \
            (0x000000c0 &&& 0x000000c0, _, I32V &&& I32V): fit##N##_neg();                         \
            (0x00000080 &&& 0x00000080, _, I32V &&& I32V): sign##N##_neg();                        \
            (0x00000000 &&& 0x00000080, _, I32V &&& I32V): sign##N##_pos();                        \
            (0x00000000 &&& 0x000000c0, 0x00000000, 0 &&& I32V): fit##N##_only();                 \
            (0x000000c0 &&& 0x000000c0, 0xffffffff, 0 &&& I32V): fit##N##_only();                 \
        }                                                                                         \
        default_action = NoAction();                                                              \
        size = 8;                                                                                 \
    }

/* A record of this pass: its bytes and itself counted into the datagram's (Passes does that on
 * BMv2; PASS_REC_COUNTED), in the action that decides it */
#define REC_COUNTED meta.rec = 1; meta.n_rec = meta.n_rec + 1; meta.rec_bytes = meta.rec_bytes + meta.rec_len;

/* The slots' counts and sums: the egress half of the slot table. */
control Accumulator(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) cn0;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s0_0;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s1_0;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) cn1;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s0_1;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s1_1;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) cn2;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s0_2;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s1_2;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) cn3;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s0_3;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s1_3;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) cn4;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s0_4;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s1_4;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) cn5;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s0_5;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s1_5;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) cn6;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s0_6;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s1_6;
    VALUE_ACTIONS(0) VALUE_ACTIONS(1) VALUE_ACTIONS(2) VALUE_ACTIONS(3)
    VALUE_ACTIONS(4) VALUE_ACTIONS(5) VALUE_ACTIONS(6)
    action refuse0() { meta.rej0 = 1; }
    action refuse1() { meta.rej1 = 1; }
    COUNT_WAY(0, hdr.bridge.rh) SUM_WAY(0, hdr.bridge.rh) COUNT_WAY(1, hdr.bridge.rh) SUM_WAY(1, hdr.bridge.rh)
    COUNT_WAY(2, hdr.bridge.rh) SUM_WAY(2, hdr.bridge.rh) COUNT_WAY(3, hdr.bridge.rh) SUM_WAY(3, hdr.bridge.rh)
    COUNT_WAY(4, hdr.bridge.rh) SUM_WAY(4, hdr.bridge.rh) COUNT_WAY(5, hdr.bridge.rh) SUM_WAY(5, hdr.bridge.rh)
    COUNT_WAY(6, hdr.bridge.rh) SUM_WAY(6, hdr.bridge.rh)
    FIT_TABLE(0, 1) FIT_TABLE(1, 2)
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) c_bytes;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) t0_bytes;
    /* a flushed slot's count as wire bytes (little-endian u64), in stage 7, where the ways leave
     * two hash outputs (stage 8's go to the sum's) */
    action c_a() { meta.r_count[63:32] = c_bytes.get(BYTES_REVERSED(meta.fl_c)); }
    @stage(7)
    table c_t { actions = { c_a; } default_action = c_a(); size = 1; }

    /* The record's decision, one table of constants (first match wins), not a test per field:
     *
     * A spill record: what the slot could not take (a count spills at exactly JG_COUNT_SPILL, plus
     * this tuple's: little-endian constants; a value its sum refused), the other sums NULL. Only a
     * key that holds a slot has a count's or a sum's outcome (rc, rej0, rej1 are 0 otherwise): its
     * entries come first and need nothing else.
     *
     * A tuple whose key holds no slot (a NULL key, no room, another key with the same first half):
     * it goes on as a partial row of its own, its count 1 (little-endian) or 0, a value its own or
     * NULL. The key holds a slot when its way's kh said so, KH_SAME or KH_FRESH (bit 0 set): kh<w>'s
     * outcome (bridge.rh), KH_NONE when no way took the key. (The null byte OR'ed from the job's bits, s01_out_null both of them.)
     *
     * One table, not a bypass table and a spill table a stage after it (they write the same
     * fields), so that the output's counters are two stages after the ways' last sums. */
#define R_S0 meta.r_s0 = meta.v0w;
#define R_S1 meta.r_s1 = meta.v1w;
    action bypass_000(bit<64> c) { meta.bypass = 1; REC_COUNTED meta.r_count = c; R_S0 R_S1 }
    action bypass_001(bit<64> c) { meta.bypass = 1; REC_COUNTED meta.r_count = c; R_S0 meta.r_nulls = meta.s1_out_null; }
    action bypass_010(bit<64> c) { meta.bypass = 1; REC_COUNTED meta.r_count = c; R_S1 meta.r_nulls = meta.s0_out_null; }
    action bypass_011(bit<64> c) { meta.bypass = 1; REC_COUNTED meta.r_count = c; meta.r_nulls = meta.s01_out_null; }
    action bypass_100(bit<64> c) { meta.bypass = 1; REC_COUNTED meta.r_count = c; R_S0 R_S1 meta.r_nulls = 1; }
    action bypass_101(bit<64> c) { meta.bypass = 1; REC_COUNTED meta.r_count = c; R_S0 meta.r_nulls = 1 | meta.s1_out_null; }
    action bypass_110(bit<64> c) { meta.bypass = 1; REC_COUNTED meta.r_count = c; R_S1 meta.r_nulls = 1 | meta.s0_out_null; }
    action bypass_111(bit<64> c) { meta.bypass = 1; REC_COUNTED meta.r_count = c; meta.r_nulls = 1 | meta.s01_out_null; }
    action spill_00(bit<64> c) { meta.r_count = c; meta.r_nulls = meta.s01_out_null; meta.spilled = 1; REC_COUNTED }
    action spill_10(bit<64> c) { meta.r_count = c; R_S0 meta.r_nulls = meta.s1_out_null; meta.spilled = 1; REC_COUNTED }
    action spill_01(bit<64> c) { meta.r_count = c; R_S1 meta.r_nulls = meta.s0_out_null; meta.spilled = 1; REC_COUNTED }
    action spill_11(bit<64> c) { meta.r_count = c; R_S0 R_S1 meta.spilled = 1; REC_COUNTED }
    table decision {
        key = { meta.rc : ternary; meta.rej0 : ternary; meta.rej1 : ternary; hdr.bridge.cnt_inc : ternary;
                hdr.bridge.rh : ternary;
                hdr.bridge.key_null_hit : ternary; hdr.bridge.v0_null_hit : ternary; hdr.bridge.v1_null_hit : ternary; }
        actions = { bypass_000; bypass_001; bypass_010; bypass_011; bypass_100; bypass_101; bypass_110; bypass_111;
                    spill_00; spill_10; spill_01; spill_11; NoAction; }
        const entries = {
            (CN_COUNTED, 1, 1, _, _, _, _, _): spill_11(0);
            (CN_COUNTED, 1, 0, _, _, _, _, _): spill_10(0);
            (CN_COUNTED, 0, 1, _, _, _, _, _): spill_01(0);
            (CN_SPILL, 0, 0, 1, _, _, _, _): spill_00(0x0000008000000000);
            (CN_SPILL, 0, 0, 0, _, _, _, _): spill_00(0xffffff7f00000000);
            (CN_SPILL, 1, 0, 1, _, _, _, _): spill_10(0x0000008000000000);
            (CN_SPILL, 1, 0, 0, _, _, _, _): spill_10(0xffffff7f00000000);
            (CN_SPILL, 0, 1, 1, _, _, _, _): spill_01(0x0000008000000000);
            (CN_SPILL, 0, 1, 0, _, _, _, _): spill_01(0xffffff7f00000000);
            (CN_SPILL, 1, 1, 1, _, _, _, _): spill_11(0x0000008000000000);
            (CN_SPILL, 1, 1, 0, _, _, _, _): spill_11(0xffffff7f00000000);
            (_, _, _, 0, 0 &&& 1, 0, 0, 0): bypass_000(0);
            (_, _, _, 0, 0 &&& 1, 0, 0, 1): bypass_001(0);
            (_, _, _, 0, 0 &&& 1, 0, 1, 0): bypass_010(0);
            (_, _, _, 0, 0 &&& 1, 0, 1, 1): bypass_011(0);
            (_, _, _, 0, 0 &&& 1, 1, 0, 0): bypass_100(0);
            (_, _, _, 0, 0 &&& 1, 1, 0, 1): bypass_101(0);
            (_, _, _, 0, 0 &&& 1, 1, 1, 0): bypass_110(0);
            (_, _, _, 0, 0 &&& 1, 1, 1, 1): bypass_111(0);
            (_, _, _, 1, 0 &&& 1, 0, 0, 0): bypass_000(0x0100000000000000);
            (_, _, _, 1, 0 &&& 1, 0, 0, 1): bypass_001(0x0100000000000000);
            (_, _, _, 1, 0 &&& 1, 0, 1, 0): bypass_010(0x0100000000000000);
            (_, _, _, 1, 0 &&& 1, 0, 1, 1): bypass_011(0x0100000000000000);
            (_, _, _, 1, 0 &&& 1, 1, 0, 0): bypass_100(0x0100000000000000);
            (_, _, _, 1, 0 &&& 1, 1, 0, 1): bypass_101(0x0100000000000000);
            (_, _, _, 1, 0 &&& 1, 1, 1, 0): bypass_110(0x0100000000000000);
            (_, _, _, 1, 0 &&& 1, 1, 1, 1): bypass_111(0x0100000000000000);
        }
        default_action = NoAction();  /* a key that holds its slot, and the slot took it all */
        size = 32;
    }

    /* A flushed slot's null byte and its sums' sign words: a sum's output is register - bias, which
     * is -2^30 (0xc0000000) when it had no value (NULL); a negative sum's high word is all ones.
     * Its entries test NULL first (0xc0000000 is negative too). */
    action fl_nn() { meta.r_nulls = meta.s01_out_null; }
    action fl_n_neg() { meta.r_nulls = meta.s0_out_null; meta.r_s1[31:0] = 0xffffffff; }
    action fl_n_pos() { meta.r_nulls = meta.s0_out_null; }
    action fl_neg_n() { meta.r_nulls = meta.s1_out_null; meta.r_s0[31:0] = 0xffffffff; }
    action fl_pos_n() { meta.r_nulls = meta.s1_out_null; }
    action fl_neg_neg() { meta.r_s0[31:0] = 0xffffffff; meta.r_s1[31:0] = 0xffffffff; }
    action fl_neg_pos() { meta.r_s0[31:0] = 0xffffffff; }
    action fl_pos_neg() { meta.r_s1[31:0] = 0xffffffff; }
    table flush_nulls {
        key = { meta.fl_t0 : ternary; meta.fl_t1 : ternary; }
        actions = { fl_nn; fl_n_neg; fl_n_pos; fl_neg_n; fl_pos_n; fl_neg_neg; fl_neg_pos; fl_pos_neg; NoAction; }
        const entries = {
            (0xc0000000, 0xc0000000): fl_nn();
            (0xc0000000, 0x80000000 &&& 0x80000000): fl_n_neg();
            (0xc0000000, _): fl_n_pos();
            (0x80000000 &&& 0x80000000, 0xc0000000): fl_neg_n();
            (_, 0xc0000000): fl_pos_n();
            (0x80000000 &&& 0x80000000, 0x80000000 &&& 0x80000000): fl_neg_neg();
            (0x80000000 &&& 0x80000000, _): fl_neg_pos();
            (_, 0x80000000 &&& 0x80000000): fl_pos_neg();
        }
        default_action = NoAction();
        size = 16;
    }

    apply {
        /* (meta.rc, a count's outcome, is CN_COUNTED until cn<way>'s table writes it: the parser
         * zeroed meta) */
        /* a FLUSH is tested on the flags as parsed, not through a variable set a stage before */
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0 || hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {  /* a FLUSH, or this pass's tuple */
            meta.s01_out_null = meta.s0_out_null | meta.s1_out_null;  /* both sums NULL */
            if ((hdr.ntu.flags & JG_F_FLUSH) == 0) {  /* a tuple's values (their fields share PHV with a FLUSH's, FINISH's) */
                /* the values as numbers came from ingress (bridge.x0, x1: stage 0's hash outputs
                 * are the arrays'); the range test's operand: a stateful ALU reads two PHV words at
                 * most (x and x - 1), the bias of a first value is its constant */
                fit0.apply();
                fit1.apply();
                meta.x0m1 = hdr.bridge.x0 - 1;
                meta.x1m1 = hdr.bridge.x1 - 1;
            }
            /* the ways' counts and sums, after the values as numbers (Tofino 1 runs a sequence's
             * tables by next-table: a table placed after another of its sequence goes to a later
             * stage, so what the sums need comes first) */
            VALUES_AT(0) else VALUES_AT(1) else VALUES_AT(2) else VALUES_AT(3)
            else VALUES_AT(4) else VALUES_AT(5) else VALUES_AT(6)
        }
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            if (hdr.bridge.key_hi != 0 && (hdr.ntu.flags & JG_F_DISCARD) == 0) {  /* it held a key */
                REC_COUNTED
                meta.key[63:32] = hdr.bridge.key_hi ^ hdr.bridge.tag;
                meta.key[31:0] = hdr.bridge.key_lo;
                c_t.apply();  /* the count, little-endian */
                flush_nulls.apply();  /* the null byte, the sums' sign words */
                if (meta.fl_t0 != 0xc0000000) { meta.r_s0[63:32] = t0_bytes.get(BYTES_REVERSED(meta.fl_t0)); }
                /* (sum 1: OutputCounters' t1_t) */
            }
        } else if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {
            meta.key[63:32] = hdr.bridge.key_hi;  /* the record's key, if any */
            meta.key[31:0] = hdr.bridge.key_lo;
            decision.apply();  /* a key that holds no slot (a bypass), or what the slot could not take (a spill) */
        }
    }
}

/* Per job: output datagrams (out_seq numbers them) and the records in them, FLUSHes processed,
 * bypasses, spills; a FINISH becomes the END of the switch's output stream. */
control OutputCounters(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) out_seq;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) records;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) flushed;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) bypassed;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) spilled;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) seq_bytes;
    /* A flushed slot's sum 1 (its take's output, fl_t1) or a FINISH's records (records_read writes
     * fl_t1 too: no datagram is both) as wire bytes into r_s1's high word, which is the END's
     * `tuples` field too (@pa_alias below; r_s1's low word stays 0 for a FINISH): one hash for both,
     * in stage 10 (stages 8..11 have a hash for each of four 32-bit numbers, and the flushed slot's
     * count and sum 0, an END's count and the output's number need theirs) */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) t1_bytes;
    action t1_a() { meta.r_s1[63:32] = t1_bytes.get(BYTES_REVERSED(meta.fl_t1)); }
    table t1_t {
        key = { hdr.ntu.flags : ternary; meta.fl_t1 : ternary; }
        actions = { t1_a; NoAction; }
        const entries = {
            (JG_F_FLUSH &&& JG_F_FLUSH, 0xc0000000): NoAction();  /* a NULL sum: its word stays 0 */
            (JG_F_FLUSH &&& JG_F_FLUSH, _): t1_a();
            (JG_F_FINISH &&& JG_F_FINISH, _): t1_a();
        }
        default_action = NoAction();
        size = 4;
    }

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
    /* FINISH: 0 when the FLUSHes processed are the FLUSHes sent (meta.fin_f: the FINISH's count's
     * low word as a number, SwitchEgress), else 1: the comparison in the stateful ALU, not in
     * gateways after it (the FINISH's tests wait for Passes, whose flag tests its write follows) */
    RegisterAction<bit<32>, bit<8>, bit<8>>(flushed) flushed_check = {
        void apply(inout bit<32> v, out bit<8> rv) { if (v == meta.fin_f) { rv = 0; } else { rv = 1; } }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(bypassed) bypassed_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    RegisterAction<bit<32>, bit<8>, bit<32>>(spilled) spilled_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };

    /* One table per counter of the FINISH's read and a record's (or FLUSH's) update, the register's
     * RegisterActions as its actions: FINISH first (its flag), else what the pass does. An output
     * of records (Passes' OUT_RECORD) is matched on what Passes' out_kinds decides it from, the
     * flags, the tuples left, this pass's record and the datagram's records with it (counted where
     * the record is decided: REC_COUNTED), so that these tables sit beside out_kinds, not a stage
     * after it */
#define OUT_RECORD_ENTRIES(A)                                                                       \
            (JG_F_FLUSH &&& JG_F_FLUSH, _, 1, _): A();                                              \
            (0, 0 &&& 0xfe00, _, 0): NoAction(); (0, 0 &&& 0xfe00, _, _): A();                      \
            (JG_F_PASS, 0 &&& 0xfe00, _, 0): NoAction(); (JG_F_PASS, 0 &&& 0xfe00, _, _): A();
    action seq_read_a() { meta.seq_n = out_seq_read.execute(meta.job); }
    action seq_next_a() { meta.seq_n = out_seq_next.execute(meta.job); }
    @stage(OUT_SEQ_STAGE)
    table out_seq_t {
        key = { hdr.ntu.flags : ternary; hdr.ntu.count : ternary; meta.rec : ternary; meta.n_rec : ternary; }
        actions = { seq_read_a; seq_next_a; NoAction; }
        const entries = {
            (JG_F_FINISH &&& JG_F_FINISH, _, _, _): seq_read_a();
            OUT_RECORD_ENTRIES(seq_next_a)
        }
        default_action = NoAction();
        size = 8;
    }
    action records_read_a() { meta.fl_t1 = records_read.execute(meta.job); }
    action records_add_a() { records_add.execute(meta.job); }
    @stage(RECORDS_STAGE)
    table records_t {
        key = { hdr.ntu.flags : ternary; hdr.ntu.count : ternary; meta.rec : ternary; meta.n_rec : ternary; }
        actions = { records_read_a; records_add_a; NoAction; }
        const entries = {
            (JG_F_FINISH &&& JG_F_FINISH, _, _, _): records_read_a();
            OUT_RECORD_ENTRIES(records_add_a)
        }
        default_action = NoAction();
        size = 8;
    }
    action flushed_check_a() { meta.lost = flushed_check.execute(meta.job); }
    action flushed_inc_a() { flushed_inc.execute(meta.job); }
    @stage(FLUSHED_STAGE)
    table flushed_t {
        key = { hdr.ntu.flags : ternary; }
        actions = { flushed_check_a; flushed_inc_a; NoAction; }
        const entries = {
            (JG_F_FINISH &&& JG_F_FINISH): flushed_check_a();
            (JG_F_FLUSH &&& JG_F_FLUSH): flushed_inc_a();
        }
        default_action = NoAction();
        size = 4;
    }
    action bypassed_inc_a() { bypassed_inc.execute(meta.job); }
    @stage(BYPASSED_STAGE)
    table bypassed_t { actions = { bypassed_inc_a; } default_action = bypassed_inc_a(); size = 1; }
    action spilled_inc_a() { spilled_inc.execute(meta.job); }
    @stage(SPILLED_STAGE)
    table spilled_t { actions = { spilled_inc_a; } default_action = spilled_inc_a(); size = 1; }
    /* FINISH: (out_kind is OUT_END already: the egress parser.) LOSS when FLUSHes went missing (the
     * FINISH's count's high word not 0, or `flushed` not its low word) */
    action end_flags(bit<16> f) { hdr.ntu.flags = f; }
    table end_loss {
        key = { hdr.finish.flushes[31:0] : ternary; meta.lost : ternary; }
        actions = { end_flags; }
        const entries = {
            (0, 0): end_flags(JG_F_END);
            (_, _): end_flags(JG_F_END | JG_F_LOSS);
        }
        default_action = end_flags(JG_F_END | JG_F_LOSS);
        size = 2;
    }

    apply {
        flushed_t.apply();
        out_seq_t.apply();
        records_t.apply();
        /* a flushed slot's sum 1 into its record, or a FINISH's records into the END's count,
         * little-endian (the END's field is r_s1: Emit is given it as it stands). The egress pipe
         * never parses `end`: its field is written before Emit makes the header valid, which on
         * Tofino sets the header's validity bit and leaves its fields' containers as they are */
        t1_t.apply();
        if ((hdr.ntu.flags & JG_F_FINISH) != 0) {
            end_loss.apply();
        } else if ((hdr.ntu.flags & JG_F_FLUSH) == 0) {
            if (meta.bypass == 1) { bypassed_t.apply(); }
            if (meta.spilled == 1) { spilled_t.apply(); }
        }
        /* the output datagram's number, little-endian, straight into the header (Emit is given it
         * as it stands) */
        if (meta.out_kind == OUT_RECORD || meta.out_kind == OUT_END) {
            hdr.ntu.seq[63:32] = seq_bytes.get(BYTES_REVERSED(meta.seq_n));
            hdr.ntu.seq[31:0] = 0;
        }
    }
}

control SwitchEgress(inout headers_t hdr, inout metadata_t meta,
                     in egress_intrinsic_metadata_t eg_intr_md,
                     in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                     inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                     inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    Accumulator() accumulator;
    Passes() passes;
    OutputCounters() counters;
    Emit() emit;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) flushes_number;
    /* FINISH: the FLUSHes the plugin sent, a little-endian u64: its first four bytes reversed (the
     * number's low word), for the stateful ALU that compares it with `flushed` (OutputCounters; the
     * other four bytes must be 0). A table on the flags, first in the egress pipe, in stage 0: its
     * hash takes two of the stage's hash outputs, which stages 8..11 have none to spare for (the
     * flushed slot's and the output's numbers take theirs), and no test's block holds the arrays
     * back */
    action fin_a() { meta.fin_f = flushes_number.get(BYTES_REVERSED(hdr.finish.flushes[63:32])); }
    @stage(0)
    table fin_t {
        key = { hdr.ntu.flags : ternary; }
        actions = { fin_a; NoAction; }
        const entries = { (JG_F_FINISH &&& JG_F_FINISH): fin_a(); }
        default_action = NoAction();
        size = 1;
    }
    /* a pass that goes on with a record of its own: its UDP length change (Output's len_d1 in
     * ingress; not bridged). A table's action: as a statement, p4c would fold the addition into
     * Emit's, which would then take two stages */
    action len_d1_a() { meta.len_d1 = meta.len_d0 + meta.rec_len; }
    table len_d1_t { actions = { len_d1_a; } default_action = len_d1_a(); size = 1; }

    /* A version 2 sender's answer, from the mirror copy of its datagram (as it arrived), which
     * the mirror session of the port it came in on sent to that port: back to where it came from,
     * header only (the session cut the rest off), its timestamp (the header's last field) echoed.
     * A data datagram's is a receipt, ACK with SACK: "datagram `seq` has arrived", taken now or
     * before; an END's is the END answer, ACK with END at the END's number (the ingress pipe
     * mirrors an END only once the switch has taken every datagram before it). As the BMv2
     * program's Answer. */
    action answer_a(bit<16> flags) {
        bit<48> mac = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        bit<32> ip = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
        hdr.ipv4.src_addr = ip;
        bit<16> port = hdr.udp.dst_port;
        hdr.udp.dst_port = hdr.udp.src_port;
        hdr.udp.src_port = port;
        hdr.ntu.flags = flags;
        hdr.ntu.count = 0;
        hdr.udp.len = 8 + JG_UDP_HEADER_BYTES;
        hdr.udp.checksum = 0;
        hdr.ipv4.total_len = 20 + 8 + JG_UDP_HEADER_BYTES;
    }
    table answer_t {
        key = { hdr.ntu.flags : ternary; }
        actions = { answer_a; }
        const entries = { (JG_F_END &&& JG_F_END): answer_a(JG_F_ACK | JG_F_END); }
        default_action = answer_a(JG_F_ACK | JG_F_SACK);
        size = 1;
    }

    apply {
        if (meta.answer == 1) {
            answer_t.apply();
        } else {
            /* (out_kind: OUT_NONE, or OUT_END for a FINISH, which becomes the output's END: the
             * egress parser set it) */
            fin_t.apply();
            accumulator.apply(hdr, meta);  /* its counts in stage 0 */
            len_d1_t.apply();
            passes.apply(hdr, meta);
            counters.apply(hdr, meta);
            emit.apply(hdr, meta, hdr.ntu.seq, hdr.bridge.out_stream, hdr.end.tuples);
            if (meta.out_kind == OUT_NONE) { eg_dprsr_md.drop_ctl = 1; }  /* it left nothing */
            hdr.bridge.setInvalid();
        }
    }
}

control SwitchEgressDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                             in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        hdr.ipv4.hdr_checksum = ipv4_checksum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification,
            hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr,
            hdr.ipv4.dst_addr });
        /* what the egress parser read, and this pass's record (before the earlier ones, which
         * follow as payload; its words in w0..w2): the other headers are never valid here and take
         * no PHV */
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.ntu);
        pkt.emit(hdr.pass);
        pkt.emit(hdr.end);
        pkt.emit(hdr.finish);
        pkt.emit(hdr.rec0[0]);
        pkt.emit(hdr.w0);
        pkt.emit(hdr.w1);
        pkt.emit(hdr.w2);
    }
}

/* Fields no packet has together (a tuple's values; a FLUSH's count and sums; a FINISH's counters;
 * an END's count): the compiler may give them the same containers (all the 32-bit ones are taken) */
#define EXCL(G, A, B) @pa_mutually_exclusive(G, A, B)
EXCL("egress", "meta.x0m1", "meta.fl_c") EXCL("egress", "meta.x1m1", "meta.fl_t0") EXCL("egress", "meta.x0m1", "meta.fl_t1")
EXCL("egress", "meta.x1m1", "meta.fin_f")
EXCL("egress", "meta.x1m1", "meta.fl_c") EXCL("egress", "meta.x0m1", "meta.fl_t0") EXCL("egress", "meta.x1m1", "meta.fl_t1")
EXCL("egress", "meta.x0m1", "meta.fin_f")
EXCL("egress", "meta.fl_c", "meta.fin_f")
EXCL("ingress", "meta.got", "meta.klo") EXCL("ingress", "meta.got", "meta.khi")
/* The bridge's fields are the pipeline's own in both pipes (no copies in PHV) */
@pa_alias("ingress", "meta.v0w", "hdr.bridge.v0w") @pa_alias("ingress", "meta.v1w", "hdr.bridge.v1w")
@pa_alias("egress", "meta.v0w", "hdr.bridge.v0w") @pa_alias("egress", "meta.v1w", "hdr.bridge.v1w")
/* a record's sum 1 and a FINISH's END count are one field (t1_t writes both) */
@pa_alias("egress", "meta.r_s1", "hdr.end.tuples")
REC_MUTEXES("ingress")
/* A stateful ALU's output reaches its table's actions in one action bus slot: the kl tables write it
 * to key_hi (32 bits) or r, the cn tables to fl_c (32 bits) or rc; in a 16-bit container shared
 * with other fields, r and rc cannot take it ("action bus slice (0..31) can't fit in a single slot
 * for 16 bit access", the assembler); kh's rh, in a byte, can */
@pa_container_size("ingress", "hdr.bridge.r", 8) @pa_container_size("egress", "meta.rc", 8)
Pipeline(SwitchIngressParser(), SwitchIngress(), SwitchIngressDeparser(),
         SwitchEgressParser(), SwitchEgress(), SwitchEgressDeparser()) pipe;

Switch(pipe) main;
