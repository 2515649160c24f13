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

/* the UDP length of a datagram of `count` tuples: P4 multiplies by constants only, so one addition
 * per possible tuple after the first, up to JG_TUPLES_PER_DATAGRAM (tests/unit/test_p4.py checks) */
#define ADD_TUPLE(K) if (count > K) { len = len + each; }

control Admit(inout headers_t hdr, inout metadata_t meta, out bool ok) {
    apply {
        bit<16> count = SWAP16(hdr.ntu.count);
        bit<16> each = meta.in_len + 4;
        bit<16> len = 8 + JG_UDP_HEADER_BYTES + each;
        ADD_TUPLE(1)
        ADD_TUPLE(2)
        ADD_TUPLE(3)
        bool stream_ok = SWAP32(hdr.ntu.stream) < JG_MAX_STREAMS;
        bool tuple_ok = hdr.w0.isValid() && SWAP32(hdr.tlen.len) == (bit<32>)meta.in_len;
        ok = true;
        if (hdr.ntu.flags == 0) {
            ok = tuple_ok && stream_ok && count >= 1 && count <= JG_TUPLES_PER_DATAGRAM && hdr.udp.len == len;
        } else if (hdr.ntu.flags == JG_F_PASS) {
            ok = tuple_ok && meta.recirculated == 1;
        } else if ((hdr.ntu.flags & JG_F_PASS) != 0) {
            ok = false;
        } else if ((hdr.ntu.flags & JG_F_END) != 0) {
            ok = stream_ok;
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
            meta.rec_bytes = meta.rec_bytes + ((bit<16>)meta.out_words << 3) + 20;
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
