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
 * as extracted (little-endian: C << 8); tests/unit/test_p4.py checks that they are all there. */
#define UDP_LEN(L, C) (L, C << 8): expect(8 + JG_UDP_HEADER_BYTES + C * (4 + L));
#define UDP_LENS(L) UDP_LEN(L, 1) UDP_LEN(L, 2) UDP_LEN(L, 3) UDP_LEN(L, 4)

control Admit(inout headers_t hdr, inout metadata_t meta, out bool ok) {
    bit<16> len = 0;  /* no entry (a count of 0 or above JG_TUPLES_PER_DATAGRAM): no UDP length is 0 */
    action expect(bit<16> udp_len) { len = udp_len; }
    table datagram_len {
        key = { meta.in_len : exact; hdr.ntu.count : exact; }
        actions = { expect; NoAction; }
        const entries = {
            UDP_LENS(16) UDP_LENS(24) UDP_LENS(32) UDP_LENS(40) UDP_LENS(48) UDP_LENS(56) UDP_LENS(64) UDP_LENS(72)
        }
        default_action = NoAction();
    }

    apply {
        if (hdr.ntu.flags == 0) { datagram_len.apply(); }
        bit<32> stream = SWAP32(hdr.ntu.stream);
        /* tests as ifs, not boolean expressions assigned: Tofino decides in gateways, and cannot
         * compute a bool from comparisons in an action */
        ok = true;
        if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {  /* this pass's tuple, of the job's length */
            if (!hdr.w0.isValid()) { ok = false; }
            else if (SWAP32(hdr.tlen.len) != (bit<32>)meta.in_len) { ok = false; }
        }
        if (hdr.ntu.flags == 0) {  /* a sender's datagram: its first pass */
            if (stream >= JG_MAX_STREAMS) { ok = false; }
            else if (hdr.udp.len != len) { ok = false; }  /* also a count of 0 or too many */
        } else if (hdr.ntu.flags == JG_F_PASS) {
            if (meta.recirculated == 0) { ok = false; }
        } else if ((hdr.ntu.flags & JG_F_PASS) != 0) {
            ok = false;
        } else if ((hdr.ntu.flags & JG_F_END) != 0) {
            if (stream >= JG_MAX_STREAMS) { ok = false; }
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
        if (meta.rec == 1) {
            meta.n_rec = meta.n_rec + 1;
            meta.rec_bytes = meta.rec_bytes + meta.rec_len;
        }
        if ((hdr.ntu.flags & JG_F_FLUSH) != 0) {
            if (meta.rec == 1) { meta.out_kind = OUT_RECORD; }
        } else if (hdr.ntu.flags == 0 || hdr.ntu.flags == JG_F_PASS) {
            if (SWAP16(hdr.ntu.count) > 1) {
                meta.out_kind = OUT_PASS;
            } else if (meta.n_rec != 0) {
                meta.out_kind = OUT_RECORD;
            }
        }
    }
}
