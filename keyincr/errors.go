package keyincr

import (
	"errors"
	"fmt"
)

// Errors returned by this package, wrapped with what was wrong. Match them
// with errors.Is.
var (
	// ErrLayout: a slot count that is not a power of two in 1..2^32.
	ErrLayout = errors.New("keyincr: invalid layout")
	// ErrRedundancy: a redundancy N outside 1..255.
	ErrRedundancy = errors.New("keyincr: redundancy out of range")
	// ErrRegion: a region smaller than the layout needs or not 8-byte aligned.
	ErrRegion = errors.New("keyincr: unusable region")
	// ErrOutOfRegion: a fetch-and-add outside the region or not on a counter.
	ErrOutOfRegion = errors.New("keyincr: operation outside region")
	// ErrResults: a result slice shorter than the batch of keys.
	ErrResults = errors.New("keyincr: result slice too short")
	// ErrGeometry: an encoded layout that is malformed (length, version,
	// hasher ID), or a layout that cannot be encoded (a hasher that is not
	// built in).
	ErrGeometry = errors.New("keyincr: bad layout geometry")
	// ErrSizing: a Size target it cannot meet (more than 2^32 counters) or
	// understand (success or epsilon outside (0, 1)).
	ErrSizing = errors.New("keyincr: cannot size")
	// ErrSnapshot: a snapshot into a store of another layout.
	ErrSnapshot = errors.New("keyincr: cannot snapshot")
)

// Hot-path errors, allocated once.
var (
	errRedundancy   = fmt.Errorf("%w: N must be 1..255", ErrRedundancy)
	errOutOfRegion  = fmt.Errorf("%w: offset not on a counter of the region", ErrOutOfRegion)
	errResultsShort = fmt.Errorf("%w: fewer results than keys", ErrResults)
)
