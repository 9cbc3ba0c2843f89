package postcard

import (
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

// Generate: flow (j / Hops) mod Keys, hop j mod Hops + 1 of Hops, value
// SyntheticValue(s, flow, hop, round) in round j / (Hops·Keys).
func (kind) Generate(s *primitive.Synthetic, j int, r *dta.Report, _ []byte) {
	flow, hop, round := (j/s.Hops)%s.Keys, j%s.Hops, j/(s.Hops*s.Keys)
	r.Postcard = dta.Postcard{Key: uint32(flow), Hop: uint8(hop + 1), Value: SyntheticValue(s, flow, hop, round), PathLength: uint8(s.Hops)}
}

// SyntheticValue is the value hop (0-based) of flow reports in a
// synthetic stream s in its round (the flow's round-th path), in
// 1..s.Universe (never 0): each round takes a new path, so that a round
// lost shows.
func SyntheticValue(s *primitive.Synthetic, flow, hop, round int) uint32 {
	return s.Value(flow, round*s.Hops+hop)%uint32(s.Universe) + 1
}
