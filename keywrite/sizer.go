package keywrite

import (
	"errors"

	"github.com/dtakit/dtakit/primitive"
)

// Size sizes a Key-Write region for w's Keys, DataSize, Success and
// Hasher (Size).
func (kind) Size(w primitive.Workload) (primitive.Sizing, error) {
	sz, err := Size(Workload{Keys: w.Keys, DataSize: w.DataSize, Success: w.Success, Hasher: w.Hasher})
	if errors.Is(err, ErrSizing) {
		return primitive.Sizing{}, primitive.CannotSize(err)
	} else if err != nil {
		return primitive.Sizing{}, err
	}
	return primitive.Sizing{Bytes: sz.Bytes, N: sz.N, Success: sz.Success, Why: sz.Why,
		Geometry: map[string]any{"slots": sz.Slots, "slot_size": sz.SlotSize, "data_size": w.DataSize}}, nil
}
