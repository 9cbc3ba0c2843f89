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

// Option configures a Layout.
type Option func(*Layout)

// WithHasher makes the layout address slots and compute checksums with h
// instead of tofino.Reference, the switch's CRC32. Memory written by a switch
// must be read with tofino.Reference; a software-only deployment may use a
// faster hash as long as its writers and readers agree.
func WithHasher(h tofino.Hasher) Option {
	return func(l *Layout) { l.hasher = h }
}

// Layout is the geometry of a Key-Write region: S slots of SlotSize bytes,
// each holding le32(checksum) ‖ data with data of DataSize bytes. The zero
// Layout is invalid; build one with NewLayout.
type Layout struct {
	hasher    tofino.Hasher
	slots     uint64
	mask      uint32
	dataSize  int
	slotShift uint8
}

// NewLayout returns the layout of slots slots (a power of two in 1..2^32)
// holding dataSize bytes of data each (a positive multiple of 4). The slot
// size is nextpow2(4 + dataSize).
func NewLayout(slots uint64, dataSize int, opts ...Option) (Layout, error) {
	if slots == 0 || slots > MaxSlots || slots&(slots-1) != 0 {
		return Layout{}, fmt.Errorf("new layout: %w: slot count %d is not a power of two in 1..2^32", ErrLayout, slots)
	}
	if dataSize <= 0 || dataSize%4 != 0 {
		return Layout{}, fmt.Errorf("new layout: %w: data size %d is not a positive multiple of 4", ErrLayout, dataSize)
	}
	if dataSize > 1<<30 {
		return Layout{}, fmt.Errorf("new layout: %w: data size %d above 2^30", ErrLayout, dataSize)
	}
	shift := uint8(bits.Len64(uint64(checksumSize+dataSize) - 1))
	if bits.Len64(slots)-1+int(shift) > bits.Len64(math.MaxInt)-1 {
		return Layout{}, fmt.Errorf("new layout: %w: %d slots of %d bytes do not fit in memory", ErrLayout, slots, 1<<shift)
	}
	l := Layout{
		hasher:    tofino.PerCopy,
		slots:     slots,
		mask:      uint32(slots - 1),
		dataSize:  dataSize,
		slotShift: shift,
	}
	for _, o := range opts {
		o(&l)
	}
	if l.hasher == nil {
		return Layout{}, fmt.Errorf("new layout: %w: nil hasher", ErrLayout)
	}
	return l, nil
}

// IsValid reports whether l was built by NewLayout.
func (l Layout) IsValid() bool { return l.slots != 0 }

// Slots returns S, the number of slots.
func (l Layout) Slots() uint64 { return l.slots }

// DataSize returns the number of data bytes a slot holds.
func (l Layout) DataSize() int { return l.dataSize }

// SlotSize returns the size of a slot in bytes, nextpow2(4 + DataSize).
func (l Layout) SlotSize() int { return 1 << l.slotShift }

// PayloadSize returns the number of bytes each copy writes, 4 + DataSize.
func (l Layout) PayloadSize() int { return checksumSize + l.dataSize }

// RegionSize returns the number of bytes the region needs, Slots·SlotSize.
func (l Layout) RegionSize() uint64 { return l.slots << l.slotShift }

// Hasher returns the hasher that addresses slots and computes checksums.
func (l Layout) Hasher() tofino.Hasher { return l.hasher }

// Slot returns the slot index of copy n of key. It does not allocate.
func (l Layout) Slot(key uint32, n uint8) uint64 {
	return uint64(l.hasher.Slot(key, n) & l.mask)
}

// Offset returns the region offset of copy n of key, Slot(key, n)·SlotSize.
// It does not allocate.
func (l Layout) Offset(key uint32, n uint8) uint64 {
	return uint64(l.hasher.Slot(key, n)&l.mask) << l.slotShift
}

// Checksum returns the checksum stored with key's copies.
func (l Layout) Checksum(key uint32) uint32 { return l.hasher.Checksum(key) }

// Write is one RDMA WRITE of a report copy: Payload written at Offset bytes
// from the region's base.
type Write struct {
	Offset uint64
	Data   []byte
}

// AppendPayload appends the bytes every copy of a report writes,
// le32(checksum(key)) ‖ data, to dst. It does not allocate when dst has room.
func (l Layout) AppendPayload(dst []byte, key uint32, data []byte) ([]byte, error) {
	if len(data) != l.dataSize {
		return dst, errDataSize
	}
	dst = binary.LittleEndian.AppendUint32(dst, l.hasher.Checksum(key))
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
	for i := range n {
		ops = append(ops, Write{Offset: l.Offset(key, uint8(i)), Data: payload})
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
