package appendlist

import (
	"encoding/json"
	"fmt"

	"github.com/dtakit/dtakit/primitive"
)

// StoreOf returns the Store behind s, a primitive.Store of an Append
// layout (collector.Collector.Add's), for its typed API: its readers wake
// on the WRITEs with Immediate the collector passes to s.
func StoreOf(s primitive.Store) (*Store, bool) {
	st, ok := s.(*store)
	if !ok {
		return nil, false
	}
	return st.Store, true
}

// ParseConfig makes a Layout of an instance's configuration, {"lists": L,
// "entries": E, "entry_size": S, "batch": B, "markers": M} (the collector
// daemon's).
func (kind) ParseConfig(b json.RawMessage) (primitive.Layout, error) {
	var c struct {
		Lists     int  `json:"lists"`
		Entries   int  `json:"entries"`
		EntrySize int  `json:"entry_size"`
		Batch     int  `json:"batch"`
		Markers   bool `json:"markers"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("appendlist: config: %w", err)
	}
	l := Layout{Lists: c.Lists, Entries: c.Entries, EntrySize: c.EntrySize, Batch: c.Batch, Markers: c.Markers}
	return seam{l}, nil
}

func (kind) Title() string { return "Append" }

func (kind) AfterExport() string { return primitive.Drained }
