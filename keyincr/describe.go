package keyincr

import "github.com/dtakit/dtakit/dta"

// Describe names a Key-Increment report's fields (primitive.Describer).
func (kind) Describe(r *dta.Report, field func(string, any)) {
	k := &r.KeyIncrement
	field("redundancy", k.Redundancy)
	field("key", k.Key)
	field("counter", k.Counter)
}
