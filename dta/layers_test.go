package dta

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var testBuilder = FrameBuilder{
	SrcMAC:  [6]byte{0x0c, 0x42, 0xa1, 0, 0, 1},
	DstMAC:  [6]byte{0xb8, 0xce, 0xf6, 0xd2, 0x12, 0xc7},
	SrcIP:   netip.MustParseAddr("10.0.0.200"),
	DstIP:   netip.MustParseAddr("10.0.0.51"),
	SrcPort: 40041,
}

// testReports holds one report of each primitive with various flags.
var testReports = []Report{
	{Header: Header{Opcode: OpKeyWrite}, KeyWrite: KeyWrite{Redundancy: 4, Key: 1, Data: []byte{0, 0, 0, 1}}},
	{Header: Header{Opcode: OpKeyWrite, Immediate: true, Sequenced: true, Seq: 9}, KeyWrite: KeyWrite{Redundancy: 2, Key: 0xffff0000, Data: bytes.Repeat([]byte{0xab}, 28)}},
	{Header: Header{Opcode: OpAppend, Sequenced: true, Seq: 255}, Append: Append{ListID: 3, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}},
	{Header: Header{Opcode: OpKeyIncrement}, KeyIncrement: KeyIncrement{Redundancy: 3, Key: 77, Counter: 1 << 40}},
	{Header: Header{Opcode: OpPostcard, Immediate: true}, Postcard: Postcard{Key: 5, Hop: 2, Value: 1000}},
	{Header: Header{Opcode: OpPostcard}, Postcard: Postcard{Key: 5, Hop: 5, Value: 1, PathLength: 5, HasPathLength: true}},
	{Header: Header{Opcode: OpKeyIncrement, Sequenced: true, Wide: true, Seq: 0x01020304, Session: 0xfedcba9876543210}, KeyIncrement: KeyIncrement{Redundancy: 2, Key: 8, Counter: 1}},
}

// TestSerializeLayersMatchesFrameBuilder builds each report with
// gopacket.SerializeLayers (FixLengths, ComputeChecksums) and with
// FrameBuilder; the two must agree byte for byte and decode back.
func TestSerializeLayersMatchesFrameBuilder(t *testing.T) {
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	for _, r := range testReports {
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(testBuilder.SrcMAC[:]), DstMAC: net.HardwareAddr(testBuilder.DstMAC[:]), EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP,
			SrcIP: testBuilder.SrcIP.AsSlice(), DstIP: testBuilder.DstIP.AsSlice()}
		udp := &layers.UDP{SrcPort: 40041, DstPort: ReportPort}
		if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		if err := gopacket.SerializeLayers(buf, opts, eth, ip, udp, &ReportLayer{Report: r}); err != nil {
			t.Fatalf("SerializeLayers: %v", err)
		}
		want := buf.Bytes()
		got, err := testBuilder.AppendFrame(nil, &r)
		if err != nil {
			t.Fatalf("AppendFrame: %v", err)
		}
		// gopacket pads Ethernet frames to 60 bytes; FrameBuilder leaves
		// that to the NIC.
		if len(want) > len(got) && len(want) == 60 && bytes.Count(want[len(got):], []byte{0}) == len(want)-len(got) {
			want = want[:len(got)]
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v: FrameBuilder\n% x\nSerializeLayers\n% x", r.Header.Opcode, got, want)
		}
		p := gopacket.NewPacket(got, layers.LayerTypeEthernet, gopacket.Default)
		l, ok := p.Layer(LayerTypeReport).(*ReportLayer)
		if !ok {
			t.Fatalf("no DTA layer in %v", p)
		}
		if !equalReport(l.Report, r) {
			t.Errorf("decoded %+v, want %+v", l.Report, r)
		}
		pu := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if err := pu.SetNetworkLayerForChecksum(p.NetworkLayer()); err != nil {
			t.Fatal(err)
		}
		if err, res := pu.VerifyChecksum(); err != nil || !res.Valid {
			t.Errorf("UDP checksum: %v %+v", err, res)
		}
		if err, res := p.NetworkLayer().(*layers.IPv4).VerifyChecksum(); err != nil || !res.Valid {
			t.Errorf("IPv4 checksum: %v %+v", err, res)
		}
	}
}

func TestSerializeToRejectsInvalid(t *testing.T) {
	buf := gopacket.NewSerializeBuffer()
	bad := &ReportLayer{Report: Report{Header: Header{Opcode: OpKeyWrite}, KeyWrite: KeyWrite{Redundancy: 1, Data: []byte{1}}}}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, bad); !errors.Is(err, ErrDataLength) {
		t.Errorf("SerializeLayers(bad report) = %v, want ErrDataLength", err)
	}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &AckLayer{Ack: Ack{Reserved: 0xff}}); !errors.Is(err, ErrInvalidField) {
		t.Errorf("SerializeLayers(bad ack) = %v, want ErrInvalidField", err)
	}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &AckLayer{Ack: Ack{Seq: 7, NACK: true}}); err != nil || !bytes.Equal(buf.Bytes(), []byte{7, 0x80}) {
		t.Errorf("SerializeLayers(ack) = % x, %v", buf.Bytes(), err)
	}
	wide := Ack{Seq: 7, NACK: true, Wide: true, Reason: ReasonBusy, Session: 0x0102030405060708}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &AckLayer{Ack: wide}); err != nil || !bytes.Equal(buf.Bytes(), wide.AppendTo(nil)) {
		t.Errorf("SerializeLayers(wide ack) = % x, %v; want % x", buf.Bytes(), err, wide.AppendTo(nil))
	}
}

// ackFrame builds an Ethernet/IPv4/UDP frame to the ack port.
func ackFrame(t *testing.T, payload []byte) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 51}, DstIP: net.IP{10, 0, 0, 200}}
	udp := &layers.UDP{SrcPort: ReportPort, DstPort: AckPort}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: make(net.HardwareAddr, 6), DstMAC: make(net.HardwareAddr, 6), EthernetType: layers.EthernetTypeIPv4},
		ip, udp, gopacket.Payload(payload))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestAppendAckFrame(t *testing.T) {
	f := FrameBuilder{SrcMAC: testBuilder.DstMAC, DstMAC: testBuilder.SrcMAC, SrcIP: testBuilder.DstIP, DstIP: testBuilder.SrcIP, SrcPort: ReportPort}
	frame, err := f.AppendAckFrame(nil, Ack{Seq: 200, NACK: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(frame) != FrameOverhead+AckLen {
		t.Fatalf("ack frame is %d bytes", len(frame))
	}
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	l, ok := p.Layer(LayerTypeAck).(*AckLayer)
	if !ok || l.Ack != (Ack{Seq: 200, NACK: true}) {
		t.Fatalf("decoded %v", p)
	}
	udp := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	_ = udp.SetNetworkLayerForChecksum(p.NetworkLayer())
	if err, res := udp.VerifyChecksum(); err != nil || !res.Valid || udp.DstPort != AckPort || udp.SrcPort != ReportPort {
		t.Errorf("ports %d -> %d, checksum %v %+v", udp.SrcPort, udp.DstPort, err, res)
	}
	wide := Ack{Seq: 70000, Wide: true, Span: 9, Session: 0xa1a2a3a4a5a6a7a8}
	if frame, err = f.AppendAckFrame(nil, wide); err != nil || len(frame) != FrameOverhead+WideAckLen {
		t.Fatalf("wide ack frame: %d bytes, %v", len(frame), err)
	}
	p = gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if l, ok := p.Layer(LayerTypeAck).(*AckLayer); !ok || l.Ack != wide {
		t.Fatalf("decoded wide ack frame %v", p)
	}
	udp = p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	_ = udp.SetNetworkLayerForChecksum(p.NetworkLayer())
	if err, res := udp.VerifyChecksum(); err != nil || !res.Valid || int(udp.Length) != UDPLen+WideAckLen {
		t.Errorf("wide ack frame: UDP length %d, checksum %v %+v", udp.Length, err, res)
	}
	if b, err := f.AppendAckFrame([]byte("x"), Ack{Reserved: 0x80}); !errors.Is(err, ErrInvalidField) || string(b) != "x" {
		t.Errorf("bad ack: %q, %v", b, err)
	}
}

func TestAckLayer(t *testing.T) {
	// Source port 40040, destination 40044: the destination port decides.
	p := gopacket.NewPacket(ackFrame(t, []byte{0x33, 0x80}), layers.LayerTypeEthernet, gopacket.Default)
	l, ok := p.Layer(LayerTypeAck).(*AckLayer)
	if !ok {
		t.Fatalf("no ack layer: %v", p)
	}
	if l.Ack != (Ack{Seq: 0x33, NACK: true}) || p.ApplicationLayer() != l {
		t.Errorf("ack = %+v", l.Ack)
	}
	if p.Layer(LayerTypeReport) != nil {
		t.Error("ack frame also decoded as a report")
	}
	p = gopacket.NewPacket(ackFrame(t, []byte{0x33, 0x80, 0}), layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el == nil || !errors.Is(el.Error(), ErrTrailingBytes) {
		t.Errorf("3-byte ack: error layer %v", el)
	}
}

// TestNewPacketMalformed checks that a malformed report surfaces as the
// packet's error layer with the package's typed error.
func TestNewPacketMalformed(t *testing.T) {
	frame, err := testBuilder.AppendFrame(nil, &testReports[0])
	if err != nil {
		t.Fatal(err)
	}
	frame[FrameOverhead+2] = 0 // redundancy 0
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el == nil || !errors.Is(el.Error(), ErrRedundancy) {
		t.Fatalf("error layer = %v, want ErrRedundancy", el)
	}
	if p.Layer(LayerTypeReport) != nil {
		t.Error("malformed report added a DTA layer")
	}
}

func TestFrameBuilder(t *testing.T) {
	f := testBuilder
	f.TTL = 9
	f.DstPort = 5000
	frame, err := f.AppendFrame([]byte("prefix"), &testReports[3])
	if err != nil {
		t.Fatal(err)
	}
	if string(frame[:6]) != "prefix" {
		t.Fatalf("prefix overwritten")
	}
	frame = frame[6:]
	if want := FrameOverhead + testReports[3].Len(); len(frame) != want {
		t.Fatalf("frame length %d, want %d", len(frame), want)
	}
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	udp := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if ip.TTL != 9 || udp.DstPort != 5000 || udp.SrcPort != 40041 || int(udp.Length) != UDPLen+testReports[3].Len() {
		t.Errorf("ttl %d, ports %d -> %d, udp length %d", ip.TTL, udp.SrcPort, udp.DstPort, udp.Length)
	}
	payload, err := AppendPayload(nil, &testReports[3])
	if err != nil || !bytes.Equal(payload, udp.Payload) {
		t.Errorf("AppendPayload = % x, %v; frame carries % x", payload, err, udp.Payload)
	}

	f.DstIP = netip.MustParseAddr("::1")
	if b, err := f.AppendFrame([]byte("x"), &testReports[0]); !errors.Is(err, ErrInvalidField) || string(b) != "x" {
		t.Errorf("IPv6 destination: %q, %v", b, err)
	}
	f = testBuilder
	// The largest IPv4 datagram has room for 65535-20-8-2-4 = 65501 bytes
	// of Append data, so 65500 is the most a frame carries.
	huge := Report{Header: Header{Opcode: OpAppend}, Append: Append{ListID: 1, Data: make([]byte, 65504)}}
	if _, err := f.AppendFrame(nil, &huge); !errors.Is(err, ErrInvalidField) {
		t.Errorf("oversized report: %v", err)
	}
	big := Report{Header: Header{Opcode: OpAppend}, Append: Append{ListID: 1, Data: make([]byte, 65500)}}
	if _, err := f.AppendFrame(nil, &big); err != nil {
		t.Errorf("largest report: %v", err)
	}
	if _, err := f.AppendFrame(nil, &Report{}); !errors.Is(err, ErrUnknownOpcode) {
		t.Errorf("zero report: %v", err)
	}
}

// TestUDPChecksumZeroSentAsOnes finds a report whose UDP checksum computes
// to 0 and checks it goes out as 0xffff.
func TestUDPChecksumZeroSentAsOnes(t *testing.T) {
	r := Report{Header: Header{Opcode: OpKeyIncrement}, KeyIncrement: KeyIncrement{Redundancy: 1}}
	var frame []byte
	for c := range uint64(1 << 17) {
		r.KeyIncrement.Counter = c
		var err error
		if frame, err = testBuilder.AppendFrame(frame[:0], &r); err != nil {
			t.Fatal(err)
		}
		if frame[EthernetLen+IPv4Len+6] == 0xff && frame[EthernetLen+IPv4Len+7] == 0xff {
			p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
			udp := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
			_ = udp.SetNetworkLayerForChecksum(p.NetworkLayer())
			if err, res := udp.VerifyChecksum(); err != nil || !res.Valid {
				t.Fatalf("counter %d: checksum 0xffff not valid: %v %+v", c, err, res)
			}
			return
		}
	}
	t.Fatal("no report with a computed UDP checksum of 0 found")
}

func TestAllocs(t *testing.T) {
	frame, err := testBuilder.AppendFrame(nil, &testReports[1])
	if err != nil {
		t.Fatal(err)
	}
	payload := frame[FrameOverhead:]
	bad := append([]byte(nil), payload...)
	bad[3] = 0 // redundancy 0 (sequenced header is 3 bytes)

	var (
		eth  layers.Ethernet
		ip4  layers.IPv4
		udp  layers.UDP
		rep  ReportLayer
		ack  AckLayer
		seen = make([]gopacket.LayerType, 0, 8)
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &rep, &ack)
	buf := make([]byte, 0, 256)
	var df feedback
	checks := []struct {
		name string
		f    func()
	}{
		{"ParseReport", func() { _, _ = ParseReport(payload) }},
		{"ParseReport malformed", func() { _, _ = ParseReport(bad) }},
		{"ParseAck", func() { _, _ = ParseAck([]byte{1, 0}) }},
		{"ReportLayer.DecodeFromBytes", func() { _ = rep.DecodeFromBytes(payload, &df) }},
		{"DecodingLayerParser", func() {
			if err := parser.DecodeLayers(frame, &seen); err != nil {
				panic(err)
			}
		}},
		{"AppendFrame", func() { buf, _ = testBuilder.AppendFrame(buf[:0], &testReports[1]) }},
		{"AppendPayload", func() { buf, _ = AppendPayload(buf[:0], &testReports[1]) }},
		{"Report.AppendTo", func() { buf = testReports[4].AppendTo(buf[:0]) }},
		{"Ack.AppendTo", func() { buf = Ack{Seq: 1}.AppendTo(buf[:0]) }},
		{"AppendAckFrame", func() { buf, _ = testBuilder.AppendAckFrame(buf[:0], Ack{Seq: 1}) }},
	}
	for _, c := range checks {
		if n := testing.AllocsPerRun(100, c.f); n != 0 {
			t.Errorf("%s: %v allocs, want 0", c.name, n)
		}
	}
	if len(seen) != 4 {
		t.Errorf("parser decoded %v", seen)
	}
}
