/* Controls Admit and Passes, shared by both programs: a data datagram of several tuples, one
 * pass of the pipeline per tuple (docs/switch.md, "Several tuples per datagram").
 *
 * Admit checks what a pass may take. A sender's datagram (flags 0: its first pass) must carry
 * 1 .. JG_TUPLES_PER_DATAGRAM tuples of the job's length and nothing else (its UDP length is
 * 8 + 24 + count * (4 + in_len)); every pass's tuple must have the job's length; a datagram with
 * JG_F_PASS must come from the switch's own recirculation. What fails goes to the controller
 * flagged ERROR, and the job fails.
 *
 * Passes decides where the datagram goes after this pass: on to its next pass while tuples remain
 * (OUT_PASS, recirculated); after its last tuple to the destination with the records its tuples
 * left (OUT_RECORD), or nowhere when they left none; a FLUSH's record to the destination. */

/* The UDP length of a datagram of C tuples of L bytes, 8 + 24 + C x (4 + L), as a table of
 * constants: P4 multiplies by constants only, and Tofino adds one operand per stage. An entry per
 * tuple length the parser takes (16 .. 72 bytes) and count 1 .. JG_TUPLES_PER_DATAGRAM, the count
 * as extracted (little-endian: C << 8), and the UDP length it must have: a hit is a datagram of the
 * right length (the comparison is the table's match, not a later stage's); tests/unit/test_p4.py
 * checks that they are all there. */
#define UDP_LEN(L, C) (L, C << 8, 8 + JG_UDP_HEADER_BYTES + C * (4 + L)): NoAction();
#define UDP_LENS(L) UDP_LEN(L, 1) UDP_LEN(L, 2) UDP_LEN(L, 3) UDP_LEN(L, 4)

/* Each check sets a bit of its own (a table's miss action, or one write per branch) and `ok` is
 * decided once from them: on Tofino, successive writes of one variable are ordered a stage apart,
 * and the slot table's first stage waits for `ok`. */
control Admit(inout headers_t hdr, inout metadata_t meta, out bool ok) {
    bit<1> bad_len = 0;    /* a first pass whose UDP length is not that of its count (1 .. N) of tuples */
    bit<1> bad_tuple = 0;  /* this pass's tuple missing, or not of the job's length */
    action wrong_len() { bad_len = 1; }
    table datagram_len {
        key = { meta.in_len : exact; hdr.ntu.count : exact; hdr.udp.len : exact; }
        actions = { NoAction; wrong_len; }
        const entries = {
            UDP_LENS(16) UDP_LENS(24) UDP_LENS(32) UDP_LENS(40) UDP_LENS(48) UDP_LENS(56) UDP_LENS(64) UDP_LENS(72)
        }
        default_action = wrong_len();  /* also a count of 0 or too many */
    }

    /* a tuple's u32 length prefix (little-endian, as extracted) against the job's in_len: a table of
     * the lengths the parser takes, not a comparison of slices (which would cut both fields into
     * bytes in PHV, on Tofino) */
    action wrong_tuple() { bad_tuple = 1; }
    table tuple_len {
        key = { hdr.tlen.len : exact; meta.in_len : exact; }
        actions = { NoAction; wrong_tuple; }
        const entries = {
            (0x10000000, 16): NoAction(); (0x18000000, 24): NoAction(); (0x20000000, 32): NoAction();
            (0x28000000, 40): NoAction(); (0x30000000, 48): NoAction(); (0x38000000, 56): NoAction();
            (0x40000000, 64): NoAction(); (0x48000000, 72): NoAction();
        }
        default_action = wrong_tuple();
    }

    apply {
        /* tests as ifs, not boolean expressions assigned: Tofino decides in gateways, and cannot
         * compute a bool from comparisons in an action. The little-endian fields are compared as
         * extracted (Tofino has no byte swap): the stream number is below JG_MAX_STREAMS (64) when
         * its first byte's top two bits and its other bytes are 0. */
        bit<1> big_stream;
        if (hdr.ntu.stream[31:30] != 0 || hdr.ntu.stream[23:0] != 0) { big_stream = 1; } else { big_stream = 0; }
        if (hdr.ntu.flags == 0) { datagram_len.apply(); }
        if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {  /* this pass's tuple, of the job's length */
            if (!hdr.w0.isValid()) { bad_tuple = 1; }
            else { tuple_len.apply(); }
        }
        if (hdr.ntu.flags == 0) {  /* a sender's datagram: its first pass */
            if (big_stream == 1 || bad_len == 1 || bad_tuple == 1) { ok = false; } else { ok = true; }
        } else if (hdr.ntu.flags == JG_F_PASS) {
            if (meta.recirculated == 0 || bad_tuple == 1) { ok = false; } else { ok = true; }
        } else if ((hdr.ntu.flags & JG_F_PASS) != 0) {
            ok = false;
        } else if ((hdr.ntu.flags & JG_F_END) != 0) {
            if (big_stream == 1) { ok = false; } else { ok = true; }
        } else {
            ok = true;
        }
    }
}

control Passes(inout headers_t hdr, inout metadata_t meta) {
    apply {
        meta.n_rec = 0;
        meta.rec_bytes = 0;
        if (hdr.pass.isValid()) {
            meta.n_rec = hdr.pass.records;
            meta.rec_bytes = hdr.pass.bytes;
        }
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            if (meta.rec == 1) { meta.out_kind = OUT_RECORD; }
        } else if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {
            if (hdr.ntu.count[15:8] > 1) {  /* little-endian, 1 .. JG_TUPLES_PER_DATAGRAM (Admit) */
                meta.out_kind = OUT_PASS;
            } else if (meta.rec == 1 || meta.n_rec != 0) {
                meta.out_kind = OUT_RECORD;
            }
        }
        if (meta.rec == 1) {
            meta.n_rec = meta.n_rec + 1;
            meta.rec_bytes = meta.rec_bytes + meta.rec_len;
        }
    }
}
