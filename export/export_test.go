package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/uncompressed"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
)

var meta = Meta{Epoch: 7, Collector: "c0", Instance: 2,
	Start: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 24, 12, 1, 0, 0, time.UTC)}

// mix is a bijection on uint32, for distinct keys.
func mix(i uint32) uint32 {
	i ^= i >> 15
	i *= 0x2c1b3c6d
	i ^= i >> 12
	i *= 0x297a2d39
	return i ^ i>>15
}

func read[T any](t *testing.T, b []byte) ([]T, *parquet.File) {
	t.Helper()
	rows, err := parquet.Read[T](bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return rows, f
}

func checkEpoch(t *testing.T, e Epoch) {
	t.Helper()
	if e.Epoch != meta.Epoch || e.Collector != meta.Collector || e.Instance != int32(meta.Instance) || !e.Start.Equal(meta.Start) || !e.End.Equal(meta.End) {
		t.Fatalf("epoch columns %+v, want %+v", e, meta)
	}
}

func TestKeyWriteScanned(t *testing.T) {
	l := keywrite.Layout{Slots: 1 << 16, DataSize: 8}
	s, _ := keywrite.NewStore(l, nil)
	written := map[uint32][]byte{}
	for i := range uint32(12000) { // load 0.37 over two copies
		k := mix(i)
		v := binary.LittleEndian.AppendUint64(nil, uint64(k)*3+1)
		s.Put(k, v, 2)
		written[k] = v
	}
	var buf bytes.Buffer
	var last Progress
	calls := 0
	st, err := KeyWrite(&buf, s, 2, nil, meta, Options{RowGroupRows: 1000, Progress: func(p Progress) {
		if p.Done < last.Done || p.Rows < last.Rows {
			t.Errorf("progress went back: %+v after %+v", p, last)
		}
		last = p
		calls++
	}})
	if err != nil {
		t.Fatal(err)
	}
	if last.Done != l.Slots || last.Total != l.Slots || last.Rows != st.Rows || calls < 2 {
		t.Fatalf("last progress %+v after %d calls, stats %+v", last, calls, st)
	}
	rows, f := read[KeyWriteRow](t, buf.Bytes())
	if uint64(len(rows)) != st.Rows || len(f.RowGroups()) < 2 {
		t.Fatalf("%d rows in %d row groups, stats say %d", len(rows), len(f.RowGroups()), st.Rows)
	}
	if v, _ := f.Lookup("dtakit.primitive"); v != "keywrite" {
		t.Fatalf("metadata primitive %q", v)
	}
	seen := map[uint32]bool{}
	found := 0
	for _, r := range rows {
		checkEpoch(t, r.Epoch)
		if seen[r.Key] {
			t.Fatalf("key %#x exported twice", r.Key)
		}
		seen[r.Key] = true
		q, _ := s.Query(r.Key, 2, keywrite.Plurality)
		if r.Verdict != q.Status.Verdict() || !bytes.Equal(r.Value, q.Data) || r.Matches != int32(q.Matches) {
			t.Fatalf("row %+v, query %+v", r, q)
		}
		if q.Status == keywrite.Found {
			found++
			if !bytes.Equal(r.Value, written[r.Key]) {
				t.Fatalf("key %#x exported %x, written %x", r.Key, r.Value, written[r.Key])
			}
		}
	}
	// Every written key that still answers is in the file.
	for k := range written {
		if q, _ := s.Query(k, 2, keywrite.Plurality); q.Status != keywrite.Empty && !seen[k] {
			t.Fatalf("key %#x answers %v but was not exported", k, q.Status)
		}
	}
	if found < 11000 {
		t.Fatalf("only %d of 12000 keys found", found)
	}
}

func TestKeyWriteGivenKeys(t *testing.T) {
	l := keywrite.Layout{Slots: 1 << 10, DataSize: 4}
	s, _ := keywrite.NewStore(l, nil)
	s.Put(1, []byte{1, 0, 0, 0}, 2)
	var buf bytes.Buffer
	if _, err := KeyWrite(&buf, s, 2, KeyList([]uint32{1, 2}), meta, Options{}); err != nil {
		t.Fatal(err)
	}
	rows, _ := read[KeyWriteRow](t, buf.Bytes())
	if len(rows) != 2 || rows[0].Verdict != "found" || rows[0].Copies != 2 || rows[1].Verdict != "not found" || rows[1].Value != nil {
		t.Fatalf("rows %+v", rows)
	}
	if _, err := KeyWrite(&buf, s, 0, nil, meta, Options{}); !errors.Is(err, ErrArgument) {
		t.Fatalf("n=0: %v", err)
	}
}

func TestKeyIncrement(t *testing.T) {
	l := keyincr.Layout{Slots: 1 << 10}
	s, _ := keyincr.NewStore(l, nil)
	truth := map[uint32]uint64{}
	var keys []uint32
	for i := range uint32(2000) {
		k := mix(i)
		keys = append(keys, k)
		c := uint64(i%17 + 1)
		s.Add(k, c, 2)
		truth[k] = c
	}
	var buf bytes.Buffer
	st, err := KeyIncrement(&buf, s, 2, KeyList(keys), meta, Options{Delta: 0.05})
	if err != nil || st.Rows != 2000 {
		t.Fatal(st, err)
	}
	rows, f := read[KeyIncrementRow](t, buf.Bytes())
	var total uint64
	for _, c := range truth {
		total += c
	}
	if v, _ := f.Lookup("dtakit.total"); v != strconv.FormatUint(total, 10) {
		t.Fatalf("total metadata %q, true total %d", v, total)
	}
	exceeded := 0
	for _, r := range rows {
		checkEpoch(t, r.Epoch)
		q, _ := s.Query(r.Key, 2)
		if r.Estimate != q || r.Estimate < truth[r.Key] {
			t.Fatalf("row %+v: query %d, truth %d", r, q, truth[r.Key])
		}
		if r.Estimate-truth[r.Key] > r.ErrorBound {
			exceeded++
		}
	}
	if r := rows[0]; r.ErrorBound == 0 || float64(exceeded) > 0.05*2000 {
		t.Fatalf("error bound %d exceeded by %d of 2000 keys (delta 0.05)", r.ErrorBound, exceeded)
	}
	if _, err := KeyIncrement(&buf, s, 2, KeyList(keys), meta, Options{Delta: 2}); !errors.Is(err, ErrArgument) {
		t.Fatalf("delta 2: %v", err)
	}
}

func TestPostcard(t *testing.T) {
	c, _ := postcard.NewCodec(postcard.Layout{Hops: 5, Chunks: 1 << 10, Copies: 2})
	s, _ := postcard.NewStore(c.Layout(), make([]byte, c.Layout().RegionSize()))
	values := []uint32{101, 102, 103, 104, 105, 106}
	tab, err := postcard.NewTable(c.Layout(), values)
	if err != nil {
		t.Fatal(err)
	}
	var keys []uint32
	var ch postcard.Chunk
	var ws []postcard.Write
	for i := range uint32(100) {
		k := mix(i)
		keys = append(keys, k)
		path := values[i%3 : i%3+3]
		ch = postcard.Chunk{Key: k, Len: c.Layout().ChunkSize()}
		c.EncodeChunk(ch.Data[:], k, path)
		ws = c.AppendWrites(ws[:0], &ch)
		for _, w := range ws {
			if err := s.Apply(w); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys = append(keys, 0xFEEDFACE) // never written
	var buf bytes.Buffer
	if _, err := Postcard(&buf, s, tab, KeyList(keys), meta, Options{}); err != nil {
		t.Fatal(err)
	}
	rows, _ := read[PostcardRow](t, buf.Bytes())
	byKey := map[uint32][]PostcardRow{}
	for _, r := range rows {
		checkEpoch(t, r.Epoch)
		byKey[r.Key] = append(byKey[r.Key], r)
	}
	for _, k := range keys {
		p, o := s.Query(tab, k)
		rs := byKey[k]
		if o != postcard.Found {
			if len(rs) != 1 || rs[0].Hop != 0 || rs[0].Value != nil || rs[0].Verdict != o.String() {
				t.Fatalf("key %#x (%v): rows %+v", k, o, rs)
			}
			continue
		}
		if len(rs) != p.Len {
			t.Fatalf("key %#x: %d rows for a %d-hop path", k, len(rs), p.Len)
		}
		for h, r := range rs {
			if r.Hop != int32(h+1) || r.Value == nil || *r.Value != p.Hops[h] || r.Verdict != "found" {
				t.Fatalf("key %#x hop %d: %+v, path %v", k, h+1, r, p.Values())
			}
		}
	}
	if len(byKey[0xFEEDFACE]) != 1 || byKey[0xFEEDFACE][0].Verdict != "not found" {
		t.Fatalf("unwritten flow: %+v", byKey[0xFEEDFACE])
	}
}

func TestAppend(t *testing.T) {
	l := appendlist.Layout{Lists: 3, Entries: 64, EntrySize: 8, Batch: 4, Markers: true}
	r, _ := appendlist.NewStore(l, make([]byte, l.RegionSize()))
	b, _ := appendlist.NewBatcher(l)
	put := func(list uint32, n int, base uint64) {
		var ws []appendlist.Write
		for i := range n {
			ws, _ = b.AppendWrites(ws[:0], list, binary.LittleEndian.AppendUint64(nil, base+uint64(i)), false)
			for _, w := range ws {
				if err := r.Apply(w); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	put(0, 40, 1000)
	put(2, 100, 5000) // laps the 64-entry ring: 36 lost
	var readers []*appendlist.Reader
	for i := range uint32(3) {
		rd, _ := r.Reader(i)
		readers = append(readers, rd)
	}
	var buf bytes.Buffer
	st, err := Append(&buf, readers, 8, meta, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := read[AppendRow](t, buf.Bytes())
	if st.Rows != 40+64 || st.Lost != 36 || len(rows) != 104 {
		t.Fatalf("stats %+v, %d rows", st, len(rows))
	}
	for i, row := range rows {
		checkEpoch(t, row.Epoch)
		want := uint64(1000 + i)
		list, pos := uint32(0), uint64(i)
		if i >= 40 {
			want, list, pos = uint64(5000+36+i-40), 2, uint64(36+i-40)
		}
		if row.List != list || row.Position != pos || binary.LittleEndian.Uint64(row.Entry) != want {
			t.Fatalf("row %d: list %d pos %d entry %d, want %d %d %d", i, row.List, row.Position, binary.LittleEndian.Uint64(row.Entry), list, pos, want)
		}
	}
	// A second export holds only what came after the first.
	put(0, 8, 2000)
	buf.Reset()
	st, _ = Append(&buf, readers, 8, meta, Options{})
	rows, _ = read[AppendRow](t, buf.Bytes())
	if st.Rows != 8 || rows[0].Position != 40 || binary.LittleEndian.Uint64(rows[0].Entry) != 2000 {
		t.Fatalf("second export: %+v, first row %+v", st, rows[0])
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(b []byte) (int, error) {
	if w.n -= len(b); w.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(b), nil
}

func TestWriteErrors(t *testing.T) {
	l := keywrite.Layout{Slots: 1 << 12, DataSize: 4}
	s, _ := keywrite.NewStore(l, nil)
	for i := range uint32(3000) {
		s.Put(mix(i), []byte{1, 2, 3, 4}, 1)
	}
	_, err := KeyWrite(&failWriter{n: 100}, s, 1, nil, meta, Options{RowGroupRows: 100})
	if !errors.Is(err, ErrWrite) {
		t.Fatalf("a failing output: %v, want ErrWrite", err)
	}
}

// TestScanKeysFeedKeyIncrement exports a flow's counters for the keys a
// Key-Write store of the same flows holds.
func TestScanKeysFeedKeyIncrement(t *testing.T) {
	kl := keywrite.Layout{Slots: 1 << 14, DataSize: 4}
	kw, _ := keywrite.NewStore(kl, nil)
	il := keyincr.Layout{Slots: 1 << 12}
	ki, _ := keyincr.NewStore(il, nil)
	want := map[uint32]bool{}
	for i := range uint32(5000) {
		k := mix(i)
		kw.Put(k, []byte{1, 2, 3, 4}, 2)
		ki.Add(k, 3, 2)
	}
	for i := range uint32(5000) {
		if q, _ := kw.Query(mix(i), 2, keywrite.Plurality); q.Status != keywrite.Empty {
			want[mix(i)] = true
		}
	}
	var buf bytes.Buffer
	st, err := KeyIncrement(&buf, ki, 2, ScanKeys(kw, 2), meta, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := read[KeyIncrementRow](t, buf.Bytes())
	if st.Rows != uint64(len(want)) || len(rows) != len(want) {
		t.Fatalf("%d rows, %d keys in the Key-Write store", len(rows), len(want))
	}
	for _, r := range rows {
		if !want[r.Key] || r.Estimate < 3 {
			t.Fatalf("row %+v", r)
		}
	}
	if _, err := KeyIncrement(&buf, ki, 2, nil, meta, Options{}); !errors.Is(err, ErrArgument) {
		t.Fatalf("nil keys: %v", err)
	}
}

// TestExportMemoryBounded exports a 128 MiB Key-Write region holding about
// 4 M keys, uncompressed so that even the encoded columns of all rows take
// about 70 MB: streamed a row group at a time, the export's peak RSS beyond
// the region stays under 40 MiB.
func TestExportMemoryBounded(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory makes RSS meaningless here; go test without -race runs this")
	}
	if _, err := os.Stat("/proc/self/clear_refs"); err != nil {
		t.Skip("needs Linux's /proc/self/clear_refs to reset the peak RSS")
	}
	l := keywrite.Layout{Slots: 16 << 20, DataSize: 4}
	s, _ := keywrite.NewStore(l, nil)
	for i := range uint32(4 << 20) {
		s.Put(mix(i), []byte{byte(i), byte(i >> 8), 1, 2}, 2)
	}
	runtime.GC()
	resetPeak()
	base := vmHWM()
	var w countWriter
	st, err := KeyWrite(&w, s, 2, nil, meta, Options{Compression: &uncompressed.Codec{}})
	if err != nil {
		t.Fatal(err)
	}
	extra := int64(vmHWM()) - int64(base)
	t.Logf("%d rows, %d-byte file, peak RSS %d MiB beyond the region's", st.Rows, w.n, extra>>20)
	if st.Rows < 3<<20 || extra > 40<<20 || base == 0 {
		t.Fatalf("%d rows; peak RSS grew by %d MiB (base %d)", st.Rows, extra>>20, base>>20)
	}
}
