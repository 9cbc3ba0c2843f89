package primitive

import (
	"errors"
	"time"

	"github.com/dtakit/dtakit/dta/tofino"
)

// Sizer is implemented by a Kind whose memory a workload sizes before it
// is bought (dtasize): Size returns the smallest region that reaches
// w.Success. An error for a target no geometry reaches wraps ErrSizing;
// any other is a workload the model does not take.
type Sizer interface {
	Kind
	Size(w Workload) (Sizing, error)
}

// Workload is the inputs of the primitives' sizing models; each reads the
// fields its model takes (its package's Workload says which).
type Workload struct {
	// Success is the target: the probability a query succeeds (for a
	// list, that a reader's lag window loses nothing).
	Success float64
	// Keys is the number of distinct keys (flows) written after the key
	// queried.
	Keys uint64
	// DataSize is the bytes of data per key or per list entry.
	DataSize int
	// Epsilon is a counter's allowed overestimate, as a fraction of the
	// epoch's total count.
	Epsilon float64
	// Hops is the longest path; Values the distinct hop values.
	Hops, Values int
	// Rate is the entries per second appended to each list, Lag the
	// longest a reader leaves its list unread.
	Rate float64
	Lag  time.Duration
	// Lists and Batch are an Append layout's lists and entries written
	// at once.
	Lists, Batch int
	// Hasher is how the switch hashes copies (nil for the default).
	Hasher tofino.Hasher
}

// Sizing is the region a Sizer chose for a workload.
type Sizing struct {
	Bytes    uint64         // the region's size
	N        int            // copies per key, 0 where the primitive has none
	Success  float64        // the success the region reaches
	Geometry map[string]any // the layout's parameters and the model's figures, by name
	Why      string         // the choice, in a line or two
}

// ErrSizing: no geometry reaches a workload's target.
var ErrSizing = errors.New("primitive: cannot size")

// CannotSize returns err, a primitive's own sizing error, as one that
// also wraps ErrSizing; its message is err's.
func CannotSize(err error) error { return cannotSize{err} }

type cannotSize struct{ err error }

func (e cannotSize) Error() string   { return e.err.Error() }
func (e cannotSize) Unwrap() []error { return []error{e.err, ErrSizing} }
