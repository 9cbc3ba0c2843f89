// Package gf2 tests polynomials over GF(2) for irreducibility: the property
// the project's CRC-32 polynomials (postcard hop checksums, per-copy slot
// hashes) are chosen for, checked by the tests of the packages that use them.
package gf2

import "math/bits"

// Irreducible32 reports whether x^32 + p (p in normal form, without the x^32
// term) is irreducible, by Rabin's test for degree 32:
// x^(2^32) = x mod P and gcd(x^(2^16) - x, P) = 1 (32's only prime factor is 2).
func Irreducible32(p uint32) bool {
	y := uint32(2) // x
	for range 16 {
		y = mulMod(y, y, p)
	}
	if gcd(1<<32|uint64(p), uint64(y^2)) != 1 {
		return false
	}
	for range 16 {
		y = mulMod(y, y, p)
	}
	return y == 2
}

// mulMod multiplies a and b modulo x^32 + p.
func mulMod(a, b, p uint32) uint32 {
	var r uint32
	for i := 31; i >= 0; i-- {
		top := r >> 31
		r <<= 1
		if top == 1 {
			r ^= p
		}
		if b>>i&1 == 1 {
			r ^= a
		}
	}
	return r
}

func deg(a uint64) int { return 63 - bits.LeadingZeros64(a) }

func gcd(a, b uint64) uint64 {
	for b != 0 {
		for a != 0 && deg(a) >= deg(b) {
			a ^= b << (deg(a) - deg(b))
		}
		a, b = b, a
	}
	return a
}
