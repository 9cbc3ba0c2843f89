package keywrite

import (
	"encoding/binary"
	"fmt"

	"github.com/dtakit/dtakit/dta/tofino"
)

// Snapshot copies the region into dst, a store of the same layout, so that
// an epoch can be queried and exported off the hot path while writes go on
// in s: Key-Write slots hold the latest value, so the next epoch starts from
// the current contents (unlike Key-Increment's, which start at zero). A
// write that lands while the copy runs is in the snapshot or not, slot by
// slot; a slot torn by it fails its checksum, as in the live region. It
// does not allocate.
func (s *Store) Snapshot(dst *Store) error {
	if dst.layout != s.layout {
		return fmt.Errorf("snapshot: %w: destination layout differs", ErrSnapshot)
	}
	copy(dst.region, s.region)
	return nil
}

// Scan lists the keys stored in the region without being told them: the
// checksum of a slot names exactly one key (tofino.KeyRecoverer), and the
// slot holds a copy of that key when it is one of the key's first n copies'
// slots. Starting at slot from, it puts into keys each key whose copy it
// finds, once (at the key's lowest-numbered copy that verifies), skips
// all-zero slots (never written; a key whose checksum and data are all zero
// cannot be told from them) and slots that verify for no key (torn, or a
// copy beyond n), and stops when keys is full or the region ends. It
// returns how many keys it wrote and the slot to continue from, Slots
// when the region is done. Query the keys for their values: Scan finds
// where keys are, the vote decides what they hold. It does not allocate.
func (s *Store) Scan(from uint64, n int, keys []uint32) (count int, next uint64, err error) {
	l := &s.layout
	kr, ok := l.Hasher.(tofino.KeyRecoverer)
	switch {
	case !ok:
		return 0, from, fmt.Errorf("scan: %w: hasher %T cannot recover keys from checksums", ErrScan, l.Hasher)
	case n < 1 || n > MaxRedundancy:
		return 0, from, errRedundancy
	case from > l.Slots:
		return 0, from, fmt.Errorf("scan: %w: slot %d of %d", ErrScan, from, l.Slots)
	}
	size := uint64(l.SlotSize())
	slot := from
	for ; slot < l.Slots && count < len(keys); slot++ {
		off := slot * size
		b := s.region[off : off+size : off+size]
		if allZero(b) {
			continue
		}
		sum := binary.LittleEndian.Uint32(b)
		key := kr.KeyOf(sum)
		if s.firstCopy(key, sum, n, off) {
			keys[count] = key
			count++
		}
	}
	return count, slot, nil
}

// firstCopy reports whether off is the lowest-numbered of key's first n
// copies whose slot holds sum, given that the slot at off holds it. Only
// the lower copies' slots are read: for copy 0 no memory at all.
func (s *Store) firstCopy(key, sum uint32, n int, off uint64) bool {
	l := &s.layout
	j := 0
	for ; j < n && l.Offset(key, uint8(j)) != off; j++ {
	}
	if j == n {
		return false // off is none of key's copies
	}
	for i := range j {
		if binary.LittleEndian.Uint32(s.region[l.Offset(key, uint8(i)):]) == sum {
			return false
		}
	}
	return true
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
