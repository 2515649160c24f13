/* Headers and metadata of the switch aggregator, shared by the Tofino (TNA) and BMv2 (v1model)
 * programs. NTF integers are little-endian; P4 extracts fields in network order, so a field here
 * holds the wire bytes and the programs swap bytes (SWAP16/32/64) where they compute. */
#ifndef JUMPGATE_HEADERS_P4
#define JUMPGATE_HEADERS_P4

#define OUT_NONE 0
#define OUT_RECORD 1   /* leaves for the destination with its records */
#define OUT_NOTICE 2
#define OUT_END 3
#define OUT_PASS 4     /* tuples remain: recirculated for the next pass */

/* x in parentheses: an argument may be an expression (a cast, a sum), which is sliced whole */
#define SWAP16(x) ((x)[7:0] ++ (x)[15:8])
#define SWAP32(x) ((x)[7:0] ++ (x)[15:8] ++ (x)[23:16] ++ (x)[31:24])
#define SWAP64(x) ((x)[7:0] ++ (x)[15:8] ++ (x)[23:16] ++ (x)[31:24] ++ (x)[39:32] ++ (x)[47:40] ++ (x)[55:48] ++ (x)[63:56])

header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> len;
    bit<16> checksum;
}

/* docs/udp-transport.md: the 24-byte datagram header (fields little-endian on the wire). */
header ntu_h {
    bit<32> magic;   /* "NTU1" */
    bit<32> stream;
    bit<64> seq;
    bit<16> count;
    bit<16> flags;   /* JG_F_* in jumpgate_defs.p4 are these bits as extracted */
    bit<32> zero;
}

header end_h {       /* an END datagram's payload */
    bit<64> tuples;
    bit<64> received;  /* written by the switch before it forwards the END to the controller */
}

header finish_h {    /* a FINISH datagram's payload */
    bit<64> flushes;
}

header tuple_len_h { bit<32> len; }   /* the tuple's u32 length prefix */
header word_h { bit<64> data; }       /* the null vector, or one 8-byte field */

/* Between the passes of a datagram of several tuples (docs/switch.md, "Several tuples per
 * datagram"): after the NTU header (flags JG_F_PASS), how many records the datagram's earlier
 * tuples left, of which kind (rec<words>), in how many bytes; then the records, then the tuples
 * still to come. Only inside the switch, never on a wire. */
header pass_h {
    bit<8>  records;
    bit<8>  words;
    bit<16> bytes;
}

/* A record: a tuple of the job's output layout (u32 length, null vector, key, out_words words).
 * One header type per number of words, a stack of JG_TUPLES_PER_DATAGRAM of each: a datagram's
 * records gather there, newest first (push_front), and leave together. A job uses one kind. */
header rec0_h { bit<32> len; bit<64> nulls; bit<64> key; }
header rec1_h { bit<32> len; bit<64> nulls; bit<64> key; bit<64> w0; }
header rec2_h { bit<32> len; bit<64> nulls; bit<64> key; bit<64> w0; bit<64> w1; }
header rec3_h { bit<32> len; bit<64> nulls; bit<64> key; bit<64> w0; bit<64> w1; bit<64> w2; }

/* TNA only: what the ingress pipe tells the egress pipe about a datagram it sends there (the
 * egress parser reads it before Ethernet; it never leaves the switch). The slot table is split
 * between the two pipes (docs/switch.md, "Does it fit one Tofino pipe?"): ingress tries the ways
 * (kl<w>, kh<w>), egress counts and sums (cn<w>, s0_<w>, s1_<w>) and writes the records. */
header bridge_h {    /* every field whole bytes at its own offset: Tofino packs a header's fields into
                      * containers as laid out, and an action may read only two containers */
    bit<8>  job;
    bit<8>  r;          /* kl outcome: KL_NONE (not tried), KL_MISS (no room in any way), KL_MATCH, KL_FRESH */
    bit<8>  rh;         /* kh outcome of ways 0..6: KH_NONE, KH_SAME, KH_OTHER, KH_FRESH (way 7's: egress) */
    bit<8>  way;
    bit<8>  v0_null_hit;
    bit<8>  v1_null_hit;
    bit<8>  cnt_inc;
    bit<8>  key_null_hit;
    bit<8>  int32s;     /* the job's int32 values: bit 0 value 0's, bit 1 value 1's (one byte, one write) */
    bit<8>  o0;         /* Output's out0..2_select: which word (0 count, 1 sum 0, 2 sum 1) */
    bit<8>  o1;
    bit<8>  o2;
    bit<8>  out_words;
    bit<8>  s0_out_null;
    bit<8>  s1_out_null;
    bit<16> idx;        /* the slot index (the job's block included) */
    bit<16> len_d0;     /* Output's UDP length change of a pass that goes on without a record (with one:
                         * + rec_len, which the egress parser sets from out_words) */
    bit<32> out_stream; /* wire bytes */
    bit<32> tag;
    bit<32> key_hi;     /* data: the tuple's key (wire bytes); FLUSH: kl<way> (not XORed) and kh<way> as */
    bit<32> key_lo;     /* taken: two fields, so that the takes of kl and kh do not order each other */
    bit<64> v0w;        /* the values' wire bytes (ValueSelect): the tuple leaves the datagram in ingress */
    bit<64> v1w;
    bit<32> x0;         /* their first four wire bytes reversed in ingress: numbers for the sums (the */
    bit<32> x1;         /* egress pipe's stage 0 then needs no hash of them) */
}

struct headers_t {
    bridge_h   bridge;  /* TNA only, between the pipes */
    ethernet_h ethernet;
    ipv4_h     ipv4;
    udp_h      udp;
    ntu_h      ntu;
    pass_h     pass;
    end_h      end;
    finish_h   finish;
    /* the records the datagram's tuples left so far: before the tuples still to come */
    rec0_h[JG_TUPLES_PER_DATAGRAM] rec0;
    rec1_h[JG_TUPLES_PER_DATAGRAM] rec1;
    rec2_h[JG_TUPLES_PER_DATAGRAM] rec2;
    rec3_h[JG_TUPLES_PER_DATAGRAM] rec3;
    /* the tuple of this pass (the datagram's first one not yet taken); the rest stays payload */
    tuple_len_h tlen;
    word_h     nulls;
    word_h     w0;
    word_h     w1;
    word_h     w2;
    word_h     w3;
    word_h     w4;
    word_h     w5;
    word_h     w6;
    word_h     w7;
}

struct metadata_t {
    /* set_job. The job's index is the one field a v1model recirculation keeps (field list 0): the
     * next pass finds the job again by its port all the same, but BMv2 wants the list non-empty. */
    @field_list(0)
    bit<8>  job;
    bit<32> tag;
    bit<16> base;
    bit<16> mask;
    bit<16> in_len;
    bit<8>  flags;
    bit<64> key_null;
    bit<64> v0_null;
    bit<64> v1_null;
    bit<64> cnt_null;
    bit<8>  key_nulls; /* the tuple's null vector's first byte AND each mask (set_job) */
    bit<8>  v0_nulls;
    bit<8>  v1_nulls;
    bit<8>  cnt_nulls;
    /* set_route */
    bit<32> dst_ip;
    bit<16> dst_port;
    bit<32> out_stream;
    bit<32> ctrl_ip;
    bit<16> ctrl_port;
    bit<8>  out_words;
    bit<8>  s0_out_null;
    bit<8>  s1_out_null;
    bit<8>  s01_out_null;  /* TNA egress: s0_out_null | s1_out_null */
    /* the tuple, as the pipeline sees it */
    bit<64> key;       /* wire bytes */
    bit<64> v0;        /* native */
    bit<64> v1;
    bit<64> v0w;       /* value 0 and 1 as wire bytes (ValueSelect): 0 when NULL or none */
    bit<64> v1w;
    bit<1>  v0_null_hit;
    bit<1>  v1_null_hit;
    bit<32> cnt_inc;
    bit<1>  bypass;
    bit<4>  way;       /* the way that holds (or took) the key; NO_WAY while every way tried missed */
    bit<1>  fresh;     /* the key took an empty slot of that way */
    bit<32> klo;       /* the key's first four wire bytes XOR the job's tag: what kl<w> holds */
    bit<32> khi;       /* its last four wire bytes: what kh<w> holds */
    bit<32> x0;        /* value 0 and 1 as 32-bit words (they are inside (-2^30, 2^30)) */
    bit<32> x1;
    bit<32> x0b;       /* value + JG_SUM_BIAS: a sum's first value */
    bit<32> x1b;
    bit<32> x0m1;      /* value - 1: the range test's operand */
    bit<32> x1m1;
    bit<16> hash;
    bit<16> fi;        /* TNA ingress: a FLUSH's slot index, and way w's index iw */
    bit<32> got;       /* TNA: an END's stream count (ingress); a FLUSH's count and sums, a FINISH's */
    bit<32> fl_c;      /* flushed count, as the stateful ALUs read them out (egress) */
    bit<32> fl_t0;
    bit<32> fl_t1;
    bit<32> fin_f;
    bit<16> i0;
    bit<16> i1;
    bit<16> i2;
    bit<16> i3;
    bit<16> i4;
    bit<16> i5;
    bit<16> i6;
    bit<8>  rc;        /* TNA egress: cn<way>'s outcome (CN_COUNTED, CN_SPILL) */
    /* TNA, version 2 input streams (the ring `seen`; BMv2 keeps these in locals) */
    bit<16> mark;      /* ingress: a data datagram's mark, (seq >> JG_SEEN_BITS) + 1 mod 2^16 */
    bit<8>  v2;        /* ingress: a version 2 sender's data datagram, or its END (whose number fits 32 bits) */
    bit<8>  ring;      /* ingress: a version 2 data datagram's first pass, through the ring */
    bit<8>  retx;      /* ingress: ... flagged RETX (a repeat, as its sender sent it) */
    bit<8>  repeat;    /* ingress: the ring's outcome, 1: taken before (dropped) */
    bit<8>  answer;    /* egress: this is the mirror copy that answers its sender; ingress: its
                        * mirror header's byte (ANSWER_KIND) */
    bit<10> session;   /* ingress: the mirror session of its ingress port */
    bit<32> seq_n;     /* TNA egress: out_seq's number for this output (a record's, an END's) */
    bit<8>  lost;      /* TNA egress: FINISH: `flushed` is not the FLUSHes sent */
    bit<16> idx;
    bit<12> counter;   /* job * JG_MAX_STREAMS + stream */
    /* a record to emit: count, sums, their null bits, and which output word holds which */
    bit<64> r_count;
    bit<64> r_s0;
    bit<64> r_s1;
    bit<8>  r_nulls;
    bit<3>  out_kind;  /* OUT_NONE, OUT_RECORD (to the destination), OUT_NOTICE (to the controller), OUT_END, OUT_PASS */
    bit<1>  rec;       /* this pass leaves a record (a bypass, a spill, a flushed slot) */
    bit<8>  n_rec;     /* the datagram's records with this pass's */
    bit<16> rec_bytes; /* their bytes */
    bit<16> rec_len;   /* the bytes of one record of the job's layout: 20 + 8 x out_words */
    bit<16> rec_len_m4; /* rec_len - 4 */
    bit<16> len_d0;    /* a pass that goes on: its UDP length's change without a record (Output) */
    bit<16> len_d1;    /* and with one */
    bit<1>  recirculated;  /* the datagram comes back from the switch's own recirculation */
    bit<32> out_records;   /* FINISH: the records the job sent (its END's tuple count) */
    bit<2>  o0;  /* 0 count, 1 s0, 2 s1 */
    bit<2>  o1;
    bit<2>  o2;
    /* spills */
    bit<32> spill_c;
    bit<1>  rej0;      /* value 0 (1) did not fit its slot's sum: it goes on in a spill record */
    bit<1>  rej1;
    bit<1>  fit0;      /* value 0 (1) is inside (-2^30, 2^30), what a slot's sum can take */
    bit<1>  fit1;
    bit<1>  spilled;
}

#endif
