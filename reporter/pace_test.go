package reporter

import (
	"testing"
	"time"
)

// TestPacer: a pacer that takes NACKs starts at startPace, doubles each
// quiet paceWindow, halves on a NACK (once per paceWindow), then grows by
// a quarter; Config.Rate caps it; without tokens it asks to wait.
func TestPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := newPacer(0, 64, true, t0)
	if p.rate != startPace || p.tokens != p.burst() {
		t.Fatalf("start: rate %v tokens %v, want %v and a burst", p.rate, p.tokens, startPace)
	}
	// Busy: far more sent in the window than the pace, so the pace is not
	// lifted (a pace twice what is measured is no cap).
	for range 1000 {
		p.spend()
	}
	now := t0.Add(paceWindow)
	p.refill(now)
	if p.rate != 2*startPace {
		t.Fatalf("after a quiet window: rate %v, want %v", p.rate, 2*startPace)
	}
	if !p.slowDown(now) || p.rate != startPace {
		t.Fatalf("a NACK: rate %v, want %v", p.rate, startPace)
	}
	if p.slowDown(now.Add(paceWindow / 2)) {
		t.Fatal("a second cut within a window")
	}
	for range 1000 {
		p.spend()
	}
	now = now.Add(paceWindow)
	p.refill(now)
	if p.rate != startPace*1.25 {
		t.Fatalf("a quiet window after a NACK: rate %v, want %v", p.rate, startPace*1.25)
	}
	for p.tokens >= 1 {
		p.spend()
	}
	if !p.limited() || p.wait() <= 0 {
		t.Fatalf("no tokens: limited %v, wait %v", p.limited(), p.wait())
	}
	p.refill(now.Add(p.wait() + time.Microsecond))
	if p.limited() {
		t.Fatal("still limited after the wait it asked for")
	}

	capped := newPacer(1000, 64, true, t0)
	if capped.rate != 1000 {
		t.Fatalf("a Rate below startPace: rate %v, want 1000", capped.rate)
	}
	capped.refill(t0.Add(paceWindow))
	if capped.rate != 1000 {
		t.Fatalf("Rate exceeded: %v", capped.rate)
	}
	idle := newPacer(0, 64, true, t0)
	idle.refill(t0.Add(paceWindow))
	if idle.rate != 0 {
		t.Fatalf("a pace twice the rate measured still caps: %v", idle.rate)
	}
	free := newPacer(0, 64, false, t0)
	if free.limited() || free.wait() != 0 {
		t.Fatal("a pacer with no cap limits")
	}
}
