package keywrite

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/dtakit/dtakit/dta/tofino"
)

// MaxRedundancy is the largest N a report or a query may use: the copy
// number is one byte of the slot hash's input.
const MaxRedundancy = 255

// MaxSlots is the largest slot count: slot indices are a 32-bit hash masked
// with S-1.
const MaxSlots = 1 << 32

// checksumSize is the size of the key checksum at the start of every slot.
const checksumSize = 4

// Layout is the geometry of a Key-Write region: Slots slots of SlotSize
// bytes, each holding le32(checksum) ‖ data with data of DataSize bytes.
// Build one as a literal and check it with Validate; NewStore, the
// collector and the translator refuse a layout Validate refuses.
type Layout struct {
	// Slots is S, the number of slots, a power of two in 1..2^32.
	Slots uint64
	// DataSize is the data bytes a slot holds, a positive multiple of 4 up
	// to 2^30. The slot size is nextpow2(4 + DataSize).
	DataSize int
	// Hasher addresses slots and computes checksums; nil means
	// tofino.PerCopy, the switch's CRC32 with a per-copy seed. Memory a
	// switch writes must be read with the switch's hasher; a software-only
	// deployment may use a faster one as long as its writers and readers
	// agree.
	Hasher tofino.Hasher
}

// Validate reports why l is not a usable layout, with an error wrapping
// ErrLayout, or nil.
func (l Layout) Validate() error {
	if l.Slots == 0 || l.Slots > MaxSlots || l.Slots&(l.Slots-1) != 0 {
		return fmt.Errorf("%w: slot count %d is not a power of two in 1..2^32", ErrLayout, l.Slots)
	}
	if l.DataSize <= 0 || l.DataSize%4 != 0 {
		return fmt.Errorf("%w: data size %d is not a positive multiple of 4", ErrLayout, l.DataSize)
	}
	if l.DataSize > 1<<30 {
		return fmt.Errorf("%w: data size %d above 2^30", ErrLayout, l.DataSize)
	}
	if bits.Len64(l.Slots)-1+int(l.slotShift()) > bits.Len64(math.MaxInt)-1 {
		return fmt.Errorf("%w: %d slots of %d bytes do not fit in memory", ErrLayout, l.Slots, l.SlotSize())
	}
	return nil
}

// hasher returns the hasher l addresses slots with.
func (l Layout) hasher() tofino.Hasher { return tofino.OrPerCopy(l.Hasher) }

// mask is S-1, which cuts a slot hash to a slot index.
func (l Layout) mask() uint32 { return uint32(l.Slots - 1) }

// slotShift is log2 SlotSize.
func (l Layout) slotShift() uint8 { return uint8(bits.Len64(uint64(checksumSize+l.DataSize) - 1)) }

// SlotSize returns the size of a slot in bytes, nextpow2(4 + DataSize).
func (l Layout) SlotSize() int { return 1 << l.slotShift() }

// PayloadSize returns the number of bytes each copy writes, 4 + DataSize.
func (l Layout) PayloadSize() int { return checksumSize + l.DataSize }

// RegionSize returns the number of bytes the region needs, Slots·SlotSize.
func (l Layout) RegionSize() uint64 { return l.Slots << l.slotShift() }

// Slot returns the slot index of copy n of key. It does not allocate.
func (l Layout) Slot(key uint32, n uint8) uint64 {
	return uint64(l.hasher().Slot(key, n) & l.mask())
}

// Offset returns the region offset of copy n of key, Slot(key, n)·SlotSize.
// It does not allocate.
func (l Layout) Offset(key uint32, n uint8) uint64 {
	return uint64(l.hasher().Slot(key, n)&l.mask()) << l.slotShift()
}

// Checksum returns the checksum stored with key's copies.
func (l Layout) Checksum(key uint32) uint32 { return l.hasher().Checksum(key) }

// Write is one RDMA WRITE of a report copy: Payload written at Offset bytes
// from the region's base.
type Write struct {
	Offset uint64
	Data   []byte
}

// AppendPayload appends the bytes every copy of a report writes,
// le32(checksum(key)) ‖ data, to dst. It does not allocate when dst has room.
func (l Layout) AppendPayload(dst []byte, key uint32, data []byte) ([]byte, error) {
	if len(data) != l.DataSize {
		return dst, errDataSize(len(data), l.DataSize)
	}
	dst = binary.LittleEndian.AppendUint32(dst, l.hasher().Checksum(key))
	return append(dst, data...), nil
}

// AppendOffsets appends the region offsets of copies 0..n-1 of key to dst.
// It does not allocate when dst has room.
func (l Layout) AppendOffsets(dst []uint64, key uint32, n int) ([]uint64, error) {
	if n < 1 || n > MaxRedundancy {
		return dst, errRedundancy
	}
	for i := range n {
		dst = append(dst, l.Offset(key, uint8(i)))
	}
	return dst, nil
}

// AppendWrites translates the report (key, data, n) into its n writes,
// appended to ops. The payload, shared by every write, is appended to buf;
// the writes alias it, so buf must not be reused while they are pending.
// It returns the extended ops and buf and does not allocate when both have
// room (n writes, PayloadSize bytes). On error ops and buf are unchanged.
func (l Layout) AppendWrites(ops []Write, buf []byte, key uint32, data []byte, n int) ([]Write, []byte, error) {
	if n < 1 || n > MaxRedundancy {
		return ops, buf, errRedundancy
	}
	start := len(buf)
	buf, err := l.AppendPayload(buf, key, data)
	if err != nil {
		return ops, buf, err
	}
	payload := buf[start:len(buf):len(buf)]
	h, mask, shift := l.hasher(), l.mask(), l.slotShift()
	for i := range n {
		ops = append(ops, Write{Offset: uint64(h.Slot(key, uint8(i))&mask) << shift, Data: payload})
	}
	return ops, buf, nil
}

// AppendCopy is AppendWrites for copy c (0..n-1) alone: the one write of a
// report that writes a single copy of its n (DART, PINT).
func (l Layout) AppendCopy(ops []Write, buf []byte, key uint32, data []byte, n, c int) ([]Write, []byte, error) {
	if n < 1 || n > MaxRedundancy {
		return ops, buf, errRedundancy
	}
	if c < 0 || c >= n {
		return ops, buf, errCopy
	}
	start := len(buf)
	buf, err := l.AppendPayload(buf, key, data)
	if err != nil {
		return ops, buf, err
	}
	return append(ops, Write{Offset: l.Offset(key, uint8(c)), Data: buf[start:len(buf):len(buf)]}), buf, nil
}
