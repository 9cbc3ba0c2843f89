package tofino

import (
	"math/rand/v2"
	"testing"
)

func TestKeyOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []uint32{0, 1, 0xFFFFFFFF, 0x80000000, 0xDEADBEEF}
	for range 200000 {
		keys = append(keys, rng.Uint32())
	}
	for _, h := range []Hasher{Reference, PerCopy} {
		kr, ok := h.(KeyRecoverer)
		if !ok {
			t.Fatalf("%T is not a KeyRecoverer", h)
		}
		for _, k := range keys {
			if got := kr.KeyOf(h.Checksum(k)); got != k {
				t.Fatalf("%T: KeyOf(Checksum(%#x)) = %#x", h, k, got)
			}
		}
	}
	// Every checksum names a key: a sweep of checksums maps back to itself.
	for range 100000 {
		c := rng.Uint32()
		if got := PerCopy.Checksum(PerCopy.(KeyRecoverer).KeyOf(c)); got != c {
			t.Fatalf("Checksum(KeyOf(%#x)) = %#x", c, got)
		}
	}
	if _, ok := XXHash.(KeyRecoverer); ok {
		t.Fatal("XXHash cannot recover keys but claims to")
	}
}

func BenchmarkKeyOf(b *testing.B) {
	var x uint32
	for i := range b.N {
		x += PerCopyHasher{}.KeyOf(uint32(i) * 2654435761)
	}
	if x == 1 {
		b.Log(x) // keep x live
	}
}
