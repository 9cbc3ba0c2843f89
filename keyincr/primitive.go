package keyincr

import (
	"fmt"
	"math"
	"strconv"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

func init() { primitive.Register(kind{}) }

// kind is Key-Increment as a primitive.Kind.
type kind struct{}

func (kind) Opcode() dta.Opcode       { return dta.OpKeyIncrement }
func (kind) Name() string             { return dta.OpKeyIncrement.String() }
func (kind) Key(r *dta.Report) uint32 { return r.KeyIncrement.Key }
func (kind) Stateful() bool           { return false }
func (kind) ParseLayout(b []byte) (primitive.Layout, error) {
	l, err := ParseLayout(b)
	if err != nil {
		return nil, err
	}
	return seam{l}, nil
}

// seam is a Layout as a primitive.Layout.
type seam struct{ Layout }

func (seam) Kind() primitive.Kind { return kind{} }
func (seam) Atomic() bool         { return true }

// LayoutOf returns the Layout behind l, a primitive.Layout of a Key-Increment
// geometry (primitive.Parse's), for its typed API.
func LayoutOf(l primitive.Layout) (Layout, bool) {
	sl, ok := l.(seam)
	return sl.Layout, ok
}

func (l seam) NewTranslator(primitive.Config) (primitive.Translator, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &translator{l: l.Layout, ops: make([]Write, 0, MaxRedundancy)}, nil
}

func (l seam) NewStore(mem []byte) (primitive.Store, error) {
	s, err := NewStore(l.Layout, mem)
	if err != nil {
		return nil, err
	}
	return store{s}, nil
}

// translator adds each report's counter to its copies' counters with
// FETCH_ADDs: it holds nothing back.
type translator struct {
	l   Layout
	ops []Write
}

func (t *translator) Translate(s primitive.Sink, r *dta.Report, copy int) primitive.Outcome {
	ki := &r.KeyIncrement
	if copy >= 0 {
		return primitive.Rejected
	}
	if !s.Room(int(ki.Redundancy)) {
		return primitive.Busy
	}
	ops, err := t.l.AppendWrites(t.ops[:0], ki.Key, ki.Counter, int(ki.Redundancy))
	if err != nil {
		return primitive.Rejected
	}
	s.ShareTail(true)
	for _, op := range ops {
		s.FetchAdd(op.Offset, op.Add)
	}
	s.ShareTail(false)
	s.Settle()
	return primitive.Applied
}

func (*translator) Tick(primitive.Sink, int64) {}
func (*translator) Flush(primitive.Sink)       {}
func (*translator) MaxWrite() int              { return 0 }
func (*translator) Held() (int, int)           { return 0, 0 }

// store is a Store as a primitive.Store.
type store struct{ *Store }

func (s store) Layout() primitive.Layout { return seam{s.Store.Layout()} }

func (store) Write(uint64, []byte, bool, uint32) error { return primitive.ErrUnsupported }

func (s store) FetchAdd(off, add uint64) (uint64, error) {
	return s.Apply(Write{Offset: off, Add: add})
}

func (s store) Snapshot(mem []byte) (primitive.Store, error) {
	dst, err := NewStore(s.Store.Layout(), mem)
	if err == nil {
		err = s.Store.Snapshot(dst)
	}
	if err != nil {
		return nil, err
	}
	return store{dst}, nil
}

var errNoKeys = fmt.Errorf("keyincr: rows: %w: a count-min sketch lists no keys, name them", primitive.ErrUnsupported)

// answer is a key's answer to a query: the count-min estimate from its
// first N counters; found when above zero.
type answer struct {
	Key    uint32 `json:"key"`
	Status string `json:"status"`
	Count  uint64 `json:"count"`
}

func (s store) Query(q primitive.Query) ([]any, error) {
	out := make([]any, 0, len(q.Keys))
	for _, k := range q.Keys {
		v, err := s.Store.Query(k, q.N)
		if err != nil {
			return out, err
		}
		a := answer{Key: k, Status: "not found", Count: v}
		if v > 0 {
			a.Status = "found"
		}
		out = append(out, a)
	}
	return out, nil
}

var columns = []primitive.Column{
	{Name: "key", Type: primitive.Uint32},
	{Name: "estimate", Type: primitive.Uint64},
	{Name: "error_bound", Type: primitive.Uint64},
}

func (store) Columns() []primitive.Column { return columns }

// bound returns the epoch's total (the counters' sum over n) and the
// error bound ⌈ε·total⌉ of an estimate from n counters, exceeded with
// probability at most q.Params[primitive.ParamDelta] (default 0.01).
func (s store) bound(q primitive.Query) (total, bound uint64, delta float64, err error) {
	delta = 0.01
	if d, ok := q.Params[primitive.ParamDelta]; ok {
		delta, err = strconv.ParseFloat(d, 64)
	}
	if err != nil || !(delta > 0 && delta < 1) {
		return 0, 0, 0, fmt.Errorf("keyincr: rows: %w: delta %q, want a number in (0, 1)", primitive.ErrUnsupported, q.Params[primitive.ParamDelta])
	}
	if q.N < 1 || q.N > MaxRedundancy {
		return 0, 0, 0, fmt.Errorf("keyincr: rows: %w: %d", ErrRedundancy, q.N)
	}
	total = s.Store.Total() / uint64(q.N)
	return total, uint64(math.Ceil(Epsilon(s.Store.Layout().Slots, q.N, delta) * float64(total))), delta, nil
}

// Annotate names the redundancy, the delta and the epoch's total of the
// rows' error bounds.
func (s store) Annotate(q primitive.Query) (map[string]string, error) {
	total, _, delta, err := s.bound(q)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"dtakit.redundancy": strconv.Itoa(q.N),
		"dtakit.delta":      strconv.FormatFloat(delta, 'g', -1, 64),
		"dtakit.total":      strconv.FormatUint(total, 10),
	}, nil
}

// Rows passes each key of q.Keys with its estimate from its first q.N
// counters and the estimates' error bound; a count-min sketch cannot list
// its keys, so Keys is required.
func (s store) Rows(q primitive.Query, fn func(row []any) error) error {
	if q.Keys == nil {
		return errNoKeys
	}
	_, bound, _, err := s.bound(q)
	if err != nil {
		return err
	}
	row := make([]any, len(columns))
	for _, k := range q.Keys {
		v, err := s.Store.Query(k, q.N)
		if err != nil {
			return err
		}
		row[0], row[1], row[2] = k, v, bound
		if err := fn(row); err != nil {
			return err
		}
	}
	return nil
}
