/* dtakit DTA translator for Tofino-1 (TNA), written from docs/DTA-WIRE.md.
 *
 * Ingress parses DTA reports (2-byte base header, or 3 with S), chooses the
 * collector instance by CRC8(be32(key)) and replicates a Key-Write or
 * Key-Increment report N times through a multicast group whose nodes carry
 * the copy index as replication ID. Egress turns each copy into one RoCEv2
 * packet: RDMA WRITE Only (Key-Write, and Append once DTA_AP_BATCH entries of
 * a list have arrived: ingress keeps them in registers, and each list's head
 * in a ring) or FETCH_ADD (Key-Increment), PSN from
 * a per-QP register, slot address from copy n's own CRC (dta/tofino PerCopy),
 * ICRC = per-QP constant XOR a CRC over the variable bytes (rocev2.ICRCBase).
 * A NAK (PSN sequence error) from a collector resynchronises the QP's PSN;
 * a QP that has sent DTA_STALL_PACKETS reports with no ACK back (its NAK was
 * lost) sends probes the collector answers with an ACK, which resynchronises
 * it (section 8.7).
 * Reports the switch cannot take (no instance, rate limit) are NACKed to
 * sequenced reporters and dropped otherwise.
 */
#include <core.p4>
#include <tna.p4>
#include "../include/dta_constants.p4"

typedef bit<DTA_QP_BITS> qp_t;

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
// Key-Write (section 3), data fixed at DTA_KW_DATA_BYTES.
header dta_kw_h { bit<8> redundancy; bit<32> key; bit<(DTA_KW_DATA_BYTES*8)> data; }
// Key-Increment (section 3).
header dta_ki_h { bit<8> redundancy; bit<32> key; bit<64> counter; }
// Append (section 3), entries fixed at DTA_AP_ENTRY_BYTES.
header dta_ap_h { bit<32> list; bit<(DTA_AP_ENTRY_BYTES*8)> data; }
// Acknowledgement (section 2).
header dta_ack_h { bit<8> seq; bit<1> nack; bit<7> reserved; }
header bth_h {
    bit<8> opcode; bit<1> se; bit<1> migreq; bit<2> pad; bit<4> tver; bit<16> pkey;
    bit<8> resv8a; bit<24> dst_qp; bit<1> ack_req; bit<7> resv7; bit<24> psn;
}
header reth_h { bit<32> va_hi; bit<32> va_lo; bit<32> rkey; bit<32> length; }
header atomiceth_h { bit<32> va_hi; bit<32> va_lo; bit<32> rkey; bit<64> add; bit<64> compare; }
header aeth_h { bit<8> syndrome; bit<24> msn; }
// Key-Write slot: le32(checksum) || data (section 5).
header kw_payload_h { bit<8> c0; bit<8> c1; bit<8> c2; bit<8> c3; bit<(DTA_KW_DATA_BYTES*8)> data; }
// Append batch: DTA_AP_BATCH entries in list order.
header ap_payload_h { DTA_AP_PAYLOAD_FIELDS }
header icrc_h { bit<8> b0; bit<8> b1; bit<8> b2; bit<8> b3; }

const bit<8> KIND_NONE = 0;
const bit<8> KIND_KW = 1;
const bit<8> KIND_KI = 2;
const bit<8> KIND_ACK = 3;
const bit<8> KIND_AP = 4;
// Bridged from ingress to egress, ahead of the packet.
header bridge_h { bit<8> kind; bit<8> qp; }
// Bridged for an Append batch: the entries held in ingress and the batch's
// byte offset in the region.
header bridge_ap_h { DTA_AP_HELD_FIELDS bit<32> offset; }

struct headers_t {
    bridge_h bridge; bridge_ap_h bridge_ap;
    ethernet_h ethernet; ipv4_h ipv4; udp_h udp;
    dta_base_h dta; dta_seq_h seq; dta_kw_h kw; dta_ki_h ki; dta_ap_h ap; dta_ack_h ack;
    bth_h bth; reth_h reth; atomiceth_h atomic; aeth_h aeth;
    kw_payload_h kw_payload; ap_payload_h ap_payload; icrc_h icrc;
}
struct ig_meta_t { bit<8> crc8; bit<8> n; bit<8> pos; bit<32> head; bit<32> lbase; }
struct eg_meta_t { bit<32> psn; bit<32> slot_hash; bit<32> checksum; bit<32> icrc; bit<32> offset; bit<24> ack_psn; }

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
        transition select(h.dta.opcode) {
            DTA_OP_KEY_WRITE: kw;
            DTA_OP_KEY_INCREMENT: ki;
            DTA_OP_APPEND: ap;
            default: accept;
        }
    }
    state kw { pkt.extract(h.kw); transition accept; }
    state ki { pkt.extract(h.ki); transition accept; }
    state ap { pkt.extract(h.ap); transition accept; }
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
    // Collector choice at the translator as at a reporter: CRC8(be32(key)).
    Hash<bit<8>>(HashAlgorithm_t.CRC8) collector_kw;
    Hash<bit<8>>(HashAlgorithm_t.CRC8) collector_ki;
    Hash<bit<8>>(HashAlgorithm_t.CRC8) collector_ap;

    // Append batching: per list, the entries held so far and the ring head.
    Register<bit<8>, bit<DTA_AP_LIST_BITS>>(1 << DTA_AP_LIST_BITS, 0) ap_count;
    RegisterAction<bit<8>, bit<DTA_AP_LIST_BITS>, bit<8>>(ap_count) ap_next = {
        void apply(inout bit<8> v, out bit<8> old) {
            old = v;
            if (v == DTA_AP_BATCH - 1) { v = 0; } else { v = v + 1; }
        }
    };
    DTA_AP_REGISTERS
    Register<bit<32>, bit<DTA_AP_LIST_BITS>>(1 << DTA_AP_LIST_BITS, 0) ap_head;
    RegisterAction<bit<32>, bit<DTA_AP_LIST_BITS>, bit<32>>(ap_head) ap_advance = {
        void apply(inout bit<32> v, out bit<32> old) {
            old = v;
            if (v == DTA_AP_ENTRIES - DTA_AP_BATCH) { v = 0; } else { v = v + DTA_AP_BATCH; }
        }
    };
    // Batch offset = list*E*e + head*e, e = 4, E = 2^12 (a list below 2^10).
    action ap_list_base() { m.lbase = h.ap.list << 14; }
    action ap_head_offset() { m.head = m.head << 2; }
    action ap_offset() { h.bridge_ap.offset = m.head | m.lbase; }
    Counter<bit<32>, bit<3>>(8, CounterType_t.PACKETS) dropped; // 0 malformed, 1 no instance, 2 rate, 3 NACKed, 4 another pipe
    Meter<qp_t>(1 << DTA_QP_BITS, MeterType_t.PACKETS) rate;
    bit<8> color = 0;
    bool admit = false;

    action drop(bit<3> why) { ig_dprsr_md.drop_ctl = 1; dropped.count(why); }
    // Reports enter through the ports of one pipe (p4.Config.ReportPorts):
    // Tofino keeps the Append registers and the meters once per pipe, so a
    // list's reports entering through two pipes would keep two heads.
    action report_port() { }
    table report_ports {
        key = { ig_md.ingress_port: exact; }
        actions = { report_port; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 128;
    }
    action to_instance(bit<8> qp) {
        h.bridge.setValid(); h.bridge.qp = qp; admit = true;
    }
    action replicate(MulticastGroupId_t mgid) { ig_tm_md.mcast_grp_a = mgid; }
    // (QP, N) -> the multicast group of N copies to the QP's collector port.
    table copies {
        key = { h.bridge.qp: exact; m.n: exact; }
        actions = { replicate; NoAction; }
        default_action = NoAction;
        size = (1 << DTA_QP_BITS) * DTA_MAX_COPIES;
    }
    // (crc8, opcode) -> the instance of that primitive on the chosen collector.
    table instance {
        key = { m.crc8: exact; h.dta.opcode: exact; }
        actions = { to_instance; NoAction; }
        default_action = NoAction;
        size = 1024;
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
    // The switch CPU runs the CM (p4.Handshake): RoCEv2 packets other than
    // ACKs and NAKs go to it, and what it sends goes out unchanged.
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
        h.dta.setInvalid(); h.seq.setInvalid(); h.kw.setInvalid(); h.ki.setInvalid(); h.ap.setInvalid();
        ig_tm_md.ucast_egress_port = ig_md.ingress_port;
        h.bridge.setValid(); h.bridge.kind = KIND_NONE;
        dropped.count(3);
    }

    apply {
        if (h.kw.isValid()) {
            m.crc8 = collector_kw.get({h.kw.key});
            m.n = h.kw.redundancy;
            // Data of another size than the compiled D is malformed here.
            if (h.seq.isValid()) {
                if (h.udp.length != 8 + 3 + 5 + DTA_KW_DATA_BYTES) { m.n = 0; }
            } else if (h.udp.length != 8 + 2 + 5 + DTA_KW_DATA_BYTES) { m.n = 0; }
        } else if (h.ki.isValid()) {
            m.crc8 = collector_ki.get({h.ki.key});
            m.n = h.ki.redundancy;
            if (h.seq.isValid()) {
                if (h.udp.length != 8 + 3 + DTA_KEY_INCREMENT_LEN) { m.n = 0; }
            } else if (h.udp.length != 8 + 2 + DTA_KEY_INCREMENT_LEN) { m.n = 0; }
        } else if (h.ap.isValid()) {
            m.crc8 = collector_ap.get({h.ap.list});
            m.n = 1;
            // A list beyond L or all-zero data cannot be appended (section 5);
            // an entry of another size than the compiled e is malformed here.
            if (h.ap.list[31:DTA_AP_LIST_BITS] != 0 || h.ap.data == 0) { m.n = 0; }
            if (h.seq.isValid()) {
                if (h.udp.length != 8 + 3 + 4 + DTA_AP_ENTRY_BYTES) { m.n = 0; }
            } else if (h.udp.length != 8 + 2 + 4 + DTA_AP_ENTRY_BYTES) { m.n = 0; }
        }
        if (h.bth.isValid()) {
            if (!from_cpu.apply().hit) {
                if (h.aeth.isValid()) { responder.apply(); } else { to_cpu.apply(); }
            }
            if (!h.bridge.isValid()) { drop(0); }
        } else if (h.kw.isValid() || h.ki.isValid() || h.ap.isValid()) {
            if (m.n == 0) {
                drop(0); // malformed: never NACKed
            } else if (!report_ports.apply().hit) {
                if (h.seq.isValid()) { nack(); } else { drop(4); }
            } else {
                instance.apply();
                if (admit) {
                    color = rate.execute(h.bridge.qp);
                }
                if (!admit || color == MeterColor_t.RED) {
                    if (h.seq.isValid()) { nack(); }
                    else if (!admit) { drop(1); }
                    else { drop(2); }
                } else {
                    // N above DTA_MAX_COPIES is written with DTA_MAX_COPIES copies.
                    if (m.n > DTA_MAX_COPIES) { m.n = DTA_MAX_COPIES; }
                    copies.apply();
                    if (h.kw.isValid()) { h.bridge.kind = KIND_KW; }
                    else if (h.ki.isValid()) { h.bridge.kind = KIND_KI; }
                    else {
                        h.bridge.kind = KIND_AP;
                        bit<DTA_AP_LIST_BITS> lidx = h.ap.list[DTA_AP_LIST_BITS-1:0];
                        m.pos = ap_next.execute(lidx);
                        ap_list_base();
                        if (m.pos != DTA_AP_BATCH - 1) {
                            DTA_AP_HOLD(lidx)
                        } else {
                            // The batch's last entry: write all B at the head.
                            h.bridge_ap.setValid();
                            DTA_AP_READ(lidx)
                            m.head = ap_advance.execute(lidx);
                            ap_head_offset();
                            ap_offset();
                        }
                        if (m.pos != DTA_AP_BATCH - 1) { ig_dprsr_md.drop_ctl = 1; } // held
                    }
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
        transition select(h.bridge.kind) { KIND_AP: bridge_ap; default: l2; }
    }
    state bridge_ap { pkt.extract(h.bridge_ap); transition l2; }
    state l2 {
        pkt.extract(h.ethernet);
        pkt.extract(h.ipv4);
        pkt.extract(h.udp);
        transition select(h.bridge.kind) {
            KIND_KW: dta;
            KIND_KI: dta;
            KIND_AP: dta;
            KIND_ACK: bth;
            default: accept;
        }
    }
    state dta {
        pkt.extract(h.dta);
        transition select(h.dta.sequenced) { 1: dta_seq; default: dta_op; }
    }
    state dta_seq { pkt.extract(h.seq); transition dta_op; }
    state dta_op {
        transition select(h.bridge.kind) { KIND_KW: kw; KIND_KI: ki; default: ap; }
    }
    state kw { pkt.extract(h.kw); transition accept; }
    state ki { pkt.extract(h.ki); transition accept; }
    state ap { pkt.extract(h.ap); transition accept; }
    // The ACK's PSN in metadata: the PSN tables read it there, not in h.bth,
    // which the writes' actions fill, so those need not wait for them.
    state bth { pkt.extract(h.bth); pkt.extract(h.aeth); m.ack_psn = h.bth.psn; transition accept; }
}

control Egress(inout headers_t h, inout eg_meta_t m,
               in egress_intrinsic_metadata_t eg_md,
               in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
               inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    // Slot of copy n: CRC_n(le32(key) || u8(n)) (sections 4, 8.2, 8.4).
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC32) slot0;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_COPY1) slot1;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_COPY2) slot2;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_COPY3) slot3;
    // Key checksum: CRC32(le32(key)).
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC32) key_checksum;
    // ICRC over the variable bytes: BTH bytes 8..11 to the end of the payload.
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_ICRC) icrc_write;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_ICRC) icrc_atomic;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_ICRC) icrc_append;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, DTA_CRC_ICRC) icrc_probe;

    bit<16> since = 0;   // since_ack before this packet
    bit<1> probe = 0;

    // Next PSN of each QP: its low 24 bits (an ACK of PSN 2^24 - 1 leaves
    // 2^24 after resync_ack; the 32-bit count stays right modulo 2^24).
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
    // A lost sequence error NAK (section 8.7): reports of each QP since its
    // last ACK, NAK or atomic ACK, saturating at DTA_STALL_PACKETS. A QP
    // that reached it is stalled: its reports go as probes until an ACK.
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

    bit<8> copy = eg_md.egress_rid[7:0];
    bit<32> report_key = 0;
    bit<32> mask = 0;
    bit<32> icrc_const = 0;

    action set_qp(bit<48> src_mac, bit<48> dst_mac, bit<32> src_ip, bit<32> dst_ip,
                  bit<16> src_port, bit<24> dst_qp, bit<32> rkey,
                  bit<32> va_hi, bit<32> va_lo, bit<32> slot_mask, bit<32> icrc,
                  bit<32> probe_icrc) {
        h.ethernet.src = src_mac; h.ethernet.dst = dst_mac;
        h.ipv4.src = src_ip; h.ipv4.dst = dst_ip;
        h.udp.src_port = src_port;
        h.bth.dst_qp = dst_qp;
        h.reth.rkey = rkey; h.reth.va_hi = va_hi; h.reth.va_lo = va_lo;
        h.atomic.rkey = rkey; h.atomic.va_hi = va_hi; h.atomic.va_lo = va_lo;
        mask = slot_mask; icrc_const = icrc;
        // A Key-Increment packet has no key checksum: m.checksum holds the
        // probe's ICRC constant, in no PHV of its own.
        m.checksum = probe_icrc;
    }
    // QP index -> connection and region (from the collector's advertisement).
    table qp {
        key = { h.bridge.qp: exact; }
        actions = { set_qp; NoAction; }
        default_action = NoAction;
        size = 1 << DTA_QP_BITS;
    }

    action common() {
        h.ipv4.version = 4; h.ipv4.ihl = 5; h.ipv4.tos = 0; h.ipv4.identification = 0;
        h.ipv4.flags = 2; h.ipv4.frag_offset = 0; h.ipv4.ttl = 64; h.ipv4.protocol = 17;
        h.udp.dst_port = ROCE_UDP_PORT; h.udp.checksum = 0;
        h.bth.setValid();
        h.bth.se = 0; h.bth.migreq = 0; h.bth.pad = 0; h.bth.tver = 0;
        h.bth.pkey = ROCE_PKEY; h.bth.resv8a = 0;
        h.icrc.setValid();
        h.dta.setInvalid(); h.seq.setInvalid();
    }
    action write() {
        common();
        h.ipv4.total_len = 20 + 8 + ROCE_BTH_LEN + ROCE_RETH_LEN + 4 + DTA_KW_DATA_BYTES + ROCE_ICRC_LEN;
        h.udp.length = 8 + ROCE_BTH_LEN + ROCE_RETH_LEN + 4 + DTA_KW_DATA_BYTES + ROCE_ICRC_LEN;
        h.bth.opcode = ROCE_RC_WRITE_ONLY;
        h.reth.setValid(); h.reth.length = 4 + DTA_KW_DATA_BYTES;
        h.kw_payload.setValid(); h.kw_payload.data = h.kw.data;
        report_key = h.kw.key;
        h.kw.setInvalid();
        h.atomic.setInvalid();
    }
    action append_write() {
        common();
        h.ipv4.total_len = 20 + 8 + ROCE_BTH_LEN + ROCE_RETH_LEN + DTA_AP_BATCH * DTA_AP_ENTRY_BYTES + ROCE_ICRC_LEN;
        h.udp.length = 8 + ROCE_BTH_LEN + ROCE_RETH_LEN + DTA_AP_BATCH * DTA_AP_ENTRY_BYTES + ROCE_ICRC_LEN;
        h.bth.opcode = ROCE_RC_WRITE_ONLY;
        h.reth.setValid(); h.reth.length = DTA_AP_BATCH * DTA_AP_ENTRY_BYTES;
        h.ap_payload.setValid();
        DTA_AP_FILL
        m.offset = h.bridge_ap.offset;
        h.ap.setInvalid(); h.bridge_ap.setInvalid();
        h.atomic.setInvalid();
    }
    action fetch_add() {
        common();
        h.ipv4.total_len = 20 + 8 + ROCE_BTH_LEN + ROCE_ATOMICETH_LEN + ROCE_ICRC_LEN;
        h.udp.length = 8 + ROCE_BTH_LEN + ROCE_ATOMICETH_LEN + ROCE_ICRC_LEN;
        h.bth.opcode = ROCE_RC_FETCH_ADD;
        h.atomic.setValid(); h.atomic.add = h.ki.counter; h.atomic.compare = 0;
        report_key = h.ki.key;
        h.ki.setInvalid();
        h.reth.setInvalid();
    }

    // One dependent step per action: Tofino runs an action in one stage.
    action mask_slot() { m.offset = m.slot_hash & mask; }
    action shift_slot() { m.offset = m.offset << DTA_KW_SLOT_SHIFT; } // Key-Write slots
    action shift_counter() { m.offset = m.offset << 3; } // 8-byte counters
    action kw_checksum() { m.checksum = key_checksum.get({report_key[7:0], report_key[15:8], report_key[23:16], report_key[31:24]}); }
    action swap_checksum() {
        h.kw_payload.c0 = m.checksum[7:0]; h.kw_payload.c1 = m.checksum[15:8];
        h.kw_payload.c2 = m.checksum[23:16]; h.kw_payload.c3 = m.checksum[31:24];
    }
    // The ICRC goes on the wire least-significant byte first: one byte per
    // field, so the four moves run in one action.
    action swap_icrc() {
        h.icrc.b0 = m.icrc[7:0]; h.icrc.b1 = m.icrc[15:8];
        h.icrc.b2 = m.icrc[23:16]; h.icrc.b3 = m.icrc[31:24];
    }
    // AckReq, Resv7 and the PSN share a PHV container: Resv7 is written
    // with the PSN, not in common(), so that the packet's actions need not
    // wait for the PSN.
    action bth_psn() { h.bth.psn = m.psn[23:0]; h.bth.resv7 = 0; }
    action add_va_write() { h.reth.va_lo = h.reth.va_lo + m.offset; }
    action add_va_atomic() { h.atomic.va_lo = h.atomic.va_lo + m.offset; }

    action count() { since = count_report.execute(h.bridge.qp); }
    action acked() { since = ack_seen.execute(h.bridge.qp); }
    table since_op {
        key = { h.bridge.kind: exact; }
        actions = { count; acked; NoAction; }
        default_action = NoAction;
        const entries = {
            KIND_KW: count();
            KIND_KI: count();
            KIND_AP: count();
            KIND_ACK: acked();
        }
        size = 4;
    }

    // Every use of the PSN register in one table, so they share its stage.
    // A stalled QP's report is a probe: it does not take a PSN but carries
    // the QP's next minus DTA_PROBE_BEHIND, a duplicate for the responder,
    // which does not execute it and answers with an ACK of its expected PSN
    // - 1. A NAK sets the PSN to the NAK's; an ACK does only while stalled.
    action take_psn() { m.psn = next_psn.execute(h.bridge.qp); }
    action probe_psn() { m.psn = read_psn.execute(h.bridge.qp); probe = 1; probes.count(h.bridge.qp); }
    // A Key-Increment QP's probe is a zero-length RDMA WRITE Only, not a
    // FETCH_ADD: a responder may drop a duplicate atomic it kept no result
    // for (Linux rxe), while it answers a duplicate WRITE with an ACK, and a
    // zero-length WRITE checks no R_Key, so an atomics-only region takes it.
    // Its ICRC has its own constant (set_qp's probe_icrc).
    action probe_write() {
        probe_psn();
        h.ipv4.total_len = 20 + 8 + ROCE_BTH_LEN + ROCE_RETH_LEN + ROCE_ICRC_LEN;
        h.udp.length = 8 + ROCE_BTH_LEN + ROCE_RETH_LEN + ROCE_ICRC_LEN;
        h.bth.opcode = ROCE_RC_WRITE_ONLY;
        h.reth.setValid(); h.reth.length = 0;
        h.atomic.setInvalid();
    }
    action resync() { resync_psn.execute(h.bridge.qp); }
    action resync_ack_psn() { resync_ack.execute(h.bridge.qp); }
    table psn_op {
        key = {
            h.bridge.kind: exact;
            since[DTA_STALL_BITS:DTA_STALL_BITS]: exact @name("stalled");
            h.aeth.syndrome: ternary;
        }
        actions = { take_psn; probe_psn; probe_write; resync; resync_ack_psn; NoAction; }
        default_action = NoAction;
        const entries = {
            (KIND_KW, 0, _): take_psn();
            (KIND_KI, 0, _): take_psn();
            (KIND_AP, 0, _): take_psn();
            (KIND_KW, 1, _): probe_psn();
            (KIND_KI, 1, _): probe_write();
            (KIND_AP, 1, _): probe_psn();
            (KIND_ACK, 0, ROCE_SYNDROME_NAK_PSN): resync();
            (KIND_ACK, 1, ROCE_SYNDROME_NAK_PSN): resync();
            (KIND_ACK, 1, 0x00 &&& 0xE0): resync_ack_psn();
        }
        size = 16;
    }

    apply {
        // The packet's headers first: nothing they need comes from the PSN
        // tables, so the slot address and payload do not wait for them.
        if (h.bridge.kind == KIND_KW) { write(); }
        else if (h.bridge.kind == KIND_KI) { fetch_add(); }
        else if (h.bridge.kind == KIND_AP) { append_write(); }
        if (h.bridge.kind != KIND_NONE) { since_op.apply(); psn_op.apply(); }
        if (h.bridge.kind == KIND_ACK) {
            eg_dprsr_md.drop_ctl = 1;
        } else if (h.bridge.kind != KIND_NONE) {
            qp.apply();
            bit<32> p = m.psn;
            bth_psn();
            // AckReq on every FETCH_ADD (section 8.6), every probe, and every
            // 64th WRITE, so the collector's ACKs stay few.
            if (probe == 1 || h.bridge.kind == KIND_KI || p[5:0] == 0) { h.bth.ack_req = 1; }
            else { h.bth.ack_req = 0; }
            if (h.bridge.kind != KIND_AP) {
                if (copy == 0) {
                    m.slot_hash = slot0.get({report_key[7:0], report_key[15:8], report_key[23:16], report_key[31:24], copy});
                } else if (copy == 1) {
                    m.slot_hash = slot1.get({report_key[7:0], report_key[15:8], report_key[23:16], report_key[31:24], copy});
                } else if (copy == 2) {
                    m.slot_hash = slot2.get({report_key[7:0], report_key[15:8], report_key[23:16], report_key[31:24], copy});
                } else {
                    m.slot_hash = slot3.get({report_key[7:0], report_key[15:8], report_key[23:16], report_key[31:24], copy});
                }
                mask_slot();
                if (h.bridge.kind == KIND_KW) { shift_slot(); } else { shift_counter(); }
            }
            if (h.bridge.kind == KIND_KW) {
                kw_checksum();
                swap_checksum();
                add_va_write();
                m.icrc = icrc_write.get({h.bth.ack_req, h.bth.resv7, h.bth.psn,
                    h.reth.va_hi, h.reth.va_lo, h.reth.rkey, h.reth.length,
                    h.kw_payload.c0, h.kw_payload.c1, h.kw_payload.c2, h.kw_payload.c3, h.kw_payload.data});
            } else if (h.bridge.kind == KIND_KI && probe == 1) {
                m.icrc = icrc_probe.get({h.bth.ack_req, h.bth.resv7, h.bth.psn,
                    h.reth.va_hi, h.reth.va_lo, h.reth.rkey, h.reth.length});
                icrc_const = m.checksum;
            } else if (h.bridge.kind == KIND_KI) {
                add_va_atomic();
                m.icrc = icrc_atomic.get({h.bth.ack_req, h.bth.resv7, h.bth.psn,
                    h.atomic.va_hi, h.atomic.va_lo, h.atomic.rkey, h.atomic.add, h.atomic.compare});
            } else {
                add_va_write();
                m.icrc = icrc_append.get({h.bth.ack_req, h.bth.resv7, h.bth.psn,
                    h.reth.va_hi, h.reth.va_lo, h.reth.rkey, h.reth.length,
                    DTA_AP_ICRC_FIELDS});
            }
            m.icrc = m.icrc ^ icrc_const;
            swap_icrc();
        }
        h.bridge.setInvalid();
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
        pkt.emit(h.bth); pkt.emit(h.reth); pkt.emit(h.atomic);
        pkt.emit(h.kw_payload); pkt.emit(h.ap_payload); pkt.emit(h.icrc);
    }
}

Pipeline(IgParser(), Ingress(), IgDeparser(), EgParser(), Egress(), EgDeparser()) pipe;
Switch(pipe) main;
