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
    STAGE(1)
    table datagram_len {
        key = { meta.in_len : exact; hdr.ntu.count : exact; hdr.udp.len : exact; }
        actions = { NoAction; wrong_len; }
        const entries = {
            UDP_LENS(16) UDP_LENS(24) UDP_LENS(32) UDP_LENS(40) UDP_LENS(48) UDP_LENS(56) UDP_LENS(64) UDP_LENS(72)
        }
        default_action = wrong_len();  /* also a count of 0 or too many */
    }

    /* a tuple (its first word's header valid) whose u32 length prefix (little-endian, as extracted)
     * is the job's in_len: a table of
     * the lengths the parser takes, not a comparison of slices (which would cut both fields into
     * bytes in PHV, on Tofino) */
    action wrong_tuple() { bad_tuple = 1; }
    STAGE(1)
    table tuple_len {
        key = { hdr.w0.isValid() : exact; hdr.tlen.len : exact; meta.in_len : exact; }
        actions = { NoAction; wrong_tuple; }
        const entries = {
            (true, 0x10000000, 16): NoAction(); (true, 0x18000000, 24): NoAction();
            (true, 0x20000000, 32): NoAction(); (true, 0x28000000, 40): NoAction();
            (true, 0x30000000, 48): NoAction(); (true, 0x38000000, 56): NoAction();
            (true, 0x40000000, 64): NoAction(); (true, 0x48000000, 72): NoAction();
        }
        default_action = wrong_tuple();
    }

    /* What a pass may take, decided once: a table of constants (first match wins) on the flags,
     * the stream number (below JG_MAX_STREAMS, 64, when its first wire byte's top two bits and its
     * other bytes are 0: the little-endian field as extracted, Tofino has no byte swap), the two
     * checks and where the datagram came from. A sender's datagram (flags 0, its first pass): a
     * stream below 64, of the right length, with its tuple; a recirculated pass (JG_F_PASS, and no
     * other flag): from the switch's own recirculation, with its tuple; any other datagram with
     * JG_F_PASS: never; a sender's END: a stream below 64; anything else (FLUSH, FINISH): yes. */
    action admit_yes() { ok = true; }
    action admit_no() { ok = false; }
    STAGE(2)
    table admit {
        key = { hdr.ntu.flags : ternary; hdr.ntu.stream : ternary; bad_len : ternary; bad_tuple : ternary;
                meta.recirculated : ternary; }
        actions = { admit_yes; admit_no; }
        const entries = {
            (0, 0 &&& 0xc0ffffff, 0, 0, _): admit_yes();
            (0, _, _, _, _): admit_no();
            (JG_F_PASS, _, _, 0, 1): admit_yes();
            (JG_F_PASS &&& JG_F_PASS, _, _, _, _): admit_no();
            (JG_F_END &&& JG_F_END, 0 &&& 0xc0ffffff, _, _, _): admit_yes();
            (JG_F_END &&& JG_F_END, _, _, _, _): admit_no();
            (_, _, _, _, _): admit_yes();
        }
        default_action = admit_yes();
    }

    apply {
        if (hdr.ntu.flags == 0) { datagram_len.apply(); }
        if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {  /* this pass's tuple, of the job's length */
            tuple_len.apply();  /* (no tuple: no entry matches) */
        }
        admit.apply();
    }
}

control Passes(inout headers_t hdr, inout metadata_t meta) {
    /* Where the datagram goes: a FLUSH's record to the destination; a data pass's datagram on to its
     * next pass while tuples remain (its count, little-endian, 1 .. JG_TUPLES_PER_DATAGRAM: Admit,
     * above 1: its first wire byte & 0xfe not 0), after its last tuple to the destination when it
     * has records (this pass's, or earlier ones'); else nowhere (out_kind as it was). One table of
     * constants (first match wins). */
    action set_kind(bit<3> k) { meta.out_kind = k; }
    table out_kinds {
        key = { hdr.ntu.flags : ternary; hdr.ntu.count : ternary; meta.rec : ternary; meta.n_rec : ternary; }
        actions = { set_kind; NoAction; }
        const entries = {
            (JG_F_FLUSH &&& JG_F_FLUSH, _, 1, _): set_kind(OUT_RECORD);
            (JG_F_FLUSH &&& JG_F_FLUSH, _, _, _): NoAction();
            (0, 0 &&& 0xfe00, 1, _): set_kind(OUT_RECORD);
            (0, 0 &&& 0xfe00, _, 0): NoAction();
            (0, 0 &&& 0xfe00, _, _): set_kind(OUT_RECORD);
            (0, _, _, _): set_kind(OUT_PASS);
            (JG_F_PASS, 0 &&& 0xfe00, 1, _): set_kind(OUT_RECORD);
            (JG_F_PASS, 0 &&& 0xfe00, _, 0): NoAction();
            (JG_F_PASS, 0 &&& 0xfe00, _, _): set_kind(OUT_RECORD);
            (JG_F_PASS, _, _, _): set_kind(OUT_PASS);
        }
        default_action = NoAction();
    }

    apply {
        /* the datagram's records so far (a program whose parser sets these defines
         * PASS_COUNTS_PARSED: TNA's egress parser, from the pass header it extracts) */
#ifndef PASS_COUNTS_PARSED
        meta.n_rec = 0;
        meta.rec_bytes = 0;
        if (hdr.pass.isValid()) {
            meta.n_rec = hdr.pass.records;
            meta.rec_bytes = hdr.pass.bytes;
        }
#endif
        out_kinds.apply();
        /* this pass's record among them (a program that defines PASS_REC_COUNTED counts it where the
         * record is decided: TNA's egress, so that its counters need not wait a stage for these) */
#ifndef PASS_REC_COUNTED
        if (meta.rec == 1) {
            meta.n_rec = meta.n_rec + 1;
            meta.rec_bytes = meta.rec_bytes + meta.rec_len;
        }
#endif
    }
}
