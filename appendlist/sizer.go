package appendlist

import (
	"errors"

	"github.com/dtakit/dtakit/primitive"
)

// Size sizes an Append region for w's Rate, Lag, Lists, DataSize (the
// entry size), Batch and Success (Size).
func (kind) Size(w primitive.Workload) (primitive.Sizing, error) {
	sz, err := Size(Workload{Rate: w.Rate, Lag: w.Lag, Lists: w.Lists, EntrySize: w.DataSize, Batch: w.Batch, Success: w.Success})
	if errors.Is(err, ErrSizing) {
		return primitive.Sizing{}, primitive.CannotSize(err)
	} else if err != nil {
		return primitive.Sizing{}, err
	}
	l := sz.Layout
	return primitive.Sizing{Bytes: sz.Bytes, Success: sz.Success, Why: sz.Why,
		Geometry: map[string]any{"lists": l.Lists, "entries": l.Entries, "entry_size": l.EntrySize, "batch": l.Batch, "markers": l.Markers, "expected_loss": sz.Loss, "lag": w.Lag.String()}}, nil
}
