package keyincr_test

import (
	"fmt"

	"github.com/dtakit/dtakit/keyincr"
)

// Counting per flow: each report adds to N counters, addressed with the
// default tofino.PerCopy so they are independent count-min rows; a query
// takes their minimum.
func Example() {
	layout := keyincr.Layout{Slots: 1 << 16}
	err := layout.Validate()
	if err != nil {
		panic(err)
	}
	store, err := keyincr.NewStore(layout, nil)
	if err != nil {
		panic(err)
	}
	// What the translator sends for report (key 7, +1500, N=2).
	ops, err := layout.AppendWrites(nil, 7, 1500, 2)
	if err != nil {
		panic(err)
	}
	fmt.Println("fetch-and-adds", len(ops))
	for range 3 {
		if err := store.ApplyWrites(ops); err != nil {
			panic(err)
		}
	}
	total, _ := store.Query(7, 2)
	fmt.Println("key 7:", total)
	store.Reset()
	total, _ = store.Query(7, 2)
	fmt.Println("after reset:", total)
	// Output:
	// fetch-and-adds 2
	// key 7: 4500
	// after reset: 0
}
