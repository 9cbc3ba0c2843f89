package keywrite_test

import (
	"fmt"

	"github.com/dtakit/dtakit/keywrite"
)

// A collector's Key-Write region: 2^16 slots of 4-byte data. The switch
// would write the report's copies over RDMA; Put writes the same bytes.
func Example() {
	layout, err := keywrite.NewLayout(1<<16, 4)
	if err != nil {
		panic(err)
	}
	fmt.Println("slot size", layout.SlotSize(), "region", layout.RegionSize())

	// What the translator sends for report (key 42, data, N=2).
	ops, _, err := layout.AppendWrites(nil, nil, 42, []byte{0xde, 0xad, 0xbe, 0xef}, 2)
	if err != nil {
		panic(err)
	}
	fmt.Println("writes", len(ops), "of", len(ops[0].Payload), "bytes")

	store, err := keywrite.NewStore(layout, nil)
	if err != nil {
		panic(err)
	}
	if err := store.ApplyWrites(ops); err != nil {
		panic(err)
	}
	r, err := store.Query(42, 2, keywrite.Plurality)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%v % x votes %d\n", r.Status, r.Data, r.Votes)
	r, _ = store.Query(43, 2, keywrite.Plurality)
	fmt.Println(r.Status)
	// Output:
	// slot size 8 region 524288
	// writes 2 of 8 bytes
	// found de ad be ef votes 2
	// empty
}
