package keyincr

import (
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

// Generate: key j mod Keys, adding 1, Redundancy counters.
func (kind) Generate(s *primitive.Synthetic, j int, r *dta.Report, _ []byte) {
	r.KeyIncrement = dta.KeyIncrement{Redundancy: uint8(s.Redundancy), Key: uint32(j % s.Keys), Counter: 1}
}
