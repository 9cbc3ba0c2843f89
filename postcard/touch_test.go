package postcard

import "testing"

// BenchmarkChunkLoadFloor only loads the two chunks of each path, with no
// decoding: the memory floor BenchmarkQuery and BenchmarkQueryBatch are
// measured against.
func BenchmarkChunkLoadFloor(b *testing.B) {
	s, _, keys := benchStore(b, benchChunks())
	var sink byte
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i%len(keys)]
		sink ^= s.mem[uint64(s.c.ChunkIndex(k, 0))*32]
		sink ^= s.mem[uint64(s.c.ChunkIndex(k, 1))*32]
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpaths/s")
	loadSink = sink
}

var loadSink byte
