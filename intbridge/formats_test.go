package intbridge

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/inband"
)

const intDSCP = 0x17

// tcpINTPacket is a packet of tcpFlow carrying INT-MD over TCP (the shim
// right after the TCP header, DSCP intDSCP marking it), as it reaches the
// sink after the nodes of path (source first) pushed node ID and queue.
func tcpINTPacket(t testing.TB, path []uint32, ttl uint8) []byte {
	md := &inband.INT{Type: inband.TypeMD, Field: 0, Version: 2, HopML: 2, RemainingHopCount: 8, Instructions: 0x9000}
	for i := len(path) - 1; i >= 0; i-- {
		md.AppendHop(&inband.Metadata{Present: 0x9000, NodeID: path[i], QueueID: uint8(i), QueueOccupancy: 100 * path[i]})
	}
	ip := ipv4(ttl, layers.IPProtocolTCP)
	ip.TOS = intDSCP << 2
	tcp := &layers.TCP{SrcPort: 1000, DstPort: 80, DataOffset: 5, ACK: true}
	tcp.SetNetworkLayerForChecksum(ip)
	return ser(t, ip, tcp, md)
}

func pathOf(t *testing.T, r dta.Report) []uint32 {
	t.Helper()
	var p []uint32
	for i := 0; i < len(r.KeyWrite.Data); i += 4 {
		p = append(p, binary.BigEndian.Uint32(r.KeyWrite.Data[i:]))
	}
	return p
}

func only(t *testing.T, out []dta.Report, op dta.Opcode) []dta.Report {
	t.Helper()
	var rs []dta.Report
	for _, r := range out {
		if err := r.Validate(); err != nil {
			t.Fatalf("invalid DTA report %+v: %v", r, err)
		}
		if r.Header.Opcode == op {
			rs = append(rs, r)
		}
	}
	return rs
}

// TestINTOverTCP: a sink's report of a 5-hop TCP flow whose INT-MD rides
// over TCP (DSCP-marked) is a path trace: a Key-Write of the five node IDs
// and a Trace, not a postcard. (The bridge looked for INT over UDP only and
// made it a Postcard "hop 3, value the sink".)
func TestINTOverTCP(t *testing.T) {
	b, err := New(Config{INTDSCP: intDSCP, INTDSCPMask: 0x3F})
	if err != nil {
		t.Fatal(err)
	}
	path := []uint32{1, 2, 3, 4, 5}
	ind := inband.Individual{RepType: inband.RepINT, InType: inband.InIPv4, Tracked: true, RepMdBits: 0x1000, Inner: tcpINTPacket(t, path, 62)}
	ind.SetMetadata(&inband.Metadata{Present: 0x1000, QueueID: 1, QueueOccupancy: 600})
	out, err := b.Handle(encode(t, &inband.Report{NodeID: 6, Individuals: []inband.Individual{ind}}))
	if err != nil {
		t.Fatal(err)
	}
	kw, pc := only(t, out, dta.OpKeyWrite), only(t, out, dta.OpPostcard)
	if len(kw) != 1 || len(pc) != 0 || !slices.Equal(pathOf(t, kw[0]), path) || kw[0].KeyWrite.Key != inband.FlowKey(tcpFlow) {
		t.Fatalf("%d path writes (%v), %d postcards %+v", len(kw), kw, len(pc), pc)
	}
	tr := b.Traces()
	if len(tr) != 1 || tr[0].Flow != tcpFlow || len(tr[0].Hops) != 5 || tr[0].Node != 6 {
		t.Fatalf("traces %+v", tr)
	}
	for i, h := range tr[0].Hops {
		if h.NodeID != path[i] || h.QueueOccupancy != 100*path[i] || !h.Has(inband.BitQueue) {
			t.Fatalf("hop %d: %+v", i, h)
		}
	}
	// The sink's own metadata, its node ID from the group header.
	if s := tr[0].Sink; s.NodeID != 6 || s.QueueOccupancy != 600 || !s.Has(inband.BitNodeID) || !s.Has(inband.BitQueue) {
		t.Fatalf("sink %+v", s)
	}
	// Unmarked, the same report is a per-hop report of its sink.
	u, _ := New(Config{})
	out, _ = u.Handle(encode(t, &inband.Report{NodeID: 6, Individuals: []inband.Individual{ind}}))
	if len(only(t, out, dta.OpKeyWrite)) != 0 || len(u.HopReports()) != 1 || len(u.Records(t0)) != 1 || !u.Records(t0)[0].PerHop {
		t.Fatalf("unmarked: %+v", out)
	}
}

// TestLongPath: a path longer than PathHops keeps the hops nearest the
// source, source first, and is counted; the Trace keeps every hop. (The
// bridge wrote the hops nearest the sink, [3 4 5 6 7].)
func TestLongPath(t *testing.T) {
	b, _ := New(Config{INTPort: intPort})
	path := []uint32{1, 2, 3, 4, 5, 6, 7}
	out, err := b.Handle(encode(t, &inband.Report{NodeID: 8, Individuals: []inband.Individual{{RepType: inband.RepInnerOnly, InType: inband.InEthernet, Inner: mdPacket(t, path)}}}))
	if err != nil {
		t.Fatal(err)
	}
	kw := only(t, out, dta.OpKeyWrite)
	if len(kw) != 1 || !slices.Equal(pathOf(t, kw[0]), []uint32{1, 2, 3, 4, 5}) || b.Counters().PathTruncated != 1 {
		t.Fatalf("path %v, counters %+v", pathOf(t, kw[0]), b.Counters())
	}
	if tr := b.Traces(); len(tr) != 1 || len(tr[0].Hops) != 7 || tr[0].Hops[6].NodeID != 7 {
		t.Fatalf("trace %+v", tr)
	}
	// A short path is zero-padded and not counted.
	b.Handle(encode(t, &inband.Report{NodeID: 8, Individuals: []inband.Individual{{RepType: inband.RepInnerOnly, InType: inband.InEthernet, Inner: mdPacket(t, path[:2])}}}))
	if b.Counters().PathTruncated != 1 {
		t.Fatalf("counters %+v", b.Counters())
	}
}

// TestPerHopMetadata: per-hop reports of every version hand their ports,
// queue, latency and timestamps to analytics as HopReports, and become
// postcards of the reporting node.
func TestPerHopMetadata(t *testing.T) {
	for name, pkt := range perHopPackets(t) {
		b, _ := New(Config{})
		out, err := b.Handle(pkt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		hr := b.HopReports()
		if len(hr) != 1 {
			t.Fatalf("%s: %d hop reports", name, len(hr))
		}
		checkPerHopReport(t, name, &hr[0])
		pc := only(t, out, dta.OpPostcard)
		ap := only(t, out, dta.OpAppend)
		if len(pc) != 1 || pc[0].Postcard.Hop != 2 || pc[0].Postcard.Value != 9 || len(ap) != 1 || binary.BigEndian.Uint32(ap[0].Append.Data[8:]) != 2<<24|250 {
			t.Fatalf("%s: postcards %+v, appends %+v", name, pc, ap)
		}
	}
}

// perHopPackets are TestPerHopMetadata's per-hop reports by version: node
// 9's ports 3 and 4, hop latency 700 (not in 0.5's), queue 2 at 250 and
// egress timestamp 123, a congested TCP packet at its second hop.
func perHopPackets(t *testing.T) map[string][]byte {
	tcp := &layers.TCP{SrcPort: 1000, DstPort: 80, DataOffset: 5}
	ip := ipv4(63, layers.IPProtocolTCP)
	tcp.SetNetworkLayerForChecksum(ip)
	inner := ser(t, ip, tcp)
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	innerEth := ser(t, eth, ip, tcp)

	want := inband.Metadata{Present: 0xF400, NodeID: 9, L1Ingress: 3, L1Egress: 4, HopLatency: 700, QueueID: 2, QueueOccupancy: 250, EgressTimestamp: 123}
	// 2.0 (INT-XD): ports, hop latency, queue, egress timestamp.
	v2 := inband.Individual{RepType: inband.RepINT, InType: inband.InIPv4, Congested: true, RepMdBits: 0x7400, Inner: inner}
	v2.SetMetadata(&inband.Metadata{Present: 0x7400, L1Ingress: 3, L1Egress: 4, HopLatency: 700, QueueID: 2, QueueOccupancy: 250, EgressTimestamp: 123})
	// 1.0: ports, hop latency, queue, egress timestamp (RepMdBits 0x3C).
	v1 := inband.Report{Format: inband.FormatV1, NodeID: 9, IngressTimestamp: 55, Individuals: []inband.Individual{{NProto: inband.NProtoIPv4, RepMdBits: 0x3C, Congested: true, Inner: inner}}}
	if err := v1.SetLocalMetadata(&want); err != nil {
		t.Fatal(err)
	}
	// 0.5: a switch local report header (no hop latency in it).
	v05 := inband.Report{Format: inband.FormatV05, IngressTimestamp: 55, Individuals: []inband.Individual{{NProto: inband.NProtoLocal, Congested: true, Inner: innerEth}}}
	if err := v05.SetLocalMetadata(&want); err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"2.0": encode(t, &inband.Report{NodeID: 9, Individuals: []inband.Individual{v2}}),
		"1.0": encode(t, &v1),
		"0.5": encode(t, &v05),
	}
}

// checkPerHopReport checks the hop report of perHopPackets' version name.
func checkPerHopReport(t *testing.T, name string, hr *HopReport) {
	t.Helper()
	m := hr.Meta
	if hr.Flow != tcpFlow || hr.Hop != 2 || !hr.Congested || m.NodeID != 9 || m.L1Ingress != 3 || m.L1Egress != 4 || m.QueueID != 2 || m.QueueOccupancy != 250 ||
		m.EgressTimestamp != 123 || !m.Has(inband.BitNodeID) || !m.Has(inband.BitL1Ports) || !m.Has(inband.BitQueue) || !m.Has(inband.BitEgressTS) ||
		name != "0.5" && m.HopLatency != 700 || name != "2.0" && m.IngressTimestamp != 55 {
		t.Fatalf("%s: hop report %+v", name, *hr)
	}
}

// TestLegacySinkReports: INTCollector's frames (a 0.5 report under
// version 1 whose inner UDP packet carries INT 0.5, found with
// INTAfterL4) and a 1.0 report of INT 1.0 over TCP (DSCP-marked) are path
// traces.
func TestLegacySinkReports(t *testing.T) {
	// INT 0.5: switch IDs 10, 11, 12 (the top of the stack is 10, as
	// INTCollector lists them), one word a hop.
	in05 := &inband.INT{Legacy: true, Type: inband.TypeMD, HopML: 1, MaxHopCount: 8, Instructions: 0x8000, TailProto: 17, TailPort: 5000, TailDSCP: 14}
	for _, id := range []uint32{10, 11, 12} {
		in05.AppendHop(&inband.Metadata{Present: 0x8000, NodeID: id})
	}
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	ip := ipv4(64, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 5000, DstPort: 5000}
	u.SetNetworkLayerForChecksum(ip)
	r05 := inband.Report{Format: inband.FormatV05, Version: 1, IngressTimestamp: 1524138290,
		Individuals: []inband.Individual{{NProto: inband.NProtoEthernet, Tracked: true, Inner: ser(t, eth, ip, u, in05)}}}
	udpFlow := inband.FiveTuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 17, SrcPort: 5000, DstPort: 5000}

	// INT 1.0 over TCP: node IDs 21, 22 (source 21).
	in1 := &inband.INT{Legacy: true, Type: inband.TypeMD, Version: 1, HopML: 1, RemainingHopCount: 6, Instructions: 0x8000, Field: intDSCP}
	for _, id := range []uint32{22, 21} {
		in1.AppendHop(&inband.Metadata{Present: 0x8000, NodeID: id})
	}
	ip6 := ipv4(62, layers.IPProtocolTCP)
	ip6.TOS = intDSCP << 2
	tcp := &layers.TCP{SrcPort: 1000, DstPort: 80, DataOffset: 5}
	tcp.SetNetworkLayerForChecksum(ip6)
	r1 := inband.Report{Format: inband.FormatV1, NodeID: 23, Individuals: []inband.Individual{{NProto: inband.NProtoIPv4, Tracked: true, Inner: ser(t, ip6, tcp, in1)}}}

	for _, c := range []struct {
		name string
		cfg  Config
		pkt  []byte
		flow inband.FiveTuple
		path []uint32
	}{
		{"0.5", Config{INTAfterL4: true}, encode(t, &r05), udpFlow, []uint32{12, 11, 10}},
		{"1.0", Config{INTDSCP: intDSCP, INTDSCPMask: 0x3F}, encode(t, &r1), tcpFlow, []uint32{21, 22}},
	} {
		b, _ := New(c.cfg)
		out, err := b.Handle(c.pkt)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		kw := only(t, out, dta.OpKeyWrite)
		if len(kw) != 1 || kw[0].KeyWrite.Key != inband.FlowKey(c.flow) || !slices.Equal(pathOf(t, kw[0])[:len(c.path)], c.path) || len(only(t, out, dta.OpPostcard)) != 0 {
			t.Fatalf("%s: path writes %+v", c.name, kw)
		}
		if tr := b.Traces(); len(tr) != 1 || tr[0].Flow != c.flow || len(tr[0].Hops) != len(c.path) {
			t.Fatalf("%s: traces %+v", c.name, tr)
		}
	}
}

// TestHandlePacket: the bridge as INT sink on raw data packets.
func TestHandlePacket(t *testing.T) {
	b, _ := New(Config{INTPort: intPort, INTDSCP: intDSCP, INTDSCPMask: 0x3F, SinkNode: 99})
	for name, c := range map[string]struct {
		frame []byte
		first gopacket.LayerType
	}{
		"udp": {mdPacket(t, []uint32{1, 2, 3}), layers.LayerTypeEthernet},
		"tcp": {tcpINTPacket(t, []uint32{1, 2, 3}, 61), layers.LayerTypeIPv4},
	} {
		out, err := b.HandlePacket(c.frame, c.first)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		kw, inc := only(t, out, dta.OpKeyWrite), only(t, out, dta.OpKeyIncrement)
		if len(out) != 2 || len(kw) != 1 || len(inc) != 1 || !slices.Equal(pathOf(t, kw[0]), []uint32{1, 2, 3, 0, 0}) || kw[0].KeyWrite.Key != inband.FlowKey(tcpFlow) {
			t.Fatalf("%s: %+v", name, out)
		}
		if tr := b.Traces(); len(tr) != 1 || tr[0].Node != 99 || tr[0].Flow != tcpFlow || len(tr[0].Hops) != 3 {
			t.Fatalf("%s: traces %+v", name, tr)
		}
	}
	// A packet without INT: counted, nothing made.
	ip := ipv4(64, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 1, DstPort: 53}
	u.SetNetworkLayerForChecksum(ip)
	if out, err := b.HandlePacket(ser(t, ip, u, gopacket.Payload("dns!")), layers.LayerTypeIPv4); err != nil || len(out) != 0 || b.Counters().NoINT != 1 {
		t.Fatalf("no INT: %v %+v %+v", err, out, b.Counters())
	}
	if _, err := b.HandlePacket(nil, layers.LayerTypeUDP); err == nil {
		t.Fatal("a UDP first layer was accepted")
	}
}

// BenchmarkBridgeVersions: one report of each kind through the bridge,
// decode included: 2.0 INT-MD sink reports (3 hops over UDP, 5 over TCP),
// a 2.0 per-hop report, a 1.0 report of INT 1.0 over TCP and INTCollector's
// 0.5 frame of INT 0.5 over UDP; and a raw INT packet (HandlePacket).
func BenchmarkBridgeVersions(b *testing.B) {
	sink := inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, RepMdBits: 0x1000, Inner: mdPacket(b, []uint32{11, 22, 33})}
	sink.SetMetadata(&inband.Metadata{Present: 0x1000, QueueOccupancy: 7})
	tcp := inband.Individual{RepType: inband.RepINT, InType: inband.InIPv4, RepMdBits: 0x1000, Inner: tcpINTPacket(b, []uint32{1, 2, 3, 4, 5}, 59)}
	tcp.SetMetadata(&inband.Metadata{Present: 0x1000, QueueOccupancy: 7})
	ip := ipv4(62, layers.IPProtocolTCP)
	th := &layers.TCP{SrcPort: 1000, DstPort: 80, DataOffset: 5}
	th.SetNetworkLayerForChecksum(ip)
	xd := inband.Individual{RepType: inband.RepINT, InType: inband.InIPv4, RepMdBits: 0x7000, Inner: ser(b, ip, th)}
	xd.SetMetadata(&inband.Metadata{Present: 0x7000, L1Ingress: 1, L1Egress: 2, HopLatency: 3, QueueOccupancy: 4})
	in1 := &inband.INT{Legacy: true, Type: inband.TypeMD, Version: 1, HopML: 1, RemainingHopCount: 6, Instructions: 0x8000}
	in05 := &inband.INT{Legacy: true, Type: inband.TypeMD, HopML: 1, MaxHopCount: 8, Instructions: 0x8000, TailProto: 17, TailPort: 5000}
	for _, id := range []uint32{3, 2, 1} {
		in1.AppendHop(&inband.Metadata{Present: 0x8000, NodeID: id})
		in05.AppendHop(&inband.Metadata{Present: 0x8000, NodeID: id})
	}
	ip1 := ipv4(62, layers.IPProtocolTCP)
	ip1.TOS = intDSCP << 2
	th.SetNetworkLayerForChecksum(ip1)
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	ip05 := ipv4(64, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 5000, DstPort: 5000}
	u.SetNetworkLayerForChecksum(ip05)
	v1 := inband.Report{Format: inband.FormatV1, NodeID: 4, Individuals: []inband.Individual{{NProto: inband.NProtoIPv4, Inner: ser(b, ip1, th, in1)}}}
	v05 := inband.Report{Format: inband.FormatV05, Version: 1, Individuals: []inband.Individual{{Tracked: true, Inner: ser(b, eth, ip05, u, in05)}}}
	cfg := Config{INTPort: intPort, INTDSCP: intDSCP, INTDSCPMask: 0x3F}
	for _, c := range []struct {
		name string
		cfg  Config
		pkt  []byte
	}{
		{"2.0-md-udp-3hops", cfg, encode(b, &inband.Report{NodeID: 7, Individuals: []inband.Individual{sink}})},
		{"2.0-md-tcp-5hops", cfg, encode(b, &inband.Report{NodeID: 7, Individuals: []inband.Individual{tcp}})},
		{"2.0-perhop", cfg, encode(b, &inband.Report{NodeID: 7, Individuals: []inband.Individual{xd}})},
		{"1.0-md-tcp-3hops", cfg, encode(b, &v1)},
		{"0.5-md-udp-3hops", Config{INTAfterL4: true}, encode(b, &v05)},
	} {
		b.Run(c.name, func(b *testing.B) {
			br, _ := New(c.cfg)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := br.Handle(c.pkt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("raw-tcp-5hops", func(b *testing.B) {
		br, _ := New(cfg)
		frame := tcpINTPacket(b, []uint32{1, 2, 3, 4, 5}, 59)
		b.ReportAllocs()
		for b.Loop() {
			br.HandlePacket(frame, layers.LayerTypeIPv4)
		}
	})
}

func TestBridgeVersionsAllocs(t *testing.T) {
	b, _ := New(Config{INTDSCP: intDSCP, INTDSCPMask: 0x3F})
	pkt := encode(t, &inband.Report{Format: inband.FormatV1, NodeID: 4, Individuals: []inband.Individual{{NProto: inband.NProtoIPv4, Inner: tcpINTPacket(t, []uint32{1, 2, 3}, 60)}}})
	frame := tcpINTPacket(t, []uint32{1, 2, 3, 4, 5}, 59)
	b.Handle(pkt)
	b.HandlePacket(frame, layers.LayerTypeIPv4)
	if a := testing.AllocsPerRun(100, func() {
		b.Handle(pkt)
		b.HandlePacket(frame, layers.LayerTypeIPv4)
	}); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

// TestIntermediateReport: a transit node's intermediate report (I) of an
// INT-MD stack is a Trace, and does not overwrite the flow's path with the
// hops so far.
func TestIntermediateReport(t *testing.T) {
	b, _ := New(Config{INTPort: intPort})
	ind := inband.Individual{RepType: inband.RepInnerOnly, InType: inband.InEthernet, Intermediate: true, Inner: mdPacket(t, []uint32{1, 2})}
	out, err := b.Handle(encode(t, &inband.Report{NodeID: 2, Individuals: []inband.Individual{ind}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(only(t, out, dta.OpKeyWrite)) != 0 || len(only(t, out, dta.OpKeyIncrement)) != 1 || len(b.Traces()) != 1 || len(b.Traces()[0].Hops) != 2 {
		t.Fatalf("%+v, traces %+v", out, b.Traces())
	}
}

// TestInnerHeaders: the bridge's own parser of inner packets reads a
// VLAN-tagged Ethernet frame and IPv6, and takes no L4 header from a later
// IPv4 fragment.
func TestInnerHeaders(t *testing.T) {
	md := &inband.INT{Type: inband.TypeMD, NPT: inband.NPTL4Header, Field: 6, Version: 2, HopML: 1, RemainingHopCount: 8, Instructions: 0x8000}
	for _, id := range []uint32{3, 2, 1} {
		md.AppendHop(&inband.Metadata{Present: 0x8000, NodeID: id})
	}
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp, 1000)
	binary.BigEndian.PutUint16(tcp[2:], 80)
	tcp[12] = 5 << 4
	u := &layers.UDP{SrcPort: 9, DstPort: intPort}

	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeDot1Q}
	vlan := &layers.Dot1Q{VLANIdentifier: 10, Type: layers.EthernetTypeIPv4}
	ip4 := ipv4(60, layers.IPProtocolUDP)
	u.SetNetworkLayerForChecksum(ip4)
	tagged := ser(t, eth, vlan, ip4, u, md, gopacket.Payload(tcp))

	ip6 := &layers.IPv6{Version: 6, HopLimit: 60, NextHeader: layers.IPProtocolUDP, SrcIP: netip.MustParseAddr("2001:db8::1").AsSlice(), DstIP: netip.MustParseAddr("2001:db8::2").AsSlice()}
	u.SetNetworkLayerForChecksum(ip6)
	v6 := ser(t, ip6, u, md, gopacket.Payload(tcp))
	flow6 := inband.FiveTuple{Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8::2"), Proto: 6, SrcPort: 1000, DstPort: 80}

	frag := ipv4(60, layers.IPProtocolUDP)
	frag.FragOffset = 100
	u.SetNetworkLayerForChecksum(frag)
	later := ser(t, frag, u, md, gopacket.Payload(tcp))

	b, _ := New(Config{INTPort: intPort, SinkNode: 9})
	for _, c := range []struct {
		name  string
		frame []byte
		first gopacket.LayerType
		flow  inband.FiveTuple
	}{
		{"vlan", tagged, layers.LayerTypeEthernet, tcpFlow},
		{"ipv6", v6, layers.LayerTypeIPv6, flow6},
	} {
		out, err := b.HandlePacket(c.frame, c.first)
		if err != nil || len(only(t, out, dta.OpKeyWrite)) != 1 || len(b.Traces()) != 1 || b.Traces()[0].Flow != c.flow || len(b.Traces()[0].Hops) != 3 {
			t.Fatalf("%s: %v %+v %+v", c.name, err, out, b.Traces())
		}
	}
	if out, _ := b.HandlePacket(later, layers.LayerTypeIPv4); len(out) != 0 || b.Counters().NoINT != 1 {
		t.Fatalf("a later fragment: %+v %+v", out, b.Counters())
	}
}
