/* Jumpgate's switch aggregator for BMv2 (v1model): the partial aggregation of docs/switch.md.
 *
 * Shared with the Tofino program (p4/tna/jumpgate_agg.p4): sizes (../include/jumpgate_defs.p4),
 * headers and metadata, parser states, the table-owning controls JobConfig, Output and Emit, and
 * Admit and Passes (a datagram of several tuples, a pass per tuple). Here: the registers and
 * their updates (controls Aggregator and StreamCounters), recirculation (a datagram's next pass:
 * egress recirculates it), forwarding, the IPv4 checksum and the v1model package; and version 2
 * (acknowledged) input streams (docs/udp-transport.md, "A switch in a version 2 path"): the ring
 * of sequence numbers (control SeenRing) and the answers to their senders (control Answer, made
 * in egress from an ingress clone of the datagram).
 * p4/model/switch_model.c runs the same steps.
 *
 *   p4c --target bmv2 --arch v1model --p4runtime-files build/jumpgate_agg.p4info.txtpb \
 *       -o build p4/v1model/jumpgate_agg.p4
 */
#include <core.p4>
#include <v1model.p4>

#define JG_TAKES_UDP_V2  /* the shared parser also takes "NTU2" datagrams */
#include "../include/jumpgate_defs.p4"
#include "../include/headers.p4"
#include "../include/job_config.p4"
#include "../include/output.p4"
#include "../include/passes.p4"

#define PKT_INSTANCE_TYPE_INGRESS_CLONE 1  /* BMv2's standard_metadata.instance_type of an ingress clone */
#define PKT_INSTANCE_TYPE_RECIRC 4  /* and of a recirculated packet */

parser SwitchParser(packet_in pkt, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    state start {
        transition parse_ethernet;
    }
#include "../include/parser_states.p4"
}

control SwitchVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

#define NO_WAY 15
/* -2^30 < v < 2^30: a value a slot's sum can take (docs/switch.md); others go on in a spill record */
#define FITS(v) ((v[63:30] == 0 || v[63:30] == 0x3ffffffff) && v != 0xffffffffc0000000)

/* Way w's hash input: the key's 8 wire bytes rotated left by w bytes (CRC-32 over them). */
#define ROT0 { meta.key }
#define ROT1 { meta.key[55:0], meta.key[63:56] }
#define ROT2 { meta.key[47:0], meta.key[63:48] }
#define ROT3 { meta.key[39:0], meta.key[63:40] }
#define ROT4 { meta.key[31:0], meta.key[63:32] }
#define ROT5 { meta.key[23:0], meta.key[63:24] }
#define ROT6 { meta.key[15:0], meta.key[63:16] }

/* Way W's first stage: its hash, then kl<W>: the key's first half (the slot is this key's, or
 * empty and now this key's), or another key's, and the key tries the next way. Tried only while
 * every earlier way missed. */
#define TRY_WAY(W)                                                                                  \
    if (meta.way == NO_WAY) {                                                                       \
        hash(meta.hash, HashAlgorithm.crc32, 16w0, ROT##W, 32w65536);                              \
        i = (bit<32>)(meta.base | (meta.hash & meta.mask));                                         \
        kl##W.read(x, i);                                                                           \
        if (x == meta.klo) { meta.way = W; meta.idx = (bit<16>)i; }                                  \
        else if (x == 0) { kl##W.write(i, meta.klo); meta.way = W; meta.idx = (bit<16>)i; meta.fresh = 1; } \
    }

/* The way that took the key: kh<W> (its second half: claimed, or checked), then, for the key that
 * holds the slot, cn<W> (the count: set by a claim, else counted or spilled) and the sums. */
#define AT_WAY(W)                                                                                   \
    if (meta.way == W) {                                                                            \
        i = (bit<32>)meta.idx;                                                                      \
        kh##W.read(x, i);                                                                           \
        if (meta.fresh == 1) {                                                                      \
            kh##W.write(i, meta.khi);                                                               \
        } else if (x != meta.khi) {                                                                 \
            meta.bypass = 1;  /* another key with the same first half holds the slot */            \
        }                                                                                           \
        if (meta.bypass == 0) {                                                                     \
            cn##W.read(x, i);                                                                       \
            if (meta.fresh == 1) {                                                                  \
                cn##W.write(i, meta.cnt_inc);                                                       \
            } else if (x >= JG_COUNT_SPILL) {                                                       \
                meta.spill_c = x + meta.cnt_inc;                                                    \
                meta.spilled = 1;                                                                   \
                cn##W.write(i, 0);                                                                  \
            } else {                                                                                \
                cn##W.write(i, x + meta.cnt_inc);                                                   \
            }                                                                                       \
        }                                                                                           \
        if (meta.bypass == 0 && meta.v0_null_hit == 0 && !FITS(meta.v0)) { meta.rej0 = 1; }          \
        if (meta.bypass == 0 && meta.v1_null_hit == 0 && !FITS(meta.v1)) { meta.rej1 = 1; }          \
        if (meta.bypass == 0 && meta.v0_null_hit == 0 && meta.rej0 == 0) {                          \
            s0_##W.read(x, i);                                                                      \
            if (x == 0) { s0_##W.write(i, meta.x0b); }                                              \
            else if (x + meta.x0m1 < JG_SUM_SPAN) { s0_##W.write(i, x + meta.x0); }                 \
            else { meta.rej0 = 1; }                                                                 \
        }                                                                                           \
        if (meta.bypass == 0 && meta.v1_null_hit == 0 && meta.rej1 == 0) {                          \
            s1_##W.read(x, i);                                                                      \
            if (x == 0) { s1_##W.write(i, meta.x1b); }                                              \
            else if (x + meta.x1m1 < JG_SUM_SPAN) { s1_##W.write(i, x + meta.x1); }                 \
            else { meta.rej1 = 1; }                                                                 \
        }                                                                                           \
    }

/* FLUSH of slot meta.idx of way W: read and clear. */
#define TAKE_WAY(W)                                                                                 \
    if (way == W) {                                                                                 \
        kl##W.read(x, i); kh##W.read(k, i); cn##W.read(c, i); s0_##W.read(t0, i); s1_##W.read(t1, i); \
        kl##W.write(i, 0); kh##W.write(i, 0); cn##W.write(i, 0); s0_##W.write(i, 0); s1_##W.write(i, 0); \
    }

/* The slot table: JG_WAYS ways of JG_WAY_SLOTS slots, each way its own registers and hash
 * (docs/switch.md, "The pipeline"): kl<w> the key's first four wire bytes XOR the job's tag (0:
 * empty), kh<w> its last four, cn<w> the count, s0_<w> and s1_<w> the sums (0: no value yet, else
 * the sum + JG_SUM_BIAS). The same five 32-bit registers per way as on Tofino (p4/tna). */
control Aggregator(inout headers_t hdr, inout metadata_t meta) {
    register<bit<32>>(JG_WAY_SLOTS) kl0;
    register<bit<32>>(JG_WAY_SLOTS) kh0;
    register<bit<32>>(JG_WAY_SLOTS) cn0;
    register<bit<32>>(JG_WAY_SLOTS) s0_0;
    register<bit<32>>(JG_WAY_SLOTS) s1_0;
    register<bit<32>>(JG_WAY_SLOTS) kl1;
    register<bit<32>>(JG_WAY_SLOTS) kh1;
    register<bit<32>>(JG_WAY_SLOTS) cn1;
    register<bit<32>>(JG_WAY_SLOTS) s0_1;
    register<bit<32>>(JG_WAY_SLOTS) s1_1;
    register<bit<32>>(JG_WAY_SLOTS) kl2;
    register<bit<32>>(JG_WAY_SLOTS) kh2;
    register<bit<32>>(JG_WAY_SLOTS) cn2;
    register<bit<32>>(JG_WAY_SLOTS) s0_2;
    register<bit<32>>(JG_WAY_SLOTS) s1_2;
    register<bit<32>>(JG_WAY_SLOTS) kl3;
    register<bit<32>>(JG_WAY_SLOTS) kh3;
    register<bit<32>>(JG_WAY_SLOTS) cn3;
    register<bit<32>>(JG_WAY_SLOTS) s0_3;
    register<bit<32>>(JG_WAY_SLOTS) s1_3;
    register<bit<32>>(JG_WAY_SLOTS) kl4;
    register<bit<32>>(JG_WAY_SLOTS) kh4;
    register<bit<32>>(JG_WAY_SLOTS) cn4;
    register<bit<32>>(JG_WAY_SLOTS) s0_4;
    register<bit<32>>(JG_WAY_SLOTS) s1_4;
    register<bit<32>>(JG_WAY_SLOTS) kl5;
    register<bit<32>>(JG_WAY_SLOTS) kh5;
    register<bit<32>>(JG_WAY_SLOTS) cn5;
    register<bit<32>>(JG_WAY_SLOTS) s0_5;
    register<bit<32>>(JG_WAY_SLOTS) s1_5;
    register<bit<32>>(JG_WAY_SLOTS) kl6;
    register<bit<32>>(JG_WAY_SLOTS) kh6;
    register<bit<32>>(JG_WAY_SLOTS) cn6;
    register<bit<32>>(JG_WAY_SLOTS) s0_6;
    register<bit<32>>(JG_WAY_SLOTS) s1_6;

    apply {
        bit<32> i;
        bit<32> x;
        bit<32> k;
        bit<32> c;
        bit<32> t0;
        bit<32> t1;
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            /* FLUSH: seq = way << JG_FLUSH_WAY_SHIFT | slot index in the job's block */
            bit<64> seq = SWAP64(hdr.ntu.seq);
            bit<3> way = seq[18:16];
            i = (bit<32>)(meta.base | (seq[15:0] & meta.mask));
            x = 0; k = 0; c = 0; t0 = 0; t1 = 0;
            TAKE_WAY(0) TAKE_WAY(1) TAKE_WAY(2) TAKE_WAY(3) TAKE_WAY(4) TAKE_WAY(5) TAKE_WAY(6)
            if (x != 0 && (hdr.ntu.flags & JG_F_DISCARD) == 0) {
                meta.key = (x ^ meta.tag) ++ k;
                meta.r_count = (bit<64>)c;
                meta.r_s0 = t0 != 0 ? (bit<64>)((int<64>)((int<32>)(t0 - JG_SUM_BIAS))) : 64w0;
                meta.r_s1 = t1 != 0 ? (bit<64>)((int<64>)((int<32>)(t1 - JG_SUM_BIAS))) : 64w0;
                meta.r_nulls = (t0 != 0 ? 8w0 : meta.s0_out_null) | (t1 != 0 ? 8w0 : meta.s1_out_null);
                meta.rec = 1;
            }
        } else if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {
            /* a data tuple: this pass's (the datagram's first not yet taken) */
            bit<1> key_is_null = (hdr.nulls.data & meta.key_null) != 0 ? 1w1 : 1w0;
            meta.v0_null_hit = (hdr.nulls.data & meta.v0_null) != 0 ? 1w1 : 1w0;
            meta.v1_null_hit = (hdr.nulls.data & meta.v1_null) != 0 ? 1w1 : 1w0;
            meta.cnt_inc = (hdr.nulls.data & meta.cnt_null) != 0 ? 32w0 : 32w1;
            if (meta.v0_null_hit == 1) { meta.v0 = 0; }
            if (meta.v1_null_hit == 1) { meta.v1 = 0; }
            meta.x0 = meta.v0[31:0];
            meta.x1 = meta.v1[31:0];
            meta.x0b = meta.v0[31:0] + JG_SUM_BIAS;
            meta.x1b = meta.v1[31:0] + JG_SUM_BIAS;
            meta.x0m1 = meta.v0[31:0] - 1;
            meta.x1m1 = meta.v1[31:0] - 1;
            meta.bypass = (key_is_null == 1 || meta.klo == 0) ? 1w1 : 1w0;
            meta.way = NO_WAY;
            meta.fresh = 0;
            if (meta.bypass == 0) {
                TRY_WAY(0) TRY_WAY(1) TRY_WAY(2) TRY_WAY(3) TRY_WAY(4) TRY_WAY(5) TRY_WAY(6)
                if (meta.way == NO_WAY) {
                    meta.bypass = 1;  /* no way had room: on downstream */
                }
            }
            if (meta.bypass == 0) {
                AT_WAY(0) AT_WAY(1) AT_WAY(2) AT_WAY(3) AT_WAY(4) AT_WAY(5) AT_WAY(6)
            }
            if (meta.bypass == 1) {
                /* the tuple as a partial row of its own */
                meta.r_count = (bit<64>)meta.cnt_inc;
                meta.r_s0 = meta.v0;
                meta.r_s1 = meta.v1;
                meta.r_nulls = (key_is_null == 1 ? 8w1 : 8w0)
                             | (meta.v0_null_hit == 1 ? meta.s0_out_null : 8w0)
                             | (meta.v1_null_hit == 1 ? meta.s1_out_null : 8w0);
                meta.rec = 1;
            } else if (meta.spilled == 1 || meta.rej0 == 1 || meta.rej1 == 1) {
                /* a spill record: what the slot could not take, the other sums NULL */
                meta.spilled = 1;
                meta.r_count = (bit<64>)meta.spill_c;
                meta.r_s0 = meta.rej0 == 1 ? meta.v0 : 64w0;
                meta.r_s1 = meta.rej1 == 1 ? meta.v1 : 64w0;
                meta.r_nulls = (meta.rej0 == 1 ? 8w0 : meta.s0_out_null) | (meta.rej1 == 1 ? 8w0 : meta.s1_out_null);
                meta.rec = 1;
            }
        }
        if (meta.rec == 1) {  /* Emit writes wire bytes: the record's words as little-endian int64 */
            meta.r_count = SWAP64(meta.r_count);
            meta.r_s0 = SWAP64(meta.r_s0);
            meta.r_s1 = SWAP64(meta.r_s1);
        }
    }
}

/* Per job: data datagrams received per input stream (on their first pass), tuples taken through
 * the table (a pass each), output datagrams (out_seq numbers them) and the records in them,
 * FLUSHes processed, bypasses, spills. */
control StreamCounters(inout headers_t hdr, inout metadata_t meta, out bit<64> seq) {
    register<bit<32>>(JG_STREAM_COUNTERS) received;
    register<bit<32>>(JG_MAX_JOBS) tuples;
    register<bit<32>>(JG_MAX_JOBS) out_seq;
    register<bit<32>>(JG_MAX_JOBS) records;
    register<bit<32>>(JG_MAX_JOBS) flushed;
    register<bit<32>>(JG_MAX_JOBS) bypassed;
    register<bit<32>>(JG_MAX_JOBS) spilled;

    apply {
        bit<32> r;
        bit<32> f;
        bit<32> s;
        seq = 0;
        meta.counter = ((bit<12>)meta.job << 6) | (bit<12>)(SWAP32(hdr.ntu.stream)[5:0]);
        if ((hdr.ntu.flags & JG_F_END) != 0) {
            /* a sender's END: on to the controller with what arrived from that stream */
            received.read(r, (bit<32>)meta.counter);
            hdr.end.received = SWAP64((bit<64>)r);
            meta.out_kind = OUT_NOTICE;
        } else if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            flushed.read(f, (bit<32>)meta.job);
            flushed.write((bit<32>)meta.job, f + 1);
        } else if ((hdr.ntu.flags & JG_F_FINISH) != 0) {
            /* the END of the switch's output stream; LOSS when FLUSHes went missing */
            out_seq.read(s, (bit<32>)meta.job);
            records.read(meta.out_records, (bit<32>)meta.job);
            flushed.read(f, (bit<32>)meta.job);
            seq = (bit<64>)s;
            hdr.ntu.flags = JG_F_END;
            if ((bit<64>)f != SWAP64(hdr.finish.flushes)) {
                hdr.ntu.flags = JG_F_END | JG_F_LOSS;
            }
            meta.out_kind = OUT_END;
        } else {
            if (hdr.ntu.flags == 0) {  /* a datagram's first pass */
                received.read(r, (bit<32>)meta.counter);
                received.write((bit<32>)meta.counter, r + 1);
            }
            tuples.read(r, (bit<32>)meta.job);
            tuples.write((bit<32>)meta.job, r + 1);
            if (meta.bypass == 1) {
                bypassed.read(r, (bit<32>)meta.job);
                bypassed.write((bit<32>)meta.job, r + 1);
            }
            if (meta.spilled == 1) {
                spilled.read(r, (bit<32>)meta.job);
                spilled.write((bit<32>)meta.job, r + 1);
            }
        }
        if (meta.out_kind == OUT_RECORD) {
            out_seq.read(s, (bit<32>)meta.job);
            out_seq.write((bit<32>)meta.job, s + 1);
            seq = (bit<64>)s;
            records.read(r, (bit<32>)meta.job);
            records.write((bit<32>)meta.job, r + (bit<32>)meta.n_rec);
        }
    }
}

/* The ring of version 2 input streams (jumpgate_defs.p4, JG_SEEN): a cell per sequence number
 * modulo JG_SEEN per (job, stream), holding the mark of the datagram last taken in it, its pass
 * over the ring counted from 1. A data datagram's first pass: when its mark is not newer than its
 * cell's, (int16)(cell - mark) >= 0, it was taken before (also a repeat held back past a later
 * pass over the cell, which the senders' window of JG_SEEN datagrams allows): `repeat`, dropped
 * and counted in `repeats`; otherwise the cell takes its mark and the datagram is taken. */
control SeenRing(inout headers_t hdr, inout metadata_t meta, out bit<1> repeat) {
    register<bit<16>>(JG_SEEN_CELLS) seen;
    register<bit<32>>(JG_MAX_JOBS) repeats;

    apply {
        bit<64> seq = SWAP64(hdr.ntu.seq);
        bit<32> stream = SWAP32(hdr.ntu.stream);  /* below JG_MAX_STREAMS: Admit */
        bit<32> cell = (((bit<32>)meta.job * JG_MAX_STREAMS + stream) << JG_SEEN_BITS)
                     | (bit<32>)seq[JG_SEEN_BITS - 1:0];
        bit<16> mark = seq[JG_SEEN_BITS + 15:JG_SEEN_BITS] + 1;
        bit<16> c;
        bit<32> r;
        seen.read(c, cell);
        bit<16> newer = c - mark;
        if (newer[15:15] == 0) {
            repeat = 1;
            repeats.read(r, (bit<32>)meta.job);
            repeats.write((bit<32>)meta.job, r + 1);
        } else {
            repeat = 0;
            seen.write(cell, mark);
        }
    }
}

/* A version 2 sender's answer, made in egress from the ingress clone of its datagram (the
 * datagram as it arrived, parsed again), which left by the clone session of the port it came in
 * on: back to where it came from, header only (the rest cut off), its timestamp (the header's last
 * field) echoed as it came. A data datagram's is a receipt, ACK with SACK: "datagram `seq` has
 * arrived", taken now or before; an END's is the END answer, ACK with END at the END's number:
 * ingress clones an END only once the switch has taken every datagram before it. */
control Answer(inout headers_t hdr) {
    apply {
        bit<48> mac = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        bit<32> ip = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
        hdr.ipv4.src_addr = ip;
        bit<16> port = hdr.udp.dst_port;
        hdr.udp.dst_port = hdr.udp.src_port;
        hdr.udp.src_port = port;
        hdr.ntu.flags = (hdr.ntu.flags & JG_F_END) != 0 ? 16w0 | JG_F_ACK | JG_F_END : 16w0 | JG_F_ACK | JG_F_SACK;
        hdr.ntu.count = 0;
        hdr.tlen.setInvalid(); hdr.nulls.setInvalid();
        hdr.w0.setInvalid(); hdr.w1.setInvalid(); hdr.w2.setInvalid(); hdr.w3.setInvalid();
        hdr.w4.setInvalid(); hdr.w5.setInvalid(); hdr.w6.setInvalid(); hdr.w7.setInvalid();
        hdr.end.setInvalid();
        hdr.udp.len = 8 + JG_UDP_HEADER_BYTES;
        hdr.udp.checksum = 0;
        hdr.ipv4.total_len = 20 + 8 + JG_UDP_HEADER_BYTES;
        truncate(14 + 20 + 8 + JG_UDP_HEADER_BYTES);  /* the tuples the parser left as payload */
    }
}

control SwitchIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    JobConfig() job_config;
    ValueSelect() value_select;
    Output() output;
    Admit() admit;
    Aggregator() aggregator;
    Passes() passes;
    StreamCounters() counters;
    Emit() emit;
    SeenRing() seen_ring;

    /* out of `port` to the host at `dst_mac`, from the MAC the frame was sent to (the switch's): a
     * host's kernel drops a frame not addressed to its own MAC, and no switch here answers ARP */
    action send(bit<9> port, bit<48> dst_mac) {
        sm.egress_spec = port;
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = dst_mac;
    }
    action drop() { mark_to_drop(sm); }
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
        bit<1> v2 = 0;        /* a version 2 sender's datagram */
        bit<1> ring = 0;      /* its first pass, through the ring */
        bit<1> repeat = 0;    /* taken before: dropped */
        meta.out_kind = OUT_NONE;
        meta.recirculated = sm.instance_type == PKT_INSTANCE_TYPE_RECIRC ? 1w1 : 1w0;
        if (hdr.ntu.isValid()) {
            job_config.apply(hdr, meta, hit);
        }
        if (hit && hdr.ntu.magic == JG_UDP_MAGIC2_BE) {
            v2 = 1;
            if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_RETX) {
                /* a data datagram: after the ring it is a version 1 datagram to the rest of the
                 * pipeline, and the records its tuples leave go out as the switch's own (version 1)
                 * output stream */
                ring = 1;
                hdr.ntu.magic = JG_UDP_MAGIC_BE;
                hdr.ntu.flags = 0;
                hdr.ntu.zero = 0;
            }
        }
        if (hit && hdr.w0.isValid()) {  /* a data tuple: its values, native, int32 ones sign-extended */
            value_select.apply(hdr, meta);
            meta.v0 = SWAP64(meta.v0w);
            meta.v1 = SWAP64(meta.v1w);
            if ((meta.flags & 1) != 0) { meta.v0 = (bit<64>)(int<64>)(int<32>)meta.v0[31:0]; }
            if ((meta.flags & 2) != 0) { meta.v1 = (bit<64>)(int<64>)(int<32>)meta.v1[31:0]; }
        }
        if (hit) {
            output.apply(hdr, meta);
            admit.apply(hdr, meta, ok);
            if (!ok) {
                hdr.ntu.flags = hdr.ntu.flags | JG_F_ERROR;  /* not tuples of the job's layout: tell the controller */
                meta.out_kind = OUT_NOTICE;
            } else {
                if (ring == 1) {
                    seen_ring.apply(hdr, meta, repeat);
                    /* its receipt, taken now or before (a lost receipt costs a repeat) */
                    clone(CloneType.I2E, JG_RECEIPT_SESSION_BASE + (bit<32>)sm.ingress_port);
                }
                if (repeat == 0) {
                    aggregator.apply(hdr, meta);
                    passes.apply(hdr, meta);
                    counters.apply(hdr, meta, seq);
                }
                if (v2 == 1 && (hdr.ntu.flags & JG_F_END) != 0 && hdr.end.received == hdr.ntu.seq) {
                    /* every datagram before the END was taken: the END answer ends the sender's
                     * stream (else it repeats the END while it repeats what is missing) */
                    clone(CloneType.I2E, JG_RECEIPT_SESSION_BASE + (bit<32>)sm.ingress_port);
                }
            }
            emit.apply(hdr, meta, SWAP64(seq), SWAP32(meta.out_stream), SWAP64((bit<64>)meta.out_records));
            /* what the switch sends leaves from the address and port it was sent to (the switch's
             * data address, the job's port), as a host's answer would: its receivers' route back to
             * the source is the switch, which reverse-path filters check */
            if (meta.out_kind == OUT_RECORD || meta.out_kind == OUT_END || meta.out_kind == OUT_NOTICE) {
                hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
                hdr.udp.src_port = hdr.udp.dst_port;
                hdr.ipv4.dst_addr = meta.out_kind == OUT_NOTICE ? meta.ctrl_ip : meta.dst_ip;
                hdr.udp.dst_port = meta.out_kind == OUT_NOTICE ? meta.ctrl_port : meta.dst_port;
            }
        }
        if (hit && meta.out_kind == OUT_NONE) {
            mark_to_drop(sm);
        } else if (meta.out_kind == OUT_PASS) {
            sm.egress_spec = sm.ingress_port;  /* not sent: SwitchEgress recirculates it */
        } else if (hdr.ipv4.isValid()) {
            forward.apply();
        }
    }
}

control SwitchEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    Answer() answer;

    apply {
        if (sm.instance_type == PKT_INSTANCE_TYPE_INGRESS_CLONE) {
            answer.apply(hdr);
        } else if (meta.out_kind == OUT_PASS) {
            /* the datagram's next pass: back into the ingress parser as deparsed (NTU with
             * JG_F_PASS, its records, the tuples still to come); of the metadata only the job's
             * index rides along (field list 0), and the next pass looks the job up again anyway */
            recirculate_preserving_field_list(0);
        }
    }
}

control SwitchComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control SwitchDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.ntu);
        pkt.emit(hdr.pass);
        pkt.emit(hdr.end);
        pkt.emit(hdr.finish);
        pkt.emit(hdr.rec0);
        pkt.emit(hdr.rec1);
        pkt.emit(hdr.rec2);
        pkt.emit(hdr.rec3);
        pkt.emit(hdr.tlen);
        pkt.emit(hdr.nulls);
        pkt.emit(hdr.w0);
        pkt.emit(hdr.w1);
        pkt.emit(hdr.w2);
        pkt.emit(hdr.w3);
        pkt.emit(hdr.w4);
        pkt.emit(hdr.w5);
        pkt.emit(hdr.w6);
        pkt.emit(hdr.w7);
    }
}

V1Switch(SwitchParser(), SwitchVerifyChecksum(), SwitchIngress(), SwitchEgress(), SwitchComputeChecksum(),
         SwitchDeparser()) main;
