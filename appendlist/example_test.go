package appendlist_test

import (
	"encoding/binary"
	"fmt"

	"github.com/dtakit/dtakit/appendlist"
)

// Events appended to list 3 are batched by 4, written into the region and
// read back in order.
func Example() {
	layout := appendlist.Layout{Lists: 8, Entries: 1024, EntrySize: 4, Batch: 4}
	batcher, _ := appendlist.NewBatcher(layout)
	region, _ := appendlist.NewStore(layout, make([]byte, layout.RegionSize()))
	reader, _ := region.Reader(3)

	var writes []appendlist.Write
	for ev := uint32(1); ev <= 6; ev++ {
		writes, _ = batcher.AppendWrites(writes[:0], 3, binary.LittleEndian.AppendUint32(nil, ev), false)
		for _, w := range writes {
			_ = region.Apply(w)
			fmt.Println("write of", len(w.Data), "bytes at", w.Offset)
		}
	}
	buf := make([]byte, 64)
	n, _ := reader.Read(buf)
	for i := range n {
		fmt.Print(binary.LittleEndian.Uint32(buf[4*i:]), " ")
	}
	fmt.Println("pending:", batcher.Pending(3))
	// Output:
	// write of 16 bytes at 12288
	// 1 2 3 4 pending: 2
}
