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

    /* a record's bytes: u32 length, null vector, key, out_words words (constants: Tofino shifts
     * and adds one operand per stage), and the same less 4; one table of constants */
    action set_rec_len(bit<16> len, bit<16> len_m4) { meta.rec_len = len; meta.rec_len_m4 = len_m4; }
    table rec_lens {
        key = { meta.out_words : ternary; }
        actions = { set_rec_len; }
        const entries = {
            0: set_rec_len(20, 16); 1: set_rec_len(28, 24); 2: set_rec_len(36, 32); _: set_rec_len(44, 40);
        }
        default_action = set_rec_len(44, 40);
    }

    apply {
        route.apply();
        rec_lens.apply();
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
/* The output's number and an END's count into the header; a program that writes them there itself
 * (TNA: the hash that makes them wire bytes writes the header) defines these empty, so that the
 * header's write does not wait for a copy of itself. */
#ifndef EMIT_SEQ
#define EMIT_SEQ(x) hdr.ntu.seq = x;
#define EMIT_END_TUPLES(x) hdr.end.tuples = x;
#endif
#ifndef REC_PUSH_FRONT
#define REC_PUSH_FRONT(K) hdr.rec##K.push_front(1);
#endif
/* Where record [0] and its words are: rec<K>[0] (REC_HEAD, REC_WORD); a program may put them
 * elsewhere with the same bytes (TNA's egress: rec0[0], then the tuple's word headers, unused there) */
#ifndef REC_HEAD
#define REC_HEAD(K) hdr.rec##K[0]
#define REC_WORD(K, I) hdr.rec##K[0].w##I
#define REC_WORDS_VALID(K)
#define REC_WORD_VALID(K, I)
#endif
#define PUSH_REC(K)                                                                                 \
        REC_PUSH_FRONT(K)                                                                           \
        REC_HEAD(K).setValid();                                                                     \
        REC_HEAD(K).len = (K * 8 + 16) << 24;  /* null vector, key, K words: u32, little-endian */   \
        REC_HEAD(K).nulls = meta.r_nulls ++ 56w0;  /* byte 0 of the null vector */                  \
        REC_HEAD(K).key = meta.key;                                                                 \
        REC_WORDS_VALID(K)

/* The record's words: three tables of constants, keyed on out_words and the word's o<I> (0 count,
 * 1 sum 0, 2 sum 1; anything else a count), whose actions each write one case (not an if-chain per
 * word per record kind: every test a table of its own, on Tofino). rec_word0 pushes the record
 * (its length, null vector and key) and writes its first word; rec_word1 and rec_word2 write the
 * next ones of a record that has them. */
#define PUT_ACTIONS(K, I)                                                                           \
    action put##K##_##I##_count() { REC_WORD_VALID(K, I) REC_WORD(K, I) = meta.r_count; }         \
    action put##K##_##I##_s0() { REC_WORD_VALID(K, I) REC_WORD(K, I) = meta.r_s0; }               \
    action put##K##_##I##_s1() { REC_WORD_VALID(K, I) REC_WORD(K, I) = meta.r_s1; }
#define PUSH_ACTIONS(K)                                                                             \
    action push##K##_count() { PUSH_REC(K) REC_WORD(K, 0) = meta.r_count; }                        \
    action push##K##_s0() { PUSH_REC(K) REC_WORD(K, 0) = meta.r_s0; }                              \
    action push##K##_s1() { PUSH_REC(K) REC_WORD(K, 0) = meta.r_s1; }
    action push0() { PUSH_REC(0) }
    PUSH_ACTIONS(1) PUSH_ACTIONS(2) PUSH_ACTIONS(3)
    PUT_ACTIONS(2, 1) PUT_ACTIONS(3, 1) PUT_ACTIONS(3, 2)
    table rec_word0 {
        key = { meta.out_words : ternary; meta.o0 : ternary; }
        actions = { push0; push1_count; push1_s0; push1_s1; push2_count; push2_s0; push2_s1;
                    push3_count; push3_s0; push3_s1; }
        const entries = {
            (0, _): push0();
            (1, 1): push1_s0(); (1, 2): push1_s1(); (1, _): push1_count();
            (2, 1): push2_s0(); (2, 2): push2_s1(); (2, _): push2_count();
            (_, 1): push3_s0(); (_, 2): push3_s1(); (_, _): push3_count();
        }
        default_action = push3_count();
    }
    table rec_word1 {
        key = { meta.out_words : ternary; meta.o1 : ternary; }
        actions = { put2_1_count; put2_1_s0; put2_1_s1; put3_1_count; put3_1_s0; put3_1_s1; NoAction; }
        const entries = {
            (0, _): NoAction(); (1, _): NoAction();
            (2, 1): put2_1_s0(); (2, 2): put2_1_s1(); (2, _): put2_1_count();
            (_, 1): put3_1_s0(); (_, 2): put3_1_s1(); (_, _): put3_1_count();
        }
        default_action = NoAction();
    }
    table rec_word2 {
        key = { meta.out_words : ternary; meta.o2 : ternary; }
        actions = { put3_2_count; put3_2_s0; put3_2_s1; NoAction; }
        const entries = {
            (0, _): NoAction(); (1, _): NoAction(); (2, _): NoAction();
            (_, 1): put3_2_s0(); (_, 2): put3_2_s1(); (_, _): put3_2_count();
        }
        default_action = NoAction();
    }

#ifndef EMIT_NO_STRIP
    action strip_tuple() {
        hdr.tlen.setInvalid(); hdr.nulls.setInvalid();
        hdr.w0.setInvalid(); hdr.w1.setInvalid(); hdr.w2.setInvalid(); hdr.w3.setInvalid();
        hdr.w4.setInvalid(); hdr.w5.setInvalid(); hdr.w6.setInvalid(); hdr.w7.setInvalid();
        hdr.end.setInvalid(); hdr.finish.setInvalid();
    }
#endif

    apply {
        /* the tuple leaves the datagram first (before the record is written, whose words a program
         * may keep in the tuple's word headers) */
#ifndef EMIT_NO_STRIP
        if (meta.out_kind == OUT_RECORD || meta.out_kind == OUT_PASS || meta.out_kind == OUT_END) { strip_tuple(); }
#endif
        if (meta.rec == 1) {
            rec_word0.apply();
            rec_word1.apply();
            rec_word2.apply();
        }
        if (meta.out_kind == OUT_RECORD) {
            /* the datagram's records, to the destination: one datagram of the switch's output stream */
            hdr.pass.setInvalid();
            hdr.ntu.stream = stream_w;
            EMIT_SEQ(seq_w)
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
            EMIT_SEQ(seq_w)
            hdr.ntu.count = 0;
            hdr.finish.setInvalid();  /* (a FINISH's payload; strip_tuple's too) */
            hdr.end.setValid();
            EMIT_END_TUPLES(records_w)
            hdr.end.received = 0;
            hdr.udp.len = 8 + JG_UDP_HEADER_BYTES + 16;
            hdr.ipv4.total_len = 20 + 8 + JG_UDP_HEADER_BYTES + 16;
        }
        if (meta.out_kind != OUT_NONE) {
            hdr.udp.checksum = 0;  /* optional in IPv4 */
        }
    }
}
