package postcard

import (
	"errors"

	"github.com/dtakit/dtakit/primitive"
)

// Size sizes a Postcarding region for w's Keys (flows), Hops, Values and
// Success (Size).
func (kind) Size(w primitive.Workload) (primitive.Sizing, error) {
	sz, err := Size(Workload{Flows: w.Keys, Hops: w.Hops, Values: w.Values, Success: w.Success})
	if errors.Is(err, ErrSizing) {
		return primitive.Sizing{}, primitive.CannotSize(err)
	} else if err != nil {
		return primitive.Sizing{}, err
	}
	l := sz.Layout
	return primitive.Sizing{Bytes: sz.Bytes, N: sz.N, Success: sz.Success, Why: sz.Why,
		Geometry: map[string]any{"chunks": l.Chunks, "chunk_size": l.ChunkSize(), "hops": l.Hops, "slot_bits": l.SlotBits, "copies": l.Copies}}, nil
}
