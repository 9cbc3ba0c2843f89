package keywrite

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/dtakit/dtakit/dta/tofino"
)

func TestPaperNumbers(t *testing.T) {
	// Section A.5 at b = 32, α = 0.1: N=1 9.5 %, N=2 < 3.3 %, N=4 1.2 %.
	for _, tc := range []struct {
		n      int
		lo, hi float64
	}{
		{1, 0.0945, 0.0955}, {2, 0.0320, 0.0330}, {4, 0.0115, 0.0125},
	} {
		lead := EmptyProbLeading(tc.n, 0.1)
		if lead < tc.lo || lead >= tc.hi {
			t.Errorf("EmptyProbLeading(%d, 0.1) = %.5f, want in [%v, %v)", tc.n, lead, tc.lo, tc.hi)
		}
		if full := EmptyProb(tc.n, 32, 0.1); full > lead || lead-full > 1e-9 {
			t.Errorf("EmptyProb(%d, 32, 0.1) = %v, want just below the leading term %v", tc.n, full, lead)
		}
	}
	// Wrong output at most 1.6e-11 for 2 <= N <= 8.
	for n := 2; n <= 8; n++ {
		lo, hi := WrongProbBounds(n, 32, 0.1)
		if hi > 1.6e-11 || lo > hi || lo < hi*(1-1e-6) || lo <= 0 {
			t.Errorf("WrongProbBounds(%d, 32, 0.1) = %v, %v; want 0 < lower <= upper <= 1.6e-11, tight", n, lo, hi)
		}
		if fm := WrongProbFirstMatch(n, 32, 0.1); fm < hi {
			t.Errorf("N=%d: first match wrong %v below plurality's %v", n, fm, hi)
		}
	}
	if lo, _ := WrongProbBounds(1, 32, 0.1); math.Abs(lo-2.2157e-11) > 1e-14 {
		t.Errorf("WrongProbBounds(1, 32, 0.1) lower = %v, want 2.2157e-11", lo)
	}
	// The upper form counts more than one collision: visible at small b.
	if lo, hi := WrongProbBounds(5, 2, 0.3); !(hi > lo*1.01) {
		t.Errorf("WrongProbBounds(5, 2, 0.3) = %v, %v; want upper clearly above lower", lo, hi)
	}
	// Optimum near N = ln 2 / α.
	best, bestN := 1.0, 0
	for n := 1; n <= 30; n++ {
		if p := EmptyProbLeading(n, 0.1); p < best {
			best, bestN = p, n
		}
	}
	if bestN != 7 || math.Abs(best-math.Pow(2, -math.Ln2/0.1))/best > 0.05 {
		t.Errorf("best N at α=0.1: %d (%v), want 7 ≈ ln2/α with 2^(-ln2/α)", bestN, best)
	}
}

func TestOverwriteProbSlots(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		s := uint64(1 << 20)
		got, want := OverwriteProbSlots(n, s/10, s), OverwriteProb(n, float64(s/10)/float64(s))
		if got < want || got-want > 1e-6 {
			t.Errorf("OverwriteProbSlots(%d, S/10, 2^20) = %v, want just above %v", n, got, want)
		}
	}
	if OverwriteProbSlots(2, 0, 8) != 0 || OverwriteProbSlots(2, 5, 1) != 1 {
		t.Error("edge cases: no later keys must give 0, one slot must give 1")
	}
	// Two later single-copy keys in 4 slots: 1 - (3/4)^2.
	if got := OverwriteProbSlots(1, 2, 4); math.Abs(got-7.0/16) > 1e-12 {
		t.Errorf("OverwriteProbSlots(1, 2, 4) = %v, want 7/16", got)
	}
}

// TestReferenceSlotsXOR checks the property EmptyProbReference rests on:
// with reference addressing, slot(x, n) XOR slot(x, 0) does not depend on x;
// with the default, per-copy addressing it does.
func TestReferenceSlotsXOR(t *testing.T) {
	for n := uint8(1); n < 8; n++ {
		want := tofino.Reference.Slot(0, n) ^ tofino.Reference.Slot(0, 0)
		for i := range uint32(50) {
			key := mix(i)
			if got := tofino.Reference.Slot(key, n) ^ tofino.Reference.Slot(key, 0); got != want {
				t.Fatalf("key %#x copy %d: XOR offset %#x, key 0 has %#x", key, n, got, want)
			}
		}
	}
	if got := tofino.Reference.Slot(0, 1) ^ tofino.Reference.Slot(0, 0); got != 0x77073096 {
		t.Errorf("copy 1 offset %#x, want the CRC table's entry 1, 0x77073096", got)
	}
	l := mustLayout(t, 1<<16, 4) // the default
	for n := uint8(1); n < 8; n++ {
		offsets := make(map[uint64]bool)
		for i := range uint32(50) {
			offsets[l.Slot(mix(i), n)^l.Slot(mix(i), 0)] = true
		}
		if len(offsets) < 45 {
			t.Errorf("default layout, copy %d: %d distinct offsets from copy 0 over 50 keys, want about 50", n, len(offsets))
		}
	}
}

func TestEmptyProbReference(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8, 16} {
		if got, want := EmptyProbReference(n, 0.1), OverwriteProb(n, 0.1); math.Abs(got-want) > 1e-12 {
			t.Errorf("EmptyProbReference(%d, 0.1) = %v, want 1-e^(-αN) = %v", n, got, want)
		}
	}
	// N = 3: offset 0 covers all; offsets 1, 2, 3 cover two copies each,
	// any two of them cover all three.
	u := OverwriteProb(1, 0.1)
	want := u + (1-u)*(3*u*u*(1-u)+u*u*u)
	if got := EmptyProbReference(3, 0.1); math.Abs(got-want) > 1e-12 {
		t.Errorf("EmptyProbReference(3, 0.1) = %v, want %v", got, want)
	}
	for n := 2; n <= 16; n++ {
		if EmptyProbReference(n, 0.1) < EmptyProbReference(1, 0.1) {
			t.Errorf("EmptyProbReference(%d) below N=1's: redundancy should not help", n)
		}
	}
	if !math.IsNaN(EmptyProbReference(0, 0.1)) || !math.IsNaN(EmptyProbReference(17, 0.1)) {
		t.Error("N outside 1..16 must give NaN")
	}
}

type mcCounts struct{ trials, found, empty, wrong, ambiguous int }

// monteCarlo writes keys through a Store and, after each write, queries the
// key written exactly later keys before it, so every query sees load
// α = later/slots. Keys are distinct. A nil h means the default layout.
func monteCarlo(t *testing.T, h tofino.Hasher, slots uint64, n int, later, trials int, p Policy) mcCounts {
	t.Helper()
	s := mustStore(t, Layout{Slots: slots, DataSize: 4, Hasher: h}, nil)
	var c mcCounts
	var data [4]byte
	for i := 0; i < later+trials; i++ {
		key := mix(uint32(i))
		fillValue(data[:], key)
		if err := s.Put(key, data[:], n); err != nil {
			t.Fatal(err)
		}
		if i < later {
			continue
		}
		q := mix(uint32(i - later))
		r, err := s.Query(q, n, p)
		if err != nil {
			t.Fatal(err)
		}
		c.trials++
		fillValue(data[:], q)
		switch r.Status {
		case Found:
			if bytes.Equal(r.Data, data[:]) {
				c.found++
			} else {
				c.wrong++
			}
		case Empty:
			c.empty++
		default:
			c.ambiguous++
		}
	}
	return c
}

// within reports whether k successes in n trials agree with probability p
// within z standard errors (plus a count of one for tiny p).
func within(k, n int, p, z float64) bool {
	sd := math.Sqrt(p * (1 - p) / float64(n))
	return math.Abs(float64(k)/float64(n)-p) <= z*sd+1/float64(n)
}

func mcSize() (slots uint64, trials int) {
	if testing.Short() {
		return 1 << 14, 20000
	}
	return 1 << 16, 100000
}

// TestMonteCarloDefault: with the default layout (tofino.PerCopy) and with
// another independent hasher (tofino.XXHash), the measured empty rate agrees
// with eq. 3's leading term (finite S), and for N > 1 not with the
// reference addressing's rate.
func TestMonteCarloDefault(t *testing.T) {
	slots, trials := mcSize()
	later := int(slots / 10)
	alpha := float64(later) / float64(slots)
	for _, tc := range []struct {
		name string
		h    tofino.Hasher
		ns   []int
	}{{"default", nil, []int{1, 2, 4}}, {"xxhash", tofino.XXHash, []int{2}}} {
		for _, n := range tc.ns {
			c := monteCarlo(t, tc.h, slots, n, later, trials, Plurality)
			want := math.Pow(OverwriteProbSlots(n, uint64(later), slots), float64(n))
			if !within(c.empty, c.trials, want, 5) || c.wrong != 0 || c.ambiguous != 0 || c.found+c.empty != c.trials {
				t.Errorf("%s N=%d α=0.1: %+v; empty rate %.4f, want %.4f ± 5σ and no wrong answers",
					tc.name, n, c, float64(c.empty)/float64(c.trials), want)
			}
			if n > 1 && within(c.empty, c.trials, EmptyProbReference(n, alpha), 5) {
				t.Errorf("%s N=%d: empty rate %.4f agrees with reference addressing's %.4f; copies should be independent",
					tc.name, n, float64(c.empty)/float64(c.trials), EmptyProbReference(n, alpha))
			}
			t.Logf("%s N=%d: empty %.4f, bound's leading term %.4f", tc.name, n, float64(c.empty)/float64(c.trials), EmptyProbLeading(n, 0.1))
		}
	}
}

// TestMonteCarloReference: with reference addressing the copies share their
// fate, and the measured empty rate follows EmptyProbReference, not eq. 3.
func TestMonteCarloReference(t *testing.T) {
	slots, trials := mcSize()
	later := int(slots / 10)
	alpha := float64(later) / float64(slots)
	for _, n := range []int{1, 2, 3, 4} {
		c := monteCarlo(t, tofino.Reference, slots, n, later, trials, Plurality)
		want := EmptyProbReference(n, alpha)
		if !within(c.empty, c.trials, want, 5) || c.wrong != 0 {
			t.Errorf("N=%d: %+v; empty rate %.4f, want %.4f ± 5σ", n, c, float64(c.empty)/float64(c.trials), want)
		}
		if n > 1 && within(c.empty, c.trials, EmptyProbLeading(n, alpha), 5) {
			t.Errorf("N=%d: empty rate %.4f agrees with the independent model's %.4f; the XOR structure should show",
				n, float64(c.empty)/float64(c.trials), EmptyProbLeading(n, alpha))
		}
		t.Logf("N=%d: empty %.4f, reference analysis %.4f, independent model %.4f", n, float64(c.empty)/float64(c.trials), want, EmptyProbLeading(n, alpha))
	}
}

// TestMonteCarloWrongOutput truncates the default hasher's checksums to 4
// bits so collisions are common, and checks empty and wrong rates against
// eqs. 3 and 4.
func TestMonteCarloWrongOutput(t *testing.T) {
	slots, trials := mcSize()
	later := int(slots / 10)
	const b = 4
	h := truncHasher{tofino.PerCopy, b}
	for _, n := range []int{1, 2} {
		c := monteCarlo(t, h, slots, n, later, trials, Plurality)
		empty := EmptyProb(n, b, 0.1)
		lo, hi := WrongProbBounds(n, b, 0.1)
		okWrong := within(c.wrong, c.trials, lo, 5) || within(c.wrong, c.trials, hi, 5) ||
			(float64(c.wrong) >= lo*float64(c.trials) && float64(c.wrong) <= hi*float64(c.trials))
		if !within(c.empty, c.trials, empty, 5) || !okWrong || c.wrong == 0 {
			t.Errorf("N=%d b=%d: %+v; empty %.4f want %.4f, wrong %.5f want in [%.5f, %.5f] ± 5σ", n, b, c,
				float64(c.empty)/float64(c.trials), empty, float64(c.wrong)/float64(c.trials), lo, hi)
		}
		t.Logf("N=%d b=%d: empty %.4f (eq.3 %.4f), wrong %.5f (eq.4 %.5f..%.5f)", n, b,
			float64(c.empty)/float64(c.trials), empty, float64(c.wrong)/float64(c.trials), lo, hi)
	}
	// First match: wrong whenever an earlier copy collides.
	c := monteCarlo(t, h, slots, 2, later, trials, FirstMatch)
	if want := WrongProbFirstMatch(2, b, 0.1); !within(c.wrong, c.trials, want, 5) {
		t.Errorf("first match N=2 b=%d: wrong %.5f, want %.5f ± 5σ", b, float64(c.wrong)/float64(c.trials), want)
	}
}

func TestSize(t *testing.T) {
	sz, err := Size(Workload{Keys: 1_000_000, Success: 0.99, DataSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if sz.Success < 0.99 || sz.N < 2 || sz.SlotSize != 8 || sz.Bytes != sz.Slots*8 || sz.Slots&(sz.Slots-1) != 0 {
		t.Errorf("Size(1e6, 0.99, 4) = %+v: want success >= 0.99, N >= 2, 8-byte slots", sz)
	}
	if half := 1 - math.Pow(OverwriteProbSlots(sz.N, 1_000_000, sz.Slots/2), float64(sz.N)); half >= 0.99 {
		t.Errorf("half the slots would do: success %v", half)
	}
	for n := 1; n <= MaxSizingRedundancy; n++ {
		if p := 1 - math.Pow(OverwriteProbSlots(n, 1_000_000, sz.Slots/2), float64(n)); p >= 0.99 {
			t.Errorf("N=%d reaches the target with half the memory (%v)", n, p)
		}
	}
	t.Logf("1e6 later keys, 99%%: %+v", sz)

	ref, err := Size(Workload{Keys: 1_000_000, Success: 0.99, DataSize: 4, Hasher: tofino.Reference})
	if err != nil {
		t.Fatal(err)
	}
	if ref.N != 1 || ref.Success < 0.99 || ref.Bytes <= sz.Bytes {
		t.Errorf("reference sizing %+v: want N=1, more memory than per-copy %d", ref, sz.Bytes)
	}
	if !isReference(tofino.Reference) || isReference(tofino.PerCopy) || isReference(tofino.XXHash) || isReference(nil) {
		t.Error("isReference: want true for tofino.Reference alone")
	}
	if xx, err := Size(Workload{Keys: 1_000_000, Success: 0.99, DataSize: 4, Hasher: tofino.XXHash}); err != nil || xx.N != sz.N || xx.Layout.Hasher != tofino.XXHash {
		t.Errorf("XXHash sizing %+v, %v: want per-copy's N %d and the hasher in the layout", xx, err, sz.N)
	}
	for _, bad := range []float64{0, 1, -1, math.NaN()} {
		if _, err := Size(Workload{Keys: 10, Success: bad, DataSize: 4}); !errors.Is(err, ErrSizing) {
			t.Errorf("Size(success %v) error = %v, want ErrSizing", bad, err)
		}
	}
	if _, err := Size(Workload{Keys: 10, Success: 0.9, DataSize: 6}); !errors.Is(err, ErrLayout) {
		t.Errorf("Size(data 6) error = %v, want ErrLayout", err)
	}
	if _, err := Size(Workload{Keys: 1 << 40, Success: 0.999999, DataSize: 4}); !errors.Is(err, ErrSizing) {
		t.Errorf("impossible target: error = %v, want ErrSizing", err)
	}
}

// TestSizeMonteCarlo builds the default store Size recommends and measures
// it.
func TestSizeMonteCarlo(t *testing.T) {
	later := 3000
	sz, err := Size(Workload{Keys: uint64(later), Success: 0.95, DataSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	_, trials := mcSize()
	c := monteCarlo(t, nil, sz.Slots, sz.N, later, trials, Plurality)
	rate := float64(c.found) / float64(c.trials)
	sd := math.Sqrt(0.95 * 0.05 / float64(c.trials))
	if rate < 0.95-5*sd || !within(c.found, c.trials, sz.Success, 5) {
		t.Errorf("sizing %+v: measured success %.4f, want >= 0.95 and ≈ %.4f", sz, rate, sz.Success)
	}
}
