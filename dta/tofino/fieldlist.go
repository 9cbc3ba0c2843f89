package tofino

import "fmt"

// MaxFieldListBits is the longest field list a FieldList holds.
const MaxFieldListBits = 1024

// The errors a FieldList records; allocated once because lists are built on
// hot paths.
var (
	errFieldWidth = fmt.Errorf("%w: field width outside 1..64", ErrFieldList)
	errFieldValue = fmt.Errorf("%w: field value wider than its field", ErrFieldList)
	errFieldFull  = fmt.Errorf("%w: list longer than %d bits", ErrFieldList, MaxFieldListBits)
)

// FieldList is a P4 field list under construction: fields of 1 to 64 bits
// concatenated in the order added, each most significant bit first, so the
// list written here is the list the P4 program hashes. Its zero value is an
// empty list.
//
// A FieldList has a fixed capacity of MaxFieldListBits and never allocates.
// Adding a field that is too wide, has a value wider than its field, or does
// not fit leaves the list unchanged and records a sticky error, wrapping
// ErrFieldList, that [FieldList.Err] and [Hash.Sum] report; later additions are
// ignored until [FieldList.Reset].
type FieldList struct {
	buf  [MaxFieldListBits / 8]byte // the bits so far, from the top of buf[0]
	bits int
	err  error
}

// Add appends a field of width bits holding v and returns f, so calls chain:
//
//	f.Add(uint64(ip), 32).Add(uint64(port), 16).Add(flag, 1)
//
// It does not allocate.
func (f *FieldList) Add(v uint64, width int) *FieldList {
	switch {
	case f.err != nil:
		return f
	case width < 1 || width > 64:
		f.err = errFieldWidth
		return f
	case width < 64 && v>>width != 0:
		f.err = errFieldValue
		return f
	case f.bits+width > MaxFieldListBits:
		f.err = errFieldFull
		return f
	}
	for width > 0 {
		free := 8 - f.bits%8
		take := min(free, width)
		chunk := byte(v>>(width-take)) & byte(1<<take-1)
		f.buf[f.bits/8] |= chunk << (free - take)
		f.bits += take
		width -= take
	}
	return f
}

// AddBytes appends each byte of b as an 8-bit field and returns f.
// It does not allocate.
func (f *FieldList) AddBytes(b []byte) *FieldList {
	if f.err != nil {
		return f
	}
	if f.bits+8*len(b) > MaxFieldListBits {
		f.err = errFieldFull
		return f
	}
	if f.bits%8 == 0 {
		copy(f.buf[f.bits/8:], b)
		f.bits += 8 * len(b)
		return f
	}
	for _, x := range b {
		f.Add(uint64(x), 8)
	}
	return f
}

// Len returns the list's length in bits.
func (f *FieldList) Len() int { return f.bits }

// Err returns the error recorded while building f, or nil.
func (f *FieldList) Err() error { return f.err }

// Reset empties f and clears its error.
func (f *FieldList) Reset() {
	clear(f.buf[:(f.bits+7)/8])
	f.bits = 0
	f.err = nil
}
