package appendlist

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Batcher is the translator's side: it holds up to B-1 entries per list and
// writes B at a time at the list's head. It is not safe for concurrent use.
type Batcher struct {
	l     Layout
	slot  int
	logE  uint
	heads []uint64 // absolute position of each list's first pending entry
	count []uint32 // pending entries per list
	imm   []bool   // a pending entry asked for an immediate
	buf   []byte   // B slots per list
}

// maxBatcherBytes bounds the memory of a batcher's pending batches.
const maxBatcherBytes = 1 << 30

// NewBatcher returns a batcher for l, every list's head at 0.
func NewBatcher(l Layout) (*Batcher, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	l = l.withDefaults()
	if size := uint64(l.Lists) * uint64(l.Batch) * uint64(l.SlotSize()); size > maxBatcherBytes {
		return nil, fmt.Errorf("%w: batch buffers of %d bytes, more than %d", ErrLayout, size, maxBatcherBytes)
	}
	return &Batcher{
		l:     l,
		slot:  l.SlotSize(),
		logE:  uint(bits.TrailingZeros(uint(l.Entries))),
		heads: make([]uint64, l.Lists),
		count: make([]uint32, l.Lists),
		imm:   make([]bool, l.Lists),
		buf:   make([]byte, l.Lists*l.Batch*l.SlotSize()),
	}, nil
}

// AppendWrites adds data (EntrySize bytes, not all zero) to list. When that
// makes B pending entries it appends their write(s) to out: one write of B
// entries at the list's head, or two when an earlier partial Flush left the
// head unaligned and the batch crosses the ring's end. imm asks for the
// batch to be written with an immediate carrying the list ID; it goes on
// the batch's last write. The writes' Data aliases the batcher and is valid
// until the next AppendWrites or Flush of the same list. It does not
// allocate when out has room for 2 writes.
func (b *Batcher) AppendWrites(out []Write, list uint32, data []byte, imm bool) ([]Write, error) {
	if list >= uint32(b.l.Lists) {
		return out, fmt.Errorf("append: %w: list %d of %d", ErrList, list, b.l.Lists)
	}
	if len(data) != b.l.EntrySize {
		return out, fmt.Errorf("append: %w: %d bytes, entries are %d", ErrData, len(data), b.l.EntrySize)
	}
	if allZero(data) {
		return out, fmt.Errorf("append: %w: all-zero data reads as unwritten", ErrData)
	}
	n := b.count[list]
	s := b.buf[(int(list)*b.l.Batch+int(n))*b.slot:][:b.slot]
	copy(s, data)
	if b.l.Markers {
		binary.LittleEndian.PutUint32(s[b.l.EntrySize:], marker(b.heads[list]+uint64(n), b.logE))
	}
	b.count[list] = n + 1
	b.imm[list] = b.imm[list] || imm
	if int(n+1) == b.l.Batch {
		out = b.emit(list, out)
	}
	return out, nil
}

// Flush appends the writes of list's pending entries (none if there are
// none) and advances its head past them. The head then need not be a
// multiple of B; readers are unaffected, since entries stay contiguous in
// append order. It does not allocate when out has room for 2 writes.
func (b *Batcher) Flush(out []Write, list uint32) ([]Write, error) {
	if list >= uint32(b.l.Lists) {
		return out, fmt.Errorf("flush: %w: list %d of %d", ErrList, list, b.l.Lists)
	}
	return b.emit(list, out), nil
}

// FlushAll flushes every list (for shutdown and tests).
func (b *Batcher) FlushAll(out []Write) []Write {
	for l := range b.count {
		out = b.emit(uint32(l), out)
	}
	return out
}

// Pending returns the entries list holds back.
func (b *Batcher) Pending(list uint32) int {
	if list >= uint32(b.l.Lists) {
		return 0
	}
	return int(b.count[list])
}

// SetHead moves list's head to position pos: its pending entries, and the
// entries after them, are written from pos on (a translator taking over
// the heads a collector advertises).
func (b *Batcher) SetHead(list uint32, pos uint64) error {
	if list >= uint32(b.l.Lists) {
		return fmt.Errorf("set head: %w: list %d of %d", ErrList, list, b.l.Lists)
	}
	b.heads[list] = pos
	if b.l.Markers {
		for n := range b.count[list] {
			s := b.buf[(int(list)*b.l.Batch+int(n))*b.slot:][:b.slot]
			binary.LittleEndian.PutUint32(s[b.l.EntrySize:], marker(pos+uint64(n), b.logE))
		}
	}
	return nil
}

// Head returns list's head: the absolute position (not reduced modulo E)
// its next write starts at.
func (b *Batcher) Head(list uint32) uint64 {
	if list >= uint32(b.l.Lists) {
		return 0
	}
	return b.heads[list]
}

// emit writes list's pending entries at its head.
func (b *Batcher) emit(list uint32, out []Write) []Write {
	n := int(b.count[list])
	if n == 0 {
		return out
	}
	data := b.buf[int(list)*b.l.Batch*b.slot:][:n*b.slot]
	e := uint64(b.l.Entries)
	start := b.heads[list] & (e - 1)
	base := b.l.ListOffset(list)
	first := int(min(uint64(n), e-start))
	out = append(out, Write{Offset: base + start*uint64(b.slot), Data: data[:first*b.slot]})
	if first < n {
		out = append(out, Write{Offset: base, Data: data[first*b.slot:]})
	}
	if b.imm[list] {
		last := &out[len(out)-1]
		last.Imm, last.ImmData = true, list
	}
	b.heads[list] += uint64(n)
	b.count[list] = 0
	b.imm[list] = false
	return out
}

// allZero reports whether b is all zero bytes.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
