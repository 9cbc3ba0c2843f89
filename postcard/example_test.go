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
	for hop, sw := range []postcard.Value{17, 4, 250, 9, 33} {
		chunks, _ = cache.Insert(chunks[:0], 0xF10F, postcard.Hop(hop+1), 0, sw)
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

// Hop, path length and value have types of their own and come in that
// order after the key, in Insert as in reporter.Reporter.Postcard: a hop
// passed as the path length, or a value as the hop, does not compile.
func ExampleCache_Insert() {
	cache, _ := postcard.NewCache(postcard.Layout{Hops: 3, Chunks: 1 << 10}, 64)
	var (
		key     uint32              = 0xF10F
		pathLen postcard.PathLength = 3
		values                      = []postcard.Value{17, 4, 250}
	)
	var chunks []postcard.Chunk
	for i, v := range values {
		hop := postcard.Hop(i + 1)
		// cache.Insert(chunks, key, pathLen, hop, v) would not compile.
		var err error
		if chunks, err = cache.Insert(chunks, key, hop, pathLen, v); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println(len(chunks), "chunk, skipping", chunks[0].Skip)
	_, err := cache.Insert(nil, key, 4, pathLen, 1)
	fmt.Println(err)
	// Output:
	// 1 chunk, skipping 0
	// insert: postcard: hop number out of range: hop 4, want 1..3
}
