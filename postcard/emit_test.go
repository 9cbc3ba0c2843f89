package postcard

import (
	"bytes"
	"testing"

	"github.com/dtakit/dtakit/dta"
)

// TestEmit: a flow written early by Emit stays cached, so a late hop joins
// its values and the chunk written again is the one a cache without Emit
// writes; an entry Emit wrote is not written again when evicted or
// flushed unless a hop came since.
func TestEmit(t *testing.T) {
	c := mustCodec(t, Layout{Hops: 3, Chunks: 1 << 10, Copies: 2})
	ca, _ := NewCache(c.Layout(), 1)  // one entry: any two flows collide
	ref, _ := NewCache(c.Layout(), 1) // without Emit
	ins := func(ca *Cache, p dta.Postcard) []Chunk {
		t.Helper()
		out, err := ca.Insert(nil, p.Key, Hop(p.Hop), PathLength(p.PathLength), Value(p.Value))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	p := func(key uint32, hop uint8, v uint32) dta.Postcard {
		return dta.Postcard{Key: key, Hop: hop, Value: v, PathLength: 3}
	}
	if out := ins(ca, p(7, 1, 10)); len(out) != 0 {
		t.Fatalf("first hop: %d chunks", len(out))
	}
	ins(ref, p(7, 1, 10))
	early := ca.Emit(nil, ca.Slot(7))
	if len(early) != 1 || early[0].Key != 7 || ca.Len() != 1 {
		t.Fatalf("Emit: %d chunks, %d cached", len(early), ca.Len())
	}
	if again := ca.Emit(nil, ca.Slot(7)); len(again) != 0 {
		t.Fatalf("Emit with no hop since: %d chunks", len(again))
	}
	ins(ca, p(7, 2, 20))
	ins(ref, p(7, 2, 20))
	got, want := ins(ca, p(7, 3, 30)), ins(ref, p(7, 3, 30))
	if len(got) != 1 || len(want) != 1 || !bytes.Equal(got[0].Bytes(), want[0].Bytes()) {
		t.Fatalf("completed after Emit: %d chunks, want the %d of a cache without it", len(got), len(want))
	}
	if bytes.Equal(early[0].Bytes(), got[0].Bytes()) {
		t.Fatal("the early chunk already had the late hops")
	}

	// Evicted or flushed: written only with a hop since Emit.
	ins(ca, p(1, 1, 5))
	ca.Emit(nil, ca.Slot(1))
	if out := ins(ca, p(2, 1, 6)); len(out) != 0 {
		t.Fatalf("evicting a flow Emit wrote: %d chunks", len(out))
	}
	if out := ins(ca, p(3, 1, 7)); len(out) != 1 || out[0].Key != 2 {
		t.Fatalf("evicting a flow not written: %d chunks", len(out))
	}
	ca.Emit(nil, ca.Slot(3))
	if out := ca.Flush(nil); len(out) != 0 || ca.Len() != 0 {
		t.Fatalf("Flush after Emit: %d chunks, %d cached", len(out), ca.Len())
	}
	if out := ca.Emit(nil, 0); len(out) != 0 {
		t.Fatalf("Emit of an empty entry: %d chunks", len(out))
	}
	ins(ca, p(4, 1, 8))
	if out := ca.Flush(nil); len(out) != 1 || out[0].Key != 4 {
		t.Fatalf("Flush: %d chunks", len(out))
	}
}
