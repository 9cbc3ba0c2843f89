// Package prefetch asks the CPU to start loading memory that is about to be
// written, so that a batch of writes to scattered addresses waits for their
// cache misses together rather than one after another. It is a hint: it
// never faults, changes no memory and may do nothing.
package prefetch

import "unsafe"

// Ends hints the cache lines of b's first and last bytes: all of b when it
// spans at most two lines, and where a longer copy into b starts and ends
// (the hardware follows the stream between them).
func Ends(b []byte) {
	if len(b) > 0 {
		ends(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)-1))
	}
}
