package reporter

import (
	"testing"
	"time"
)

// TestCreditWindow: the cumulative ack moves the window forward only, and
// never past the reports sent; the numbers before a restarted translator's
// span come back as unseen; the credit is full credit reports past the
// ack; silence, stalls and probes follow the acks' times.
func TestCreditWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newCreditWindow(true, t0)
	if c.full(credit-1) || !c.full(credit) {
		t.Fatalf("full at %d: %v, at %d: %v", credit-1, c.full(credit-1), credit, c.full(credit))
	}
	if _, _, moved := c.advance(11, 10, 0, t0); moved {
		t.Fatal("an ack past the reports sent gave credit")
	}
	if from, to, moved := c.advance(5, 10, 0, t0); !moved || c.acked != 5 || from != to {
		t.Fatalf("ack of 0..4: moved %v, acked %d, unseen %d..%d", moved, c.acked, from, to)
	}
	select {
	case <-c.moved:
	default:
		t.Fatal("a waiting Send was not woken")
	}
	if _, _, moved := c.advance(3, 10, 0, t0); moved || c.acked != 5 {
		t.Fatalf("a stale ack moved the window to %d", c.acked)
	}
	// A restarted translator saw numbers 8 on (span 2 up to 9).
	if from, to, moved := c.advance(10, 10, 2, t0); !moved || from != 5 || to != 8 {
		t.Fatalf("span ack: moved %v, unseen %d..%d, want 5..8", moved, from, to)
	}

	c.round(t0)
	now := t0.Add(probeAfter + time.Millisecond)
	c.round(now)
	if !c.probeDue(now) || c.probeDue(now) {
		t.Fatal("a probe was not due once after probeAfter without a move")
	}
	if c.silent(t0.Add(ackSilence)) || !c.silent(t0.Add(ackSilence+time.Millisecond)) {
		t.Fatal("silence misjudged")
	}
	late := t0.Add(ackStall + time.Millisecond)
	c.round(late) // a pause: the loop just came back
	if c.stalled(late) || !c.deaf(late) {
		t.Fatal("a reporter back from a pause judged the translator stalled")
	}
	later := late.Add(ackSilence + 2*time.Millisecond)
	for at := late; !at.After(later); at = at.Add(time.Millisecond) {
		c.round(at)
	}
	if !c.stalled(later) || c.deaf(later) {
		t.Fatal("no ack for ackStall while listening: not stalled")
	}
}
