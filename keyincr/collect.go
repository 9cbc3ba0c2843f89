package keyincr

import (
	"encoding/json"
	"fmt"

	"github.com/dtakit/dtakit/primitive"
)

// StoreOf returns the Store behind s, a primitive.Store of a Key-Increment
// layout (collector.Collector.Add's), for its typed API.
func StoreOf(s primitive.Store) (*Store, bool) {
	st, ok := s.(store)
	return st.Store, ok
}

// ParseConfig makes a Layout of an instance's configuration,
// {"slots": S} (the collector daemon's).
func (kind) ParseConfig(b json.RawMessage) (primitive.Layout, error) {
	var c struct {
		Slots uint64 `json:"slots"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("keyincr: config: %w", err)
	}
	l := Layout{Slots: c.Slots}
	return seam{l}, nil
}

func (kind) Title() string { return "KeyIncrement" }

func (kind) AfterExport() string { return primitive.Zeroed }

// BorrowsKeys: a count-min sketch holds no keys.
func (kind) BorrowsKeys() {}
