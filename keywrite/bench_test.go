package keywrite

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/internal/hugemem"
)

// The query benchmarks' store: 2^29 slots of 8 bytes (4 GiB, hugepage
// memory where the system gives it) holding 2^27 keys written with N = 2,
// built once per process. Under -short it is 2^22 slots and 2^20 keys.
var bench struct {
	once    sync.Once
	err     error
	store   *Store // the default layout: addressed with tofino.PerCopy
	keys    uint32 // keys mix(0..keys-1) were written
	memKind hugemem.Kind

	keyTableOnce sync.Once
	keyTable     []uint32 // see benchKeys
}

const benchN = 2

func benchStore(b *testing.B) {
	bench.once.Do(func() {
		slots, keys := uint64(1<<29), uint32(1<<27)
		if testing.Short() {
			slots, keys = 1<<22, 1<<20
		}
		l := Layout{Slots: slots, DataSize: 4}
		err := l.Validate()
		if err != nil {
			bench.err = err
			return
		}
		mem, err := hugemem.Alloc(int(l.RegionSize()))
		if err != nil {
			bench.err = err
			return
		}
		bench.memKind = mem.Kind()
		bench.store, bench.err = NewStore(l, mem.Bytes())
		if bench.err != nil {
			return
		}
		// Fill through the Store's write path.
		var data [4]byte
		for i := range keys {
			key := mix(i)
			binary.LittleEndian.PutUint32(data[:], benchValue(key))
			if err := bench.store.Put(key, data[:], benchN); err != nil {
				bench.err = err
				return
			}
		}
		bench.keys = keys
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
}

func benchValue(key uint32) uint32 { return key ^ 0x5a5a5a5a }

// rng is xorshift32, for random existing keys without a table.
type rng uint32

func (r *rng) next() uint32 {
	x := uint32(*r)
	x ^= x << 13
	x ^= x >> 17
	x ^= x << 5
	*r = rng(x)
	return x
}

func benchStores(b *testing.B, run func(b *testing.B, s *Store)) {
	benchStore(b)
	b.Logf("store: %d slots, %d keys, N=%d, memory %v", bench.store.Layout().Slots, bench.keys, benchN, bench.memKind)
	run(b, bench.store)
}

// benchKeys returns a table of random existing keys, drawn once per
// process, so that the query benchmarks time queries and not the drawing.
func benchKeys() []uint32 {
	bench.keyTableOnce.Do(func() {
		r := rng(12345)
		mask := bench.keys - 1
		bench.keyTable = make([]uint32, 1<<20)
		for i := range bench.keyTable {
			bench.keyTable[i] = mix(r.next() & mask)
		}
	})
	return bench.keyTable
}

// BenchmarkQueryBatch: N=2, plurality, random existing keys, 64 per call,
// one core.
func BenchmarkQueryBatch(b *testing.B) {
	benchStores(b, func(b *testing.B, s *Store) {
		const batch = 64
		table := benchKeys()
		var res [batch]Result
		found := 0
		b.ReportAllocs()
		b.ResetTimer()
		for done := 0; done < b.N; done += batch {
			m := min(batch, b.N-done)
			start := done % len(table) // len(table) is a multiple of batch
			keys := table[start : start+m]
			if err := s.QueryBatch(keys, benchN, Plurality, res[:m]); err != nil {
				b.Fatal(err)
			}
			for i, key := range keys {
				if res[i].Status == Found && binary.LittleEndian.Uint32(res[i].Data) == benchValue(key) {
					found++
				}
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
		b.ReportMetric(float64(found)/float64(b.N), "found")
	})
}

// BenchmarkQuery: the same queries one at a time.
func BenchmarkQuery(b *testing.B) {
	benchStores(b, func(b *testing.B, s *Store) {
		table := benchKeys()
		found := 0
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			key := table[i%len(table)]
			res, err := s.Query(key, benchN, Plurality)
			if err != nil {
				b.Fatal(err)
			}
			if res.Status == Found && binary.LittleEndian.Uint32(res.Data) == benchValue(key) {
				found++
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
		b.ReportMetric(float64(found)/float64(b.N), "found")
	})
}

// BenchmarkTranslate is the translator's per-report cost.
func BenchmarkTranslate(b *testing.B) {
	for _, h := range []struct {
		name string
		h    tofino.Hasher
	}{{"hash=percopy", tofino.PerCopy}, {"hash=reference", tofino.Reference}, {"hash=xxhash", tofino.XXHash}} {
		b.Run(h.name, func(b *testing.B) {
			l := Layout{Slots: 1 << 20, DataSize: 4, Hasher: h.h}
			ops := make([]Write, 0, benchN)
			buf := make([]byte, 0, 8)
			data := []byte{1, 2, 3, 4}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				ops, buf, _ = l.AppendWrites(ops[:0], buf[:0], uint32(i), data, benchN)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
		})
	}
}
