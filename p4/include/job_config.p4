/* Controls JobConfig and ValueSelect (controller: jumpgate/ncas/switch/controller.py JobConfig):
 * which UDP port is which job, where its slots are, and which fields of its tuples are the key and
 * the values. Shared by both programs: plain tables and actions. The values are copied as their
 * wire bytes (little-endian): Tofino has no byte swap, a program swaps where it computes (TNA: an
 * identity hash, which reorders bytes in the input crossbar). ValueSelect is its own control
 * because the Tofino program applies it apart from JobConfig. */
/* A table's MAU stage where a program wants it pinned (TNA: @stage); nothing elsewhere */
#ifndef STAGE
#define STAGE(n)
#endif

control JobConfig(inout headers_t hdr, inout metadata_t meta, out bool hit) {
    action set_job(bit<8> job, bit<32> tag, bit<16> base, bit<16> mask, bit<16> in_len, bit<8> flags,
                   bit<64> key_null, bit<64> v0_null, bit<64> v1_null, bit<64> cnt_null) {
        meta.job = job;
        meta.tag = tag;
        meta.base = base;
        meta.mask = mask;
        meta.in_len = in_len;
        meta.flags = flags;
        meta.key_null = key_null;
        meta.v0_null = v0_null;
        meta.v1_null = v1_null;
        meta.cnt_null = cnt_null;
        /* the tuple's NULL bits that matter, for a gateway's test against 0 in a later stage (a
         * gateway cannot AND two fields); at most 8 fields: all of them in the null vector's first
         * byte. Meaningless, and unused, when the datagram carries no tuple. */
        meta.key_nulls = hdr.nulls.data[63:56] & key_null[63:56];
        meta.v0_nulls = hdr.nulls.data[63:56] & v0_null[63:56];
        meta.v1_nulls = hdr.nulls.data[63:56] & v1_null[63:56];
        meta.cnt_nulls = hdr.nulls.data[63:56] & cnt_null[63:56];
    }

    table job {
        key = { hdr.udp.dst_port : exact; }
        actions = { set_job; NoAction; }
        default_action = NoAction;
        size = JG_MAX_JOBS;
    }

    action key_w0() { meta.key = hdr.w0.data; meta.klo = hdr.w0.data[63:32] ^ meta.tag; meta.khi = hdr.w0.data[31:0]; }
    action key_w1() { meta.key = hdr.w1.data; meta.klo = hdr.w1.data[63:32] ^ meta.tag; meta.khi = hdr.w1.data[31:0]; }
    action key_w2() { meta.key = hdr.w2.data; meta.klo = hdr.w2.data[63:32] ^ meta.tag; meta.khi = hdr.w2.data[31:0]; }
    action key_w3() { meta.key = hdr.w3.data; meta.klo = hdr.w3.data[63:32] ^ meta.tag; meta.khi = hdr.w3.data[31:0]; }
    action key_w4() { meta.key = hdr.w4.data; meta.klo = hdr.w4.data[63:32] ^ meta.tag; meta.khi = hdr.w4.data[31:0]; }
    action key_w5() { meta.key = hdr.w5.data; meta.klo = hdr.w5.data[63:32] ^ meta.tag; meta.khi = hdr.w5.data[31:0]; }
    action key_w6() { meta.key = hdr.w6.data; meta.klo = hdr.w6.data[63:32] ^ meta.tag; meta.khi = hdr.w6.data[31:0]; }
    action key_w7() { meta.key = hdr.w7.data; meta.klo = hdr.w7.data[63:32] ^ meta.tag; meta.khi = hdr.w7.data[31:0]; }
    /* the key, and its halves as the slot table stores them (kl<w>: the first four bytes XOR the
     * job's tag; kh<w>: the last four), here so that way 0 can start in the next stage */
    table key_select {
        key = { meta.job : exact; }
        actions = { key_w0; key_w1; key_w2; key_w3; key_w4; key_w5; key_w6; key_w7; }
        default_action = key_w0;
        size = JG_MAX_JOBS;
    }

    apply {
        hit = job.apply().hit;
        if (hit && hdr.w0.isValid()) {  /* a data tuple: pick its key */
            key_select.apply();
        }
    }
}

/* (TNA: applied with Admit, before the ways, and pinned to stage 3, so that the hashes that make
 * the values numbers have them in stages 5 and 6: docs/switch.md, step 38) */
control ValueSelect(inout headers_t hdr, inout metadata_t meta) {
    action v0_none() { meta.v0w = 0; }
    action v0_w0() { meta.v0w = hdr.w0.data; }
    action v0_w1() { meta.v0w = hdr.w1.data; }
    action v0_w2() { meta.v0w = hdr.w2.data; }
    action v0_w3() { meta.v0w = hdr.w3.data; }
    action v0_w4() { meta.v0w = hdr.w4.data; }
    action v0_w5() { meta.v0w = hdr.w5.data; }
    action v0_w6() { meta.v0w = hdr.w6.data; }
    action v0_w7() { meta.v0w = hdr.w7.data; }
    STAGE(3)
    table v0_select {
        key = { meta.job : exact; }
        actions = { v0_none; v0_w0; v0_w1; v0_w2; v0_w3; v0_w4; v0_w5; v0_w6; v0_w7; }
        default_action = v0_none;
        size = JG_MAX_JOBS;
    }

    action v1_none() { meta.v1w = 0; }
    action v1_w0() { meta.v1w = hdr.w0.data; }
    action v1_w1() { meta.v1w = hdr.w1.data; }
    action v1_w2() { meta.v1w = hdr.w2.data; }
    action v1_w3() { meta.v1w = hdr.w3.data; }
    action v1_w4() { meta.v1w = hdr.w4.data; }
    action v1_w5() { meta.v1w = hdr.w5.data; }
    action v1_w6() { meta.v1w = hdr.w6.data; }
    action v1_w7() { meta.v1w = hdr.w7.data; }
    STAGE(3)
    table v1_select {
        key = { meta.job : exact; }
        actions = { v1_none; v1_w0; v1_w1; v1_w2; v1_w3; v1_w4; v1_w5; v1_w6; v1_w7; }
        default_action = v1_none;
        size = JG_MAX_JOBS;
    }

    apply {
        v0_select.apply();
        v1_select.apply();
    }
}
