package postcard_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/primitive/primitivetest"
)

func pc(key uint32, hop uint8, pathLen uint8, v uint32) *dta.Report {
	return &dta.Report{Header: dta.Header{Opcode: dta.OpPostcard}, Postcard: dta.Postcard{Key: key, Hop: hop, PathLength: pathLen, Value: v}}
}

// TestPrimitive runs Postcarding through the seam: a flow's postcards are
// held under its cache entry until its chunk is written (then released,
// settled), the chunk decodes to its path through the Store; a flow that
// waits its linger is written by Tick, one left is written by Flush or,
// with no room, lost; values outside the advertised set are rejected and
// counted.
func TestPrimitive(t *testing.T) {
	k, ok := primitive.Lookup(dta.OpPostcard)
	if kn, _ := primitive.ByName("postcard"); !ok || kn != k || !k.Stateful() {
		t.Fatalf("Lookup(postcard) = %v, %v", k, ok)
	}
	l := postcard.Layout{Hops: 3, Chunks: 1 << 8, Copies: 2}
	geo, _ := l.AppendGeometry(nil, postcard.NewValueSet([]uint32{10, 11, 12, 13}))
	pl, err := k.ParseLayout(geo)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := pl.AppendBinary(nil); !bytes.Equal(b, geo) || pl.Atomic() {
		t.Errorf("geometry % x, want % x", b, geo)
	}
	tr, err := pl.NewTranslator(primitive.Config{PostcardCache: 64, PostcardLinger: 100})
	if err != nil {
		t.Fatal(err)
	}
	if slots, per := tr.Held(); slots != 64 || per != 3 {
		t.Errorf("Held() = %d, %d; want 64 entries of 3 hops", slots, per)
	}
	st, _ := pl.NewStore(make([]byte, pl.RegionSize()))
	s := &primitivetest.Sink{Store: st, Tracking: true, Time: 1}

	// Flow 1, three hops: written when complete, its postcards settled.
	for h := uint8(1); h <= 3; h++ {
		if o := tr.Translate(s, pc(1, h, 3, 9+uint32(h)), -1); o != primitive.Applied {
			t.Fatalf("hop %d: %v", h, o)
		}
		if want := map[bool]int{true: 0, false: int(h)}[h == 3]; s.Holding() != want {
			t.Errorf("after hop %d: %d held, want %d", h, s.Holding(), want)
		}
	}
	if s.Settled != 3 || s.Writes != 2 || s.Err != nil {
		t.Fatalf("flow 1: %d settled, %d writes (%v); want 3, 2", s.Settled, s.Writes, s.Err)
	}
	checkQueries(t, st)
	checkLinger(t, tr, s)
	checkRows(t, st)
	s.Tracking = false
	r := pc(5, 1, 2, 11)
	if n := testing.AllocsPerRun(100, func() { tr.Translate(s, r, -1) }); n != 0 {
		t.Errorf("Translate: %v allocations", n)
	}
}

// checkQueries: the Store and its snapshot decode flow 1's path.
func checkQueries(t *testing.T, st primitive.Store) {
	t.Helper()
	ans, err := st.Query(primitive.Query{Keys: []uint32{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if j, _ := json.Marshal(ans); string(j) != `[{"key":1,"status":"found","path":[10,11,12]},{"key":2,"status":"not found","path":[]}]` {
		t.Errorf("Query: %s", j)
	}

	snap, err := st.Snapshot(make([]byte, len(st.Region())))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := snap.Query(primitive.Query{Keys: []uint32{1}}); err != nil || len(a) != 1 {
		t.Errorf("the snapshot: %v, %v", a, err)
	} else if j, _ := json.Marshal(a); string(j) != `[{"key":1,"status":"found","path":[10,11,12]}]` {
		t.Errorf("the snapshot answers %s", j)
	}
}

// checkLinger: a flow stopped at one hop is written by Tick after the
// linger, one cached at Flush without room is lost, a value outside the
// set is rejected and counted.
func checkLinger(t *testing.T, tr primitive.Translator, s *primitivetest.Sink) {
	t.Helper()
	// Flow 2 stops at one hop: Tick writes it after the linger.
	tr.Translate(s, pc(2, 1, 0, 13), -1)
	tr.Tick(s, 50)
	if s.Writes != 2 || s.Holding() != 1 {
		t.Errorf("before the linger: %d writes, %d held", s.Writes, s.Holding())
	}
	tr.Tick(s, 200)
	if s.Writes != 4 || s.Holding() != 0 || s.Settled != 4 || s.Counts[primitive.Lingered] != 1 {
		t.Errorf("after the linger: %d writes, %d held, %d settled, counts %v", s.Writes, s.Holding(), s.Settled, s.Counts)
	}

	// Flow 3 is cached when Flush finds no room: lost.
	tr.Translate(s, pc(3, 1, 0, 10), -1)
	s.Full = true
	tr.Flush(s)
	if s.Lost != 1 || s.Counts[primitive.FlushLost] != 1 {
		t.Errorf("flush without room: %d lost, counts %v", s.Lost, s.Counts)
	}
	s.Full = false

	if o := tr.Translate(s, pc(4, 1, 0, 99), -1); o != primitive.Rejected || s.Counts[primitive.OutsideValues] != 1 || s.Holding() != 0 {
		t.Errorf("value 99, outside the set: %v, counts %v", o, s.Counts)
	}
}

// checkRows: one row per hop of flow 1.
func checkRows(t *testing.T, st primitive.Store) {
	t.Helper()
	rows := 0
	if err := st.Rows(primitive.Query{Keys: []uint32{1}}, func(row []any) error {
		rows++
		if row[0] != uint32(1) || row[1] != int32(rows) || row[2] != uint32(9+rows) || row[3] != "found" {
			t.Errorf("row %v", row)
		}
		return nil
	}); err != nil || rows != 3 {
		t.Errorf("Rows: %d, %v; want 3 hops", rows, err)
	}
}

// TestStoreConcurrentQueries: queries of one store and of its snapshot
// running at once build the value set's table once, without a data race
// (the collector daemon answers HTTP queries concurrently; run with
// -race).
func TestStoreConcurrentQueries(t *testing.T) {
	k, _ := primitive.Lookup(dta.OpPostcard)
	l := postcard.Layout{Hops: 2, Chunks: 1 << 6, Copies: 1}
	geo, _ := l.AppendGeometry(nil, postcard.NewValueSet([]uint32{1, 2, 3}))
	pl, err := k.ParseLayout(geo)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := pl.NewStore(make([]byte, pl.RegionSize()))
	snap, err := st.Snapshot(make([]byte, pl.RegionSize()))
	if err != nil {
		t.Fatal(err)
	}
	const workers = 8
	errs := make(chan error, 2*workers)
	var start sync.WaitGroup
	start.Add(1)
	for i := range 2 * workers {
		s := []primitive.Store{st, snap}[i%2]
		go func() {
			start.Wait()
			a, err := s.Query(primitive.Query{Keys: []uint32{7}})
			if err == nil && len(a) != 1 {
				err = fmt.Errorf("%d answers", len(a))
			}
			if err == nil {
				err = s.Rows(primitive.Query{Keys: []uint32{7}}, func([]any) error { return nil })
			}
			errs <- err
		}()
	}
	start.Done()
	for range 2 * workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
