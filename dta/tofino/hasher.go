package tofino

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// Hasher computes the hashes of DTA's key-addressed primitives: the slot hash
// of copy n of a key and the key checksum, CRC32(le32(key)). Callers mask
// slot hashes with their slot count. The built-in hashers are [PerCopy] (the
// default), [Reference] and [XXHash].
type Hasher interface {
	// Slot returns the unmasked slot hash of copy n of key.
	Slot(key uint32, n uint8) uint32
	// Slots sets dst[n] = Slot(key, n) for every n < len(dst), sharing the
	// work on the key's bytes between copies where it can.
	Slots(key uint32, dst []uint32)
	// Checksum returns the key checksum.
	Checksum(key uint32) uint32
}

// Reference is spec section 4 as written: Tofino CRC32 (bf-utils crc_32)
// over le32(key) ‖ u8(n) for the slot of copy n and over le32(key) for the
// checksum. A CRC is affine, so Slot(k, n) = Slot(k, 0) XOR A(n) with A(n)
// the same for every key: two keys that collide in one copy collide in all,
// and redundancy does not protect against overwrites. Use it to read memory
// written by the reference prototype or by a switch that follows section 4
// as written. Its methods do not allocate.
var Reference Hasher = ReferenceHasher{}

// PerCopy is the project's default Hasher: copy 0 is Reference's,
// CRC32(le32(key) ‖ u8(0)), so one-copy memory is the reference's byte for
// byte; copy n >= 1 hashes the same field list, le32(key) ‖ u8(n), with a
// custom CRC-32 of its own polynomial, [CopyPolynomial](n), reflected, init
// and xor-out 0xFFFFFFFF like CRC32. Copies then collide independently, as
// the paper's bounds assume; on a switch it costs one hash per copy, as
// Reference does. The checksum is CRC32(le32(key)), as Reference's.
//
// A copy's tables (4 KiB) are built on its first use and shared; after that
// its methods do not allocate.
var PerCopy Hasher = PerCopyHasher{}

// OrPerCopy returns h, or PerCopy, the default of every layout, when h is
// nil.
func OrPerCopy(h Hasher) Hasher {
	if h == nil {
		return PerCopy
	}
	return h
}

// XXHash is a Hasher for software-only deployments, where a software
// translator writes the memory a software collector reads: the low 32 bits of
// XXH64 (seed 0) over le32(key) ‖ u8(n) for slots and over le32(key) for the
// checksum. It is NOT switch-compatible: memory written by a switch cannot be
// read with it. Nothing uses it unless chosen explicitly. Its methods do not
// allocate.
var XXHash Hasher = xxHasher{}

// Hasher IDs, the one-byte names of the built-in hashers in encoded layouts
// (collector advertisements, docs/DTA-WIRE.md section 8.2).
const (
	ReferenceID uint8 = 0 // Reference
	PerCopyID   uint8 = 1 // PerCopy
	XXHashID    uint8 = 2 // XXHash
)

// ErrHasher is wrapped by errors about hasher IDs: an unknown ID, or a
// Hasher that is not built in and so has none.
var ErrHasher = errors.New("tofino: no such built-in hasher")

// HasherID returns the ID of a built-in hasher (ReferenceID, PerCopyID,
// XXHashID); ok is false for any other Hasher.
func HasherID(h Hasher) (id uint8, ok bool) {
	switch h.(type) {
	case ReferenceHasher:
		return ReferenceID, true
	case PerCopyHasher:
		return PerCopyID, true
	case xxHasher:
		return XXHashID, true
	}
	return 0, false
}

// HasherByID returns the built-in hasher with the given ID, or an error
// wrapping ErrHasher.
func HasherByID(id uint8) (Hasher, error) {
	switch id {
	case ReferenceID:
		return Reference, nil
	case PerCopyID:
		return PerCopy, nil
	case XXHashID:
		return XXHash, nil
	}
	return nil, fmt.Errorf("hasher by id: %w: id %d (0 Reference, 1 PerCopy, 2 XXHash)", ErrHasher, id)
}

// ReferenceHasher is the type of [Reference]. It is exported so that a hot
// loop can call its methods directly: a call through the Hasher interface
// is not inlined, and a slice passed through it escapes to the heap.
type ReferenceHasher struct{}

var crc32Hash, _ = NewPredefined(32, "crc_32")

// crc32Tab is crc_32's slicing tables, shared with crc32Hash. The key is
// exactly four bytes: one slicing-by-4 step.
var crc32Tab = crc32Hash.tab32

// keyReg returns the crc_32 register after le32(key), before the xor-out.
func keyReg(key uint32) uint32 {
	r := ^key // init 0xFFFFFFFF, XORed with the four key bytes at once
	return crc32Tab[3][byte(r)] ^ crc32Tab[2][byte(r>>8)] ^ crc32Tab[1][byte(r>>16)] ^ crc32Tab[0][r>>24]
}

func (ReferenceHasher) Slot(key uint32, n uint8) uint32 {
	r := keyReg(key)
	return ^(crc32Tab[0][byte(r)^n] ^ r>>8)
}

func (ReferenceHasher) Slots(key uint32, dst []uint32) {
	r := keyReg(key)
	t := &crc32Tab[0]
	hi := r >> 8
	for n := range dst {
		dst[n] = ^(t[byte(r)^byte(n)] ^ hi)
	}
}

func (ReferenceHasher) Checksum(key uint32) uint32 {
	return ^keyReg(key)
}

// CopyPolynomial returns the CRC-32 polynomial (normal form) with which
// PerCopy hashes copy n: CRC32's 0x04C11DB7 for copy 0, otherwise the n-th
// polynomial of a deterministic search. The search draws splitmix64 outputs
// seeded with 0xD7A, takes each one's low 32 bits with bit 0 set, and keeps
// those with 13 to 19 terms (x^32 included) that pass Rabin's irreducibility
// test and are not already taken; CRC32's polynomial and postcard's hop
// checksum polynomials are taken from the start, so address and checksum
// hashes stay apart. Its first ten outputs are postcard's hop checksum
// polynomials of hops 7..16; the next 255 are copies 1..255.
func CopyPolynomial(n uint8) uint32 {
	if n == 0 {
		return 0x04C11DB7
	}
	return copyPolys[n-1]
}

// CopyCRC returns the CRC PerCopy uses for copy n: CopyPolynomial(n),
// reflected, init and xor-out 0xFFFFFFFF, over le32(key) ‖ u8(n).
func CopyCRC(n uint8) CRC {
	return CRC{Width: 32, Poly: uint64(CopyPolynomial(n)), Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF, Extend: true}
}

// copyTable is the slot hash of one copy as an affine map of the key's four
// bytes: Slot(key, n) = t[0][key byte 0] ^ ... ^ t[3][key byte 3], the
// constant parts (init, the copy byte, xor-out) folded into t[0].
type copyTable [4][256]uint32

// copyTables holds copy n's table once built; copy 0 is computed as
// Reference's and never built.
var copyTables [256]atomic.Pointer[copyTable]

// copyTab returns copy n's table, building it on first use (newCopyTab).
// Written so that it inlines (cost 80, the budget, with Go 1.26): the
// earlier form cost 83 and every copy past the first paid a call.
func copyTab(n uint8) (t *copyTable) {
	if t = copyTables[n].Load(); t == nil {
		t = newCopyTab(n)
	}
	return
}

// newCopyTab builds copy n's table and stores it. Two goroutines may build
// it at once; both get the first one stored.
func newCopyTab(n uint8) *copyTable {
	t := buildCopyTable(n)
	if copyTables[n].CompareAndSwap(nil, t) {
		return t
	}
	return copyTables[n].Load()
}

// buildCopyTable derives copy n's table from the slicing tables of its
// polynomial. For the 5-byte input le32(key) ‖ u8(n) the register after one
// slicing-by-4 step and one byte step is
//
//	s[4][b0^0xFF] ^ s[3][b1^0xFF] ^ s[2][b2^0xFF] ^ s[1][b3^0xFF] ^ s[0][n]
//
// (init 0xFFFFFFFF XORed into the key bytes), and the result is its
// complement.
func buildCopyTable(n uint8) *copyTable {
	var s tables
	s.fill(CopyCRC(n))
	t := new(copyTable)
	for b := range 256 {
		for j := range 4 {
			t[j][b] = uint32(s[4-j][b^0xFF])
		}
		t[0][b] ^= ^uint32(s[0][n])
	}
	return t
}

func (t *copyTable) eval(key uint32) uint32 {
	return t[0][byte(key)] ^ t[1][byte(key>>8)] ^ t[2][byte(key>>16)] ^ t[3][key>>24]
}

// PerCopyHasher is the type of [PerCopy], exported for direct calls as
// [ReferenceHasher] is.
type PerCopyHasher struct{}

func (PerCopyHasher) Slot(key uint32, n uint8) uint32 {
	if n == 0 {
		return copy0(keyReg(key))
	}
	return copyTab(n).eval(key)
}

// copy0 returns copy 0's slot hash from the key's CRC32 register: one more
// CRC step over the copy byte 0, then the xor-out.
func copy0(r uint32) uint32 { return ^(crc32Tab[0][byte(r)] ^ r>>8) }

func (h PerCopyHasher) Slots(key uint32, dst []uint32) { h.Hashes(key, dst) }

// Hashes is Checksum and Slots in one call: it sets dst[n] = Slot(key, n)
// for every n < len(dst) and returns the key checksum. With two copies or
// more the key's CRC32 register (the checksum, and copy 0 after one more
// step) and copy 1's hash come from [PerCopyHasher.Hashes2]'s merged table.
func (h PerCopyHasher) Hashes(key uint32, dst []uint32) (checksum uint32) {
	if len(dst) < 2 {
		r := keyReg(key)
		if len(dst) == 1 {
			dst[0] = copy0(r)
		}
		return ^r
	}
	checksum, dst[0], dst[1] = h.Hashes2(key)
	for n := 2; n < len(dst); n++ {
		dst[n] = copyTab(uint8(n)).eval(key)
	}
	return checksum
}

// Hashes2 is Hashes for N = 2, the common redundancy, returning the key
// checksum and the slot hashes of copies 0 and 1 without a slice: one
// merged table gives the key's CRC32 register and copy 1's hash in four
// lookups, and copy 0 takes one more.
func (PerCopyHasher) Hashes2(key uint32) (checksum, slot0, slot1 uint32) {
	t := regCopy1Tab.Load()
	if t == nil {
		t = newRegCopy1Tab()
	}
	x := t[0][byte(key)] ^ t[1][byte(key>>8)] ^ t[2][byte(key>>16)] ^ t[3][key>>24]
	r := uint32(x)
	return ^r, copy0(r), uint32(x >> 32)
}

// regCopy1Table merges keyReg's and copy 1's tables, both indexed by the
// key's bytes: entry [j][b] holds key byte j = b's share of the key's
// CRC32 register in its low 32 bits and of copy 1's slot hash in its high
// 32 bits.
type regCopy1Table [4][256]uint64

var regCopy1Tab atomic.Pointer[regCopy1Table]

func newRegCopy1Tab() *regCopy1Table {
	c1 := copyTab(1)
	t := new(regCopy1Table)
	for b := range 256 {
		for j := range 4 {
			// keyReg complements the key (the init) and reads byte j
			// from slicing table 3-j.
			t[j][b] = uint64(c1[j][b])<<32 | uint64(crc32Tab[3-j][byte(b)^0xFF])
		}
	}
	regCopy1Tab.CompareAndSwap(nil, t)
	return regCopy1Tab.Load()
}

func (PerCopyHasher) Checksum(key uint32) uint32 {
	return ^keyReg(key)
}

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
