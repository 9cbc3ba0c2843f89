package reporter

import (
	"testing"
	"time"
)

// TestPausedReporterJudgesNoSilence: the reporter and the translator are
// paused together (a machine under load deschedules both) right after a
// resend went out. When they run again the reporter has had no ack for
// more than ackSilence and its resend no answer for more than resendWait,
// but it was not listening: it waits for the answer, which comes, instead
// of counting the report unconfirmed.
func TestPausedReporterJudgesNoSilence(t *testing.T) {
	const pause = 300 * time.Millisecond
	ackPort := freePort(t)
	paused := make(chan struct{})
	var r *Reporter
	ft := newFakeTranslator(t, ackPort, func(seq uint32, attempt int) bool {
		if seq != 5 {
			return true
		}
		if attempt == 2 { // the resend: both pause, then it is taken
			paused <- struct{}{}
			time.Sleep(pause)
		}
		return attempt > 1
	})
	r = wideReporter(t, ft, ackPort, Config{})
	go func() {
		<-paused
		r.mu.Lock() // the reporter's ack loop stops with it
		time.Sleep(pause - 10*time.Millisecond)
		r.mu.Unlock()
	}()
	for i := range 20 {
		if err := r.KeyIncrement(uint32(i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resend acknowledged or counted unconfirmed", func() bool {
		c := r.Counters()
		return c.ResendAcks+c.Unconfirmed > 0
	})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c := r.Counters()
	ft.mu.Lock()
	tries := ft.attempts[5]
	_, taken := ft.taken[5]
	ft.mu.Unlock()
	if !taken || tries != 2 || c.ResendAcks != 1 || c.Unconfirmed != 0 || c.Lost != 0 {
		t.Fatalf("report 5 taken %v after %d tries, counters %+v; want taken at its resend, acknowledged, nothing unconfirmed", taken, tries, c)
	}
}
