/* Parser states shared by both programs, included inside each one's parser after its own start
 * state (TNA first skips its intrinsic metadata). A datagram is NTF over UDP when its payload
 * starts with "NTU1" (or "NTU2", version 2, in a program that defines JG_TAKES_UDP_V2: it has
 * the ring of sequence numbers and answers its senders). A data datagram carries 1 ..
 * JG_TUPLES_PER_DATAGRAM tuples (a version 2 repeat is flagged RETX); a pass of the pipeline
 * takes the first one not yet taken, read whole (its length prefix selects how many of the eight
 * 8-byte fields follow the null vector), and leaves the rest unparsed, as payload. A datagram
 * recirculated for its next pass (flags JG_F_PASS) carries before it the records its earlier
 * tuples left: parse_pass reads them into the record stack of their kind (docs/switch.md,
 * "Several tuples per datagram"). The record states are written out for 1 ..
 * JG_TUPLES_PER_DATAGRAM - 1 records (tests/unit/test_p4.py checks that they match the define). */

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (5, 17): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(pkt.lookahead<bit<32>>()) {
            JG_UDP_MAGIC_BE: parse_ntu;
#ifdef JG_TAKES_UDP_V2
            JG_UDP_MAGIC2_BE: parse_ntu;  /* version 2: the program has the ring and answers */
#endif
            default: accept;
        }
    }

    state parse_ntu {
        pkt.extract(hdr.ntu);
        transition select(hdr.ntu.flags) {
            0: parse_tuple;
            JG_F_RETX: parse_tuple;  /* version 2: a sender's repeat (the ring decides) */
            JG_F_PASS: parse_pass;
            JG_F_END &&& JG_F_END: parse_end;
            JG_F_FINISH &&& JG_F_FINISH: parse_finish;
            default: accept;   /* FLUSH: no payload */
        }
    }

    state parse_pass {
        pkt.extract(hdr.pass);
        transition select(hdr.pass.words, hdr.pass.records) {
            (_, 0): parse_tuple;
            (0, 1): parse_rec0_1;
            (0, 2): parse_rec0_2;
            (0, 3): parse_rec0_3;
            (1, 1): parse_rec1_1;
            (1, 2): parse_rec1_2;
            (1, 3): parse_rec1_3;
            (2, 1): parse_rec2_1;
            (2, 2): parse_rec2_2;
            (2, 3): parse_rec2_3;
            (3, 1): parse_rec3_1;
            (3, 2): parse_rec3_2;
            (3, 3): parse_rec3_3;
            default: accept;   /* cannot happen: the pipeline wrote it */
        }
    }

#define REC_STATES(K)                                                                               \
    state parse_rec##K##_1 { pkt.extract(hdr.rec##K.next); transition parse_tuple; }                \
    state parse_rec##K##_2 {                                                                        \
        pkt.extract(hdr.rec##K.next); pkt.extract(hdr.rec##K.next);                                 \
        transition parse_tuple;                                                                     \
    }                                                                                               \
    state parse_rec##K##_3 {                                                                        \
        pkt.extract(hdr.rec##K.next); pkt.extract(hdr.rec##K.next); pkt.extract(hdr.rec##K.next);   \
        transition parse_tuple;                                                                     \
    }
    REC_STATES(0)
    REC_STATES(1)
    REC_STATES(2)
    REC_STATES(3)

    state parse_end {
        pkt.extract(hdr.end);
        transition accept;
    }

    state parse_finish {
        pkt.extract(hdr.finish);
        transition accept;
    }

    /* the u32 length, little-endian: 16 is 0x10000000 as extracted */
    state parse_tuple {
        pkt.extract(hdr.tlen);
        pkt.extract(hdr.nulls);
        transition select(hdr.tlen.len) {
            0x10000000: parse_w1;
            0x18000000: parse_w2;
            0x20000000: parse_w3;
            0x28000000: parse_w4;
            0x30000000: parse_w5;
            0x38000000: parse_w6;
            0x40000000: parse_w7;
            0x48000000: parse_w8;
            default: accept;   /* the pipeline reports it to the controller as malformed */
        }
    }

    state parse_w1 { pkt.extract(hdr.w0); transition accept; }
    state parse_w2 { pkt.extract(hdr.w0); pkt.extract(hdr.w1); transition accept; }
    state parse_w3 { pkt.extract(hdr.w0); pkt.extract(hdr.w1); pkt.extract(hdr.w2); transition accept; }
    state parse_w4 {
        pkt.extract(hdr.w0); pkt.extract(hdr.w1); pkt.extract(hdr.w2); pkt.extract(hdr.w3);
        transition accept;
    }
    state parse_w5 {
        pkt.extract(hdr.w0); pkt.extract(hdr.w1); pkt.extract(hdr.w2); pkt.extract(hdr.w3);
        pkt.extract(hdr.w4);
        transition accept;
    }
    state parse_w6 {
        pkt.extract(hdr.w0); pkt.extract(hdr.w1); pkt.extract(hdr.w2); pkt.extract(hdr.w3);
        pkt.extract(hdr.w4); pkt.extract(hdr.w5);
        transition accept;
    }
    state parse_w7 {
        pkt.extract(hdr.w0); pkt.extract(hdr.w1); pkt.extract(hdr.w2); pkt.extract(hdr.w3);
        pkt.extract(hdr.w4); pkt.extract(hdr.w5); pkt.extract(hdr.w6);
        transition accept;
    }
    state parse_w8 {
        pkt.extract(hdr.w0); pkt.extract(hdr.w1); pkt.extract(hdr.w2); pkt.extract(hdr.w3);
        pkt.extract(hdr.w4); pkt.extract(hdr.w5); pkt.extract(hdr.w6); pkt.extract(hdr.w7);
        transition accept;
    }
