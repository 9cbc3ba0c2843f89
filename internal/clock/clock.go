// Package clock is the time the socket holders hand to the socket-free
// cores (rocev2's, the translator's Engine, the exactly-once store): Unix
// nanoseconds counted on the monotonic clock from the process's start, so
// that a step of the wall clock (NTP, an operator) moves no timer.
package clock

import "time"

var (
	start = time.Now()
	base  = start.UnixNano()
)

// Now returns the current time in Unix nanoseconds, monotonic.
func Now() int64 { return base + int64(time.Since(start)) }

// Of converts t, a time this process read (time.Now, a socket's receive
// time), as Now would have at that instant; a t without a monotonic
// reading converts by its wall clock.
func Of(t time.Time) int64 { return base + int64(t.Sub(start)) }
