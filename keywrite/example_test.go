package keywrite_test

import (
	"fmt"

	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/keywrite"
)

// A collector's Key-Write region: 2^16 slots of 4-byte data, addressed
// with the default tofino.PerCopy. The switch would write the report's
// copies over RDMA; Put writes the same bytes.
func Example() {
	layout := keywrite.Layout{Slots: 1 << 16, DataSize: 4}
	err := layout.Validate()
	if err != nil {
		panic(err)
	}
	fmt.Println("slot size", layout.SlotSize(), "region", layout.RegionSize())

	// What the translator sends for report (key 42, data, N=2).
	ops, _, err := layout.AppendWrites(nil, nil, 42, []byte{0xde, 0xad, 0xbe, 0xef}, 2)
	if err != nil {
		panic(err)
	}
	fmt.Println("writes", len(ops), "of", len(ops[0].Data), "bytes")

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

// Memory written by the reference prototype (or by a switch following spec
// section 4 as written) is read with reference addressing. The translator
// learns the layout from the collector's advertisement geometry.
func Example_reference() {
	layout := keywrite.Layout{Slots: 1 << 16, DataSize: 4, Hasher: tofino.Reference}
	err := layout.Validate()
	if err != nil {
		panic(err)
	}
	geometry, err := layout.AppendBinary(nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("geometry % x\n", geometry)
	back, _ := keywrite.ParseLayout(geometry)
	fmt.Println(back.Hasher == tofino.Reference)
	// Copies 0 and 1 of every key sit at the same XOR distance.
	for _, key := range []uint32{1, 2, 3} {
		fmt.Println(back.Slot(key, 0) ^ back.Slot(key, 1))
	}
	// Output:
	// geometry 01 10 00 04 00 00 00
	// true
	// 12438
	// 12438
	// 12438
}
