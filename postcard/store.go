package postcard

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
)

// Path is a decoded path: Hops[:Len] are the values of hops 1..Len.
type Path struct {
	Len  int
	Hops [MaxHops]uint32
}

// Values returns the path's values. They alias p.
func (p *Path) Values() []uint32 { return p.Hops[:p.Len] }

// Outcome says how a query ended.
type Outcome uint8

const (
	// NotFound: no copy of the flow's chunk is valid for its key.
	NotFound Outcome = iota
	// Found: at least one copy is valid and all valid copies agree.
	Found
	// Conflict: valid copies decode to different paths; no answer.
	Conflict
)

func (o Outcome) String() string {
	switch o {
	case NotFound:
		return "not found"
	case Found:
		return "found"
	case Conflict:
		return "conflict"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Store is a Postcarding region in the collector's memory: the bytes the
// translator's writes land in. Writes through Apply and queries may not run
// concurrently; queries may run concurrently with each other.
type Store struct {
	c   *Codec
	mem []byte
}

// NewStore returns the store of layout l over mem, which must hold at least
// RegionSize bytes (only those are used).
func NewStore(l Layout, mem []byte) (*Store, error) {
	c, err := NewCodec(l)
	if err != nil {
		return nil, fmt.Errorf("new store: %w", err)
	}
	n := c.l.RegionSize()
	if uint64(len(mem)) < n {
		return nil, fmt.Errorf("new store: %w: region of %d bytes, layout needs %d", ErrRegion, len(mem), n)
	}
	return &Store{c: c, mem: mem[:n]}, nil
}

// Snapshot copies the region into dst, a store of the same layout, so that
// an epoch can be queried and exported off the hot path while writes go on
// in s. A chunk holds the latest postcards of its flows, so the next epoch
// starts from the current contents, as Key-Write's does. A chunk write
// that lands while the copy runs is in the snapshot or not; a torn chunk
// fails to decode. It does not allocate.
func (s *Store) Snapshot(dst *Store) error {
	if dst.c.Layout() != s.c.Layout() {
		return fmt.Errorf("snapshot: %w: destination layout differs", ErrSnapshot)
	}
	copy(dst.mem, s.mem)
	return nil
}

// Layout returns the store's layout, with its defaults filled in.
func (s *Store) Layout() Layout { return s.c.l }

// Region returns the region. It aliases the store.
func (s *Store) Region() []byte { return s.mem }

// Apply performs w on the region as the NIC would. w must write one whole
// chunk, or whole slots inside one chunk (Chunk.Skip). It does not
// allocate.
func (s *Store) Apply(w Write) error {
	cs, sb := uint64(s.c.csize), uint64(s.c.l.SlotBits/8)
	whole := uint64(len(w.Data)) == cs && w.Offset%cs == 0
	slots := len(w.Data) > 0 && w.Offset%sb == 0 && uint64(len(w.Data))%sb == 0 &&
		w.Offset%cs+uint64(len(w.Data)) <= uint64(s.c.l.Hops)*sb
	if !whole && !slots || w.Offset >= uint64(len(s.mem)) {
		return fmt.Errorf("apply: %w: %d bytes at offset %d, want one %d-byte chunk, or its slots, inside %d bytes", ErrRegion, len(w.Data), w.Offset, cs, len(s.mem))
	}
	copy(s.mem[w.Offset:], w.Data)
	return nil
}

// Query decodes key's path from its N copies: a copy is valid when slots
// 1..l decode to values of t's universe and slots l+1..B to the blank (l ≥
// 1); the answer is given only when the valid copies agree. It does not
// allocate.
func (s *Store) Query(t *Table, key uint32) (Path, Outcome) {
	var offs [MaxCopies]uint64
	cs := uint64(s.c.csize)
	for j := range s.c.l.Copies {
		offs[j] = uint64(s.c.ChunkIndex(key, j)) * cs
	}
	var p Path
	o := s.query(t, key, &offs, &p)
	return p, o
}

// QueryBatch runs Query for every key, writing paths[i] and outcomes[i]. It
// loads the chunks of a group of keys before decoding them, so that their
// memory accesses overlap. It does not allocate.
func (s *Store) QueryBatch(t *Table, keys []uint32, paths []Path, outcomes []Outcome) {
	const group = 32
	paths, outcomes = paths[:len(keys)], outcomes[:len(keys)]
	var offs [2][group][MaxCopies]uint64
	var sink byte
	// touch computes the chunk offsets of keys[base:] (at most a group) and
	// loads one byte of each: independent loads the CPU keeps in flight
	// while the previous group is decoded.
	touch := func(o *[group][MaxCopies]uint64, base int) {
		g := keys[base:min(base+group, len(keys))]
		cs := uint64(s.c.csize)
		copies := s.c.l.Copies
		for i, k := range g {
			for j := range copies {
				o[i][j] = uint64(s.c.ChunkIndex(k, j)) * cs
			}
		}
		// A tight loop of loads, so that many fit in the CPU's window.
		for i := range g {
			for j := range copies {
				sink ^= s.mem[o[i][j]]
			}
		}
	}
	if len(keys) > 0 {
		touch(&offs[0], 0)
	}
	for base, cur := 0, 0; base < len(keys); base, cur = base+group, cur^1 {
		if next := base + group; next < len(keys) {
			touch(&offs[cur^1], next)
		}
		g := keys[base:min(base+group, len(keys))]
		for i, k := range g {
			outcomes[base+i] = s.query(t, k, &offs[cur][i], &paths[base+i])
		}
	}
	runtime.KeepAlive(sink) // keeps the touching loads
}

// query decodes key's path from the chunks at offs.
func (s *Store) query(t *Table, key uint32, offs *[MaxCopies]uint64, out *Path) Outcome {
	c := s.c
	var chk [MaxHops]uint32
	for i := range c.l.Hops {
		chk[i] = c.hop[i].eval(key)
	}
	cs := uint64(c.csize)
	var prev []byte
	found := false
	for j := range c.l.Copies {
		chunk := s.mem[offs[j] : offs[j]+cs]
		if prev != nil && bytes.Equal(chunk, prev) {
			continue // same bytes, same verdict
		}
		var p Path
		valid := decodeChunk(t, c.l.Hops, c.l.SlotBits, &chk, chunk, &p)
		prev = chunk
		if !valid {
			continue
		}
		if !found {
			*out, found = p, true
		} else if p != *out {
			*out = Path{}
			return Conflict
		}
	}
	if !found {
		*out = Path{}
		return NotFound
	}
	return Found
}

// decodeChunk applies the validity rule to one chunk.
func decodeChunk(t *Table, hops, bits int, chk *[MaxHops]uint32, chunk []byte, p *Path) bool {
	if bits == 32 && t.bitmap != nil {
		return decode32Bitmap(t.bitmap, hops, chk, chunk, p)
	}
	return decodeGeneric(t, hops, bits, chk, chunk, p)
}

// decodeGeneric is decodeChunk for any slot width and table.
func decodeGeneric(t *Table, hops, bits int, chk *[MaxHops]uint32, chunk []byte, p *Path) bool {
	blank := false
	for i := range hops {
		code := getSlot(chunk, bits, i) ^ chk[i]
		if code == 0 {
			blank = true
			continue
		}
		if blank {
			return false
		}
		v, ok := t.Decode(code)
		if !ok {
			return false
		}
		p.Hops[i] = v
		p.Len = i + 1
	}
	return p.Len > 0
}

// decode32Bitmap is decodeChunk for the common case: 32-bit slots and a
// universe of small values held in a bitmap.
func decode32Bitmap(bm []uint64, hops int, chk *[MaxHops]uint32, chunk []byte, p *Path) bool {
	chunk = chunk[:hops*4]
	n := 0
	for i := range hops {
		v := binary.BigEndian.Uint32(chunk[i*4:]) ^ chk[i]
		if v == 0 {
			if n == 0 {
				return false
			}
			// The rest must be blank too.
			for j := i + 1; j < hops; j++ {
				if binary.BigEndian.Uint32(chunk[j*4:]) != chk[j] {
					return false
				}
			}
			break
		}
		w := v / 64
		if w >= uint32(len(bm)) || bm[w]&(1<<(v%64)) == 0 {
			return false
		}
		p.Hops[i] = v
		n = i + 1
	}
	p.Len = n
	return true
}
