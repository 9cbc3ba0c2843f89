package keywrite

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/dtakit/dtakit/dta/tofino"
)

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

func mustLayout(t testing.TB, slots uint64, dataSize int) Layout {
	t.Helper()
	l := Layout{Slots: slots, DataSize: dataSize}
	if err := l.Validate(); err != nil {
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

// TestReferenceMatchesCRC32 checks the addressing the package relies on:
// tofino.Reference is CRC-32/ISO-HDLC (hash/crc32's IEEE) over le32(key) ‖ u8(n)
// and le32(key).
func TestReferenceMatchesCRC32(t *testing.T) {
	for i := range uint32(200) {
		key := mix(i)
		b := binary.LittleEndian.AppendUint32(nil, key)
		for n := range uint8(4) {
			if got, want := tofino.Reference.Slot(key, n), crc32.ChecksumIEEE(append(b[:4:4], n)); got != want {
				t.Fatalf("Slot(%#x, %d) = %#x, CRC-32 says %#x", key, n, got, want)
			}
		}
		if got, want := tofino.Reference.Checksum(key), crc32.ChecksumIEEE(b); got != want {
			t.Fatalf("Checksum(%#x) = %#x, CRC-32 says %#x", key, got, want)
		}
	}
}
