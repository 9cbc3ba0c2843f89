//go:build linux

package postcard

import (
	"testing"

	"golang.org/x/sys/unix"
)

// bigRegion returns n zero bytes backed by transparent huge pages where the
// kernel allows it, as a collector registering a large region would use:
// with 4 KiB pages every random chunk access also misses the TLB.
func bigRegion(tb testing.TB, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n)
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	tb.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}
