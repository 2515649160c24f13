/* Controls Output (controller: controller.py Output) and Emit, shared by both programs. Output
 * holds where a job's records and END go and which output word carries count, sum 0 or sum 1;
 * Emit pushes the record a pass leaves (a tuple of the job's output layout: null vector, key,
 * out_words words) onto the datagram's records and rewrites the datagram into what meta.out_kind
 * says: its records to the destination, the rest of it for its next pass, a notice to the
 * controller, or the END of the switch's output stream. */
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
        if (meta.out_words == 0) { meta.rec_len = 20; }
        else if (meta.out_words == 1) { meta.rec_len = 28; }
        else if (meta.out_words == 2) { meta.rec_len = 36; }
        else { meta.rec_len = 44; }
        out0_select.apply();
        out1_select.apply();
        out2_select.apply();
    }
}

control Emit(inout headers_t hdr, inout metadata_t meta, in bit<64> seq) {
    bit<64> word;
#define PICK(o) if (o == 1) { word = meta.r_s0; } else if (o == 2) { word = meta.r_s1; } else { word = meta.r_count; }
/* this pass's record onto the front of the stack of its kind (the datagram's records, newest first) */
#define PUSH_REC(K)                                                                                 \
        hdr.rec##K.push_front(1);                                                                   \
        hdr.rec##K[0].setValid();                                                                   \
        hdr.rec##K[0].len = SWAP32((bit<32>)(K * 8 + 16));  /* null vector, key, K words */         \
        hdr.rec##K[0].nulls = (bit<64>)meta.r_nulls << 56;  /* byte 0 of the null vector */         \
        hdr.rec##K[0].key = meta.key;

    action strip_tuple() {
        hdr.tlen.setInvalid(); hdr.nulls.setInvalid();
        hdr.w0.setInvalid(); hdr.w1.setInvalid(); hdr.w2.setInvalid(); hdr.w3.setInvalid();
        hdr.w4.setInvalid(); hdr.w5.setInvalid(); hdr.w6.setInvalid(); hdr.w7.setInvalid();
        hdr.end.setInvalid(); hdr.finish.setInvalid();
    }

    apply {
        bit<16> grow = 0;
        bit<32> me = hdr.ipv4.dst_addr;
        bit<16> my_port = hdr.udp.dst_port;
        if (meta.rec == 1) {
            grow = meta.rec_len;
            if (meta.out_words == 0) {
                PUSH_REC(0)
            } else if (meta.out_words == 1) {
                PUSH_REC(1)
                PICK(meta.o0) hdr.rec1[0].w0 = SWAP64(word);
            } else if (meta.out_words == 2) {
                PUSH_REC(2)
                PICK(meta.o0) hdr.rec2[0].w0 = SWAP64(word);
                PICK(meta.o1) hdr.rec2[0].w1 = SWAP64(word);
            } else {
                PUSH_REC(3)
                PICK(meta.o0) hdr.rec3[0].w0 = SWAP64(word);
                PICK(meta.o1) hdr.rec3[0].w1 = SWAP64(word);
                PICK(meta.o2) hdr.rec3[0].w2 = SWAP64(word);
            }
        }
        if (meta.out_kind == OUT_RECORD) {
            /* the datagram's records, to the destination: one datagram of the switch's output stream */
            strip_tuple();
            hdr.pass.setInvalid();
            hdr.ntu.stream = SWAP32(meta.out_stream);
            hdr.ntu.seq = SWAP64(seq);
            hdr.ntu.count = SWAP16((bit<16>)meta.n_rec);
            hdr.ntu.flags = 0;
            hdr.ipv4.dst_addr = meta.dst_ip;
            hdr.udp.dst_port = meta.dst_port;
            hdr.udp.len = 8 + JG_UDP_HEADER_BYTES + meta.rec_bytes;
        } else if (meta.out_kind == OUT_PASS) {
            /* the next pass takes the next tuple: this one leaves the datagram, its record (if any)
             * joins the others before the tuples still to come */
            bit<16> left = SWAP16(hdr.ntu.count) - 1;
            /* less the tuple taken (its u32 length and in_len bytes), plus the record and the pass
             * header if new: one operand at a time (Tofino adds one per stage) */
            hdr.udp.len = hdr.udp.len - meta.in_len;
            hdr.udp.len = hdr.udp.len + grow;
            if (hdr.pass.isValid()) { hdr.udp.len = hdr.udp.len - 4; }
            strip_tuple();
            hdr.pass.setValid();
            hdr.pass.records = meta.n_rec;
            hdr.pass.words = meta.out_words;
            hdr.pass.bytes = meta.rec_bytes;
            hdr.ntu.count = SWAP16(left);
            hdr.ntu.flags = JG_F_PASS;
        } else if (meta.out_kind == OUT_END) {
            strip_tuple();
            hdr.ntu.stream = SWAP32(meta.out_stream);
            hdr.ntu.seq = SWAP64(seq);
            hdr.ntu.count = 0;
            hdr.end.setValid();
            hdr.end.tuples = SWAP64((bit<64>)meta.out_records);
            hdr.end.received = 0;
            hdr.ipv4.dst_addr = meta.dst_ip;
            hdr.udp.dst_port = meta.dst_port;
            hdr.udp.len = 8 + JG_UDP_HEADER_BYTES + 16;
        } else if (meta.out_kind == OUT_NOTICE) {
            hdr.ipv4.dst_addr = meta.ctrl_ip;
            hdr.udp.dst_port = meta.ctrl_port;
        }
        if (meta.out_kind != OUT_NONE && meta.out_kind != OUT_PASS) {
            /* what the switch sends leaves from the address and port it was sent to (the switch's
             * data address, the job's port), as a host's answer would: its receivers' route back to
             * the source is the switch, which reverse-path filters check */
            hdr.ipv4.src_addr = me;
            hdr.udp.src_port = my_port;
        }
        if (meta.out_kind != OUT_NONE) {
            hdr.udp.checksum = 0;  /* optional in IPv4 */
            hdr.ipv4.total_len = hdr.udp.len + 20;
        }
    }
}
