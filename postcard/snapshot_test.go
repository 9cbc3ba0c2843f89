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
	live, _ := NewStore(c.Layout(), make([]byte, c.Layout().RegionSize()))
	for i := range live.Region() {
		live.Region()[i] = byte(i * 7)
	}
	snap, _ := NewStore(c.Layout(), make([]byte, c.Layout().RegionSize()))
	if err := live.Snapshot(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap.Region(), live.Region()) {
		t.Fatal("snapshot differs from the region")
	}
	live.Region()[0]++
	if snap.Region()[0] == live.Region()[0] {
		t.Fatal("snapshot aliases the region")
	}
	c2, _ := NewCodec(Layout{Hops: 5, Chunks: 128, Copies: 2})
	o, _ := NewStore(c2.Layout(), make([]byte, c2.Layout().RegionSize()))
	if err := live.Snapshot(o); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("snapshot into another layout: %v", err)
	}
}
