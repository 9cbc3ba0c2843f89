package tofino

import "encoding/binary"

// tables are slicing-by-8 tables: t[0][x] is the register change caused by
// byte x, t[k][x] the change caused by byte x followed by k zero bytes.
//
// A reflected CRC keeps its register reflected in the low Width bits and shifts
// right; any other keeps it in the top Width bits of 64 and shifts left. Either
// way one 64-bit register serves every width, and eight input bytes fold into
// it at once.
type tables [8][256]uint64

// tables32 are tables for a reflected 32-bit CRC, whose register fits 32 bits.
type tables32 [8][256]uint32

func (t *tables) narrow() *tables32 {
	t32 := new(tables32)
	for k := range t {
		for i, v := range t[k] {
			t32[k][i] = uint32(v)
		}
	}
	return t32
}

func (t *tables) fill(c CRC) {
	w := c.Width
	if c.Reversed {
		p := reflect(c.Poly, w)
		for i := range 256 {
			r := uint64(i)
			for range 8 {
				if r&1 != 0 {
					r = r>>1 ^ p
				} else {
					r >>= 1
				}
			}
			t[0][i] = r
		}
		for k := 1; k < 8; k++ {
			for i := range 256 {
				r := t[k-1][i]
				t[k][i] = r>>8 ^ t[0][byte(r)]
			}
		}
		return
	}
	p := c.Poly << (64 - w)
	for i := range 256 {
		r := uint64(i) << 56
		for range 8 {
			if r>>63 != 0 {
				r = r<<1 ^ p
			} else {
				r <<= 1
			}
		}
		t[0][i] = r
	}
	for k := 1; k < 8; k++ {
		for i := range 256 {
			r := t[k-1][i]
			t[k][i] = r<<8 ^ t[0][r>>56]
		}
	}
}

// SumBytes returns the hash of a byte-aligned field list.
// It does not allocate.
//
// Eight bytes fold into the register per step; a tail of 4 or 5 bytes (a key,
// a key and a copy number) folds in with one step too, so short inputs cost
// one round of parallel table loads. Both orientations live in this one
// function so that a hash costs a single call.
func (h *Hash) SumBytes(b []byte) uint64 {
	if t := h.tab32; t != nil {
		reg := uint32(h.start)
		for len(b) >= 8 {
			lo := reg ^ binary.LittleEndian.Uint32(b)
			hi := binary.LittleEndian.Uint32(b[4:])
			reg = t[7][byte(lo)] ^ t[6][byte(lo>>8)] ^ t[5][byte(lo>>16)] ^ t[4][lo>>24] ^
				t[3][byte(hi)] ^ t[2][byte(hi>>8)] ^ t[1][byte(hi>>16)] ^ t[0][hi>>24]
			b = b[8:]
		}
		switch len(b) {
		case 5:
			reg ^= binary.LittleEndian.Uint32(b)
			reg = t[4][byte(reg)] ^ t[3][byte(reg>>8)] ^ t[2][byte(reg>>16)] ^ t[1][reg>>24] ^ t[0][b[4]]
			b = nil
		case 4, 6, 7:
			reg ^= binary.LittleEndian.Uint32(b)
			reg = t[3][byte(reg)] ^ t[2][byte(reg>>8)] ^ t[1][byte(reg>>16)] ^ t[0][reg>>24]
			b = b[4:]
		}
		for _, x := range b {
			reg = t[0][byte(reg)^x] ^ reg>>8
		}
		return uint64(reg^uint32(h.crc.XorOut)) * h.mul & h.outMsk
	}
	t := h.tab
	reg := h.start
	if h.crc.Reversed {
		for len(b) >= 8 {
			reg ^= binary.LittleEndian.Uint64(b)
			reg = t[7][byte(reg)] ^ t[6][byte(reg>>8)] ^ t[5][byte(reg>>16)] ^ t[4][byte(reg>>24)] ^
				t[3][byte(reg>>32)] ^ t[2][byte(reg>>40)] ^ t[1][byte(reg>>48)] ^ t[0][reg>>56]
			b = b[8:]
		}
		switch len(b) {
		case 5:
			reg ^= uint64(binary.LittleEndian.Uint32(b)) | uint64(b[4])<<32
			reg = t[4][byte(reg)] ^ t[3][byte(reg>>8)] ^ t[2][byte(reg>>16)] ^ t[1][byte(reg>>24)] ^
				t[0][byte(reg>>32)] ^ reg>>40
			b = nil
		case 4, 6, 7:
			reg ^= uint64(binary.LittleEndian.Uint32(b))
			reg = t[3][byte(reg)] ^ t[2][byte(reg>>8)] ^ t[1][byte(reg>>16)] ^ t[0][byte(reg>>24)] ^ reg>>32
			b = b[4:]
		}
		for _, x := range b {
			reg = t[0][byte(reg)^x] ^ reg>>8
		}
		return (reg ^ h.crc.XorOut) * h.mul & h.outMsk
	}
	// A normal-form register: the same steps, mirrored.
	for len(b) >= 8 {
		reg ^= binary.BigEndian.Uint64(b)
		reg = t[7][reg>>56] ^ t[6][byte(reg>>48)] ^ t[5][byte(reg>>40)] ^ t[4][byte(reg>>32)] ^
			t[3][byte(reg>>24)] ^ t[2][byte(reg>>16)] ^ t[1][byte(reg>>8)] ^ t[0][byte(reg)]
		b = b[8:]
	}
	switch len(b) {
	case 5:
		reg ^= uint64(binary.BigEndian.Uint32(b))<<32 | uint64(b[4])<<24
		reg = t[4][reg>>56] ^ t[3][byte(reg>>48)] ^ t[2][byte(reg>>40)] ^ t[1][byte(reg>>32)] ^
			t[0][byte(reg>>24)] ^ reg<<40
		b = nil
	case 4, 6, 7:
		reg ^= uint64(binary.BigEndian.Uint32(b)) << 32
		reg = t[3][reg>>56] ^ t[2][byte(reg>>48)] ^ t[1][byte(reg>>40)] ^ t[0][byte(reg>>32)] ^ reg<<32
		b = b[4:]
	}
	for _, x := range b {
		reg = t[0][byte(reg>>56)^x] ^ reg<<8
	}
	return (reg>>h.shift ^ h.crc.XorOut) * h.mul & h.outMsk
}
