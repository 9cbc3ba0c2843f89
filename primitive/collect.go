package primitive

import (
	"encoding/json"

	"github.com/dtakit/dtakit/dta"
)

// The optional interfaces below are what a collector, its daemon and
// export ask of a primitive beyond Kind, Layout and Store: each is
// implemented by the primitives that need it and looked for with a type
// assertion, so a primitive without it still runs.

// Configurer is implemented by a Kind whose instances a configuration file
// describes (the collector daemon's "instances"): ParseConfig decodes the
// instance's JSON object, ignoring the fields that are not the primitive's,
// into a Layout (which the collector validates when it adds the instance).
type Configurer interface {
	Kind
	ParseConfig(instance json.RawMessage) (Layout, error)
}

// Notifier is implemented by a Store whose readers wake on an RDMA WRITE
// with Immediate into its region (Append: the immediate data names the
// list). The collector calls Notify with each such WRITE's immediate data;
// the region's memory is already written.
type Notifier interface {
	Store
	Notify(immData uint32) error
}

// HeadStore is implemented by a Store whose translator resumes from state
// the collector sends after the advertisement (Resumer, dta.ListHeads):
// Heads appends to dst the heads as they are in memory now, or fails when
// the layout keeps none.
type HeadStore interface {
	Store
	Heads(dst []uint64) ([]uint64, error)
}

// Describer is implemented by a Kind that names the fields of its
// reports' sub-header and data, for tools that print reports (dtadump):
// Describe calls field with each, in wire order; data is hex.
type Describer interface {
	Kind
	Describe(r *dta.Report, field func(name string, value any))
}
