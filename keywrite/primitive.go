package keywrite

import (
	"encoding/hex"
	"strconv"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

func init() { primitive.Register(kind{}) }

// kind is Key-Write as a primitive.Kind.
type kind struct{}

func (kind) Opcode() dta.Opcode       { return dta.OpKeyWrite }
func (kind) Name() string             { return dta.OpKeyWrite.String() }
func (kind) Key(r *dta.Report) uint32 { return r.KeyWrite.Key }
func (kind) Stateful() bool           { return false }
func (kind) OneCopy()                 {}
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
func (seam) Atomic() bool         { return false }

// LayoutOf returns the Layout behind l, a primitive.Layout of a Key-Write
// geometry (primitive.Parse's), for its typed API.
func LayoutOf(l primitive.Layout) (Layout, bool) {
	sl, ok := l.(seam)
	return sl.Layout, ok
}

func (l seam) NewTranslator(primitive.Config) (primitive.Translator, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &translator{l: l.Layout, ops: make([]Write, 0, MaxRedundancy), buf: make([]byte, 0, 2*l.PayloadSize())}, nil
}

func (l seam) NewStore(mem []byte) (primitive.Store, error) {
	s, err := NewStore(l.Layout, mem)
	if err != nil {
		return nil, err
	}
	return store{s}, nil
}

// translator writes each report's copies: it holds nothing back.
type translator struct {
	l   Layout
	ops []Write
	buf []byte // the payload the writes share
}

func (t *translator) Translate(s primitive.Sink, r *dta.Report, copy int) primitive.Outcome {
	kw := &r.KeyWrite
	n := int(kw.Redundancy)
	var err error
	if copy < 0 {
		if !s.Room(n) {
			return primitive.Busy
		}
		t.ops, t.buf, err = t.l.AppendWrites(t.ops[:0], t.buf[:0], kw.Key, kw.Data, n)
	} else {
		if !s.Room(1) {
			return primitive.Busy
		}
		t.ops, t.buf, err = t.l.AppendCopy(t.ops[:0], t.buf[:0], kw.Key, kw.Data, n, copy)
	}
	if err != nil {
		return primitive.Rejected
	}
	s.ShareTail(true)
	for _, w := range t.ops {
		s.Write(w.Offset, w.Data, false, 0)
	}
	s.ShareTail(false)
	s.Settle()
	return primitive.Applied
}

func (*translator) Tick(primitive.Sink, int64) {}
func (*translator) Flush(primitive.Sink)       {}
func (t *translator) MaxWrite() int            { return t.l.PayloadSize() }
func (*translator) Held() (int, int)           { return 0, 0 }

// store is a Store as a primitive.Store.
type store struct{ *Store }

func (s store) Layout() primitive.Layout { return seam{s.Store.Layout()} }

func (s store) Write(off uint64, data []byte, _ bool, _ uint32) error {
	return s.Apply(Write{Offset: off, Data: data})
}

func (store) FetchAdd(uint64, uint64) (uint64, error) { return 0, primitive.ErrUnsupported }

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

// answer is a key's answer to a query: the key, the verdict, the value
// (hex, "" unless found) and the copies that hold it.
type answer struct {
	Key    uint32 `json:"key"`
	Status string `json:"status"`
	Data   string `json:"data"`
	Votes  uint8  `json:"votes"`
}

// Query answers each key from its first q.N copies by plurality.
func (s store) Query(q primitive.Query) ([]any, error) {
	out := make([]any, 0, len(q.Keys))
	for _, k := range q.Keys {
		res, err := s.Store.Query(k, q.N, Plurality)
		if err != nil {
			return out, err
		}
		a := answer{Key: k, Status: res.Status.Verdict(), Votes: res.Votes}
		if res.Status == Found {
			a.Data = hex.EncodeToString(res.Data)
		}
		out = append(out, a)
	}
	return out, nil
}

var columns = []primitive.Column{
	{Name: "key", Type: primitive.Uint32},
	{Name: "value", Type: primitive.Bytes}, // nil unless found
	{Name: "copies", Type: primitive.Int32},
	{Name: "matches", Type: primitive.Int32},
	{Name: "verdict", Type: primitive.String},
}

func (store) Columns() []primitive.Column { return columns }

// Annotate names the redundancy of the rows and where their keys came from.
func (store) Annotate(q primitive.Query) (map[string]string, error) {
	keys := "given"
	if q.Keys == nil {
		keys = "scanned"
	}
	return map[string]string{"dtakit.redundancy": strconv.Itoa(q.N), "dtakit.keys": keys}, nil
}

// Rows passes each key's answer from its first q.N copies; with no keys,
// every key a copy of which verifies (Scan).
func (s store) Rows(q primitive.Query, fn func(row []any) error) error {
	row := make([]any, len(columns))
	emit := func(keys []uint32) error {
		for _, k := range keys {
			res, err := s.Store.Query(k, q.N, Plurality)
			if err != nil {
				return err
			}
			row[0], row[1], row[2], row[3], row[4] = k, []byte(nil), int32(0), int32(res.Matches), res.Status.Verdict()
			if res.Status == Found {
				row[1], row[2] = res.Data, int32(res.Votes)
			}
			if err := fn(row); err != nil {
				return err
			}
		}
		return nil
	}
	if q.Keys != nil {
		return emit(q.Keys)
	}
	buf := make([]uint32, 1024)
	for from := uint64(0); from < s.Store.Layout().Slots; {
		c, next, err := s.Scan(from, q.N, buf)
		if err != nil {
			return err
		}
		if err := emit(buf[:c]); err != nil {
			return err
		}
		from = next
	}
	return nil
}
