package primitive

import "github.com/dtakit/dtakit/dta"

// Synthetic is the parameters of a synthetic report stream
// (internal/app/stream, the load dtareport sends): each primitive takes
// those it needs.
type Synthetic struct {
	Seed       uint64
	Keys       int // distinct keys (flows) per primitive
	Redundancy int // copies or counters per report, 1..255
	Hops       int // path length, 1..255
	Lists      int // lists
	EntrySize  int // bytes of a list entry, 4..1024
	Universe   int // values are 1..Universe
}

// Generator is implemented by a Kind whose reports a synthetic stream
// carries. Generate fills r with the primitive's j-th report in a stream
// of parameters s: a function of s and j alone, so that a checker
// recomputes what was sent last under every key. buf (at least
// s.EntrySize and 4 bytes) holds the report's data, which r aliases.
// Generate does not allocate.
type Generator interface {
	Kind
	Generate(s *Synthetic, j int, r *dta.Report, buf []byte)
}

// Value is the pseudo-random value of (a, b) in s (see SyntheticValue).
func (s Synthetic) Value(a, b int) uint32 { return SyntheticValue(s.Seed, a, b) }

// SyntheticValue is the pseudo-random value of (a, b) under seed:
// splitmix64 of the seed and both.
func SyntheticValue(seed uint64, a, b int) uint32 {
	x := seed ^ uint64(a)<<32 ^ uint64(b)
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return uint32(x ^ x>>31)
}
