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
}

// Bytes returns the chunk's bytes. They alias c.
func (c *Chunk) Bytes() []byte { return c.Data[:c.Len] }

// Write is one RDMA WRITE into the region: Data at byte Offset.
type Write struct {
	Offset uint64
	Data   []byte
}

// AppendWrites appends to dst the N writes of ch, one per copy, at
// ChunkIndex(key, j)·ChunkSize. Their Data aliases ch. Copies that land on
// the same chunk are written once per copy all the same, as the switch does.
// It does not allocate when dst has room for N writes.
func (c *Codec) AppendWrites(dst []Write, ch *Chunk) []Write {
	data := ch.Bytes()
	for j := range c.l.Copies {
		off := uint64(c.ChunkIndex(ch.Key, j)) * uint64(c.csize)
		dst = append(dst, Write{Offset: off, Data: data})
	}
	return dst
}

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
// evicted from the entry (written with what it has, the missing hops blank;
// not again if Emit wrote it and no hop came since), and key's own flow
// once B postcards, or pathLen of them, have arrived. Value 0 (the blank)
// is rejected. A hop that arrives twice keeps its last value. It does not
// allocate when out has room for 2 chunks.
func (ca *Cache) Insert(out []Chunk, key uint32, hop, pathLen uint8, value uint32) ([]Chunk, error) {
	l := &ca.c.l
	if hop == 0 || int(hop) > l.Hops {
		return out, fmt.Errorf("insert: %w: hop %d, want 1..%d", ErrHop, hop, l.Hops)
	}
	if int(pathLen) > l.Hops || (pathLen != 0 && pathLen < hop) {
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
	e.values[hop-1] = value
	if pathLen > e.pathLen {
		e.pathLen = pathLen
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

// encode appends e's chunk to out. Hops that did not arrive are blank:
// their values are 0, since Insert zeroes an entry it takes over and
// rejects value 0.
func (ca *Cache) encode(e *entry, out []Chunk) []Chunk {
	out = append(out, Chunk{})
	ch := &out[len(out)-1]
	ch.Key = e.key
	ch.Len = ca.c.csize
	ca.c.EncodeChunk(ch.Data[:], e.key, e.values[:ca.c.l.Hops])
	return out
}
