package keyincr

import (
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/dtakit/dtakit/internal/units"
)

// The count-min bound, in the form for one shared array. A query's estimate
// for key x is the minimum of its N counters; counter n holds x's total plus
// noise_n, the adds of other keys that landed on it. Each of the N copies of
// another key y lands on a given counter with probability 1/S, so
// E[noise_n] <= N·T/S, T being the total of all adds (the L1 norm of the
// stream), and by Markov's inequality
//
//	P(noise_n >= ε·T) <= N/(ε·S).                                   (single)
//
// This holds for any addressing, the reference's included, because the
// minimum is at most any one counter. When the copies' hashes are
// independent (the paper's model, and count-min's, which the default
// tofino.PerCopy provides), the N noises are close to independent, and
//
//	P(estimate >= true + ε·T) <= δ = (N/(ε·S))^N,  ε = N/(S·δ^(1/N)). (independent)
//
// This is count-min's "overestimate at most ε·T with probability 1-δ":
// with N = ln(1/δ) rows of width w = S/N it gives ε = e/w, the classic
// constants. With reference addressing (tofino.Reference, spec section 4 as
// written) the copies of a key sit at XOR offsets of one another (see
// keywrite's EmptyProbReference): for N a power of two every other key adds
// equally to all N counters of x, the N noises are equal, and only the
// single-counter form holds — redundancy then costs memory bandwidth and
// buys nothing.

// FailureProb returns δ, the bound on the probability that a query with
// redundancy n over slots counters overestimates a key's total by at least
// epsilon times the stream's total, for independent copy hashes (the
// default tofino.PerCopy, or tofino.XXHash):
// min(1, (n/(ε·S))^n).
func FailureProb(slots uint64, n int, epsilon float64) float64 {
	return math.Min(1, math.Pow(float64(n)/(epsilon*float64(slots)), float64(n)))
}

// FailureProbAny returns the single-counter bound min(1, n/(ε·S)), which
// holds for any addressing; with tofino.Reference and n a power of two it is
// the best available.
func FailureProbAny(slots uint64, n int, epsilon float64) float64 {
	return math.Min(1, float64(n)/(epsilon*float64(slots)))
}

// Epsilon returns the ε for which FailureProb(slots, n, ε) = delta:
// n/(S·delta^(1/n)).
func Epsilon(slots uint64, n int, delta float64) float64 {
	return float64(n) / (float64(slots) * math.Pow(delta, 1/float64(n)))
}

// Workload is what a Key-Increment region must answer, for Size.
type Workload struct {
	// Epsilon is the overestimate allowed, as a fraction of the epoch's
	// total count (an absolute error E over T counted is E/T).
	Epsilon float64
	// Success is the probability with which a key's estimate must be
	// within Epsilon·total of its true count (1-δ).
	Success float64
}

// Sizing is a counter region that meets a workload's target.
type Sizing struct {
	Layout  Layout  // the geometry, ready for NewStore
	Slots   uint64  // S counters, a power of two
	N       int     // counters per key (count-min depth)
	Bytes   uint64  // S·8
	Success float64 // 1 - FailureProb(S, N, Epsilon)
	Why     string  // the choice of N, in a line or two
}

// MaxSizingRedundancy is the largest N Size considers: beyond
// ln(1/δ) (16 for δ = 10^-7) more counters per key only cost memory.
const MaxSizingRedundancy = 16

// Size returns the smallest counter region (fewest bytes, then smallest
// N) in which an estimate exceeds the true count by more than
// w.Epsilon·total with probability at most 1-w.Success, by FailureProb
// (independent copy hashes: the default tofino.PerCopy).
func Size(w Workload) (Sizing, error) {
	if !(w.Success > 0 && w.Success < 1) || !(w.Epsilon > 0 && w.Epsilon < 1) {
		return Sizing{}, fmt.Errorf("size: %w: success %v and epsilon %v must be in (0, 1)", ErrSizing, w.Success, w.Epsilon)
	}
	delta := 1 - w.Success
	perN := make([]Sizing, MaxSizingRedundancy+1)
	var best Sizing
	for n := 1; n <= MaxSizingRedundancy; n++ {
		// FailureProb(S, n, ε) ≤ δ ⟺ S ≥ n / (ε·δ^(1/n)).
		need := float64(n) / (w.Epsilon * math.Pow(delta, 1/float64(n)))
		if need > MaxSlots {
			continue
		}
		slots := uint64(1) << bits.Len64(uint64(math.Ceil(need))-1)
		for FailureProb(slots, n, w.Epsilon) > delta { // rounding at the boundary
			slots <<= 1
		}
		if slots > MaxSlots {
			continue
		}
		perN[n] = Sizing{Slots: slots, N: n, Bytes: slots * CounterSize, Success: 1 - FailureProb(slots, n, w.Epsilon)}
		if best.N == 0 || perN[n].Bytes < best.Bytes {
			best = perN[n]
		}
	}
	if best.N == 0 {
		return Sizing{}, fmt.Errorf("size: %w: epsilon %v at success %v needs more than 2^32 counters", ErrSizing, w.Epsilon, w.Success)
	}
	best.Layout = Layout{Slots: best.Slots}
	best.Why = fmt.Sprintf("N=%d rows over %d counters of %d bytes (%s): P(error > %.3g·total) ≤ %.3g.", best.N, best.Slots, CounterSize, units.Bytes(best.Bytes), w.Epsilon, 1-best.Success)
	var alt []string
	for _, n := range []int{best.N - 1, best.N + 1} {
		if n >= 1 && n <= MaxSizingRedundancy && perN[n].N != 0 {
			alt = append(alt, fmt.Sprintf("N=%d needs %s", n, units.Bytes(perN[n].Bytes)))
		}
	}
	if len(alt) > 0 {
		best.Why += " " + strings.Join(alt, ", ") + "; ties go to fewer counters per key (fewer atomics per report)."
	}
	return best, nil
}
