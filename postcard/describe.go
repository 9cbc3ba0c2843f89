package postcard

import "github.com/dtakit/dtakit/dta"

// Describe names a Postcarding report's fields (primitive.Describer): the
// path length only when the report carries one.
func (kind) Describe(r *dta.Report, field func(string, any)) {
	p := &r.Postcard
	field("key", p.Key)
	field("hop", p.Hop)
	field("value", p.Value)
	if p.HasPathLength {
		field("path_length", p.PathLength)
	}
}
