package keywrite_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/primitive/primitivetest"
)

// TestPrimitive runs Key-Write through the seam: found by opcode and by
// name, its geometry round-trips, its Translator's writes applied to its
// Store give the bytes Store.Put gives, each report settled by its own
// writes; the Store answers queries and rows; bad data is rejected, a full
// sink is busy, and translating allocates nothing.
func TestPrimitive(t *testing.T) {
	k, ok := primitive.Lookup(dta.OpKeyWrite)
	if kn, _ := primitive.ByName("keywrite"); !ok || kn != k || k.Stateful() {
		t.Fatalf("Lookup(keywrite) = %v, %v", k, ok)
	}
	if _, ok := k.(primitive.OneCopy); !ok {
		t.Error("Key-Write does not choose copies")
	}
	l := keywrite.Layout{Slots: 1 << 10, DataSize: 8}
	geo, _ := l.AppendBinary(nil)
	pl, err := k.ParseLayout(geo)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := pl.AppendBinary(nil); !bytes.Equal(b, geo) || pl.RegionSize() != l.RegionSize() || pl.Atomic() || pl.Kind() != k {
		t.Errorf("layout %v: geometry % x, want % x", pl, b, geo)
	}
	tr, err := pl.NewTranslator(primitive.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, l.RegionSize())
	st, err := pl.NewStore(mem)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := keywrite.NewStore(l, nil)
	s := &primitivetest.Sink{Store: st, Tracking: true}
	var keys []uint32
	for key := range uint32(50) {
		d := binary.BigEndian.AppendUint64(nil, uint64(key)*7+1)
		r := dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite}, KeyWrite: dta.KeyWrite{Redundancy: 3, Key: key, Data: d}}
		if o := tr.Translate(s, &r, -1); o != primitive.Applied {
			t.Fatalf("key %d: %v", key, o)
		}
		_ = ref.Put(key, d, 3)
		keys = append(keys, key)
	}
	if !bytes.Equal(mem, ref.Region()) || s.Err != nil || s.Writes != 150 || s.Settled != 50 {
		t.Fatalf("region differs from Put's (%v), %d writes, %d settled", s.Err, s.Writes, s.Settled)
	}
	checkStore(t, st, keys, mem)
	checkRefusals(t, tr, s)
}

// checkStore checks the Store's answers to queries and rows, and its
// snapshot.
func checkStore(t *testing.T, st primitive.Store, keys []uint32, mem []byte) {
	t.Helper()
	ans, err := st.Query(primitive.Query{Keys: keys[:2], N: 3})
	if err != nil {
		t.Fatal(err)
	}
	if j, _ := json.Marshal(ans); string(j) != `[{"key":0,"status":"found","data":"0000000000000001","votes":3},{"key":1,"status":"found","data":"0000000000000008","votes":3}]` {
		t.Errorf("Query: %s", j)
	}
	rows := 0
	if err := st.Rows(primitive.Query{N: 3}, func(row []any) error {
		if row[4] != "found" || binary.BigEndian.Uint64(row[1].([]byte)) != uint64(row[0].(uint32))*7+1 {
			t.Errorf("row %v", row)
		}
		rows++
		return nil
	}); err != nil || rows != 50 {
		t.Errorf("Rows: %d rows, %v; want 50", rows, err)
	}
	snap, err := st.Snapshot(make([]byte, len(mem)))
	if err != nil || !bytes.Equal(snap.Region(), mem) {
		t.Errorf("Snapshot: %v, or its region differs", err)
	}
	if _, err := st.FetchAdd(0, 1); err == nil {
		t.Error("FETCH_ADD on a Key-Write store accepted")
	}
}

// checkRefusals: bad data is rejected, a copy is one write, a full sink is
// busy, and translating allocates nothing.
func checkRefusals(t *testing.T, tr primitive.Translator, s *primitivetest.Sink) {
	t.Helper()

	bad := dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite}, KeyWrite: dta.KeyWrite{Redundancy: 1, Key: 1, Data: make([]byte, 4)}}
	if o := tr.Translate(s, &bad, -1); o != primitive.Rejected || s.Writes != 150 {
		t.Errorf("4 bytes of data in an 8-byte layout: %v, %d writes", o, s.Writes)
	}
	one := dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite}, KeyWrite: dta.KeyWrite{Redundancy: 3, Key: 1, Data: make([]byte, 8)}}
	if o := tr.Translate(s, &one, 2); o != primitive.Applied || s.Writes != 151 {
		t.Errorf("copy 2 alone: %v, %d writes; want one", o, s.Writes)
	}
	s.Full = true
	if o := tr.Translate(s, &one, -1); o != primitive.Busy || s.Writes != 151 {
		t.Errorf("full sink: %v, %d writes", o, s.Writes)
	}
	s.Full = false
	if n := testing.AllocsPerRun(100, func() { tr.Translate(s, &one, -1) }); n != 0 {
		t.Errorf("Translate: %v allocations", n)
	}
}
