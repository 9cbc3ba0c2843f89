package postcard_test

import (
	"fmt"

	"github.com/dtakit/dtakit/postcard"
)

// A flow's five postcards go through the translator's cache, become two
// chunk writes (copies addressed per copy, the default), land in the
// collector's store and are decoded back.
func Example() {
	codec, _ := postcard.NewCodec(postcard.Layout{Hops: 5, Chunks: 1 << 16, Copies: 2})
	cache, _ := postcard.NewCache(codec.Layout(), 1024)
	store, _ := postcard.NewStore(codec.Layout(), make([]byte, codec.Layout().RegionSize()))
	switches := make([]uint32, 1000) // the value universe: switch IDs 1..1000
	for i := range switches {
		switches[i] = uint32(i + 1)
	}
	table, _ := postcard.NewTable(codec.Layout(), switches)

	var chunks []postcard.Chunk
	var writes []postcard.Write
	for hop, sw := range []uint32{17, 4, 250, 9, 33} {
		chunks, _ = cache.Insert(chunks[:0], 0xF10F, uint8(hop+1), 0, sw)
		for i := range chunks {
			writes = codec.AppendWrites(writes[:0], &chunks[i])
			for _, w := range writes {
				_ = store.Apply(w)
			}
			fmt.Println(len(writes), "writes of", len(writes[0].Data), "bytes")
		}
	}
	path, outcome := store.Query(table, 0xF10F)
	fmt.Println(outcome, path.Values())
	// Output:
	// 2 writes of 32 bytes
	// found [17 4 250 9 33]
}
