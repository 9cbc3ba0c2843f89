package main

import (
	"encoding/hex"
	"fmt"
	"net/netip"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// The RoCEv2 and CM printers. Numbers keep the units of the wire: QPNs,
// keys, addresses and IDs in hex strings, counts and lengths as numbers.

func hex32(v uint32) string { return fmt.Sprintf("%#x", v) }
func hex64(v uint64) string { return fmt.Sprintf("%#x", v) }

func ipv6Fields(l gopacket.Layer) object {
	ip := l.(*layers.IPv6)
	return object{{"src", ip.SrcIP.String()}, {"dst", ip.DstIP.String()}, {"hop_limit", ip.HopLimit},
		{"traffic_class", ip.TrafficClass}, {"flow_label", ip.FlowLabel}, {"length", ip.Length}}
}

// emptyRoCEv2Datagram reports whether p is a UDP datagram with no payload
// to the RoCEv2 port.
func emptyRoCEv2Datagram(p gopacket.Packet) bool {
	udp, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	return ok && len(udp.Payload) == 0 && udp.DstPort == rocev2.UDPPort
}

func bthFields(l gopacket.Layer) object {
	b := l.(*rocev2.BTHLayer)
	return object{
		{"opcode", b.Opcode.String()},
		{"opcode_value", uint8(b.Opcode)},
		{"solicited", b.Solicited},
		{"mig_req", b.MigReq},
		{"pad_count", b.PadCount},
		{"version", b.Version},
		{"pkey", fmt.Sprintf("%#04x", b.PKey)},
		{"fecn", b.FECN},
		{"becn", b.BECN},
		{"dest_qp", hex32(b.DestQP)},
		{"ack_req", b.AckReq},
		{"psn", uint32(b.PSN)},
		{"icrc", fmt.Sprintf("%#08x", b.ICRC)},
	}
}

// roceTrailer returns the payload of a RoCEv2 packet (not of a CM MAD,
// printed as its own field) and whether its ICRC verifies.
func roceTrailer(p gopacket.Packet) object {
	var o object
	if app := p.ApplicationLayer(); app != nil {
		o = append(o, field{"payload", hex.EncodeToString(app.Payload())})
	}
	o = append(o, field{"icrc_valid", icrcValid(p)})
	return o
}

// icrcValid reports whether the ICRC of RoCEv2 packet p is right. The IP
// packet is the Ethernet payload cut to the IP length (dropping padding).
func icrcValid(p gopacket.Packet) bool {
	eth, ok := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if !ok {
		return false
	}
	n := 0
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		n = int(ip.Length)
	case *layers.IPv6:
		n = 40 + int(ip.Length)
	}
	if n == 0 || n > len(eth.Payload) {
		return false
	}
	return rocev2.VerifyICRC(eth.Payload[:n]) == nil
}

func rethFields(l gopacket.Layer) object {
	r := l.(*rocev2.RETHLayer)
	return object{{"va", hex64(r.VA)}, {"rkey", hex32(r.RKey)}, {"dma_length", r.DMALength}}
}

func atomicETHFields(l gopacket.Layer) object {
	a := l.(*rocev2.AtomicETHLayer)
	return object{{"va", hex64(a.VA)}, {"rkey", hex32(a.RKey)}, {"swap_add", a.SwapAddData}, {"compare", a.CompareData}}
}

func aethFields(l gopacket.Layer) object {
	a := l.(*rocev2.AETHLayer)
	kind := "reserved"
	switch {
	case a.Syndrome.IsACK():
		kind = "ack"
	case a.Syndrome.IsRNRNAK():
		kind = "rnr_nak"
	case a.Syndrome.IsNAK():
		kind = "nak"
	}
	return object{{"syndrome", fmt.Sprintf("%#02x", uint8(a.Syndrome))}, {"kind", kind}, {"value", a.Syndrome.Value()}, {"msn", a.MSN}}
}

func atomicAckETHFields(l gopacket.Layer) object {
	return object{{"orig_remote_data", l.(*rocev2.AtomicAckETHLayer).OrigRemoteData}}
}

func immDtFields(l gopacket.Layer) object {
	return object{{"data", hex32(l.(*rocev2.ImmDtLayer).Data)}}
}

func dethFields(l gopacket.Layer) object {
	d := l.(*rocev2.DETHLayer)
	return object{{"qkey", hex32(d.QKey)}, {"src_qp", hex32(d.SrcQP)}}
}

func iethFields(l gopacket.Layer) object {
	return object{{"rkey", hex32(l.(*rocev2.IETHLayer).RKey)}}
}

// trimmed returns b in hex without its trailing zero bytes: private data
// is mostly zeros.
func trimmed(b []byte) string {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return hex.EncodeToString(b[:n])
}

func gid(g [16]byte) string { return netip.AddrFrom16(g).Unmap().String() }

// madFields shows a CM MAD: the header fields that vary, then the message.
// Private data is in hex without trailing zero bytes.
func madFields(l gopacket.Layer) object {
	m := l.(*cm.MADLayer)
	o := object{
		{"attribute", m.Header.AttrID.String()},
		{"transaction_id", hex64(m.Header.TransactionID)},
		{"status", m.Header.Status},
		{"attribute_modifier", hex32(m.Header.AttrModifier)},
	}
	switch msg := m.Message.(type) {
	case *cm.ConnectRequest:
		o = append(o,
			field{"local_comm_id", hex32(msg.LocalCommID)}, field{"service_id", hex64(msg.ServiceID)},
			field{"local_ca_guid", hex64(msg.LocalCAGUID)}, field{"local_qkey", hex32(msg.LocalQKey)},
			field{"local_qpn", hex32(msg.LocalQPN)}, field{"responder_resources", msg.ResponderResources},
			field{"initiator_depth", msg.InitiatorDepth}, field{"transport_type", msg.TransportType},
			field{"starting_psn", msg.StartingPSN}, field{"pkey", fmt.Sprintf("%#04x", msg.PKey)},
			field{"path_mtu", msg.PathMTU}, field{"retry_count", msg.RetryCount},
			field{"rnr_retry_count", msg.RNRRetryCount}, field{"max_cm_retries", msg.MaxCMRetries},
			field{"primary_path", object{
				{"local_gid", gid(msg.Primary.LocalGID)}, {"remote_gid", gid(msg.Primary.RemoteGID)},
				{"remote_lid", fmt.Sprintf("%#04x", msg.Primary.RemoteLID)}, {"hop_limit", msg.Primary.HopLimit},
				{"traffic_class", msg.Primary.TrafficClass}, {"flow_label", msg.Primary.FlowLabel},
				{"sl", msg.Primary.SL}, {"local_ack_timeout", msg.Primary.LocalACKTimeout},
			}})
		if h, err := cm.DecodeIPHeader(msg.PrivateData[:]); err == nil {
			o = append(o, field{"ip_cm", object{{"src", h.Src.String()}, {"src_port", h.SrcPort}, {"dst", h.Dst.String()}}},
				field{"private_data", trimmed(msg.PrivateData[cm.IPHeaderLen:])})
		} else {
			o = append(o, field{"private_data", trimmed(msg.PrivateData[:])})
		}
	case *cm.ConnectReply:
		o = append(o,
			field{"local_comm_id", hex32(msg.LocalCommID)}, field{"remote_comm_id", hex32(msg.RemoteCommID)},
			field{"local_qkey", hex32(msg.LocalQKey)}, field{"local_qpn", hex32(msg.LocalQPN)},
			field{"starting_psn", msg.StartingPSN}, field{"responder_resources", msg.ResponderResources},
			field{"initiator_depth", msg.InitiatorDepth}, field{"target_ack_delay", msg.TargetACKDelay},
			field{"rnr_retry_count", msg.RNRRetryCount}, field{"srq", msg.SRQ},
			field{"local_ca_guid", hex64(msg.LocalCAGUID)}, field{"private_data", trimmed(msg.PrivateData[:])})
	case *cm.ReadyToUse:
		o = append(o, field{"local_comm_id", hex32(msg.LocalCommID)}, field{"remote_comm_id", hex32(msg.RemoteCommID)},
			field{"private_data", trimmed(msg.PrivateData[:])})
	case *cm.Reject:
		n := min(int(msg.InfoLength), len(msg.ARI))
		o = append(o, field{"local_comm_id", hex32(msg.LocalCommID)}, field{"remote_comm_id", hex32(msg.RemoteCommID)},
			field{"message_rejected", msg.MessageRejected}, field{"reason", msg.Reason},
			field{"ari", hex.EncodeToString(msg.ARI[:n])}, field{"private_data", trimmed(msg.PrivateData[:])})
	case *cm.DisconnectRequest:
		o = append(o, field{"local_comm_id", hex32(msg.LocalCommID)}, field{"remote_comm_id", hex32(msg.RemoteCommID)},
			field{"remote_qpn", hex32(msg.RemoteQPN)}, field{"private_data", trimmed(msg.PrivateData[:])})
	case *cm.DisconnectReply:
		o = append(o, field{"local_comm_id", hex32(msg.LocalCommID)}, field{"remote_comm_id", hex32(msg.RemoteCommID)},
			field{"private_data", trimmed(msg.PrivateData[:])})
	}
	return o
}
