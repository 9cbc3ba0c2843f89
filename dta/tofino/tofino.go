// Package tofino models the Tofino hash unit bit for bit: a CRC over a field
// list, as P4 programs use it through Hash<bit<W>>(algorithm) and
// Hash<bit<W>>(CUSTOM, CRCPolynomial(...)).
//
// Every slot address, key checksum and postcard code in DTA is computed twice,
// by the switch when a report is written and by the collector when it is
// queried; this package is the collector's half, and the only place the SDK
// computes those hashes.
package tofino

import (
	"errors"
	"fmt"
)

// ErrInvalidCRC is wrapped by every error about a CRC or hash definition.
var ErrInvalidCRC = errors.New("tofino: invalid CRC")

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
		return fmt.Errorf("%w: polynomial %#x is even (no x^0 term)", ErrInvalidCRC, c.Poly)
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

// Hash is Hash<bit<W>> over one CRC. It is safe for concurrent use.
type Hash struct {
	crc     CRC
	outBits int
}

// NewHash returns Hash<bit<outBits>> computed with c.
func NewHash(outBits int, c CRC) (*Hash, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if outBits < 1 || outBits > 64 {
		return nil, fmt.Errorf("%w: output width %d, want 1..64", ErrInvalidCRC, outBits)
	}
	return &Hash{crc: c, outBits: outBits}, nil
}

// SumBytes returns the hash of a byte-aligned field list.
// It does not allocate.
func (h *Hash) SumBytes(b []byte) uint64 {
	return h.output(crcBitwise(h.crc, b))
}

// output truncates or extends a Width-bit CRC to the hash's output width.
func (h *Hash) output(r uint64) uint64 {
	w := h.crc.Width
	if h.outBits <= w || !h.crc.Extend {
		return r & widthMask(min(h.outBits, w))
	}
	var out uint64
	for k := 0; k < h.outBits; k += w {
		out |= r << k
	}
	return out & widthMask(h.outBits)
}

// crcBitwise is the reference: one bit at a time, register in normal form.
func crcBitwise(c CRC, b []byte) uint64 {
	w := c.Width
	mask := widthMask(w)
	top := uint64(1) << (w - 1)
	reg := c.Init
	for _, x := range b {
		if c.Reversed {
			x = reflect8(x)
		}
		for i := 7; i >= 0; i-- {
			in := uint64(x>>i) & 1
			fb := (reg&top != 0) != (in == 1)
			reg = (reg << 1) & mask
			if fb {
				reg ^= c.Poly
			}
		}
	}
	if c.Reversed {
		reg = reflect(reg, w)
	}
	return reg ^ c.XorOut
}

func reflect8(x byte) byte {
	x = x>>4 | x<<4
	x = (x&0xCC)>>2 | (x&0x33)<<2
	return (x&0xAA)>>1 | (x&0x55)<<1
}

func reflect(v uint64, w int) uint64 {
	var r uint64
	for i := 0; i < w; i++ {
		r = r<<1 | (v>>i)&1
	}
	return r
}
