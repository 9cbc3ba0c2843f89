// Package crc32s is CRC-32/ISO-HDLC (the IEEE polynomial, reflected, as in
// hash/crc32 with IEEETable) by slicing by 8, for the short inputs of the
// software target's and translator's ICRC fast paths. Two things make it
// worth having beside the library: for inputs of a few dozen bytes it is
// faster, and, since it makes no call through a function variable, a stack
// buffer passed to it stays on the stack. (The rocev2 package has its own
// copy: the wire packages import nothing of ours but dta/tofino.)
package crc32s

import "encoding/binary"

// Table holds the slicing tables: Table[k][v] is what byte v adds to the CRC
// register when k zero bytes follow it. Table[0] is the classic
// byte-at-a-time table.
var Table = func() (t [8][256]uint32) {
	for i := range 256 {
		c := uint32(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xEDB88320
			} else {
				c >>= 1
			}
		}
		t[0][i] = c
	}
	for i := range 256 {
		for k := 1; k < 8; k++ {
			t[k][i] = t[k-1][i]>>8 ^ t[0][t[k-1][i]&0xFF]
		}
	}
	return t
}()

// Update returns the CRC of p continued from crc, as
// crc32.Update(crc, crc32.IEEETable, p) does. It does not allocate and does
// not let p escape.
func Update(crc uint32, p []byte) uint32 {
	t := &Table
	crc = ^crc
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint32(p)
		crc = t[7][crc&0xFF] ^ t[6][crc>>8&0xFF] ^ t[5][crc>>16&0xFF] ^ t[4][crc>>24] ^
			t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]]
		p = p[8:]
	}
	if len(p) >= 4 { // RoCEv2 packets are padded to 4 bytes: the usual tail
		crc ^= binary.LittleEndian.Uint32(p)
		crc = t[3][crc&0xFF] ^ t[2][crc>>8&0xFF] ^ t[1][crc>>16&0xFF] ^ t[0][crc>>24]
		p = p[4:]
	}
	for _, c := range p {
		crc = t[0][byte(crc)^c] ^ crc>>8
	}
	return ^crc
}

// Linear returns the linear part of the CRC of p: the register after p
// starting from 0, with no final XOR. For messages x and y of one length,
// Linear(x XOR y) = CRC(x) XOR CRC(y), which is what lets the fast paths
// update an ICRC for the bytes that changed instead of recomputing it.
func Linear(p []byte) uint32 { return ^Update(0xFFFFFFFF, p) }
