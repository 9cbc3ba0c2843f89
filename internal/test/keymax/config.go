package keymax

import (
	"encoding/json"
	"fmt"
	"math/bits"

	"github.com/dtakit/dtakit/primitive"
)

// ParseConfig makes a Layout of an instance's configuration, {"slots": S}
// with S a power of two (the collector daemon's "instances"), so that a
// configuration can name "keymax" (primitive.Configurer).
func (Kind) ParseConfig(b json.RawMessage) (primitive.Layout, error) {
	var c struct {
		Slots uint64 `json:"slots"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("keymax: config: %w", err)
	}
	if c.Slots == 0 || c.Slots&(c.Slots-1) != 0 {
		return nil, fmt.Errorf("%w: slots %d: want a power of two", ErrLayout, c.Slots)
	}
	return Layout{LogSlots: bits.TrailingZeros64(c.Slots)}, nil
}
