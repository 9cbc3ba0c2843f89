package target

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
)

// TestFastICRCMatchesRocev2 cross-checks the received packets' ICRC check
// against rocev2.DatagramICRC, over IPv4 and IPv6. (The responses' ICRCs
// are rc.Responder's, cross-checked by rc's TestResponsesMatchAppendDatagram.)
func TestFastICRCMatchesRocev2(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pairs := [][2]netip.AddrPort{
		{targetAddr, peerAddr},
		{netip.MustParseAddrPort("[2001:db8::1]:4791"), netip.MustParseAddrPort("[2001:db8::2]:49152")},
		{netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:65535")},
	}
	for _, pr := range pairs {
		for range 500 {
			dst := netip.AddrPortFrom(pr[1].Addr(), uint16(rng.Uint32()))
			// Verification of a received packet of random length and bytes,
			// right and corrupted.
			b := make([]byte, rocev2.BTHLen+rng.IntN(300))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			icrc, err := rocev2.DatagramICRC(dst, pr[0], b)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, byte(icrc), byte(icrc>>8), byte(icrc>>16), byte(icrc>>24))
			var hc headerCache
			for pass := range 2 { // computing the header CRC, then from the cache
				if !hc.verify(dst, pr[0], b) {
					t.Fatalf("right ICRC refused (%d bytes, pass %d)", len(b), pass)
				}
			}
			i := rng.IntN(len(b))
			if i == 4 {
				i = 0 // byte 4 of the BTH is masked
			}
			b[i] ^= 1 << rng.IntN(8)
			if hc.verify(dst, pr[0], b) {
				t.Fatalf("corrupted byte %d accepted", i)
			}
		}
	}
}
