package dta

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
)

func TestAdvertisementLayout(t *testing.T) {
	a := Advertisement{VA: 0x00007f0012345000, Length: 1 << 20, RKey: 0xA1B2C3D4, Primitive: OpKeyWrite, Geometry: []byte{9, 8, 7}}
	b, err := a.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Written out by hand from the layout in advert.go.
	want, _ := hex.DecodeString("0050341200" + "7f0000" + "00001000" + "d4c3b2a1" + "4454414b" + "01" + "01" + "0300" + "090807")
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", b, want)
	}
	got, err := ParseAdvertisement(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.VA != a.VA || got.Length != a.Length || got.RKey != a.RKey || got.Primitive != a.Primitive || !bytes.Equal(got.Geometry, a.Geometry) {
		t.Errorf("parsed %+v, want %+v", got, a)
	}

	ref := Advertisement{VA: 1, Length: 2, RKey: 3}
	b, err = ref.AppendTo(nil)
	if err != nil || len(b) != 16 {
		t.Fatalf("reference advertisement: %x, %v; want 16 bytes", b, err)
	}
	got, err = ParseAdvertisement(b)
	if err != nil || !got.IsReference() || got.VA != 1 || got.Length != 2 || got.RKey != 3 {
		t.Errorf("reference advertisement parsed as %+v, %v", got, err)
	}
}

func TestAdvertisementBad(t *testing.T) {
	good, _ := (&Advertisement{VA: 1, Length: 64, RKey: 2, Primitive: OpAppend, Geometry: []byte{1, 2}}).AppendTo(nil)
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, b := range map[string][]byte{
		"empty":            nil,
		"15 bytes":         good[:15],
		"17 bytes":         good[:17],
		"bad magic":        mod(func(b []byte) []byte { b[16] = 'X'; return b }),
		"version 3":        mod(func(b []byte) []byte { b[20] = 3; return b }),
		"v2 not Append":    mod(func(b []byte) []byte { b[20], b[21] = 2, byte(OpKeyWrite); return b }),
		"primitive 0":      mod(func(b []byte) []byte { b[21] = 0; return b }),
		"primitive 5":      mod(func(b []byte) []byte { b[21] = 5; return b }),
		"geometry short":   good[:len(good)-1],
		"trailing byte":    append(append([]byte(nil), good...), 0),
		"geometry too big": mod(func(b []byte) []byte { b[22] = 0xFF; return b }),
	} {
		if _, err := ParseAdvertisement(b); !errors.Is(err, ErrAdvertisement) {
			t.Errorf("%s: error %v, want ErrAdvertisement", name, err)
		}
	}
	for name, a := range map[string]Advertisement{
		"unknown primitive": {Primitive: 9},
		"oversized":         {Primitive: OpKeyWrite, Geometry: make([]byte, MaxGeometryLen+1)},
		"heads, Key-Write":  {Primitive: OpKeyWrite, HeadsFollow: true},
	} {
		if b, err := a.AppendTo([]byte{0xEE}); !errors.Is(err, ErrAdvertisement) || !bytes.Equal(b, []byte{0xEE}) {
			t.Errorf("%s: AppendTo = %x, %v; want the input back and ErrAdvertisement", name, b, err)
		}
	}
}

func TestAdvertisementNoAllocs(t *testing.T) {
	a := Advertisement{VA: 1, Length: 64, RKey: 2, Primitive: OpAppend, Geometry: []byte{1, 2}}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() {
		b, _ := a.AppendTo(buf[:0])
		if _, err := ParseAdvertisement(b); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("encode and parse allocate %v times, want 0", n)
	}
}

func FuzzParseAdvertisement(f *testing.F) {
	good, _ := (&Advertisement{VA: 1, Length: 64, RKey: 2, Primitive: OpAppend, Geometry: []byte{1, 2}}).AppendTo(nil)
	f.Add(good)
	f.Add(good[:16])
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAdvertisement(b)
		if err != nil {
			return
		}
		out, err := a.AppendTo(nil)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", a, err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("decode->encode changed\n%x\ninto\n%x", b, out)
		}
	})
}

// TestListHeads: a version 2 advertisement says heads follow; the heads
// messages round-trip, and malformed ones are refused.
func TestListHeads(t *testing.T) {
	b, err := (&Advertisement{VA: 1, Length: 64, RKey: 2, Primitive: OpAppend, Geometry: []byte{1}, HeadsFollow: true}).AppendTo(nil)
	if err != nil || b[20] != 2 {
		t.Fatalf("version 2 advertisement %x, %v", b, err)
	}
	if a, err := ParseAdvertisement(b); err != nil || !a.HeadsFollow {
		t.Fatalf("parsed %+v, %v; want HeadsFollow", a, err)
	}
	heads := make([]uint64, MaxHeadsPerSend)
	for i := range heads {
		heads[i] = uint64(i) << 33
	}
	m := AppendListHeads(nil, 7, heads)
	if len(m) > 1024 {
		t.Fatalf("%d heads take %d bytes, more than the 1024-byte MTU", len(heads), len(m))
	}
	got, err := ParseListHeads(m, nil)
	if err != nil || got.First != 7 || !slices.Equal(got.Heads, heads) {
		t.Fatalf("parsed first %d, %d heads, %v", got.First, len(got.Heads), err)
	}
	for name, b := range map[string][]byte{
		"empty":       nil,
		"no head":     m[:8],
		"bad magic":   append([]byte("DTAX"), m[4:]...),
		"odd length":  m[:20],
		"too many":    AppendListHeads(nil, 0, make([]uint64, MaxHeadsPerSend+1)),
		"advertising": b,
	} {
		if _, err := ParseListHeads(b, nil); !errors.Is(err, ErrAdvertisement) {
			t.Errorf("%s: error %v, want ErrAdvertisement", name, err)
		}
	}
}

func FuzzParseListHeads(f *testing.F) {
	f.Add(AppendListHeads(nil, 3, []uint64{1, 1 << 40}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseListHeads(b, nil)
		if err != nil {
			return
		}
		if out := AppendListHeads(nil, h.First, h.Heads); !bytes.Equal(out, b) {
			t.Fatalf("decode->encode changed\n%x\ninto\n%x", b, out)
		}
	})
}
