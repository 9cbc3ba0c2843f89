package keyincr

import (
	"errors"
	"math"
	"testing"
)

func TestSize(t *testing.T) {
	sz, err := Size(Workload{Epsilon: 0.001, Success: 0.99})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", sz)
	if sz.Success < 0.99 || sz.Bytes != sz.Slots*8 || sz.Slots&(sz.Slots-1) != 0 || sz.Layout.Slots != sz.Slots || sz.Why == "" {
		t.Fatalf("Size = %+v", sz)
	}
	// No N reaches the target with half the counters.
	for n := 1; n <= MaxSizingRedundancy; n++ {
		if FailureProb(sz.Slots/2, n, 0.001) <= 0.01 {
			t.Fatalf("N=%d reaches it with half the memory", n)
		}
	}
	for _, w := range []Workload{{Epsilon: 0, Success: 0.9}, {Epsilon: 0.1, Success: 1}, {Epsilon: math.NaN(), Success: 0.9}, {Epsilon: 1e-12, Success: 0.999999}} {
		if _, err := Size(w); !errors.Is(err, ErrSizing) {
			t.Errorf("Size(%+v): %v, want ErrSizing", w, err)
		}
	}
}
