package prefetch

import "testing"

// TestEnds: a hint on any slice, empty, one byte or across lines, changes
// nothing and does not fault.
func TestEnds(t *testing.T) {
	mem := make([]byte, 4096)
	for i := range mem {
		mem[i] = byte(i)
	}
	for _, b := range [][]byte{nil, mem[:0], mem[4095:], mem[:1], mem[63:65], mem, mem[100:3000]} {
		Ends(b)
	}
	for i, v := range mem {
		if v != byte(i) {
			t.Fatalf("byte %d changed to %d", i, v)
		}
	}
}
