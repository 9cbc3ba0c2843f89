package inband

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hops is a three-hop path with every baseline field, one unavailable
// field and two words of domain-specific metadata per hop.
func hops() []Metadata {
	all := uint16(0xFF80) // bits 0..8
	var hs []Metadata
	for i := range 3 {
		m := Metadata{Present: all, NodeID: uint32(100 + i), L1Ingress: uint16(i), L1Egress: uint16(i + 1), HopLatency: uint32(1000 * (i + 1)),
			QueueID: uint8(i), QueueOccupancy: 0x123456 + uint32(i), IngressTimestamp: 1 << 40, EgressTimestamp: 1<<40 + 77,
			L2Ingress: 7, L2Egress: 8, TxUtilization: 50, BufferID: 2, BufferOccupancy: 0xABCDE, DomainSpecific: []byte{1, 2, 3, 4, 5, 6, 7, byte(i)}}
		if i == 1 {
			m.Present &^= 0x8000 >> BitHopLatency // this hop could not say
			m.HopLatency = 0
		}
		hs = append(hs, m)
	}
	return hs
}

func mdHeader() *INT {
	i := &INT{Type: TypeMD, Version: 2, RemainingHopCount: 5, Instructions: 0xFF80, DomainID: 7, DSInstructions: 0x8000, DSFlags: 1, MTUExceeded: true}
	i.HopML = uint8(BaselineWords(i.Instructions) + 2)
	return i
}

func TestINTMDRoundTrip(t *testing.T) {
	in := mdHeader()
	for _, h := range hops() {
		if err := in.AppendHop(&h); err != nil {
			t.Fatal(err)
		}
	}
	in.Stack = append(in.Stack, 0xAA, 0xBB, 0xCC, 0xDD) // source-only
	payload := gopacket.Payload("after")
	b := serialize(t, in, payload)
	var out INT
	if err := out.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	checkMDDecoded(t, &out, in, b)
	if _, err := out.Hops(); !errors.Is(err, ErrLength) {
		t.Fatalf("a stack with 4 unexplained bytes: %v, want ErrLength", err)
	}
	if err := out.SetSourceOnly(4); err != nil {
		t.Fatal(err)
	}
	n, err := out.Hops()
	if err != nil || n != 3 || !bytes.Equal(out.SourceOnlyMetadata(), []byte{0xAA, 0xBB, 0xCC, 0xDD}) {
		t.Fatalf("hops %d, %v", n, err)
	}
	checkMDHops(t, &out, n)
	if err := out.Hop(3, new(Metadata)); !errors.Is(err, ErrLength) {
		t.Fatalf("hop 3 of 3: %v", err)
	}
	// Re-encoding what decoded gives the same bytes.
	if again := serialize(t, &out, payload); !bytes.Equal(again, b) {
		t.Fatalf("re-encoded\n%x\nwant\n%x", again, b)
	}
}

// checkMDDecoded checks the header fields out decoded from b, which
// serializes in and the payload "after".
func checkMDDecoded(t *testing.T, out, in *INT, b []byte) {
	t.Helper()
	if string(out.Payload) != "after" || out.Type != TypeMD || out.Version != 2 || !out.MTUExceeded || out.HopCountExceeded || out.HopML != in.HopML ||
		out.RemainingHopCount != 5 || out.Instructions != 0xFF80 || out.DomainID != 7 || out.DSInstructions != 0x8000 || out.DSFlags != 1 || int(out.Length)*4 != len(b)-ShimLen-5 {
		t.Fatalf("decoded %+v", out)
	}
}

// checkMDHops checks out's n hops against hops().
func checkMDHops(t *testing.T, out *INT, n int) {
	t.Helper()
	want := hops()
	for h := range n {
		var m Metadata
		if err := out.Hop(h, &m); err != nil {
			t.Fatal(err)
		}
		w := want[h]
		if m.Present != w.Present || m.NodeID != w.NodeID || m.HopLatency != w.HopLatency || m.QueueOccupancy != w.QueueOccupancy || m.EgressTimestamp != w.EgressTimestamp ||
			m.L2Egress != w.L2Egress || m.BufferOccupancy != w.BufferOccupancy || !bytes.Equal(m.DomainSpecific, w.DomainSpecific) {
			t.Fatalf("hop %d: %+v, want %+v", h, m, w)
		}
	}
}

func TestINTMXAndDestination(t *testing.T) {
	mx := &INT{Type: TypeMX, Version: 2, Discard: true, Instructions: 0x8000, DomainID: 3, Stack: []byte{1, 2, 3, 4}}
	b := serialize(t, mx)
	var out INT
	if err := out.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil || out.Type != TypeMX || !out.Discard || out.Instructions != 0x8000 || !bytes.Equal(out.Stack, []byte{1, 2, 3, 4}) {
		t.Fatalf("%+v %v", out, err)
	}
	if n, err := out.Hops(); n != 0 || err != nil {
		t.Fatal("an MX header has no hops")
	}
	d := &INT{Type: TypeDestination, NPT: NPTUDPPayload, Field: 4789, Stack: []byte{9, 9, 9, 9, 8, 8, 8, 8}}
	b = serialize(t, d)
	if err := out.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil || out.Type != TypeDestination || out.NPT != NPTUDPPayload || out.Field != 4789 || len(out.Stack) != 8 {
		t.Fatalf("%+v %v", out, err)
	}
}

func TestINTErrors(t *testing.T) {
	good := serialize(t, mdHeader())
	for name, c := range map[string]struct {
		b   []byte
		err error
	}{
		"empty":        {nil, ErrTruncated},
		"length past":  {[]byte{0x10, 9, 0, 0}, ErrLength},
		"type 0":       {[]byte{0x00, 0, 0, 0}, ErrType},
		"md short":     {[]byte{0x10, 1, 0, 0, 0x20, 0, 0, 0}, ErrTruncated},
		"md version 1": {append([]byte{good[0], good[1], good[2], good[3], 0x10}, good[5:]...), ErrVersion},
		"hop ml small": {[]byte{0x10, 3, 0, 0, 0x20, 0, 0, 1, 0xC0, 0, 0, 0, 0, 0, 0, 0}, ErrHopML},
		"mx version":   {[]byte{0x30, 3, 0, 0, 0x30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ErrVersion},
	} {
		var i INT
		err := i.DecodeFromBytes(c.b, gopacket.NilDecodeFeedback)
		var e *Error
		if !errors.Is(err, c.err) || !errors.As(err, &e) || e.Op == "" {
			t.Errorf("%s: %v, want %v", name, err, c.err)
		}
	}
	i := mdHeader()
	i.HopML = 2
	if err := i.AppendHop(&Metadata{Present: 0xFF80}); !errors.Is(err, ErrHopML) || len(i.Stack) != 0 {
		t.Errorf("a hop larger than HopML: %v", err)
	}
}

func report() *Report {
	r := &Report{HardwareID: 5, Sequence: 0x3ABCDE, NodeID: 42}
	a := Individual{RepType: RepINT, InType: InIPv4, Tracked: true, Congested: true, RepMdBits: 0x7F81, DomainID: 0, Inner: []byte{0x45, 0, 0, 20, 1, 2, 3, 4}}
	m := Metadata{Present: 0x7F81, L1Ingress: 3, L1Egress: 4, HopLatency: 900, QueueID: 1, QueueOccupancy: 77, IngressTimestamp: 5, EgressTimestamp: 6,
		L2Ingress: 1, L2Egress: 2, TxUtilization: 3, BufferID: 4, BufferOccupancy: 5, DropQueueID: 1, DropReason: 71}
	a.SetMetadata(&m)
	b := Individual{RepType: RepInnerOnly, InType: InEthernet, Dropped: true, Inner: bytes.Repeat([]byte{0xEE}, 16)}
	r.Individuals = []Individual{a, b}
	return r
}

func TestReportRoundTrip(t *testing.T) {
	r := report()
	enc := serialize(t, r)
	var out Report
	if err := out.DecodeFromBytes(enc, gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	checkReportDecoded(t, &out)
	if again := serialize(t, &out); !bytes.Equal(again, enc) {
		t.Fatalf("re-encoded\n%x\nwant\n%x", again, enc)
	}
	// A long last report uses Report Length 0xFF (to the end).
	out.Individuals[1].Inner = bytes.Repeat([]byte{1}, 1100)
	long := serialize(t, &out)
	var back Report
	if err := back.DecodeFromBytes(long, gopacket.NilDecodeFeedback); err != nil || back.Individuals[1].Length != LengthToEnd || len(back.Individuals[1].Inner) != 1100 {
		t.Fatalf("to-the-end report: %v %+v", err, back.Individuals[1].Length)
	}
}

// checkReportDecoded checks what report() decodes to.
func checkReportDecoded(t *testing.T, out *Report) {
	t.Helper()
	if out.Version != 2 || out.HardwareID != 5 || out.Sequence != 0x3ABCDE || out.NodeID != 42 || len(out.Individuals) != 2 {
		t.Fatalf("%+v", out)
	}
	a, b := out.Individuals[0], out.Individuals[1]
	if a.RepType != RepINT || a.InType != InIPv4 || !a.Tracked || !a.Congested || a.Dropped || a.Intermediate || a.RepMdBits != 0x7F81 ||
		int(a.MDLength)*4 != len(a.MD) || !bytes.Equal(a.Inner, []byte{0x45, 0, 0, 20, 1, 2, 3, 4}) {
		t.Fatalf("first report %+v", a)
	}
	var m Metadata
	if err := a.Metadata(&m); err != nil || m.HopLatency != 900 || m.QueueOccupancy != 77 || m.DropReason != 71 || m.DropQueueID != 1 || m.EgressTimestamp != 6 || m.Has(BitNodeID) {
		t.Fatalf("metadata %+v %v", m, err)
	}
	checkInnerOnly(t, b)
}

// checkInnerOnly checks the inner-only report report() decodes to.
func checkInnerOnly(t *testing.T, b Individual) {
	t.Helper()
	var m Metadata
	if b.RepType != RepInnerOnly || !b.Dropped || len(b.Inner) != 16 {
		t.Fatalf("second report %+v", b)
	}
	if err := b.Metadata(&m); !errors.Is(err, ErrType) {
		t.Fatalf("metadata of an inner-only report: %v", err)
	}
}

func TestReportErrors(t *testing.T) {
	enc := serialize(t, report())
	for name, c := range map[string]struct {
		b   []byte
		err error
	}{
		"short":         {enc[:7], ErrTruncated},
		"version 3":     {append([]byte{0x30}, enc[1:]...), ErrVersion},
		"indiv short":   {enc[:10], ErrTruncated},
		"length past":   {enc[:len(enc)-4], ErrLength},
		"md past":       {[]byte{0x20, 0, 0, 0, 0, 0, 0, 1, 0x10, 2, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ErrLength},
		"md vs repmd":   {[]byte{0x20, 0, 0, 0, 0, 0, 0, 1, 0x10, 3, 1, 0, 0x30, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}, ErrLength},
		"bits, no room": {[]byte{0x20, 0, 0, 0, 0, 0, 0, 1, 0x10, 2, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0}, ErrLength},
	} {
		var r Report
		if err := r.DecodeFromBytes(c.b, gopacket.NilDecodeFeedback); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", name, err, c.err)
		}
	}
	r := report()
	r.Individuals[0].Inner = []byte{1, 2, 3}
	if _, err := r.AppendTo(nil); !errors.Is(err, ErrLength) {
		t.Errorf("unaligned inner: %v", err)
	}
}

// TestGopacket: with the ports registered, gopacket decodes INT over UDP
// and Telemetry Reports inside whole frames.
func TestGopacket(t *testing.T) {
	RegisterUDPPort(555)
	RegisterReportPort(32766)
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}
	udp := &layers.UDP{SrcPort: 1, DstPort: 555}
	udp.SetNetworkLayerForChecksum(ip)
	in := mdHeader()
	for _, h := range hops() {
		in.AppendHop(&h)
	}
	frame := serialize(t, eth, ip, udp, in, gopacket.Payload("data"))
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	l, ok := p.Layer(LayerTypeINT).(*INT)
	if !ok || p.ErrorLayer() != nil {
		t.Fatalf("no INT layer: %v", p)
	}
	if n, _ := l.Hops(); n != 3 || string(p.ApplicationLayer().Payload()) != "data" {
		t.Fatalf("%d hops, payload %q", n, p.ApplicationLayer().Payload())
	}
	udp.DstPort = 32766
	frame = serialize(t, eth, ip, udp, report())
	p = gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if r, ok := p.Layer(LayerTypeReport).(*Report); !ok || r.NodeID != 42 || len(r.Individuals) != 2 {
		t.Fatalf("no report layer: %v", p)
	}
}

func readHex(t *testing.T, name string) []byte {
	t.Helper()
	s, err := os.ReadFile(filepath.Join("testdata", "cablelabs-trpt", name))
	if err != nil {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(strings.Join(strings.Fields(string(s)), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCablelabsVectors checks the independent vectors (see their README):
// the group and individual headers as their parser reads them, and inside
// the inner frame the INT shim, the INT-MD header, the two hops and the
// original L4 header after the INT stack.
func TestCablelabsVectors(t *testing.T) {
	for _, c := range []cablelabsVector{
		{"udp4-2hops.hex", 13, 0x011040, 4, 10, true, true, 17, false, 6680},
		{"tcp4-2hops.hex", 0, 0x40, 4, 10, false, false, 6, false, 0},
		{"udp6-2hops.hex", 0, 0x40, 5, 15, false, false, 17, true, 6680},
		{"tcp6-2hops.hex", 0, 0x40, 5, 15, false, false, 6, true, 0},
	} {
		b := readHex(t, c.file)
		udpPayload := checkCablelabsReport(t, c, b)
		checkCablelabsINT(t, c, udpPayload)
	}
}

// cablelabsVector is what one of the vectors holds.
type cablelabsVector struct {
	file         string
	hwID         uint8
	seq          uint32
	inType       uint8
	length       uint8
	q, i         bool
	proto        uint16
	ipv6         bool
	innerSrcPort uint16
}

// checkCablelabsReport checks the group and individual headers of vector
// b and returns the payload of the inner frame's UDP header.
func checkCablelabsReport(t *testing.T, c cablelabsVector, b []byte) []byte {
	t.Helper()
	var r Report
	// Their Report Length does not cover the packet (see the README):
	// decode the first report alone.
	err := r.DecodeFromBytes(b[:GroupHeaderLen+IndividualHeaderLen+4*int(c.length)], gopacket.NilDecodeFeedback)
	if err != nil || r.Version != 2 || r.HardwareID != c.hwID || r.Sequence != c.seq || r.NodeID != 234 || len(r.Individuals) != 1 {
		t.Fatalf("%s: %v %+v", c.file, err, r)
	}
	ind := r.Individuals[0]
	if ind.RepType != RepInnerOnly || ind.InType != c.inType || ind.Length != c.length || ind.MDLength != 8 || ind.Congested != c.q || ind.Intermediate != c.i || ind.Dropped || ind.Tracked {
		t.Fatalf("%s: individual %+v", c.file, ind)
	}
	if d := binary.BigEndian.Uint16(ind.Inner[2:]); d != 21587 {
		t.Fatalf("%s: domain ID %d", c.file, d)
	}
	// The frame starts 24 bytes in.
	// TCP6_2HOPS's IPv6 header names TCP before its UDP header (see
	// the README): read the UDP header after the IP header whatever it
	// says.
	p := gopacket.NewPacket(b[24:], layers.LayerTypeEthernet, gopacket.NoCopy)
	var u layers.UDP
	if p.NetworkLayer() == nil || u.DecodeFromBytes(p.NetworkLayer().LayerPayload(), gopacket.NilDecodeFeedback) != nil || u.DstPort != 555 {
		t.Fatalf("%s: no UDP to port 555: %v", c.file, p)
	}
	if (p.Layer(layers.LayerTypeIPv6) != nil) != c.ipv6 {
		t.Fatalf("%s: IP version", c.file)
	}
	return u.Payload
}

// checkCablelabsINT checks the INT shim, the INT-MD header, the two hops
// and the original L4 header after the INT stack in udpPayload.
func checkCablelabsINT(t *testing.T, c cablelabsVector, udpPayload []byte) {
	t.Helper()
	in := INT{V1Length: true}
	if err := in.DecodeFromBytes(udpPayload, gopacket.NilDecodeFeedback); err != nil {
		t.Fatalf("%s: %v", c.file, err)
	}
	if in.Type != TypeMD || in.NPT != NPTL4Header || in.Field != c.proto || in.Version != 2 || in.HopML != 1 || in.RemainingHopCount != 9 ||
		in.Instructions != 0x8000 || in.DomainID != 21587 || in.DSInstructions != 0x8000 || in.DSFlags != 0x4000 {
		t.Fatalf("%s: INT %+v", c.file, in)
	}
	if err := in.SetSourceOnly(8); err != nil {
		t.Fatal(err)
	}
	var h0, h1 Metadata
	if n, err := in.Hops(); n != 2 || err != nil || in.Hop(0, &h0) != nil || in.Hop(1, &h1) != nil || h0.NodeID != 234 || h1.NodeID != 123 {
		t.Fatalf("%s: hops %d %v: %d, %d", c.file, n, err, h0.NodeID, h1.NodeID)
	}
	if mac := in.SourceOnlyMetadata()[:6]; !bytes.Equal(mac, []byte{0, 0, 0, 0, 1, 1}) {
		t.Fatalf("%s: source MAC %x", c.file, mac)
	}
	if c.innerSrcPort != 0 {
		if sp, dp := binary.BigEndian.Uint16(in.Payload), binary.BigEndian.Uint16(in.Payload[2:]); sp != 6680 || dp != 5792 || !strings.HasSuffix(string(in.Payload), "hello transparent-security") {
			t.Fatalf("%s: after INT: ports %d→%d, %q", c.file, sp, dp, in.Payload)
		}
	}
}

func TestDecodeAllocs(t *testing.T) {
	enc := serialize(t, report())
	var r Report
	r.DecodeFromBytes(enc, gopacket.NilDecodeFeedback)
	var m Metadata
	in := mdHeader()
	for _, h := range hops() {
		in.AppendHop(&h)
	}
	ib := serialize(t, in)
	var i INT
	v1 := words(1<<28|6<<24|1<<21|0x21<<15|1<<6|3, 9, 1, 2, 3<<16|4, 80, 0x45000014)
	v05 := words(2<<24|1<<22, 1, 2, 42, 1<<16|2, 3<<24|4000, 5555, 0xAAAAAAAA)
	i05 := words(1<<24|5<<8, 1<<16|8<<8|1, 0x8000<<16, 7, 17<<24|80<<8)
	if a := testing.AllocsPerRun(100, func() {
		r.DecodeFromBytes(enc, gopacket.NilDecodeFeedback)
		r.Individuals[0].Metadata(&m)
		i.DecodeFromBytes(ib, gopacket.NilDecodeFeedback)
		i.Hop(2, &m)
		r.DecodeFromBytes(v1, gopacket.NilDecodeFeedback)
		r.Individuals[0].Metadata(&m)
		r.DecodeFromBytes(v05, gopacket.NilDecodeFeedback)
		r.Individuals[0].Metadata(&m)
		i.DecodeFromBytes(i05, gopacket.NilDecodeFeedback)
		i.Hop(0, &m)
	}); a != 0 {
		t.Fatalf("decoding allocates %v times", a)
	}
}

func BenchmarkReportDecode(b *testing.B) {
	enc := serialize(b, report())
	var r Report
	var m Metadata
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for range b.N {
		if err := r.DecodeFromBytes(enc, gopacket.NilDecodeFeedback); err != nil {
			b.Fatal(err)
		}
		r.Individuals[0].Metadata(&m)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(r.Individuals)), "ns/report")
}

// BenchmarkReportDecodeVersions decodes one report of each version and
// its metadata.
func BenchmarkReportDecodeVersions(b *testing.B) {
	for _, c := range []struct {
		name string
		pkt  []byte
	}{
		{"v0.5", words(2<<24|1<<22, 1, 2, 42, 1<<16|2, 3<<24|4000, 5555, 0xAAAAAAAA)},
		{"v1.0", words(1<<28|6<<24|1<<21|0x21<<15|1<<6|3, 9, 1, 2, 3<<16|4, 80, 0x45000014)},
		{"v2.0", serialize(b, report())},
	} {
		b.Run(c.name, func(b *testing.B) {
			var r Report
			var m Metadata
			b.ReportAllocs()
			for range b.N {
				if err := r.DecodeFromBytes(c.pkt, gopacket.NilDecodeFeedback); err != nil {
					b.Fatal(err)
				}
				r.Individuals[0].Metadata(&m)
			}
		})
	}
}

func BenchmarkINTDecode(b *testing.B) {
	in := mdHeader()
	for _, h := range hops() {
		in.AppendHop(&h)
	}
	enc := serialize(b, in)
	var i INT
	var m Metadata
	b.ReportAllocs()
	for range b.N {
		if err := i.DecodeFromBytes(enc, gopacket.NilDecodeFeedback); err != nil {
			b.Fatal(err)
		}
		for h := range 3 {
			i.Hop(h, &m)
		}
	}
}
