package tofino

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Hasher computes the hashes of DTA's key-addressed primitives (spec section 4):
// the slot hash of copy n, CRC32(le32(key) ‖ u8(n)), and the key checksum,
// CRC32(le32(key)). Callers mask slot hashes with their slot count.
type Hasher interface {
	// Slot returns the unmasked slot hash of copy n of key.
	Slot(key uint32, n uint8) uint32
	// Slots sets dst[n] = Slot(key, n) for every n < len(dst), sharing the
	// work on the key's bytes between copies.
	Slots(key uint32, dst []uint32)
	// Checksum returns the key checksum.
	Checksum(key uint32) uint32
}

// Switch is the Hasher the switch uses: Tofino CRC32 (bf-utils crc_32) over
// le32(key) ‖ u8(n) for slots and over le32(key) for the checksum. It is the
// default everywhere. Its methods do not allocate.
var Switch Hasher = switchHasher{}

type switchHasher struct{}

var crc32Hash, _ = NewPredefined(32, "crc_32")

// crc32Tab is crc_32's slicing tables, shared with crc32Hash. The Switch
// hasher's key is exactly four bytes: one slicing-by-4 step.
var crc32Tab = crc32Hash.tab32

// keyReg returns the crc_32 register after le32(key), before the xor-out.
func keyReg(key uint32) uint32 {
	r := ^key // init 0xFFFFFFFF, XORed with the four key bytes at once
	return crc32Tab[3][byte(r)] ^ crc32Tab[2][byte(r>>8)] ^ crc32Tab[1][byte(r>>16)] ^ crc32Tab[0][r>>24]
}

func (switchHasher) Slot(key uint32, n uint8) uint32 {
	r := keyReg(key)
	return ^(crc32Tab[0][byte(r)^n] ^ r>>8)
}

func (switchHasher) Slots(key uint32, dst []uint32) {
	r := keyReg(key)
	t := &crc32Tab[0]
	hi := r >> 8
	for n := range dst {
		dst[n] = ^(t[byte(r)^byte(n)] ^ hi)
	}
}

func (switchHasher) Checksum(key uint32) uint32 {
	return ^keyReg(key)
}

// XXHash is a Hasher for software-only deployments, where a software
// translator writes the memory a software collector reads: the low 32 bits of
// XXH64 (seed 0) over le32(key) ‖ u8(n) for slots and over le32(key) for the
// checksum. It is NOT switch-compatible: memory written by a switch, or by any
// party using Switch, cannot be read with it. Nothing uses it unless chosen
// explicitly. Its methods do not allocate.
var XXHash Hasher = xxHasher{}

type xxHasher struct{}

func (xxHasher) Slot(key uint32, n uint8) uint32 {
	var b [5]byte
	binary.LittleEndian.PutUint32(b[:], key)
	b[4] = n
	return uint32(xxhash.Sum64(b[:]))
}

func (h xxHasher) Slots(key uint32, dst []uint32) {
	for n := range dst {
		dst[n] = h.Slot(key, uint8(n))
	}
}

func (xxHasher) Checksum(key uint32) uint32 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], key)
	return uint32(xxhash.Sum64(b[:]))
}
