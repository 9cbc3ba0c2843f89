package postcard

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func TestValueSet(t *testing.T) {
	s := NewValueSet(universe(16))
	if got := s.Ranges(); !slices.Equal(got, []ValueRange{{1, 16}}) {
		t.Fatalf("1..16: ranges %v", got)
	}
	for v, want := range map[uint32]bool{0: false, 1: true, 16: true, 17: false, 1356: false} {
		if s.Contains(v) != want {
			t.Errorf("1..16 holds %d: %v, want %v", v, !want, want)
		}
	}
	var all ValueSet
	none, zero := NewValueSet(nil), NewValueSet([]uint32{0})
	if !all.IsAll() || !all.Contains(1<<31) || !none.IsAll() || !zero.IsAll() {
		t.Error("the zero set (and no values) holds every value")
	}
	// 40 isolated values: 40 runs, joined at the smallest gaps down to
	// MaxValueRanges; every value given is still held.
	var v []uint32
	for i := range uint32(40) {
		v = append(v, 1+i*i*3)
	}
	s = NewValueSet(v)
	if len(s.Ranges()) != MaxValueRanges {
		t.Fatalf("%d ranges, want %d", len(s.Ranges()), MaxValueRanges)
	}
	for _, x := range v {
		if !s.Contains(x) {
			t.Errorf("%d given, not held", x)
		}
	}
	if s.Contains(v[39]+1) || s.Contains(v[38]+1) {
		t.Error("a value in the largest gaps is held")
	}
}

func TestGeometryWithValues(t *testing.T) {
	l := Layout{Hops: 5, Chunks: 1 << 16, Copies: 2}
	b, err := l.AppendGeometry(nil, NewValueSet([]uint32{1, 2, 3, 10, 11, 7}))
	want := []byte{2, 5, 32, 16, 2, 0, 0, 0, 3, 1, 0, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0, 7, 0, 0, 0, 10, 0, 0, 0, 11, 0, 0, 0}
	if err != nil || !bytes.Equal(b, want) {
		t.Fatalf("geometry % x, %v, want % x", b, err, want)
	}
	gl, gv, err := ParseGeometry(b)
	if err != nil || gl != l.withDefaults() || !slices.Equal(gv.Ranges(), []ValueRange{{1, 3}, {7, 7}, {10, 11}}) {
		t.Fatalf("ParseGeometry: %+v %v %v", gl, gv.Ranges(), err)
	}
	if pl, err := ParseLayout(b); err != nil || pl != gl {
		t.Errorf("ParseLayout of version 2: %+v, %v", pl, err)
	}
	v1, _ := l.AppendBinary(nil)
	if b, err := l.AppendGeometry(nil, ValueSet{}); err != nil || !bytes.Equal(b, v1) {
		t.Errorf("the zero set: % x, %v, want version 1 % x", b, err, v1)
	}
	if _, v, err := ParseGeometry(v1); err != nil || !v.IsAll() {
		t.Errorf("version 1: %v, %v; want the zero set", v.Ranges(), err)
	}
	for _, bad := range [][]byte{
		want[:9],                         // no range
		append(bytes.Clone(want[:8]), 0), // 0 ranges
		append(bytes.Clone(want), 0),     // trailing byte
		want[:len(want)-1],               // short
		{2, 5, 32, 16, 2, 0, 0, 0, 1, 0, 0, 0, 0, 3, 0, 0, 0},                         // low 0
		{2, 5, 32, 16, 2, 0, 0, 0, 1, 4, 0, 0, 0, 3, 0, 0, 0},                         // high < low
		{2, 5, 32, 16, 2, 0, 0, 0, 2, 1, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0}, // adjacent
		{2, 5, 32, 16, 2, 0, 0, 0},                                                    // version 2 without a set
	} {
		if _, _, err := ParseGeometry(bad); !errors.Is(err, ErrGeometry) {
			t.Errorf("ParseGeometry(% x): %v, want ErrGeometry", bad, err)
		}
	}
}

// FuzzParseGeometry: every geometry that parses re-encodes to its bytes.
func FuzzParseGeometry(f *testing.F) {
	f.Add([]byte{1, 5, 32, 20, 2, 0, 0, 0})
	f.Add([]byte{2, 5, 32, 16, 2, 0, 0, 0, 1, 1, 0, 0, 0, 16, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, v, err := ParseGeometry(b)
		if err != nil {
			return
		}
		got, err := l.AppendGeometry(nil, v)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("% x parses to %+v %v, re-encodes to % x (%v)", b, l, v.Ranges(), got, err)
		}
	})
}
