package postcard

import (
	"math/rand/v2"
	"testing"

	"github.com/dtakit/dtakit/dta"
)

// benchStore fills a store of chunks chunks at load 0.1 with random 5-hop
// paths and returns it with the written keys.
func benchStore(tb testing.TB, chunks uint32) (*Store, *Table, []uint32) {
	tb.Helper()
	l := Layout{Hops: 5, SlotBits: 32, Chunks: chunks, Copies: 2, Addressing: PerCopyAddressing}
	c := mustCodec(tb, l)
	s, err := NewStore(c.Layout(), bigRegion(tb, int(l.RegionSize())))
	if err != nil {
		tb.Fatal(err)
	}
	const nV = 1 << 18
	tab, err := NewTable(c.Layout(), universe(nV))
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	keys := make([]uint32, chunks/10)
	var ch Chunk
	var ws []Write
	var vals [5]uint32
	for i := range keys {
		keys[i] = rng.Uint32()
		for h := range vals {
			vals[h] = 1 + rng.Uint32N(nV)
		}
		ch.Key, ch.Len = keys[i], c.csize
		c.EncodeChunk(ch.Data[:], keys[i], vals[:])
		for _, w := range c.AppendWrites(ws[:0], &ch) {
			if err := s.Apply(w); err != nil {
				tb.Fatal(err)
			}
		}
	}
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return s, tab, keys
}

func benchChunks() uint32 {
	if testing.Short() {
		return 1 << 16
	}
	return 1 << 22
}

func BenchmarkQuery(b *testing.B) {
	s, tab, keys := benchStore(b, benchChunks())
	found := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, o := s.Query(tab, keys[i%len(keys)]); o == Found {
			found++
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpaths/s")
	if found == 0 {
		b.Fatal("nothing found")
	}
}

func BenchmarkQueryBatch(b *testing.B) {
	s, tab, keys := benchStore(b, benchChunks())
	const batch = 256
	paths := make([]Path, batch)
	outs := make([]Outcome, batch)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		off := n % (len(keys) - batch)
		k := min(batch, b.N-n)
		s.QueryBatch(tab, keys[off:off+k], paths, outs)
		n += k
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpaths/s")
	if outs[0] != Found && outs[1] != Found {
		b.Fatal("nothing found")
	}
}

func BenchmarkCacheInsert(b *testing.B) {
	c := mustCodec(b, Layout{Hops: 5, Chunks: 1 << 20, Copies: 2})
	ca, err := NewCache(c.Layout(), 1<<16)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 2))
	keys := make([]uint32, 1<<12)
	for i := range keys {
		keys[i] = rng.Uint32()
	}
	out := make([]Chunk, 0, 2)
	ws := make([]Write, 0, 4)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Flows of 5 postcards, 4 interleaved.
		f := i / 5
		p := dta.Postcard{Key: keys[(f&^3|i&3)%len(keys)], Hop: uint8(1 + (i/4)%5), Value: uint32(i) | 1}
		out, _ = ca.Insert(out[:0], p.Key, Hop(p.Hop), PathLength(p.PathLength), Value(p.Value))
		for j := range out {
			ws = c.AppendWrites(ws[:0], &out[j])
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpostcards/s")
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	s, tab, keys := benchStore(t, 1<<12)
	c := s.c
	ca, _ := NewCache(c.Layout(), 64)
	out := make([]Chunk, 0, 2)
	ws := make([]Write, 0, 2)
	paths := make([]Path, 8)
	outs := make([]Outcome, 8)
	d := make([]byte, 32)
	one := []Chunk{{Len: 32}}
	i := 0
	for name, f := range map[string]func(){
		"Query":      func() { s.Query(tab, keys[i%len(keys)]); i++ },
		"QueryBatch": func() { s.QueryBatch(tab, keys[:8], paths, outs) },
		"Insert": func() {
			out, _ = ca.Insert(out[:0], uint32(i/5), Hop(1+i%5), 0, 7)
			i++
		},
		"Writes": func() { ws = c.AppendWrites(ws[:0], &one[0]) },
		"Apply":  func() { _ = s.Apply(Write{Offset: 64, Data: d}) },
	} {
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s: %.1f allocs per run, want 0", name, a)
		}
	}
	// QueryBatch agrees with Query.
	s.QueryBatch(tab, keys[:8], paths, outs)
	for j, k := range keys[:8] {
		p, o := s.Query(tab, k)
		if p != paths[j] || o != outs[j] {
			t.Errorf("QueryBatch[%d] = %v, Query = %v", j, outs[j], o)
		}
	}
}
