/* Controls Output (controller: controller.py Output) and Emit, shared by both programs. Output
 * holds where a job's records and END go and which output word carries count, sum 0 or sum 1;
 * Emit pushes the record a pass leaves (a tuple of the job's output layout: null vector, key,
 * out_words words) onto the datagram's records and rewrites the datagram into what meta.out_kind
 * says: its records to the destination, the rest of it for its next pass, or the END of the
 * switch's output stream. */
control Output(inout headers_t hdr, inout metadata_t meta) {
    action set_route(bit<32> dst_ip, bit<16> dst_port, bit<32> out_stream, bit<32> ctrl_ip, bit<16> ctrl_port,
                     bit<8> out_words, bit<8> s0_out_null, bit<8> s1_out_null) {
        meta.dst_ip = dst_ip;
        meta.dst_port = dst_port;
        meta.out_stream = out_stream;
        meta.ctrl_ip = ctrl_ip;
        meta.ctrl_port = ctrl_port;
        meta.out_words = out_words;
        meta.s0_out_null = s0_out_null;
        meta.s1_out_null = s1_out_null;
    }
    table route {
        key = { meta.job : exact; }
        actions = { set_route; NoAction; }
        default_action = NoAction;
        size = JG_MAX_JOBS;
    }

    action out0_count() { meta.o0 = 0; }
    action out0_s0() { meta.o0 = 1; }
    action out0_s1() { meta.o0 = 2; }
    table out0_select {
        key = { meta.job : exact; }
        actions = { out0_count; out0_s0; out0_s1; }
        default_action = out0_count;
        size = JG_MAX_JOBS;
    }
    action out1_count() { meta.o1 = 0; }
    action out1_s0() { meta.o1 = 1; }
    action out1_s1() { meta.o1 = 2; }
    table out1_select {
        key = { meta.job : exact; }
        actions = { out1_count; out1_s0; out1_s1; }
        default_action = out1_count;
        size = JG_MAX_JOBS;
    }
    action out2_count() { meta.o2 = 0; }
    action out2_s0() { meta.o2 = 1; }
    action out2_s1() { meta.o2 = 2; }
    table out2_select {
        key = { meta.job : exact; }
        actions = { out2_count; out2_s0; out2_s1; }
        default_action = out2_count;
        size = JG_MAX_JOBS;
    }

    apply {
        route.apply();
        /* a record's bytes: u32 length, null vector, key, out_words words (constants: Tofino shifts
         * and adds one operand per stage) */
        if (meta.out_words == 0) { meta.rec_len = 20; meta.rec_len_m4 = 16; }
        else if (meta.out_words == 1) { meta.rec_len = 28; meta.rec_len_m4 = 24; }
        else if (meta.out_words == 2) { meta.rec_len = 36; meta.rec_len_m4 = 32; }
        else { meta.rec_len = 44; meta.rec_len_m4 = 40; }
        /* a data pass that goes on: its UDP (and IP) length's change, less the tuple taken (its u32
         * length and in_len bytes), plus the pass header if it is new, without (len_d0) or with
         * (len_d1) a record of its own: each one operation on fields set by tables, so that Emit
         * adds one of them in one step (Tofino: one operand per stage, no chained arithmetic) */
        if (hdr.pass.isValid()) {
            meta.len_d0 = 0xfffc - meta.in_len;  /* -4 - in_len */
            meta.len_d1 = meta.rec_len_m4 - meta.in_len;
        } else {
            meta.len_d0 = 0 - meta.in_len;
            meta.len_d1 = meta.rec_len - meta.in_len;
        }
        out0_select.apply();
        out1_select.apply();
        out2_select.apply();
    }
}

/* Emit works on wire bytes only (Tofino has no byte swap; each program swaps where it computes):
 * meta.r_count, r_s0 and r_s1 are the record's words as they go on the wire, and so are `seq_w`
 * (the output datagram's number), `stream_w` (the output stream) and `records_w` (an END's tuple
 * count). The addresses are the program's: it knows where the datagram goes before Emit runs. */
control Emit(inout headers_t hdr, inout metadata_t meta, in bit<64> seq_w, in bit<32> stream_w, in bit<64> records_w) {
/* output word `o` (0 count, 1 sum 0, 2 sum 1) into `dst`, as one write per case */
#define PUT(dst, o) if (o == 1) { dst = meta.r_s0; } else if (o == 2) { dst = meta.r_s1; } else { dst = meta.r_count; }
/* this pass's record onto the front of the stack of its kind (the datagram's records, newest first).
 * A program whose Emit runs where the earlier records are not parsed (TNA's egress pipe: its parser
 * reads 160 bytes at most) defines REC_PUSH_FRONT(K) empty: record [0] is then emitted in front of
 * them, which is the same bytes. */
#ifndef REC_PUSH_FRONT
#define REC_PUSH_FRONT(K) hdr.rec##K.push_front(1);
#endif
/* Where record [0] and its words are: rec<K>[0] (REC_HEAD, REC_WORD); a program may put them
 * elsewhere with the same bytes (TNA's egress: rec0[0], then the tuple's word headers, unused there) */
#ifndef REC_HEAD
#define REC_HEAD(K) hdr.rec##K[0]
#define REC_WORD(K, I) hdr.rec##K[0].w##I
#define REC_WORDS_VALID(K)
#endif
#define PUSH_REC(K)                                                                                 \
        REC_PUSH_FRONT(K)                                                                           \
        REC_HEAD(K).setValid();                                                                     \
        REC_HEAD(K).len = (K * 8 + 16) << 24;  /* null vector, key, K words: u32, little-endian */   \
        REC_HEAD(K).nulls = meta.r_nulls ++ 56w0;  /* byte 0 of the null vector */                  \
        REC_HEAD(K).key = meta.key;                                                                 \
        REC_WORDS_VALID(K)

    action strip_tuple() {
        hdr.tlen.setInvalid(); hdr.nulls.setInvalid();
        hdr.w0.setInvalid(); hdr.w1.setInvalid(); hdr.w2.setInvalid(); hdr.w3.setInvalid();
        hdr.w4.setInvalid(); hdr.w5.setInvalid(); hdr.w6.setInvalid(); hdr.w7.setInvalid();
        hdr.end.setInvalid(); hdr.finish.setInvalid();
    }

    apply {
        /* the tuple leaves the datagram first (before the record is written, whose words a program
         * may keep in the tuple's word headers) */
        if (meta.out_kind == OUT_RECORD || meta.out_kind == OUT_PASS || meta.out_kind == OUT_END) { strip_tuple(); }
        if (meta.rec == 1) {
            if (meta.out_words == 0) {
                PUSH_REC(0)
            } else if (meta.out_words == 1) {
                PUSH_REC(1)
                PUT(REC_WORD(1, 0), meta.o0)
            } else if (meta.out_words == 2) {
                PUSH_REC(2)
                PUT(REC_WORD(2, 0), meta.o0)
                PUT(REC_WORD(2, 1), meta.o1)
            } else {
                PUSH_REC(3)
                PUT(REC_WORD(3, 0), meta.o0)
                PUT(REC_WORD(3, 1), meta.o1)
                PUT(REC_WORD(3, 2), meta.o2)
            }
        }
        if (meta.out_kind == OUT_RECORD) {
            /* the datagram's records, to the destination: one datagram of the switch's output stream */
            hdr.pass.setInvalid();
            hdr.ntu.stream = stream_w;
            hdr.ntu.seq = seq_w;
            hdr.ntu.count = meta.n_rec ++ 8w0;  /* little-endian u16: at most JG_TUPLES_PER_DATAGRAM */
            hdr.ntu.flags = 0;
            hdr.udp.len = 8 + JG_UDP_HEADER_BYTES + meta.rec_bytes;
            hdr.ipv4.total_len = 20 + 8 + JG_UDP_HEADER_BYTES + meta.rec_bytes;
        } else if (meta.out_kind == OUT_PASS) {
            /* the next pass takes the next tuple: this one leaves the datagram, its record (if any)
             * joins the others before the tuples still to come (the lengths' change: Output) */
            if (meta.rec == 1) {
                hdr.udp.len = hdr.udp.len + meta.len_d1;
                hdr.ipv4.total_len = hdr.ipv4.total_len + meta.len_d1;
            } else {
                hdr.udp.len = hdr.udp.len + meta.len_d0;
                hdr.ipv4.total_len = hdr.ipv4.total_len + meta.len_d0;
            }
            hdr.pass.setValid();
            hdr.pass.records = meta.n_rec;
            hdr.pass.words = meta.out_words;
            hdr.pass.bytes = meta.rec_bytes;
            hdr.ntu.count = hdr.ntu.count - 0x0100;  /* one tuple fewer (little-endian, 1 .. 4: no borrow) */
            hdr.ntu.flags = JG_F_PASS;
        } else if (meta.out_kind == OUT_END) {
            hdr.ntu.stream = stream_w;
            hdr.ntu.seq = seq_w;
            hdr.ntu.count = 0;
            hdr.end.setValid();
            hdr.end.tuples = records_w;
            hdr.end.received = 0;
            hdr.udp.len = 8 + JG_UDP_HEADER_BYTES + 16;
            hdr.ipv4.total_len = 20 + 8 + JG_UDP_HEADER_BYTES + 16;
        }
        if (meta.out_kind != OUT_NONE) {
            hdr.udp.checksum = 0;  /* optional in IPv4 */
        }
    }
}
