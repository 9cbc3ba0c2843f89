package inband

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"
)

func TestFlowKey(t *testing.T) {
	ft := FiveTuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 6, SrcPort: 1234, DstPort: 80}
	want := crc32.ChecksumIEEE([]byte{10, 0, 0, 1, 10, 0, 0, 2, 6, 0x04, 0xD2, 0, 80})
	if got := FlowKey(ft); got != want {
		t.Fatalf("FlowKey = %#x, the reporter's CRC-32 of the 13 bytes %#x", got, want)
	}
	v6 := ft
	v6.Src, v6.Dst = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	if FlowKey(v6) == want {
		t.Fatal("an IPv6 flow hashed like the IPv4 one")
	}
	if a := testing.AllocsPerRun(100, func() { FlowKey(v6) }); a != 0 {
		t.Fatalf("FlowKey allocates: %v", a)
	}
	if p, _ := ExpectedCollisions(10_000_000); math.Abs(p-11641.5) > 1 {
		t.Fatalf("10 M flows: %v colliding pairs expected, want about 11 641", p)
	}
}

// TestFlowKeyCollisions measures colliding pairs among a million random
// IPv4 5-tuples: Poisson with mean C(n,2)/2^32 = 128, within 4.5σ.
func TestFlowKeyCollisions(t *testing.T) {
	const n = 1 << 20
	rng := rand.New(rand.NewPCG(8, 9))
	seen := make(map[uint32]uint8, n)
	pairs := 0
	var b [4]byte
	for range n {
		binary.BigEndian.PutUint32(b[:], rng.Uint32())
		src := netip.AddrFrom4(b)
		binary.BigEndian.PutUint32(b[:], rng.Uint32())
		k := FlowKey(FiveTuple{Src: src, Dst: netip.AddrFrom4(b), Proto: 17, SrcPort: uint16(rng.Uint32()), DstPort: 443})
		pairs += int(seen[k])
		seen[k]++
	}
	want, _ := ExpectedCollisions(n)
	if math.Abs(float64(pairs)-want) > 4.5*math.Sqrt(want) {
		t.Fatalf("%d colliding pairs among %d flows, expected %.1f", pairs, n, want)
	}
	t.Logf("%d colliding pairs among %d flows (expected %.1f)", pairs, n, want)
}

func BenchmarkFlowKey(b *testing.B) {
	ft := FiveTuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 6, SrcPort: 1234, DstPort: 80}
	b.ReportAllocs()
	var s uint32
	for i := 0; b.Loop(); i++ {
		ft.SrcPort = uint16(i)
		s += FlowKey(ft)
	}
	_ = s
}
