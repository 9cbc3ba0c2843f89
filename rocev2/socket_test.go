package rocev2

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestDatagramICRCMatchesFrame checks the socket ICRC against the one
// Frame.AppendTo computes for the frame the datagram stands for: IPv4 with
// identification 0 and DF, or IPv6, whatever the masked fields hold.
func TestDatagramICRCMatchesFrame(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ src, dst string }{
		{"127.0.0.1:40000", "127.0.0.2:4791"},
		{"[::ffff:10.0.0.1]:51000", "10.0.0.2:4791"}, // mapped addresses count as IPv4
		{"[::1]:49152", "[2001:db8::7]:4791"},
	} {
		src, dst := netip.MustParseAddrPort(tc.src), netip.MustParseAddrPort(tc.dst)
		for i := 0; i < 50; i++ {
			var f Frame
			f.Src, f.Dst = src.Addr().Unmap(), dst.Addr().Unmap()
			f.SrcPort = src.Port()
			f.DontFragment = true
			f.TOS, f.TTL = uint8(rng.Uint32()), uint8(rng.Uint32()) // masked: must not matter
			f.FlowLabel = rng.Uint32() & 0xFFFFF
			f.BTH = BTH{Opcode: RCWriteOnly, PKey: DefaultPKey, DestQP: rng.Uint32() & PSNMask, AckReq: true, PSN: PSN(rng.Uint32() & PSNMask), FECN: i%2 == 0}
			f.RETH = RETH{VA: rng.Uint64(), RKey: rng.Uint32(), DMALength: uint32(i)}
			f.Payload = make([]byte, i)
			for k := range f.Payload {
				f.Payload[k] = byte(rng.Uint32())
			}
			if dst.Port() != 4791 {
				t.Fatal("frames go to 4791")
			}
			frame, err := f.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			dgram, err := f.Packet.AppendDatagram(nil, src, dst)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := dgram, frame[len(frame)-len(dgram):]; string(got) != string(want) {
				t.Fatalf("%s->%s payload %d: datagram\n%x\nis not the frame's UDP payload\n%x", src, dst, i, got, want)
			}
			var p Packet
			if err := p.DecodeDatagram(dgram, src, dst); err != nil {
				t.Fatalf("DecodeDatagram of what AppendDatagram built: %v", err)
			}
			if p.RETH != f.RETH || p.BTH.PSN != f.BTH.PSN || string(p.Payload) != string(f.Payload) {
				t.Fatalf("decoded %+v, want %+v", p, f.Packet)
			}
		}
	}
}

func TestDecodeDatagramRejects(t *testing.T) {
	src, dst := netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.1:4791")
	p := Packet{BTH: BTH{Opcode: RCWriteOnly, PKey: DefaultPKey, DestQP: 17, PSN: 5}, RETH: RETH{VA: 0x1000, RKey: 9, DMALength: 8}, Payload: []byte("12345678")}
	good, err := p.AppendDatagram(nil, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	// Every single-bit flip outside the masked BTH byte 4 is caught.
	for bit := 0; bit < 8*len(good); bit++ {
		if bit/8 == 4 {
			continue
		}
		b := append([]byte(nil), good...)
		b[bit/8] ^= 1 << (bit % 8)
		var q Packet
		if err := q.DecodeDatagram(b, src, dst); err == nil {
			t.Fatalf("flipping bit %d went unnoticed", bit)
		}
	}
	// The same bytes from another port, or to another address, fail.
	var q Packet
	other := netip.MustParseAddrPort("127.0.0.1:40001")
	if err := q.DecodeDatagram(good, other, dst); !errors.Is(err, ErrBadICRC) {
		t.Errorf("datagram from another port: %v, want ErrBadICRC", err)
	}
	if err := q.DecodeDatagram(good, src, netip.MustParseAddrPort("127.0.0.2:4791")); !errors.Is(err, ErrBadICRC) {
		t.Errorf("datagram to another address: %v, want ErrBadICRC", err)
	}
	if err := q.DecodeDatagram(good, src, netip.MustParseAddrPort("[::1]:4791")); !errors.Is(err, ErrHeader) {
		t.Errorf("mixed families: %v, want ErrHeader", err)
	}
	if _, err := DatagramICRC(src, dst, good[:BTHLen-1]); !errors.Is(err, ErrTruncated) {
		t.Errorf("short datagram: %v, want ErrTruncated", err)
	}
	if err := q.DecodeDatagram(good[:3], src, dst); !errors.Is(err, ErrTruncated) {
		t.Errorf("3-byte datagram: %v, want ErrTruncated", err)
	}
}

func TestDatagramNoAllocs(t *testing.T) {
	src, dst := netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.1:4791")
	p := Packet{BTH: BTH{Opcode: RCWriteOnly, PKey: DefaultPKey, DestQP: 17, PSN: 5}, RETH: RETH{VA: 0x1000, RKey: 9, DMALength: 64}, Payload: make([]byte, 64)}
	buf := make([]byte, 0, 256)
	var q Packet
	allocs := testing.AllocsPerRun(100, func() {
		b, err := p.AppendDatagram(buf[:0], src, dst)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.DecodeDatagram(b, src, dst); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendDatagram and DecodeDatagram allocate %v times, want 0", allocs)
	}
}

func FuzzDecodeDatagram(f *testing.F) {
	src, dst := netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.1:4791")
	p := Packet{BTH: BTH{Opcode: RCWriteOnly, PKey: DefaultPKey, DestQP: 17, PSN: 5}, RETH: RETH{VA: 0x1000, RKey: 9, DMALength: 4}, Payload: []byte("abcd")}
	good, _ := p.AppendDatagram(nil, src, dst)
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		var q Packet
		if err := q.DecodeDatagram(b, src, dst); err != nil {
			return
		}
		// Whatever decodes and verifies re-encodes to the same bytes, but
		// for pad bytes, which are sent as zeros.
		out, err := q.AppendDatagram(nil, src, dst)
		if err != nil {
			t.Fatalf("re-encoding a verified datagram: %v", err)
		}
		if len(out) != len(b) {
			t.Fatalf("re-encoded %d bytes from %d", len(out), len(b))
		}
	})
}

func BenchmarkDatagram(b *testing.B) {
	src, dst := netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.1:4791")
	p := Packet{BTH: BTH{Opcode: RCWriteOnly, PKey: DefaultPKey, DestQP: 17, PSN: 5}, RETH: RETH{VA: 0x1000, RKey: 9, DMALength: 64}, Payload: make([]byte, 64)}
	buf := make([]byte, 0, 256)
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = p.AppendDatagram(buf[:0], src, dst)
		}
	})
	good, _ := p.AppendDatagram(nil, src, dst)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		var q Packet
		for b.Loop() {
			if err := q.DecodeDatagram(good, src, dst); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestICRCCacheMatchesDatagramICRC cross-checks ICRCCache.Verify against
// DatagramICRC over IPv4 and IPv6, from the cache and not, for right and
// corrupted packets, and for one cached source's datagram to another
// destination.
func TestICRCCacheMatchesDatagramICRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pairs := [][2]netip.AddrPort{
		{netip.MustParseAddrPort("10.0.0.2:4791"), netip.MustParseAddrPort("10.0.0.1:49152")},
		{netip.MustParseAddrPort("[2001:db8::1]:4791"), netip.MustParseAddrPort("[2001:db8::2]:49152")},
		{netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:65535")},
	}
	other := netip.MustParseAddrPort("127.0.0.9:4791")
	for _, pr := range pairs {
		local := pr[0]
		for range 500 {
			src := netip.AddrPortFrom(pr[1].Addr(), uint16(rng.Uint32()))
			b := make([]byte, BTHLen+rng.IntN(300))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			icrc, err := DatagramICRC(src, local, b)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, byte(icrc), byte(icrc>>8), byte(icrc>>16), byte(icrc>>24))
			var c ICRCCache
			for pass := range 2 { // computing the header CRC, then from the cache
				if !c.Verify(src, local, b) {
					t.Fatalf("right ICRC refused (%d bytes, pass %d)", len(b), pass)
				}
			}
			if local.Addr().Is4() && c.Verify(src, other, b) {
				t.Fatalf("a datagram for %v accepted as sent to %v", local, other)
			}
			i := rng.IntN(len(b))
			if i == 4 {
				i = 0 // byte 4 of the BTH is masked
			}
			b[i] ^= 1 << rng.IntN(8)
			if c.Verify(src, local, b) {
				t.Fatalf("corrupted byte %d accepted", i)
			}
		}
	}
	var c ICRCCache
	if c.Verify(pairs[0][1], pairs[0][0], make([]byte, BTHLen+ICRCLen-1)) {
		t.Fatal("a datagram shorter than a BTH and an ICRC accepted")
	}
}
