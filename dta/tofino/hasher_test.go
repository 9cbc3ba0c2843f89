package tofino

import (
	"errors"
	"github.com/dtakit/dtakit/internal/gf2"
	"hash/crc32"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func TestReferenceMatchesIEEE(t *testing.T) {
	var dst [16]uint32
	for _, key := range []uint32{0, 1, 0xdeadbeef, 0xffffffff, 0x80000000} {
		b := []byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24), 0}
		Reference.Slots(key, dst[:])
		for n := range 256 {
			b[4] = byte(n)
			want := crc32.ChecksumIEEE(b)
			if got := Reference.Slot(key, uint8(n)); got != want {
				t.Errorf("Slot(%#x, %d) = %#x, want %#x", key, n, got, want)
			}
			if got := crc32Hash.SumBytes(b); got != uint64(want) {
				t.Errorf("crc_32 SumBytes(%x) = %#x, want %#x", b, got, want)
			}
			if n < len(dst) && dst[n] != want {
				t.Errorf("Slots(%#x)[%d] = %#x, want %#x", key, n, dst[n], want)
			}
		}
		if got, want := Reference.Checksum(key), crc32.ChecksumIEEE(b[:4]); got != want {
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
	// Not switch-compatible: it must not be mistaken for Reference.
	same := 0
	for key := range uint32(1000) {
		if XXHash.Slot(key, 0) == Reference.Slot(key, 0) {
			same++
		}
	}
	if same > 2 {
		t.Errorf("XXHash agrees with Reference on %d of 1000 keys", same)
	}
}

// TestSpread checks that the hashers spread sequential keys evenly over a
// power-of-two slot count for every copy, that copies of one key land apart,
// and that checksums rarely collide.
func TestSpread(t *testing.T) {
	const slots = 1024
	keys := 1 << 18
	if testing.Short() {
		keys = 1 << 15
	}
	for name, h := range map[string]Hasher{"Reference": Reference, "PerCopy": PerCopy, "XXHash": XXHash} {
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
		if name != "XXHash" && collisions != 0 {
			t.Errorf("%s: %d checksum collisions", name, collisions)
		}
		// Random 32-bit checksums: keys^2/2^33 expected collisions (8 at 2^18).
		if limit := keys*keys>>33 + 10; collisions > limit {
			t.Errorf("%s: %d checksum collisions among %d keys, want <= %d", name, collisions, keys, limit)
		}
	}
}

// TestPerCopyMatchesModel checks every copy 0..255 of PerCopy against the
// table-driven model (NewHash with CopyCRC) and the bitwise reference CRC,
// and copy 0 and the checksum against Reference.
func TestPerCopyMatchesModel(t *testing.T) {
	keys := []uint32{0, 1, 0x80000000, 0xdeadbeef, 0xffffffff, 0x04030201}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		keys = append(keys, rng.Uint32())
	}
	var dst [256]uint32
	for _, key := range keys {
		PerCopy.Slots(key, dst[:])
		for n := range 256 {
			c := CopyCRC(uint8(n))
			h, err := NewHash(32, c)
			if err != nil {
				t.Fatalf("copy %d: %v", n, err)
			}
			in := []byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24), byte(n)}
			want := uint32(h.SumBytes(in))
			if bit := uint32(crcBitwise(c, in)); bit != want {
				t.Fatalf("copy %d: model %#x, bitwise reference %#x", n, want, bit)
			}
			if got := PerCopy.Slot(key, uint8(n)); got != want {
				t.Errorf("Slot(%#x, %d) = %#x, want %#x", key, n, got, want)
			}
			if dst[n] != want {
				t.Errorf("Slots(%#x)[%d] = %#x, want %#x", key, n, dst[n], want)
			}
		}
		if got, want := PerCopy.Slot(key, 0), Reference.Slot(key, 0); got != want {
			t.Errorf("copy 0 of %#x: %#x, Reference has %#x", key, got, want)
		}
		if got, want := PerCopy.Checksum(key), Reference.Checksum(key); got != want {
			t.Errorf("Checksum(%#x) = %#x, Reference has %#x", key, got, want)
		}
	}
	PerCopy.Slots(1, nil) // no copies: nothing to do, no panic
	// More than 256 copies: the copy byte wraps, as Slot's uint8 does.
	long := make([]uint32, 300)
	PerCopy.Slots(0xdeadbeef, long)
	for n := 256; n < len(long); n++ {
		if long[n] != long[n-256] {
			t.Fatalf("Slots with %d copies: copy %d = %#x, copy %d = %#x", len(long), n, long[n], n-256, long[n-256])
		}
	}
}

// TestPerCopyHashes checks the direct-call forms against the Hasher
// methods: Hashes for every count of copies, and Hashes2.
func TestPerCopyHashes(t *testing.T) {
	var h PerCopyHasher
	rng := rand.New(rand.NewPCG(3, 4))
	keys := []uint32{0, 1, 0xff, 0x100, 0x80000000, 0xffffffff}
	for range 2000 {
		keys = append(keys, rng.Uint32())
	}
	var want, got [9]uint32
	for _, key := range keys {
		PerCopy.Slots(key, want[:])
		sum := PerCopy.Checksum(key)
		for n := range len(got) + 1 {
			got = [9]uint32{}
			if c := h.Hashes(key, got[:n]); c != sum {
				t.Fatalf("Hashes(%#x, %d copies) checksum = %#x, want %#x", key, n, c, sum)
			}
			if got != [9]uint32(append(want[:n:n], make([]uint32, 9-n)...)) {
				t.Fatalf("Hashes(%#x, %d copies) = %#x, want %#x", key, n, got[:n], want[:n])
			}
		}
		c, s0, s1 := h.Hashes2(key)
		if c != sum || s0 != want[0] || s1 != want[1] {
			t.Fatalf("Hashes2(%#x) = %#x %#x %#x, want %#x %#x %#x", key, c, s0, s1, sum, want[0], want[1])
		}
	}
}

// TestCopyOffsets shows the finding PerCopy exists for: under Reference the
// XOR of copy n's and copy 0's slot is the same for every key, under
// PerCopy it varies with the key.
func TestCopyOffsets(t *testing.T) {
	for _, tc := range []struct {
		name     string
		h        Hasher
		constant bool
	}{{"Reference", Reference, true}, {"PerCopy", PerCopy, false}} {
		for _, n := range []uint8{1, 2, 3, 255} {
			seen := make(map[uint32]bool)
			for key := range uint32(256) {
				k := key * 0x9E3779B1
				seen[tc.h.Slot(k, n)^tc.h.Slot(k, 0)] = true
			}
			if tc.constant && len(seen) != 1 {
				t.Errorf("%s copy %d: %d distinct offsets from copy 0, want 1", tc.name, n, len(seen))
			}
			if !tc.constant && len(seen) < 250 {
				t.Errorf("%s copy %d: %d distinct offsets from copy 0 over 256 keys, want about 256", tc.name, n, len(seen))
			}
		}
	}
}

// hopPolys are postcard's hop checksum polynomials, the default set (hops
// 1..16) and the prototype's five, which address polynomials must avoid.
var hopPolys = []uint32{
	0x1EDC6F41, 0x741B8CD7, 0x32583499, 0x814141AB, 0xA833982B, 0xF4ACFB13,
	0x7B88D0B3, 0xA133A629, 0x39792063, 0xA9901ACD, 0xC7D98DD1, 0x697842F9,
	0xED52E681, 0xA398E5E7, 0x25286CB3, 0x041C7887,
	0x1E12A700, 0x65B96595, 0x49CF878B, 0x36518F0D, 0x7A40A908,
}

func TestCopyPolynomials(t *testing.T) {
	if !gf2.Irreducible32(0x04C11DB7) || gf2.Irreducible32(0x1EDC6F41) || gf2.Irreducible32(0x04C11DB7^1) {
		t.Fatal("Rabin test disagrees with known factorisations")
	}
	if CopyPolynomial(0) != 0x04C11DB7 {
		t.Errorf("copy 0 polynomial %#x, want CRC32's 0x04C11DB7", CopyPolynomial(0))
	}
	seen := make(map[uint32]int)
	for _, p := range hopPolys {
		seen[p] = -1
	}
	for n := range 256 {
		p := CopyPolynomial(uint8(n))
		if p&1 == 0 {
			t.Errorf("copy %d: %#x is even", n, p)
		}
		if !gf2.Irreducible32(p) {
			t.Errorf("copy %d: %#x is not irreducible", n, p)
		}
		if n > 0 && p == 0x04C11DB7 {
			t.Errorf("copy %d: CRC32's polynomial", n)
		}
		if prev, ok := seen[p]; ok {
			t.Errorf("copy %d: %#x already used (by copy %d; -1 = a hop checksum)", n, p, prev)
		}
		seen[p] = n
	}
	// postcard's PerCopyAddressing memory of copies 1..15 stays where it was.
	postcard := [15]uint32{
		0x043AD9CF, 0x4703E211, 0x46FD8991, 0x399194A9, 0x7C4B9D93,
		0x13B0EE47, 0x02C6FACD, 0x23F19063, 0x3738174D, 0x18297CED,
		0xEFF16215, 0x9EC88A79, 0xD374EA93, 0x780CD079, 0x924AEAD3,
	}
	for i, p := range postcard {
		if got := CopyPolynomial(uint8(i + 1)); got != p {
			t.Errorf("copy %d: %#x, postcard used %#x", i+1, got, p)
		}
	}
}

// TestCopyPolynomialsFollowSearch re-runs the search CopyPolynomial
// documents and checks that it yields postcard's hop polynomials 7..16 and
// then copies 1..255, in order.
func TestCopyPolynomialsFollowSearch(t *testing.T) {
	taken := map[uint32]bool{0x04C11DB7: true}
	for _, p := range hopPolys[:6] {
		taken[p] = true // the published hop polynomials
	}
	for _, p := range hopPolys[16:] {
		taken[p] = true // the prototype's
	}
	var out []uint32
	s := uint64(0xD7A)
	for len(out) < 10+255 {
		s += 0x9E3779B97F4A7C15 // splitmix64
		z := s
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		z ^= z >> 31
		p := uint32(z) | 1
		if terms := bits.OnesCount32(p) + 1; terms < 13 || terms > 19 || taken[p] || !gf2.Irreducible32(p) {
			continue
		}
		taken[p] = true
		out = append(out, p)
	}
	if !slices.Equal(out[:10], hopPolys[6:16]) {
		t.Errorf("search's first ten %#x, want postcard's hops 7..16 %#x", out[:10], hopPolys[6:16])
	}
	for n := 1; n <= 255; n++ {
		if got, want := CopyPolynomial(uint8(n)), out[9+n]; got != want {
			t.Errorf("copy %d: %#x, search gives %#x", n, got, want)
		}
	}
}

func TestHasherIDs(t *testing.T) {
	for _, tc := range []struct {
		h  Hasher
		id uint8
	}{{Reference, ReferenceID}, {PerCopy, PerCopyID}, {XXHash, XXHashID}} {
		id, ok := HasherID(tc.h)
		if !ok || id != tc.id {
			t.Errorf("HasherID(%T) = %d, %v, want %d, true", tc.h, id, ok, tc.id)
		}
		h, err := HasherByID(tc.id)
		if err != nil || h != tc.h {
			t.Errorf("HasherByID(%d) = %T, %v", tc.id, h, err)
		}
	}
	if _, ok := HasherID(customHasher{f: func() {}}); ok {
		t.Error("HasherID accepts a custom hasher")
	}
	if _, ok := HasherID(nil); ok {
		t.Error("HasherID accepts nil")
	}
	for _, id := range []uint8{3, 255} {
		if h, err := HasherByID(id); !errors.Is(err, ErrHasher) || h != nil {
			t.Errorf("HasherByID(%d) = %v, %v, want ErrHasher", id, h, err)
		}
	}
}

type customHasher struct{ f func() } // not comparable, like some users' hashers

func (customHasher) Slot(uint32, uint8) uint32  { return 0 }
func (customHasher) Slots(uint32, []uint32)     {}
func (customHasher) Checksum(key uint32) uint32 { return key }
