package rocev2

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// writeOnlyFrame is the benchmark frame: an RC RDMA WRITE Only with a 64-byte
// payload over IPv4.
func writeOnlyFrame() Frame {
	f := Frame{
		DstMAC:       [6]byte{0x02, 0, 0, 0, 0, 2},
		SrcMAC:       [6]byte{0x02, 0, 0, 0, 0, 1},
		Src:          netip.MustParseAddr("10.0.0.1"),
		Dst:          netip.MustParseAddr("10.0.0.2"),
		TTL:          64,
		DontFragment: true,
		SrcPort:      0xC123,
	}
	f.BTH = BTH{Opcode: RCWriteOnly, PKey: DefaultPKey, DestQP: 0x000123, AckReq: true, PSN: 0xFFFFFE}
	f.RETH = RETH{VA: 0x7F00_1234_5678_0000, RKey: 0xABCD_0001, DMALength: 64}
	f.Payload = bytes.Repeat([]byte{0xA5}, 64)
	return f
}

func TestOpcodeTable(t *testing.T) {
	// The IBTA table, written out: opcode -> extension headers, payload.
	type row struct {
		h       Headers
		payload bool
	}
	want := map[Opcode]row{}
	for _, tr := range []Opcode{0x00, 0x20} {
		want[tr] = row{0, true} // SEND First
		want[tr|0x01] = row{0, true}
		want[tr|0x02] = row{0, true}
		want[tr|0x03] = row{HasImmDt, true}
		want[tr|0x04] = row{0, true}
		want[tr|0x05] = row{HasImmDt, true}
		want[tr|0x06] = row{HasRETH, true}
		want[tr|0x07] = row{0, true}
		want[tr|0x08] = row{0, true}
		want[tr|0x09] = row{HasImmDt, true}
		want[tr|0x0A] = row{HasRETH, true}
		want[tr|0x0B] = row{HasRETH | HasImmDt, true}
	}
	want[0x0C] = row{HasRETH, false}
	want[0x0D] = row{HasAETH, true}
	want[0x0E] = row{0, true}
	want[0x0F] = row{HasAETH, true}
	want[0x10] = row{HasAETH, true}
	want[0x11] = row{HasAETH, false}
	want[0x12] = row{HasAETH | HasAtomicAckETH, false}
	want[0x13] = row{HasAtomicETH, false}
	want[0x14] = row{HasAtomicETH, false}
	want[0x16] = row{HasIETH, true}
	want[0x17] = row{HasIETH, true}
	want[0x64] = row{HasDETH, true}
	want[0x65] = row{HasDETH | HasImmDt, true}
	for i := range 256 {
		op := Opcode(i)
		w, ok := want[op]
		if op.Valid() != ok {
			t.Errorf("%#02x: Valid() = %v, want %v", i, op.Valid(), ok)
			continue
		}
		if !ok {
			err := op.check()
			tr := op.Transport()
			// RC FLUSH (0x1C) and ATOMIC WRITE (0x1D) exist since IBA 1.5.
			unsupported := tr != RC && tr != UC && tr != UD || op == 0x1C || op == 0x1D
			if !unsupported != errors.Is(err, ErrReservedOpcode) || unsupported != errors.Is(err, ErrUnsupportedOpcode) {
				t.Errorf("%#02x (%v): check() = %v", i, op, err)
			}
			continue
		}
		if op.Headers() != w.h || op.HasPayload() != w.payload {
			t.Errorf("%v: headers %b payload %v, want %b %v", op, op.Headers(), op.HasPayload(), w.h, w.payload)
		}
	}
	if s := RCWriteOnlyImm.String(); s != "RC RDMA WRITE Only with Immediate" {
		t.Errorf("String = %q", s)
	}
	if s := Opcode(0x15).String(); s != "reserved(0x15)" {
		t.Errorf("String = %q", s)
	}
}

func TestPSN(t *testing.T) {
	cases := []struct {
		a, b PSN
		diff int32
	}{
		{5, 3, 2},
		{3, 5, -2},
		{0, 0xFFFFFF, 1},
		{0xFFFFFF, 0, -1},
		{0x7FFFFF, 0, 0x7FFFFF},
		{0x800000, 0, -0x800000},
		{10, 10, 0},
	}
	for _, c := range cases {
		if d := c.a.Diff(c.b); d != c.diff {
			t.Errorf("%#x.Diff(%#x) = %d, want %d", c.a, c.b, d, c.diff)
		}
		wantCmp := 0
		if c.diff < 0 {
			wantCmp = -1
		} else if c.diff > 0 {
			wantCmp = 1
		}
		if got := c.a.Compare(c.b); got != wantCmp {
			t.Errorf("%#x.Compare(%#x) = %d, want %d", c.a, c.b, got, wantCmp)
		}
		if c.a.Before(c.b) != (c.diff < 0) {
			t.Errorf("%#x.Before(%#x) wrong", c.a, c.b)
		}
	}
	if p := PSN(0xFFFFFF).Next(); p != 0 {
		t.Errorf("Next wraps to %#x", p)
	}
	if p := PSN(0xFFFFF0).Add(0x20); p != 0x10 {
		t.Errorf("Add wraps to %#x", p)
	}
	if PSN(1 << 24).Valid() {
		t.Error("2^24 valid")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		a := PSN(r.Uint32() & PSNMask)
		n := r.Uint32() & (1<<23 - 1)
		if d := a.Add(n).Diff(a); d != int32(n) {
			t.Fatalf("(%#x+%d).Diff = %d", a, n, d)
		}
	}
}

func TestFrameRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for k := range 500 {
		f := randomFrame(r, k%3 == 0)
		b, err := f.AppendTo(make([]byte, 3, 8)) // a prefix must survive
		if err != nil {
			t.Fatalf("%v: %v", f.BTH.Opcode, err)
		}
		if !bytes.Equal(b[:3], []byte{0, 0, 0}) || len(b)-3 != f.Len() {
			t.Fatalf("%v: prefix or length wrong", f.BTH.Opcode)
		}
		var g Frame
		if err := g.Decode(b[3:]); err != nil {
			t.Fatalf("%v: decode: %v", f.BTH.Opcode, err)
		}
		f.BTH.PadCount = uint8(-len(f.Payload) & 3)
		f.ICRC = g.ICRC
		if len(f.Payload) == 0 {
			f.Payload = g.Payload // nil and empty compare equal below only this way
		}
		if !reflect.DeepEqual(f, g) {
			t.Fatalf("round trip of %v:\n got %+v\nwant %+v", f.BTH.Opcode, g, f)
		}
	}
}

func TestDecodeBadInput(t *testing.T) {
	base := writeOnlyFrame()
	good, err := base.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	const bth = etherHeaderLen + ipv4HeaderLen + udpHeaderLen // BTH offset
	// refix recomputes the IP checksum, lengths stay as they are.
	mod := func(f func(b []byte) []byte) []byte {
		b := f(bytes.Clone(good))
		if len(b) >= bth {
			b[24], b[25] = 0, 0
			c := ipv4Checksum((*[20]byte)(b[14:34]))
			b[24], b[25] = byte(c>>8), byte(c)
		}
		return b
	}
	// setLen rewrites the IP and UDP lengths for a UDP payload of n bytes.
	setLen := func(b []byte, n int) {
		b[16], b[17] = byte((28+n)>>8), byte(28+n)
		b[38], b[39] = byte((8+n)>>8), byte(8+n)
	}
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, ErrTruncated},
		{"ethernet only", good[:14], ErrTruncated},
		{"vlan", mod(func(b []byte) []byte { b[12], b[13] = 0x81, 0; return b }), ErrHeader},
		{"ip length beyond frame", good[:len(good)-1], ErrLength},
		{"ipv4 options", mod(func(b []byte) []byte { b[14] = 0x46; return b }), ErrHeader},
		{"fragment", mod(func(b []byte) []byte { b[20] |= 0x20; return b }), ErrHeader},
		{"tcp", mod(func(b []byte) []byte { b[23] = 6; return b }), ErrHeader},
		{"ip checksum", func() []byte { b := bytes.Clone(good); b[24] ^= 1; return b }(), ErrHeader},
		{"udp port", mod(func(b []byte) []byte { b[37] ^= 1; return b }), ErrHeader},
		{"udp length", mod(func(b []byte) []byte { b[39] ^= 4; return b }), ErrLength},
		{"bth truncated", mod(func(b []byte) []byte { b = b[:bth+8]; setLen(b, 8); return b }), ErrTruncated},
		{"reth truncated", mod(func(b []byte) []byte { b = b[:bth+20]; setLen(b, 20); return b }), ErrTruncated},
		{"no icrc", mod(func(b []byte) []byte { b = b[:bth+28]; setLen(b, 28); return b }), ErrTruncated},
		{"reserved opcode", mod(func(b []byte) []byte { b[bth] = 0x15; return b }), ErrReservedOpcode},
		{"reserved UD opcode", mod(func(b []byte) []byte { b[bth] = 0x6A; return b }), ErrReservedOpcode},
		{"RD opcode", mod(func(b []byte) []byte { b[bth] = 0x4A; return b }), ErrUnsupportedOpcode},
		{"CNP", mod(func(b []byte) []byte { b[bth] = 0x81; return b }), ErrUnsupportedOpcode},
		{"tver", mod(func(b []byte) []byte { b[bth+1] |= 1; return b }), ErrHeader},
		{"pad count beyond payload", mod(func(b []byte) []byte {
			// A WRITE Only with no payload and pad count 3.
			b = b[:bth+28+4]
			setLen(b, 32)
			b[bth+1] |= 3 << 4
			return b
		}), ErrLength},
		{"payload not a multiple of 4", mod(func(b []byte) []byte {
			b = b[:len(b)-1]
			setLen(b, len(b)-bth)
			return b
		}), ErrLength},
		{"payload on ACK", mod(func(b []byte) []byte { b[bth] = byte(RCAcknowledge); return b }), ErrLength},
		{"opcode/header mismatch: FetchAdd needs 28 bytes", mod(func(b []byte) []byte {
			b = b[:bth+12+16+4]
			setLen(b, 32)
			b[bth] = byte(RCFetchAdd)
			return b
		}), ErrTruncated},
		{"bad icrc", func() []byte { b := bytes.Clone(good); b[len(b)-1] ^= 0x80; return b }(), ErrBadICRC},
		{"bad payload bit", func() []byte { b := bytes.Clone(good); b[len(b)-10] ^= 1; return b }(), ErrBadICRC},
	}
	for _, c := range cases {
		var f Frame
		err := f.Decode(c.frame)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	var ie *ICRCError
	var f Frame
	bad := bytes.Clone(good)
	bad[len(bad)-4] ^= 1
	if err := f.Decode(bad); !errors.As(err, &ie) || ie.Wire^ie.Computed != 1 {
		t.Errorf("bad ICRC: err %v", err)
	}
}

func TestEncodeRejects(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Frame)
		want error
	}{
		{"reserved opcode", func(f *Frame) { f.BTH.Opcode = 0x18 }, ErrReservedOpcode},
		{"XRC opcode", func(f *Frame) { f.BTH.Opcode = 0xA0 }, ErrUnsupportedOpcode},
		{"wide QP", func(f *Frame) { f.BTH.DestQP = 1 << 24 }, ErrHeader},
		{"wide PSN", func(f *Frame) { f.BTH.PSN = 1 << 24 }, ErrHeader},
		{"tver", func(f *Frame) { f.BTH.Version = 1 }, ErrHeader},
		{"payload on READ request", func(f *Frame) { f.BTH.Opcode = RCReadRequest }, ErrLength},
		{"mixed families", func(f *Frame) { f.Dst = netip.MustParseAddr("::1") }, ErrHeader},
		{"zero address", func(f *Frame) { f.Src = netip.Addr{} }, ErrHeader},
		{"too long", func(f *Frame) { f.Payload = make([]byte, 70000) }, ErrLength},
		{"wide flow label", func(f *Frame) {
			f.Src, f.Dst = netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::2")
			f.FlowLabel = 1 << 20
		}, ErrHeader},
	}
	for _, c := range cases {
		f := writeOnlyFrame()
		c.mod(&f)
		b, err := f.AppendTo([]byte{1})
		if !errors.Is(err, c.want) || len(b) != 1 {
			t.Errorf("%s: err = %v, len %d; want %v and b unchanged", c.name, err, len(b), c.want)
		}
	}
}

func TestPadding(t *testing.T) {
	for n := range 9 {
		f := writeOnlyFrame()
		f.Payload = f.Payload[:n]
		f.RETH.DMALength = uint32(n)
		b, err := f.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		pad := -n & 3
		if got := int(b[43] >> 4 & 3); got != pad {
			t.Errorf("payload %d: pad count %d, want %d", n, got, pad)
		}
		if (len(b)-etherHeaderLen)%4 != 0 {
			t.Errorf("payload %d: IP packet of %d bytes", n, len(b)-etherHeaderLen)
		}
		var g Frame
		if err := g.Decode(b); err != nil || len(g.Payload) != n {
			t.Errorf("payload %d: decode %v, payload %d", n, err, len(g.Payload))
		}
	}
}

func TestGopacketLayers(t *testing.T) {
	f := writeOnlyFrame()
	f.BTH.Opcode = RCWriteOnlyImm
	f.ImmDt.Data = 0xDEADBEEF
	b, err := f.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	pkt := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	if el := pkt.ErrorLayer(); el != nil {
		t.Fatal(el.Error())
	}
	var got []gopacket.LayerType
	for _, l := range pkt.Layers() {
		got = append(got, l.LayerType())
	}
	want := []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeUDP,
		LayerTypeBTH, LayerTypeRETH, LayerTypeImmDt, gopacket.LayerTypePayload}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("layers %v, want %v", got, want)
	}
	bl := pkt.Layer(LayerTypeBTH).(*BTHLayer)
	if bl.BTH != f.BTH || bl.ICRC != decodedICRC(t, b) || len(bl.Contents) != BTHLen {
		t.Errorf("BTH layer %+v", bl)
	}
	if rl := pkt.Layer(LayerTypeRETH).(*RETHLayer); rl.RETH != f.RETH || len(rl.Contents) != RETHLen {
		t.Errorf("RETH layer %+v", rl)
	}
	if il := pkt.Layer(LayerTypeImmDt).(*ImmDtLayer); il.ImmDt != f.ImmDt {
		t.Errorf("ImmDt layer %+v", il)
	}
	if al := pkt.ApplicationLayer(); al == nil || !bytes.Equal(al.Payload(), f.Payload) {
		t.Errorf("payload %v", al)
	}

	// A bad RoCEv2 payload becomes a decode failure, not a panic.
	b[etherHeaderLen+ipv4HeaderLen+udpHeaderLen] = 0x15
	pkt = gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	if el := pkt.ErrorLayer(); el == nil || !errors.Is(el.Error(), ErrReservedOpcode) {
		t.Errorf("reserved opcode: error layer %v", el)
	}
}

func decodedICRC(t *testing.T, b []byte) uint32 {
	var f Frame
	if err := f.Decode(b); err != nil {
		t.Fatal(err)
	}
	return f.ICRC
}

func TestDecodingLayerParserNoAlloc(t *testing.T) {
	f := writeOnlyFrame()
	b, err := f.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		eth     layers.Ethernet
		ip4     layers.IPv4
		udp     layers.UDP
		rp      PacketLayer
		payload gopacket.Payload
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &rp, &payload)
	decoded := make([]gopacket.LayerType, 0, 8)
	run := func() {
		if err := parser.DecodeLayers(b, &decoded); err != nil {
			t.Fatal(err)
		}
	}
	run()
	want := []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeUDP, LayerTypeBTH, gopacket.LayerTypePayload}
	if !reflect.DeepEqual(decoded, want) {
		t.Fatalf("decoded %v, want %v", decoded, want)
	}
	if rp.BTH != f.BTH || rp.RETH != f.RETH || !bytes.Equal(payload, f.Payload) {
		t.Errorf("decoded %+v", rp.Packet)
	}
	if allocs := testing.AllocsPerRun(100, run); allocs != 0 {
		t.Errorf("DecodeLayers allocates %v times", allocs)
	}
}

func TestNoAllocs(t *testing.T) {
	f := writeOnlyFrame()
	buf := make([]byte, 0, 256)
	frame, _ := f.AppendTo(nil)
	var g Frame
	var p Packet
	udpPayload := frame[etherHeaderLen+ipv4HeaderLen+udpHeaderLen:]
	ip := frame[etherHeaderLen:]
	for name, fn := range map[string]func(){
		"Frame.AppendTo": func() { buf, _ = f.AppendTo(buf[:0]) },
		"Frame.Decode": func() {
			if err := g.Decode(frame); err != nil {
				t.Fatal(err)
			}
		},
		"Packet.Decode": func() { _ = p.Decode(udpPayload) },
		"VerifyICRC": func() {
			if err := VerifyICRC(ip); err != nil {
				t.Fatal(err)
			}
		},
		"Frame.Decode error": func() { _ = g.Decode(frame[:40]) },
		"BTH.AppendTo":       func() { buf = f.BTH.AppendTo(buf[:0]) },
	} {
		if a := testing.AllocsPerRun(200, fn); a != 0 {
			t.Errorf("%s allocates %v times", name, a)
		}
	}
}

func TestSyndrome(t *testing.T) {
	for s := range 256 {
		syn := Syndrome(s)
		kinds := 0
		for _, k := range []bool{syn.IsACK(), syn.IsRNRNAK(), syn.IsNAK()} {
			if k {
				kinds++
			}
		}
		// Bit 7 is reserved and 0x40-0x5F is reserved: neither is any kind.
		want := 1
		if s&0x80 != 0 || s&0x60 == 0x40 {
			want = 0
		}
		if kinds != want {
			t.Errorf("%#x: %d kinds", s, kinds)
		}
		if syn.Value() != uint8(s&0x1F) {
			t.Errorf("%#x: value %d", s, syn.Value())
		}
	}
	if !SyndromeACK.IsACK() || SyndromeACK.Value() != 31 || !SyndromeNAKPSNSequenceError.IsNAK() ||
		SyndromeNAKRemoteAccessError.Value() != 2 || !(SyndromeRNRNAK | 5).IsRNRNAK() {
		t.Error("named syndromes")
	}
}

func TestHeadersLen(t *testing.T) {
	if n := (HasDETH | HasRETH | HasAtomicETH | HasAETH | HasAtomicAckETH | HasImmDt | HasIETH).Len(); n != 8+16+28+4+8+4+4 {
		t.Errorf("all headers: %d bytes", n)
	}
	for i := range 256 {
		op := Opcode(i)
		if int(opcodeTable[op].extLen) != op.Headers().Len() {
			t.Errorf("%v: cached length", op)
		}
	}
}

func TestGopacketPayloadWithoutPad(t *testing.T) {
	f := writeOnlyFrame()
	f.Payload = []byte{1, 2, 3, 4, 5}
	f.RETH.DMALength = 5
	b, err := f.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	pkt := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	if al := pkt.ApplicationLayer(); al == nil || !bytes.Equal(al.Payload(), f.Payload) {
		t.Errorf("payload %v, want %v", al, f.Payload)
	}
}

func TestIPv4Checksum(t *testing.T) {
	// RFC 1071 by 16-bit words, the obvious way.
	ref := func(h *[20]byte) uint16 {
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(h[i])<<8 | uint32(h[i+1])
		}
		for sum > 0xFFFF {
			sum = sum>>16 + sum&0xFFFF
		}
		return ^uint16(sum)
	}
	r := rand.New(rand.NewPCG(8, 9))
	for k := range 100000 {
		var h [20]byte
		for i := range h {
			h[i] = byte(r.Uint32())
			if k%3 == 0 {
				h[i] |= 0xF0 // many carries
			}
		}
		h[10], h[11] = 0, 0
		if got, want := ipv4Checksum(&h), ref(&h); got != want {
			t.Fatalf("% x: %#x, want %#x", h, got, want)
		}
	}
}

func TestDecodeResets(t *testing.T) {
	w := writeOnlyFrame()
	wb, _ := w.AppendTo(nil)
	ack := writeOnlyFrame()
	ack.BTH.Opcode, ack.Payload, ack.AETH = RCAcknowledge, nil, AETH{Syndrome: SyndromeACK, MSN: 9}
	ab, _ := ack.AppendTo(nil)
	var f Frame
	if err := f.Decode(wb); err != nil {
		t.Fatal(err)
	}
	if err := f.Decode(ab); err != nil {
		t.Fatal(err)
	}
	if f.RETH != (RETH{}) || f.Payload != nil || f.AETH != ack.AETH {
		t.Errorf("after an ACK: RETH %+v payload %v AETH %+v", f.RETH, f.Payload, f.AETH)
	}
	for _, bad := range [][]byte{wb[:40], wb[:60]} {
		if err := f.Decode(wb); err != nil {
			t.Fatal(err)
		}
		if err := f.Decode(bad); err == nil {
			t.Fatal("bad frame accepted")
		}
		if f.BTH != (BTH{}) || f.RETH != (RETH{}) || f.Payload != nil || f.Src.IsValid() {
			t.Errorf("after an error: %+v", f)
		}
	}
	// A bad ICRC leaves the decoded frame for the caller to log.
	if err := f.Decode(append(bytes.Clone(wb[:len(wb)-4]), 0, 0, 0, 0)); !errors.Is(err, ErrBadICRC) ||
		f.BTH != w.BTH || f.RETH != w.RETH || !bytes.Equal(f.Payload, w.Payload) || f.ICRC != 0 {
		t.Errorf("bad ICRC: %v, %+v", err, f.Packet)
	}
	var p Packet
	udp := wb[etherHeaderLen+ipv4HeaderLen+udpHeaderLen:]
	for _, bad := range [][]byte{udp[:5], udp[:20], udp[:len(udp)-1]} {
		if err := p.Decode(udp); err != nil {
			t.Fatal(err)
		}
		if err := p.Decode(bad); err == nil || p.BTH != (BTH{}) || p.Payload != nil {
			t.Errorf("after error %v: %+v", err, p)
		}
	}
}

func TestDecodeResetsAcrossFamilies(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	var f Frame
	for k := range 200 {
		want := randomFrame(r, k%2 == 0)
		b, err := want.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Decode(b); err != nil {
			t.Fatal(err)
		}
		want.BTH.PadCount = uint8(-len(want.Payload) & 3)
		want.ICRC = f.ICRC
		if len(want.Payload) == 0 {
			want.Payload = nil
		}
		if !reflect.DeepEqual(f, want) {
			t.Fatalf("frame %d decoded into a reused Frame:\n got %+v\nwant %+v", k, f, want)
		}
	}
}

// TestPeekMemory: PeekMemory names the memory Decode finds in requests with
// a RETH or an AtomicETH, nothing in others, and nothing in a packet cut
// short of that header.
func TestPeekMemory(t *testing.T) {
	pkts := []Packet{
		{BTH: BTH{Opcode: RCWriteOnly}, RETH: RETH{VA: 0x1122334455667788, RKey: 0xA1B2C3D4, DMALength: 5}, Payload: []byte{1, 2, 3, 4, 5}},
		{BTH: BTH{Opcode: RCWriteFirst}, RETH: RETH{VA: 4096, RKey: 7, DMALength: 8192}, Payload: make([]byte, 1024)},
		{BTH: BTH{Opcode: RCWriteOnlyImm}, RETH: RETH{VA: 8, RKey: 9}, ImmDt: ImmDt{Data: 3}},
		{BTH: BTH{Opcode: RCReadRequest}, RETH: RETH{VA: 64, RKey: 2, DMALength: 100}},
		{BTH: BTH{Opcode: RCFetchAdd}, AtomicETH: AtomicETH{VA: 0xFFFFFFFFFFFFFFF8, RKey: 1, SwapAddData: 1}},
		{BTH: BTH{Opcode: RCCompareSwap}, AtomicETH: AtomicETH{VA: 16, RKey: 3}},
		{BTH: BTH{Opcode: RCWriteMiddle}, Payload: make([]byte, 256)},
		{BTH: BTH{Opcode: RCAcknowledge}, AETH: AETH{MSN: 1}},
		{BTH: BTH{Opcode: RCSendOnly}, Payload: []byte{9}},
	}
	for _, want := range pkts {
		b, err := want.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, 0, 0, 0, 0) // the ICRC
		var p Packet
		if err := p.Decode(b); err != nil {
			t.Fatalf("%v: %v", want.BTH.Opcode, err)
		}
		va, rkey, n, ok := PeekMemory(b)
		checkPeek(t, &p, va, rkey, n, ok)
		if !ok {
			continue
		}
		need := BTHLen + RETHLen // RC requests have no DETH before it
		if p.BTH.Opcode.Headers()&HasAtomicETH != 0 {
			need = BTHLen + AtomicETHLen
		}
		for cut := range len(b) {
			if _, _, _, ok := PeekMemory(b[:cut]); ok != (cut >= need) {
				t.Errorf("%v cut to %d bytes: PeekMemory ok = %v", want.BTH.Opcode, cut, ok)
			}
		}
	}
}
