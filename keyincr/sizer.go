package keyincr

import (
	"errors"

	"github.com/dtakit/dtakit/primitive"
)

// Size sizes a Key-Increment region for w's Epsilon and Success (Size).
func (kind) Size(w primitive.Workload) (primitive.Sizing, error) {
	sz, err := Size(Workload{Epsilon: w.Epsilon, Success: w.Success})
	if errors.Is(err, ErrSizing) {
		return primitive.Sizing{}, primitive.CannotSize(err)
	} else if err != nil {
		return primitive.Sizing{}, err
	}
	return primitive.Sizing{Bytes: sz.Bytes, N: sz.N, Success: sz.Success, Why: sz.Why,
		Geometry: map[string]any{"slots": sz.Slots, "epsilon": w.Epsilon}}, nil
}
