package appendlist

import (
	"encoding/hex"

	"github.com/dtakit/dtakit/dta"
)

// Describe names an Append report's fields (primitive.Describer).
func (kind) Describe(r *dta.Report, field func(string, any)) {
	field("list", r.Append.ListID)
	field("data", hex.EncodeToString(r.Append.Data))
}
