package appendlist_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/primitive/primitivetest"
)

func ap(list uint32, v uint32) *dta.Report {
	return &dta.Report{Header: dta.Header{Opcode: dta.OpAppend}, Append: dta.Append{ListID: list, Data: binary.BigEndian.AppendUint32(nil, v)}}
}

// TestPrimitive runs Append through the seam: entries are held under
// their list until their batch is written (then settled), a partial batch
// is written by Tick after its linger and by Flush, the Store reads the
// entries back in order (consuming them unless peeking), and the heads a
// collector sends set where lists resume.
func TestPrimitive(t *testing.T) {
	k, ok := primitive.Lookup(dta.OpAppend)
	if kn, _ := primitive.ByName("append"); !ok || kn != k || !k.Stateful() {
		t.Fatalf("Lookup(append) = %v, %v", k, ok)
	}
	l := appendlist.Layout{Lists: 4, Entries: 16, EntrySize: 4, Batch: 4}
	geo, _ := l.AppendBinary(nil)
	pl, err := k.ParseLayout(geo)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := pl.AppendBinary(nil); !bytes.Equal(b, geo) || pl.Atomic() {
		t.Errorf("geometry % x, want % x", b, geo)
	}
	tr, _ := pl.NewTranslator(primitive.Config{AppendLinger: 100, MTU: 1024})
	if slots, per := tr.Held(); slots != 4 || per != 4 {
		t.Errorf("Held() = %d, %d; want 4 lists of 4", slots, per)
	}
	st, _ := pl.NewStore(make([]byte, pl.RegionSize()))
	s := &primitivetest.Sink{Store: st, Tracking: true, Time: 1}
	for i := range uint32(4) {
		if o := tr.Translate(s, ap(1, 100+i), -1); o != primitive.Applied {
			t.Fatalf("entry %d: %v", i, o)
		}
	}
	if s.Writes != 1 || s.Settled != 4 || s.Holding() != 0 || s.Err != nil {
		t.Fatalf("a full batch: %d writes, %d settled, %d held (%v); want 1, 4, 0", s.Writes, s.Settled, s.Holding(), s.Err)
	}
	checkLinger(t, tr, s)
	checkStore(t, st)
	checkResume(t, tr, s, st)
	s.Tracking = false
	r := ap(2, 1)
	if n := testing.AllocsPerRun(100, func() { tr.Translate(s, r, -1) }); n != 0 {
		t.Errorf("Translate: %v allocations", n)
	}
}

// checkLinger: a partial batch is written by Tick after its linger, and
// by Flush.
func checkLinger(t *testing.T, tr primitive.Translator, s *primitivetest.Sink) {
	t.Helper()
	tr.Translate(s, ap(2, 7), -1)
	tr.Tick(s, 50)
	if s.Writes != 1 || s.Holding() != 1 {
		t.Errorf("before the linger: %d writes, %d held", s.Writes, s.Holding())
	}
	tr.Tick(s, 101)
	if s.Writes != 2 || s.Settled != 5 || s.Counts[primitive.Lingered] != 1 {
		t.Errorf("after the linger: %d writes, %d settled, counts %v", s.Writes, s.Settled, s.Counts)
	}
	tr.Translate(s, ap(3, 8), -1)
	tr.Flush(s)
	if s.Writes != 3 || s.Settled != 6 {
		t.Errorf("Flush: %d writes, %d settled; want 3, 6", s.Writes, s.Settled)
	}
}

// checkStore: the Store peeks list 1's entries, Rows consumes every
// list's in order, and a snapshot is refused.
func checkStore(t *testing.T, st primitive.Store) {
	t.Helper()
	ans, err := st.Query(primitive.Query{Params: map[string]string{"list": "1", "peek": "true"}})
	if err != nil || len(ans) != 4 {
		t.Fatalf("Query (peek) list 1: %v, %v", ans, err)
	}
	if j, _ := json.Marshal(ans[0]); string(j) != `{"list":1,"status":"found","entry":"00000064"}` {
		t.Errorf("first entry: %s", j)
	}
	var got []uint32
	if err := st.Rows(primitive.Query{}, func(row []any) error {
		got = append(got, row[0].(uint32), binary.BigEndian.Uint32(row[1].([]byte)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []uint32{1, 100, 1, 101, 1, 102, 1, 103, 2, 7, 3, 8}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rows %v, want %v", got, want)
		}
	}
	if ans, err := st.Query(primitive.Query{Params: map[string]string{"list": "1"}}); err != nil || len(ans) != 0 {
		t.Errorf("list 1 after Rows consumed it: %v, %v", ans, err)
	}
	if _, err := st.Query(primitive.Query{Params: map[string]string{"list": "4"}}); err == nil {
		t.Error("list 4 of 4 accepted")
	}

	if _, err := st.Snapshot(make([]byte, len(st.Region()))); !errors.Is(err, primitive.ErrUnsupported) {
		t.Errorf("Snapshot of an Append store: %v, want ErrUnsupported", err)
	}
}

// checkResume: the heads a collector sends set where lists resume.
func checkResume(t *testing.T, tr primitive.Translator, s *primitivetest.Sink, st primitive.Store) {
	t.Helper()
	rs, ok := tr.(primitive.Resumer)
	if !ok || rs.Heads() != 4 {
		t.Fatalf("Append's translator is not a Resumer of 4 heads")
	}
	if err := rs.SetHead(0, 8); err != nil {
		t.Fatal(err)
	}
	w := s.Writes
	for i := range uint32(4) {
		tr.Translate(s, ap(0, i+1), -1)
	}
	// The batch lands at entry 8 of list 0.
	if s.Writes != w+1 || !bytes.Equal(st.Region()[8*4:9*4], []byte{0, 0, 0, 1}) {
		t.Errorf("after SetHead(0, 8): entry 8 holds % x", st.Region()[8*4:9*4])
	}
}
