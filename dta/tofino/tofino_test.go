package tofino

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomCRC returns a CRC with random parameters, even polynomials included.
func randomCRC(r *rand.Rand) CRC {
	w := []int{8, 16, 32, 64}[r.IntN(4)]
	m := widthMask(w)
	return CRC{
		Width:     w,
		Poly:      r.Uint64() & m,
		Reversed:  r.IntN(2) == 1,
		Init:      r.Uint64() & m,
		XorOut:    r.Uint64() & m,
		Extend:    r.IntN(2) == 1,
		AllowEven: true,
	}
}

// TestSumBytesMatchesReference cross-checks the table-driven path with the
// bitwise reference across widths, reflection, every length up to 80 (every
// mix of 8-byte, 4-byte and single-byte steps) and unaligned starts.
func TestSumBytesMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 96)
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	for range rounds {
		c := randomCRC(r)
		outBits := 1 + r.IntN(64)
		h, err := NewHash(outBits, c)
		if err != nil {
			t.Fatal(err)
		}
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		for n := 0; n <= 80; n++ {
			off := r.IntN(8)
			b := buf[off : off+n]
			want := outputReference(c, outBits, crcBitwise(c, b))
			if got := h.SumBytes(b); got != want {
				t.Fatalf("%+v W=%d len %d: SumBytes = %#x, reference %#x", c, outBits, n, got, want)
			}
		}
	}
}

// TestOutput checks truncation and repetition on a known CRC, including a
// width that the CRC width does not divide.
func TestOutput(t *testing.T) {
	c, _ := Predefined("crc_16") // CRC-16/ARC, check 0xBB3D
	msg := []byte("123456789")
	for _, tc := range []struct {
		outBits int
		extend  bool
		want    uint64
	}{
		{16, true, 0xBB3D},
		{8, true, 0x3D},
		{1, true, 0x1},
		{12, false, 0xB3D},
		{32, true, 0xBB3DBB3D},
		{40, true, 0x3DBB3DBB3D},
		{20, true, 0xDBB3D},
		{64, true, 0xBB3DBB3DBB3DBB3D},
		{32, false, 0xBB3D},
		{64, false, 0xBB3D},
	} {
		c.Extend = tc.extend
		h, err := NewHash(tc.outBits, c)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.SumBytes(msg); got != tc.want {
			t.Errorf("W=%d extend=%v: %#x, want %#x", tc.outBits, tc.extend, got, tc.want)
		}
		if got := outputReference(c, tc.outBits, 0xBB3D); got != tc.want {
			t.Errorf("reference W=%d extend=%v: %#x, want %#x", tc.outBits, tc.extend, got, tc.want)
		}
		if h.OutBits() != tc.outBits || h.CRC() != c {
			t.Errorf("accessors: %d %+v", h.OutBits(), h.CRC())
		}
	}
}

func TestNewHashErrors(t *testing.T) {
	good := CRC{Width: 16, Poly: 0x1021}
	for _, tc := range []struct {
		outBits int
		c       CRC
		says    string
	}{
		{16, CRC{Width: 12, Poly: 0x80F}, "width 12"},
		{16, CRC{Width: 0, Poly: 1}, "width 0"},
		{16, CRC{Width: 16, Poly: 0x1020}, "even"},
		{16, CRC{Width: 16, Poly: 0x11021}, "polynomial 0x11021 wider than 16 bits"},
		{16, CRC{Width: 16, Poly: 0x1021, Init: 0x10000}, "init 0x10000 wider"},
		{16, CRC{Width: 8, Poly: 0x07, XorOut: 0x155}, "xor 0x155 wider"},
		{0, good, "output width 0"},
		{65, good, "output width 65"},
		{-1, good, "output width -1"},
	} {
		h, err := NewHash(tc.outBits, tc.c)
		if h != nil || !errors.Is(err, ErrInvalidCRC) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("NewHash(%d, %+v) = %v, %v; want ErrInvalidCRC saying %q", tc.outBits, tc.c, h, err, tc.says)
		}
	}
	even := CRC{Width: 32, Poly: 0x1E12A700, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF, AllowEven: true}
	if _, err := NewHash(32, even); err != nil {
		t.Errorf("even polynomial with AllowEven: %v", err)
	}
}

// randomFields returns a random field list as the reference takes it, and
// the same list built with FieldList.
func randomFields(r *rand.Rand, maxBits int) ([]uint64, []int, *FieldList) {
	var values []uint64
	var widths []int
	f := new(FieldList)
	total := 0
	for range r.IntN(12) {
		w := 1 + r.IntN(64)
		if total+w > maxBits {
			break
		}
		v := r.Uint64() & widthMask(w)
		if r.IntN(4) == 0 {
			w = 8
			v &= 0xFF
			f.AddBytes([]byte{byte(v)})
		} else {
			f.Add(v, w)
		}
		values = append(values, v)
		widths = append(widths, w)
		total += w
	}
	return values, widths, f
}

func TestSumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	rounds := 3000
	if testing.Short() {
		rounds = 500
	}
	for range rounds {
		c := randomCRC(r)
		outBits := 1 + r.IntN(64)
		h, err := NewHash(outBits, c)
		if err != nil {
			t.Fatal(err)
		}
		values, widths, f := randomFields(r, MaxFieldListBits)
		want := sumReference(c, outBits, values, widths)
		got, err := h.Sum(f)
		if err != nil || got != want {
			t.Fatalf("%+v W=%d fields %v/%v: Sum = %#x, %v; reference %#x", c, outBits, values, widths, got, err, want)
		}
	}
}

// TestFieldListLayout pins the bit layout: fields most significant first,
// zero-extension at the top.
func TestFieldListLayout(t *testing.T) {
	var f FieldList
	f.Add(0x5, 3).Add(0x1, 1).Add(0xABC, 12).Add(0x1, 1)
	if f.Len() != 17 {
		t.Fatalf("Len = %d", f.Len())
	}
	// 101 1 101010111100 1, zero-extended to 24 bits: 0x017579.
	crc := CRC{Width: 32, Poly: 0x04C11DB7, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF}
	h, _ := NewHash(32, crc)
	got, err := h.Sum(&f)
	if want := h.SumBytes([]byte{0x01, 0x75, 0x79}); err != nil || got != want {
		t.Errorf("Sum = %#x, %v; want SumBytes(017579) = %#x", got, err, want)
	}
	// A 15-bit field hashes as its 2 zero-extended bytes: with init 0xFFFF
	// the leading zero bit matters, so this differs from hashing 15 bits.
	f.Reset()
	f.Add(0x56D9&0x7FFF, 15)
	got, _ = h.Sum(&f)
	if want := h.SumBytes([]byte{0x56, 0xD9}); got != want {
		t.Errorf("15-bit field: %#x, want %#x", got, want)
	}
	// The key's four bytes reversed then the copy byte, as the spec hashes
	// slots, is le32(key) ‖ u8(n).
	f.Reset()
	key := uint32(0xDEADBEEF)
	f.Add(uint64(key>>24|key>>8&0xFF00|key<<8&0xFF0000|key<<24), 32).Add(7, 8)
	got, _ = h.Sum(&f)
	if want := uint64(Reference.Slot(key, 7)); got != want {
		t.Errorf("le32(key) ‖ u8(7): %#x, want Reference.Slot = %#x", got, want)
	}
	// A 64-bit field takes its whole value.
	f.Reset()
	f.Add(0x0102030405060708, 64)
	got, _ = h.Sum(&f)
	if want := h.SumBytes([]byte{1, 2, 3, 4, 5, 6, 7, 8}); got != want {
		t.Errorf("64-bit field: %#x, want %#x", got, want)
	}
}

func TestFieldListErrors(t *testing.T) {
	h, _ := NewPredefined(32, "CRC32")
	for _, tc := range []struct {
		name  string
		build func(f *FieldList)
		says  string
	}{
		{"width 0", func(f *FieldList) { f.Add(0, 0) }, "width"},
		{"width 65", func(f *FieldList) { f.Add(1, 65) }, "width"},
		{"negative width", func(f *FieldList) { f.Add(1, -8) }, "width"},
		{"value too wide", func(f *FieldList) { f.Add(0x100, 8) }, "value wider"},
		{"1-bit field holding 2", func(f *FieldList) { f.Add(2, 1) }, "value wider"},
		{"full by fields", func(f *FieldList) {
			for range MaxFieldListBits/64 + 1 {
				f.Add(1, 64)
			}
		}, "longer than 1024 bits"},
		{"full by bytes", func(f *FieldList) { f.Add(1, 1).AddBytes(make([]byte, MaxFieldListBits/8)) }, "longer"},
	} {
		var f FieldList
		f.Add(0xA, 4)
		tc.build(&f)
		f.Add(1, 1) // ignored: the error is sticky
		err := f.Err()
		if !errors.Is(err, ErrFieldList) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: Err() = %v, want ErrFieldList saying %q", tc.name, err, tc.says)
		}
		if v, err2 := h.Sum(&f); v != 0 || err2 != err {
			t.Errorf("%s: Sum = %#x, %v; want 0, %v", tc.name, v, err2, err)
		}
		f.Reset()
		if f.Err() != nil || f.Len() != 0 {
			t.Errorf("%s: after Reset: %v, %d bits", tc.name, f.Err(), f.Len())
		}
		// Reset leaves no stale bits behind.
		f.Add(0, 16)
		v, _ := h.Sum(&f)
		if want := h.SumBytes([]byte{0, 0}); v != want {
			t.Errorf("%s: after Reset, Sum of a zero field = %#x, want %#x", tc.name, v, want)
		}
	}
	// Exactly full is fine.
	var f FieldList
	f.AddBytes(make([]byte, MaxFieldListBits/8-1)).Add(0x7F, 7).Add(1, 1)
	if f.Err() != nil || f.Len() != MaxFieldListBits {
		t.Errorf("full list: %v, %d bits", f.Err(), f.Len())
	}
}

func TestAllocs(t *testing.T) {
	h, _ := NewPredefined(32, "crc_32")
	h16, _ := NewPredefined(13, "crc_16_riello")
	b := make([]byte, 64)
	var dst [8]uint32
	var sink uint64
	var f FieldList
	for name, fn := range map[string]func(){
		"SumBytes": func() { sink += h.SumBytes(b[:5]) },
		"StackInput": func() {
			// A caller's stack buffer must stay on the stack: SumBytes must
			// not let its argument escape.
			var in [5]byte
			in[0] = byte(sink)
			sink += h.SumBytes(in[:])
		},
		"SumBytes64":   func() { sink += h16.SumBytes(b) },
		"Sum":          func() { f.Reset(); f.Add(3, 15).Add(9, 24); v, _ := h16.Sum(&f); sink += v },
		"FieldErr":     func() { f.Reset(); f.Add(3, 99); _, err := h.Sum(&f); sink += uint64(len(err.Error())) },
		"Slot":         func() { sink += uint64(Reference.Slot(7, 1)) },
		"Slots":        func() { Reference.Slots(7, dst[:]) },
		"Checksum":     func() { sink += uint64(Reference.Checksum(7)) },
		"PerCopySlot":  func() { sink += uint64(PerCopy.Slot(7, 1)) },
		"PerCopySlots": func() { PerCopy.Slots(7, dst[:]) },
		"PerCopyCheck": func() { sink += uint64(PerCopy.Checksum(7)) },
		"XXHashSlot":   func() { sink += uint64(XXHash.Slot(7, 1)) },
		"XXHashSlots":  func() { XXHash.Slots(7, dst[:]) },
		"XXHashCheck":  func() { sink += uint64(XXHash.Checksum(7)) },
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}
	_ = sink
}
