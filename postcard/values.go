package postcard

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// MaxValueRanges is the most ranges a geometry carries: version 2's 9
// bytes and 8 per range fit dta.MaxGeometryLen.
const MaxValueRanges = 27

// ValueRange is the hop values Lo..Hi, both included.
type ValueRange struct{ Lo, Hi uint32 }

// ValueSet is the set of hop values a Postcarding instance holds, as its
// geometry advertises it (docs/DTA-WIRE.md section 8.5): at most
// MaxValueRanges ranges, sorted, neither overlapping nor adjacent, none
// holding 0 (the blank). The zero value advertises no set: it holds
// every value. A translator refuses postcards of values outside it.
type ValueSet struct {
	n int
	r [MaxValueRanges]ValueRange
}

// NewValueSet returns the set of values (0 ignored): exact when they make
// at most MaxValueRanges runs of consecutive values, otherwise the runs
// separated by the smallest gaps are joined, gaps included, until that
// many are left, so that the set holds every value given and as few
// others as it can. No values give the zero set.
func NewValueSet(values []uint32) ValueSet {
	v := slices.Clone(values)
	slices.Sort(v)
	v = slices.Compact(v)
	if len(v) > 0 && v[0] == 0 {
		v = v[1:]
	}
	var runs []ValueRange
	for _, x := range v {
		if n := len(runs); n > 0 && runs[n-1].Hi+1 == x {
			runs[n-1].Hi = x
			continue
		}
		runs = append(runs, ValueRange{x, x})
	}
	for len(runs) > MaxValueRanges {
		best := 0
		for i := 1; i+1 < len(runs); i++ {
			if runs[i+1].Lo-runs[i].Hi < runs[best+1].Lo-runs[best].Hi {
				best = i
			}
		}
		runs[best].Hi = runs[best+1].Hi
		runs = slices.Delete(runs, best+1, best+2)
	}
	var s ValueSet
	s.n = copy(s.r[:], runs)
	return s
}

// IsAll reports whether s holds every value: the zero set.
func (s *ValueSet) IsAll() bool { return s.n == 0 }

// Ranges returns s's ranges (none for the zero set).
func (s *ValueSet) Ranges() []ValueRange { return s.r[:s.n] }

// Contains reports whether s holds v. It does not allocate.
func (s *ValueSet) Contains(v uint32) bool {
	if s.n == 0 {
		return true
	}
	for _, r := range s.r[:s.n] {
		if v <= r.Hi {
			return v >= r.Lo
		}
	}
	return false
}

// appendBinary appends s's ranges as geometry version 2 carries them: u8
// count, then le32 low and le32 high per range.
func (s *ValueSet) appendBinary(b []byte) []byte {
	b = append(b, byte(s.n))
	for _, r := range s.r[:s.n] {
		b = binary.LittleEndian.AppendUint32(b, r.Lo)
		b = binary.LittleEndian.AppendUint32(b, r.Hi)
	}
	return b
}

// parseValueSet decodes what appendBinary wrote, all of b.
func parseValueSet(b []byte) (ValueSet, error) {
	var s ValueSet
	if len(b) < 1 || b[0] < 1 || b[0] > MaxValueRanges || len(b) != 1+8*int(b[0]) {
		return s, fmt.Errorf("%w: value set of %d bytes, want a count of 1..%d and 8 bytes per range", ErrGeometry, len(b), MaxValueRanges)
	}
	s.n = int(b[0])
	for i := range s.n {
		r := ValueRange{binary.LittleEndian.Uint32(b[1+8*i:]), binary.LittleEndian.Uint32(b[5+8*i:])}
		if r.Lo == 0 || r.Hi < r.Lo || i > 0 && r.Lo <= s.r[i-1].Hi+1 {
			return ValueSet{}, fmt.Errorf("%w: value range %d..%d: want 1 <= low <= high, after the previous range and not adjacent", ErrGeometry, r.Lo, r.Hi)
		}
		s.r[i] = r
	}
	return s, nil
}
