package keyincr

import "math"

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
