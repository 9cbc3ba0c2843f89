//go:build !race

package target

// raceLock is nothing without the race detector (see Region.write).
type raceLock struct{}

func (*raceLock) lock()   {}
func (*raceLock) unlock() {}
