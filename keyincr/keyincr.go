// Package keyincr implements DTA's Key-Increment primitive in memory: the
// layout of a collector's counter region, the translation of a report into
// the RDMA FETCH_ADDs that update its N counters, a Store that applies them
// atomically and answers count-min queries, and the count-min error bound.
//
// A region holds S 8-byte counters (S a power of two) in the collector's
// host byte order, as a NIC's FETCH_ADD leaves them. Copy n of key adds the
// report's value to the counter at slot(key, n)·8, with the same addressing
// as Key-Write: by default tofino.PerCopy, whose copy 0 is spec section 4's
// CRC32(le32(key) ‖ u8(0)) & (S-1) and whose copy n >= 1 hashes the same
// input with its own CRC polynomial, so a key's counters are independent
// count-min rows. Spec section 4's own formula, tofino.Reference, makes the
// copies XOR-related (for N a power of two a key's N counters are always
// equal); set Layout.Hasher to tofino.Reference to read memory written that way,
// e.g. by the reference prototype. A query returns the minimum of the key's
// N counters. See docs/DTA-WIRE.md section 8.4.
package keyincr

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/dtakit/dtakit/dta/tofino"
)

// MaxRedundancy is the largest N a report or a query may use.
const MaxRedundancy = 255

// MaxSlots is the largest counter count: indices are a 32-bit hash masked
// with S-1.
const MaxSlots = 1 << 32

// CounterSize is the size of a counter in bytes.
const CounterSize = 8

// Layout is the geometry of a Key-Increment region: Slots counters of 8
// bytes. Build one as a literal and check it with Validate; NewStore, the
// collector and the translator refuse a layout Validate refuses.
type Layout struct {
	// Slots is S, the number of counters, a power of two in 1..2^32.
	Slots uint64
	// Hasher addresses counters; nil means tofino.PerCopy. Memory updated
	// by the reference prototype, or by a switch that follows spec section
	// 4 as written, must be read with tofino.Reference; writers and
	// readers must always agree.
	Hasher tofino.Hasher
}

// Validate reports why l is not a usable layout, with an error wrapping
// ErrLayout, or nil.
func (l Layout) Validate() error {
	if l.Slots == 0 || l.Slots > MaxSlots || l.Slots&(l.Slots-1) != 0 {
		return fmt.Errorf("%w: slot count %d is not a power of two in 1..2^32", ErrLayout, l.Slots)
	}
	if l.Slots > uint64(^uint(0)>>1)/CounterSize {
		return fmt.Errorf("%w: %d counters do not fit in memory", ErrLayout, l.Slots)
	}
	return nil
}

// hasher returns the hasher l addresses counters with.
func (l Layout) hasher() tofino.Hasher { return tofino.OrPerCopy(l.Hasher) }

// mask is S-1, which cuts a slot hash to a counter index.
func (l Layout) mask() uint32 { return uint32(l.Slots - 1) }

// RegionSize returns the number of bytes the region needs, 8·Slots.
func (l Layout) RegionSize() uint64 { return l.Slots * CounterSize }

// Slot returns the counter index of copy n of key. It does not allocate.
func (l Layout) Slot(key uint32, n uint8) uint64 {
	return uint64(l.hasher().Slot(key, n) & l.mask())
}

// Offset returns the region offset of copy n of key, 8·Slot(key, n).
func (l Layout) Offset(key uint32, n uint8) uint64 {
	return uint64(l.hasher().Slot(key, n)&l.mask()) * CounterSize
}

// Write is what one copy of a report does to the region: Add added to the
// 8-byte counter at Offset bytes from the region's base, an RDMA FETCH_ADD
// (named Write like the other primitives' operations).
type Write struct {
	Offset uint64
	Add    uint64
}

// AppendWrites translates the report (key, add, n) into its n
// fetch-and-adds, appended to dst. It does not allocate when dst has room for n more.
// On error dst is returned unchanged.
func (l Layout) AppendWrites(dst []Write, key uint32, add uint64, n int) ([]Write, error) {
	if n < 1 || n > MaxRedundancy {
		return dst, errRedundancy
	}
	h, mask := l.hasher(), l.mask()
	for i := range n {
		dst = append(dst, Write{Offset: uint64(h.Slot(key, uint8(i))&mask) * CounterSize, Add: add})
	}
	return dst, nil
}

// Store is a Key-Increment region: it applies fetch-and-adds atomically and
// answers count-min queries. Every method is safe for concurrent use; the
// counters are read and written with sync/atomic, so a NIC's atomics on the
// same memory and the Store's agree.
type Store struct {
	layout   Layout
	region   []byte
	counters []uint64 // the region, seen as counters
}

// NewStore returns a Store over region with layout l. A nil region
// allocates a zeroed one; a region shorter than l.RegionSize() or not 8-byte
// aligned is an ErrRegion; bytes past RegionSize are not used.
func NewStore(l Layout, region []byte) (*Store, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("new store: %w", err)
	}
	l.Hasher = l.hasher()
	size := l.RegionSize()
	if region == nil {
		c := make([]uint64, l.Slots)
		region = unsafe.Slice((*byte)(unsafe.Pointer(&c[0])), size)
	}
	if uint64(len(region)) < size {
		return nil, fmt.Errorf("new store: %w: region of %d bytes, layout needs %d", ErrRegion, len(region), size)
	}
	if uintptr(unsafe.Pointer(&region[0]))%CounterSize != 0 {
		return nil, fmt.Errorf("new store: %w: region not 8-byte aligned", ErrRegion)
	}
	return &Store{
		layout:   l,
		region:   region[:size:size],
		counters: unsafe.Slice((*uint64)(unsafe.Pointer(&region[0])), l.Slots),
	}, nil
}

// Layout returns the store's layout, with its default hasher filled in.
func (s *Store) Layout() Layout { return s.layout }

// Region returns the store's memory, RegionSize bytes.
func (s *Store) Region() []byte { return s.region }

// Apply performs one fetch-and-add atomically and returns the counter's
// previous value, as the NIC's ATOMIC ACK would. An offset that is not on a
// counter of the region is refused with ErrOutOfRegion. It does not allocate.
func (s *Store) Apply(op Write) (uint64, error) {
	if op.Offset%CounterSize != 0 || op.Offset/CounterSize >= uint64(len(s.counters)) {
		return 0, errOutOfRegion
	}
	return atomic.AddUint64(&s.counters[op.Offset/CounterSize], op.Add) - op.Add, nil
}

// ApplyWrites performs every fetch-and-add of ops, or none if any is not on
// a counter of the region. It does not allocate.
func (s *Store) ApplyWrites(ops []Write) error {
	for _, op := range ops {
		if op.Offset%CounterSize != 0 || op.Offset/CounterSize >= uint64(len(s.counters)) {
			return errOutOfRegion
		}
	}
	for _, op := range ops {
		atomic.AddUint64(&s.counters[op.Offset/CounterSize], op.Add)
	}
	return nil
}

// Add applies the report (key, add, n) as the translator would: add to each
// of the key's n counters (twice to a counter two copies share). It does not
// allocate.
func (s *Store) Add(key uint32, add uint64, n int) error {
	if n < 1 || n > MaxRedundancy {
		return errRedundancy
	}
	l := &s.layout
	for i := range n {
		atomic.AddUint64(&s.counters[l.Hasher.Slot(key, uint8(i))&l.mask()], add)
	}
	return nil
}

// Query returns the count-min estimate of key's total: the minimum of its
// first n counters. It never underestimates a total added with redundancy
// at least n (counters only grow, barring wrap-around). It does not
// allocate.
func (s *Store) Query(key uint32, n int) (uint64, error) {
	if n < 1 || n > MaxRedundancy {
		return 0, errRedundancy
	}
	l := &s.layout
	est := ^uint64(0)
	for i := range n {
		est = min(est, atomic.LoadUint64(&s.counters[l.Hasher.Slot(key, uint8(i))&l.mask()]))
	}
	return est, nil
}

// batchSlots bounds the counters one round of QueryBatch reads.
const batchSlots = 128

// QueryBatch sets dst[i] to Query(keys[i], n). Like keywrite's batch query
// it computes every counter address of a round of keys first, then loads
// them in a loop of independent loads so their cache and TLB misses
// overlap. dst must be at least as long as keys. It does not allocate.
func (s *Store) QueryBatch(keys []uint32, n int, dst []uint64) error {
	if n < 1 || n > MaxRedundancy {
		return errRedundancy
	}
	if len(dst) < len(keys) {
		return errResultsShort
	}
	per := max(1, min(64, batchSlots/n))
	var idx [max(batchSlots, MaxRedundancy)]uint32
	l := &s.layout
	h, mask := l.Hasher, l.mask()
	counters := s.counters
	for len(keys) > 0 {
		k := min(per, len(keys))
		if pc, ok := h.(tofino.PerCopyHasher); ok && n == 2 {
			// The default hasher at the common redundancy, called
			// directly: one merged table for both copies.
			for q, key := range keys[:k] {
				_, s0, s1 := pc.Hashes2(key)
				idx[2*q], idx[2*q+1] = s0&mask, s1&mask
			}
		} else {
			j := 0
			for _, key := range keys[:k] {
				for i := range n {
					idx[j] = h.Slot(key, uint8(i)) & l.mask()
					j++
				}
			}
		}
		j := 0
		for q := range keys[:k] {
			est := atomic.LoadUint64(&counters[idx[j]])
			for i := 1; i < n; i++ {
				est = min(est, atomic.LoadUint64(&counters[idx[j+i]]))
			}
			dst[q] = est
			j += n
		}
		keys, dst = keys[k:], dst[k:]
	}
	return nil
}

// Snapshot moves the epoch's counts into dst, a store of the same layout,
// and leaves s counting the next epoch from zero: each counter is swapped
// with zero atomically, so every fetch-and-add is counted in exactly one
// epoch, even while a NIC adds. (A report whose N adds straddle the moment
// its counters are swapped counts in one epoch for some counters and in the
// next for others; count-min then errs low by that report for the key in
// the epoch that has fewer of its adds.) dst's previous counts are
// overwritten. It does not allocate.
func (s *Store) Snapshot(dst *Store) error {
	if dst.layout != s.layout {
		return fmt.Errorf("snapshot: %w: destination layout differs", ErrSnapshot)
	}
	for i := range s.counters {
		atomic.StoreUint64(&dst.counters[i], atomic.SwapUint64(&s.counters[i], 0))
	}
	return nil
}

// Total returns the sum of all counters: n times the stream's total when
// every report was added with redundancy n (the T of the count-min bound
// ε·T, see FailureProb).
func (s *Store) Total() uint64 {
	var t uint64
	for i := range s.counters {
		t += atomic.LoadUint64(&s.counters[i])
	}
	return t
}

// Reset zeroes every counter, for a new epoch. Each counter is cleared
// atomically, so concurrent adds are either counted in the old epoch or kept
// in the new one; a query racing with Reset may mix the two.
func (s *Store) Reset() {
	for i := range s.counters {
		atomic.StoreUint64(&s.counters[i], 0)
	}
}
