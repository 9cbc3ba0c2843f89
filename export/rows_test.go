package export

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/primitive"
)

// genericRow is a row of Rows' export of a Key-Write store, read by the
// columns' names.
type genericRow struct {
	Epoch     uint64    `parquet:"epoch"`
	Collector string    `parquet:"collector"`
	Instance  int32     `parquet:"instance"`
	Start     time.Time `parquet:"epoch_start,timestamp(microsecond)"`
	End       time.Time `parquet:"epoch_end,timestamp(microsecond)"`
	Key       uint32    `parquet:"key"`
	Value     []byte    `parquet:"value,optional"`
	Copies    int32     `parquet:"copies"`
	Matches   int32     `parquet:"matches"`
	Verdict   string    `parquet:"verdict"`
}

// TestRows exports a store through its primitive.Store rows and reads the
// file back: every row the store passes, with the epoch's columns.
func TestRows(t *testing.T) {
	l := keywrite.Layout{Slots: 256, DataSize: 4}
	geo, _ := l.AppendBinary(nil)
	pl, err := primitive.Parse(dta.OpKeyWrite, geo)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pl.NewStore(make([]byte, pl.RegionSize()))
	if err != nil {
		t.Fatal(err)
	}
	kw, _ := keywrite.StoreOf(s)
	for k := uint32(1); k <= 10; k++ {
		if err := kw.Put(k, []byte{byte(k), 0, 0, 1}, 2); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	st, err := Rows(&out, s, primitive.Query{Keys: []uint32{3, 7, 99}, N: 2}, meta, Options{})
	if err != nil || st.Rows != 3 {
		t.Fatalf("Rows: %+v, %v", st, err)
	}
	rows, f := read[genericRow](t, out.Bytes())
	if v, _ := f.Lookup("dtakit.primitive"); v != "keywrite" {
		t.Errorf("dtakit.primitive = %q", v)
	}
	// The file holds what the store passes, value by value.
	var want []genericRow
	err = s.Rows(primitive.Query{Keys: []uint32{3, 7, 99}, N: 2}, func(row []any) error {
		want = append(want, genericRow{Key: row[0].(uint32), Value: bytes.Clone(row[1].([]byte)), Copies: row[2].(int32), Matches: row[3].(int32), Verdict: row[4].(string)})
		return nil
	})
	if err != nil || len(want) != 3 || want[0].Verdict != "found" || want[2].Verdict != "not found" || want[2].Value != nil {
		t.Fatalf("the store's rows: %+v, %v", want, err)
	}
	checkGeneric(t, rows, want)
	// With no keys, the keys the store lists itself (Scan).
	out.Reset()
	if st, err := Rows(&out, s, primitive.Query{N: 2}, meta, Options{}); err != nil || st.Rows != 10 {
		t.Errorf("Rows of every key: %+v, %v; want 10 rows", st, err)
	}
	if _, err := Rows(&out, nil, primitive.Query{}, meta, Options{}); !errors.Is(err, ErrArgument) {
		t.Errorf("Rows of a nil store: %v, want ErrArgument", err)
	}
}

// checkGeneric compares rows read back with the rows the store passed.
func checkGeneric(t *testing.T, rows, want []genericRow) {
	t.Helper()
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		w := want[i]
		if r.Epoch != meta.Epoch || r.Collector != meta.Collector || r.Instance != int32(meta.Instance) || !r.Start.Equal(meta.Start) || !r.End.Equal(meta.End) {
			t.Errorf("row %d: epoch columns %+v", i, r)
		}
		if r.Key != w.Key || !bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) || r.Copies != w.Copies || r.Matches != w.Matches || r.Verdict != w.Verdict {
			t.Errorf("row %d: %+v, want %+v", i, r, w)
		}
	}
}

// TestStore: a built-in primitive's Store is exported with its own schema
// (Key-Write's redundancy in the metadata, its int32 copies), its keys
// listed by StoreKeys; a Key-Increment store lists none.
func TestStore(t *testing.T) {
	l := keywrite.Layout{Slots: 256, DataSize: 4}
	geo, _ := l.AppendBinary(nil)
	pl, err := primitive.Parse(dta.OpKeyWrite, geo)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pl.NewStore(make([]byte, pl.RegionSize()))
	if err != nil {
		t.Fatal(err)
	}
	kw, _ := keywrite.StoreOf(s)
	for k := uint32(1); k <= 10; k++ {
		if err := kw.Put(k, []byte{byte(k), 0, 0, 1}, 2); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	st, err := Store(&out, s, 2, StoreKeys(s, 2), meta, Options{})
	if err != nil || st.Rows != 10 {
		t.Fatalf("Store: %+v, %v; want 10 rows", st, err)
	}
	rows, f := read[KeyWriteRow](t, out.Bytes())
	if v, _ := f.Lookup("dtakit.redundancy"); v != "2" || len(rows) != 10 {
		t.Errorf("dtakit.redundancy %q, %d rows: not Key-Write's schema", v, len(rows))
	}
	geo, _ = keyincr.Layout{Slots: 64}.AppendBinary(nil)
	il, err := primitive.Parse(dta.OpKeyIncrement, geo)
	if err != nil {
		t.Fatal(err)
	}
	is, err := il.NewStore(make([]byte, il.RegionSize()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StoreKeys(is, 2).Next(make([]uint32, 8)); !errors.Is(err, primitive.ErrUnsupported) {
		t.Errorf("StoreKeys of a Key-Increment store: %v, want ErrUnsupported", err)
	}
}
