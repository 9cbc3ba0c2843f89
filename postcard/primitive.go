package postcard

import (
	"fmt"
	"sync"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

func init() { primitive.Register(kind{}) }

// kind is Postcarding as a primitive.Kind.
type kind struct{}

func (kind) Opcode() dta.Opcode       { return dta.OpPostcard }
func (kind) Name() string             { return dta.OpPostcard.String() }
func (kind) Key(r *dta.Report) uint32 { return r.Postcard.Key }
func (kind) Stateful() bool           { return true } // a flow's hops meet in one cache
func (kind) ParseLayout(b []byte) (primitive.Layout, error) {
	l, v, err := ParseGeometry(b)
	if err != nil {
		return nil, err
	}
	return seam{l, v}, nil
}

// seam is a Layout and the value set its geometry advertises, as a
// primitive.Layout.
type seam struct {
	Layout
	vals ValueSet
}

func (seam) Kind() primitive.Kind { return kind{} }
func (seam) Atomic() bool         { return false }

// LayoutOf returns the Layout behind l, a primitive.Layout of a Postcarding
// geometry (primitive.Parse's), for its typed API.
func LayoutOf(l primitive.Layout) (Layout, bool) {
	sl, ok := l.(seam)
	return sl.Layout, ok
}

func (l seam) AppendBinary(b []byte) ([]byte, error) { return l.AppendGeometry(b, l.vals) }

// Defaults of a translator's cache when primitive.Config leaves them 0.
const (
	defaultCache  = 4096
	defaultLinger = 2 * time.Millisecond
)

func (l seam) NewTranslator(cfg primitive.Config) (primitive.Translator, error) {
	n := cfg.PostcardCache
	if n == 0 {
		n = defaultCache
	}
	cache, err := NewCache(l.Layout, n)
	if err != nil {
		return nil, err
	}
	linger := cfg.PostcardLinger
	if linger == 0 {
		linger = defaultLinger
	}
	pc := cache.Codec()
	return &translator{
		cache: cache, pc: pc, hops: pc.Layout().Hops, vals: l.vals,
		at: make([]int64, n), linger: int64(linger),
		chunks: make([]Chunk, 0, 2), w: make([]Write, 0, MaxCopies*(MaxHops+1)/2),
	}, nil
}

// translator caches postcards until their flow's chunk is complete, or
// has waited its linger, and holds each wide postcard under its cache
// entry until a chunk with its hop is written (docs/DTA-WIRE.md, "Exactly
// once").
type translator struct {
	cache *Cache
	pc    *Codec
	hops  int
	vals  ValueSet // the values the collector holds: others are rejected
	// at holds, per cache entry, when its flow's first hop not yet written
	// came (0: none waiting); every linger/2, Tick writes the flows waiting
	// longer than linger. scan is when it last looked.
	at     []int64
	scan   int64
	linger int64

	chunks []Chunk
	w      []Write
}

func (t *translator) MaxWrite() int          { return t.pc.Layout().ChunkSize() }
func (t *translator) Held() (slots, per int) { return len(t.at), t.hops }

// Translate adds the postcard to the cache and writes the chunks that
// makes ready. A chunk written before its flow completes skips the slots
// of hops not cached (Chunk.Skip), so the write that settles a hop never
// blanks one settled before.
func (t *translator) Translate(s primitive.Sink, r *dta.Report, copy int) primitive.Outcome {
	p := &r.Postcard
	slot := t.cache.Slot(p.Key)
	// The entry's chunk, perhaps in runs of slots, and p's flow's.
	if !s.Room(t.cache.PendingWrites(slot) + t.pc.Layout().Copies) {
		return primitive.Busy
	}
	if copy >= 0 {
		return primitive.Rejected
	}
	if !t.vals.Contains(p.Value) {
		// The collector's queries would never find the path.
		s.Count(primitive.OutsideValues)
		return primitive.Rejected
	}
	// A postcard that is not Settling is not held: Hold is not called.
	track := s.Settling()
	chunks := t.chunks[:0]
	if track && s.Held(slot) == t.hops {
		// Its flow had more postcards than hops (a hop came twice): the
		// chunk is written now, to settle them.
		t.write(s, slot, t.cache.Emit(chunks, slot))
	}
	chunks, err := t.cache.Insert(chunks, p.Key, Hop(p.Hop), PathLength(p.PathLength), Value(p.Value))
	if err != nil {
		return primitive.Rejected
	}
	// An evicted flow's chunk comes first and settles the entry's
	// postcards until now; p's own flow's chunk, if complete, comes last.
	own := false
	for i := range chunks {
		if chunks[i].Key == p.Key {
			own = true
			if track {
				s.Hold(slot)
			}
		}
		t.write(s, slot, chunks[i:i+1])
	}
	if !own {
		if track {
			s.Hold(slot)
		}
		if t.at[slot] == 0 { // the flow starts waiting
			t.at[slot] = max(s.Now(), 1)
		}
	}
	return primitive.Applied
}

// write writes chunks, which come from cache entry slot, and releases the
// entry's held postcards to be settled by the last write.
func (t *translator) write(s primitive.Sink, slot int, chunks []Chunk) {
	for i := range chunks {
		// The copies of a whole chunk are equal after their VA; the runs
		// of a chunk that skips slots are not.
		s.ShareTail(chunks[i].Skip == 0)
		if chunks[i].Skip != 0 {
			s.Count(primitive.PartialChunks)
		}
		for _, w := range t.pc.AppendWrites(t.w[:0], &chunks[i]) {
			s.Write(w.Offset, w.Data, false, 0)
		}
		s.ShareTail(false)
		t.at[slot] = 0
		s.Release(slot)
	}
}

// Tick writes the flows that have waited linger since their first hop not
// yet written, so that their postcards are settled soon; a flow that gets
// a hop later is written again whole. It looks every linger/2, over every
// entry.
func (t *translator) Tick(s primitive.Sink, now int64) {
	if now-t.scan < t.linger/2 {
		return
	}
	t.scan = now
	for slot, at := range t.at {
		if at == 0 || now-at < t.linger {
			continue
		}
		if !s.FlushRoom(t.cache.PendingWrites(slot)) {
			return // no room now: the next look
		}
		t.write(s, slot, t.cache.Emit(t.chunks[:0], slot))
		t.at[slot] = 0
		s.Count(primitive.Lingered)
	}
}

// Flush writes every cached flow's chunk; one that does not fit is lost,
// its postcards settled as unconfirmed.
func (t *translator) Flush(s primitive.Sink) {
	chunks := t.cache.Flush(nil)
	for i := range chunks {
		slot := t.cache.Slot(chunks[i].Key)
		if !s.FlushRoom(t.pc.Writes(&chunks[i])) {
			s.Count(primitive.FlushLost)
			s.Lose(slot)
			continue
		}
		t.write(s, slot, chunks[i:i+1])
	}
	clear(t.at)
}

func (l seam) NewStore(mem []byte) (primitive.Store, error) {
	s, err := NewStore(l.Layout, mem)
	if err != nil {
		return nil, err
	}
	return &store{Store: s, vals: l.vals, tab: new(lazyTable)}, nil
}

// maxTableValues bounds the universe a store expands its advertised value
// set into, to decode paths.
const maxTableValues = 1 << 20

// store is a Store as a primitive.Store; its Table comes from the
// advertised value set, built by the first query and shared with its
// snapshots (the daemon's queries run concurrently).
type store struct {
	*Store
	vals ValueSet
	tab  *lazyTable
}

// lazyTable is a Table built once, on first use.
type lazyTable struct {
	once sync.Once
	t    *Table
	err  error
}

func (s *store) Layout() primitive.Layout { return seam{s.Store.Layout(), s.vals} }

func (s *store) Write(off uint64, data []byte, _ bool, _ uint32) error {
	return s.Apply(Write{Offset: off, Data: data})
}

func (*store) FetchAdd(uint64, uint64) (uint64, error) { return 0, primitive.ErrUnsupported }

func (s *store) Snapshot(mem []byte) (primitive.Store, error) {
	dst, err := NewStore(s.Store.Layout(), mem)
	if err == nil {
		err = s.Store.Snapshot(dst)
	}
	if err != nil {
		return nil, err
	}
	return &store{Store: dst, vals: s.vals, tab: s.tab}, nil
}

// table returns the Table of the store's value set, built on first use.
func (s *store) table() (*Table, error) {
	s.tab.once.Do(func() { s.tab.t, s.tab.err = s.newTable() })
	return s.tab.t, s.tab.err
}

func (s *store) newTable() (*Table, error) {
	if s.vals.IsAll() {
		return nil, fmt.Errorf("postcard: query: %w: the geometry names no value set to decode paths with", primitive.ErrUnsupported)
	}
	var vs []uint32
	for _, r := range s.vals.Ranges() {
		if len(vs)+int(r.Hi-r.Lo)+1 > maxTableValues {
			return nil, fmt.Errorf("postcard: query: %w: more than %d values", primitive.ErrUnsupported, maxTableValues)
		}
		for v := r.Lo; ; v++ {
			vs = append(vs, v)
			if v == r.Hi {
				break
			}
		}
	}
	return NewTable(s.Store.Layout(), vs)
}

// answer is a flow's answer to a query: its path's values when found.
type answer struct {
	Key    uint32   `json:"key"`
	Status string   `json:"status"`
	Path   []uint32 `json:"path"`
}

func verdict(o Outcome) string {
	switch o {
	case Found:
		return "found"
	case Conflict:
		return "conflict"
	}
	return "not found"
}

func (s *store) Query(q primitive.Query) ([]any, error) {
	t, err := s.table()
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(q.Keys))
	for _, k := range q.Keys {
		p, o := s.Store.Query(t, k)
		a := answer{Key: k, Status: verdict(o), Path: []uint32{}}
		if o == Found {
			a.Path = p.Values()
		}
		out = append(out, a)
	}
	return out, nil
}

var columns = []primitive.Column{
	{Name: "key", Type: primitive.Uint32},
	{Name: "hop", Type: primitive.Int32},
	{Name: "value", Type: primitive.NullUint32}, // nil unless found
	{Name: "verdict", Type: primitive.String},
}

func (*store) Columns() []primitive.Column { return columns }

// Rows passes one row per hop of each flow of q.Keys whose path decodes,
// and one row with hop 0 for a flow whose path does not.
func (s *store) Rows(q primitive.Query, fn func(row []any) error) error {
	if q.Keys == nil {
		return fmt.Errorf("postcard: rows: %w: a postcard store lists no flows, name them", primitive.ErrUnsupported)
	}
	t, err := s.table()
	if err != nil {
		return err
	}
	row := make([]any, len(columns))
	for _, k := range q.Keys {
		p, o := s.Store.Query(t, k)
		if o != Found {
			row[0], row[1], row[2], row[3] = k, int32(0), nil, verdict(o)
			if err := fn(row); err != nil {
				return err
			}
			continue
		}
		for i, v := range p.Values() {
			row[0], row[1], row[2], row[3] = k, int32(i+1), v, verdict(o)
			if err := fn(row); err != nil {
				return err
			}
		}
	}
	return nil
}
