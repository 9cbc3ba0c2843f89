package postcard

import (
	"testing"

	"github.com/dtakit/dtakit/dta"
)

// FuzzQuery decodes arbitrary chunk bytes: a query must never panic, and an
// answer must be a path of 1..B values of the universe.
func FuzzQuery(f *testing.F) {
	f.Add(uint32(1), uint8(0), make([]byte, 64))
	f.Add(uint32(0xdeadbeef), uint8(2), []byte("\x01\x02\x03\x04\x05\x06\x07\x08"))
	layouts := []Layout{
		{Hops: 5, SlotBits: 32, Chunks: 2, Copies: 2},
		{Hops: 3, SlotBits: 8, Chunks: 4, Copies: 3, Addressing: PerCopyAddressing},
		{Hops: 5, SlotBits: 16, Chunks: 2, Copies: 1, Checksums: PrototypeChecksums},
	}
	var codecs []*Codec
	var tables []*Table
	for _, l := range layouts {
		c := mustCodec(f, l)
		tab, err := NewTable(c.Layout(), universe(100))
		if err != nil {
			f.Fatal(err)
		}
		codecs, tables = append(codecs, c), append(tables, tab)
	}
	f.Fuzz(func(t *testing.T, key uint32, which uint8, mem []byte) {
		i := int(which) % len(codecs)
		c, tab := codecs[i], tables[i]
		region := make([]byte, c.l.RegionSize())
		copy(region, mem)
		s, err := NewStore(c.Layout(), region)
		if err != nil {
			t.Fatal(err)
		}
		// Plant key's own valid chunk half the time, from the fuzz bytes.
		if len(mem) > 0 && mem[0]&1 == 1 {
			var ch Chunk
			ch.Key, ch.Len = key, c.csize
			vals := []uint32{1 + uint32(mem[0])%100}
			c.EncodeChunk(ch.Data[:], key, vals)
			for _, w := range c.AppendWrites(nil, &ch)[:1] {
				if err := s.Apply(w); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The fast decoder agrees with the generic one on the raw chunk.
		if c.l.SlotBits == 32 && tab.bitmap != nil {
			var chk [MaxHops]uint32
			for h := range c.l.Hops {
				chk[h] = c.hop[h].eval(key)
			}
			off := uint64(c.ChunkIndex(key, 0)) * uint64(c.csize)
			var p1, p2 Path
			ok1 := decode32Bitmap(tab.bitmap, c.l.Hops, &chk, region[off:off+uint64(c.csize)], &p1)
			ok2 := decodeGeneric(tab, c.l.Hops, 32, &chk, region[off:off+uint64(c.csize)], &p2)
			if ok1 != ok2 || (ok1 && p1 != p2) {
				t.Fatalf("fast decoder %v %v, generic %v %v", ok1, p1.Values(), ok2, p2.Values())
			}
		}
		p, o := s.Query(tab, key)
		if o == Found {
			if p.Len < 1 || p.Len > c.l.Hops {
				t.Fatalf("path length %d", p.Len)
			}
			for _, v := range p.Values() {
				if _, ok := tab.Decode(c.Code(v)); !ok || v == 0 || v > 100 {
					t.Fatalf("value %d outside the universe", v)
				}
			}
		} else if p.Len != 0 {
			t.Fatalf("%v with a path of %d", o, p.Len)
		}
		// Arbitrary writes: accepted ones stay inside the region.
		if len(mem) >= 8 {
			off := uint64(mem[1]) * 8
			_ = s.Apply(Write{Offset: off, Data: mem[8:]})
		}
	})
}

// FuzzCacheInsert feeds arbitrary postcards to a small cache, emitting
// some flows early: no panics, every emitted chunk's writes fit the region.
func FuzzCacheInsert(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 1, 5, 0, 0, 0, 0})
	c := mustCodec(f, Layout{Hops: 4, SlotBits: 16, Chunks: 8, Copies: 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		ca, _ := NewCache(c.Layout(), 4)
		s, _ := NewStore(c.Layout(), make([]byte, c.l.RegionSize()))
		var out []Chunk
		for ; len(b) >= 10; b = b[10:] {
			p := dta.Postcard{
				Key:        uint32(b[0]) | uint32(b[1])<<8,
				Hop:        b[2],
				Value:      uint32(b[3]) | uint32(b[4])<<8 | uint32(b[5])<<16 | uint32(b[6])<<24,
				PathLength: b[7],
			}
			var err error
			out, err = ca.Insert(out[:0], p.Key, Hop(p.Hop), PathLength(p.PathLength), Value(p.Value))
			if err != nil && len(out) != 0 {
				t.Fatal("chunks emitted with an error")
			}
			if b[8]&1 != 0 { // the flow waited too long: written early
				out = ca.Emit(out, ca.Slot(p.Key))
			}
			for i := range out {
				for _, w := range c.AppendWrites(nil, &out[i]) {
					if err := s.Apply(w); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
}
