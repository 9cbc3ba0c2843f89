//go:build race

package target

import "sync"

// raceLock is a mutex when the race detector is on (see Region.write).
type raceLock struct{ mu sync.Mutex }

func (l *raceLock) lock()   { l.mu.Lock() }
func (l *raceLock) unlock() { l.mu.Unlock() }
