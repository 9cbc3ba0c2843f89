package rocev2

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestDatagramICRCRecoversIPv4ID: a datagram whose sender chose its own
// IPv4 identification (as Soft-RoCE and NICs do) verifies over a socket,
// and a corrupted one still does not.
func TestDatagramICRCRecoversIPv4ID(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src, dst := netip.MustParseAddrPort("10.78.0.1:55410"), netip.MustParseAddrPort("10.78.0.2:4791")
	for i := range 300 {
		payload := make([]byte, rng.IntN(1025))
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		f := Frame{Src: src.Addr(), Dst: dst.Addr(), SrcPort: src.Port(), TTL: 64, ID: uint16(rng.Uint32()), DontFragment: true,
			Packet: Packet{BTH: BTH{Opcode: RCWriteOnly, PKey: DefaultPKey, DestQP: 17, PSN: PSN(i)},
				RETH: RETH{VA: 0x1000, RKey: 7, DMALength: uint32(len(payload))}, Payload: payload}}
		b, err := f.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		udp := b[etherHeaderLen+ipv4HeaderLen+udpHeaderLen:]
		var p Packet
		if err := p.DecodeDatagram(udp, src, dst); err != nil {
			t.Fatalf("identification %#x: %v", f.ID, err)
		}
		k := rng.IntN(len(udp))
		if k == 4 {
			k = 5 // byte 4 of the BTH is masked
		}
		udp[k] ^= 1 << rng.IntN(8)
		if err := p.DecodeDatagram(udp, src, dst); !errors.Is(err, ErrBadICRC) && err == nil {
			t.Fatalf("identification %#x, byte %d flipped: accepted", f.ID, k)
		}
	}
}

// TestIPv4IDRecoveryIsNarrow: of random ICRC differences, about 2^-16 are
// taken for another identification; IPv6 recovers nothing.
func TestIPv4IDRecoveryIsNarrow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	v4a, v4b := netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:4791")
	accepted := 0
	for range 20000 {
		if DatagramICRCMatches(v4a, v4b, 60+rng.IntN(4)*4, 0, rng.Uint32()|1) {
			accepted++
		}
	}
	if accepted > 3 {
		t.Errorf("%d of 20000 random ICRC differences accepted, want about 0.3", accepted)
	}
	v6a, v6b := netip.MustParseAddrPort("[fd00::1]:1"), netip.MustParseAddrPort("[fd00::2]:4791")
	diff := ipv4IDBasis(ipv4HeaderLen + udpHeaderLen + 60)[3]
	if !DatagramICRCMatches(v4a, v4b, 60, 0, diff) || DatagramICRCMatches(v6a, v6b, 60, 0, diff) {
		t.Error("an identification difference must match over IPv4 only")
	}
	if n := testing.AllocsPerRun(100, func() { DatagramICRCMatches(v4a, v4b, 60, 0, diff) }); n != 0 {
		t.Errorf("DatagramICRCMatches allocates %v times", n)
	}
}
