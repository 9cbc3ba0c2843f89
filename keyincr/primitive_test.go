package keyincr_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/primitive/primitivetest"
)

// TestPrimitive runs Key-Increment through the seam: its Translator's
// FETCH_ADDs applied to its Store give the counters Store.Add gives, each
// report settled by its own operations; the Store answers queries and
// rows of named keys; translating allocates nothing.
func TestPrimitive(t *testing.T) {
	k, ok := primitive.Lookup(dta.OpKeyIncrement)
	if kn, _ := primitive.ByName("keyincrement"); !ok || kn != k || k.Stateful() {
		t.Fatalf("Lookup(keyincrement) = %v, %v", k, ok)
	}
	if _, ok := k.(primitive.OneCopy); ok {
		t.Error("Key-Increment claims to choose copies")
	}
	l := keyincr.Layout{Slots: 1 << 10}
	geo, _ := l.AppendBinary(nil)
	pl, err := k.ParseLayout(geo)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := pl.AppendBinary(nil); !bytes.Equal(b, geo) || pl.RegionSize() != l.RegionSize() || !pl.Atomic() {
		t.Errorf("layout %v: geometry % x, want % x", pl, b, geo)
	}
	tr, _ := pl.NewTranslator(primitive.Config{})
	if tr.MaxWrite() != 0 {
		t.Errorf("MaxWrite %d: want 0, FETCH_ADDs only", tr.MaxWrite())
	}
	mem := make([]byte, l.RegionSize())
	st, _ := pl.NewStore(mem)
	ref, _ := keyincr.NewStore(l, nil)
	s := &primitivetest.Sink{Store: st, Tracking: true}
	for i := range uint32(100) {
		r := dta.Report{Header: dta.Header{Opcode: dta.OpKeyIncrement}, KeyIncrement: dta.KeyIncrement{Redundancy: 2, Key: i % 10, Counter: uint64(i)}}
		if o := tr.Translate(s, &r, -1); o != primitive.Applied {
			t.Fatalf("report %d: %v", i, o)
		}
		_ = ref.Add(i%10, uint64(i), 2)
	}
	if !bytes.Equal(mem, ref.Region()) || s.Err != nil || s.FetchAdds != 200 || s.Settled != 100 {
		t.Fatalf("region differs from Add's (%v), %d FETCH_ADDs, %d settled", s.Err, s.FetchAdds, s.Settled)
	}
	checkStore(t, st, mem)
	checkRefusals(t, tr, s)
}

// checkStore checks the Store's answers to queries and rows, and that its
// snapshot takes the counts, leaving the region at zero.
func checkStore(t *testing.T, st primitive.Store, mem []byte) {
	t.Helper()
	ans, err := st.Query(primitive.Query{Keys: []uint32{3, 99}, N: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Key 3: 3+13+...+93 = 480, unless a collision adds to both copies.
	if j, _ := json.Marshal(ans); string(j) != `[{"key":3,"status":"found","count":480},{"key":99,"status":"not found","count":0}]` {
		t.Errorf("Query: %s", j)
	}
	var got []any
	if err := st.Rows(primitive.Query{Keys: []uint32{3}, N: 2}, func(row []any) error { got = append(got, row...); return nil }); err != nil || len(got) != 3 || got[1] != uint64(480) || got[2] == uint64(0) {
		t.Errorf("Rows: %v, %v", got, err)
	}
	if err := st.Rows(primitive.Query{N: 2}, func([]any) error { return nil }); err == nil {
		t.Error("Rows without keys: a count-min sketch cannot list them, want an error")
	}
	snap, err := st.Snapshot(make([]byte, len(mem)))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := snap.Query(primitive.Query{Keys: []uint32{3}, N: 2}); len(a) != 1 || a[0] != ans[0] {
		t.Errorf("the snapshot answers %v, want %v", a, ans[0])
	}
	if a, _ := st.Query(primitive.Query{Keys: []uint32{3}, N: 2}); len(a) != 1 || a[0] == ans[0] || !bytes.Equal(mem, make([]byte, len(mem))) {
		t.Errorf("after Snapshot the region answers %v: want it counting again from zero", a)
	}
}

// checkRefusals: redundancy 0 is rejected, a full sink is busy, and
// translating allocates nothing.
func checkRefusals(t *testing.T, tr primitive.Translator, s *primitivetest.Sink) {
	t.Helper()
	bad := dta.Report{Header: dta.Header{Opcode: dta.OpKeyIncrement}, KeyIncrement: dta.KeyIncrement{Redundancy: 0, Key: 1, Counter: 1}}
	if o := tr.Translate(s, &bad, -1); o != primitive.Rejected || s.FetchAdds != 200 {
		t.Errorf("redundancy 0: %v, %d FETCH_ADDs", o, s.FetchAdds)
	}
	s.Full = true
	r := dta.Report{Header: dta.Header{Opcode: dta.OpKeyIncrement}, KeyIncrement: dta.KeyIncrement{Redundancy: 2, Key: 1, Counter: 1}}
	if o := tr.Translate(s, &r, -1); o != primitive.Busy || s.FetchAdds != 200 {
		t.Errorf("full sink: %v, %d FETCH_ADDs", o, s.FetchAdds)
	}
	s.Full = false
	if n := testing.AllocsPerRun(100, func() { tr.Translate(s, &r, -1) }); n != 0 {
		t.Errorf("Translate: %v allocations", n)
	}
}
