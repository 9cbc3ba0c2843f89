package keywrite

import (
	"errors"
	"fmt"
	"sync"
)

// Errors returned by this package, wrapped with what was wrong. Match them
// with errors.Is.
var (
	// ErrLayout: a slot count that is not a power of two in 1..2^32, or a
	// data size that is not a positive multiple of 4.
	ErrLayout = errors.New("keywrite: invalid layout")
	// ErrRedundancy: a redundancy N outside 1..255.
	ErrRedundancy = errors.New("keywrite: redundancy out of range")
	// ErrDataSize: report data whose length is not the layout's data size.
	ErrDataSize = errors.New("keywrite: data size does not match layout")
	// ErrRegion: a region smaller than the layout needs.
	ErrRegion = errors.New("keywrite: region too small for layout")
	// ErrOutOfRegion: a write that would reach outside the region.
	ErrOutOfRegion = errors.New("keywrite: write outside region")
	// ErrPolicy: a consensus policy whose threshold is outside 1..255.
	ErrPolicy = errors.New("keywrite: invalid query policy")
	// ErrResults: a result slice shorter than the batch of keys.
	ErrResults = errors.New("keywrite: result slice too short")
	// ErrGeometry: an encoded layout that is malformed (length, version,
	// hasher ID), or a layout that cannot be encoded (a hasher that is not
	// built in).
	ErrGeometry = errors.New("keywrite: bad layout geometry")
	// ErrSizing: a Size target it cannot meet (more than 2^32 slots) or
	// understand (a success probability outside (0, 1)).
	ErrSizing = errors.New("keywrite: cannot size")
	// ErrScan: a Scan the layout cannot do (its hasher cannot recover keys
	// from checksums) or a start past the region.
	ErrScan = errors.New("keywrite: cannot scan")
	// ErrSnapshot: a snapshot into a store of another layout.
	ErrSnapshot = errors.New("keywrite: cannot snapshot")
)

// Hot-path errors, allocated once.
var (
	errRedundancy   = fmt.Errorf("%w: N must be 1..255", ErrRedundancy)
	errCopy         = fmt.Errorf("%w: the copy must be 0..N-1", ErrRedundancy)
	errOutOfRegion  = fmt.Errorf("%w: write extends past the end of the region", ErrOutOfRegion)
	errResultsShort = fmt.Errorf("%w: fewer results than keys", ErrResults)
)

// dataSizeErrs holds the data-size errors made so far, one per pair of
// sizes, so that rejecting the same mismatch again does not allocate.
var dataSizeErrs struct {
	sync.RWMutex
	m map[[2]int]error
}

// maxDataSizeErrs bounds dataSizeErrs: reports of many sizes cost an
// allocation each beyond it, not memory.
const maxDataSizeErrs = 1024

// errDataSize is the error for got bytes of data where the layout holds
// want, naming both.
func errDataSize(got, want int) error {
	k := [2]int{got, want}
	dataSizeErrs.RLock()
	err := dataSizeErrs.m[k]
	dataSizeErrs.RUnlock()
	if err != nil {
		return err
	}
	err = fmt.Errorf("%w: %d bytes of data, the layout's data size is %d", ErrDataSize, got, want)
	dataSizeErrs.Lock()
	if dataSizeErrs.m == nil {
		dataSizeErrs.m = map[[2]int]error{}
	}
	if len(dataSizeErrs.m) < maxDataSizeErrs {
		dataSizeErrs.m[k] = err
	}
	dataSizeErrs.Unlock()
	return err
}
