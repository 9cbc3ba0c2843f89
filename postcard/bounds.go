package postcard

import "math"

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
