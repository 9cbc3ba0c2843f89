package keyincr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/bits"
	"sync"
	"testing"
	"unsafe"

	"github.com/dtakit/dtakit/dta/tofino"
)

func mix(i uint32) uint32 {
	i ^= i >> 15
	i *= 0x2c1b3c6d
	i ^= i >> 12
	i *= 0x297a2d39
	i ^= i >> 15
	return i
}

func mustStore(t testing.TB, l Layout) *Store {
	t.Helper()
	s, err := NewStore(l, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReferenceMatchesCRC32(t *testing.T) {
	for i := range uint32(100) {
		b := binary.LittleEndian.AppendUint32(nil, mix(i))
		for n := range uint8(3) {
			if tofino.Reference.Slot(mix(i), n) != crc32.ChecksumIEEE(append(b[:4:4], n)) {
				t.Fatalf("key %#x copy %d: tofino.Reference is not CRC-32 over le32(key) ‖ n", mix(i), n)
			}
		}
	}
}

func TestLayout(t *testing.T) {
	l := Layout{Slots: 1 << 10}
	if err := l.Validate(); err != nil || l.RegionSize() != 8<<10 {
		t.Fatalf("Layout{Slots: 1024}: region %d, %v", l.RegionSize(), err)
	}
	if s := mustStore(t, l); s.Layout().Hasher != tofino.PerCopy {
		t.Errorf("a nil hasher is %T in the store, want tofino.PerCopy", s.Layout().Hasher)
	}
	for _, bad := range []uint64{0, 3, 1000, 1 << 33} {
		if err := (Layout{Slots: bad}).Validate(); !errors.Is(err, ErrLayout) {
			t.Errorf("Layout{Slots: %d} error = %v, want ErrLayout", bad, err)
		}
	}
	if _, err := NewStore(Layout{}, nil); !errors.Is(err, ErrLayout) {
		t.Errorf("zero layout: error = %v, want ErrLayout", err)
	}
}

// TestAppendWritesGolden recomputes the offsets with hash/crc32: CRC-32/IEEE
// for reference addressing, the same CRC with tofino.CopyPolynomial(n)
// (reflected for hash/crc32) for the default, per-copy addressing.
func TestAppendWritesGolden(t *testing.T) {
	key := uint32(0x01020304)
	for _, perCopy := range []bool{true, false} {
		l := Layout{Slots: 1 << 12}
		if !perCopy {
			l = Layout{Slots: 1 << 12, Hasher: tofino.Reference}
		}
		ops, err := l.AppendWrites(nil, key, 77, 3)
		if err != nil || len(ops) != 3 {
			t.Fatalf("AppendWrites = %v, %v", ops, err)
		}
		for n, op := range ops {
			in := []byte{4, 3, 2, 1, byte(n)}
			h := crc32.ChecksumIEEE(in)
			if perCopy {
				h = crc32.Checksum(in, crc32.MakeTable(bits.Reverse32(tofino.CopyPolynomial(uint8(n)))))
			}
			want := uint64(h&(1<<12-1)) * 8
			if op.Offset != want || op.Add != 77 || l.Offset(key, uint8(n)) != want || l.Slot(key, uint8(n))*8 != want {
				t.Errorf("per-copy %v: copy %d: %+v, want offset %d add 77", perCopy, n, op, want)
			}
		}
	}
	l := Layout{Slots: 1 << 12}
	for _, n := range []int{0, -1, 256} {
		dst := make([]Write, 1)
		if got, err := l.AppendWrites(dst, key, 1, n); !errors.Is(err, ErrRedundancy) || len(got) != 1 {
			t.Errorf("AppendWrites(n=%d) = %d ops, %v; want ErrRedundancy, unchanged", n, len(got), err)
		}
	}
}

func TestStoreRegion(t *testing.T) {
	l := Layout{Slots: 16}
	if _, err := NewStore(l, make([]byte, 127)); !errors.Is(err, ErrRegion) {
		t.Errorf("short region: error = %v, want ErrRegion", err)
	}
	backing := make([]uint64, 20)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&backing[0])), 160)
	if _, err := NewStore(l, b[1:]); !errors.Is(err, ErrRegion) {
		t.Errorf("misaligned region: error = %v, want ErrRegion", err)
	}
	s, err := NewStore(l, b)
	if err != nil {
		t.Fatal(err)
	}
	// Host byte order: the counter is a native uint64 in the caller's memory.
	if _, err := s.Apply(Write{Offset: 8, Add: 0x0102030405060708}); err != nil {
		t.Fatal(err)
	}
	if backing[1] != 0x0102030405060708 {
		t.Errorf("counter 1 = %#x in the caller's memory", backing[1])
	}
	for _, op := range []Write{{Offset: 128}, {Offset: 4}, {Offset: 129}, {Offset: math.MaxUint64}, {Offset: math.MaxUint64 - 7}} {
		if _, err := s.Apply(op); !errors.Is(err, ErrOutOfRegion) {
			t.Errorf("Apply(offset %d) error = %v, want ErrOutOfRegion", op.Offset, err)
		}
	}
	if err := s.ApplyWrites([]Write{{Offset: 0, Add: 1}, {Offset: 128, Add: 1}}); !errors.Is(err, ErrOutOfRegion) || backing[0] != 0 {
		t.Errorf("ApplyWrites with a bad op: %v, counter 0 = %d; want ErrOutOfRegion, nothing applied", err, backing[0])
	}
	if backing[16] != 0 || backing[17] != 0 {
		t.Error("memory past the layout changed")
	}
	old, err := s.Apply(Write{Offset: 8, Add: 2})
	if err != nil || old != 0x0102030405060708 {
		t.Errorf("Apply returned old value %#x, %v", old, err)
	}
}

func TestAddMatchesApplyWrites(t *testing.T) {
	a, b := mustStore(t, Layout{Slots: 1 << 8}), mustStore(t, Layout{Slots: 1 << 8})
	var ops []Write
	for i := range uint32(2000) {
		key, n := mix(i%300), int(i%4)+1
		if err := a.Add(key, uint64(i), n); err != nil {
			t.Fatal(err)
		}
		ops, _ = b.Layout().AppendWrites(ops[:0], key, uint64(i), n)
		if err := b.ApplyWrites(ops); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(a.Region(), b.Region()) {
		t.Error("Add and ApplyWrites(AppendWrites) left different counters")
	}
}

// TestConcurrentAdds hammers shared counters from several goroutines; run
// with -race. Totals must be exact and queries never underestimate.
func TestConcurrentAdds(t *testing.T) {
	s := mustStore(t, Layout{Slots: 1 << 6, Hasher: tofino.Reference})
	const workers, keys, n = 4, 50, 3
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ops []Write
			for r := range rounds {
				key := mix(uint32(r % keys))
				if w%2 == 0 {
					_ = s.Add(key, 1, n)
				} else {
					ops, _ = s.Layout().AppendWrites(ops[:0], key, 1, n)
					for _, op := range ops {
						if _, err := s.Apply(op); err != nil {
							t.Error(err)
						}
					}
				}
				if _, err := s.Query(key, n); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	var sum uint64
	for i := uint64(0); i < s.Layout().RegionSize(); i += 8 {
		sum += binary.NativeEndian.Uint64(s.Region()[i:])
	}
	if want := uint64(workers * rounds * n); sum != want {
		t.Errorf("counters sum to %d, want %d", sum, want)
	}
	per := uint64(workers * rounds / keys)
	for k := range uint32(keys) {
		if est, _ := s.Query(mix(k), n); est < per {
			t.Errorf("key %d: estimate %d below its total %d", k, est, per)
		}
	}
}

func TestQueryAndBatch(t *testing.T) {
	// PerCopy is the default and takes QueryBatch's direct-call path at
	// N = 2; Reference goes through the Hasher interface.
	for _, h := range []tofino.Hasher{tofino.Reference, tofino.PerCopy} {
		s := mustStore(t, Layout{Slots: 1 << 10, Hasher: h})
		truth := map[uint32]uint64{}
		for i := range uint32(3000) {
			key := mix(i % 500)
			_ = s.Add(key, uint64(i%17), 2)
			truth[key] += uint64(i % 17)
		}
		keys := make([]uint32, 700)
		for i := range keys {
			keys[i] = mix(uint32(i))
		}
		dst := make([]uint64, len(keys))
		for _, n := range []int{1, 2, 3, 100, 255} {
			if err := s.QueryBatch(keys, n, dst); err != nil {
				t.Fatal(err)
			}
			for i, key := range keys {
				est, err := s.Query(key, n)
				if err != nil || est != dst[i] {
					t.Fatalf("%T n=%d key %#x: Query %d (%v), batch %d", h, n, key, est, err, dst[i])
				}
				if n <= 2 && est < truth[key] {
					t.Fatalf("%T key %#x: estimate %d below truth %d", h, key, est, truth[key])
				}
			}
		}
		s.Reset()
		if !bytes.Equal(s.Region(), make([]byte, len(s.Region()))) {
			t.Errorf("%T: Reset left non-zero counters", h)
		}
	}
	s := mustStore(t, Layout{Slots: 1 << 10})
	keys := []uint32{1, 2, 3, 4}
	dst := make([]uint64, len(keys))
	for _, n := range []int{0, 256} {
		if _, err := s.Query(1, n); !errors.Is(err, ErrRedundancy) {
			t.Errorf("Query(n=%d) error = %v", n, err)
		}
		if err := s.QueryBatch(keys, n, dst); !errors.Is(err, ErrRedundancy) {
			t.Errorf("QueryBatch(n=%d) error = %v", n, err)
		}
		if err := s.Add(1, 1, n); !errors.Is(err, ErrRedundancy) {
			t.Errorf("Add(n=%d) error = %v", n, err)
		}
	}
	if err := s.QueryBatch(keys, 2, dst[:3]); !errors.Is(err, ErrResults) {
		t.Errorf("short dst: error = %v, want ErrResults", err)
	}
}

func TestAllocs(t *testing.T) {
	s := mustStore(t, Layout{Slots: 1 << 10})
	ops := make([]Write, 0, 4)
	keys := []uint32{1, 2, 3, 4, 5}
	dst := make([]uint64, len(keys))
	for name, f := range map[string]func(){
		"AppendWrites": func() { ops, _ = s.Layout().AppendWrites(ops[:0], 9, 1, 4) },
		"Apply":        func() { _, _ = s.Apply(Write{Offset: 16, Add: 1}) },
		"ApplyWrites":  func() { _ = s.ApplyWrites(ops) },
		"Add":          func() { _ = s.Add(9, 1, 2) },
		"Query":        func() { _, _ = s.Query(9, 2) },
		"QueryBatch":   func() { _ = s.QueryBatch(keys, 2, dst) },
		"Bad":          func() { _, _ = s.Apply(Write{Offset: 3}) },
	} {
		if a := testing.AllocsPerRun(50, f); a != 0 {
			t.Errorf("%s: %v allocs, want 0", name, a)
		}
	}
}

func TestBoundForms(t *testing.T) {
	// Count-min's classic point: N = ln(1/δ), N/(εS) = 1/e.
	S := uint64(1 << 20)
	n := 5
	eps := math.E * float64(n) / float64(S)
	if got := FailureProb(S, n, eps); math.Abs(got-math.Exp(-5)) > 1e-12 {
		t.Errorf("FailureProb at ε = eN/S = %v, want e^-5", got)
	}
	if got := Epsilon(S, n, math.Exp(-5)); math.Abs(got-eps)/eps > 1e-12 {
		t.Errorf("Epsilon = %v, want %v", got, eps)
	}
	if FailureProbAny(S, n, eps) != 1/math.E || FailureProb(S, 1, 1e-9) != 1 {
		t.Error("single-counter form or clamping wrong")
	}
}

// countMin fills a store with a skewed stream and returns the fraction of
// keys whose estimate exceeds the truth by at least eps·total. A nil h
// means the default layout.
func countMin(t *testing.T, h tofino.Hasher, slots uint64, n, keys int, eps float64) (frac float64, equalCounters bool) {
	s := mustStore(t, Layout{Slots: slots, Hasher: h})
	truth := make([]uint64, keys)
	var total uint64
	for k := range keys {
		truth[k] = uint64(1 + 1000/(k%97+1)) // heavy and light keys
		total += truth[k]
		_ = s.Add(mix(uint32(k)), truth[k], n)
	}
	bad := 0
	equalCounters = true
	for k := range keys {
		est, _ := s.Query(mix(uint32(k)), n)
		if est < truth[k] {
			t.Fatalf("key %d underestimated: %d < %d", k, est, truth[k])
		}
		if float64(est-truth[k]) >= eps*float64(total) {
			bad++
		}
		first, _ := s.Query(mix(uint32(k)), 1)
		equalCounters = equalCounters && first == est
	}
	return float64(bad) / float64(keys), equalCounters
}

func TestCountMinMonteCarlo(t *testing.T) {
	slots, keys := uint64(1<<14), 40000
	if testing.Short() {
		slots, keys = 1<<12, 10000
	}
	const n = 2
	eps := Epsilon(slots, n, 0.05)
	for _, h := range []struct {
		name string
		h    tofino.Hasher
	}{{"default", nil}, {"xxhash", tofino.XXHash}} {
		frac, equal := countMin(t, h.h, slots, n, keys, eps)
		if sd := math.Sqrt(0.05 * 0.95 / float64(keys)); frac > 0.05+5*sd || equal {
			t.Errorf("%s: %.4f of keys overestimated by ≥ ε·T, bound δ = 0.05 (counters all equal: %v)", h.name, frac, equal)
		}
		t.Logf("%s, N=2, δ=0.05: measured %.4f", h.name, frac)
	}

	// Reference addressing: the two counters of every key are equal, and
	// only the single-counter bound holds; at the same ε the default
	// (per-copy) addressing does clearly better.
	eps = float64(n) / (0.3 * float64(slots)) // FailureProbAny = 0.3
	frac, equal := countMin(t, tofino.Reference, slots, n, keys, eps)
	indep, _ := countMin(t, nil, slots, n, keys, eps)
	if !equal {
		t.Error("reference addressing, N=2: a key's counters differ; the XOR-coset structure should make them equal")
	}
	sd := math.Sqrt(0.3 * 0.7 / float64(keys))
	if frac > 0.3+5*sd {
		t.Errorf("reference addressing: %.4f overestimated, single-counter bound 0.3", frac)
	}
	if indep > FailureProb(slots, n, eps)+5*sd || frac < 2*indep+5*math.Sqrt(frac*(1-frac)/float64(keys)) {
		t.Errorf("same ε: reference %.4f, default %.4f (bound %.4f); want the default within its bound and well below the reference's",
			frac, indep, FailureProb(slots, n, eps))
	}
	t.Logf("N=2 at ε with single-counter bound 0.3: reference %.4f, default %.4f (bound %.4f)", frac, indep, FailureProb(slots, n, eps))
}

// FuzzApply feeds arbitrary operations: never a panic, never a change
// outside the addressed counter.
func FuzzApply(f *testing.F) {
	f.Add(uint64(0), uint64(1))
	f.Add(uint64(120), uint64(7))
	f.Add(uint64(128), uint64(7))
	f.Add(uint64(math.MaxUint64), uint64(7))
	f.Fuzz(func(t *testing.T, off, add uint64) {
		backing := make([]uint64, 20)
		region := unsafe.Slice((*byte)(unsafe.Pointer(&backing[0])), 160)
		l := Layout{Slots: 16}
		s, err := NewStore(l, region)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Apply(Write{Offset: off, Add: add})
		ok := off%8 == 0 && off < 128
		if (err == nil) != ok {
			t.Fatalf("offset %d: error %v", off, err)
		}
		for i, c := range backing {
			if want := uint64(0); ok && uint64(i) == off/8 {
				want = add
				if c != want {
					t.Fatalf("counter %d = %d, want %d", i, c, want)
				}
			} else if c != 0 {
				t.Fatalf("counter %d changed by an op at offset %d", i, off)
			}
		}
	})
}
