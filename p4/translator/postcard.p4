/* dtakit DTA translator for Tofino-1 (TNA), Postcarding build, written from
 * docs/DTA-WIRE.md (sections 3, 5, 8.5, 8.7).
 *
 * Postcarding does not fit in translator.p4 beside Key-Write, Key-Increment
 * and Append (their egress already takes the 12 stages), so it is its own
 * program: a switch is either.
 *
 * Ingress keeps the postcard cache (DTA_PC_CACHE_BITS entries, one flow each,
 * indexed by CRC32(le32(key))): per entry the flow key, the mask of hops
 * that arrived and one value register per hop. A postcard of another flow
 * evicts the entry; a flow whose hops 1..W have all arrived (W the path
 * length, or B) completes and frees it. Each chunk to write leaves ingress
 * through a multicast group of N nodes whose replication IDs are the copy
 * index: mcast_grp_a for the postcard's own flow when it completes,
 * mcast_grp_b (replication IDs with DTA_PC_EVICTED set) for the evicted flow,
 * whose chunk goes to its own collector and its own chunk addresses.
 * Egress writes each copy as one RDMA WRITE Only of the chunk: slot i =
 * CRC_hop_i(le32(key)) XOR value_i (b = 32, the blank value 0), ICRC = per-QP
 * constant XOR a CRC over the variable bytes, as translator.p4.
 */
#include <core.p4>
#include <tna.p4>
#include "../include/dta_constants.p4"

typedef bit<DTA_QP_BITS> qp_t;
typedef bit<DTA_PC_CACHE_BITS> cidx_t;

header ethernet_h { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_h {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> total_len;
    bit<16> identification; bit<3> flags; bit<13> frag_offset;
    bit<8> ttl; bit<8> protocol; bit<16> checksum; bit<32> src; bit<32> dst;
}
header udp_h { bit<16> src_port; bit<16> dst_port; bit<16> length; bit<16> checksum; }
// DTA base header (section 2): opcode, I, S, reserved.
header dta_base_h { bit<8> opcode; bit<1> immediate; bit<1> sequenced; bit<6> reserved; }
header dta_seq_h { bit<8> seq; }
// Postcarding (section 3): key, hop, value, and the optional path length.
header dta_pc_h { bit<32> key; bit<8> hop; bit<32> value; }
header dta_pc_len_h { bit<8> path_len; }
// Acknowledgement (section 2).
header dta_ack_h { bit<8> seq; bit<1> nack; bit<7> reserved; }
header bth_h {
    bit<8> opcode; bit<1> se; bit<1> migreq; bit<2> pad; bit<4> tver; bit<16> pkey;
    bit<8> resv8a; bit<24> dst_qp; bit<1> ack_req; bit<7> resv7; bit<24> psn;
}
header reth_h { bit<32> va_hi; bit<32> va_lo; bit<32> rkey; bit<32> length; }
header aeth_h { bit<8> syndrome; bit<24> msn; }
// A chunk (section 8.5): B = 5 slots of 32 bits, big-endian, then zero
// padding to DTA_PC_CHUNK_BYTES = 32.
header chunk_h { bit<32> s0; bit<32> s1; bit<32> s2; bit<32> s3; bit<32> s4; bit<32> pad0; bit<32> pad1; bit<32> pad2; }
// The ICRC, least-significant byte first.
header icrc_h { bit<8> b0; bit<8> b1; bit<8> b2; bit<8> b3; }

const bit<8> KIND_NONE = 0;
const bit<8> KIND_CHUNK = 1;
const bit<8> KIND_ACK = 3;
// Bridged from ingress to egress, ahead of the packet: the QP of the
// postcard's flow and of the evicted flow, both keys, the postcard's value,
// whether its flow is new in the cache (fresh), and what the value registers
// returned (e*): the evicted flow's values when it evicts one, the completed
// flow's (this postcard's included) when it completes a flow it did not
// start.
header bridge_h { bit<8> kind; bit<8> qp; bit<8> qp_ev; bit<8> fresh; }
header bridge_pc_h {
    bit<32> key; bit<32> key_ev; bit<32> value;
    bit<32> e0; bit<32> e1; bit<32> e2; bit<32> e3; bit<32> e4;
}

struct headers_t {
    bridge_h bridge; bridge_pc_h bridge_pc;
    ethernet_h ethernet; ipv4_h ipv4; udp_h udp;
    dta_base_h dta; dta_seq_h seq; dta_pc_h pc; dta_pc_len_h pc_len; dta_ack_h ack;
    bth_h bth; reth_h reth; aeth_h aeth; chunk_h chunk; icrc_h icrc;
}
struct ig_meta_t {
    bit<8> crc8; bit<8> crc8_ev; bit<8> bit_; bit<8> need; bit<8> have;
    bit<32> idx; bit<32> old_key;
}
struct eg_meta_t { bit<32> psn; bit<32> chunk_hash; bit<32> icrc; bit<32> offset; bit<32> key; bit<24> ack_psn; }

parser IgParser(packet_in pkt, out headers_t h, out ig_meta_t m,
                out ingress_intrinsic_metadata_t ig_md) {
    state start {
        pkt.extract(ig_md);
        pkt.advance(PORT_METADATA_SIZE);
        pkt.extract(h.ethernet);
        transition select(h.ethernet.ether_type) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 {
        pkt.extract(h.ipv4);
        transition select(h.ipv4.ihl, h.ipv4.frag_offset, h.ipv4.protocol) {
            (5, 0, 17): udp;
            default: accept;
        }
    }
    state udp {
        pkt.extract(h.udp);
        transition select(h.udp.dst_port) {
            DTA_REPORT_PORT: dta;
            ROCE_UDP_PORT: bth;
            default: accept;
        }
    }
    state dta {
        pkt.extract(h.dta);
        transition select(h.dta.sequenced) { 1: dta_seq; default: dta_op; }
    }
    state dta_seq { pkt.extract(h.seq); transition dta_op; }
    state dta_op {
        transition select(h.dta.opcode) { DTA_OP_POSTCARD: pc; default: accept; }
    }
    // The path length is there when the UDP length says so: 8 + base + 10.
    state pc {
        pkt.extract(h.pc);
        transition select(h.udp.length, h.dta.sequenced) {
            (8 + 2 + DTA_POSTCARD_LEN + 1, 0): pc_len;
            (8 + 3 + DTA_POSTCARD_LEN + 1, 1): pc_len;
            default: accept;
        }
    }
    state pc_len { pkt.extract(h.pc_len); transition accept; }
    state bth {
        pkt.extract(h.bth);
        transition select(h.bth.opcode) {
            ROCE_RC_ACK: aeth;
            ROCE_RC_ATOMIC_ACK: aeth;
            default: accept;
        }
    }
    state aeth { pkt.extract(h.aeth); transition accept; }
}

control Ingress(inout headers_t h, inout ig_meta_t m,
                in ingress_intrinsic_metadata_t ig_md,
                in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    // Collector choice (section 4): CRC8(be32(key)), for the postcard's flow
    // and for the flow it evicts.
    Hash<bit<8>>(HashAlgorithm_t.CRC8) collector;
    Hash<bit<8>>(HashAlgorithm_t.CRC8) collector_ev;
    // Cache entry: CRC32(le32(key)) & (entries-1) (section 8.5).
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC32) cache_index;

    // The cache: the flow each entry holds, and the hops it has (bit i-1 for
    // hop i; 0 is a free entry).
    Register<bit<32>, cidx_t>(1 << DTA_PC_CACHE_BITS, 0) pc_key;
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_key) swap_key = {
        void apply(inout bit<32> v, out bit<32> old) { old = v; v = h.pc.key; }
    };
    Register<bit<8>, cidx_t>(1 << DTA_PC_CACHE_BITS, 0) pc_have;
    // The same flow: complete (and free) when it held every other hop it needs.
    RegisterAction<bit<8>, cidx_t, bit<8>>(pc_have) add_hop = {
        void apply(inout bit<8> v, out bit<8> old) {
            old = v;
            if (v == m.need) { v = 0; } else { v = v | m.bit_; }
        }
    };
    // Another flow (or a free entry) takes the entry over.
    RegisterAction<bit<8>, cidx_t, bit<8>>(pc_have) take = {
        void apply(inout bit<8> v, out bit<8> old) { old = v; v = m.bit_; }
    };
    RegisterAction<bit<8>, cidx_t, bit<8>>(pc_have) take_done = {
        void apply(inout bit<8> v, out bit<8> old) { old = v; v = 0; }
    };
    // One value register per hop: put the postcard's value (returning the
    // evicted flow's, or for the same flow the new one), clear a slot of a
    // new flow, or read what the flow has.
    Register<bit<32>, cidx_t>(1 << DTA_PC_CACHE_BITS, 0) pc_v0;
    Register<bit<32>, cidx_t>(1 << DTA_PC_CACHE_BITS, 0) pc_v1;
    Register<bit<32>, cidx_t>(1 << DTA_PC_CACHE_BITS, 0) pc_v2;
    Register<bit<32>, cidx_t>(1 << DTA_PC_CACHE_BITS, 0) pc_v3;
    Register<bit<32>, cidx_t>(1 << DTA_PC_CACHE_BITS, 0) pc_v4;
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v0) put0 = { void apply(inout bit<32> v, out bit<32> old) { old = v; v = h.pc.value; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v0) set0 = { void apply(inout bit<32> v, out bit<32> new) { v = h.pc.value; new = v; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v1) put1 = { void apply(inout bit<32> v, out bit<32> old) { old = v; v = h.pc.value; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v1) set1 = { void apply(inout bit<32> v, out bit<32> new) { v = h.pc.value; new = v; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v2) put2 = { void apply(inout bit<32> v, out bit<32> old) { old = v; v = h.pc.value; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v2) set2 = { void apply(inout bit<32> v, out bit<32> new) { v = h.pc.value; new = v; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v3) put3 = { void apply(inout bit<32> v, out bit<32> old) { old = v; v = h.pc.value; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v3) set3 = { void apply(inout bit<32> v, out bit<32> new) { v = h.pc.value; new = v; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v4) put4 = { void apply(inout bit<32> v, out bit<32> old) { old = v; v = h.pc.value; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v4) set4 = { void apply(inout bit<32> v, out bit<32> new) { v = h.pc.value; new = v; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v0) clear0 = { void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v1) clear1 = { void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v2) clear2 = { void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v3) clear3 = { void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v4) clear4 = { void apply(inout bit<32> v, out bit<32> old) { old = v; v = 0; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v0) get0 = { void apply(inout bit<32> v, out bit<32> old) { old = v; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v1) get1 = { void apply(inout bit<32> v, out bit<32> old) { old = v; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v2) get2 = { void apply(inout bit<32> v, out bit<32> old) { old = v; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v3) get3 = { void apply(inout bit<32> v, out bit<32> old) { old = v; } };
    RegisterAction<bit<32>, cidx_t, bit<32>>(pc_v4) get4 = { void apply(inout bit<32> v, out bit<32> old) { old = v; } };

    Counter<bit<32>, bit<3>>(8, CounterType_t.PACKETS) dropped; // 0 malformed, 1 no instance, 2 rate, 3 NACKed, 4 held in the cache, 5 another pipe
    // Evicted flows whose collector has no Postcarding instance (the control
    // plane removed it): their chunks are lost.
    Counter<bit<32>, bit<1>>(1, CounterType_t.PACKETS) evicted_lost;
    Meter<qp_t>(1 << DTA_QP_BITS, MeterType_t.PACKETS) rate;
    bit<8> color = 0;
    bool admit = false;
    bool ok = false;
    bit<8> same = 0;
    bit<8> complete = 0;
    bit<8> evicted_ok = 0;

    action drop(bit<3> why) { ig_dprsr_md.drop_ctl = 1; dropped.count(why); }
    // Postcards enter through the ports of one pipe (p4.Config.ReportPorts):
    // Tofino keeps the cache registers and the meters once per pipe, so a
    // flow's postcards entering through two pipes would never combine.
    action report_port() { }
    table report_ports {
        key = { ig_md.ingress_port: exact; }
        actions = { report_port; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 128;
    }

    // Hop, path length and UDP length -> the hop's bit and the other hops
    // the flow needs to complete (generated: DTA_PC_HOP_ENTRIES, from
    // p4gen.HopMask). A miss is malformed: hop 0 or above B or the path
    // length, a path length above B, a length not 9 or 10 bytes after the
    // base header.
    action hop_mask(bit<8> b, bit<8> need) { m.bit_ = b; m.need = need; ok = true; }
    table hops {
        key = {
            h.pc.hop: exact; h.seq.isValid(): exact; h.pc_len.isValid(): exact;
            h.pc_len.path_len: ternary; h.udp.length: exact;
        }
        actions = { hop_mask; NoAction; }
        default_action = NoAction;
        const entries = { DTA_PC_HOP_ENTRIES }
        size = 64;
    }
    // crc8 -> the collector's Postcarding instance: its QP and the multicast
    // group of its N copies (replication IDs 0..N-1).
    action to_instance(bit<8> qp, MulticastGroupId_t mgid) {
        h.bridge.setValid(); h.bridge.kind = KIND_CHUNK; h.bridge.qp = qp;
        ig_tm_md.mcast_grp_a = mgid; admit = true;
    }
    table instance {
        key = { m.crc8: exact; }
        actions = { to_instance; NoAction; }
        default_action = NoAction;
        size = 256;
    }
    // The same for the evicted flow, with the groups whose replication IDs
    // carry DTA_PC_EVICTED.
    action to_evicted(bit<8> qp, MulticastGroupId_t mgid) {
        h.bridge.qp_ev = qp; ig_tm_md.mcast_grp_b = mgid; evicted_ok = 1;
    }
    table evicted {
        key = { m.crc8_ev: exact; }
        actions = { to_evicted; NoAction; }
        default_action = NoAction;
        size = 256;
    }
    action ack_to(PortId_t port, bit<8> qp) {
        ig_tm_md.ucast_egress_port = port;
        h.bridge.setValid(); h.bridge.kind = KIND_ACK; h.bridge.qp = qp;
    }
    // Translator QPN -> QP index, for ACKs and NAKs from collectors.
    table responder {
        key = { h.bth.dst_qp: exact; }
        actions = { ack_to; NoAction; }
        default_action = NoAction;
        size = 1 << DTA_QP_BITS;
    }
    // The switch CPU runs the CM: as translator.p4.
    action punt(PortId_t port) {
        ig_tm_md.ucast_egress_port = port;
        h.bridge.setValid(); h.bridge.kind = KIND_NONE;
    }
    table to_cpu {
        actions = { punt; NoAction; }
        default_action = NoAction;
        size = 1;
    }
    table from_cpu {
        key = { ig_md.ingress_port: exact; h.ipv4.dst: exact; }
        actions = { punt; NoAction; }
        default_action = NoAction;
        size = 256;
    }
    // Turn the report into a NACK to its reporter (section 2, 8.6).
    action nack() {
        bit<48> mac = h.ethernet.dst; h.ethernet.dst = h.ethernet.src; h.ethernet.src = mac;
        bit<32> ip = h.ipv4.dst; h.ipv4.dst = h.ipv4.src; h.ipv4.src = ip;
        h.ipv4.total_len = 20 + 8 + 2; h.ipv4.ttl = 64;
        h.udp.dst_port = DTA_ACK_PORT; h.udp.src_port = DTA_REPORT_PORT;
        h.udp.length = 8 + 2; h.udp.checksum = 0;
        h.ack.setValid(); h.ack.seq = h.seq.seq; h.ack.nack = 1; h.ack.reserved = 0;
        h.dta.setInvalid(); h.seq.setInvalid(); h.pc.setInvalid(); h.pc_len.setInvalid();
        ig_tm_md.ucast_egress_port = ig_md.ingress_port;
        ig_tm_md.mcast_grp_a = 0;
        h.bridge.setValid(); h.bridge.kind = KIND_NONE;
        dropped.count(3);
    }
    action index() { m.idx = cache_index.get({h.pc.key[7:0], h.pc.key[15:8], h.pc.key[23:16], h.pc.key[31:24]}); }

    apply {
        if (h.bth.isValid()) {
            if (!from_cpu.apply().hit) {
                if (h.aeth.isValid()) { responder.apply(); } else { to_cpu.apply(); }
            }
            if (!h.bridge.isValid()) { drop(0); }
        } else if (h.pc.isValid()) {
            m.crc8 = collector.get({h.pc.key});
            index();
            hops.apply();
            instance.apply();
            if (!ok || h.pc.value == 0) {
                drop(0); // malformed: never NACKed
            } else if (!report_ports.apply().hit) {
                if (h.seq.isValid()) { nack(); } else { drop(5); }
            } else if (!admit) {
                if (h.seq.isValid()) { nack(); } else { drop(1); }
            } else {
                color = rate.execute(h.bridge.qp);
                if (color == MeterColor_t.RED) {
                    if (h.seq.isValid()) { nack(); } else { drop(2); }
                } else {
                    cidx_t i = m.idx[DTA_PC_CACHE_BITS-1:0];
                    m.old_key = swap_key.execute(i);
                    if (m.old_key == h.pc.key) { same = 1; m.have = add_hop.execute(i); }
                    else if (m.need == 0) { m.have = take_done.execute(i); }
                    else { m.have = take.execute(i); }
                    if (same == 0 && m.have != 0) { m.crc8_ev = collector_ev.get({m.old_key}); }
                    // Fresh: another flow's entry, or a free one.
                    h.bridge_pc.setValid();
                    h.bridge.fresh = 0;
                    if (same == 0 || m.have == 0) { h.bridge.fresh = 1; }
                    h.bridge_pc.key = h.pc.key;
                    h.bridge_pc.key_ev = m.old_key;
                    h.bridge_pc.value = h.pc.value;
                    if (h.pc.hop == 1) { if (h.bridge.fresh == 1) { h.bridge_pc.e0 = put0.execute(i); } else { h.bridge_pc.e0 = set0.execute(i); } }
                    else if (h.bridge.fresh == 1) { h.bridge_pc.e0 = clear0.execute(i); } else { h.bridge_pc.e0 = get0.execute(i); }
                    if (h.pc.hop == 2) { if (h.bridge.fresh == 1) { h.bridge_pc.e1 = put1.execute(i); } else { h.bridge_pc.e1 = set1.execute(i); } }
                    else if (h.bridge.fresh == 1) { h.bridge_pc.e1 = clear1.execute(i); } else { h.bridge_pc.e1 = get1.execute(i); }
                    if (h.pc.hop == 3) { if (h.bridge.fresh == 1) { h.bridge_pc.e2 = put2.execute(i); } else { h.bridge_pc.e2 = set2.execute(i); } }
                    else if (h.bridge.fresh == 1) { h.bridge_pc.e2 = clear2.execute(i); } else { h.bridge_pc.e2 = get2.execute(i); }
                    if (h.pc.hop == 4) { if (h.bridge.fresh == 1) { h.bridge_pc.e3 = put3.execute(i); } else { h.bridge_pc.e3 = set3.execute(i); } }
                    else if (h.bridge.fresh == 1) { h.bridge_pc.e3 = clear3.execute(i); } else { h.bridge_pc.e3 = get3.execute(i); }
                    if (h.pc.hop == 5) { if (h.bridge.fresh == 1) { h.bridge_pc.e4 = put4.execute(i); } else { h.bridge_pc.e4 = set4.execute(i); } }
                    else if (h.bridge.fresh == 1) { h.bridge_pc.e4 = clear4.execute(i); } else { h.bridge_pc.e4 = get4.execute(i); }

                    // Complete: the same flow held every other hop it needs,
                    // or a new flow needs none.
                    if (same == 1) {
                        if (m.have == m.need) { complete = 1; }
                    } else if (m.need == 0) { complete = 1; }
                    if (complete == 0) { ig_tm_md.mcast_grp_a = 0; }
                    // Evict: another flow held the entry. Its chunk goes to
                    // its own collector's instance (mcast_grp_b).
                    if (same == 0 && m.have != 0) {
                        if (!evicted.apply().hit) { evicted_lost.count(0); }
                    }
                    if (complete == 0 && evicted_ok == 0) { drop(4); } // held in the cache
                    h.dta.setInvalid(); h.seq.setInvalid(); h.pc.setInvalid(); h.pc_len.setInvalid();
                }
            }
        } else {
            drop(0);
        }
    }
}

control IgDeparser(packet_out pkt, inout headers_t h, in ig_meta_t m,
                   in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_csum;
    apply {
        if (h.ack.isValid()) {
            h.ipv4.checksum = ipv4_csum.update({
                h.ipv4.version, h.ipv4.ihl, h.ipv4.tos, h.ipv4.total_len,
                h.ipv4.identification, h.ipv4.flags, h.ipv4.frag_offset,
                h.ipv4.ttl, h.ipv4.protocol, h.ipv4.src, h.ipv4.dst});
        }
        pkt.emit(h);
    }
}

parser EgParser(packet_in pkt, out headers_t h, out eg_meta_t m,
                out egress_intrinsic_metadata_t eg_md) {
    state start {
        pkt.extract(eg_md);
        pkt.extract(h.bridge);
        transition select(h.bridge.kind) { KIND_CHUNK: bridge_pc; default: l2; }
    }
    state bridge_pc { pkt.extract(h.bridge_pc); transition l2; }
    state l2 {
        pkt.extract(h.ethernet);
        pkt.extract(h.ipv4);
        pkt.extract(h.udp);
        transition select(h.bridge.kind) { KIND_ACK: bth; default: accept; }
    }
    // The ACK's PSN in metadata, as translator.p4's.
    state bth { pkt.extract(h.bth); pkt.extract(h.aeth); m.ack_psn = h.bth.psn; transition accept; }
}

control Egress(inout headers_t h, inout eg_meta_t m,
               in egress_intrinsic_metadata_t eg_md,
               in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
               inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    // Chunk of copy n: CRC_n(le32(key) || u8(n)) (sections 4, 8.5), its low
    // 27 bits placed at bit 5 (DTA_PC_CHUNK_BYTES = 32): the byte offset
    // before the mask, which the control plane gives shifted alike.
    Hash<bit<27>>(HashAlgorithm_t.CUSTOM, DTA_CRC32) chunk0;
    Hash<bit<27>>(HashAlgorithm_t.CUSTOM, DTA_CRC_COPY1) chunk1;
    Hash<bit<27>>(HashAlgorithm_t.CUSTOM, DTA_CRC_COPY2) chunk2;
    Hash<bit<27>>(HashAlgorithm_t.CUSTOM, DTA_CRC_COPY3) chunk3;
    // Hop checksums over le32(key) (section 8.5).
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_HOP1) hop1;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_HOP2) hop2;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_HOP3) hop3;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_HOP4) hop4;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_HOP5) hop5;
    // ICRC over the variable bytes: BTH bytes 8..11 to the end of the chunk.
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_ICRC) icrc_chunk;

    // Next PSN of each QP: its low 24 bits, as translator.p4's.
    Register<bit<32>, qp_t>(1 << DTA_QP_BITS, 0) psn;
    RegisterAction<bit<32>, qp_t, bit<32>>(psn) next_psn = {
        void apply(inout bit<32> v, out bit<32> old) {
            old = v;
            if (v == 0x00FFFFFF) { v = 0; } else { v = v + 1; } // 24-bit wrap
        }
    };
    RegisterAction<bit<32>, qp_t, bit<32>>(psn) read_psn = {
        void apply(inout bit<32> v, out bit<32> old) { old = v - DTA_PROBE_BEHIND; }
    };
    RegisterAction<bit<32>, qp_t, bit<32>>(psn) resync_psn = {
        void apply(inout bit<32> v) { v = (bit<32>)m.ack_psn; }
    };
    RegisterAction<bit<32>, qp_t, bit<32>>(psn) resync_ack = {
        void apply(inout bit<32> v) { v = (bit<32>)m.ack_psn + 1; }
    };
    // A lost sequence error NAK (section 8.7), as translator.p4: reports of
    // each QP since its last ACK or NAK, saturating at DTA_STALL_PACKETS.
    Register<bit<16>, qp_t>(1 << DTA_QP_BITS, 0) since_ack;
    RegisterAction<bit<16>, qp_t, bit<16>>(since_ack) count_report = {
        void apply(inout bit<16> v, out bit<16> old) {
            old = v;
            if (v < DTA_STALL_PACKETS) { v = v + 1; }
        }
    };
    RegisterAction<bit<16>, qp_t, bit<16>>(since_ack) ack_seen = {
        void apply(inout bit<16> v, out bit<16> old) { old = v; v = 0; }
    };
    Counter<bit<32>, qp_t>(1 << DTA_QP_BITS, CounterType_t.PACKETS) probes;

    bit<8> rid = eg_md.egress_rid[7:0];
    bit<8> copy = rid & (DTA_PC_EVICTED - 1);
    bit<8> qpi = 0;
    bit<16> since = 0; // since_ack before this packet
    bit<1> probe = 0;
    bit<32> mask = 0;
    bit<32> icrc_const = 0;

    action set_qp(bit<48> src_mac, bit<48> dst_mac, bit<32> src_ip, bit<32> dst_ip,
                  bit<16> src_port, bit<24> dst_qp, bit<32> rkey,
                  bit<32> va_hi, bit<32> va_lo, bit<32> chunk_mask, bit<32> icrc) {
        h.ethernet.src = src_mac; h.ethernet.dst = dst_mac;
        h.ipv4.src = src_ip; h.ipv4.dst = dst_ip;
        h.udp.src_port = src_port;
        h.bth.dst_qp = dst_qp;
        h.reth.rkey = rkey; h.reth.va_hi = va_hi; h.reth.va_lo = va_lo;
        mask = chunk_mask; icrc_const = icrc;
    }
    // QP index -> connection and region (from the collector's advertisement).
    table qp {
        key = { qpi: exact; }
        actions = { set_qp; NoAction; }
        default_action = NoAction;
        size = 1 << DTA_QP_BITS;
    }

    // The replica's flow: the evicted one (replication ID with
    // DTA_PC_EVICTED) or the postcard's. A flow the postcard completes but
    // did not find in the cache needs one hop (path length 1): its chunk is
    // the postcard's value at hop 1.
    action own() {
        qpi = h.bridge.qp; m.key = h.bridge_pc.key;
        h.chunk.s0 = h.bridge_pc.e0; h.chunk.s1 = h.bridge_pc.e1; h.chunk.s2 = h.bridge_pc.e2;
        h.chunk.s3 = h.bridge_pc.e3; h.chunk.s4 = h.bridge_pc.e4;
    }
    action own_single() {
        qpi = h.bridge.qp; m.key = h.bridge_pc.key;
        h.chunk.s0 = h.bridge_pc.value; h.chunk.s1 = 0; h.chunk.s2 = 0; h.chunk.s3 = 0; h.chunk.s4 = 0;
    }
    action evicted() {
        qpi = h.bridge.qp_ev; m.key = h.bridge_pc.key_ev;
        h.chunk.s0 = h.bridge_pc.e0; h.chunk.s1 = h.bridge_pc.e1; h.chunk.s2 = h.bridge_pc.e2;
        h.chunk.s3 = h.bridge_pc.e3; h.chunk.s4 = h.bridge_pc.e4;
    }
    action frame() {
        h.ipv4.version = 4; h.ipv4.ihl = 5; h.ipv4.tos = 0; h.ipv4.identification = 0;
        h.ipv4.flags = 2; h.ipv4.frag_offset = 0; h.ipv4.ttl = 64; h.ipv4.protocol = 17;
        h.ipv4.total_len = 20 + 8 + ROCE_BTH_LEN + ROCE_RETH_LEN + DTA_PC_CHUNK_BYTES + ROCE_ICRC_LEN;
        h.udp.dst_port = ROCE_UDP_PORT; h.udp.checksum = 0;
        h.udp.length = 8 + ROCE_BTH_LEN + ROCE_RETH_LEN + DTA_PC_CHUNK_BYTES + ROCE_ICRC_LEN;
        h.bth.setValid();
        h.bth.opcode = ROCE_RC_WRITE_ONLY;
        h.bth.se = 0; h.bth.migreq = 0; h.bth.pad = 0; h.bth.tver = 0;
        h.bth.pkey = ROCE_PKEY; h.bth.resv8a = 0;
        h.reth.setValid(); h.reth.length = DTA_PC_CHUNK_BYTES;
        h.chunk.setValid(); h.chunk.pad0 = 0; h.chunk.pad1 = 0; h.chunk.pad2 = 0;
        h.icrc.setValid();
    }
    // AckReq and Resv7 share a PHV container with the PSN: all three are
    // written in one action, not in frame(), so the chunk need not wait for
    // the PSN, nor the ICRC for a second write of the container.
    action bth_psn(bit<1> ack_req) { h.bth.psn = m.psn[23:0]; h.bth.ack_req = ack_req; h.bth.resv7 = 0; }
    action mask_chunk() { m.offset = m.chunk_hash & mask; }
    action add_va() { h.reth.va_lo = h.reth.va_lo + m.offset; }
    action code1() { h.chunk.s0 = h.chunk.s0 ^ hop1.get({m.key[7:0], m.key[15:8], m.key[23:16], m.key[31:24]}); }
    action code2() { h.chunk.s1 = h.chunk.s1 ^ hop2.get({m.key[7:0], m.key[15:8], m.key[23:16], m.key[31:24]}); }
    action code3() { h.chunk.s2 = h.chunk.s2 ^ hop3.get({m.key[7:0], m.key[15:8], m.key[23:16], m.key[31:24]}); }
    action code4() { h.chunk.s3 = h.chunk.s3 ^ hop4.get({m.key[7:0], m.key[15:8], m.key[23:16], m.key[31:24]}); }
    action code5() { h.chunk.s4 = h.chunk.s4 ^ hop5.get({m.key[7:0], m.key[15:8], m.key[23:16], m.key[31:24]}); }

    action ack() { qpi = h.bridge.qp; }
    action icrc_hash() {
        m.icrc = icrc_chunk.get({h.bth.ack_req, h.bth.resv7, h.bth.psn,
            h.reth.va_hi, h.reth.va_lo, h.reth.rkey, h.reth.length,
            h.chunk.s0, h.chunk.s1, h.chunk.s2, h.chunk.s3, h.chunk.s4, h.chunk.pad0, h.chunk.pad1, h.chunk.pad2});
    }
    action icrc_fold() { m.icrc = m.icrc ^ icrc_const; }
    // The ICRC goes on the wire least-significant byte first.
    action icrc_bytes() {
        h.icrc.b0 = m.icrc[7:0]; h.icrc.b1 = m.icrc[15:8];
        h.icrc.b2 = m.icrc[23:16]; h.icrc.b3 = m.icrc[31:24];
    }

    action count() { since = count_report.execute(qpi); }
    action acked() { since = ack_seen.execute(qpi); }
    table since_op {
        key = { h.bridge.kind: exact; }
        actions = { count; acked; NoAction; }
        default_action = NoAction;
        const entries = {
            KIND_CHUNK: count();
            KIND_ACK: acked();
        }
        size = 2;
    }

    // Every use of the PSN register in one table, so they share its stage;
    // probes as translator.p4's.
    action take_psn() { m.psn = next_psn.execute(qpi); }
    action probe_psn() { m.psn = read_psn.execute(qpi); probe = 1; probes.count(qpi); }
    action resync() { resync_psn.execute(qpi); }
    action resync_ack_psn() { resync_ack.execute(qpi); }
    table psn_op {
        key = {
            h.bridge.kind: exact;
            since[DTA_STALL_BITS:DTA_STALL_BITS]: exact @name("stalled");
            h.aeth.syndrome: ternary;
        }
        actions = { take_psn; probe_psn; resync; resync_ack_psn; NoAction; }
        default_action = NoAction;
        const entries = {
            (KIND_CHUNK, 0, _): take_psn();
            (KIND_CHUNK, 1, _): probe_psn();
            (KIND_ACK, 0, ROCE_SYNDROME_NAK_PSN): resync();
            (KIND_ACK, 1, ROCE_SYNDROME_NAK_PSN): resync();
            (KIND_ACK, 1, 0x00 &&& 0xE0): resync_ack_psn();
        }
        size = 8;
    }

    apply {
        if (h.bridge.kind == KIND_ACK) {
            ack();
        } else if (h.bridge.kind == KIND_CHUNK) {
            if ((rid & DTA_PC_EVICTED) != 0) { evicted(); }
            else if (h.bridge.fresh == 1) { own_single(); }
            else { own(); }
            // The chunk and its address first: nothing they need comes from
            // the PSN tables, so they do not wait for them.
            frame();
            qp.apply();
            if (copy == 0) {
                m.chunk_hash[31:5] = chunk0.get({m.key[7:0], m.key[15:8], m.key[23:16], m.key[31:24], copy});
            } else if (copy == 1) {
                m.chunk_hash[31:5] = chunk1.get({m.key[7:0], m.key[15:8], m.key[23:16], m.key[31:24], copy});
            } else if (copy == 2) {
                m.chunk_hash[31:5] = chunk2.get({m.key[7:0], m.key[15:8], m.key[23:16], m.key[31:24], copy});
            } else {
                m.chunk_hash[31:5] = chunk3.get({m.key[7:0], m.key[15:8], m.key[23:16], m.key[31:24], copy});
            }
            code1(); code2(); code3(); code4(); code5();
            mask_chunk();
            add_va();
        }
        since_op.apply();
        psn_op.apply();
        if (h.bridge.kind == KIND_ACK) {
            eg_dprsr_md.drop_ctl = 1;
        } else if (h.bridge.kind == KIND_CHUNK) {
            // AckReq on every probe and every 64th WRITE, so the collector's
            // ACKs stay few.
            if (probe == 1 || m.psn[5:0] == 0) { bth_psn(1); } else { bth_psn(0); }
            icrc_hash();
            icrc_fold();
            icrc_bytes();
        }
        h.bridge.setInvalid(); h.bridge_pc.setInvalid();
    }
}

control EgDeparser(packet_out pkt, inout headers_t h, in eg_meta_t m,
                   in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_csum;
    apply {
        h.ipv4.checksum = ipv4_csum.update({
            h.ipv4.version, h.ipv4.ihl, h.ipv4.tos, h.ipv4.total_len,
            h.ipv4.identification, h.ipv4.flags, h.ipv4.frag_offset,
            h.ipv4.ttl, h.ipv4.protocol, h.ipv4.src, h.ipv4.dst});
        pkt.emit(h.ethernet); pkt.emit(h.ipv4); pkt.emit(h.udp);
        pkt.emit(h.bth); pkt.emit(h.reth); pkt.emit(h.chunk); pkt.emit(h.icrc);
    }
}

Pipeline(IgParser(), Ingress(), IgDeparser(), EgParser(), Egress(), EgDeparser()) pipe;
Switch(pipe) main;
