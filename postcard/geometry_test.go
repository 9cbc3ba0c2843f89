package postcard

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dtakit/dtakit/dta"
)

func TestGeometryRoundTrip(t *testing.T) {
	for _, l := range []Layout{
		{Chunks: 1 << 16}, // every default
		{Hops: 5, SlotBits: 32, Chunks: 1 << 20, Copies: 2},
		{Hops: 16, SlotBits: 16, Chunks: 1 << 31, Copies: 16, Addressing: ReferenceAddressing},
		{Hops: 1, SlotBits: 8, Chunks: 1, Copies: 3},
		{Hops: 5, SlotBits: 32, Chunks: 1 << 15, Copies: 1, Checksums: PrototypeChecksums, Addressing: PrototypeAddressing},
		{Hops: 4, SlotBits: 16, Chunks: 1 << 10, Copies: 2, Checksums: PrototypeChecksums},
	} {
		b, err := l.AppendBinary([]byte{0xEE})
		if err != nil || len(b) != 1+GeometryLen || b[0] != 0xEE || len(b)-1 > dta.MaxGeometryLen {
			t.Fatalf("AppendBinary(%+v): % x, %v", l, b, err)
		}
		got, err := ParseLayout(b[1:])
		if err != nil {
			t.Fatalf("ParseLayout(% x): %v", b[1:], err)
		}
		if want := l.withDefaults(); got != want {
			t.Errorf("round trip: %+v, want %+v", got, want)
		}
	}
}

// TestGeometryBytes pins the byte layout of docs/DTA-WIRE.md section 8.5.
func TestGeometryBytes(t *testing.T) {
	b, err := Layout{Chunks: 1 << 20, Copies: 2}.AppendBinary(nil)
	want := []byte{
		1,  // version
		5,  // hops (default)
		32, // slot bits (default)
		20, // log2 C
		2,  // copies
		0,  // addressing: per-copy (default)
		0,  // checksums: dtakit's default
		0,  // value code
	}
	if err != nil || !bytes.Equal(b, want) {
		t.Errorf("geometry % x, %v, want % x", b, err, want)
	}
	l := Layout{Hops: 5, SlotBits: 8, Chunks: 1 << 15, Copies: 1, Checksums: PrototypeChecksums, Addressing: PrototypeAddressing}
	b, err = l.AppendBinary(nil)
	if want := []byte{1, 5, 8, 15, 1, 2, 1, 0}; err != nil || !bytes.Equal(b, want) {
		t.Errorf("geometry % x, %v, want % x", b, err, want)
	}
	b, err = Layout{Chunks: 2, Copies: 3, Addressing: ReferenceAddressing}.AppendBinary(nil)
	if want := []byte{1, 5, 32, 1, 3, 1, 0, 0}; err != nil || !bytes.Equal(b, want) {
		t.Errorf("geometry % x, %v, want % x", b, err, want)
	}
}

func TestGeometryInvalidLayout(t *testing.T) {
	for _, l := range []Layout{{}, {Chunks: 3}, {Chunks: 4, Copies: 2, Addressing: PrototypeAddressing}, {Chunks: 4, Hops: 17}} {
		b, err := l.AppendBinary([]byte{7})
		if !errors.Is(err, ErrLayout) || !bytes.Equal(b, []byte{7}) {
			t.Errorf("%+v: % x, %v, want ErrLayout and b unchanged", l, b, err)
		}
	}
}

func TestParseLayoutBad(t *testing.T) {
	good := []byte{1, 5, 32, 20, 2, 0, 0, 0}
	if _, err := ParseLayout(good); err != nil {
		t.Fatalf("good geometry: %v", err)
	}
	with := func(i int, v byte) []byte {
		b := bytes.Clone(good)
		b[i] = v
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrGeometry},
		{"short", good[:7], ErrGeometry},
		{"long", append(bytes.Clone(good), 0), ErrGeometry},
		{"version 0", with(0, 0), ErrGeometry},
		{"version 2", with(0, 2), ErrGeometry},
		{"value code 1", with(7, 1), ErrGeometry},
		{"hops 0", with(1, 0), ErrLayout},
		{"hops 17", with(1, 17), ErrLayout},
		{"slot bits 0", with(2, 0), ErrLayout},
		{"slot bits 24", with(2, 24), ErrLayout},
		{"log2 C 32", with(3, 32), ErrLayout},
		{"copies 0", with(4, 0), ErrLayout},
		{"copies 17", with(4, 17), ErrLayout},
		{"addressing 3", with(5, 3), ErrLayout},
		{"prototype addressing, 2 copies", with(5, 2), ErrLayout},
		{"checksums 2", with(6, 2), ErrLayout},
		{"prototype checksums, 6 hops", []byte{1, 6, 32, 20, 1, 0, 1, 0}, ErrLayout},
	} {
		l, err := ParseLayout(tc.b)
		if !errors.Is(err, tc.want) || l != (Layout{}) {
			t.Errorf("%s: %+v, %v, want %v", tc.name, l, err, tc.want)
		}
	}
}

func FuzzParseLayout(f *testing.F) {
	f.Add([]byte{1, 5, 32, 20, 2, 0, 0, 0})
	f.Add([]byte{1, 5, 8, 15, 1, 2, 1, 0})
	f.Add([]byte{1, 16, 16, 31, 16, 1, 0, 0})
	f.Add([]byte{1, 6, 32, 20, 1, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLayout(b)
		if err != nil {
			if !errors.Is(err, ErrGeometry) && !errors.Is(err, ErrLayout) {
				t.Fatalf("error %v wraps neither ErrGeometry nor ErrLayout", err)
			}
			return
		}
		if _, err := NewCodec(l); err != nil {
			t.Fatalf("ParseLayout(% x) accepted a layout NewCodec rejects: %v", b, err)
		}
		out, err := l.AppendBinary(nil)
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("ParseLayout(% x) re-encodes as % x, %v", b, out, err)
		}
	})
}
