// Package tofino models the Tofino hash unit bit for bit: a CRC over a field
// list, as P4 programs use it through Hash<bit<W>>(algorithm) and
// Hash<bit<W>>(CUSTOM, CRCPolynomial(...)).
//
// Every slot address, key checksum and postcard code in DTA is computed twice,
// by the switch when a report is written and by the collector when it is
// queried; this package is the collector's half, and the only place the SDK
// computes those hashes.
//
// # Polynomials
//
// A CRC of width w is given by its generator polynomial in normal form: bit i
// of Poly is the coefficient of x^i, and the x^w term is implied. CRC-32's
// x^32 + x^26 + x^23 + x^22 + x^16 + x^12 + x^11 + x^10 + x^8 + x^7 + x^5 +
// x^4 + x^2 + x + 1 is therefore 0x04C11DB7. Reflected algorithms are written
// in normal form too (0x04C11DB7, not 0xEDB88320), with Reversed set, as
// bf-utils and the TNA CRCPolynomial extern write them. Init and XorOut are
// given as the CRC catalogue gives them, unreflected.
//
// # Field lists
//
// A hash input is the field list's bits, fields concatenated in list order,
// each most significant bit first. When the total is not a whole number of
// bytes, the stream is zero-extended at its most significant end to whole
// bytes, and the CRC, init included, runs over those bytes: leading zero bits
// are not free when init is not zero. [Hash.SumBytes] takes a byte-aligned
// list as bytes; [FieldList] builds any other list for [Hash.Sum].
//
// # Output
//
// Hash<bit<W>> yields the least significant W bits of the w-bit CRC when
// W <= w. When W > w, an extended hash repeats the CRC (bit k of the output is
// bit k mod w of the CRC) and a plain one leaves the upper bits zero. The
// predefined algorithms ([Predefined]) extend.
package tofino

import (
	"errors"
	"fmt"
)

// Errors reported by this package. Each error it returns wraps one of them.
var (
	// ErrInvalidCRC is wrapped by every error about a CRC or hash definition.
	ErrInvalidCRC = errors.New("tofino: invalid CRC")
	// ErrUnknownAlgorithm is wrapped by errors naming an algorithm that is
	// not predefined.
	ErrUnknownAlgorithm = errors.New("tofino: unknown algorithm")
	// ErrFieldList is wrapped by errors about a field list: a field width
	// outside 1..64, a value wider than its field, or a list longer than
	// MaxFieldListBits.
	ErrFieldList = errors.New("tofino: invalid field list")
)

// CRC is a CRC as the hash unit's CRCPolynomial extern describes it.
//
// Poly is in normal form with the x^Width term omitted. Reversed reflects each
// input byte and the Width-bit result (refin = refout). Init is XORed into the
// first Width bits of the stream and XorOut into the result. Extend repeats the
// result when a hash is wider than Width.
type CRC struct {
	Width    int
	Poly     uint64
	Reversed bool
	Init     uint64
	XorOut   uint64
	Extend   bool
	// AllowEven accepts an even Poly. Such a polynomial is not a CRC
	// generator and its hash is not one-to-one; it exists so memory written
	// with the reference prototype's postcard checksums can be read.
	AllowEven bool
}

// Validate reports what is wrong with c, or nil.
func (c CRC) Validate() error {
	switch c.Width {
	case 8, 16, 32, 64:
	default:
		return fmt.Errorf("%w: width %d, want 8, 16, 32 or 64", ErrInvalidCRC, c.Width)
	}
	mask := widthMask(c.Width)
	if c.Poly&1 == 0 && !c.AllowEven {
		return fmt.Errorf("%w: polynomial %#x is even (no x^0 term); set AllowEven to accept it", ErrInvalidCRC, c.Poly)
	}
	if c.Poly&^mask != 0 {
		return fmt.Errorf("%w: polynomial %#x wider than %d bits", ErrInvalidCRC, c.Poly, c.Width)
	}
	if c.Init&^mask != 0 {
		return fmt.Errorf("%w: init %#x wider than %d bits", ErrInvalidCRC, c.Init, c.Width)
	}
	if c.XorOut&^mask != 0 {
		return fmt.Errorf("%w: xor %#x wider than %d bits", ErrInvalidCRC, c.XorOut, c.Width)
	}
	return nil
}

func widthMask(w int) uint64 {
	if w >= 64 {
		return ^uint64(0)
	}
	return 1<<w - 1
}

// Hash is Hash<bit<W>> over one CRC. It is safe for concurrent use. It holds
// 8 KiB (reflected CRC-32) or 16 KiB of tables, built by NewHash: build a Hash
// once and share it.
type Hash struct {
	crc     CRC
	outBits int
	// start is the register before the first byte. A reflected CRC keeps its
	// register reflected, in the low Width bits, so it starts at Init
	// reflected; any other keeps it in the top Width bits of 64.
	start uint64
	shift uint // 64-Width for a normal-form register, else 0
	// The output is (CRC * mul) & outMsk. mul is 1, or 1 + 2^w + 2^2w + ...
	// to repeat the CRC when extended.
	mul    uint64
	outMsk uint64
	// Slicing tables: tab32 for reflected 32-bit CRCs, DTA's every hash,
	// whose 32-bit entries take half the cache; tab for the others.
	tab   *tables
	tab32 *tables32
}

// NewHash returns Hash<bit<outBits>> computed with c, or an error wrapping
// ErrInvalidCRC that says what is wrong with c or outBits.
func NewHash(outBits int, c CRC) (*Hash, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if outBits < 1 || outBits > 64 {
		return nil, fmt.Errorf("%w: output width %d, want 1..64", ErrInvalidCRC, outBits)
	}
	w := c.Width
	h := &Hash{crc: c, outBits: outBits, mul: 1}
	t := new(tables)
	t.fill(c)
	if w == 32 && c.Reversed {
		h.tab32 = t.narrow()
	} else {
		h.tab = t
	}
	if c.Reversed {
		h.start = reflect(c.Init, w)
	} else {
		h.shift = uint(64 - w)
		h.start = c.Init << h.shift
	}
	if outBits > w && c.Extend {
		h.mul = 0
		for k := 0; k < 64; k += w {
			h.mul |= 1 << k
		}
		h.outMsk = widthMask(outBits)
	} else {
		h.outMsk = widthMask(min(outBits, w))
	}
	return h, nil
}

// CRC returns the CRC h computes.
func (h *Hash) CRC() CRC { return h.crc }

// OutBits returns W, the width of h's output.
func (h *Hash) OutBits() int { return h.outBits }

// Sum returns the hash of the field list f, or f's sticky error (wrapping
// ErrFieldList) when building f failed.
// It does not allocate.
func (h *Hash) Sum(f *FieldList) (uint64, error) {
	if f.err != nil {
		return 0, f.err
	}
	n := (f.bits + 7) / 8
	pad := uint(n*8 - f.bits)
	if pad == 0 {
		return h.SumBytes(f.buf[:n]), nil
	}
	// Zero-extend at the top: shift the whole list right by pad bits.
	var b [MaxFieldListBits / 8]byte
	var prev byte
	for i, x := range f.buf[:n] {
		b[i] = prev<<(8-pad) | x>>pad
		prev = x
	}
	return h.SumBytes(b[:n]), nil
}

// reflect returns the low w bits of v in reverse order.
func reflect(v uint64, w int) uint64 {
	var r uint64
	for i := 0; i < w; i++ {
		r = r<<1 | (v>>i)&1
	}
	return r
}
