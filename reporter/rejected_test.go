package reporter

import (
	"sync"
	"testing"

	"github.com/dtakit/dtakit/dta"
)

// TestRejectedNACK: a report NACKed with reason Rejected (the collector's
// instance cannot hold it, a postcard value outside its set) is not
// resent, since it would be refused again: it is counted Rejected and Lost
// and handed to OnLoss with that reason.
func TestRejectedNACK(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(seq uint32, _ int) bool { return seq != 5 })
	ft.mu.Lock()
	ft.reason = dta.ReasonRejected
	ft.mu.Unlock()
	var mu sync.Mutex
	var losses []uint32
	r := wideReporter(t, ft, ackPort, Config{OnLoss: func(seq uint32, b []byte, why dta.Reason) {
		mu.Lock()
		defer mu.Unlock()
		if why != dta.ReasonRejected || len(b) == 0 {
			t.Errorf("OnLoss(%d, %x, %v): want its bytes and reason Rejected", seq, b, why)
		}
		losses = append(losses, seq)
	}})
	for i := range 20 {
		if err := r.Postcard(uint32(i), 1, 1, 4000); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c := r.Counters()
	ft.mu.Lock()
	tries := ft.attempts[5]
	ft.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if tries != 1 || c.Rejected != 1 || c.Lost != 1 || c.Unconfirmed != 0 || c.Resent != 0 || c.Backoffs != 0 || len(losses) != 1 || losses[0] != 5 {
		t.Fatalf("report 5 sent %d times, losses %v, counters %+v; want sent once, rejected and lost once, no backoff", tries, losses, c)
	}
}
