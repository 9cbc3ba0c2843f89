package postcard

import (
	"fmt"
	"math/bits"
)

// Collision is a code that more than one value of the universe maps to
// (possible for b < 32). Such a code decodes to nothing, so hops carrying
// A or B are never answered. B is 0 when A's code is the blank code.
type Collision struct {
	Code uint32
	A, B uint32
}

// Table maps codes back to values of a universe V. It is built once and is
// safe for concurrent use by any number of queries.
type Table struct {
	bits       int
	dense      []uint32 // b < 32: code -> value, 0 for none or ambiguous
	bitmap     []uint64 // b = 32, small values: membership
	set        []uint32 // b = 32, large values: open addressing, 0 empty
	shift      uint
	size       int
	collisions []Collision
}

// bitmapMax bounds the largest value kept in a bitmap (16 MiB of bits).
const bitmapMax = 1 << 27

// NewTable builds the table of universe values for layout l's slot width.
// Values must be non-zero (0 is the blank); duplicates are allowed. Codes
// shared by several values are recorded (see Collisions) and decode to
// nothing.
func NewTable(l Layout, values []uint32) (*Table, error) {
	c, err := NewCodec(l)
	if err != nil {
		return nil, fmt.Errorf("new table: %w", err)
	}
	t := &Table{bits: c.l.SlotBits}
	var max uint32
	for _, v := range values {
		if v == 0 {
			return nil, fmt.Errorf("new table: %w: value 0 is the blank", ErrValue)
		}
		max = maxu(max, v)
	}
	switch {
	case t.bits < 32:
		t.dense = make([]uint32, 1<<t.bits)
		ambiguous := make([]bool, 1<<t.bits)
		for _, v := range values {
			code := c.Code(v)
			if code == 0 {
				t.collisions = append(t.collisions, Collision{Code: 0, A: v})
				continue
			}
			switch old := t.dense[code]; {
			case ambiguous[code]:
				t.collisions = append(t.collisions, Collision{Code: code, A: v})
			case old == 0:
				t.dense[code] = v
				t.size++
			case old != v:
				t.collisions = append(t.collisions, Collision{Code: code, A: old, B: v})
				t.dense[code] = 0
				ambiguous[code] = true
				t.size--
			}
		}
	case max < bitmapMax:
		t.bitmap = make([]uint64, max/64+1)
		for _, v := range values {
			if t.bitmap[v/64]&(1<<(v%64)) == 0 {
				t.size++
			}
			t.bitmap[v/64] |= 1 << (v % 64)
		}
	default:
		n := 1 << bits.Len(uint(2*len(values)))
		t.set = make([]uint32, n)
		t.shift = uint(32 - bits.Len(uint(n-1)))
		for _, v := range values {
			if t.insert(v) {
				t.size++
			}
		}
	}
	return t, nil
}

func maxu(a, b uint32) uint32 {
	if a > b {
		return a
	}
	return b
}

func (t *Table) home(v uint32) uint32 { return (v * 0x9E3779B1) >> t.shift }

func (t *Table) insert(v uint32) bool {
	m := uint32(len(t.set) - 1)
	for i := t.home(v); ; i = (i + 1) & m {
		switch t.set[i] {
		case 0:
			t.set[i] = v
			return true
		case v:
			return false
		}
	}
}

// Len returns the number of values the table decodes to.
func (t *Table) Len() int { return t.size }

// Collisions returns the codes shared inside the universe (nil for b = 32).
func (t *Table) Collisions() []Collision { return t.collisions }

// Decode returns the value of a non-blank code and whether there is one.
// It does not allocate.
func (t *Table) Decode(code uint32) (uint32, bool) {
	switch {
	case t.dense != nil:
		v := t.dense[code&uint32(len(t.dense)-1)]
		return v, v != 0 && code < uint32(len(t.dense))
	case t.bitmap != nil:
		w := code / 64
		return code, code != 0 && w < uint32(len(t.bitmap)) && t.bitmap[w]&(1<<(code%64)) != 0
	default:
		if code == 0 {
			return 0, false
		}
		m := uint32(len(t.set) - 1)
		for i := t.home(code); ; i = (i + 1) & m {
			switch t.set[i] {
			case code:
				return code, true
			case 0:
				return 0, false
			}
		}
	}
}
