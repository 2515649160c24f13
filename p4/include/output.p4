/* Controls Output (controller: controller.py Output) and Emit, shared by both programs. Output
 * holds where a job's records and END go and which output word carries count, sum 0 or sum 1;
 * Emit rewrites the datagram into what meta.out_kind says: a record (a tuple of the job's output
 * layout: null vector, key, out_words words) to the destination, a notice to the controller, or
 * the END of the switch's output stream. */
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
        out0_select.apply();
        out1_select.apply();
        out2_select.apply();
    }
}

control Emit(inout headers_t hdr, inout metadata_t meta, in bit<64> seq) {
    bit<64> word;
#define PICK(o) if (o == 1) { word = meta.r_s0; } else if (o == 2) { word = meta.r_s1; } else { word = meta.r_count; }

    action strip_tuple() {
        hdr.tlen.setInvalid(); hdr.nulls.setInvalid();
        hdr.w0.setInvalid(); hdr.w1.setInvalid(); hdr.w2.setInvalid(); hdr.w3.setInvalid();
        hdr.w4.setInvalid(); hdr.w5.setInvalid(); hdr.w6.setInvalid(); hdr.w7.setInvalid();
        hdr.end.setInvalid(); hdr.finish.setInvalid();
    }

    apply {
        if (meta.out_kind == OUT_RECORD) {
            strip_tuple();
            hdr.ntu.stream = SWAP32(meta.out_stream);
            hdr.ntu.seq = SWAP64(seq);
            hdr.ntu.count = 0x0100;  /* 1, little-endian */
            hdr.ntu.flags = 0;
            hdr.out_len.setValid();
            hdr.out_len.len = SWAP32(((bit<32>)meta.out_words << 3) + 16);
            hdr.out_nulls.setValid();
            hdr.out_nulls.data = (bit<64>)meta.r_nulls << 56;  /* byte 0 of the null vector */
            hdr.out_key.setValid();
            hdr.out_key.data = meta.key;
            if (meta.out_words > 0) { PICK(meta.o0) hdr.out_w0.setValid(); hdr.out_w0.data = SWAP64(word); }
            if (meta.out_words > 1) { PICK(meta.o1) hdr.out_w1.setValid(); hdr.out_w1.data = SWAP64(word); }
            if (meta.out_words > 2) { PICK(meta.o2) hdr.out_w2.setValid(); hdr.out_w2.data = SWAP64(word); }
            hdr.ipv4.dst_addr = meta.dst_ip;
            hdr.udp.dst_port = meta.dst_port;
            hdr.udp.len = 8 + JG_UDP_HEADER_BYTES + 4 + 16 + ((bit<16>)meta.out_words << 3);
        } else if (meta.out_kind == OUT_END) {
            strip_tuple();
            hdr.ntu.stream = SWAP32(meta.out_stream);
            hdr.ntu.seq = SWAP64(seq);
            hdr.ntu.count = 0;
            hdr.end.setValid();
            hdr.end.tuples = SWAP64(seq);
            hdr.end.received = 0;
            hdr.ipv4.dst_addr = meta.dst_ip;
            hdr.udp.dst_port = meta.dst_port;
            hdr.udp.len = 8 + JG_UDP_HEADER_BYTES + 16;
        } else if (meta.out_kind == OUT_NOTICE) {
            hdr.ipv4.dst_addr = meta.ctrl_ip;
            hdr.udp.dst_port = meta.ctrl_port;
        }
        if (meta.out_kind != OUT_NONE) {
            hdr.udp.checksum = 0;  /* optional in IPv4 */
            hdr.ipv4.total_len = hdr.udp.len + 20;
        }
    }
}
