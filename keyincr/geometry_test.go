package keyincr

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/dta/tofino"
)

// hashOnly is a custom Hasher, which has no geometry encoding.
type hashOnly struct{ tofino.Hasher }

func TestGeometryRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		slots uint64
		h     tofino.Hasher
	}{
		{1, nil},
		{1 << 20, tofino.Reference},
		{1 << 16, tofino.PerCopy},
		{1 << 32, tofino.XXHash},
	} {
		l := Layout{Slots: tc.slots, Hasher: tc.h}
		if err := l.Validate(); err != nil {
			t.Fatal(err)
		}
		b, err := l.AppendBinary([]byte{0xEE})
		if err != nil || len(b) != 1+GeometryLen || b[0] != 0xEE || len(b)-1 > dta.MaxGeometryLen {
			t.Fatalf("AppendBinary(%d): % x, %v", tc.slots, b, err)
		}
		got, err := ParseLayout(b[1:])
		if err != nil {
			t.Fatalf("ParseLayout(% x): %v", b[1:], err)
		}
		if l.Hasher = l.hasher(); got != l {
			t.Errorf("round trip: %+v, want %+v", got, l)
		}
	}
}

// TestGeometryBytes pins the byte layout of docs/DTA-WIRE.md section 8.4.
func TestGeometryBytes(t *testing.T) {
	l := Layout{Slots: 1 << 20}
	b, err := l.AppendBinary(nil)
	if want := []byte{1, 20, 1}; err != nil || !bytes.Equal(b, want) { // version, log2 S, PerCopy
		t.Errorf("geometry % x, %v, want % x", b, err, want)
	}
	l = Layout{Slots: 1 << 32, Hasher: tofino.Reference}
	b, err = l.AppendBinary(nil)
	if want := []byte{1, 32, 0}; err != nil || !bytes.Equal(b, want) {
		t.Errorf("geometry % x, %v, want % x", b, err, want)
	}
}

func TestGeometryUnencodable(t *testing.T) {
	l := Layout{Slots: 16, Hasher: hashOnly{tofino.PerCopy}}
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
		{"short", []byte{1, 4}, ErrGeometry},
		{"long", []byte{1, 4, 1, 0}, ErrGeometry},
		{"version 0", []byte{0, 4, 1}, ErrGeometry},
		{"version 2", []byte{2, 4, 1}, ErrGeometry},
		{"hasher 3", []byte{1, 4, 3}, ErrGeometry},
		{"hasher 200", []byte{1, 4, 200}, tofino.ErrHasher},
		{"log2 S 33", []byte{1, 33, 1}, ErrLayout},
		{"log2 S 64", []byte{1, 64, 1}, ErrLayout},
	} {
		l, err := ParseLayout(tc.b)
		if !errors.Is(err, tc.want) || l != (Layout{}) {
			t.Errorf("%s: %v (layout %+v), want %v", tc.name, err, l, tc.want)
		}
	}
}

func FuzzParseLayout(f *testing.F) {
	f.Add([]byte{1, 20, 1})
	f.Add([]byte{1, 32, 0})
	f.Add([]byte{1, 0, 2})
	f.Add([]byte{1, 33, 1})
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
