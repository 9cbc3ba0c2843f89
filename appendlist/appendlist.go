// Package appendlist implements DTA's Append primitive (spec section 5): L
// ring buffers of E entries in the collector's memory. The translator's
// Batcher collects B entries of a list and writes them with one RDMA WRITE
// at the list's head; the collector's Reader consumes entries in order from
// its own tail, treating an all-zero entry as not yet written and zeroing
// what it consumed.
//
// With Layout.Markers each entry carries a lap marker, so a reader can tell
// when the writer lapped it and how many entries were lost; without it the
// layout is the reference prototype's (docs/DTA-WIRE.md section 8.5).
package appendlist

import (
	"errors"
	"fmt"
	"math/bits"
)

// Errors returned by this package. Each error wraps exactly one of them.
var (
	// ErrLayout: a Layout field is out of range.
	ErrLayout = errors.New("appendlist: invalid layout")
	// ErrList: a list ID is not below the layout's list count.
	ErrList = errors.New("appendlist: list ID out of range")
	// ErrData: appended data has the wrong size or is all zero.
	ErrData = errors.New("appendlist: invalid entry data")
	// ErrRegion: a region is too small, or a write does not fit it.
	ErrRegion = errors.New("appendlist: write outside region")
	// ErrLapped: the writer overwrote entries the reader had not read;
	// the error is a *LapError saying how many.
	ErrLapped = errors.New("appendlist: reader lapped, entries lost")
	// ErrGeometry: an encoded layout is malformed (length, version, flags).
	ErrGeometry = errors.New("appendlist: bad layout geometry")
	// ErrSizing: a Size target it cannot meet or understand.
	ErrSizing = errors.New("appendlist: cannot size")
)

// LapError reports entries lost because the writer lapped a reader.
type LapError struct {
	List uint32
	Lost uint64 // entries skipped
}

func (e *LapError) Error() string {
	return fmt.Sprintf("appendlist: list %d: reader lapped, %d entries lost", e.List, e.Lost)
}

// Is reports whether target is ErrLapped.
func (e *LapError) Is(target error) bool { return target == ErrLapped }

// MarkerSize is the bytes of the lap marker that ends each entry when
// Layout.Markers is set.
const MarkerSize = 4

// Layout is the geometry of one Append region.
type Layout struct {
	// Lists is L, the number of lists (1..2^24).
	Lists int
	// Entries is E, the entries per list, a power of two (up to 2^30).
	Entries int
	// EntrySize is e, the data bytes of an entry, a multiple of 4
	// (4..4096).
	EntrySize int
	// Batch is B, the entries written at once, a power of two dividing E
	// (0 means 1).
	Batch int
	// Markers stores each entry as data ‖ le32(marker), the marker naming
	// the lap the entry was written in, so readers detect lapping; written
	// last, it also tells a reader the entry is complete. Off is the
	// reference-compatible layout.
	Markers bool
}

func (l Layout) withDefaults() Layout {
	if l.Batch == 0 {
		l.Batch = 1
	}
	return l
}

// Validate reports what is wrong with l, or nil.
func (l Layout) Validate() error {
	l = l.withDefaults()
	pow2 := func(n int) bool { return n > 0 && n&(n-1) == 0 }
	switch {
	case l.Lists < 1 || l.Lists > 1<<24:
		return fmt.Errorf("%w: %d lists, want 1..2^24", ErrLayout, l.Lists)
	case !pow2(l.Entries) || l.Entries > 1<<30:
		return fmt.Errorf("%w: %d entries per list, want a power of two up to 2^30", ErrLayout, l.Entries)
	case l.EntrySize < 4 || l.EntrySize > 4096 || l.EntrySize%4 != 0:
		return fmt.Errorf("%w: entry size %d, want a multiple of 4 in 4..4096", ErrLayout, l.EntrySize)
	case !pow2(l.Batch) || l.Batch > l.Entries:
		return fmt.Errorf("%w: batch %d, want a power of two dividing %d entries", ErrLayout, l.Batch, l.Entries)
	}
	if hi, _ := bits.Mul64(uint64(l.Lists), l.ListSize()); hi != 0 {
		return fmt.Errorf("%w: region size overflows", ErrLayout)
	}
	return nil
}

// SlotSize returns the bytes an entry takes in memory: EntrySize, plus
// MarkerSize with Markers.
func (l Layout) SlotSize() int {
	if l.Markers {
		return l.EntrySize + MarkerSize
	}
	return l.EntrySize
}

// ListSize returns the bytes of one list, E·SlotSize.
func (l Layout) ListSize() uint64 { return uint64(l.Entries) * uint64(l.SlotSize()) }

// RegionSize returns the bytes of the region, L·ListSize.
func (l Layout) RegionSize() uint64 { return uint64(l.Lists) * l.ListSize() }

// ListOffset returns list's offset in the region, list·ListSize.
func (l Layout) ListOffset(list uint32) uint64 { return uint64(list) * l.ListSize() }

// marker returns the lap marker of absolute position p: the lap number
// p/E, modulo 2^32-1, plus one, so that it is never 0 (unwritten).
func marker(p uint64, logE uint) uint32 {
	return uint32((p>>logE)%0xFFFFFFFF) + 1
}

// Write is one RDMA WRITE into the region: Data at byte Offset. With Imm it
// is a WRITE with Immediate whose immediate data is ImmData (the list ID).
type Write struct {
	Offset  uint64
	Data    []byte
	Imm     bool
	ImmData uint32
}
