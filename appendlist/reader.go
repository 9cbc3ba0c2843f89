package appendlist

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"
)

// Store is an Append region in the collector's memory. Apply and Notify
// may be called concurrently for different lists, and each list's Reader
// used by its own goroutine.
type Store struct {
	l    Layout
	logE uint
	mem  []byte
	// notes holds each list's wake-up channel, made by Reader: a list
	// without a reader needs none, as readers read memory before waiting.
	notes []atomic.Pointer[chan struct{}]
	// tails holds the position each list's reader reached (Heads).
	tails []atomic.Uint64
}

// NewStore returns the store of l over mem, which must hold at least
// RegionSize bytes (only those are used) and start zeroed.
func NewStore(l Layout, mem []byte) (*Store, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	l = l.withDefaults()
	n := l.RegionSize()
	if uint64(len(mem)) < n {
		return nil, fmt.Errorf("new region: %w: %d bytes, layout needs %d", ErrRegion, len(mem), n)
	}
	return &Store{l: l, logE: uint(bits.TrailingZeros(uint(l.Entries))), mem: mem[:n],
		notes: make([]atomic.Pointer[chan struct{}], l.Lists), tails: make([]atomic.Uint64, l.Lists)}, nil
}

// Layout returns the store's layout.
func (s *Store) Layout() Layout { return s.l }

// Region returns the region. It aliases the store.
func (s *Store) Region() []byte { return s.mem }

// Apply performs w as the NIC would: w must cover whole entries of a single
// list. A write with an immediate then notifies the list it names. It does
// not allocate.
func (s *Store) Apply(w Write) error {
	ls, ss := s.l.ListSize(), uint64(s.l.SlotSize())
	n := uint64(len(w.Data))
	if n == 0 || n%ss != 0 || w.Offset%ss != 0 || w.Offset >= uint64(len(s.mem)) || n > ls-w.Offset%ls {
		return fmt.Errorf("apply: %w: %d bytes at offset %d, want whole %d-byte entries of one list inside %d bytes", ErrRegion, n, w.Offset, ss, len(s.mem))
	}
	if w.Imm && w.ImmData >= uint32(s.l.Lists) {
		return fmt.Errorf("apply: %w: immediate names list %d of %d", ErrList, w.ImmData, s.l.Lists)
	}
	copy(s.mem[w.Offset:], w.Data)
	if w.Imm {
		s.notify(w.ImmData)
	}
	return nil
}

// Notify records that a WRITE with Immediate naming list arrived, waking
// the list's reader if it waits. Notifications do not queue up: one
// pending wake-up stands for any number.
func (s *Store) Notify(list uint32) error {
	if list >= uint32(s.l.Lists) {
		return fmt.Errorf("notify: %w: list %d of %d", ErrList, list, s.l.Lists)
	}
	s.notify(list)
	return nil
}

func (s *Store) notify(list uint32) {
	if c := s.notes[list].Load(); c != nil {
		select {
		case *c <- struct{}{}:
		default:
		}
	}
}

// Heads appends to dst, for each list, the position after its newest
// entry: after the latest entry in memory (its marker gives its position)
// or where the list's reader got to, whichever is later. A writer that
// starts there adds after everything a reader has had or will find. It
// needs Markers: without them, memory does not say where an entry is.
func (s *Store) Heads(dst []uint64) ([]uint64, error) {
	if !s.l.Markers {
		return dst, fmt.Errorf("heads: %w: a layout without markers does not record positions", ErrLayout)
	}
	ss, e := s.l.SlotSize(), s.l.EntrySize
	for list := range s.l.Lists {
		head := s.tails[list].Load()
		mem := s.mem[s.l.ListOffset(uint32(list)):][:s.l.ListSize()]
		for slot := range s.l.Entries {
			if m := binary.LittleEndian.Uint32(mem[slot*ss+e:]); m != 0 {
				head = max(head, uint64(m-1)<<s.logE+uint64(slot)+1)
			}
		}
		dst = append(dst, head)
	}
	return dst, nil
}

// Reader returns a reader of list starting at position 0. Use one reader
// per list.
func (s *Store) Reader(list uint32) (*Reader, error) {
	if list >= uint32(s.l.Lists) {
		return nil, fmt.Errorf("reader: %w: list %d of %d", ErrList, list, s.l.Lists)
	}
	c := make(chan struct{}, 1)
	s.notes[list].CompareAndSwap(nil, &c)
	off := s.l.ListOffset(list)
	return &Reader{r: s, list: list, mem: s.mem[off : off+s.l.ListSize()], note: *s.notes[list].Load()}, nil
}

// Reader consumes one list in append order. It is not safe for concurrent
// use.
type Reader struct {
	r    *Store
	list uint32
	mem  []byte
	tail uint64 // absolute position of the next entry to read
	note chan struct{}
}

// List returns the list the reader consumes.
func (rd *Reader) List() uint32 { return rd.list }

// Tail returns the absolute position of the next entry the reader returns.
func (rd *Reader) Tail() uint64 { return rd.tail }

// Read copies the next entries, in append order, into dst (EntrySize bytes
// each, without markers), zeroes their slots and returns how many it
// copied. It stops at the first unwritten (all-zero) entry, so 0 with a
// nil error means nothing new. With Markers, when the writer has lapped the
// reader, Read skips to the oldest entry still in memory and returns 0 and
// a *LapError (matching ErrLapped) with the number of entries lost; entries
// read before the loss are returned first, the error by the next call.
// Without Markers lapping cannot be seen. It does not allocate.
func (rd *Reader) Read(dst []byte) (int, error) { return rd.read(dst, true) }

// Peek copies the entries Read would return next into dst, without zeroing
// their slots or moving past them: a Read after it returns them again. A
// writer that lapped the reader is handled as Read does (the reader skips
// to the oldest entry still in memory and Peek returns the *LapError),
// since the entries lost are gone either way. It does not allocate.
func (rd *Reader) Peek(dst []byte) (int, error) { return rd.read(dst, false) }

// read is Read, or Peek when consume is false.
func (rd *Reader) read(dst []byte, consume bool) (int, error) {
	defer func() { rd.r.tails[rd.list].Store(rd.tail) }()
	if rd.r.l.Markers {
		return rd.readMarked(dst, consume)
	}
	e := rd.r.l.EntrySize
	max := len(dst) / e
	ents := uint64(rd.r.l.Entries)
	n := 0
	tail := rd.tail
	for n < max {
		slot := int(tail & (ents - 1))
		run := min(max-n, int(ents)-slot)
		src := rd.mem[slot*e : (slot+run)*e]
		k := written(src, e)
		if k == 0 {
			break
		}
		copy(dst[n*e:], src[:k*e])
		if consume {
			clear(src[:k*e])
		}
		n += k
		tail += uint64(k)
		if k < run {
			break
		}
	}
	if consume {
		rd.tail = tail
	}
	return n, nil
}

// written returns how many entries of size e at the start of b are not all
// zero.
func written(b []byte, e int) int {
	if e == 4 {
		i := 0
		for ; i+8 <= len(b); i += 8 {
			w := binary.LittleEndian.Uint64(b[i:])
			if uint32(w) == 0 {
				return i / 4
			}
			if w>>32 == 0 {
				return i/4 + 1
			}
		}
		if i < len(b) && binary.LittleEndian.Uint32(b[i:]) == 0 {
			return i / 4
		}
		return len(b) / 4
	}
	for i := 0; i < len(b); i += e {
		if allZero(b[i : i+e]) {
			return i / e
		}
	}
	return len(b) / e
}

func (rd *Reader) readMarked(dst []byte, consume bool) (int, error) {
	l := &rd.r.l
	e, ss := l.EntrySize, l.SlotSize()
	ents := uint64(l.Entries)
	logE := rd.r.logE
	max := len(dst) / e
	n := 0
	tail := rd.tail
	for n < max {
		slot := int(tail & (ents - 1))
		want := marker(tail, logE)
		run := min(max-n, int(ents)-slot)
		k := 0
		if e == 4 { // 8-byte slots: data and marker in one load
			src := rd.mem[slot*8 : (slot+run)*8]
			out := dst[n*4 : (n+run)*4]
			for ; k < run; k++ {
				w := binary.LittleEndian.Uint64(src[k*8:])
				if uint32(w>>32) != want {
					break
				}
				binary.LittleEndian.PutUint32(out[k*4:], uint32(w))
			}
		}
		for ; k < run; k++ {
			s := rd.mem[(slot+k)*ss:][:ss]
			m := binary.LittleEndian.Uint32(s[e:])
			if m != want {
				if m != 0 && n == 0 && k == 0 {
					return 0, rd.resync(slot, m, want)
				}
				break
			}
			copy(dst[(n+k)*e:], s[:e])
		}
		if consume {
			clear(rd.mem[slot*ss : (slot+k)*ss])
		}
		n += k
		tail += uint64(k)
		if k < run {
			break
		}
	}
	if consume {
		rd.tail = tail
	}
	return n, nil
}

// resync handles a slot at the reader's tail holding an entry of a later
// lap: the writer lapped the reader. The entries still in memory run back
// from that one, slot by slot, while each holds the position before; the
// reader skips to the oldest of them.
func (rd *Reader) resync(slot int, got, want uint32) error {
	l := &rd.r.l
	ss := l.SlotSize()
	ents := uint64(l.Entries)
	laps := (uint64(got) + 0xFFFFFFFF - uint64(want)) % 0xFFFFFFFF // lap difference
	pos := rd.tail + laps*ents                                     // position held at the tail's slot
	for steps := uint64(1); steps < ents; steps++ {
		prev := (uint64(slot) - steps) & (ents - 1)
		if binary.LittleEndian.Uint32(rd.mem[prev*uint64(ss)+uint64(l.EntrySize):]) != marker(pos-1, rd.r.logE) {
			break
		}
		pos--
	}
	lost := pos - rd.tail
	rd.tail = pos
	return &LapError{List: rd.list, Lost: lost}
}

// ReadWait is Read that blocks, waiting for notifications (see Wait), until
// it returns at least one entry, an error, or ctx is done.
func (rd *Reader) ReadWait(ctx context.Context, dst []byte) (int, error) {
	for {
		n, err := rd.Read(dst)
		if n > 0 || err != nil || len(dst) < rd.r.l.EntrySize {
			return n, err
		}
		if err := rd.Wait(ctx); err != nil {
			return 0, err
		}
	}
}

// Wait blocks until the list is notified (see Store.Notify) or ctx is
// done. A notification that arrived since the last Wait (and after the
// reader was made) returns at once.
func (rd *Reader) Wait(ctx context.Context) error {
	select {
	case <-rd.note:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
