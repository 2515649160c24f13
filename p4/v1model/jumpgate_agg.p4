/* Jumpgate's switch aggregator for BMv2 (v1model): the partial aggregation of docs/switch.md.
 *
 * Shared with the Tofino program (p4/tna/jumpgate_agg.p4): sizes (../include/jumpgate_defs.p4),
 * headers and metadata, parser states, and the table-owning controls JobConfig, Output and Emit.
 * Here: the registers and their updates (controls Aggregator and StreamCounters), forwarding,
 * the IPv4 checksum and the v1model package. p4/model/switch_model.c runs the same steps.
 *
 *   p4c --target bmv2 --arch v1model --p4runtime-files build/jumpgate_agg.p4info.txt \
 *       -o build p4/v1model/jumpgate_agg.p4
 */
#include <core.p4>
#include <v1model.p4>

#include "../include/jumpgate_defs.p4"
#include "../include/headers.p4"
#include "../include/job_config.p4"
#include "../include/output.p4"

parser SwitchParser(packet_in pkt, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    state start {
        transition parse_ethernet;
    }
#include "../include/parser_states.p4"
}

control SwitchVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

#define SAFE64(v) (v[63:58] == 0 || v[63:58] == 0x3f)   /* -2^58 <= v < 2^58 */
#define SAFE_HI(h) (h[31:26] == 0 || h[31:26] == 0x3f)  /* -2^26 <= h < 2^26 */

/* The slot table: 64K slots, each a tag (the job that holds it), a 64-bit key in two halves, a
 * count and two 64-bit sums in 32-bit halves with a has-a-value flag. */
control Aggregator(inout headers_t hdr, inout metadata_t meta) {
    register<bit<32>>(JG_TABLE_SLOTS) occ;
    register<bit<32>>(JG_TABLE_SLOTS) key_lo;
    register<bit<32>>(JG_TABLE_SLOTS) key_hi;
    register<bit<32>>(JG_TABLE_SLOTS) count;
    register<bit<32>>(JG_TABLE_SLOTS) s0_lo;
    register<bit<32>>(JG_TABLE_SLOTS) s0_hi;
    register<bit<8>>(JG_TABLE_SLOTS) s0_has;
    register<bit<32>>(JG_TABLE_SLOTS) s1_lo;
    register<bit<32>>(JG_TABLE_SLOTS) s1_hi;
    register<bit<8>>(JG_TABLE_SLOTS) s1_has;

    apply {
        bit<32> o;
        bit<32> kh;
        bit<32> kl;
        bit<32> c;
        bit<32> lo;
        bit<32> hi;
        bit<32> nh;
        bit<8> has0;
        bit<8> has1;
        bit<32> lo1;
        bit<32> hi1;
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            /* read and clear slot `seq` of the job's block; emit it when the job holds it */
            meta.idx = meta.base | (SWAP64(hdr.ntu.seq)[15:0] & meta.mask);
            occ.read(o, (bit<32>)meta.idx);
            key_hi.read(kh, (bit<32>)meta.idx);
            key_lo.read(kl, (bit<32>)meta.idx);
            count.read(c, (bit<32>)meta.idx);
            s0_lo.read(lo, (bit<32>)meta.idx);
            s0_hi.read(hi, (bit<32>)meta.idx);
            s0_has.read(has0, (bit<32>)meta.idx);
            s1_lo.read(lo1, (bit<32>)meta.idx);
            s1_hi.read(hi1, (bit<32>)meta.idx);
            s1_has.read(has1, (bit<32>)meta.idx);
            occ.write((bit<32>)meta.idx, 0);
            key_hi.write((bit<32>)meta.idx, 0);
            key_lo.write((bit<32>)meta.idx, 0);
            count.write((bit<32>)meta.idx, 0);
            s0_lo.write((bit<32>)meta.idx, 0);
            s0_hi.write((bit<32>)meta.idx, 0);
            s0_has.write((bit<32>)meta.idx, 0);
            s1_lo.write((bit<32>)meta.idx, 0);
            s1_hi.write((bit<32>)meta.idx, 0);
            s1_has.write((bit<32>)meta.idx, 0);
            if (o == meta.tag && (hdr.ntu.flags & JG_F_DISCARD) == 0) {
                meta.key = kh ++ kl;
                meta.r_count = (bit<64>)c;
                meta.r_s0 = has0 != 0 ? hi ++ lo : 64w0;
                meta.r_s1 = has1 != 0 ? hi1 ++ lo1 : 64w0;
                meta.r_nulls = (has0 != 0 ? 8w0 : meta.s0_out_null) | (has1 != 0 ? 8w0 : meta.s1_out_null);
                meta.out_kind = OUT_RECORD;
            }
        } else if (hdr.ntu.flags == 0) {
            /* a data tuple */
            bit<1> key_is_null = (hdr.nulls.data & meta.key_null) != 0 ? 1w1 : 1w0;
            meta.v0_null_hit = (hdr.nulls.data & meta.v0_null) != 0 ? 1w1 : 1w0;
            meta.v1_null_hit = (hdr.nulls.data & meta.v1_null) != 0 ? 1w1 : 1w0;
            meta.cnt_inc = (hdr.nulls.data & meta.cnt_null) != 0 ? 32w0 : 32w1;
            meta.bypass = (key_is_null == 1 || !SAFE64(meta.v0) || !SAFE64(meta.v1)) ? 1w1 : 1w0;
            if (meta.bypass == 0) {
                hash(meta.hash, HashAlgorithm.crc32, 16w0, { meta.key }, 32w65536);
                meta.idx = meta.base | (meta.hash & meta.mask);
                occ.read(o, (bit<32>)meta.idx);
                meta.fresh = o != meta.tag ? 1w1 : 1w0;
                if (meta.fresh == 1) {
                    occ.write((bit<32>)meta.idx, meta.tag);
                    key_hi.write((bit<32>)meta.idx, meta.key[63:32]);
                    key_lo.write((bit<32>)meta.idx, meta.key[31:0]);
                } else {
                    key_hi.read(kh, (bit<32>)meta.idx);
                    key_lo.read(kl, (bit<32>)meta.idx);
                    if (kh != meta.key[63:32] || kl != meta.key[31:0]) {
                        meta.bypass = 1;  /* the slot holds another key: on downstream */
                    }
                }
            }
            if (meta.bypass == 0) {
                count.read(c, (bit<32>)meta.idx);
                s0_lo.read(lo, (bit<32>)meta.idx);
                s0_hi.read(hi, (bit<32>)meta.idx);
                s0_has.read(has0, (bit<32>)meta.idx);
                s1_lo.read(lo1, (bit<32>)meta.idx);
                s1_hi.read(hi1, (bit<32>)meta.idx);
                s1_has.read(has1, (bit<32>)meta.idx);
                if (meta.fresh == 1) {
                    count.write((bit<32>)meta.idx, meta.cnt_inc);
                    s0_lo.write((bit<32>)meta.idx, meta.v0[31:0]);
                    s0_hi.write((bit<32>)meta.idx, meta.v0[63:32]);
                    s0_has.write((bit<32>)meta.idx, meta.v0_null_hit == 1 ? 8w0 : 8w1);
                    s1_lo.write((bit<32>)meta.idx, meta.v1[31:0]);
                    s1_hi.write((bit<32>)meta.idx, meta.v1[63:32]);
                    s1_has.write((bit<32>)meta.idx, meta.v1_null_hit == 1 ? 8w0 : 8w1);
                } else {
                    /* count: spill at 2^31 - 1 */
                    if (c >= JG_COUNT_SPILL) {
                        meta.spill_c = c + meta.cnt_inc;
                        meta.spilled = 1;
                        count.write((bit<32>)meta.idx, 0);
                    } else {
                        count.write((bit<32>)meta.idx, c + meta.cnt_inc);
                    }
                    /* sum 0: low half with carry, high half kept inside [-2^26, 2^26) */
                    meta.carry0 = lo > ~meta.v0[31:0] ? 32w1 : 32w0;
                    s0_lo.write((bit<32>)meta.idx, lo + meta.v0[31:0]);
                    nh = hi + meta.v0[63:32] + meta.carry0;
                    if (SAFE_HI(nh)) {
                        s0_hi.write((bit<32>)meta.idx, nh);
                    } else {
                        meta.spill_h0 = nh;
                        meta.spilled = 1;
                        s0_hi.write((bit<32>)meta.idx, 0);
                    }
                    s0_has.write((bit<32>)meta.idx, has0 | (meta.v0_null_hit == 1 ? 8w0 : 8w1));
                    /* sum 1 */
                    meta.carry1 = lo1 > ~meta.v1[31:0] ? 32w1 : 32w0;
                    s1_lo.write((bit<32>)meta.idx, lo1 + meta.v1[31:0]);
                    nh = hi1 + meta.v1[63:32] + meta.carry1;
                    if (SAFE_HI(nh)) {
                        s1_hi.write((bit<32>)meta.idx, nh);
                    } else {
                        meta.spill_h1 = nh;
                        meta.spilled = 1;
                        s1_hi.write((bit<32>)meta.idx, 0);
                    }
                    s1_has.write((bit<32>)meta.idx, has1 | (meta.v1_null_hit == 1 ? 8w0 : 8w1));
                    if (meta.spilled == 1) {
                        /* a spill record: what left the slot, the other sums NULL */
                        meta.r_count = (bit<64>)meta.spill_c;
                        meta.r_s0 = (bit<64>)((int<64>)((int<32>)meta.spill_h0)) << 32;
                        meta.r_s1 = (bit<64>)((int<64>)((int<32>)meta.spill_h1)) << 32;
                        meta.r_nulls = (meta.spill_h0 != 0 ? 8w0 : meta.s0_out_null)
                                     | (meta.spill_h1 != 0 ? 8w0 : meta.s1_out_null);
                        meta.out_kind = OUT_RECORD;
                    }
                }
            }
            if (meta.bypass == 1) {
                /* the tuple as a partial row of its own */
                meta.r_count = (bit<64>)meta.cnt_inc;
                meta.r_s0 = meta.v0;
                meta.r_s1 = meta.v1;
                meta.r_nulls = (key_is_null == 1 ? 8w1 : 8w0)
                             | (meta.v0_null_hit == 1 ? meta.s0_out_null : 8w0)
                             | (meta.v1_null_hit == 1 ? meta.s1_out_null : 8w0);
                meta.out_kind = OUT_RECORD;
            }
        }
    }
}

/* Per job: datagrams received per input stream, records sent, FLUSHes processed, bypasses, spills. */
control StreamCounters(inout headers_t hdr, inout metadata_t meta, out bit<64> seq) {
    register<bit<32>>(JG_STREAM_COUNTERS) received;
    register<bit<32>>(JG_MAX_JOBS) out_seq;
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
            flushed.read(f, (bit<32>)meta.job);
            seq = (bit<64>)s;
            hdr.ntu.flags = JG_F_END;
            if ((bit<64>)f != SWAP64(hdr.finish.flushes)) {
                hdr.ntu.flags = JG_F_END | JG_F_LOSS;
            }
            meta.out_kind = OUT_END;
        } else {
            received.read(r, (bit<32>)meta.counter);
            received.write((bit<32>)meta.counter, r + 1);
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
        }
    }
}

control SwitchIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    JobConfig() job_config;
    Output() output;
    Aggregator() aggregator;
    StreamCounters() counters;
    Emit() emit;

    action send(bit<9> port) { sm.egress_spec = port; }
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
        bit<64> seq = 0;
        meta.out_kind = OUT_NONE;
        if (hdr.ntu.isValid()) {
            job_config.apply(hdr, meta, hit);
        }
        if (hit) {
            output.apply(hdr, meta);
            if (hdr.ntu.flags == 0 && !(hdr.w0.isValid() && hdr.ntu.count == 0x0100
                                        && SWAP32(hdr.tlen.len) == (bit<32>)meta.in_len
                                        && SWAP32(hdr.ntu.stream) < JG_MAX_STREAMS)) {
                hdr.ntu.flags = JG_F_ERROR;  /* not one tuple of the job's layout: tell the controller */
                meta.out_kind = OUT_NOTICE;
            } else if ((hdr.ntu.flags & JG_F_END) != 0 && SWAP32(hdr.ntu.stream) >= JG_MAX_STREAMS) {
                hdr.ntu.flags = hdr.ntu.flags | JG_F_ERROR;
                meta.out_kind = OUT_NOTICE;
            } else {
                aggregator.apply(hdr, meta);
                counters.apply(hdr, meta, seq);
            }
            emit.apply(hdr, meta, seq);
        }
        if (hit && meta.out_kind == OUT_NONE) {
            mark_to_drop(sm);
        } else if (hdr.ipv4.isValid()) {
            forward.apply();
        }
    }
}

control SwitchEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply { }
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
        pkt.emit(hdr.end);
        pkt.emit(hdr.finish);
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
        pkt.emit(hdr.out_len);
        pkt.emit(hdr.out_nulls);
        pkt.emit(hdr.out_key);
        pkt.emit(hdr.out_w0);
        pkt.emit(hdr.out_w1);
        pkt.emit(hdr.out_w2);
    }
}

V1Switch(SwitchParser(), SwitchVerifyChecksum(), SwitchIngress(), SwitchEgress(), SwitchComputeChecksum(),
         SwitchDeparser()) main;
