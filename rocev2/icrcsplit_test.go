package rocev2

import (
	"errors"
	"math/rand/v2"
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
