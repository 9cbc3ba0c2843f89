package gf2

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// irreducibleByTrialDivision decides irreducibility of x^32 + p the slow,
// obvious way: a reducible polynomial of degree 32 has a factor of degree
// 1..16, so divide by every one of them.
func irreducibleByTrialDivision(p uint32) bool {
	f := 1<<32 | uint64(p)
	for d := uint64(2); d < 1<<17; d++ {
		r := f
		for deg(r) >= deg(d) {
			r ^= d << (deg(r) - deg(d))
		}
		if r == 0 {
			return false
		}
	}
	return true
}

func TestIrreducible32(t *testing.T) {
	polys := []uint32{
		0x04C11DB7, // CRC-32 (IEEE)
		0x1EDC6F41, // CRC-32C (Castagnoli)
		0x741B8CD7, // CRC-32K (Koopman)
		0x814141AB, // CRC-32Q
		0x00000001, // x^32 + 1
		0x1E12A700, // even: divisible by x
		0x0000008D,
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for len(polys) < 40 {
		polys = append(polys, rng.Uint32()|1)
	}
	irreducibles := 0
	for _, p := range polys {
		want := irreducibleByTrialDivision(p)
		if got := Irreducible32(p); got != want {
			t.Errorf("Irreducible32(%#08x) = %v, trial division says %v", p, got, want)
		}
		if want {
			irreducibles++
		}
	}
	// Parity: x+1 divides a polynomial with an even number of terms.
	for _, p := range polys {
		if (bits.OnesCount32(p)+1)%2 == 0 && Irreducible32(p) {
			t.Errorf("Irreducible32(%#08x) with an even number of terms (divisible by x+1)", p)
		}
	}
	if irreducibles < 2 {
		t.Fatalf("only %d irreducible polynomials in the sample: the test checks too little", irreducibles)
	}
}
