package tofino

// This file holds the reference model: slow, simple, and written from the
// definition, so tests can cross-check the table-driven code against it.

// crcBitwise is the reference CRC: the Rocksoft model, one bit at a time, the
// register in normal form. Init goes into the register as given; a reflected
// CRC feeds each byte least significant bit first and reflects the result.
func crcBitwise(c CRC, b []byte) uint64 {
	w := c.Width
	mask := widthMask(w)
	top := uint64(1) << (w - 1)
	reg := c.Init
	for _, x := range b {
		for i := range 8 {
			bit := 7 - i // most significant first
			if c.Reversed {
				bit = i
			}
			in := uint64(x>>bit) & 1
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

// outputReference turns a Width-bit CRC into Hash<bit<outBits>>'s output, bit
// by bit: output bit k is CRC bit k, or CRC bit k mod Width when extended.
func outputReference(c CRC, outBits int, r uint64) uint64 {
	var out uint64
	for k := range outBits {
		src := k
		if k >= c.Width {
			if !c.Extend {
				break
			}
			src = k % c.Width
		}
		out |= (r >> src & 1) << k
	}
	return out
}

// sumReference hashes a list of fields given as (value, width) pairs: it lays
// the bits out one by one, zero-extends at the top to whole bytes, and runs
// crcBitwise.
func sumReference(c CRC, outBits int, values []uint64, widths []int) uint64 {
	var bits []bool
	for i, v := range values {
		for j := widths[i] - 1; j >= 0; j-- {
			bits = append(bits, v>>j&1 == 1)
		}
	}
	for len(bits)%8 != 0 {
		bits = append([]bool{false}, bits...)
	}
	b := make([]byte, len(bits)/8)
	for i, set := range bits {
		if set {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	return outputReference(c, outBits, crcBitwise(c, b))
}
