package export

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/primitive"
)

// columnsOf describes a file's columns, by name: physical and logical
// type, repetition and encoding.
func columnsOf(f *parquet.File) []string {
	var cs []string
	for _, n := range f.Schema().Fields() {
		enc := ""
		if e := n.Encoding(); e != nil {
			enc = e.String()
		}
		cs = append(cs, fmt.Sprintf("%s %v %v optional=%v required=%v %s", n.Name(), n.Type().Kind(), n.Type().LogicalType(), n.Optional(), n.Required(), enc))
	}
	slices.Sort(cs)
	return cs
}

// sameFile checks that the file Store wrote (got) has the schema, the
// key-value metadata and the rows of the one the typed exporter wrote.
func sameFile[T any](t *testing.T, typed, got []byte) {
	t.Helper()
	wantRows, wf := read[T](t, typed)
	gotRows, gf := read[T](t, got)
	if w, g := columnsOf(wf), columnsOf(gf); !slices.Equal(w, g) {
		t.Errorf("columns:\n%s\nwant (the typed exporter's):\n%s", g, w)
	}
	kv := func(f *parquet.File) map[string]string {
		m := map[string]string{}
		for _, e := range f.Metadata().KeyValueMetadata {
			m[e.Key] = e.Value
		}
		return m
	}
	if w, g := kv(wf), kv(gf); !reflect.DeepEqual(w, g) {
		t.Errorf("metadata %v, want %v", g, w)
	}
	if len(wantRows) == 0 || !reflect.DeepEqual(wantRows, gotRows) {
		t.Errorf("%d rows differ from the typed exporter's %d", len(gotRows), len(wantRows))
	}
}

// storeOf returns the primitive.Store of opcode op over a region of the
// layout geo names.
func storeOf(t *testing.T, op dta.Opcode, geo []byte) primitive.Store {
	t.Helper()
	pl, err := primitive.Parse(op, geo)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pl.NewStore(make([]byte, pl.RegionSize()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStoreSchemas: Store writes each built-in primitive through Rows
// with exactly the schema (docs/DTA-WIRE.md 8.8), the metadata and the
// rows of its typed exporter.
func TestStoreSchemas(t *testing.T) {
	var keys []uint32
	for i := range uint32(300) {
		keys = append(keys, mix(i))
	}
	var typed, got bytes.Buffer

	geo, _ := keywrite.Layout{Slots: 1 << 10, DataSize: 8}.AppendBinary(nil)
	s := storeOf(t, dta.OpKeyWrite, geo)
	kw, _ := keywrite.StoreOf(s)
	for i, k := range keys[:200] { // keys[200:] are not found
		kw.Put(k, []byte{byte(i), 1, 2, 3, 4, 5, 6, 7}, 2)
	}
	for _, ks := range [][]uint32{keys, nil} { // given and scanned
		typed.Reset()
		got.Reset()
		var kl, sl Keys
		if ks != nil {
			kl, sl = KeyList(ks), KeyList(ks)
		}
		if _, err := KeyWrite(&typed, kw, 2, kl, meta, Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := Store(&got, s, 2, sl, meta, Options{}); err != nil {
			t.Fatal(err)
		}
		sameFile[KeyWriteRow](t, typed.Bytes(), got.Bytes())
	}

	geo, _ = keyincr.Layout{Slots: 1 << 8}.AppendBinary(nil)
	s = storeOf(t, dta.OpKeyIncrement, geo)
	ki, _ := keyincr.StoreOf(s)
	for i, k := range keys {
		ki.Add(k, uint64(i%7+1), 3)
	}
	typed.Reset()
	got.Reset()
	if _, err := KeyIncrement(&typed, ki, 3, KeyList(keys), meta, Options{Delta: 0.05}); err != nil {
		t.Fatal(err)
	}
	if _, err := Store(&got, s, 3, KeyList(keys), meta, Options{Delta: 0.05}); err != nil {
		t.Fatal(err)
	}
	sameFile[KeyIncrementRow](t, typed.Bytes(), got.Bytes())

	checkPostcardSchema(t, keys)
}

func checkPostcardSchema(t *testing.T, keys []uint32) {
	t.Helper()
	l := postcard.Layout{Hops: 4, Chunks: 1 << 10, Copies: 2}
	values := []uint32{5, 6, 7, 8, 9}
	geo, _ := l.AppendGeometry(nil, postcard.NewValueSet(values))
	s := storeOf(t, dta.OpPostcard, geo)
	pc, _ := postcard.StoreOf(s)
	c, _ := postcard.NewCodec(l)
	var ws []postcard.Write
	for i, k := range keys[:100] { // the others are not found
		ch := postcard.Chunk{Key: k, Len: l.ChunkSize()}
		c.EncodeChunk(ch.Data[:], k, values[i%2:i%2+3])
		for _, w := range c.AppendWrites(ws[:0], &ch) {
			if err := pc.Apply(w); err != nil {
				t.Fatal(err)
			}
		}
	}
	tab, err := postcard.TableOf(s)
	if err != nil {
		t.Fatal(err)
	}
	var typed, got bytes.Buffer
	if _, err := Postcard(&typed, pc, tab, KeyList(keys), meta, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Store(&got, s, 0, KeyList(keys), meta, Options{}); err != nil {
		t.Fatal(err)
	}
	sameFile[PostcardRow](t, typed.Bytes(), got.Bytes())
}
