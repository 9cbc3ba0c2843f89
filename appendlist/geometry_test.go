package appendlist

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dtakit/dtakit/dta"
)

func TestGeometryRoundTrip(t *testing.T) {
	for _, l := range []Layout{
		{Lists: 1, Entries: 1, EntrySize: 4}, // Batch 0 = 1
		{Lists: 64, Entries: 1 << 16, EntrySize: 4, Batch: 16},
		{Lists: 1 << 24, Entries: 1 << 4, EntrySize: 4096, Batch: 16, Markers: true},
		{Lists: 3, Entries: 1 << 30, EntrySize: 4, Batch: 1 << 30, Markers: true},
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
	l := Layout{Lists: 0x010203, Entries: 1 << 12, EntrySize: 0x104, Batch: 8, Markers: true}
	b, err := l.AppendBinary(nil)
	want := []byte{
		1,                      // version
		0x03, 0x02, 0x01, 0x00, // le32 lists
		12,         // log2 E
		0x04, 0x01, // le16 entry size
		3, // log2 B
		1, // flags: markers
	}
	if err != nil || !bytes.Equal(b, want) {
		t.Errorf("geometry % x, %v, want % x", b, err, want)
	}
	b, err = Layout{Lists: 1, Entries: 2, EntrySize: 4}.AppendBinary(nil)
	if want := []byte{1, 1, 0, 0, 0, 1, 4, 0, 0, 0}; err != nil || !bytes.Equal(b, want) {
		t.Errorf("geometry % x, %v, want % x", b, err, want)
	}
}

func TestGeometryInvalidLayout(t *testing.T) {
	for _, l := range []Layout{{}, {Lists: 1, Entries: 3, EntrySize: 4}, {Lists: 1, Entries: 4, EntrySize: 4, Batch: 8}} {
		b, err := l.AppendBinary([]byte{7})
		if !errors.Is(err, ErrLayout) || !bytes.Equal(b, []byte{7}) {
			t.Errorf("%+v: % x, %v, want ErrLayout and b unchanged", l, b, err)
		}
	}
}

func TestParseLayoutBad(t *testing.T) {
	good := []byte{1, 4, 0, 0, 0, 10, 8, 0, 2, 1}
	if _, err := ParseLayout(good); err != nil {
		t.Fatalf("good geometry: %v", err)
	}
	with := func(i int, v ...byte) []byte {
		b := bytes.Clone(good)
		copy(b[i:], v)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrGeometry},
		{"short", good[:9], ErrGeometry},
		{"long", append(bytes.Clone(good), 0), ErrGeometry},
		{"version 0", with(0, 0), ErrGeometry},
		{"version 9", with(0, 9), ErrGeometry},
		{"flags 2", with(9, 2), ErrGeometry},
		{"flags 0x81", with(9, 0x81), ErrGeometry},
		{"0 lists", with(1, 0, 0, 0, 0), ErrLayout},
		{"2^24+1 lists", with(1, 1, 0, 0, 1), ErrLayout},
		{"2^32-1 lists", with(1, 0xFF, 0xFF, 0xFF, 0xFF), ErrLayout},
		{"log2 E 31", with(5, 31), ErrLayout},
		{"entry size 0", with(6, 0, 0), ErrLayout},
		{"entry size 6", with(6, 6, 0), ErrLayout},
		{"entry size 4100", with(6, 0x04, 0x10), ErrLayout},
		{"batch above entries", with(8, 11), ErrLayout},
		{"log2 B 255", with(8, 255), ErrLayout},
	} {
		l, err := ParseLayout(tc.b)
		if !errors.Is(err, tc.want) || l != (Layout{}) {
			t.Errorf("%s: %+v, %v, want %v", tc.name, l, err, tc.want)
		}
	}
}

func FuzzParseLayout(f *testing.F) {
	f.Add([]byte{1, 4, 0, 0, 0, 10, 8, 0, 2, 1})
	f.Add([]byte{1, 0, 0, 0, 1, 30, 0, 16, 30, 0})
	f.Add([]byte{1, 1, 0, 0, 0, 0, 4, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLayout(b)
		if err != nil {
			if !errors.Is(err, ErrGeometry) && !errors.Is(err, ErrLayout) {
				t.Fatalf("error %v wraps neither ErrGeometry nor ErrLayout", err)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("ParseLayout(% x) = %+v, which Validate rejects: %v", b, l, err)
		}
		out, err := l.AppendBinary(nil)
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("ParseLayout(% x) re-encodes as % x, %v", b, out, err)
		}
	})
}
