package keywrite

import (
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/internal/units"
)

// The analysis of the paper's Appendix A.5, under its model: every slot hash
// is uniform and independent, a key x is queried after K = αS other distinct
// keys were written with the same redundancy N into S slots, and a slot whose
// last writer was another key carries a checksum that equals x's b-bit
// checksum with probability 2^-b.
//
// Overwrite (eqs. 1, 2). Each of the N·K later writes hits a given copy of x
// with probability 1/S, so the copy survives with probability
// (1-1/S)^(N·K) → e^(-αN) as S grows, and is overwritten with probability
//
//	q = 1 - (1-1/S)^(N·αS) ≈ 1 - e^(-αN).
//
// Empty return (eq. 3). The query finds no matching copy when all N copies
// were overwritten and none of the overwriting checksums collides:
//
//	P(empty) = (q·(1-2^-b))^N ≤ q^N = (1 - e^(-αN))^N.
//
// For α = 0.1 the leading term q^N is 9.5 % for N=1, 3.3 % for N=2 and 1.2 %
// for N=4. It is smallest at e^(-αN) = 1/2, i.e. N = ln 2/α, where it is
// 2^(-ln 2/α) (the Bloom-filter optimum).
//
// Wrong output (eq. 4). Plurality voting answers with a wrong value only if
// F, the number of overwritten copies whose checksum collides, exceeds T,
// the number of surviving copies; F = 1, T = 0 always gives a wrong answer.
// With p = 2^-b:
//
//	lower = N·q^N·p·(1-p)^(N-1)
//	upper = Σ_{t=0}^{N-1} C(N,t)·(1-q)^t·q^(N-t)·C(N-t,t+1)·p^(t+1)
//
// Both are N·q^N·2^-b to first order in 2^-b: at b = 32, α = 0.1 this is
// 2.2e-11 for N = 1 and at most 1.6e-11 (1.53e-11 at N = 2, 1.57e-11 at
// N = 8) for 2 <= N <= 8, the paper's figure; it grows again for larger N,
// where more copies land on colliding slots. With tofino.Reference and b = 32 collisions cannot happen at all
// between distinct 4-byte keys, because CRC-32 over 32 bits is a bijection;
// the bound matters for truncated or software checksums.

// OverwriteProb returns the probability that a given copy of a key was
// overwritten after α·S later keys with n copies each, in the limit of many
// slots: 1 - e^(-αn) (eq. 2).
func OverwriteProb(n int, alpha float64) float64 {
	return -math.Expm1(-alpha * float64(n))
}

// OverwriteProbSlots is OverwriteProb for a finite number of slots and
// later keys: 1 - (1-1/slots)^(n·later) (eq. 1).
func OverwriteProbSlots(n int, later, slots uint64) float64 {
	if later == 0 || n <= 0 {
		return 0
	}
	if slots <= 1 {
		return 1
	}
	return -math.Expm1(float64(n) * float64(later) * math.Log1p(-1/float64(slots)))
}

// EmptyProbLeading returns the leading term of the empty-return probability
// of a query with redundancy n at load α: (1 - e^(-αn))^n (eq. 3's bound).
func EmptyProbLeading(n int, alpha float64) float64 {
	return math.Pow(OverwriteProb(n, alpha), float64(n))
}

// EmptyProb returns the probability that a query with redundancy n finds no
// matching copy, with b-bit checksums at load α: (q·(1-2^-b))^n (eq. 3).
func EmptyProb(n, b int, alpha float64) float64 {
	return math.Pow(OverwriteProb(n, alpha)*(1-math.Ldexp(1, -b)), float64(n))
}

// WrongProbBounds returns lower and upper bounds on the probability that a
// plurality query with redundancy n and b-bit checksums at load α answers
// with a wrong value (eq. 4; see the package's analysis comment).
func WrongProbBounds(n, b int, alpha float64) (lower, upper float64) {
	q := OverwriteProb(n, alpha)
	p := math.Ldexp(1, -b)
	N := float64(n)
	lower = N * math.Pow(q, N) * p * math.Pow(1-p, N-1)
	for t := 0; t < n && n-t >= t+1; t++ {
		upper += binom(n, t) * math.Pow(1-q, float64(t)) * math.Pow(q, float64(n-t)) *
			binom(n-t, t+1) * math.Pow(p, float64(t+1))
	}
	return lower, upper
}

// WrongProbFirstMatch returns the probability that a first-match query with
// redundancy n and b-bit checksums at load α answers with a wrong value:
// some copy before the first surviving one was overwritten by a colliding
// checksum, q·p·Σ_{i<n} (q·(1-p))^i.
func WrongProbFirstMatch(n, b int, alpha float64) float64 {
	q := OverwriteProb(n, alpha)
	p := math.Ldexp(1, -b)
	r := q * (1 - p)
	var sum, pow float64 = 0, 1
	for range n {
		sum += pow
		pow *= r
	}
	return q * p * sum
}

// Reference addressing (tofino.Reference, spec section 4 as written) breaks
// the model's independence. CRC is affine over GF(2) for inputs of one
// length, so
//
//	slot(x, n) = slot(x, 0) XOR (A(n) & (S-1)),
//
// A(n) being the CRC of the byte n with zero init and xor-out (the CRC
// table entry; A(1) = 0x77073096), whatever the key. Copy n of a later key y
// lands on copy c of x exactly when slot(y, 0) = slot(x, 0) XOR A(c XOR n).
// So a later key overwrites x's copies only when its copy-0 slot is one of
// the 2^d slots slot(x, 0) XOR A(j), j < 2^d, d = ceil(log2 N) — each with
// probability 1/S — and at offset j it overwrites the copies
// O_j = {c < N : c XOR j < N}. With u = 1 - e^(-α), the chance that a given
// offset is taken by some later key, the empty-return probability is
//
//	P(empty) = Σ_{J ⊆ [0, 2^d), ∪_{j∈J} O_j = [0, N)} u^|J|·(1-u)^(2^d-|J|)
//
// For N a power of two every O_j is all of x's copies and P(empty) =
// 1 - e^(-αN): the copies share one fate and redundancy only adds load.
// N = 1 minimises it for every α. EmptyProbReference computes it.

// MaxReferenceAnalysisRedundancy is the largest N EmptyProbReference
// handles.
const MaxReferenceAnalysisRedundancy = 16

// EmptyProbReference returns the probability that a query with redundancy n
// (1..16) finds no copy of its key at load α when slots are addressed as
// spec section 4 writes it (tofino.Reference), ignoring checksum
// collisions, in the limit of many slots. It returns NaN for n outside
// 1..16.
func EmptyProbReference(n int, alpha float64) float64 {
	return emptyReference(n, OverwriteProb(1, alpha))
}

// emptyReference is EmptyProbReference with u, the probability that a
// given copy-0 offset was taken by a later key.
func emptyReference(n int, u float64) float64 {
	if n < 1 || n > MaxReferenceAnalysisRedundancy {
		return math.NaN()
	}
	return emptyFromCovers(referenceCovers(n), u)
}

// referenceCovers returns, for k = 0..2^d, the number of sets of k copy-0
// offsets whose later keys together overwrite all n copies.
func referenceCovers(n int) []float64 {
	offsets := 1
	for offsets < n {
		offsets <<= 1
	}
	var cover [MaxReferenceAnalysisRedundancy]uint32 // O_j as a bit set of copies
	for j := range offsets {
		for c := range n {
			if c^j < n {
				cover[j] |= 1 << c
			}
		}
	}
	all := uint32(1)<<n - 1
	counts := make([]float64, offsets+1)
	for set := 1; set < 1<<offsets; set++ {
		var got uint32
		for j := range offsets {
			if set>>j&1 != 0 {
				got |= cover[j]
			}
		}
		if got == all {
			counts[bits.OnesCount(uint(set))]++
		}
	}
	return counts
}

func emptyFromCovers(counts []float64, u float64) float64 {
	offsets := len(counts) - 1
	var p float64
	for k, c := range counts {
		if c != 0 {
			p += c * math.Pow(u, float64(k)) * math.Pow(1-u, float64(offsets-k))
		}
	}
	return p
}

func binom(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// isReference reports whether h is tofino.Reference, spec section 4 as
// written, whose copy slots are copy 0's XOR constants (see
// EmptyProbReference); Size takes the copies of any other hasher for
// independent, the paper's model.
func isReference(h tofino.Hasher) bool {
	id, ok := tofino.HasherID(h)
	return ok && id == tofino.ReferenceID
}

// MaxSizingRedundancy is the largest N Size considers. With independent
// hashes the memory needed for a target falls with N only until
// e^(-αN) = 1/2, i.e. N = log2(1/(1-target)), which is 20 for a
// one-in-a-million miss rate.
const MaxSizingRedundancy = 64

// Workload is what a Key-Write region must hold, for Size.
type Workload struct {
	// Keys is the number of distinct keys written after the key queried:
	// an epoch of K keys queried at its end needs K-1 for its oldest key.
	Keys uint64
	// DataSize is the bytes of data per key (a positive multiple of 4).
	DataSize int
	// Success is the probability with which a query must find the key.
	Success float64
	// Hasher is how the switch hashes copies, as in Layout: nil for the
	// default, tofino.PerCopy, or tofino.Reference for spec section 4 as
	// written (with which N = 1 is always best).
	Hasher tofino.Hasher
}

// Sizing is a region geometry that meets a workload's target.
type Sizing struct {
	Layout   Layout  // the geometry, ready for NewStore
	Slots    uint64  // S, a power of two
	N        int     // redundancy, for reports and queries
	SlotSize int     // bytes per slot
	Bytes    uint64  // Slots·SlotSize
	Success  float64 // probability a query finds its key (finite S)
	Why      string  // the choice of N, in a line or two
}

// Size returns the smallest region (fewest bytes, then smallest N) in
// which a key queried after w.Keys other distinct keys were written is
// found with probability at least w.Success. Success is 1 - P(empty) with
// the finite-S probabilities of eq. 1 (per-copy) or EmptyProbReference's
// (reference); wrong outputs (at most ~1e-11 with 32-bit checksums) are
// ignored.
func Size(w Workload) (Sizing, error) {
	if !(w.Success > 0 && w.Success < 1) {
		return Sizing{}, fmt.Errorf("size: %w: success probability %v not in (0, 1)", ErrSizing, w.Success)
	}
	maxN := MaxSizingRedundancy
	l := Layout{Slots: 1, DataSize: w.DataSize, Hasher: tofino.OrPerCopy(w.Hasher)}
	ref := isReference(l.Hasher)
	if ref {
		maxN = MaxReferenceAnalysisRedundancy
	}
	if err := l.Validate(); err != nil {
		return Sizing{}, fmt.Errorf("size: %w", err)
	}
	slotSize := uint64(l.SlotSize())
	// perN[n] is the smallest region that reaches the target with N = n.
	perN := make([]Sizing, maxN+1)
	var best Sizing
	for n := 1; n <= maxN; n++ {
		var covers []float64
		if ref {
			covers = referenceCovers(n)
		}
		for e := 0; e <= 32; e++ {
			slots := uint64(1) << e
			bytes := slots * slotSize
			if bytes > math.MaxInt || (best.N != 0 && e > 0 && bytes > 4*best.Bytes) {
				break
			}
			var p float64
			if !ref {
				p = 1 - math.Pow(OverwriteProbSlots(n, w.Keys, slots), float64(n))
			} else {
				p = 1 - emptyFromCovers(covers, OverwriteProbSlots(1, w.Keys, slots))
			}
			if p >= w.Success {
				perN[n] = Sizing{Slots: slots, N: n, SlotSize: int(slotSize), Bytes: bytes, Success: p}
				if best.N == 0 || bytes < best.Bytes {
					best = perN[n]
				}
				break
			}
		}
	}
	if best.N == 0 {
		return Sizing{}, fmt.Errorf("size: %w: %d later keys need more than 2^32 slots for success %v", ErrSizing, w.Keys, w.Success)
	}
	best.Layout = l
	best.Layout.Slots = best.Slots
	best.Why = why(best, perN)
	return best, nil
}

// why explains the choice of N against its neighbours and N = 1.
func why(best Sizing, perN []Sizing) string {
	cost := func(n int) string {
		if n >= len(perN) || perN[n].N == 0 {
			return "cannot within 2^32 slots"
		}
		return "needs " + units.Bytes(perN[n].Bytes)
	}
	s := fmt.Sprintf("N=%d: %d slots of %d bytes (%s) reach %.4g.", best.N, best.Slots, best.SlotSize, units.Bytes(best.Bytes), best.Success)
	s += fmt.Sprintf(" A slot is a %d-byte checksum and %d data bytes", checksumSize, best.Layout.DataSize)
	if pad := best.SlotSize - best.Layout.PayloadSize(); pad > 0 {
		s += fmt.Sprintf(", padded with %d bytes to a power of two", pad)
	}
	s += "."
	var alt []string
	for _, n := range []int{1, best.N - 1, best.N + 1} {
		if n >= 1 && n != best.N && (len(alt) == 0 || n != 1) {
			alt = append(alt, fmt.Sprintf("N=%d %s", n, cost(n)))
		}
	}
	if best.N == 1 {
		return s + " " + alt[0] + ": at this target a second copy adds more load than it saves."
	}
	s += " " + strings.Join(alt, ", ") + ": fewer copies are overwritten too often, more copies add load; ties go to fewer copies (fewer writes per report)."
	return s
}
