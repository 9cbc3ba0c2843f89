package appendlist

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

func init() { primitive.Register(kind{}) }

// kind is Append as a primitive.Kind.
type kind struct{}

func (kind) Opcode() dta.Opcode       { return dta.OpAppend }
func (kind) Name() string             { return dta.OpAppend.String() }
func (kind) Key(r *dta.Report) uint32 { return r.Append.ListID }
func (kind) Stateful() bool           { return true } // a list's batch is in one translator
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

// LayoutOf returns the Layout behind l, a primitive.Layout of an Append
// geometry (primitive.Parse's), for its typed API.
func LayoutOf(l primitive.Layout) (Layout, bool) {
	sl, ok := l.(seam)
	return sl.Layout, ok
}

// Defaults when primitive.Config leaves them 0.
const (
	defaultLinger = 2 * time.Millisecond
	defaultMTU    = 1024
)

func (l seam) NewTranslator(cfg primitive.Config) (primitive.Translator, error) {
	b, err := NewBatcher(l.Layout)
	if err != nil {
		return nil, err
	}
	mtu, linger := cfg.MTU, cfg.AppendLinger
	if mtu <= 0 {
		mtu = defaultMTU
	}
	if linger == 0 {
		linger = defaultLinger
	}
	t := &translator{l: l.Layout, b: b, linger: int64(linger), w: make([]Write, 0, 2)}
	t.l.Batch = max(t.l.Batch, 1) // 0 means 1
	// A batch crossing the ring's end is two writes.
	t.maxPkt = (t.l.Batch*t.l.SlotSize()+mtu-1)/mtu + 1
	return t, nil
}

// translator batches each list's entries, B to a write, and holds each
// wide entry under its list until its batch is written.
type translator struct {
	l      Layout
	b      *Batcher
	maxPkt int // packets one append can produce
	// wait lists, oldest first, when lists got their first pending entry:
	// Tick flushes a batch waiting longer than linger.
	wait   []lingering
	linger int64
	w      []Write
}

type lingering struct {
	list uint32
	at   int64
}

func (t *translator) MaxWrite() int          { return t.l.Batch * t.l.SlotSize() }
func (t *translator) Held() (slots, per int) { return t.l.Lists, t.l.Batch }

// Heads and SetHead take where the collector's lists stood (dta.ListHeads).
func (t *translator) Heads() int                          { return t.l.Lists }
func (t *translator) SetHead(list uint32, h uint64) error { return t.b.SetHead(list, h) }

func (t *translator) Translate(s primitive.Sink, r *dta.Report, copy int) primitive.Outcome {
	if !s.Room(t.maxPkt) {
		return primitive.Busy
	}
	if copy >= 0 {
		return primitive.Rejected
	}
	list := r.Append.ListID
	k := t.b.Pending(list)
	ws, err := t.b.AppendWrites(t.w[:0], list, r.Append.Data, r.Header.Immediate)
	if err != nil {
		return primitive.Rejected
	}
	s.Hold(int(list))
	if len(ws) == 0 {
		if k == 0 {
			t.wait = append(t.wait, lingering{list: list, at: s.Now()})
		}
		return primitive.Applied
	}
	for _, w := range ws {
		s.Write(w.Offset, w.Data, w.Imm, w.ImmData)
	}
	s.Release(int(list))
	return primitive.Applied
}

// flush writes list's pending entries, whatever the rate limit; false
// when the sink has no room.
func (t *translator) flush(s primitive.Sink, list uint32) bool {
	if t.b.Pending(list) == 0 {
		return true
	}
	if !s.FlushRoom(t.maxPkt) {
		return false
	}
	ws, err := t.b.Flush(t.w[:0], list)
	if err != nil {
		return false
	}
	for _, w := range ws {
		s.Write(w.Offset, w.Data, w.Imm, w.ImmData)
	}
	s.Release(int(list))
	return true
}

// Tick writes the batches that have waited linger since their first
// entry, so that their entries are settled soon.
func (t *translator) Tick(s primitive.Sink, now int64) {
	i := 0
	for ; i < len(t.wait) && now-t.wait[i].at >= t.linger; i++ {
		// A list whose batch filled since is not waiting any more.
		n := t.b.Pending(t.wait[i].list)
		if !t.flush(s, t.wait[i].list) {
			break // no room now: the next tick
		}
		if n > 0 {
			s.Count(primitive.Lingered)
		}
	}
	if i > 0 {
		n := copy(t.wait, t.wait[i:])
		clear(t.wait[n:])
		t.wait = t.wait[:n]
	}
}

// Flush writes every list's partial batch; one that does not fit is
// counted in FlushLost.
func (t *translator) Flush(s primitive.Sink) {
	for l := range t.l.Lists {
		if !t.flush(s, uint32(l)) {
			s.Count(primitive.FlushLost)
		}
	}
	clear(t.wait)
	t.wait = t.wait[:0]
}

func (l seam) NewStore(mem []byte) (primitive.Store, error) {
	s, err := NewStore(l.Layout, mem)
	if err != nil {
		return nil, err
	}
	return &store{Store: s, readers: make(map[uint32]*Reader)}, nil
}

// store is a Store as a primitive.Store: it reads each list with one
// Reader, so that a query consumes what it returns.
type store struct {
	*Store
	mu      sync.Mutex // guards readers and their reads
	readers map[uint32]*Reader
}

func (s *store) Layout() primitive.Layout { return seam{s.Store.Layout()} }

func (s *store) Write(off uint64, data []byte, imm bool, immData uint32) error {
	return s.Apply(Write{Offset: off, Data: data, Imm: imm, ImmData: immData})
}

func (*store) FetchAdd(uint64, uint64) (uint64, error) { return 0, primitive.ErrUnsupported }

var errSnapshot = fmt.Errorf("appendlist: snapshot: %w: lists are exported by reading them (Rows)", primitive.ErrUnsupported)

func (*store) Snapshot([]byte) (primitive.Store, error) { return nil, errSnapshot }

// answer is one entry of a list.
type answer struct {
	List   uint32 `json:"list"`
	Status string `json:"status"`
	Entry  string `json:"entry"` // hex
}

// Query returns the next entries of list q.Params["list"], consuming them
// unless q.Params["peek"] is "true". A lapped list's loss is an error
// matching ErrLapped, after the entries before it.
func (s *store) Query(q primitive.Query) ([]any, error) {
	list, err := strconv.ParseUint(q.Params["list"], 0, 32)
	if err != nil || list >= uint64(s.Store.Layout().Lists) {
		return nil, fmt.Errorf("appendlist: query: %w: list %q of %d", primitive.ErrUnsupported, q.Params["list"], s.Store.Layout().Lists)
	}
	var out []any
	err = s.read(uint32(list), q.Params["peek"] == "true", func(e []byte) error {
		out = append(out, answer{List: uint32(list), Status: "found", Entry: hex.EncodeToString(e)})
		return nil
	})
	return out, err
}

// read passes list's next entries to fn.
func (s *store) read(list uint32, peek bool, fn func(entry []byte) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.readers[list]
	if rd == nil {
		var err error
		if rd, err = s.Reader(list); err != nil {
			return err
		}
		s.readers[list] = rd
	}
	size := s.Store.Layout().EntrySize
	buf := make([]byte, 64*size)
	for {
		var n int
		var err error
		if peek {
			n, err = rd.Peek(buf)
		} else {
			n, err = rd.Read(buf)
		}
		for i := range n {
			if err := fn(buf[i*size : (i+1)*size]); err != nil {
				return err
			}
		}
		if err != nil || n == 0 || peek {
			return err
		}
	}
}

var columns = []primitive.Column{
	{Name: "list", Type: primitive.Uint32},
	{Name: "entry", Type: primitive.Bytes},
}

func (*store) Columns() []primitive.Column { return columns }

// Rows consumes and passes the entries of every list (of q.Params["list"]
// alone when set); a lapped list stops it with an error matching
// ErrLapped, after the entries before the loss.
func (s *store) Rows(q primitive.Query, fn func(row []any) error) error {
	first, last := uint32(0), uint32(s.Store.Layout().Lists-1)
	if v, ok := q.Params["list"]; ok {
		l, err := strconv.ParseUint(v, 0, 32)
		if err != nil || l > uint64(last) {
			return fmt.Errorf("appendlist: rows: %w: list %q", primitive.ErrUnsupported, v)
		}
		first, last = uint32(l), uint32(l)
	}
	row := make([]any, len(columns))
	for l := first; l <= last; l++ {
		err := s.read(l, false, func(e []byte) error {
			row[0], row[1] = l, e
			return fn(row)
		})
		if err != nil {
			return err // ErrLapped too: entries were lost
		}
	}
	return nil
}
