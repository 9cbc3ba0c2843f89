package keywrite

import (
	"encoding/json"
	"fmt"

	"github.com/dtakit/dtakit/primitive"
)

// StoreOf returns the Store behind s, a primitive.Store of a Key-Write
// layout (collector.Collector.Add's), for its typed API.
func StoreOf(s primitive.Store) (*Store, bool) {
	st, ok := s.(store)
	return st.Store, ok
}

// ParseConfig makes a Layout of an instance's configuration,
// {"slots": S, "data_size": D} (the collector daemon's).
func (kind) ParseConfig(b json.RawMessage) (primitive.Layout, error) {
	var c struct {
		Slots    uint64 `json:"slots"`
		DataSize int    `json:"data_size"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("keywrite: config: %w", err)
	}
	l := Layout{Slots: c.Slots, DataSize: c.DataSize}
	return seam{l}, nil
}

func (kind) Title() string { return "KeyWrite" }

// ListsKeys: a slot's checksum names its key (Scan).
func (kind) ListsKeys() {}
