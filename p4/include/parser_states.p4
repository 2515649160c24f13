/* Parser states shared by both programs, included inside each one's parser after its own start
 * state (TNA first skips its intrinsic metadata). A datagram is NTF over UDP when its payload
 * starts with "NTU1"; a data datagram's tuple is read whole: its length prefix selects how many
 * of the eight 8-byte fields follow the null vector (docs/switch.md, "What the switch parses"). */

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
            default: accept;
        }
    }

    state parse_ntu {
        pkt.extract(hdr.ntu);
        transition select(hdr.ntu.flags) {
            0: parse_tuple;
            JG_F_END &&& JG_F_END: parse_end;
            JG_F_FINISH &&& JG_F_FINISH: parse_finish;
            default: accept;   /* FLUSH: no payload */
        }
    }

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
