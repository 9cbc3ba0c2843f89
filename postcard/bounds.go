package postcard

import (
	"fmt"
	"math"
	"strings"

	"github.com/dtakit/dtakit/internal/units"
)

// Bounds are the error bounds of a query (paper Appendix A.2, A.3, A.6) for
// the oldest flow in a store holding alpha·C flows.
type Bounds struct {
	// Overwrite is p, the probability that a given copy of the flow's
	// chunk was overwritten by a later flow: 1 - (1 - 1/C)^(N·alpha·C),
	// about 1 - e^(-N·alpha).
	Overwrite float64
	// FalseValid is q, the probability that an overwritten chunk passes the
	// validity rule for the queried key, its slots behaving as independent
	// uniform b-bit words: sum over l = 1..B of (|V|/2^b)^l · (1/2^b)^(B-l).
	FalseValid float64
	// AllOverwritten is the probability that every copy was overwritten:
	// p^N when copies collide independently (PerCopyAddressing, the
	// default), p under ReferenceAddressing, whose copies are overwritten
	// together.
	AllOverwritten float64
	// NoOutput bounds the probability of no answer: every copy overwritten
	// and none falsely valid, or a falsely valid copy disagreeing with
	// another valid one: AllOverwritten + N·p·q.
	NoOutput float64
	// Wrong bounds the probability of a wrong answer: every copy
	// overwritten and at least one falsely valid:
	// AllOverwritten·(1 - (1-q)^N) ≤ N·AllOverwritten·q.
	Wrong float64
}

// Bounds returns the error bounds of l for a universe of universe values at
// load alpha (flows written / chunks).
func (l Layout) Bounds(alpha float64, universe int) Bounds {
	l = l.withDefaults()
	n := float64(l.Copies)
	c := float64(l.Chunks)
	var b Bounds
	// (1-1/C)^(N·alpha·C) computed as exp(N·alpha·C·log1p(-1/C)).
	b.Overwrite = -math.Expm1(n * alpha * c * math.Log1p(-1/c))
	space := math.Ldexp(1, l.SlotBits)
	inV := math.Min(1, float64(universe)/space)
	for k := 1; k <= l.Hops; k++ {
		b.FalseValid += math.Pow(inV, float64(k)) * math.Pow(1/space, float64(l.Hops-k))
	}
	b.AllOverwritten = b.Overwrite
	if l.Addressing == PerCopyAddressing {
		b.AllOverwritten = math.Pow(b.Overwrite, n)
	}
	b.NoOutput = math.Min(1, b.AllOverwritten+n*b.Overwrite*b.FalseValid)
	// 1-(1-q)^N without cancellation.
	b.Wrong = b.AllOverwritten * -math.Expm1(n*math.Log1p(-b.FalseValid))
	return b
}

// Workload is what a Postcarding region must hold, for Size.
type Workload struct {
	// Flows is the number of distinct flows written after the flow queried
	// (for an epoch of F flows queried at its end, F-1 for the oldest).
	Flows uint64
	// Hops is B, the longest path (1..MaxHops; 0 means 5).
	Hops int
	// Values is |V|, the number of distinct hop values (switch IDs).
	Values int
	// Success is the probability with which a query must answer the
	// flow's right path.
	Success float64
}

// Sizing is a Postcarding geometry that meets a workload's target.
type Sizing struct {
	Layout  Layout  // Hops, SlotBits, Chunks, Copies (per-copy addressing)
	N       int     // copies per flow, Layout.Copies
	Bytes   uint64  // Layout.RegionSize()
	Success float64 // at least 1 - NoOutput - Wrong of Layout.Bounds
	Why     string  // the choice of N and slot width, in a line or two
}

// Size returns the smallest region (fewest bytes, then fewest copies, then
// the widest slots) whose Bounds give a query after w.Flows later flows a
// success probability of at least w.Success: 1 - NoOutput - Wrong, both
// upper bounds, so the success is a lower bound. Slots of 8 or 16 bits are
// considered when the values fit (|V| < 2^b).
func Size(w Workload) (Sizing, error) {
	if w.Hops == 0 {
		w.Hops = 5
	}
	switch {
	case !(w.Success > 0 && w.Success < 1):
		return Sizing{}, fmt.Errorf("size: %w: success probability %v not in (0, 1)", ErrSizing, w.Success)
	case w.Hops < 1 || w.Hops > MaxHops || w.Values < 1:
		return Sizing{}, fmt.Errorf("size: %w: %d hops (1..%d), %d values (at least 1)", ErrSizing, w.Hops, MaxHops, w.Values)
	}
	var best Sizing
	perN := map[int]Sizing{} // the best region per copy count
	for _, b := range []int{32, 16, 8} {
		if w.Values >= 1<<b && b < 32 {
			continue
		}
		for n := 1; n <= MaxCopies; n++ {
			sz, ok := smallest(w, b, n, best)
			if !ok {
				continue
			}
			if old, ok := perN[n]; !ok || sz.Bytes < old.Bytes {
				perN[n] = sz
			}
			if best.N == 0 || sz.Bytes < best.Bytes || (sz.Bytes == best.Bytes && n < best.N) {
				best = sz
			}
		}
	}
	if best.N == 0 {
		return Sizing{}, fmt.Errorf("size: %w: %d later flows need more than 2^31 chunks for success %v", ErrSizing, w.Flows, w.Success)
	}
	best.Why = why(w, best, perN)
	return best, nil
}

// smallest returns the region of n copies of b-bit slots with the fewest
// chunks that reaches w.Success, and false when there is none, or none
// within four times the bytes of best (when set).
func smallest(w Workload, b, n int, best Sizing) (Sizing, bool) {
	for e := 0; e <= 31; e++ {
		l := Layout{Hops: w.Hops, SlotBits: b, Chunks: 1 << e, Copies: n}
		bytes := l.RegionSize()
		if best.N != 0 && bytes > 4*best.Bytes {
			return Sizing{}, false
		}
		alpha := float64(w.Flows) / float64(l.Chunks)
		bd := l.Bounds(alpha, w.Values)
		if p := 1 - bd.NoOutput - bd.Wrong; p >= w.Success {
			return Sizing{Layout: l, N: n, Bytes: bytes, Success: p}, true
		}
	}
	return Sizing{}, false
}

// why says why Size chose best: its geometry, the padding, what one copy
// fewer or more would need (perN: the best region per copy count) and the
// slot width.
func why(w Workload, best Sizing, perN map[int]Sizing) string {
	l := best.Layout
	s := fmt.Sprintf("N=%d copies of %d chunks of %d bytes (%d-bit slots, %s) reach %.4g.", best.N, l.Chunks, l.ChunkSize(), l.SlotBits, units.Bytes(best.Bytes), best.Success)
	if hop := l.Hops * l.SlotBits / 8; hop < l.ChunkSize() {
		s += fmt.Sprintf(" A chunk is %d hops of %d bytes, padded with %d bytes to a power of two.", l.Hops, l.SlotBits/8, l.ChunkSize()-hop)
	}
	var alt []string
	for _, n := range []int{best.N - 1, best.N + 1} {
		if sz, ok := perN[n]; ok {
			alt = append(alt, fmt.Sprintf("N=%d needs %s", n, units.Bytes(sz.Bytes)))
		}
	}
	if len(alt) > 0 {
		s += " " + strings.Join(alt, ", ") + "."
	}
	if l.SlotBits < 32 {
		s += fmt.Sprintf(" %d values fit %d-bit slots; narrower slots make false-valid chunks likelier, counted in the success.", w.Values, l.SlotBits)
	}
	return s
}
