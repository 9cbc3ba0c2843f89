package reporter

import "testing"

// TestResendStaysInWindow: a report NACKed busy again and again is resent
// (8 times, the backoff doubling from 1 ms) while the stream goes on. The
// translator takes a resend a window behind its newest number only while
// it still owes it, so every copy must come less than WideWindow behind
// the newest report sent: Send waits for the resend. It is then taken
// once, and nothing is lost or unconfirmed.
func TestResendStaysInWindow(t *testing.T) {
	const n = 3 * WideWindow
	ackPort := freePort(t)
	var newest uint32
	var behind []uint32 // per copy of report 5, how far the newest was ahead
	ft := newFakeTranslator(t, ackPort, func(seq uint32, attempt int) bool {
		if int32(seq-newest) > 0 {
			newest = seq
		}
		if seq != 5 {
			return true
		}
		behind = append(behind, newest-seq)
		return attempt > 8
	})
	r := wideReporter(t, ft, ackPort, Config{})
	for i := range n {
		if err := r.KeyIncrement(uint32(i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c := r.Counters()
	ft.mu.Lock()
	defer ft.mu.Unlock()
	_, taken := ft.taken[5]
	if !taken || len(behind) != 9 || c.Lost != 0 || c.Unconfirmed != 0 || c.ResendAcks != 1 {
		t.Fatalf("report 5 taken %v after %d copies, counters %+v; want taken at the 9th, nothing lost", taken, len(behind), c)
	}
	for i, b := range behind {
		if b >= WideWindow-1 {
			t.Errorf("copy %d of report 5 came %d numbers behind the newest; the translator's window is %d", i+1, b, WideWindow)
		}
	}
	t.Logf("report 5's copies came %v behind the newest", behind)
}
