package postcard

import (
	"fmt"
	"math/bits"
)

// Chunk is one flow's chunk, emitted by a Cache and ready to be written.
type Chunk struct {
	Key  uint32
	Len  int // bytes of Data in use: the layout's chunk size
	Data [MaxChunkSize]byte
	// Skip marks the slots the writes leave as they are in memory (bit i:
	// slot i), those the cache does not know: hops that did not arrive
	// while the flow was cached, which an earlier write of the flow may
	// hold. The zero value writes the whole chunk.
	Skip uint16
}

// Bytes returns the chunk's bytes. They alias c.
func (c *Chunk) Bytes() []byte { return c.Data[:c.Len] }

// Write is one RDMA WRITE into the region: Data at byte Offset.
type Write struct {
	Offset uint64
	Data   []byte
}

// AppendWrites appends to dst the writes of ch to its N copies, at
// ChunkIndex(key, j)·ChunkSize: one per copy, of the whole chunk, or, when
// ch skips slots, one per copy and run of slots not skipped (Writes of
// them). Their Data aliases ch. Copies that land on the same chunk are
// written once per copy all the same, as the switch does. It does not
// allocate when dst has room for Writes(ch).
func (c *Codec) AppendWrites(dst []Write, ch *Chunk) []Write {
	data := ch.Bytes()
	for j := range c.l.Copies {
		off := uint64(c.ChunkIndex(ch.Key, j)) * uint64(c.csize)
		if ch.Skip == 0 {
			dst = append(dst, Write{Offset: off, Data: data})
			continue
		}
		sb := c.l.SlotBits / 8
		for i := 0; i < c.l.Hops; {
			if ch.Skip&(1<<i) != 0 {
				i++
				continue
			}
			end := i + 1
			for end < c.l.Hops && ch.Skip&(1<<end) == 0 {
				end++
			}
			dst = append(dst, Write{Offset: off + uint64(i*sb), Data: data[i*sb : end*sb]})
			i = end
		}
	}
	return dst
}

// Writes returns the number of writes AppendWrites makes of ch.
func (c *Codec) Writes(ch *Chunk) int { return c.writes(ch.Skip) }

// writes is Writes of a chunk that skips skip.
func (c *Codec) writes(skip uint16) int {
	if skip == 0 {
		return c.l.Copies
	}
	known := ^skip & (1<<c.l.Hops - 1)
	return bits.OnesCount16(known&^(known<<1)) * c.l.Copies // a run per first slot
}

// MaxWrites returns the most writes AppendWrites makes of one chunk:
// N·ceil(B/2), when every other slot is skipped.
func (c *Codec) MaxWrites() int { return c.l.Copies * ((c.l.Hops + 1) / 2) }

type entry struct {
	key     uint32
	used    bool
	dirty   bool // hops arrived since the chunk was last written
	pathLen uint8
	have    uint16 // bit i: hop i+1 arrived
	values  [MaxHops]uint32
}

// Cache is the translator's postcard cache, with the switch's constraints: a
// fixed number of entries, each holding one flow, chosen by
// CRC32(le32(key)) & (entries-1). Beyond the switch, Emit writes a flow
// that waited too long for its other hops. It is not safe for concurrent
// use.
type Cache struct {
	c       *Codec
	mask    uint32
	idx     *affine
	entries []entry
}

// NewCache returns a cache of n entries (a power of two) for layout l.
func NewCache(l Layout, n int) (*Cache, error) {
	if n < 1 || n&(n-1) != 0 || n > 1<<30 {
		return nil, fmt.Errorf("new cache: %w: %d entries, want a power of two up to 2^30", ErrLayout, n)
	}
	c, err := NewCodec(l)
	if err != nil {
		return nil, fmt.Errorf("new cache: %w", err)
	}
	return &Cache{c: c, mask: uint32(n - 1), idx: c.cacheIdx, entries: make([]entry, n)}, nil
}

// Codec returns the codec of the cache's layout, which turns the chunks it
// makes ready into writes.
func (ca *Cache) Codec() *Codec { return ca.c }

// Insert adds the postcard of hop (1-based) with value to key's flow entry,
// pathLen being the flow's number of hops (0: unknown), and appends to out
// the chunks it makes ready: the chunk of a different flow the postcard
// evicted from the entry (written with what it has, see below; not again
// if Emit wrote it and no hop came since), and key's own flow once B
// postcards, or pathLen of them, have arrived. Value 0 (the blank) is
// rejected. A hop that arrives twice keeps its last value. It does not
// allocate when out has room for 2 chunks.
//
// A chunk written before its flow completes holds the hops that arrived
// and blanks where the flow's path has ended (after hop pathLen, or after
// the highest hop that arrived when pathLen is unknown); it skips the
// other slots (Chunk.Skip). So the hops of a flow that come after it left
// the cache (evicted, or the translator restarted) join what its earlier
// writes put in memory instead of blanking it (docs/DTA-WIRE.md 8.5).
func (ca *Cache) Insert(out []Chunk, key uint32, hop Hop, pathLen PathLength, value Value) ([]Chunk, error) {
	l := &ca.c.l
	if hop == 0 || int(hop) > l.Hops {
		return out, fmt.Errorf("insert: %w: hop %d, want 1..%d", ErrHop, hop, l.Hops)
	}
	if int(pathLen) > l.Hops || (pathLen != 0 && uint8(pathLen) < uint8(hop)) {
		return out, fmt.Errorf("insert: %w: path length %d with hop %d, %d hops", ErrPathLen, pathLen, hop, l.Hops)
	}
	if value == 0 {
		return out, fmt.Errorf("insert: %w: value 0 is the blank", ErrValue)
	}
	e := &ca.entries[ca.Slot(key)]
	if e.used && e.key != key {
		if e.dirty {
			out = ca.emit(e, out)
		}
		e.used = false
	}
	if !e.used {
		*e = entry{key: key, used: true}
	}
	e.dirty = true
	e.have |= 1 << (hop - 1)
	e.values[hop-1] = uint32(value)
	if uint8(pathLen) > e.pathLen {
		e.pathLen = uint8(pathLen)
	}
	want := l.Hops
	if e.pathLen != 0 {
		want = int(e.pathLen)
	}
	if bits.OnesCount16(e.have) >= want {
		out = ca.emit(e, out)
	}
	return out, nil
}

// Emit appends the chunk of the flow in entry slot (see Slot) if it has
// hops not yet written, the missing hops blank, and keeps the flow: a hop
// that comes later joins the same values, and the chunk is written again
// whole. It does not allocate when out has room for 1 chunk.
func (ca *Cache) Emit(out []Chunk, slot int) []Chunk {
	e := &ca.entries[slot]
	if !e.used || !e.dirty {
		return out
	}
	out = ca.encode(e, out)
	e.dirty = false
	return out
}

// PendingWrites returns the writes (Codec.Writes) that emitting the flow
// in entry slot would make now: 0 when it has no hops not yet written. An
// Insert into the entry makes at most these and N more. It does not
// allocate.
func (ca *Cache) PendingWrites(slot int) int {
	e := &ca.entries[slot]
	if !e.used || !e.dirty {
		return 0
	}
	return ca.c.writes(ca.skip(e))
}

// Slot returns the index of the entry that holds key's flow, in
// [0, entries): a caller's state per entry (the translator's acks) is
// indexed by it.
func (ca *Cache) Slot(key uint32) int { return int(ca.idx.eval(key) & ca.mask) }

// Flush appends the chunks of every flow still cached with hops not yet
// written and empties the cache (for shutdown and tests).
func (ca *Cache) Flush(out []Chunk) []Chunk {
	for i := range ca.entries {
		e := &ca.entries[i]
		if e.used && e.dirty {
			out = ca.emit(e, out)
		}
		e.used = false
	}
	return out
}

// Len returns the number of flows cached.
func (ca *Cache) Len() int {
	n := 0
	for i := range ca.entries {
		if ca.entries[i].used {
			n++
		}
	}
	return n
}

// emit appends e's chunk to out and frees e.
func (ca *Cache) emit(e *entry, out []Chunk) []Chunk {
	out = ca.encode(e, out)
	e.used, e.dirty = false, false
	return out
}

// encode appends e's chunk to out. Hops that did not arrive encode as
// blank (their values are 0, since Insert zeroes an entry it takes over and
// rejects value 0); those before the end of the path are skipped.
func (ca *Cache) encode(e *entry, out []Chunk) []Chunk {
	out = append(out, Chunk{})
	ch := &out[len(out)-1]
	ch.Key = e.key
	ch.Len = ca.c.csize
	ca.c.EncodeChunk(ch.Data[:], e.key, e.values[:ca.c.l.Hops])
	ch.Skip = ca.skip(e)
	return out
}

// skip returns the slots e's chunk skips: those of hops not cached before
// the end of the path (hop pathLen, or the highest cached when pathLen is
// unknown), after which the slots are blank.
func (ca *Cache) skip(e *entry) uint16 {
	end := uint(e.pathLen)
	if end == 0 {
		end = uint(bits.Len16(e.have))
	}
	return ^e.have & (1<<end - 1)
}
