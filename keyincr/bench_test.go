package keyincr

import (
	"sync"
	"testing"

	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/internal/hugemem"
)

// The query benchmarks' store: 2^29 counters (4 GiB, hugepage memory where
// the system gives it) holding 2^27 keys added with N = 2, built once per
// process. Under -short it is 2^22 counters and 2^20 keys.
var bench struct {
	once    sync.Once
	err     error
	store   *Store // the default layout: addressed with tofino.PerCopy
	keys    uint32
	memKind hugemem.Kind
}

const benchN = 2

func benchStore(b *testing.B) {
	bench.once.Do(func() {
		slots, keys := uint64(1<<29), uint32(1<<27)
		if testing.Short() {
			slots, keys = 1<<22, 1<<20
		}
		l := Layout{Slots: slots}
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
		if bench.store, bench.err = NewStore(l, mem.Bytes()); bench.err != nil {
			return
		}
		for i := range keys {
			if err := bench.store.Add(mix(i), uint64(i&7)+1, benchN); err != nil {
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
	b.Logf("store: %d counters, %d keys, N=%d, memory %v", bench.store.Layout().Slots, bench.keys, benchN, bench.memKind)
	run(b, bench.store)
}

// BenchmarkQueryBatch: count-min over N=2, random existing keys, one core.
func BenchmarkQueryBatch(b *testing.B) {
	benchStores(b, func(b *testing.B, s *Store) {
		const batch = 64
		var keys [batch]uint32
		var dst [batch]uint64
		r := rng(12345)
		mask := bench.keys - 1
		var sum uint64
		b.ReportAllocs()
		b.ResetTimer()
		for done := 0; done < b.N; done += batch {
			m := min(batch, b.N-done)
			for i := range m {
				keys[i] = mix(r.next() & mask)
			}
			if err := s.QueryBatch(keys[:m], benchN, dst[:m]); err != nil {
				b.Fatal(err)
			}
			for _, v := range dst[:m] {
				sum += v
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
		if sum == 0 {
			b.Fatal("every estimate was 0")
		}
	})
}

// BenchmarkQuery: the same queries one at a time.
func BenchmarkQuery(b *testing.B) {
	benchStores(b, func(b *testing.B, s *Store) {
		r := rng(12345)
		mask := bench.keys - 1
		var sum uint64
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			v, err := s.Query(mix(r.next()&mask), benchN)
			if err != nil {
				b.Fatal(err)
			}
			sum += v
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
		if sum == 0 {
			b.Fatal("every estimate was 0")
		}
	})
}

// BenchmarkTranslate is the translator's per-report cost.
func BenchmarkTranslate(b *testing.B) {
	for _, h := range []struct {
		name string
		h    tofino.Hasher
	}{{"hash=percopy", tofino.PerCopy}, {"hash=reference", tofino.Reference}, {"hash=xxhash", tofino.XXHash}} {
		b.Run(h.name, func(b *testing.B) {
			l := Layout{Slots: 1 << 20, Hasher: h.h}
			ops := make([]Write, 0, benchN)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				ops, _ = l.AppendWrites(ops[:0], uint32(i), 1, benchN)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
		})
	}
}
