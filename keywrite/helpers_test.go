package keywrite

import (
	"encoding/binary"
	"testing"

	"github.com/dtakit/dtakit/dta/tofino"
)

// ieeeHasher computes the same hashes as tofino.Switch with slicing-by-4
// tables of CRC-32/ISO-HDLC (the IEEE CRC). Heavy tests and the benchmarks'
// fill use it so their cost does not depend on tofino's implementation;
// TestIEEEHasherMatchesSwitch checks the two agree.
type ieeeHasher struct{}

var ieeeTables = func() (t [4][256]uint32) {
	for i := range 256 {
		c := uint32(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xedb88320
			} else {
				c >>= 1
			}
		}
		t[0][i] = c
	}
	for i := range 256 {
		for k := 1; k < 4; k++ {
			t[k][i] = t[k-1][i]>>8 ^ t[0][t[k-1][i]&0xff]
		}
	}
	return t
}()

// ieeeState is the CRC register (before the final xor) after le32(key).
func ieeeState(key uint32) uint32 {
	c := ^uint32(0) ^ key
	return ieeeTables[3][c&0xff] ^ ieeeTables[2][c>>8&0xff] ^ ieeeTables[1][c>>16&0xff] ^ ieeeTables[0][c>>24]
}

func (ieeeHasher) Slot(key uint32, n uint8) uint32 {
	c := ieeeState(key)
	return ^(c>>8 ^ ieeeTables[0][(c^uint32(n))&0xff])
}

func (h ieeeHasher) Slots(key uint32, dst []uint32) {
	c := ieeeState(key)
	for n := range dst {
		dst[n] = ^(c>>8 ^ ieeeTables[0][(c^uint32(n))&0xff])
	}
}

func (ieeeHasher) Checksum(key uint32) uint32 { return ^ieeeState(key) }

// truncHasher keeps only the low bits of another hasher's checksum, to make
// checksum collisions frequent enough to measure.
type truncHasher struct {
	tofino.Hasher
	bits int
}

func (h truncHasher) Checksum(key uint32) uint32 {
	return h.Hasher.Checksum(key) & (1<<h.bits - 1)
}

// mix is a bijection on uint32: distinct inputs give distinct keys.
func mix(i uint32) uint32 {
	i ^= i >> 15
	i *= 0x2c1b3c6d
	i ^= i >> 12
	i *= 0x297a2d39
	i ^= i >> 15
	return i
}

// valueOf is the data the tests store for key.
func valueOf(key uint32, size int) []byte {
	b := make([]byte, size)
	fillValue(b, key)
	return b
}

func fillValue(b []byte, key uint32) {
	v := key*0x9e3779b1 + 1
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], v)
		v = v*0x9e3779b1 + uint32(i)
	}
}

func mustLayout(t testing.TB, slots uint64, dataSize int, opts ...Option) Layout {
	t.Helper()
	l, err := NewLayout(slots, dataSize, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustStore(t testing.TB, l Layout, region []byte) *Store {
	t.Helper()
	s, err := NewStore(l, region)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIEEEHasherMatchesSwitch(t *testing.T) {
	for i := range uint32(200) {
		key := mix(i)
		for n := range uint8(4) {
			if got, want := (ieeeHasher{}).Slot(key, n), tofino.Switch.Slot(key, n); got != want {
				t.Fatalf("Slot(%#x, %d) = %#x, tofino.Switch says %#x", key, n, got, want)
			}
		}
		if got, want := (ieeeHasher{}).Checksum(key), tofino.Switch.Checksum(key); got != want {
			t.Fatalf("Checksum(%#x) = %#x, tofino.Switch says %#x", key, got, want)
		}
	}
}
