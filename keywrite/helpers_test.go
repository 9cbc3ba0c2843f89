package keywrite

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/dtakit/dtakit/dta/tofino"
)

// ieeeHasher computes the same hashes as tofino.Switch with the standard
// library's table-driven CRC-32 (CRC-32/ISO-HDLC is the IEEE CRC). Heavy
// tests use it so their cost does not depend on tofino's implementation;
// TestIEEEHasherMatchesSwitch checks the two agree.
type ieeeHasher struct{}

func (ieeeHasher) Slot(key uint32, n uint8) uint32 {
	b := [5]byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24), n}
	return crc32.ChecksumIEEE(b[:])
}

func (h ieeeHasher) Slots(key uint32, dst []uint32) {
	for n := range dst {
		dst[n] = h.Slot(key, uint8(n))
	}
}

func (ieeeHasher) Checksum(key uint32) uint32 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], key)
	return crc32.ChecksumIEEE(b[:])
}

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
