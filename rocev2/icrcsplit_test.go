package rocev2

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestICRCBase checks, for every split point of random IPv4 and IPv6 frames,
// that ICRCBase is the ICRC of the packet with its tail zeroed, and rejects
// split points inside the masked headers.
func TestICRCBase(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for i := range 40 {
		f := randomFrame(r, i%2 == 1)
		f.BTH.Opcode = RCWriteOnly
		f.Payload = make([]byte, 4+r.IntN(60))
		for j := range f.Payload {
			f.Payload[j] = byte(r.Uint32())
		}
		b, err := f.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		ip := b[14 : len(b)-ICRCLen]
		min := ipv4HeaderLen + udpHeaderLen + 5
		if f.IsIPv6() {
			min = ipv6HeaderLen + udpHeaderLen + 5
		}
		for from := min; from <= len(ip); from++ {
			k, err := ICRCBase(ip, from)
			if err != nil {
				t.Fatal(err)
			}
			zeroed := append([]byte(nil), ip...)
			clear(zeroed[from:])
			want, err := ICRC(zeroed)
			if err != nil {
				t.Fatal(err)
			}
			if k != want {
				t.Fatalf("frame %d split at %d: base %#x, ICRC with the tail zeroed %#x", i, from, k, want)
			}
		}
		for _, from := range []int{min - 1, len(ip) + 1} {
			if _, err := ICRCBase(ip, from); !errors.Is(err, ErrLength) {
				t.Fatalf("split at %d: error %v, want ErrLength", from, err)
			}
		}
	}
}

// TestDeltaTables checks, over random payloads, windows and address pairs,
// that the ICRC of a payload is that of its base (the window zeroed) XOR
// DeltaTables.Sum of the window.
func TestDeltaTables(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	pairs := [][2]netip.AddrPort{
		{netip.MustParseAddrPort("10.0.0.1:4791"), netip.MustParseAddrPort("10.0.0.2:50000")},
		{netip.MustParseAddrPort("[2001:db8::1]:4791"), netip.MustParseAddrPort("[2001:db8::2]:49152")},
	}
	var tab DeltaTables
	for i := range 200 {
		pr := pairs[i%2]
		p := make([]byte, BTHLen+16+r.IntN(200))
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		w := 1 + r.IntN(16)
		off := 5 + r.IntN(len(p)-5-w+1) // after the masked BTH byte 4
		base := append([]byte(nil), p...)
		clear(base[off : off+w])
		k, err := DatagramICRC(pr[0], pr[1], base)
		if err != nil {
			t.Fatal(err)
		}
		tab.Fill(len(p) - off - w)
		want, _ := DatagramICRC(pr[0], pr[1], p)
		if got := k ^ tab.Sum(p[off:off+w]); got != want {
			t.Fatalf("%d-byte payload, window %d..%d: %#x, want %#x", len(p), off, off+w, got, want)
		}
	}
}
