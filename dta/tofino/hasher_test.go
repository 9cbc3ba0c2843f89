package tofino

import (
	"hash/crc32"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func TestSwitchMatchesIEEE(t *testing.T) {
	var dst [16]uint32
	for _, key := range []uint32{0, 1, 0xdeadbeef, 0xffffffff, 0x80000000} {
		b := []byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24), 0}
		Switch.Slots(key, dst[:])
		for n := range 256 {
			b[4] = byte(n)
			want := crc32.ChecksumIEEE(b)
			if got := Switch.Slot(key, uint8(n)); got != want {
				t.Errorf("Slot(%#x, %d) = %#x, want %#x", key, n, got, want)
			}
			if got := crc32Hash.SumBytes(b); got != uint64(want) {
				t.Errorf("crc_32 SumBytes(%x) = %#x, want %#x", b, got, want)
			}
			if n < len(dst) && dst[n] != want {
				t.Errorf("Slots(%#x)[%d] = %#x, want %#x", key, n, dst[n], want)
			}
		}
		if got, want := Switch.Checksum(key), crc32.ChecksumIEEE(b[:4]); got != want {
			t.Errorf("Checksum(%#x) = %#x, want %#x", key, got, want)
		}
	}
}

// TestXXHashDefinition pins what XXHash hashes: the low 32 bits of XXH64
// over le32(key) ‖ u8(n), and over le32(key) for the checksum.
func TestXXHashDefinition(t *testing.T) {
	var dst [4]uint32
	for _, key := range []uint32{0, 0x04030201, 0xdeadbeef} {
		XXHash.Slots(key, dst[:])
		for n := range 4 {
			in := []byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24), byte(n)}
			want := uint32(xxhash.Sum64(in))
			if got := XXHash.Slot(key, uint8(n)); got != want {
				t.Errorf("Slot(%#x, %d) = %#x, want %#x", key, n, got, want)
			}
			if dst[n] != want {
				t.Errorf("Slots(%#x)[%d] = %#x, want %#x", key, n, dst[n], want)
			}
		}
		in := []byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24)}
		if got, want := XXHash.Checksum(key), uint32(xxhash.Sum64(in)); got != want {
			t.Errorf("Checksum(%#x) = %#x, want %#x", key, got, want)
		}
	}
	// Not switch-compatible: it must not be mistaken for Switch.
	same := 0
	for key := range uint32(1000) {
		if XXHash.Slot(key, 0) == Switch.Slot(key, 0) {
			same++
		}
	}
	if same > 2 {
		t.Errorf("XXHash agrees with Switch on %d of 1000 keys", same)
	}
}

// TestSpread checks that both hashers spread sequential keys evenly over a
// power-of-two slot count for every copy, that copies of one key land apart,
// and that checksums rarely collide.
func TestSpread(t *testing.T) {
	const slots = 1024
	keys := 1 << 18
	if testing.Short() {
		keys = 1 << 15
	}
	for name, h := range map[string]Hasher{"Switch": Switch, "XXHash": XXHash} {
		var dst [4]uint32
		counts := make([][slots]int, len(dst))
		sameSlot := 0
		seen := make(map[uint32]bool, keys)
		collisions := 0
		for key := range uint32(keys) {
			h.Slots(key, dst[:])
			for n, s := range dst {
				counts[n][s%slots]++
			}
			if dst[0]%slots == dst[1]%slots {
				sameSlot++
			}
			c := h.Checksum(key)
			if seen[c] {
				collisions++
			}
			seen[c] = true
		}
		// Chi-square over 1023 degrees of freedom: mean 1023, sd ~45; 1250
		// is five standard deviations out.
		expect := float64(keys) / slots
		for n := range counts {
			chi := 0.0
			for _, c := range counts[n] {
				d := float64(c) - expect
				chi += d * d / expect
			}
			if chi > 1250 {
				t.Errorf("%s copy %d: chi-square %.0f over %d slots, keys not spread", name, n, chi, slots)
			}
		}
		// Copies 0 and 1 share a slot with probability 1/slots.
		if limit := 2*keys/slots + 20; sameSlot > limit {
			t.Errorf("%s: copies 0 and 1 share a slot for %d keys, want <= %d", name, sameSlot, limit)
		}
		// CRC32 of a 4-byte key is a bijection: no collisions at all.
		if name == "Switch" && collisions != 0 {
			t.Errorf("Switch: %d checksum collisions", collisions)
		}
		// Random 32-bit checksums: keys^2/2^33 expected collisions (8 at 2^18).
		if limit := keys*keys>>33 + 10; collisions > limit {
			t.Errorf("%s: %d checksum collisions among %d keys, want <= %d", name, collisions, keys, limit)
		}
	}
}
