package keywrite

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/dta/tofino"
)

func TestGeometryRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		slots uint64
		data  int
		h     tofino.Hasher
	}{
		{1, 4, nil},
		{1 << 20, 4, tofino.Reference},
		{1 << 16, 12, tofino.PerCopy},
		{1 << 32, 28, tofino.XXHash},
		{8, 1 << 30, tofino.PerCopy},
	} {
		l := Layout{Slots: tc.slots, DataSize: tc.data, Hasher: tc.h}
		if err := l.Validate(); err != nil {
			if tc.data == 1<<30 {
				continue // 2^30-byte slots do not fit a 32-bit address space
			}
			t.Fatal(err)
		}
		b, err := l.AppendBinary([]byte{0xEE})
		if err != nil || len(b) != 1+GeometryLen || b[0] != 0xEE {
			t.Fatalf("AppendBinary(%d, %d): % x, %v", tc.slots, tc.data, b, err)
		}
		got, err := ParseLayout(b[1:])
		if err != nil {
			t.Fatalf("ParseLayout(% x): %v", b[1:], err)
		}
		if l.Hasher = l.hasher(); got != l {
			t.Errorf("round trip of %d slots, %d bytes, %T: got %d slots, %d bytes, %T",
				l.Slots, l.DataSize, l.Hasher, got.Slots, got.DataSize, got.Hasher)
		}
		// It fits a collector advertisement and survives one.
		a := dta.Advertisement{VA: 1, Length: 2, RKey: 3, Primitive: dta.OpKeyWrite, Geometry: b[1:]}
		if len(a.Geometry) > dta.MaxGeometryLen {
			t.Fatalf("geometry %d bytes, above dta.MaxGeometryLen", len(a.Geometry))
		}
		wire, err := a.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		back, err := dta.ParseAdvertisement(wire)
		if err != nil || !bytes.Equal(back.Geometry, b[1:]) {
			t.Errorf("through an advertisement: % x, %v", back.Geometry, err)
		}
	}
}

// TestGeometryBytes pins the byte layout of docs/DTA-WIRE.md section 8.4.
func TestGeometryBytes(t *testing.T) {
	l := Layout{Slots: 1 << 20, DataSize: 12}
	err := l.Validate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.AppendBinary(nil)
	want := []byte{
		1,           // version
		20,          // log2 S
		1,           // hasher: PerCopy, the default
		12, 0, 0, 0, // le32 data size
	}
	if err != nil || !bytes.Equal(b, want) {
		t.Errorf("geometry % x, %v, want % x", b, err, want)
	}
	l = Layout{Slots: 1 << 32, DataSize: 0x104, Hasher: tofino.Reference}
	b, err = l.AppendBinary(nil)
	if want := []byte{1, 32, 0, 0x04, 0x01, 0, 0}; err != nil || !bytes.Equal(b, want) {
		t.Errorf("geometry % x, %v, want % x", b, err, want)
	}
}

func TestGeometryUnencodable(t *testing.T) {
	l := Layout{Slots: 16, DataSize: 4, Hasher: truncHasher{tofino.PerCopy, 8}}
	b, err := l.AppendBinary([]byte{7})
	if !errors.Is(err, ErrGeometry) || !bytes.Equal(b, []byte{7}) {
		t.Errorf("custom hasher: % x, %v, want ErrGeometry and b unchanged", b, err)
	}
	if _, err := (Layout{}).AppendBinary(nil); !errors.Is(err, ErrLayout) {
		t.Errorf("zero layout: %v, want ErrLayout", err)
	}
}

func TestParseLayoutBad(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrGeometry},
		{"short", []byte{1, 4, 1, 4, 0, 0}, ErrGeometry},
		{"long", []byte{1, 4, 1, 4, 0, 0, 0, 0}, ErrGeometry},
		{"version 0", []byte{0, 4, 1, 4, 0, 0, 0}, ErrGeometry},
		{"version 2", []byte{2, 4, 1, 4, 0, 0, 0}, ErrGeometry},
		{"hasher 3", []byte{1, 4, 3, 4, 0, 0, 0}, ErrGeometry},
		{"hasher 255", []byte{1, 4, 255, 4, 0, 0, 0}, tofino.ErrHasher},
		{"log2 S 33", []byte{1, 33, 1, 4, 0, 0, 0}, ErrLayout},
		{"log2 S 255", []byte{1, 255, 1, 4, 0, 0, 0}, ErrLayout},
		{"data 0", []byte{1, 4, 1, 0, 0, 0, 0}, ErrLayout},
		{"data 6", []byte{1, 4, 1, 6, 0, 0, 0}, ErrLayout},
		{"data 2^30+4", []byte{1, 4, 1, 4, 0, 0, 0x40}, ErrLayout},
		{"data 2^32-4", []byte{1, 4, 1, 0xFC, 0xFF, 0xFF, 0xFF}, ErrLayout},
		{"too big", []byte{1, 32, 1, 0, 0, 0, 0x40}, ErrLayout}, // 2^32 slots of 2^31 bytes
	} {
		l, err := ParseLayout(tc.b)
		if !errors.Is(err, tc.want) || l != (Layout{}) {
			t.Errorf("%s: %v (layout %+v), want %v", tc.name, err, l, tc.want)
		}
	}
}

func FuzzParseLayout(f *testing.F) {
	f.Add([]byte{1, 20, 1, 12, 0, 0, 0})
	f.Add([]byte{1, 32, 0, 4, 0, 0, 0})
	f.Add([]byte{1, 0, 2, 0, 0, 0, 0x40})
	f.Add([]byte{2, 4, 1, 4, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLayout(b)
		if err != nil {
			if !errors.Is(err, ErrGeometry) && !errors.Is(err, ErrLayout) {
				t.Fatalf("error %v wraps neither ErrGeometry nor ErrLayout", err)
			}
			return
		}
		out, err := l.AppendBinary(nil)
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("ParseLayout(% x) re-encodes as % x, %v", b, out, err)
		}
	})
}
