package postcard

import (
	"encoding/binary"
	"errors"
	"github.com/dtakit/dtakit/internal/gf2"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dtakit/dtakit/dta/tofino"
)

// rank32 returns the GF(2) rank of the linear part of f, an affine map on
// 32-bit words.
func rank32(f func(uint32) uint32) int {
	c := f(0)
	var rows [32]uint32
	for i := range 32 {
		rows[i] = f(1<<i) ^ c
	}
	rank := 0
	for bit := 31; bit >= 0; bit-- {
		pivot := -1
		for r := rank; r < 32; r++ {
			if rows[r]>>bit&1 == 1 {
				pivot = r
				break
			}
		}
		if pivot < 0 {
			continue
		}
		rows[rank], rows[pivot] = rows[pivot], rows[rank]
		for r := range 32 {
			if r != rank && rows[r]>>bit&1 == 1 {
				rows[r] ^= rows[rank]
			}
		}
		rank++
	}
	return rank
}

func modelChecksum(t *testing.T, set Checksums, hop int) func(uint32) uint32 {
	t.Helper()
	h, err := tofino.NewHash(32, HopCRC(set, hop))
	if err != nil {
		t.Fatal(err)
	}
	return func(k uint32) uint32 { return uint32(sumKey(h, k, set == PrototypeChecksums)) }
}

func TestDefaultPolysAreBijections(t *testing.T) {
	seen := map[uint32]bool{0x04C11DB7: true} // the chunk hash is excluded
	rng := rand.New(rand.NewPCG(1, 2))
	for hop := 1; hop <= MaxHops; hop++ {
		p := DefaultPolys[hop-1]
		if p&1 == 0 {
			t.Errorf("hop %d: polynomial %#x is even", hop, p)
		}
		if seen[p] {
			t.Errorf("hop %d: polynomial %#x repeated or reserved", hop, p)
		}
		seen[p] = true
		f := modelChecksum(t, DefaultChecksums, hop)
		if r := rank32(f); r != 32 {
			t.Errorf("hop %d (%#x): rank %d, want 32 (not a bijection)", hop, p, r)
		}
		// Sampling: an affine map is what rank32 assumes; check it, and
		// that sampled keys never collide.
		lin := newAffine(f)
		n := 4096
		if testing.Short() {
			n = 512
		}
		out := make([]uint32, 0, n)
		start := rng.Uint32()
		for i := range n {
			k := start + uint32(i)*0x9E3779B1 // distinct keys
			got := f(k)
			if got != lin.eval(k) {
				t.Fatalf("hop %d: checksum of %#x is not affine in the key", hop, k)
			}
			out = append(out, got)
		}
		slices.Sort(out)
		if d := len(slices.Compact(out)); d != n {
			t.Errorf("hop %d: %d distinct checksums of %d distinct keys", hop, d, n)
		}
	}
	// A bijection over all of a 2^20 key subspace: outputs distinct.
	f := newAffine(modelChecksum(t, DefaultChecksums, 1))
	out := make([]uint32, 1<<20)
	for k := range out {
		out[k] = f.eval(uint32(k) * 0x9E3779B1)
	}
	slices.Sort(out)
	if n := len(slices.Compact(out)); n != 1<<20 {
		t.Errorf("hop 1: %d distinct checksums of 2^20 keys", n)
	}
}

func TestSearchedPolysAreIrreducible(t *testing.T) {
	if !gf2.Irreducible32(0x04C11DB7) || gf2.Irreducible32(0x1EDC6F41) {
		t.Fatal("Rabin test disagrees with known factorisations")
	}
	for hop := 7; hop <= MaxHops; hop++ {
		if p := DefaultPolys[hop-1]; !gf2.Irreducible32(p) {
			t.Errorf("hop %d: %#x is not irreducible", hop, p)
		}
	}
}

func TestPrototypeEvenPolysLoseEntropy(t *testing.T) {
	for hop, want := range map[int]bool{1: false, 2: true, 3: true, 4: true, 5: false} {
		r := rank32(modelChecksum(t, PrototypeChecksums, hop))
		if (r == 32) != want {
			t.Errorf("prototype hop %d: rank %d, bijection=%v, want %v", hop, r, r == 32, want)
		}
	}
}

func TestCodecMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, l := range []Layout{
		{Hops: 5, SlotBits: 32, Chunks: 1 << 10, Copies: 3},
		{Hops: 16, SlotBits: 16, Chunks: 1 << 20, Copies: 16},
		{Hops: 7, SlotBits: 8, Chunks: 1, Copies: 2},
		{Hops: 5, SlotBits: 32, Chunks: 1 << 12, Copies: 1, Checksums: PrototypeChecksums},
		{Hops: 5, SlotBits: 32, Chunks: 1 << 12, Copies: 3, Addressing: PerCopyAddressing},
		{Hops: 5, SlotBits: 32, Chunks: 1 << 15, Copies: 1, Checksums: PrototypeChecksums, Addressing: PrototypeAddressing},
	} {
		c, err := NewCodec(l)
		if err != nil {
			t.Fatal(err)
		}
		for range 200 {
			k := rng.Uint32()
			for j := range l.Copies {
				want := tofino.Reference.Slot(k, uint8(j)) & (l.Chunks - 1)
				switch {
				case l.Addressing == PrototypeAddressing:
					want = tofino.Reference.Checksum(bits.ReverseBytes32(k)) & (l.Chunks - 1) // CRC32(be32(key))
				case l.Addressing == PerCopyAddressing && j > 0:
					want = tofino.PerCopy.Slot(k, uint8(j)) & (l.Chunks - 1)
				}
				if got := c.ChunkIndex(k, j); got != want {
					t.Fatalf("%+v: ChunkIndex(%#x, %d) = %d, want %d", l, k, j, got, want)
				}
			}
			if got, want := c.cacheIdx.eval(k), tofino.Reference.Checksum(k); got != want {
				t.Fatalf("cache index hash %#x, want CRC32(le32(key)) %#x", got, want)
			}
			for hop := 1; hop <= l.Hops; hop++ {
				want := modelChecksum(t, l.Checksums, hop)(k)
				if got := c.Checksum(hop, k); got != want {
					t.Fatalf("Checksum(%d, %#x) = %#x, want %#x", hop, k, got, want)
				}
				if got := c.hop[hop-1].eval(k); got != want&c.slotMask {
					t.Fatalf("truncated checksum %#x, want %#x", got, want&c.slotMask)
				}
			}
			if l.SlotBits < 32 {
				h, _ := tofino.NewHash(l.SlotBits, valueCRC(l.SlotBits))
				var b [4]byte
				binary.BigEndian.PutUint32(b[:], k)
				if got, want := c.Code(k), uint32(h.SumBytes(b[:])); got != want {
					t.Fatalf("Code(%#x) = %#x, want %#x", k, got, want)
				}
			} else if c.Code(k) != k {
				t.Fatal("b = 32 code is not the identity")
			}
		}
		if c.Code(0) != 0 {
			t.Errorf("blank code %#x, want 0", c.Code(0))
		}
	}
}

func TestPrototypeChecksumReadsBigEndianKey(t *testing.T) {
	c, err := NewCodec(Layout{Chunks: 1, Checksums: PrototypeChecksums})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := tofino.NewHash(32, tofino.CRC{Width: 32, Poly: 0x1E12A700, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF, AllowEven: true})
	if got, want := c.Checksum(1, 0x01020304), uint32(h.SumBytes([]byte{1, 2, 3, 4})); got != want {
		t.Errorf("prototype hop 1 checksum %#x, want %#x over be32(key)", got, want)
	}
}

func TestValueCodeIsBijectiveOnSmallValues(t *testing.T) {
	for _, b := range []int{8, 16} {
		c, err := NewCodec(Layout{SlotBits: b, Chunks: 1})
		if err != nil {
			t.Fatal(err)
		}
		seen := make([]bool, 1<<b)
		for v := uint32(1); v < 1<<b; v++ {
			code := c.Code(v)
			if code == 0 || code >= 1<<b || seen[code] {
				t.Fatalf("b=%d: code %#x of %d is blank, too wide or repeated", b, code, v)
			}
			seen[code] = true
		}
	}
}

func TestLayoutValidate(t *testing.T) {
	for _, tc := range []struct {
		l    Layout
		size int
		ok   bool
	}{
		{Layout{Chunks: 8}, 32, true},
		{Layout{Hops: 16, SlotBits: 32, Chunks: 8}, 64, true},
		{Layout{Hops: 3, SlotBits: 8, Chunks: 8}, 4, true},
		{Layout{Hops: 5, SlotBits: 16, Chunks: 8}, 16, true},
		{Layout{Hops: 1, SlotBits: 8, Chunks: 8}, 1, true},
		{Layout{Hops: 17, Chunks: 8}, 0, false},
		{Layout{Hops: -1, Chunks: 8}, 0, false},
		{Layout{SlotBits: 24, Chunks: 8}, 0, false},
		{Layout{Chunks: 0}, 0, false},
		{Layout{Chunks: 6}, 0, false},
		{Layout{Chunks: 8, Copies: 17}, 0, false},
		{Layout{Chunks: 8, Hops: 6, Checksums: PrototypeChecksums}, 0, false},
		{Layout{Chunks: 8, Checksums: 9}, 0, false},
		{Layout{Chunks: 8, Copies: 2, Addressing: PrototypeAddressing}, 0, false},
		{Layout{Chunks: 8, Addressing: 7}, 0, false},
	} {
		err := tc.l.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%+v: Validate = %v, want ok=%v", tc.l, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrLayout) {
			t.Errorf("%+v: error %v does not wrap ErrLayout", tc.l, err)
		}
		if tc.ok && tc.l.ChunkSize() != tc.size {
			t.Errorf("%+v: chunk size %d, want %d", tc.l, tc.l.ChunkSize(), tc.size)
		}
	}
}

func TestCopyAddressing(t *testing.T) {
	// Address and checksum hashes stay apart: no copy's polynomial is a
	// hop checksum's.
	hops := make(map[uint32]bool)
	for _, p := range DefaultPolys {
		hops[p] = true
	}
	for _, p := range prototypePolys {
		hops[p] = true
	}
	for j := range 256 {
		if p := tofino.CopyPolynomial(uint8(j)); hops[p] || !gf2.Irreducible32(p) {
			t.Errorf("copy %d: polynomial %#x is a hop polynomial or not irreducible", j, p)
		}
	}
	if CopyCRC(PerCopyAddressing, 0) != CopyCRC(ReferenceAddressing, 0) {
		t.Error("per-copy addressing changed copy 0's CRC")
	}
	rng := rand.New(rand.NewPCG(9, 9))
	sw := mustCodec(t, Layout{Chunks: 1 << 20, Copies: 4, Addressing: ReferenceAddressing})
	pc := mustCodec(t, Layout{Chunks: 1 << 20, Copies: 4}) // the default
	together := 0
	for range 1000 {
		x, y := rng.Uint32(), rng.Uint32()
		for j := 1; j < 4; j++ {
			// Reference addressing: copy j is copy 0 XOR a
			// key-independent constant, the finding section 8.5 records.
			dx := sw.ChunkIndex(x, j) ^ sw.ChunkIndex(x, 0)
			dy := sw.ChunkIndex(y, j) ^ sw.ChunkIndex(y, 0)
			if dx != dy {
				t.Fatalf("reference addressing: copy offsets differ between keys")
			}
			if pc.ChunkIndex(x, j)^pc.ChunkIndex(x, 0) == pc.ChunkIndex(y, j)^pc.ChunkIndex(y, 0) {
				together++
			}
		}
		if pc.ChunkIndex(x, 0) != sw.ChunkIndex(x, 0) {
			t.Fatal("per-copy addressing changed copy 0")
		}
	}
	if together > 5 {
		t.Errorf("per-copy addressing: %d of 3000 copy offsets shared between random keys", together)
	}
}
