package keywrite

import (
	"encoding/hex"

	"github.com/dtakit/dtakit/dta"
)

// Describe names a Key-Write report's fields (primitive.Describer).
func (kind) Describe(r *dta.Report, field func(string, any)) {
	k := &r.KeyWrite
	field("redundancy", k.Redundancy)
	field("key", k.Key)
	field("data", hex.EncodeToString(k.Data))
}
