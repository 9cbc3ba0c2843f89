package reporter

import "time"

// creditWindow is the credit of a reporter whose translator acknowledges
// wide numbers cumulatively: the translator took every number before
// acked, and Send keeps at most credit reports beyond it. It also keeps
// what the acks say of the translator's liveness.
type creditWindow struct {
	on        bool // wide numbers, NACKs taken: credit applies
	acked     uint32
	lastAckAt time.Time     // the last ack, advancing or not (the translator is there)
	movedAt   time.Time     // when acked last moved, or a probe was sent
	loopAt    time.Time     // the ack loop's last round
	awakeAt   time.Time     // when the ack loop last came back from a pause (listenGap)
	fullAt    time.Time     // when Send found the credit full, since it last moved (zero: not waiting)
	moved     chan struct{} // signalled when acked moves: a Send waiting for credit wakes
}

// newCreditWindow returns the credit window, on or not, starting at now:
// credit applies from the first report (and lapses after ackStall without
// an ack, for a translator that does not acknowledge).
func newCreditWindow(on bool, now time.Time) creditWindow {
	return creditWindow{on: on, lastAckAt: now, movedAt: now, moved: make(chan struct{}, 1)}
}

// round records a round of the ack loop at now: a pause longer than
// listenGap since the last says the reporter itself was not running.
func (c *creditWindow) round(now time.Time) {
	if now.Sub(c.loopAt) > listenGap {
		c.awakeAt = now
	}
	c.loopAt = now
}

// heard records an ack at now: the translator is there.
func (c *creditWindow) heard(now time.Time) { c.lastAckAt = now }

// full reports whether next, the number of the next report, is beyond the
// credit.
func (c *creditWindow) full(next uint32) bool { return c.on && next-c.acked >= credit }

// advance takes a cumulative ack naming every number before next as taken,
// of a translator that saw span numbers (0: not said); seq is the next
// number to send. It returns the numbers from which the translator never
// saw (before its span: unconfirmed) up to the new acked, and whether the
// ack moved. A forged or stale ack cannot give credit for reports not
// sent.
func (c *creditWindow) advance(next, seq uint32, span uint16, now time.Time) (unseenFrom, unseenTo uint32, moved bool) {
	c.on, c.lastAckAt = true, now
	if int32(next-c.acked) <= 0 || int32(seq-next) < 0 {
		return 0, 0, false
	}
	from := c.acked
	unseenFrom, unseenTo = from, from
	if span != 0 {
		if first := next - uint32(span); int32(first-from) > 0 {
			unseenTo = first
		}
	}
	c.acked, c.movedAt, c.fullAt = next, now, time.Time{}
	c.wake()
	return unseenFrom, unseenTo, true
}

// wake wakes a Send waiting for an ack.
func (c *creditWindow) wake() {
	select {
	case c.moved <- struct{}{}:
	default:
	}
}

// waiting records that Send found the credit full at now, the first time
// since it last moved.
func (c *creditWindow) waiting(now time.Time) {
	if c.fullAt.IsZero() {
		c.fullAt = now
	}
}

// stalled reports whether Send has waited for credit ackStall without an
// ack while the reporter was listening: the translator is gone or stuck.
// The wait counts, not only the silence: reports in flight to a
// translator that died and was restarted (which says which numbers it
// never saw) draw no ack until the reporter sends the new one more, so a
// restart longer than ackStall is not itself a stall.
func (c *creditWindow) stalled(now time.Time) bool {
	return now.Sub(c.lastAckAt) > ackStall && !c.fullAt.IsZero() && now.Sub(c.fullAt) > ackStall &&
		now.Sub(c.awakeAt) > ackSilence
}

// restart starts the credit again at now, after a stall: the reports in
// flight were counted unconfirmed, and acked moved past them.
func (c *creditWindow) restart(now time.Time) {
	c.lastAckAt, c.fullAt = now, time.Time{}
}

// probeDue reports whether a copy of the last report should show the
// translator its number: the acks stopped moving for probeAfter while the
// translator still talks. It counts the probe as a move.
func (c *creditWindow) probeDue(now time.Time) bool {
	if now.Sub(c.movedAt) > probeAfter && now.Sub(c.lastAckAt) <= ackSilence {
		c.movedAt = now
		return true
	}
	return false
}

// silent reports whether no ack came for ackSilence: a translator that
// died may have applied the last copy sent.
func (c *creditWindow) silent(now time.Time) bool { return now.Sub(c.lastAckAt) > ackSilence }

// deaf reports whether the silence may be the reporter's own: it was
// paused for part of it, and has not listened ackSilence since.
func (c *creditWindow) deaf(now time.Time) bool {
	return c.silent(now) && now.Sub(c.awakeAt) <= ackSilence
}
