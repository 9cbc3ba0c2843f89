package postcard

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/dta/tofino"
)

func mustCodec(t testing.TB, l Layout) *Codec {
	t.Helper()
	c, err := NewCodec(l)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func universe(n int) []uint32 {
	v := make([]uint32, n)
	for i := range v {
		v[i] = uint32(i + 1)
	}
	return v
}

// fixture is a codec, cache, store and table wired together.
type fixture struct {
	c   *Codec
	ca  *Cache
	s   *Store
	tab *Table
	ch  []Chunk
	ws  []Write
}

func newFixture(t testing.TB, l Layout, cacheSize int, v []uint32) *fixture {
	t.Helper()
	f := &fixture{c: mustCodec(t, l)}
	var err error
	if f.ca, err = NewCache(f.c.Layout(), cacheSize); err != nil {
		t.Fatal(err)
	}
	if f.s, err = NewStore(f.c.Layout(), make([]byte, f.c.l.RegionSize())); err != nil {
		t.Fatal(err)
	}
	if f.tab, err = NewTable(f.c.Layout(), v); err != nil {
		t.Fatal(err)
	}
	return f
}

// insert feeds p to the cache and applies the writes it makes.
func (f *fixture) insert(t testing.TB, p dta.Postcard) int {
	t.Helper()
	var err error
	f.ch, err = f.ca.Insert(f.ch[:0], p.Key, Hop(p.Hop), PathLength(p.PathLength), Value(p.Value))
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.ch {
		f.ws = f.c.AppendWrites(f.ws[:0], &f.ch[i])
		for _, w := range f.ws {
			if err := f.s.Apply(w); err != nil {
				t.Fatal(err)
			}
		}
	}
	return len(f.ch)
}

func (f *fixture) path(t testing.TB, key uint32, values []uint32, pathLen uint8) {
	t.Helper()
	for i, v := range values {
		f.insert(t, dta.Postcard{Key: key, Hop: uint8(i + 1), Value: v, PathLength: pathLen})
	}
}

// randomFlows writes n flows of 5 hops, each a random key with values
// drawn from 1..nV, one flow after the other, and returns their keys and
// paths.
func (f *fixture) randomFlows(t testing.TB, rng *rand.Rand, n int, nV uint32) (keys []uint32, paths [][]uint32) {
	t.Helper()
	keys = make([]uint32, n)
	paths = make([][]uint32, n)
	for i := range keys {
		keys[i] = rng.Uint32()
		paths[i] = make([]uint32, 5)
		for h := range paths[i] {
			paths[i][h] = 1 + rng.Uint32N(nV)
		}
		f.path(t, keys[i], paths[i], 0)
	}
	return keys, paths
}

func TestRoundTrip(t *testing.T) {
	for _, l := range []Layout{
		{Hops: 5, SlotBits: 32, Chunks: 1 << 12, Copies: 2},
		{Hops: 1, SlotBits: 32, Chunks: 1 << 12, Copies: 1},
		{Hops: 16, SlotBits: 32, Chunks: 1 << 12, Copies: 4},
		{Hops: 5, SlotBits: 16, Chunks: 1 << 12, Copies: 2},
		{Hops: 9, SlotBits: 8, Chunks: 1 << 12, Copies: 3},
		{Hops: 5, SlotBits: 32, Chunks: 1 << 12, Copies: 2, Checksums: PrototypeChecksums},
	} {
		vmax := 200
		f := newFixture(t, l, 256, universe(vmax))
		rng := rand.New(rand.NewPCG(5, 6))
		hops := f.c.l.Hops
		for range 50 {
			key := rng.Uint32()
			n := 1 + rng.IntN(hops)
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = 1 + rng.Uint32N(uint32(vmax))
			}
			var pl uint8
			if n < hops {
				pl = uint8(n) // a short path needs its length to complete
			}
			f.path(t, key, vals, pl)
			if f.ca.Len() != 0 {
				t.Fatalf("%+v: flow still cached after its last hop", l)
			}
			p, o := f.s.Query(f.tab, key)
			if o != Found || p.Len != n || !equal(p.Values(), vals) {
				t.Fatalf("%+v: Query(%#x) = %v %v, want %v", l, key, o, p.Values(), vals)
			}
		}
	}
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sameEntry finds a key other than key sharing key's cache entry.
func sameEntry(ca *Cache, key uint32) uint32 {
	want := ca.idx.eval(key) & ca.mask
	for k := key + 1; ; k++ {
		if ca.idx.eval(k)&ca.mask == want {
			return k
		}
	}
}

func TestEvictionWritesEvictedFlowToItsOwnChunks(t *testing.T) {
	f := newFixture(t, Layout{Hops: 5, Chunks: 1 << 16, Copies: 2}, 64, universe(100))
	x := uint32(0xC0FFEE)
	y := sameEntry(f.ca, x)
	f.path(t, x, []uint32{7, 8, 9}, 0) // 3 of 5 hops, length unknown: cached
	if f.ca.Len() != 1 {
		t.Fatalf("cache holds %d flows, want 1", f.ca.Len())
	}
	if _, o := f.s.Query(f.tab, x); o != NotFound {
		t.Fatalf("x answered before it was written: %v", o)
	}
	var err error
	f.ch, err = f.ca.Insert(f.ch[:0], y, 1, 0, 42)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.ch) != 1 || f.ch[0].Key != x {
		t.Fatalf("eviction emitted %d chunks (first key %#x), want x's chunk", len(f.ch), f.ch[0].Key)
	}
	f.ws = f.c.AppendWrites(f.ws[:0], &f.ch[0])
	for j, w := range f.ws {
		if want := uint64(f.c.ChunkIndex(x, j)) * 32; w.Offset != want {
			t.Errorf("copy %d written at %d, want x's chunk at %d", j, w.Offset, want)
		}
		if err := f.s.Apply(w); err != nil {
			t.Fatal(err)
		}
	}
	p, o := f.s.Query(f.tab, x)
	if o != Found || !equal(p.Values(), []uint32{7, 8, 9}) {
		t.Errorf("evicted x reads %v %v, want found [7 8 9]", o, p.Values())
	}
	if _, o := f.s.Query(f.tab, y); o != NotFound {
		t.Errorf("y answered while still cached: %v", o)
	}
	out := f.ca.Flush(nil)
	if len(out) != 1 || out[0].Key != y || f.ca.Len() != 0 {
		t.Errorf("Flush emitted %d chunks, cache holds %d, want y's chunk and empty", len(out), f.ca.Len())
	}
}

func TestPathLengthCompletesFlow(t *testing.T) {
	f := newFixture(t, Layout{Hops: 5, Chunks: 1 << 10, Copies: 1}, 16, universe(10))
	if n := f.insert(t, dta.Postcard{Key: 1, Hop: 2, Value: 3, PathLength: 2}); n != 0 {
		t.Fatalf("emitted after 1 of 2 postcards")
	}
	if n := f.insert(t, dta.Postcard{Key: 1, Hop: 1, Value: 4}); n != 1 {
		t.Fatalf("emitted %d chunks after 2 of 2 postcards (length from the first), want 1", n)
	}
	if p, o := f.s.Query(f.tab, 1); o != Found || !equal(p.Values(), []uint32{4, 3}) {
		t.Errorf("got %v %v, want [4 3]", o, p.Values())
	}
}

func TestCacheRejectsBadPostcards(t *testing.T) {
	f := newFixture(t, Layout{Hops: 5, Chunks: 8}, 8, universe(3))
	for _, tc := range []struct {
		p    dta.Postcard
		want error
	}{
		{dta.Postcard{Key: 1, Hop: 0, Value: 1}, ErrHop},
		{dta.Postcard{Key: 1, Hop: 6, Value: 1}, ErrHop},
		{dta.Postcard{Key: 1, Hop: 1, Value: 1, PathLength: 6}, ErrPathLen},
		{dta.Postcard{Key: 1, Hop: 3, Value: 1, PathLength: 2}, ErrPathLen},
		{dta.Postcard{Key: 1, Hop: 1, Value: 0}, ErrValue},
	} {
		out, err := f.ca.Insert(nil, tc.p.Key, Hop(tc.p.Hop), PathLength(tc.p.PathLength), Value(tc.p.Value))
		if !errors.Is(err, tc.want) || len(out) != 0 {
			t.Errorf("Insert(%+v) = %d chunks, %v; want %v", tc.p, len(out), err, tc.want)
		}
	}
	if f.ca.Len() != 0 {
		t.Error("a rejected postcard was cached")
	}
	if _, err := NewCache(f.c.Layout(), 3); !errors.Is(err, ErrLayout) {
		t.Errorf("NewCache(3) = %v, want ErrLayout", err)
	}
}

func TestQueryValidityRule(t *testing.T) {
	f := newFixture(t, Layout{Hops: 5, Chunks: 1 << 10, Copies: 2}, 16, universe(100))
	key := uint32(99)
	write := func(j int, vals []uint32) {
		var ch Chunk
		ch.Key, ch.Len = key, 32
		f.c.EncodeChunk(ch.Data[:], key, vals)
		off := uint64(f.c.ChunkIndex(key, j)) * 32
		if err := f.s.Apply(Write{Offset: off, Data: ch.Bytes()}); err != nil {
			t.Fatal(err)
		}
	}
	if f.c.ChunkIndex(key, 0) == f.c.ChunkIndex(key, 1) {
		t.Fatal("pick another key: copies share a chunk")
	}
	write(0, []uint32{1, 2, 3})
	if p, o := f.s.Query(f.tab, key); o != Found || !equal(p.Values(), []uint32{1, 2, 3}) {
		t.Fatalf("one valid copy: %v %v", o, p.Values())
	}
	write(1, []uint32{1, 2, 4})
	if _, o := f.s.Query(f.tab, key); o != Conflict {
		t.Errorf("disagreeing copies: %v, want conflict", o)
	}
	write(1, []uint32{1, 0, 4}) // blank in the middle: invalid copy
	if p, o := f.s.Query(f.tab, key); o != Found || !equal(p.Values(), []uint32{1, 2, 3}) {
		t.Errorf("gap copy should be ignored: %v %v", o, p.Values())
	}
	write(0, []uint32{1, 2, 101}) // 101 outside V
	if _, o := f.s.Query(f.tab, key); o != NotFound {
		t.Errorf("value outside V and gap: %v, want not found", o)
	}
	write(0, nil) // all blank: not a path
	if _, o := f.s.Query(f.tab, key); o != NotFound {
		t.Errorf("all-blank chunk: %v, want not found", o)
	}
	if _, o := f.s.Query(f.tab, key+1); o != NotFound {
		t.Errorf("another key read x's chunk")
	}
}

func TestTable(t *testing.T) {
	c8 := mustCodec(t, Layout{SlotBits: 8, Chunks: 1})
	tab, err := NewTable(c8.Layout(), universe(300))
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Collisions()) < 300-255 {
		t.Errorf("300 values in 8 bits: %d collisions recorded", len(tab.Collisions()))
	}
	for _, col := range tab.Collisions() {
		if col.A == 0 || c8.Code(col.A) != col.Code {
			t.Errorf("bad collision record %+v", col)
		}
		if _, ok := tab.Decode(col.Code); ok && col.Code != 0 {
			t.Errorf("ambiguous code %#x decodes", col.Code)
		}
	}
	tab, _ = NewTable(c8.Layout(), universe(255))
	if len(tab.Collisions()) != 0 || tab.Len() != 255 {
		t.Errorf("values 1..255 in 8 bits: %d collisions, %d decodable", len(tab.Collisions()), tab.Len())
	}
	if _, err := NewTable(c8.Layout(), []uint32{1, 0}); !errors.Is(err, ErrValue) {
		t.Errorf("value 0 accepted: %v", err)
	}
	c32 := mustCodec(t, Layout{Chunks: 1})
	rng := rand.New(rand.NewPCG(7, 8))
	for _, spread := range []uint32{1 << 20, math.MaxUint32} { // bitmap, hash set
		vals := make([]uint32, 5000)
		in := map[uint32]bool{}
		for i := range vals {
			vals[i] = 1 + rng.Uint32N(spread-1)
			in[vals[i]] = true
		}
		tab, err := NewTable(c32.Layout(), vals)
		if err != nil {
			t.Fatal(err)
		}
		if tab.Len() != len(in) {
			t.Errorf("spread %d: Len %d, want %d", spread, tab.Len(), len(in))
		}
		for range 20000 {
			v := rng.Uint32N(spread)
			if got, ok := tab.Decode(v); ok != in[v] || (ok && got != v) {
				t.Fatalf("spread %d: Decode(%d) = %d %v, want member=%v", spread, v, got, ok, in[v])
			}
		}
		if _, ok := tab.Decode(math.MaxUint32); ok != in[math.MaxUint32] {
			t.Error("max code")
		}
	}
}

func TestStoreRejectsBadWrites(t *testing.T) {
	c := mustCodec(t, Layout{Chunks: 4})
	if _, err := NewStore(c.Layout(), make([]byte, 127)); !errors.Is(err, ErrRegion) {
		t.Errorf("short region: %v", err)
	}
	mem := make([]byte, 200)
	s, err := NewStore(c.Layout(), mem)
	if err != nil {
		t.Fatal(err)
	}
	d := make([]byte, 32)
	for i := range d {
		d[i] = 0xAA
	}
	for _, w := range []Write{
		{Offset: 128, Data: d}, {Offset: 16, Data: d}, {Offset: 0, Data: d[:31]},
		{Offset: 0, Data: append(d, 1)}, {Offset: 1 << 63, Data: d}, {Offset: ^uint64(31), Data: d},
	} {
		if err := s.Apply(w); !errors.Is(err, ErrRegion) {
			t.Errorf("Apply(%d bytes at %d) = %v, want ErrRegion", len(w.Data), w.Offset, err)
		}
	}
	for _, b := range mem {
		if b != 0 {
			t.Fatal("a rejected write touched memory")
		}
	}
	if err := s.Apply(Write{Offset: 96, Data: d}); err != nil || mem[127] != 0xAA || mem[128] != 0 {
		t.Errorf("last chunk: %v", err)
	}
}

func TestBoundsPaperExample(t *testing.T) {
	l := Layout{Hops: 5, SlotBits: 32, Chunks: 1 << 24, Copies: 2, Addressing: PerCopyAddressing}
	b := l.Bounds(0.1, 1<<18)
	if !(b.NoOutput < 0.033) || b.NoOutput < 0.03 {
		t.Errorf("no-output bound %.4g, paper: < 3.3%%", b.NoOutput)
	}
	if !(b.Wrong < 1e-22) || b.Wrong <= 0 {
		t.Errorf("wrong-output bound %.3g, paper: < 1e-22", b.Wrong)
	}
	// More copies or a lighter load lower both; 8-bit slots make wrong
	// answers likely.
	l.Chunks = 1 << 10 // finite C: (1-1/C)^(NαC) is a little below e^(-Nα)
	if bs := l.Bounds(0.1, 1<<18); bs.NoOutput <= b.NoOutput {
		t.Errorf("finite C: no-output %.5f, want above %.5f", bs.NoOutput, b.NoOutput)
	}
	l.Chunks = 1 << 24
	if b2 := l.Bounds(0.05, 1<<18); b2.NoOutput >= b.NoOutput {
		t.Error("lower load did not lower the bound")
	}
	l.Addressing = ReferenceAddressing // copies overwritten together
	if bs := l.Bounds(0.1, 1<<18); math.Abs(bs.NoOutput-(1-math.Exp(-0.2))) > 1e-6 {
		t.Errorf("reference addressing: no-output %.4f, want 1-e^-0.2", bs.NoOutput)
	}
	l.SlotBits, l.Addressing = 8, PerCopyAddressing
	if b8 := l.Bounds(0.1, 200); b8.Wrong < 1e-6 {
		t.Errorf("8-bit slots, 200 values: wrong bound %.3g, expected large", b8.Wrong)
	}
}

// TestMonteCarloAgreesWithBound writes alpha·C flows through the cache and
// store and queries every one: wrong answers must not appear, and the
// no-output rate of the oldest flows must match the bound's model.
func TestMonteCarloAgreesWithBound(t *testing.T) {
	t.Run("percopy", func(t *testing.T) { monteCarlo(t, PerCopyAddressing) })
	t.Run("reference", func(t *testing.T) { monteCarlo(t, ReferenceAddressing) })
}

func monteCarlo(t *testing.T, a Addressing) {
	chunks, rounds := uint32(1<<16), 3
	if testing.Short() {
		chunks, rounds = 1<<13, 2
	}
	const alpha, nV = 0.1, 1 << 18
	l := Layout{Hops: 5, SlotBits: 32, Chunks: chunks, Copies: 2, Addressing: a}
	flows := int(alpha * float64(chunks))
	oldest := flows / 10 // the first tenth: close to the bound's worst case
	var noOld, noAll, wrong, total, totalOld int
	var expectAll float64
	p := func(later int) float64 { // model: P(one copy overwritten)
		return -math.Expm1(float64(2*later) * math.Log1p(-1/float64(chunks)))
	}
	for i := range flows {
		if a == PerCopyAddressing {
			expectAll += math.Pow(p(flows-1-i), 2)
		} else {
			expectAll += p(flows - 1 - i) // both copies go together
		}
	}
	expectAll /= float64(flows)
	for r := range rounds {
		f := newFixture(t, l, 1024, universe(nV))
		rng := rand.New(rand.NewPCG(uint64(r), 99))
		keys, paths := f.randomFlows(t, rng, flows, nV)
		for i, k := range keys {
			got, o := f.s.Query(f.tab, k)
			switch {
			case o == Found && !equal(got.Values(), paths[i]):
				wrong++
			case o != Found:
				noAll++
				if i < oldest {
					noOld++
				}
			}
		}
		total += flows
		totalOld += oldest
	}
	bound := l.Bounds(alpha, nV)
	rateOld := float64(noOld) / float64(totalOld)
	rateAll := float64(noAll) / float64(total)
	t.Logf("no output: oldest tenth %.4f, all %.4f (model %.4f), bound %.4f; wrong %d of %d", rateOld, rateAll, expectAll, bound.NoOutput, wrong, total)
	if wrong != 0 {
		t.Errorf("%d wrong answers; bound %.3g", wrong, bound.Wrong)
	}
	// Binomial tolerance: 4 standard deviations.
	sd := math.Sqrt(expectAll * (1 - expectAll) / float64(total))
	if math.Abs(rateAll-expectAll) > 4*sd+1e-3 {
		t.Errorf("no-output rate %.4f, model %.4f ± %.4f", rateAll, expectAll, 4*sd)
	}
	sdOld := math.Sqrt(bound.NoOutput / float64(totalOld))
	if rateOld > bound.NoOutput+4*sdOld {
		t.Errorf("oldest flows' no-output rate %.4f above bound %.4f", rateOld, bound.NoOutput)
	}
	if rateOld < bound.NoOutput*0.6 {
		t.Errorf("oldest flows' no-output rate %.4f far below bound %.4f: model broken?", rateOld, bound.NoOutput)
	}
}

// TestReadsPrototypeMemory builds memory the way the reference prototype's
// translator writes it (five bit<32> slots value XOR checksum over
// be32(key), emitted big-endian, 20 bytes at CRC32(be32(key))·32) with the
// tofino model directly, and reads it back.
func TestReadsPrototypeMemory(t *testing.T) {
	l := Layout{Hops: 5, Chunks: 1 << 15, Copies: 1, Checksums: PrototypeChecksums, Addressing: PrototypeAddressing}
	f := newFixture(t, l, 16, universe(1000))
	mem := f.s.Region()
	rng := rand.New(rand.NewPCG(11, 12))
	keys := make([]uint32, 200)
	paths := make([][5]uint32, len(keys))
	for i := range keys {
		keys[i] = rng.Uint32()
		var be [4]byte
		binary.BigEndian.PutUint32(be[:], keys[i])
		slot := tofino.Reference.Checksum(bits.ReverseBytes32(keys[i])) & (l.Chunks - 1)
		for h := range 5 {
			paths[i][h] = 1 + rng.Uint32N(1000)
			hh, err := tofino.NewHash(32, HopCRC(PrototypeChecksums, h+1))
			if err != nil {
				t.Fatal(err)
			}
			binary.BigEndian.PutUint32(mem[int(slot)*32+4*h:], paths[i][h]^uint32(hh.SumBytes(be[:])))
		}
	}
	ok := 0
	for i, k := range keys {
		p, o := f.s.Query(f.tab, k)
		if o == Found {
			if !equal(p.Values(), paths[i][:]) {
				t.Fatalf("key %#x: %v, want %v", k, p.Values(), paths[i])
			}
			ok++
		}
	}
	if ok < len(keys)*9/10 { // a few chunks are shared and overwritten
		t.Errorf("read %d of %d prototype paths", ok, len(keys))
	}
}

func TestConcurrentQueries(t *testing.T) {
	s, tab, keys := benchStore(t, 1<<14)
	want := make([]Outcome, len(keys))
	for i, k := range keys {
		_, want[i] = s.Query(tab, k)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths := make([]Path, 64)
			outs := make([]Outcome, 64)
			for i := g; i+64 <= len(keys); i += 64 {
				s.QueryBatch(tab, keys[i:i+64], paths, outs)
				for j := range outs {
					if outs[j] != want[i+j] {
						t.Errorf("key %d: %v, want %v", i+j, outs[j], want[i+j])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestMonteCarloSmallSlotsWithinBound: with 8-bit slots and 200 values an
// overwritten chunk often passes the validity rule, so wrong answers occur;
// their rate for the oldest flows stays within the bound.
func TestMonteCarloSmallSlotsWithinBound(t *testing.T) {
	chunks := uint32(1 << 15)
	if testing.Short() {
		chunks = 1 << 13
	}
	const alpha, nV = 0.2, 200
	l := Layout{Hops: 5, SlotBits: 8, Chunks: chunks, Copies: 2, Addressing: PerCopyAddressing}
	flows := int(alpha * float64(chunks))
	oldest := flows / 10
	f := newFixture(t, l, 1024, universe(nV))
	rng := rand.New(rand.NewPCG(21, 22))
	keys, paths := f.randomFlows(t, rng, flows, nV)
	var wrong, none int
	for i, k := range keys[:oldest] {
		got, o := f.s.Query(f.tab, k)
		switch {
		case o == Found && !equal(got.Values(), paths[i]):
			wrong++
		case o != Found:
			none++
		}
	}
	b := l.Bounds(alpha, nV)
	rw, rn := float64(wrong)/float64(oldest), float64(none)/float64(oldest)
	t.Logf("oldest %d flows: wrong %.4f (bound %.4f), no output %.4f (bound %.4f)", oldest, rw, b.Wrong, rn, b.NoOutput)
	tol := func(p float64) float64 { return 4 * math.Sqrt(p/float64(oldest)) }
	if rw > b.Wrong+tol(b.Wrong) {
		t.Errorf("wrong-answer rate %.4f above bound %.4f", rw, b.Wrong)
	}
	if rn > b.NoOutput+tol(b.NoOutput) {
		t.Errorf("no-output rate %.4f above bound %.4f", rn, b.NoOutput)
	}
	if wrong == 0 && oldest >= 600 {
		t.Errorf("no wrong answers among %d old flows; 8-bit slots should produce some (bound %.4f)", oldest, b.Wrong)
	}
}
