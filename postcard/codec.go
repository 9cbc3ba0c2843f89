package postcard

import (
	"encoding/binary"
	"fmt"

	"github.com/dtakit/dtakit/dta/tofino"
)

// DefaultPolys are the hop checksum polynomials (normal form) of
// DefaultChecksums, hop 1 first. The first six are published CRC-32
// generators; the other ten are irreducible polynomials picked by a
// documented search (docs/DTA-WIRE.md section 8.5). All are odd, so each hop
// checksum is a bijection on 32-bit keys. 0x04C11DB7 is left out on purpose:
// it is the chunk-address hash, and reusing it would tie a checksum to the
// chunk index of the flows that share a chunk.
var DefaultPolys = [MaxHops]uint32{
	0x1EDC6F41, // CRC-32C (Castagnoli)
	0x741B8CD7, // CRC-32K (Koopman)
	0x32583499, // CRC-32K2 (Koopman)
	0x814141AB, // CRC-32Q
	0xA833982B, // CRC-32D
	0xF4ACFB13, // CRC-32/AUTOSAR
	0x7B88D0B3, // irreducible (docs/DTA-WIRE.md section 8.5)
	0xA133A629,
	0x39792063,
	0xA9901ACD,
	0xC7D98DD1,
	0x697842F9,
	0xED52E681,
	0xA398E5E7,
	0x25286CB3,
	0x041C7887,
}

// CopyCRC returns the chunk-hash CRC of copy j (0-based) under a: CRC32
// (reflected, init and xor-out 0xFFFFFFFF) with polynomial
// tofino.CopyPolynomial(j) under PerCopyAddressing, 0x04C11DB7 otherwise.
// The input is le32(key) ‖ u8(j), or be32(key) under PrototypeAddressing.
func CopyCRC(a Addressing, j int) tofino.CRC {
	c := tofino.CRC{Width: 32, Poly: 0x04C11DB7, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF}
	if a == PerCopyAddressing {
		c.Poly = uint64(tofino.CopyPolynomial(uint8(j)))
	}
	return c
}

// prototypePolys are the reference prototype's hop polynomials, hops 1..5.
// 0x1E12A700 and 0x7A40A908 are even.
var prototypePolys = [5]uint32{0x1E12A700, 0x65B96595, 0x49CF878B, 0x36518F0D, 0x7A40A908}

// valueCRC is g for b < 32: a b-bit CRC over be32(v) with init and xor-out
// 0, so g(0) = 0 (the blank) and g is linear.
func valueCRC(b int) tofino.CRC {
	if b == 8 {
		return tofino.CRC{Width: 8, Poly: 0x07}
	}
	return tofino.CRC{Width: 16, Poly: 0x1021}
}

// HopCRC returns the checksum CRC of hop (1-based) under set.
func HopCRC(set Checksums, hop int) tofino.CRC {
	c := tofino.CRC{Width: 32, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF}
	if set == PrototypeChecksums {
		c.Poly = uint64(prototypePolys[hop-1])
		c.AllowEven = true
	} else {
		c.Poly = uint64(DefaultPolys[hop-1])
	}
	return c
}

// affine is a map f(k) = c XOR L·k over GF(2)^32, evaluated a byte at a time.
// Every hash the codec needs is affine in the key (a CRC over a fixed-length
// input), so its tables are built from 33 evaluations of the tofino model.
type affine struct {
	c uint32
	t [4][256]uint32
}

func newAffine(f func(uint32) uint32) *affine {
	a := &affine{c: f(0)}
	for j := range 4 {
		for v := 1; v < 256; v++ {
			low := v & -v
			if v == low {
				a.t[j][v] = f(uint32(v)<<(8*j)) ^ a.c
			} else {
				a.t[j][v] = a.t[j][low] ^ a.t[j][v^low]
			}
		}
	}
	return a
}

func (a *affine) eval(k uint32) uint32 {
	return a.c ^ a.t[0][byte(k)] ^ a.t[1][byte(k>>8)] ^ a.t[2][byte(k>>16)] ^ a.t[3][byte(k>>24)]
}

// Codec computes a layout's addresses, checksums and value codes. It is
// immutable and safe for concurrent use.
type Codec struct {
	l        Layout
	mask     uint32 // Chunks-1
	slotMask uint32 // 2^b - 1
	csize    int
	chunk    [MaxCopies]*affine    // chunk hash of copy j
	hop      [MaxHops]*affine      // truncated hop checksums
	cacheIdx *affine               // CRC32(le32(key)), the cache index
	g        *affine               // value code, nil for b = 32
	hopHash  [MaxHops]*tofino.Hash // the model, for Checksum
	gHash    *tofino.Hash          // the model of g
	_        [0]func()             // not comparable
}

// NewCodec returns the codec of l.
func NewCodec(l Layout) (*Codec, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	l = l.withDefaults()
	c := &Codec{l: l, mask: l.Chunks - 1, csize: l.ChunkSize()}
	c.slotMask = uint32(1<<l.SlotBits - 1)
	c.cacheIdx = newAffine(tofino.Reference.Checksum)
	for j := range l.Copies {
		h, err := tofino.NewHash(32, CopyCRC(l.Addressing, j))
		if err != nil {
			return nil, fmt.Errorf("postcard: copy %d hash: %w", j, err)
		}
		if l.Addressing == PrototypeAddressing {
			c.chunk[j] = newAffine(func(k uint32) uint32 { return uint32(sumKey(h, k, true)) })
			continue
		}
		c.chunk[j] = newAffine(func(k uint32) uint32 {
			b := [5]byte{byte(k), byte(k >> 8), byte(k >> 16), byte(k >> 24), byte(j)}
			return uint32(h.SumBytes(b[:]))
		})
	}
	for i := range l.Hops {
		h, err := tofino.NewHash(32, HopCRC(l.Checksums, i+1))
		if err != nil {
			return nil, fmt.Errorf("postcard: hop %d checksum: %w", i+1, err)
		}
		c.hopHash[i] = h
		proto := l.Checksums == PrototypeChecksums
		mask := c.slotMask
		c.hop[i] = newAffine(func(k uint32) uint32 { return uint32(sumKey(h, k, proto)) & mask })
	}
	if l.SlotBits < 32 {
		h, err := tofino.NewHash(l.SlotBits, valueCRC(l.SlotBits))
		if err != nil {
			return nil, fmt.Errorf("postcard: value code: %w", err)
		}
		c.gHash = h
		c.g = newAffine(func(v uint32) uint32 {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], v)
			return uint32(h.SumBytes(b[:]))
		})
	}
	return c, nil
}

func sumKey(h *tofino.Hash, key uint32, bigEndian bool) uint64 {
	var b [4]byte
	if bigEndian {
		binary.BigEndian.PutUint32(b[:], key)
	} else {
		binary.LittleEndian.PutUint32(b[:], key)
	}
	return h.SumBytes(b[:])
}

// Layout returns the codec's layout with defaults filled in.
func (c *Codec) Layout() Layout { return c.l }

// ChunkIndex returns the chunk of copy j (0-based) of key: under
// ReferenceAddressing (and for copy 0 under PerCopyAddressing)
// CRC32(le32(key) ‖ u8(j)) & (C-1). It does not allocate.
func (c *Codec) ChunkIndex(key uint32, j int) uint32 {
	return c.chunk[j].eval(key) & c.mask
}

// Checksum returns the full 32-bit checksum of hop (1-based) for key, computed
// with the tofino model (slow; the codec's own paths use derived tables).
func (c *Codec) Checksum(hop int, key uint32) uint32 {
	return uint32(sumKey(c.hopHash[hop-1], key, c.l.Checksums == PrototypeChecksums))
}

// Code returns g(v) in b bits: v itself for b = 32, otherwise the value
// CRC. Code(0) is the blank code, 0. It does not allocate.
func (c *Codec) Code(v uint32) uint32 {
	if c.g == nil {
		return v
	}
	return c.g.eval(v)
}

// slot returns the stored slot i (0-based) of key for code.
func (c *Codec) slot(i int, key, code uint32) uint32 {
	return c.hop[i].eval(key) ^ code
}

// EncodeChunk writes key's chunk into dst (at least ChunkSize bytes): slot i
// holds trunc_b(checksum_{i+1}(key)) XOR g(values[i]), values beyond
// len(values) are blank, padding is zero. Slots are big-endian (b = 16, 32),
// as the switch emits a bit<b> header field. Values must be valid (see
// Cache). It does not allocate.
func (c *Codec) EncodeChunk(dst []byte, key uint32, values []uint32) {
	dst = dst[:c.csize]
	clear(dst)
	for i := range c.l.Hops {
		var code uint32
		if i < len(values) {
			code = c.Code(values[i])
		}
		putSlot(dst, c.l.SlotBits, i, c.slot(i, key, code))
	}
}

func putSlot(dst []byte, bits, i int, w uint32) {
	switch bits {
	case 32:
		binary.BigEndian.PutUint32(dst[4*i:], w)
	case 16:
		binary.BigEndian.PutUint16(dst[2*i:], uint16(w))
	default:
		dst[i] = byte(w)
	}
}

func getSlot(src []byte, bits, i int) uint32 {
	switch bits {
	case 32:
		return binary.BigEndian.Uint32(src[4*i:])
	case 16:
		return uint32(binary.BigEndian.Uint16(src[2*i:]))
	default:
		return uint32(src[i])
	}
}
