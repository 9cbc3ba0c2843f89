package postcard

import (
	"testing"

	"github.com/dtakit/dtakit/dta"
)

// flush applies the writes of every flow f's cache still holds.
func (f *fixture) flush(t *testing.T) {
	t.Helper()
	for _, ch := range f.ca.Flush(nil) {
		for _, w := range f.c.AppendWrites(nil, &ch) {
			if err := f.s.Apply(w); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestLateHopsJoinTheWrittenChunk: the hops of a flow that come after its
// chunk was written without them (evicted from the cache, or a translator
// that restarted with an empty cache) are written beside the hops already
// in memory, never with blanks over them, in either order.
func TestLateHopsJoinTheWrittenChunk(t *testing.T) {
	path := []uint32{1356, 3396, 47, 3615, 728}
	for _, tc := range []struct {
		name        string
		first, late []int // hops (1-based)
		pathLen     uint8
		restart     bool
	}{
		{"evicted, last hops late", []int{1, 2, 3}, []int{4, 5}, 5, false},
		{"evicted, first hops late", []int{4, 5}, []int{1, 2, 3}, 5, false},
		{"evicted, middle hop late", []int{1, 2, 4, 5}, []int{3}, 5, false},
		{"restarted, last hops late", []int{1, 2, 3}, []int{4, 5}, 5, true},
		{"restarted, first hops late", []int{3, 4, 5}, []int{1, 2}, 5, true},
		{"restarted, length unknown, last hops late", []int{1, 2, 3}, []int{4, 5}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Layout{Hops: 5, Chunks: 1 << 12, Copies: 2}, 64, universe(4096))
			x := uint32(0xC0FFEE)
			send := func(hops []int) {
				for _, h := range hops {
					f.insert(t, dta.Postcard{Key: x, Hop: uint8(h), Value: path[h-1], PathLength: tc.pathLen})
				}
			}
			send(tc.first)
			if tc.restart {
				f.flush(t) // written (say, after its linger), then the cache is lost
				var err error
				if f.ca, err = NewCache(f.c.Layout(), 64); err != nil {
					t.Fatal(err)
				}
			} else if n := f.insert(t, dta.Postcard{Key: sameEntry(f.ca, x), Hop: 1, Value: 9, PathLength: 5}); n != 1 {
				t.Fatalf("the evicting postcard wrote %d chunks, want x's", n)
			}
			send(tc.late)
			f.flush(t)
			if p, o := f.s.Query(f.tab, x); o != Found || !equal(p.Values(), path) {
				t.Errorf("x reads %v %v, want found %v", o, p.Values(), path)
			}
		})
	}
}

// TestWritesSkipUnknownSlots: a complete flow is one whole-chunk write per
// copy; an incomplete one writes each run of the slots it knows, and
// Writes and MaxWrites count them.
func TestWritesSkipUnknownSlots(t *testing.T) {
	l := Layout{Hops: 5, Chunks: 1 << 10, Copies: 2}
	c := mustCodec(t, l)
	ca, err := NewCache(c.Layout(), 16)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := ca.Insert(nil, 7, 2, 5, 10)
	out, _ = ca.Insert(out, 7, 4, 5, 11)
	if len(out) != 0 {
		t.Fatalf("an incomplete flow emitted %d chunks", len(out))
	}
	out = ca.Flush(out)
	ch := &out[0]
	if ch.Skip != 0b10101 {
		t.Fatalf("Skip %05b, want slots 0, 2 and 4 (hops 1, 3, 5) skipped: 10101", ch.Skip)
	}
	ws := c.AppendWrites(nil, ch)
	if len(ws) != 4 || c.Writes(ch) != 4 || c.MaxWrites() != 6 {
		t.Fatalf("%d writes, Writes %d, MaxWrites %d; want 4, 4, 6", len(ws), c.Writes(ch), c.MaxWrites())
	}
	for j := range 2 {
		base := uint64(c.ChunkIndex(7, j)) * 32
		if ws[2*j].Offset != base+4 || len(ws[2*j].Data) != 4 || ws[2*j+1].Offset != base+12 || len(ws[2*j+1].Data) != 4 {
			t.Errorf("copy %d: writes at %d (%d bytes) and %d (%d bytes); want hop 2 at %d and hop 4 at %d",
				j, ws[2*j].Offset, len(ws[2*j].Data), ws[2*j+1].Offset, len(ws[2*j+1].Data), base+4, base+12)
		}
	}
	for h := Hop(1); h <= 5; h++ {
		out, _ = ca.Insert(out[:0], 8, h, 0, Value(h))
	}
	if len(out) != 1 || out[0].Skip != 0 || len(c.AppendWrites(nil, &out[0])) != 2 {
		t.Errorf("a complete flow: %d chunks, Skip %05b; want one, whole (2 writes)", len(out), out[0].Skip)
	}
}

// TestWritesCountsAppendWrites: Writes agrees with AppendWrites for every
// set of skipped slots, and every write is whole slots of one chunk that
// Store.Apply takes.
func TestWritesCountsAppendWrites(t *testing.T) {
	for _, l := range []Layout{{Hops: 5, Chunks: 64, Copies: 2}, {Hops: 16, SlotBits: 8, Chunks: 64, Copies: 3}} {
		c := mustCodec(t, l)
		s, err := NewStore(c.Layout(), make([]byte, c.Layout().RegionSize()))
		if err != nil {
			t.Fatal(err)
		}
		for skip := 0; skip < 1<<c.Layout().Hops-1; skip += 1 + skip/64 {
			ch := Chunk{Key: uint32(skip), Len: c.Layout().ChunkSize(), Skip: uint16(skip)}
			ws := c.AppendWrites(nil, &ch)
			if len(ws) != c.Writes(&ch) || len(ws) > c.MaxWrites() && skip != 0 {
				t.Fatalf("%d hops, skip %b: %d writes, Writes %d, MaxWrites %d", c.Layout().Hops, skip, len(ws), c.Writes(&ch), c.MaxWrites())
			}
			for _, w := range ws {
				if err := s.Apply(w); err != nil {
					t.Fatalf("skip %b: %v", skip, err)
				}
			}
		}
	}
}
