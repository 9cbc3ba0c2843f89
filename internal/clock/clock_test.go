package clock

import (
	"testing"
	"time"
)

// TestNowFollowsTheWallClockAtStart: Now is Unix nanoseconds (within the
// drift of a test's run) and never goes back; Of agrees with Now.
func TestNowFollowsTheWallClockAtStart(t *testing.T) {
	wall := time.Now().UnixNano()
	n := Now()
	if d := n - wall; d < -int64(time.Second) || d > int64(time.Second) {
		t.Errorf("Now %d is %v from the wall clock %d", n, time.Duration(d), wall)
	}
	prev := n
	for range 1000 {
		if m := Now(); m < prev {
			t.Fatalf("Now went back: %d after %d", m, prev)
		} else {
			prev = m
		}
	}
	before := Now()
	at := time.Now()
	after := Now()
	if of := Of(at); of < before || of > after {
		t.Errorf("Of(time.Now()) %d outside [%d, %d]", of, before, after)
	}
	// A time without a monotonic reading converts by its wall clock.
	if got, want := Of(at.Round(0)), at.UnixNano(); got-want > int64(time.Second) || want-got > int64(time.Second) {
		t.Errorf("Of of a wall-clock time %d, want about %d", got, want)
	}
}
