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
	c.waiting(t0) // Send found the credit full
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

// TestCreditStallCountsTheWait: a reporter whose translator was silent for
// longer than ackStall while the credit had room (a translator killed and
// restarted) gives the new one ackStall from when the credit fills.
func TestCreditStallCountsTheWait(t *testing.T) {
	later := time.Unix(1000, 0)
	c := newCreditWindow(true, later)
	c.restart(later)
	quiet := later.Add(3 * ackStall)
	for at := later; !at.After(quiet); at = at.Add(time.Millisecond) {
		c.round(at)
	}
	c.waiting(quiet)
	if c.stalled(quiet.Add(ackStall / 2)) {
		t.Fatal("stalled half an ackStall after the credit filled, the silence before it counted")
	}
	for at := quiet; !at.After(quiet.Add(ackStall + time.Millisecond)); at = at.Add(time.Millisecond) {
		c.round(at)
	}
	c.waiting(quiet.Add(ackStall / 2)) // waiting again keeps the first time
	if !c.stalled(quiet.Add(ackStall + time.Millisecond)) {
		t.Fatal("no ack for ackStall since the credit filled: not stalled")
	}
	c.advance(c.acked+1, c.acked+1, 0, quiet.Add(ackStall+2*time.Millisecond))
	if !c.fullAt.IsZero() {
		t.Fatal("the credit moved and the wait was not forgotten")
	}
}
