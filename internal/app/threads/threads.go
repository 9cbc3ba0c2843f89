// Package threads gives a daemon as many threads running Go code
// (GOMAXPROCS) as it has shards, unless the GOMAXPROCS environment
// variable says otherwise.
//
// A daemon with a processor per core but the work of one shard keeps
// waking idle threads for each goroutine a socket readies; daemons that
// share a machine, as the README's do, then spend more on those wake-ups
// than on reports. A daemon given a machine of its own is given shards
// to match its cores.
package threads

import (
	"os"
	"runtime"
)

// Set makes n threads run Go code (n ≥ 1), unless the environment's
// GOMAXPROCS chose, and returns how many do.
func Set(n int) int {
	if n >= 1 && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(n)
	}
	return runtime.GOMAXPROCS(0)
}
