package postcard

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dtakit/dtakit/primitive"
)

// StoreOf returns the Store behind s, a primitive.Store of a Postcarding
// layout (collector.Collector.Add's), for its typed API.
func StoreOf(s primitive.Store) (*Store, bool) {
	st, ok := s.(*store)
	if !ok {
		return nil, false
	}
	return st.Store, true
}

// ParseConfig makes a Layout of an instance's configuration, {"hops": H,
// "chunks": C, "copies": N, "values": [..]} (the collector daemon's): the
// values are the universe its paths decode against, which the
// advertisement carries.
func (kind) ParseConfig(b json.RawMessage) (primitive.Layout, error) {
	var c struct {
		Hops   int      `json:"hops"`
		Chunks uint32   `json:"chunks"`
		Copies int      `json:"copies"`
		Values []uint32 `json:"values"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("postcard: config: %w", err)
	}
	l := Layout{Hops: c.Hops, Chunks: c.Chunks, Copies: c.Copies}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if len(c.Values) == 0 {
		return nil, errors.New("a postcard instance needs the values its paths hold")
	}
	if _, err := NewTable(l, c.Values); err != nil {
		return nil, err
	}
	geo, err := l.AppendGeometry(nil, NewValueSet(c.Values))
	if err != nil {
		return nil, err
	}
	return kind{}.ParseLayout(geo)
}

// TableOf returns the Table of the values s, a primitive.Store of a
// Postcarding layout, decodes paths against: the value set its geometry
// advertises.
func TableOf(s primitive.Store) (*Table, error) {
	st, ok := s.(*store)
	if !ok {
		return nil, fmt.Errorf("postcard: table: %w: a %T", primitive.ErrUnsupported, s)
	}
	return st.table()
}

func (kind) Title() string { return "Postcard" }

// BorrowsKeys: a chunk does not hold its key.
func (kind) BorrowsKeys() {}
