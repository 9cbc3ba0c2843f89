/* dtakit switch-side DTA reporter for Tofino-1 (TNA), from docs/DTA-WIRE.md.
 *
 * The switch forwards IPv4 by longest prefix. In egress, a packet of a
 * watched flow yields a Key-Write report (INT-style path data: key = the
 * flow's CRC32 over its 5-tuple, data = the switch ID), and a
 * packet that found its queue deeper than the port's threshold yields an
 * Append report (list = egress port, data = queue depth). The report is an
 * egress-to-egress mirror whose session truncates the copy to the mirror
 * header, so egress builds the report from scratch: Ethernet, IPv4, UDP to
 * DTA_REPORT_PORT, base header, sub-header, data. The collector is
 * table[CRC8(be32(key))] (section 4), the key being the Key-Write key or the
 * Append list ID.
 */
#include <core.p4>
#include <tna.p4>
#include "../include/dta_constants.p4"

header ethernet_h { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_h {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> total_len;
    bit<16> identification; bit<3> flags; bit<13> frag_offset;
    bit<8> ttl; bit<8> protocol; bit<16> checksum; bit<32> src; bit<32> dst;
}
header ports_h { bit<16> src; bit<16> dst; }
header udp_h { bit<16> src_port; bit<16> dst_port; bit<16> length; bit<16> checksum; }
header dta_base_h { bit<8> opcode; bit<1> immediate; bit<1> sequenced; bit<6> reserved; }
header dta_kw_h { bit<8> redundancy; bit<32> key; }
header dta_append_h { bit<32> list; }
header dta_data_h { bit<32> data; }

const bit<8> MIRROR_REPORT = 1;
// The mirrored copy: what the report needs, nothing of the original packet.
header mirror_h { bit<8> kind; bit<8> opcode; bit<8> redundancy; bit<8> collector; bit<32> key; bit<32> data; }

// Bridged ahead of every forwarded packet, so egress tells it from a
// mirrored copy by the first byte.
header bridge_h { bit<8> kind; }

struct headers_t {
    bridge_h bridge; mirror_h mirror;
    ethernet_h ethernet; ipv4_h ipv4; ports_h ports;
    udp_h udp; dta_base_h dta; dta_kw_h kw; dta_append_h append; dta_data_h data;
}
struct ig_meta_t {}
struct eg_meta_t {
    bit<32> threshold;
    bit<32> excess;
    bit<8> kind;
    bit<32> flow; bit<8> crc8; bit<8> opcode; bit<8> redundancy; bit<8> collector;
    bit<32> key; bit<32> data; MirrorId_t session;
    bit<32> depth; bit<32> port;
}

parser IgParser(packet_in pkt, out headers_t h, out ig_meta_t m,
                out ingress_intrinsic_metadata_t ig_md) {
    state start {
        pkt.extract(ig_md);
        pkt.advance(PORT_METADATA_SIZE);
        pkt.extract(h.ethernet);
        transition select(h.ethernet.ether_type) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 { pkt.extract(h.ipv4); transition accept; }
}

control Ingress(inout headers_t h, inout ig_meta_t m,
                in ingress_intrinsic_metadata_t ig_md,
                in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    action forward(PortId_t port) { ig_tm_md.ucast_egress_port = port; }
    action drop() { ig_dprsr_md.drop_ctl = 1; }
    table route {
        key = { h.ipv4.dst: lpm; }
        actions = { forward; drop; }
        default_action = drop();
        size = 4096;
    }
    apply {
        if (h.ipv4.isValid()) { route.apply(); } else { drop(); }
        h.bridge.setValid(); h.bridge.kind = 0;
    }
}

control IgDeparser(packet_out pkt, inout headers_t h, in ig_meta_t m,
                   in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply { pkt.emit(h.bridge); pkt.emit(h.ethernet); pkt.emit(h.ipv4); }
}

parser EgParser(packet_in pkt, out headers_t h, out eg_meta_t m,
                out egress_intrinsic_metadata_t eg_md) {
    state start {
        pkt.extract(eg_md);
        transition select(pkt.lookahead<bit<8>>()) {
            MIRROR_REPORT: report;
            default: packet;
        }
    }
    state report { pkt.extract(h.mirror); transition accept; }
    state packet {
        pkt.extract(h.bridge);
        pkt.extract(h.ethernet);
        transition select(h.ethernet.ether_type) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 {
        pkt.extract(h.ipv4);
        transition select(h.ipv4.ihl, h.ipv4.frag_offset, h.ipv4.protocol) {
            (5, 0, 6): ports;
            (5, 0, 17): ports;
            default: accept;
        }
    }
    state ports { pkt.extract(h.ports); transition accept; }
}

control Egress(inout headers_t h, inout eg_meta_t m,
               in egress_intrinsic_metadata_t eg_md,
               in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
               inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    // Flow key: CRC32 over the 5-tuple (ports 0 when not TCP or UDP: an
    // invalid header's fields hold whatever its containers last held).
    Hash<bit<32>>(HashAlgorithm_t.CRC32) flow_key;
    bit<16> sport = 0;
    bit<16> dport = 0;
    // Collector choice: CRC8(be32(key)), section 4.
    Hash<bit<8>>(HashAlgorithm_t.CRC8) collector_choice;
    bool watched = false;

    action watch(bit<8> redundancy, bit<32> id) {
        watched = true; m.redundancy = redundancy; m.data = id;
    }
    // Flows whose path is reported with Key-Write, and their redundancy N.
    table watched_flows {
        key = { h.ipv4.src: ternary; h.ipv4.dst: ternary; h.ipv4.protocol: ternary; }
        actions = { watch; NoAction; }
        default_action = NoAction;
        size = 512;
    }
    // qdepth > depth as a saturating subtract: Tofino compares a field with
    // a constant, not with another field.
    action set_threshold(bit<32> depth) { m.threshold = depth; }
    action intrinsics() { m.depth = 13w0 ++ eg_md.enq_qdepth; m.port = 23w0 ++ eg_md.egress_port; }
    action excess() { m.excess = m.depth |-| m.threshold; }
    // Queue depth (cells) above which a packet reports an Append event.
    table queue_events {
        key = { eg_md.egress_port: exact; }
        actions = { set_threshold; }
        default_action = set_threshold(0x7FFFF); // no events
        size = 512;
    }
    action choose(bit<8> collector, MirrorId_t session) { m.collector = collector; m.session = session; }
    // table[CRC8(be32(key))]: 256 entries.
    table collector_of {
        key = { m.crc8: exact; }
        actions = { choose; NoAction; }
        default_action = NoAction;
        size = 256;
    }
    action collector_addr(bit<48> src_mac, bit<48> dst_mac, bit<32> src_ip, bit<32> dst_ip, bit<16> src_port) {
        h.ethernet.setValid(); h.ethernet.src = src_mac; h.ethernet.dst = dst_mac; h.ethernet.ether_type = 0x0800;
        h.ipv4.setValid(); h.ipv4.src = src_ip; h.ipv4.dst = dst_ip;
        h.udp.setValid(); h.udp.src_port = src_port;
    }
    // A mirrored copy whose collector has no addresses is dropped and
    // counted: without them it would leave as a report with no Ethernet or
    // IPv4 header.
    Counter<bit<32>, bit<1>>(1, CounterType_t.PACKETS) unrouted;
    action drop_unrouted() { eg_dprsr_md.drop_ctl = 1; unrouted.count(0); }
    table collectors {
        key = { h.mirror.collector: exact; }
        actions = { collector_addr; @defaultonly drop_unrouted; }
        const default_action = drop_unrouted();
        size = 256;
    }
    action report() {
        h.ipv4.version = 4; h.ipv4.ihl = 5; h.ipv4.tos = 0; h.ipv4.identification = 0;
        h.ipv4.flags = 2; h.ipv4.frag_offset = 0; h.ipv4.ttl = 64; h.ipv4.protocol = 17;
        h.udp.dst_port = DTA_REPORT_PORT; h.udp.checksum = 0;
        h.dta.setValid(); h.dta.opcode = h.mirror.opcode;
        h.dta.immediate = 0; h.dta.sequenced = 0; h.dta.reserved = 0;
        h.data.setValid(); h.data.data = h.mirror.data;
    }
    action key_write() {
        h.ipv4.total_len = 20 + 8 + 2 + 5 + 4; h.udp.length = 8 + 2 + 5 + 4;
        h.kw.setValid(); h.kw.redundancy = h.mirror.redundancy; h.kw.key = h.mirror.key;
    }
    action append() {
        h.ipv4.total_len = 20 + 8 + 2 + 4 + 4; h.udp.length = 8 + 2 + 4 + 4;
        h.append.setValid(); h.append.list = h.mirror.key;
    }

    action queue_event() {
        m.opcode = DTA_OP_APPEND;
        m.key = m.port;
        m.data = m.depth;
    }
    action path_report() {
        m.opcode = DTA_OP_KEY_WRITE;
        m.key = flow_key.get({h.ipv4.src, h.ipv4.dst, h.ipv4.protocol, sport, dport});
    }

    apply {
        if (h.mirror.isValid()) {
            // The mirrored copy becomes the report.
            if (collectors.apply().hit) {
                report();
                if (h.mirror.opcode == DTA_OP_KEY_WRITE) { key_write(); } else { append(); }
            }
            h.mirror.setInvalid();
        } else if (h.ipv4.isValid()) {
            intrinsics();
            queue_events.apply();
            excess();
            if (m.excess != 0) {
                queue_event();
            } else {
                watched_flows.apply();
                if (h.ports.isValid()) { sport = h.ports.src; dport = h.ports.dst; }
                if (watched) {
                    path_report();
                }
            }
            if (m.opcode != 0) {
                m.crc8 = collector_choice.get({m.key});
                collector_of.apply();
                if (m.session != 0) {
                    m.kind = MIRROR_REPORT;
                    eg_dprsr_md.mirror_type = 1;
                }
            }
        }
    }
}

control EgDeparser(packet_out pkt, inout headers_t h, in eg_meta_t m,
                   in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_csum;
    Mirror() mirror;
    apply {
        if (eg_dprsr_md.mirror_type == 1) {
            mirror.emit<mirror_h>(m.session, {m.kind, m.opcode, m.redundancy, m.collector, m.key, m.data});
        }
        if (h.udp.isValid()) {
            h.ipv4.checksum = ipv4_csum.update({
                h.ipv4.version, h.ipv4.ihl, h.ipv4.tos, h.ipv4.total_len,
                h.ipv4.identification, h.ipv4.flags, h.ipv4.frag_offset,
                h.ipv4.ttl, h.ipv4.protocol, h.ipv4.src, h.ipv4.dst});
        }
        pkt.emit(h.ethernet); pkt.emit(h.ipv4); pkt.emit(h.ports);
        pkt.emit(h.udp); pkt.emit(h.dta); pkt.emit(h.kw); pkt.emit(h.append); pkt.emit(h.data);
    }
}

Pipeline(IgParser(), Ingress(), IgDeparser(), EgParser(), Egress(), EgDeparser()) pipe;
Switch(pipe) main;
