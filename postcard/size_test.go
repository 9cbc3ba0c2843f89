package postcard

import (
	"errors"
	"testing"
)

func TestSize(t *testing.T) {
	w := Workload{Flows: 1_000_000, Hops: 5, Values: 1 << 12, Success: 0.99}
	sz, err := Size(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", sz)
	l := sz.Layout
	if err := l.Validate(); err != nil || sz.Bytes != l.RegionSize() || sz.N != l.Copies || sz.Success < 0.99 {
		t.Fatalf("Size = %+v (%v)", sz, err)
	}
	if b := l.Bounds(float64(w.Flows)/float64(l.Chunks), w.Values); 1-b.NoOutput-b.Wrong != sz.Success {
		t.Fatalf("success %v is not the bounds' %+v", sz.Success, b)
	}
	// Half the chunks miss the target, at any copy count and slot width.
	for _, bits := range []int{8, 16, 32} {
		for n := 1; n <= MaxCopies; n++ {
			h := Layout{Hops: 5, SlotBits: bits, Chunks: l.Chunks / 2, Copies: n}
			if h.RegionSize() >= sz.Bytes {
				continue
			}
			b := h.Bounds(float64(w.Flows)/float64(h.Chunks), w.Values)
			if 1-b.NoOutput-b.Wrong >= 0.99 && (bits > 8 || w.Values < 256) {
				t.Fatalf("%+v reaches the target in less memory", h)
			}
		}
	}
	for _, bad := range []Workload{{Flows: 10, Values: 10, Success: 1}, {Flows: 10, Values: 0, Success: 0.9}, {Flows: 10, Hops: 17, Values: 3, Success: 0.9}} {
		if _, err := Size(bad); !errors.Is(err, ErrSizing) {
			t.Errorf("Size(%+v): %v", bad, err)
		}
	}
}
