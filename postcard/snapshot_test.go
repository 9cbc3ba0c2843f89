package postcard

import (
	"bytes"
	"errors"
	"testing"
)

func TestSnapshot(t *testing.T) {
	c, err := NewCodec(Layout{Hops: 5, Chunks: 64, Copies: 2})
	if err != nil {
		t.Fatal(err)
	}
	live, _ := NewStore(c, make([]byte, c.Layout().RegionSize()))
	for i := range live.Bytes() {
		live.Bytes()[i] = byte(i * 7)
	}
	snap, _ := NewStore(c, make([]byte, c.Layout().RegionSize()))
	if err := live.Snapshot(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap.Bytes(), live.Bytes()) {
		t.Fatal("snapshot differs from the region")
	}
	live.Bytes()[0]++
	if snap.Bytes()[0] == live.Bytes()[0] {
		t.Fatal("snapshot aliases the region")
	}
	c2, _ := NewCodec(Layout{Hops: 5, Chunks: 128, Copies: 2})
	o, _ := NewStore(c2, make([]byte, c2.Layout().RegionSize()))
	if err := live.Snapshot(o); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("snapshot into another layout: %v", err)
	}
}
