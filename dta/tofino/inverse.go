package tofino

import "sync"

// A KeyRecoverer can tell which key a stored checksum belongs to. The CRC-32
// checksum of exactly 32 bits of key is a bijection (an affine map whose
// linear part, x^32·m(x) mod a degree-32 polynomial with a nonzero constant
// term, has no kernel), so every checksum names exactly one key. A collector
// uses it to list the keys in its memory without being told them.
// [Reference] and [PerCopy] are KeyRecoverers; [XXHash] is not.
type KeyRecoverer interface {
	KeyOf(checksum uint32) uint32
}

// invTab[j][b] is the inverse of the linear part of keyReg applied to b<<8j.
var (
	invTab     [4][256]uint32
	invTabOnce sync.Once
)

// buildInverse inverts the 32×32 matrix over GF(2) whose column i is
// keyLinear(1<<i), by Gauss-Jordan elimination on (M | I).
func buildInverse() {
	keyLinear := func(r uint32) uint32 {
		return crc32Tab[3][byte(r)] ^ crc32Tab[2][byte(r>>8)] ^ crc32Tab[1][byte(r>>16)] ^ crc32Tab[0][r>>24]
	}
	// Row-major: rows[i] holds row i of M in its low 32 bits and of I above.
	var rows [32]uint64
	for col := range 32 {
		c := keyLinear(1 << col)
		for row := range 32 {
			if c>>row&1 == 1 {
				rows[row] |= 1 << col
			}
		}
	}
	for i := range 32 {
		rows[i] |= 1 << (32 + i)
	}
	for col := range 32 {
		p := col
		for rows[p]>>col&1 == 0 {
			p++ // the matrix is invertible (see KeyRecoverer): a pivot exists
		}
		rows[col], rows[p] = rows[p], rows[col]
		for r := range 32 {
			if r != col && rows[r]>>col&1 == 1 {
				rows[r] ^= rows[col]
			}
		}
	}
	// rows[i]>>32 is row i of M⁻¹; column c of M⁻¹ is M⁻¹(1<<c).
	var inv [32]uint32
	for row := range 32 {
		m := uint32(rows[row] >> 32)
		for c := range 32 {
			if m>>c&1 == 1 {
				inv[c] |= 1 << row
			}
		}
	}
	for j := range 4 {
		for b := range 256 {
			var v uint32
			for bit := range 8 {
				if b>>bit&1 == 1 {
					v ^= inv[8*j+bit]
				}
			}
			invTab[j][b] = v
		}
	}
}

// keyOfChecksum inverts ^keyReg(key): keyReg(key) = L(^key) with L linear.
func keyOfChecksum(checksum uint32) uint32 {
	invTabOnce.Do(buildInverse)
	r := ^checksum
	return ^(invTab[0][byte(r)] ^ invTab[1][byte(r>>8)] ^ invTab[2][byte(r>>16)] ^ invTab[3][r>>24])
}

// KeyOf returns the key whose checksum is checksum. It does not allocate.
func (ReferenceHasher) KeyOf(checksum uint32) uint32 { return keyOfChecksum(checksum) }

// KeyOf returns the key whose checksum is checksum. It does not allocate.
func (PerCopyHasher) KeyOf(checksum uint32) uint32 { return keyOfChecksum(checksum) }
