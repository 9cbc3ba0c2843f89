package postcard

import (
	"testing"

	"github.com/dtakit/dtakit/internal/hugemem"
)

// bigRegion returns n zero bytes from hugemem, as a collector registering a
// large region would use: with 4 KiB pages every random chunk access also
// misses the TLB.
func bigRegion(tb testing.TB, n int) []byte {
	m, err := hugemem.Alloc(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = m.Close() })
	return m.Bytes()
}
