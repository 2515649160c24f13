/* Jumpgate's switch aggregator for Tofino (TNA): the partial aggregation of docs/switch.md.
 *
 * Shared with the BMv2 program (p4/v1model/jumpgate_agg.p4): sizes (../include/jumpgate_defs.p4),
 * headers and metadata, parser states, and the table-owning controls JobConfig, Output and Emit.
 * Here: the registers as Tofino RegisterActions (one access per register array per packet, each
 * array in its own stage), the CRC32 Hash extern, forwarding and the TNA package.
 *
 *   bf-p4c --target tofino --arch tna -o build p4/tna/jumpgate_agg.p4      (Intel's SDE)
 *
 * Written against TNA's documented API and never compiled on the machines this project is built
 * on (bf-p4c is proprietary): expect to adjust stateful-ALU expressions to what the compiler fits.
 */
#include <core.p4>
#include <tna.p4>

#include "../include/jumpgate_defs.p4"
#include "../include/headers.p4"
#include "../include/job_config.p4"
#include "../include/output.p4"

parser SwitchIngressParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                           out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        transition parse_ethernet;
    }
#include "../include/parser_states.p4"
}

#define HI_BIAS 32w0x4000000   /* 2^26: h is safe when (h + 2^26) mod 2^32 < 2^27 */
#define HI_SPAN 32w0x8000000

control Aggregator(inout headers_t hdr, inout metadata_t meta) {
    Hash<bit<16>>(HashAlgorithm_t.CRC32) key_hash;

    Register<bit<32>, bit<16>>(JG_TABLE_SLOTS, 0) occ;
    Register<bit<32>, bit<16>>(JG_TABLE_SLOTS, 0) key_lo;
    Register<bit<32>, bit<16>>(JG_TABLE_SLOTS, 0) key_hi;
    Register<bit<32>, bit<16>>(JG_TABLE_SLOTS, 0) count;
    Register<bit<32>, bit<16>>(JG_TABLE_SLOTS, 0) s0_lo;
    Register<bit<32>, bit<16>>(JG_TABLE_SLOTS, 0) s0_hi;
    Register<bit<8>, bit<16>>(JG_TABLE_SLOTS, 0) s0_has;
    Register<bit<32>, bit<16>>(JG_TABLE_SLOTS, 0) s1_lo;
    Register<bit<32>, bit<16>>(JG_TABLE_SLOTS, 0) s1_hi;
    Register<bit<8>, bit<16>>(JG_TABLE_SLOTS, 0) s1_has;

    bit<32> key_hi_in;
    bit<32> key_lo_in;
    bit<32> not_v0_lo;
    bit<32> not_v1_lo;
    bit<32> v0_hi_c;
    bit<32> v1_hi_c;
    bit<8> has0_in;
    bit<8> has1_in;
    bit<8> key_match;

    RegisterAction<bit<32>, bit<16>, bit<1>>(occ) occ_claim = {
        void apply(inout bit<32> v, out bit<1> fresh) {
            if (v == meta.tag) { fresh = 0; } else { v = meta.tag; fresh = 1; }
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(occ) occ_take = {
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }
    };

    RegisterAction<bit<32>, bit<16>, bit<8>>(key_hi) key_hi_set = {
        void apply(inout bit<32> v, out bit<8> same) { v = key_hi_in; same = 1; }
    };
    RegisterAction<bit<32>, bit<16>, bit<8>>(key_hi) key_hi_check = {
        void apply(inout bit<32> v, out bit<8> same) { if (v == key_hi_in) { same = 1; } else { same = 0; } }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(key_hi) key_hi_take = {
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }
    };
    RegisterAction<bit<32>, bit<16>, bit<8>>(key_lo) key_lo_set = {
        void apply(inout bit<32> v, out bit<8> same) { v = key_lo_in; same = 1; }
    };
    RegisterAction<bit<32>, bit<16>, bit<8>>(key_lo) key_lo_check = {
        void apply(inout bit<32> v, out bit<8> same) { if (v == key_lo_in) { same = 1; } else { same = 0; } }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(key_lo) key_lo_take = {
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }
    };

    RegisterAction<bit<32>, bit<16>, bit<32>>(count) count_set = {
        void apply(inout bit<32> v, out bit<32> spill) { v = meta.cnt_inc; spill = 0; }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(count) count_add = {
        void apply(inout bit<32> v, out bit<32> spill) {
            if (v >= JG_COUNT_SPILL) { spill = v + meta.cnt_inc; v = 0; } else { v = v + meta.cnt_inc; spill = 0; }
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(count) count_take = {
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }
    };

#define SUM_ACTIONS(S, VLO, NOT_VLO, VHI, VHI_C, HAS_IN)                                          \
    RegisterAction<bit<32>, bit<16>, bit<32>>(S##_lo) S##_lo_set = {                          \
        void apply(inout bit<32> v, out bit<32> carry) { v = VLO; carry = 0; }                \
    };                                                                                        \
    RegisterAction<bit<32>, bit<16>, bit<32>>(S##_lo) S##_lo_add = {                          \
        void apply(inout bit<32> v, out bit<32> carry) {                                      \
            if (v > NOT_VLO) { carry = 1; } else { carry = 0; }                               \
            v = v + VLO;                                                                      \
        }                                                                                     \
    };                                                                                        \
    RegisterAction<bit<32>, bit<16>, bit<32>>(S##_lo) S##_lo_take = {                         \
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }                      \
    };                                                                                        \
    RegisterAction<bit<32>, bit<16>, bit<32>>(S##_hi) S##_hi_set = {                          \
        void apply(inout bit<32> v, out bit<32> spill) { v = VHI; spill = 0; }                \
    };                                                                                        \
    RegisterAction<bit<32>, bit<16>, bit<32>>(S##_hi) S##_hi_add = {                          \
        void apply(inout bit<32> v, out bit<32> spill) {                                      \
            if (v + VHI_C + HI_BIAS >= HI_SPAN) { spill = v + VHI_C; v = 0; }                 \
            else { v = v + VHI_C; spill = 0; }                                                \
        }                                                                                     \
    };                                                                                        \
    RegisterAction<bit<32>, bit<16>, bit<32>>(S##_hi) S##_hi_take = {                         \
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; }                      \
    };                                                                                        \
    RegisterAction<bit<8>, bit<16>, bit<8>>(S##_has) S##_has_set = {                          \
        void apply(inout bit<8> v) { v = HAS_IN; }                                            \
    };                                                                                        \
    RegisterAction<bit<8>, bit<16>, bit<8>>(S##_has) S##_has_or = {                           \
        void apply(inout bit<8> v) { v = v | HAS_IN; }                                        \
    };                                                                                        \
    RegisterAction<bit<8>, bit<16>, bit<8>>(S##_has) S##_has_take = {                         \
        void apply(inout bit<8> v, out bit<8> old) { old = v; v = 0; }                        \
    };

    SUM_ACTIONS(s0, meta.v0[31:0], not_v0_lo, meta.v0[63:32], v0_hi_c, has0_in)
    SUM_ACTIONS(s1, meta.v1[31:0], not_v1_lo, meta.v1[63:32], v1_hi_c, has1_in)

    apply {
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            meta.idx = meta.base | (SWAP64(hdr.ntu.seq)[15:0] & meta.mask);
            bit<32> o = occ_take.execute(meta.idx);
            bit<32> kh = key_hi_take.execute(meta.idx);
            bit<32> kl = key_lo_take.execute(meta.idx);
            bit<32> c = count_take.execute(meta.idx);
            bit<32> lo0 = s0_lo_take.execute(meta.idx);
            bit<32> hi0 = s0_hi_take.execute(meta.idx);
            bit<8> h0 = s0_has_take.execute(meta.idx);
            bit<32> lo1 = s1_lo_take.execute(meta.idx);
            bit<32> hi1 = s1_hi_take.execute(meta.idx);
            bit<8> h1 = s1_has_take.execute(meta.idx);
            if (o == meta.tag && (hdr.ntu.flags & JG_F_DISCARD) == 0) {
                meta.key = kh ++ kl;
                meta.r_count = (bit<64>)c;
                meta.r_s0 = 0;
                meta.r_s1 = 0;
                meta.r_nulls = meta.s0_out_null | meta.s1_out_null;
                if (h0 != 0) { meta.r_s0 = hi0 ++ lo0; meta.r_nulls = meta.r_nulls & ~meta.s0_out_null; }
                if (h1 != 0) { meta.r_s1 = hi1 ++ lo1; meta.r_nulls = meta.r_nulls & ~meta.s1_out_null; }
                meta.out_kind = OUT_RECORD;
            }
        } else if (hdr.ntu.flags == 0) {
            bit<1> key_is_null = 0;
            if ((hdr.nulls.data & meta.key_null) != 0) { key_is_null = 1; }
            meta.v0_null_hit = 0;
            meta.v1_null_hit = 0;
            has0_in = 1;
            has1_in = 1;
            if ((hdr.nulls.data & meta.v0_null) != 0) { meta.v0_null_hit = 1; has0_in = 0; }
            if ((hdr.nulls.data & meta.v1_null) != 0) { meta.v1_null_hit = 1; has1_in = 0; }
            meta.cnt_inc = 1;
            if ((hdr.nulls.data & meta.cnt_null) != 0) { meta.cnt_inc = 0; }
            meta.bypass = key_is_null;
            if (!(meta.v0[63:58] == 0 || meta.v0[63:58] == 0x3f)) { meta.bypass = 1; }
            if (!(meta.v1[63:58] == 0 || meta.v1[63:58] == 0x3f)) { meta.bypass = 1; }
            key_hi_in = meta.key[63:32];
            key_lo_in = meta.key[31:0];
            not_v0_lo = ~meta.v0[31:0];
            not_v1_lo = ~meta.v1[31:0];
            if (meta.bypass == 0) {
                meta.hash = key_hash.get({ meta.key });
                meta.idx = meta.base | (meta.hash & meta.mask);
                meta.fresh = occ_claim.execute(meta.idx);
                if (meta.fresh == 1) {
                    key_hi_set.execute(meta.idx);
                    key_lo_set.execute(meta.idx);
                } else {
                    key_match = key_hi_check.execute(meta.idx) & key_lo_check.execute(meta.idx);
                    if (key_match == 0) { meta.bypass = 1; }
                }
            }
            if (meta.bypass == 0) {
                if (meta.fresh == 1) {
                    count_set.execute(meta.idx);
                    s0_lo_set.execute(meta.idx);
                    s0_hi_set.execute(meta.idx);
                    s0_has_set.execute(meta.idx);
                    s1_lo_set.execute(meta.idx);
                    s1_hi_set.execute(meta.idx);
                    s1_has_set.execute(meta.idx);
                } else {
                    meta.spill_c = count_add.execute(meta.idx);
                    meta.carry0 = s0_lo_add.execute(meta.idx);
                    meta.carry1 = s1_lo_add.execute(meta.idx);
                    v0_hi_c = meta.v0[63:32] + meta.carry0;
                    v1_hi_c = meta.v1[63:32] + meta.carry1;
                    meta.spill_h0 = s0_hi_add.execute(meta.idx);
                    meta.spill_h1 = s1_hi_add.execute(meta.idx);
                    s0_has_or.execute(meta.idx);
                    s1_has_or.execute(meta.idx);
                    if (meta.spill_c != 0 || meta.spill_h0 != 0 || meta.spill_h1 != 0) {
                        meta.spilled = 1;
                        meta.r_count = (bit<64>)meta.spill_c;
                        meta.r_s0 = (bit<64>)((int<64>)((int<32>)meta.spill_h0)) << 32;
                        meta.r_s1 = (bit<64>)((int<64>)((int<32>)meta.spill_h1)) << 32;
                        meta.r_nulls = 0;
                        if (meta.spill_h0 == 0) { meta.r_nulls = meta.r_nulls | meta.s0_out_null; }
                        if (meta.spill_h1 == 0) { meta.r_nulls = meta.r_nulls | meta.s1_out_null; }
                        meta.out_kind = OUT_RECORD;
                    }
                }
            }
            if (meta.bypass == 1) {
                meta.r_count = (bit<64>)meta.cnt_inc;
                meta.r_s0 = meta.v0;
                meta.r_s1 = meta.v1;
                meta.r_nulls = (bit<8>)key_is_null;
                if (meta.v0_null_hit == 1) { meta.r_nulls = meta.r_nulls | meta.s0_out_null; }
                if (meta.v1_null_hit == 1) { meta.r_nulls = meta.r_nulls | meta.s1_out_null; }
                meta.out_kind = OUT_RECORD;
            }
        }
    }
}

control StreamCounters(inout headers_t hdr, inout metadata_t meta, out bit<64> seq) {
    Register<bit<32>, bit<12>>(JG_STREAM_COUNTERS, 0) received;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) out_seq;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) flushed;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) bypassed;
    Register<bit<32>, bit<8>>(JG_MAX_JOBS, 0) spilled;

    RegisterAction<bit<32>, bit<12>, bit<32>>(received) received_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    RegisterAction<bit<32>, bit<12>, bit<32>>(received) received_read = {
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
            hdr.end.received = SWAP64((bit<64>)received_read.execute(meta.counter));
            meta.out_kind = OUT_NOTICE;
        } else if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            flushed_inc.execute(meta.job);
        } else if ((hdr.ntu.flags & JG_F_FINISH) != 0) {
            bit<32> f = flushed_read.execute(meta.job);
            seq = (bit<64>)out_seq_read.execute(meta.job);
            hdr.ntu.flags = JG_F_END;
            if ((bit<64>)f != SWAP64(hdr.finish.flushes)) { hdr.ntu.flags = JG_F_END | JG_F_LOSS; }
            meta.out_kind = OUT_END;
        } else {
            received_inc.execute(meta.counter);
            if (meta.bypass == 1) { bypassed_inc.execute(meta.job); }
            if (meta.spilled == 1) { spilled_inc.execute(meta.job); }
        }
        if (meta.out_kind == OUT_RECORD) {
            seq = (bit<64>)out_seq_next.execute(meta.job);
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
    Aggregator() aggregator;
    StreamCounters() counters;
    Emit() emit;

    action send(PortId_t port) { ig_tm_md.ucast_egress_port = port; }
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
                hdr.ntu.flags = JG_F_ERROR;
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
            drop();
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
