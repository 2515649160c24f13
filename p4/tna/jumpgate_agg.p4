/* Jumpgate's switch aggregator for Tofino (TNA): the partial aggregation of docs/switch.md.
 *
 * Shared with the BMv2 program (p4/v1model/jumpgate_agg.p4): sizes (../include/jumpgate_defs.p4),
 * headers and metadata, parser states, the table-owning controls JobConfig, ValueSelect, Output
 * and Emit, and Admit and Passes (a datagram of several tuples, a pass per tuple).
 *
 * Here the slot table is split between the two pipes of one Tofino 1 pipe's 2 x 12 MAU stages
 * (docs/switch.md, "Does it fit one Tofino pipe?"): the INGRESS pipe finds the job, checks the
 * datagram, counts it, and tries the ways: kl<w> (way w's first stage, tried while every earlier
 * way missed) and kh<w> (the stage after, for the way that took the key's first half) for w = 0..6,
 * and kl7; it then chooses the egress port (the recirculation port while tuples remain, else the
 * destination's) and tells the EGRESS pipe in a bridge header what it found. The egress pipe holds
 * kh7, every way's count and sums (cn<w>, s0_<w>, s1_<w>: a tuple uses one way, so these form no
 * chain and need no stage order among ways), decides the record (a bypass, a spill, a flushed
 * slot), numbers and counts the output, and rewrites the datagram (Emit), or drops it when it
 * leaves nothing. END notices and malformed datagrams go to the controller from ingress.
 *
 * Tofino has no byte swap, and the NTF fields are little-endian: fields are compared and copied as
 * their wire bytes, and where a number must be computed with, its bytes are reordered by an
 * identity hash (the input crossbar picks bytes in any order).
 *
 *   p4c --target tofino --arch tna -I p4/include -o build p4/tna/jumpgate_agg.p4   (p4c's Tofino back end)
 *   bf-p4c --target tofino --arch tna -o build p4/tna/jumpgate_agg.p4              (Intel's SDE)
 */
#include <core.p4>
#include <tna.p4>

#include "../include/jumpgate_defs.p4"
#include "../include/headers.p4"
#include "../include/job_config.p4"
/* Emit runs in the egress pipe, whose parser stops after the pass header (Tofino 1's egress parser
 * reads at most 160 bytes): the new record is emitted in front of the earlier ones, unparsed */
#define REC_PUSH_FRONT(K)
/* and it writes one record, of K words: rec0[0] (length, null vector, key), then K of the tuple's
 * word headers (never valid in egress otherwise): the bytes of a rec<K>, in a third of the PHV four
 * record headers would take */
#define REC_HEAD(K) hdr.rec0[0]
#define REC_WORD(K, I) hdr.w##I.data
#define REC_WORDS_VALID(K) if (K > 0) { hdr.w0.setValid(); } if (K > 1) { hdr.w1.setValid(); } \
    if (K > 2) { hdr.w2.setValid(); }
#include "../include/output.p4"
#include "../include/passes.p4"

/* Pipe 0's recirculation port on Tofino 1 (ports 68-71 loop back into pipe 0's ingress): a datagram
 * with tuples left goes there for its next pass. Another pipe p: p * 128 + 68. */
#define RECIRC_PORT 68

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

#define KL_NONE 0    /* not tried: a NULL key, or the one key whose first half equals the tag */
#define KL_MATCH 1
#define KL_FRESH 2
#define KL_MISS 3    /* another key holds the slot: the next way (after the last: no room) */
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
#define ROT7 { meta.key[7:0], meta.key[63:8] }

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

/* Way W's slot index, base | (hash & mask), into a field of its own ahead of the way's first
 * stage: a stateful ALU takes its index from a field or a hash as it is, not computed. Two steps,
 * each under a test of its own (only a key that is tried needs them): so that every way's steps are
 * tables of their own, with one hash output each (an action's immediate pathway takes 32 bits), and
 * way w+1's AND does not wait for way w's OR (statements of one block become one action until one
 * reads what an earlier one wrote, and the next action then starts with it). */
#define WAY_HASH(W) if (meta.klo != 0) { meta.i##W = hash##W.get(ROT##W) & meta.mask; }
#define WAY_BASE(W) if (meta.klo != 0) { meta.i##W = meta.i##W | meta.base; }

/* Way W's first stage, tried only while every earlier way missed: the outcome, the way and the
 * index go to the bridge (a later way that is tried overwrites them). One field `r` carries the
 * chain: each stage reads the one before's outcome, so way w+1 is tried in the very next stage. */
#define TRY_WAY(W)                                                                                \
    if (hdr.bridge.r == KL_MISS) {                                                                \
        hdr.bridge.r = kl##W##_try.execute(meta.i##W);                                        \
        hdr.bridge.way = W;                                                                       \
        hdr.bridge.idx = meta.i##W;                                                                  \
    }

/* The way that took the key's first half, in the stage after: kh<W> claims the last half (a fresh
 * slot) or checks it. Written right after TRY_WAY(W), so that it reads that stage's outcome
 * (TRY_WAY(W+1) writes the same fields in the same stage, which a stage's reads do not see). */
#define KEY_WAY(W)                                                                                \
    if (hdr.bridge.way == W) {                                                            \
        if (hdr.bridge.r == KL_FRESH) { hdr.bridge.rh = kh##W##_claim.execute(hdr.bridge.idx); } \
        else if (hdr.bridge.r == KL_MATCH) { hdr.bridge.rh = kh##W##_check.execute(hdr.bridge.idx); } \
    }

/* FLUSH: way W's key halves as they are stored (kl not yet XORed with the tag), read and cleared */
#define TAKE_KEY(W)                                                                               \
    if (hdr.bridge.way == W) {                                                                    \
        hdr.bridge.key_hi = kl##W##_take.execute(meta.fi);                                             \
        hdr.bridge.key_lo = kh##W##_take.execute(meta.fi);                                             \
    }

/* The slot indexes of the ways (a tuple's) or of the slot (a FLUSH's), before Admit's outcome is
 * known: they change nothing, and way 0's stage (4) needs its index from stage 3 on, Admit decides
 * in stage 2. */
control WayIndex(inout headers_t hdr, inout metadata_t meta) {
    Hash<bit<16>>(HashAlgorithm_t.IDENTITY) flush_index;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash0;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash1;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash2;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash3;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash4;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash5;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash6;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) hash7;

    apply {
        /* FLUSH: seq = way << 16 | slot index in the job's block, little-endian: the way is bits
         * 2:0 of its third byte (a cast: two writes, a stage apart), the index its first two bytes
         * (swapped by an identity hash) */
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            hdr.bridge.way = (bit<8>)hdr.ntu.seq[42:40];
            meta.fi = flush_index.get({ hdr.ntu.seq[55:48], hdr.ntu.seq[63:56] }) & meta.mask;
        }
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) { meta.fi = meta.fi | meta.base; }
        WAY_HASH(0) WAY_HASH(1) WAY_HASH(2) WAY_HASH(3) WAY_HASH(4) WAY_HASH(5) WAY_HASH(6) WAY_HASH(7)
        WAY_BASE(0) WAY_BASE(1) WAY_BASE(2) WAY_BASE(3) WAY_BASE(4) WAY_BASE(5) WAY_BASE(6) WAY_BASE(7)
    }
}

/* The ways' keys: kl<w> for every way, kh<w> for ways 0..6 (kh7's stage would be the 13th: it is
 * in the egress pipe, control Accumulator). */
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
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kl7;
    KL_ACTIONS(0) KH_ACTIONS(0, meta.khi)
    KL_ACTIONS(1) KH_ACTIONS(1, meta.khi)
    KL_ACTIONS(2) KH_ACTIONS(2, meta.khi)
    KL_ACTIONS(3) KH_ACTIONS(3, meta.khi)
    KL_ACTIONS(4) KH_ACTIONS(4, meta.khi)
    KL_ACTIONS(5) KH_ACTIONS(5, meta.khi)
    KL_ACTIONS(6) KH_ACTIONS(6, meta.khi)
    KL_ACTIONS(7)

    apply {
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            /* the way and the slot index: WayIndex */
            hdr.bridge.idx = meta.fi;
            /* an else-chain: the ways exclude each other, so their takes need no order */
            TAKE_KEY(0) else TAKE_KEY(1) else TAKE_KEY(2) else TAKE_KEY(3) else TAKE_KEY(4) else TAKE_KEY(5)
            else TAKE_KEY(6) else if (hdr.bridge.way == 7) { hdr.bridge.key_hi = kl7_take.execute(meta.fi); }
        } else if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {  /* this pass's tuple */
            /* the bridge fields the ways write are first written here, not where the bridge is made
             * valid (which waits for Admit's outcome): each is written once per branch, so that way
             * 0 can start in stage 4 */
            hdr.bridge.key_hi = meta.key[63:32];
            hdr.bridge.key_lo = meta.key[31:0];
            hdr.bridge.rh = KH_NONE;
            hdr.bridge.way = 0;
            hdr.bridge.idx = 0;
            /* NULL bits: the job table's action ANDed the null vector's first byte with each mask */
            if (meta.key_nulls != 0) { hdr.bridge.key_null_hit = 1; } else { hdr.bridge.key_null_hit = 0; }
            if (meta.v0_nulls != 0) { hdr.bridge.v0_null_hit = 1; } else { hdr.bridge.v0_null_hit = 0; }
            if (meta.v1_nulls != 0) { hdr.bridge.v1_null_hit = 1; } else { hdr.bridge.v1_null_hit = 0; }
            if (meta.cnt_nulls == 0) { hdr.bridge.cnt_inc = 1; } else { hdr.bridge.cnt_inc = 0; }
            /* a NULL key, or the one key whose first half equals the tag (it would store the 0 of an
             * empty slot), is not tried: a bypass */
            if (meta.key_nulls == 0 && meta.klo != 0) { hdr.bridge.r = KL_MISS; } else { hdr.bridge.r = KL_NONE; }
            /* the ways' indexes: WayIndex */
            TRY_WAY(0) KEY_WAY(0) TRY_WAY(1) KEY_WAY(1) TRY_WAY(2) KEY_WAY(2) TRY_WAY(3) KEY_WAY(3)
            TRY_WAY(4) KEY_WAY(4) TRY_WAY(5) KEY_WAY(5) TRY_WAY(6) KEY_WAY(6) TRY_WAY(7)
        }
    }
}

/* Per job and input stream: data datagrams received (on their first pass); per job: tuples taken
 * (a pass each). An END from a sender goes to the controller with its stream's count. */
control StreamCounters(inout headers_t hdr, inout metadata_t meta) {
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

    apply {
        /* the stream number is below 64 (Admit): its first wire byte's bits 5:0 */
        meta.counter = meta.job[5:0] ++ hdr.ntu.stream[29:24];
        if ((hdr.ntu.flags & JG_F_END) != 0) {
            meta.got = received_read.execute(meta.counter);
            hdr.end.received[63:32] = received_bytes.get(BYTES_REVERSED(meta.got));  /* little-endian u64 */
            hdr.end.received[31:0] = 0;
        } else if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {
            if (hdr.ntu.flags == 0) { received_inc.execute(meta.counter); }  /* a datagram's first pass */
            tuples_inc.execute(meta.job);
        }
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
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) stream_bytes;

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
        bit<1> notice = 0;
        bit<1> more = 0;
        bit<1> fwd = 0;  /* forward applied once, ahead of the ways (a table applied in several
                          * places must end the control flow, which would put it after them) */
        meta.recirculated = 0;
        if (ig_intr_md.ingress_port == RECIRC_PORT) { meta.recirculated = 1; }
        if (hdr.ntu.isValid()) {
            job_config.apply(hdr, meta, hit);
        }
        if (hit) {
            /* tuples remain after this pass's: tested here, on the flags as parsed, not where the
             * egress port is chosen (after ERROR may have been added to the flags, which would
             * order that choice after every table of the ways) */
            if ((hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) && hdr.ntu.count[15:8] > 1) { more = 1; }
            way_index.apply(hdr, meta);
            output.apply(hdr, meta);
            admit.apply(hdr, meta, ok);
            /* the flags are not written here: the ways' and counters' tests of the flags would wait
             * for that write */
            if (!ok) {
                notice = 1;  /* not tuples of the job's layout: tell the controller (ERROR, below) */
            } else if ((hdr.ntu.flags & JG_F_END) != 0) {
                notice = 1;  /* a sender's END: to the controller with its stream's count */
            }
            if (notice == 0) {
                /* what the egress pipe reads of every datagram is written here (a header's fields
                 * are not zeroed); what the ways write (r, rh, way, idx, the key, the NULL bits) is
                 * written first by the Aggregator's branch that needs it, so that none of its writes
                 * waits for this block, which waits for Admit */
                hdr.bridge.setValid();
                hdr.bridge.job = meta.job;
                hdr.bridge.tag = meta.tag;
                hdr.bridge.len_d0 = meta.len_d0;
                hdr.bridge.len_d1 = meta.len_d1;
                hdr.bridge.v0_int32 = meta.flags & 1;
                hdr.bridge.v1_int32 = meta.flags & 2;
                hdr.bridge.out_stream = stream_bytes.get(BYTES_REVERSED(meta.out_stream));
                hdr.bridge.out_words = meta.out_words;
                hdr.bridge.s0_out_null = meta.s0_out_null;
                hdr.bridge.s1_out_null = meta.s1_out_null;
                hdr.bridge.rec_len = meta.rec_len;
                /* bits 1:0, which is all that the egress parser reads: a cast would be written as
                 * two slices, each action after the one before */
                hdr.bridge.o0[1:0] = meta.o0;
                hdr.bridge.o1[1:0] = meta.o1;
                hdr.bridge.o2[1:0] = meta.o2;
            }
            /* what the switch sends leaves from the address and port it was sent to (the switch's
             * data address, the job's port), as a host's answer would: its receivers' route back to
             * the source is the switch, which reverse-path filters check. Decided before the ways
             * are tried, on what is known by then (notice, more): after them, the choice would
             * wait for their last stage */
            if (notice == 1) {
                /* to the controller, from here: the egress pipe has nothing to add */
                hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
                hdr.udp.src_port = hdr.udp.dst_port;
                hdr.ipv4.dst_addr = meta.ctrl_ip;
                hdr.udp.dst_port = meta.ctrl_port;
                hdr.udp.checksum = 0;
                hdr.ipv4.total_len = hdr.udp.len + 20;
                ig_tm_md.bypass_egress = 1;
                fwd = 1;
            } else if (more == 1) {
                /* tuples remain: the next pass, out of the recirculation port (the egress pipe
                 * takes this pass's counts and sums on the way) and back into this ingress */
                ig_tm_md.ucast_egress_port = RECIRC_PORT;
            } else {
                /* the last pass, a FLUSH, a FINISH: the egress pipe makes it the destination's
                 * datagram, or drops it when it leaves nothing */
                hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
                hdr.udp.src_port = hdr.udp.dst_port;
                hdr.ipv4.dst_addr = meta.dst_ip;
                hdr.udp.dst_port = meta.dst_port;
                fwd = 1;
            }
        } else if (hdr.ipv4.isValid()) {
            ig_tm_md.bypass_egress = 1;
            fwd = 1;
        }
        if (fwd == 1) { forward.apply(); }
        if (hit) {
            if (ok) {
                aggregator.apply(hdr, meta);
                counters.apply(hdr, meta);
                if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {
                    /* the values to the egress pipe, and the tuple out of the datagram (Emit counts
                     * its bytes): the egress parser does not reach it */
                    value_select.apply(hdr, meta);
                    hdr.bridge.v0w = meta.v0w;
                    hdr.bridge.v1w = meta.v1w;
                    hdr.tlen.setInvalid(); hdr.nulls.setInvalid();
                    hdr.w0.setInvalid(); hdr.w1.setInvalid(); hdr.w2.setInvalid(); hdr.w3.setInvalid();
                    hdr.w4.setInvalid(); hdr.w5.setInvalid(); hdr.w6.setInvalid(); hdr.w7.setInvalid();
                }
            } else {
                /* ERROR for the controller: in the branch exclusive with everything that tests the
                 * flags (a write after them in a later block would order that block after them) */
                hdr.ntu.flags = hdr.ntu.flags | JG_F_ERROR;
            }
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
        pkt.emit(hdr);  /* every valid header, in headers_t order: the bridge first */
    }
}

/* ------------------------------------------------------------------ egress */

parser SwitchEgressParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                          out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        meta = { ... };
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);  /* every datagram the ingress pipe sends here carries it */
        meta.job = hdr.bridge.job;
        meta.len_d0 = hdr.bridge.len_d0;
        meta.len_d1 = hdr.bridge.len_d1;
        meta.rec_len = hdr.bridge.rec_len;
        meta.out_words = hdr.bridge.out_words;
        meta.s0_out_null = hdr.bridge.s0_out_null;
        meta.s1_out_null = hdr.bridge.s1_out_null;
        meta.o0 = hdr.bridge.o0[1:0];
        meta.o1 = hdr.bridge.o1[1:0];
        meta.o2 = hdr.bridge.o2[1:0];
        transition eg_ethernet;
    }
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
    state eg_pass { pkt.extract(hdr.pass); transition accept; }
    state eg_finish { pkt.extract(hdr.finish); transition accept; }
}

/* The count and sums of way W: cn<W> starts at the tuple's count (a claim) or counts it (spilling
 * at JG_COUNT_SPILL); s0_/s1_<W> add a value or refuse it; a FLUSH takes each (reads and clears
 * it; a sum's output is the sum itself, register - bias, which is -2^30 exactly for an empty one). */
#define VALUE_ACTIONS(W)                                                                          \
    RegisterAction<bit<32>, bit<16>, bit<8>>(cn##W) cn##W##_claim = {                            \
        void apply(inout bit<32> v, out bit<8> r) { v = meta.cnt_inc; r = CN_COUNTED; }                \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<8>>(cn##W) cn##W##_count = {                            \
        void apply(inout bit<32> v, out bit<8> r) {                                               \
            if (v >= JG_COUNT_SPILL) { v = 0; r = CN_SPILL; }                                     \
            else { v = v + meta.cnt_inc; r = CN_COUNTED; }                                        \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<32>>(cn##W) cn##W##_take = {                            \
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }                          \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<8>>(s0_##W) s0_##W##_add = {                            \
        void apply(inout bit<32> v, out bit<8> rej) {                                             \
            if (v == 0) { v = meta.x0 + JG_SUM_BIAS; rej = 0; }                                   \
            else if (v + meta.x0m1 < JG_SUM_SPAN) { v = v + meta.x0; rej = 0; }                   \
            else { rej = 1; }                                                                     \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<32>>(s0_##W) s0_##W##_take = {                          \
        void apply(inout bit<32> v, out bit<32> old) { old = v - JG_SUM_BIAS; v = 0; }            \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<8>>(s1_##W) s1_##W##_add = {                            \
        void apply(inout bit<32> v, out bit<8> rej) {                                             \
            if (v == 0) { v = meta.x1 + JG_SUM_BIAS; rej = 0; }                                   \
            else if (v + meta.x1m1 < JG_SUM_SPAN) { v = v + meta.x1; rej = 0; }                   \
            else { rej = 1; }                                                                     \
        }                                                                                         \
    };                                                                                            \
    RegisterAction<bit<32>, bit<16>, bit<32>>(s1_##W) s1_##W##_take = {                          \
        void apply(inout bit<32> v, out bit<32> old) { old = v - JG_SUM_BIAS; v = 0; }            \
    };

/* Way W's count and sums, one block per register: a FLUSH takes it, a tuple of the key that holds
 * the slot (RH: the way's kh outcome) claims or counts (spilling at JG_COUNT_SPILL) and adds (a NULL
 * value leaves its sum alone, a value outside (-2^30, 2^30) goes on in a spill record). The take
 * and the update are branches of one test, so that they have the same dependencies and share the
 * register array's stage; the ways are an else-chain (they exclude each other: no order among them). */
#define COUNT_WAY(W, RH, FL)                                                                        \
    if (hdr.bridge.way == W) {                                                                    \
        if (FL) { meta.fl_c = cn##W##_take.execute(hdr.bridge.idx); }                                     \
        else if (RH == KH_FRESH) { cn##W##_claim.execute(hdr.bridge.idx); }                       \
        else if (RH == KH_SAME) { rc = cn##W##_count.execute(hdr.bridge.idx); }                   \
    }
#define SUM_WAY(W, RH, FL)                                                                          \
    if (hdr.bridge.way == W) {                                                                    \
        if (FL) {                                                                                 \
            meta.fl_t0 = s0_##W##_take.execute(hdr.bridge.idx);                                        \
            meta.fl_t1 = s1_##W##_take.execute(hdr.bridge.idx);                                        \
        } else if (RH == KH_FRESH || RH == KH_SAME) {                                             \
            if (hdr.bridge.v0_null_hit == 0) {                                                    \
                if (meta.fit0 == 0) { meta.rej0 = 1; }                                            \
                else { meta.rej0 = (bit<1>)s0_##W##_add.execute(hdr.bridge.idx); }                \
            }                                                                                     \
            if (hdr.bridge.v1_null_hit == 0) {                                                    \
                if (meta.fit1 == 0) { meta.rej1 = 1; }                                            \
                else { meta.rej1 = (bit<1>)s1_##W##_add.execute(hdr.bridge.idx); }                \
            }                                                                                     \
        }                                                                                         \
    }

#define IS_FLUSH ((hdr.ntu.flags & JG_F_FLUSH) != 0)

/* -2^30 < v < 2^30 for value V (its wire bytes VW, int32 flag I32): the first wire word's top two
 * bits (the number's bits 31:30) equal, and the high word equal to them (an int32's is its sign
 * extension), and not -2^30 itself (wire 00 00 00 c0, then ff ff ff ff) */
#define FIT(VW, I32, FITV)                                                                        \
    if (VW[39:38] == 0) {                                                                         \
        if (I32 != 0 || VW[31:0] == 0) { FITV = 1; }                                              \
    } else if (VW[39:38] == 3) {                                                                  \
        if (VW[63:32] != 0x000000c0) {                                                            \
            if (I32 != 0 || VW[31:0] == 0xffffffff) { FITV = 1; }                                 \
        }                                                                                         \
    }

/* The slots' counts and sums, and way 7's last key half: the egress half of the slot table. */
control Accumulator(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) kh7;
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
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) cn7;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s0_7;
    Register<bit<32>, bit<16>>(JG_WAY_SLOTS, 0) s1_7;
    KH_ACTIONS(7, hdr.bridge.key_lo)
    VALUE_ACTIONS(0) VALUE_ACTIONS(1) VALUE_ACTIONS(2) VALUE_ACTIONS(3)
    VALUE_ACTIONS(4) VALUE_ACTIONS(5) VALUE_ACTIONS(6) VALUE_ACTIONS(7)
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) x0_bytes;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) x1_bytes;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) c_bytes;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) t0_bytes;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) t1_bytes;

    apply {
        bit<8> rc = CN_COUNTED;
        bit<1> fl7 = 0;
        /* a FLUSH is tested on the flags as parsed, not through a variable set a stage before */
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0 || hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {  /* a FLUSH, or this pass's tuple */
            if (hdr.bridge.way == 7) {  /* way 7's last key half */
                /* fl7: a FLUSH of way 7, written with kh7's take, so that way 7's other takes wait
                 * for kh7's stage as its counting and adding do (a register's tables share a stage) */
                if ((hdr.ntu.flags & JG_F_FLUSH) != 0) { hdr.bridge.key_lo = kh7_take.execute(hdr.bridge.idx); fl7 = 1; }
                else if (hdr.bridge.r == KL_FRESH) { meta.rh7 = kh7_claim.execute(hdr.bridge.idx); }
                else if (hdr.bridge.r == KL_MATCH) { meta.rh7 = kh7_check.execute(hdr.bridge.idx); }
            }
            meta.cnt_inc[7:0] = hdr.bridge.cnt_inc;  /* (its other bits are 0: the parser zeroed meta) */
            if ((hdr.ntu.flags & JG_F_FLUSH) == 0) {  /* a tuple's values (their fields share PHV with a FLUSH's, FINISH's) */
            /* the values as numbers (their first four wire bytes reversed: a slot's sum takes values
             * inside (-2^30, 2^30), whose high word is the sign) and the range test's operand; one
             * 32-bit hash output per action (the immediate pathway's 32 bits): each under its own
             * test, so that they stay two tables */
            if (hdr.bridge.v0_null_hit == 0) { meta.x0 = x0_bytes.get(BYTES_REVERSED(meta.v0w[63:32])); }
            if (hdr.bridge.v1_null_hit == 0) { meta.x1 = x1_bytes.get(BYTES_REVERSED(meta.v1w[63:32])); }
            FIT(meta.v0w, hdr.bridge.v0_int32, meta.fit0)
            FIT(meta.v1w, hdr.bridge.v1_int32, meta.fit1)
            /* an int32 value's high word: its sign (the record's int64) */
            if (hdr.bridge.v0_int32 != 0) {
                if (meta.v0w[39:39] == 1) { meta.v0w[31:0] = 0xffffffff; } else { meta.v0w[31:0] = 0; }
            }
            if (hdr.bridge.v1_int32 != 0) {
                if (meta.v1w[39:39] == 1) { meta.v1w[31:0] = 0xffffffff; } else { meta.v1w[31:0] = 0; }
            }
            /* a stateful ALU reads two PHV words at most (x and x - 1); the bias of a first value is
             * its constant */
            meta.x0m1 = meta.x0 - 1;
            meta.x1m1 = meta.x1 - 1;
            }
            COUNT_WAY(0, hdr.bridge.rh, IS_FLUSH) else COUNT_WAY(1, hdr.bridge.rh, IS_FLUSH) else COUNT_WAY(2, hdr.bridge.rh, IS_FLUSH)
            else COUNT_WAY(3, hdr.bridge.rh, IS_FLUSH) else COUNT_WAY(4, hdr.bridge.rh, IS_FLUSH) else COUNT_WAY(5, hdr.bridge.rh, IS_FLUSH)
            else COUNT_WAY(6, hdr.bridge.rh, IS_FLUSH) else COUNT_WAY(7, meta.rh7, fl7 == 1)
            SUM_WAY(0, hdr.bridge.rh, IS_FLUSH) else SUM_WAY(1, hdr.bridge.rh, IS_FLUSH) else SUM_WAY(2, hdr.bridge.rh, IS_FLUSH)
            else SUM_WAY(3, hdr.bridge.rh, IS_FLUSH) else SUM_WAY(4, hdr.bridge.rh, IS_FLUSH) else SUM_WAY(5, hdr.bridge.rh, IS_FLUSH)
            else SUM_WAY(6, hdr.bridge.rh, IS_FLUSH) else SUM_WAY(7, meta.rh7, fl7 == 1)
        }
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            if (hdr.bridge.key_hi != 0 && (hdr.ntu.flags & JG_F_DISCARD) == 0) {  /* it held a key */
                meta.key[63:32] = hdr.bridge.key_hi ^ hdr.bridge.tag;
                meta.key[31:0] = hdr.bridge.key_lo;
                meta.r_count[63:32] = c_bytes.get(BYTES_REVERSED(meta.fl_c));  /* little-endian u64 */
                /* a sum's output is register - bias: -2^30 (0xc0000000) when it had no value (NULL);
                 * the null byte written once per case (one 32-bit comparison per gateway) */
                if (meta.fl_t0 == 0xc0000000) {
                    if (meta.fl_t1 == 0xc0000000) { meta.r_nulls = meta.s0_out_null | meta.s1_out_null; }
                    else { meta.r_nulls = meta.s0_out_null; }
                } else if (meta.fl_t1 == 0xc0000000) { meta.r_nulls = meta.s1_out_null; }
                if (meta.fl_t0 != 0xc0000000) {
                    meta.r_s0[63:32] = t0_bytes.get(BYTES_REVERSED(meta.fl_t0));
                    if (meta.fl_t0[31:31] == 1) { meta.r_s0[31:0] = 0xffffffff; }  /* negative: sign-extended */
                }
                if (meta.fl_t1 != 0xc0000000) {
                    meta.r_s1[63:32] = t1_bytes.get(BYTES_REVERSED(meta.fl_t1));
                    if (meta.fl_t1[31:31] == 1) { meta.r_s1[31:0] = 0xffffffff; }
                }
                meta.rec = 1;
            }
        } else if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {
            /* the key holds a slot when the way's kh said so; else (a NULL key, no room, another key
             * with the same first half) the tuple goes on as a partial row of its own (one gateway,
             * not a variable set a stage before) */
            meta.key[63:32] = hdr.bridge.key_hi;  /* the record's key, if any */
            meta.key[31:0] = hdr.bridge.key_lo;
            if (!((hdr.bridge.way == 7 && (meta.rh7 == KH_SAME || meta.rh7 == KH_FRESH)) ||
                  (hdr.bridge.way != 7 && (hdr.bridge.rh == KH_SAME || hdr.bridge.rh == KH_FRESH)))) {
                meta.bypass = 1;
                if (hdr.bridge.cnt_inc == 1) { meta.r_count = 0x0100000000000000; }  /* 1, little-endian */
                if (hdr.bridge.v0_null_hit == 0) { meta.r_s0 = meta.v0w; }
                if (hdr.bridge.v1_null_hit == 0) { meta.r_s1 = meta.v1w; }
                if (hdr.bridge.key_null_hit == 1) { meta.r_nulls = 1; }
                if (hdr.bridge.v0_null_hit == 1) { meta.r_nulls = meta.r_nulls | meta.s0_out_null; }
                if (hdr.bridge.v1_null_hit == 1) { meta.r_nulls = meta.r_nulls | meta.s1_out_null; }
                meta.rec = 1;
            } else if (rc == CN_SPILL || meta.rej0 == 1 || meta.rej1 == 1) {
                /* a spill record: what the slot could not take, the other sums NULL; a count spills at
                 * exactly JG_COUNT_SPILL, plus this tuple's (little-endian constants); the null byte
                 * written once per case */
                if (rc == CN_SPILL) {
                    if (hdr.bridge.cnt_inc == 1) { meta.r_count = 0x0000008000000000; }
                    else { meta.r_count = 0xffffff7f00000000; }
                }
                if (meta.rej0 == 1) { meta.r_s0 = meta.v0w; }
                if (meta.rej1 == 1) { meta.r_s1 = meta.v1w; }
                if (meta.rej0 == 1) {
                    if (meta.rej1 == 0) { meta.r_nulls = meta.s1_out_null; }
                } else if (meta.rej1 == 1) { meta.r_nulls = meta.s0_out_null; }
                else { meta.r_nulls = meta.s0_out_null | meta.s1_out_null; }
                meta.spilled = 1;
                meta.rec = 1;
            }
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
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) records_bytes;

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

    apply {
        bit<32> s = 0;
        bit<8> lost;
        if ((hdr.ntu.flags & JG_F_FINISH) != 0) {
            lost = flushed_check.execute(meta.job);
            s = out_seq_read.execute(meta.job);
            meta.out_records = records_read.execute(meta.job);
            /* (out_kind is OUT_END already: SwitchEgress.) LOSS when FLUSHes went missing; the
             * flags written once per case */
            if (hdr.finish.flushes[31:0] != 0) { hdr.ntu.flags = JG_F_END | JG_F_LOSS; }
            else if (lost != 0) { hdr.ntu.flags = JG_F_END | JG_F_LOSS; }
            else { hdr.ntu.flags = JG_F_END; }
            /* the END's count, little-endian, straight into the header (as the number below; Emit
             * is given it as it stands). The egress pipe never parses `end`: its field is written
             * before Emit makes the header valid, which on Tofino sets the header's validity bit
             * and leaves its fields' containers as they are */
            hdr.end.tuples[63:32] = records_bytes.get(BYTES_REVERSED(meta.out_records));
            hdr.end.tuples[31:0] = 0;
        } else {
            /* a branch of the FINISH test, so that reading a counter (FINISH) and adding to it (a
             * record) are exclusive tables, which share its stage */
            if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
                flushed_inc.execute(meta.job);
            } else {
                if (meta.bypass == 1) { bypassed_inc.execute(meta.job); }
                if (meta.spilled == 1) { spilled_inc.execute(meta.job); }
            }
            if (meta.out_kind == OUT_RECORD) {
                s = out_seq_next.execute(meta.job);
                records_add.execute(meta.job);
            }
        }
        /* the output datagram's number, little-endian, straight into the header (Emit is given it
         * as it stands) */
        if (meta.out_kind == OUT_RECORD || meta.out_kind == OUT_END) {
            hdr.ntu.seq[63:32] = seq_bytes.get(BYTES_REVERSED(s));
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

    apply {
        meta.out_kind = OUT_NONE;
        /* a FINISH becomes the output's END; set here, not where its counters are read, so that
         * reading them (FINISH) and adding to them (a record) stay one table each, in one stage */
        if ((hdr.ntu.flags & JG_F_FINISH) != 0) {
            meta.out_kind = OUT_END;
            /* the FLUSHes the plugin sent, a little-endian u64: its first four bytes reversed (the
             * number's low word), for the stateful ALU that compares it with `flushed`
             * (OutputCounters; the other four bytes must be 0) */
            meta.fin_f = flushes_number.get(BYTES_REVERSED(hdr.finish.flushes[63:32]));
        }
        accumulator.apply(hdr, meta);
        passes.apply(hdr, meta);
        counters.apply(hdr, meta);
        emit.apply(hdr, meta, hdr.ntu.seq, hdr.bridge.out_stream, hdr.end.tuples);
        if (meta.out_kind == OUT_NONE) { eg_dprsr_md.drop_ctl = 1; }  /* it left nothing */
        hdr.bridge.setInvalid();
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
EXCL("egress", "meta.x0", "meta.fl_c") EXCL("egress", "meta.x1", "meta.fl_t0") EXCL("egress", "meta.x0m1", "meta.fl_t1")
EXCL("egress", "meta.x1m1", "meta.fin_f") EXCL("egress", "meta.x0", "meta.out_records")
EXCL("egress", "meta.fl_c", "meta.fin_f") EXCL("egress", "meta.fl_t0", "meta.out_records")
EXCL("egress", "meta.fl_t1", "meta.out_records") EXCL("egress", "meta.fl_c", "meta.out_records")
EXCL("ingress", "meta.got", "meta.klo") EXCL("ingress", "meta.got", "meta.khi")
/* The bridge's fields are the pipeline's own in both pipes (no copies in PHV) */
@pa_alias("ingress", "meta.v0w", "hdr.bridge.v0w") @pa_alias("ingress", "meta.v1w", "hdr.bridge.v1w")
@pa_alias("egress", "meta.v0w", "hdr.bridge.v0w") @pa_alias("egress", "meta.v1w", "hdr.bridge.v1w")
REC_MUTEXES("ingress")
Pipeline(SwitchIngressParser(), SwitchIngress(), SwitchIngressDeparser(),
         SwitchEgressParser(), SwitchEgress(), SwitchEgressDeparser()) pipe;

Switch(pipe) main;
