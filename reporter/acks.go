package reporter

import (
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/clock"
	"github.com/dtakit/dtakit/internal/exactly"
	"github.com/dtakit/dtakit/internal/udpio"
)

// readAcks takes the translator's acks and resends the reports it NACKs.
func (r *Reporter) readAcks() {
	defer r.wg.Done()
	_ = r.ack.ReadLoop(udpio.Buffers(16, 64), time.Millisecond, func(ms []udpio.Datagram, now time.Time) bool {
		more := r.handleAcks(ms, now)
		r.deliverLosses()
		return more
	})
}

// handleAcks takes a batch of acks (empty on an idle tick), queues the
// reports they NACK for resending and resends those whose backoff passed,
// as the pace allows; it reports false once the reporter is closed.
func (r *Reporter) handleAcks(ms []udpio.Datagram, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.credit.round(now)
	for i := range ms {
		if a, ok := r.parseAck(ms[i]); ok {
			r.takeAck(a, now)
		}
	}
	r.checkResent(now)
	r.resendDue(now)
	r.store.Expire(clock.Of(now), heldFor)
	return true
}

// parseAck decodes d, an ack about this reporter's reports, counting it
// when it is not one: from another address than the translator's (only
// the translator NACKs: a forgery or a stray), malformed, or (wide) narrow
// or of another session, which is not believed and no sign that the
// translator is there.
func (r *Reporter) parseAck(d udpio.Datagram) (dta.Ack, bool) {
	if unmapped(d.Addr) != r.cfg.Translator {
		r.c.Foreign++
		return dta.Ack{}, false
	}
	a, err := dta.ParseAck(d.Buf)
	switch {
	case err != nil:
		r.c.Unknown++
	case r.cfg.WideSequence && (!a.Wide || a.Session != r.session):
		r.c.Foreign++
	default:
		return a, true
	}
	return dta.Ack{}, false
}

// takeAck takes a, an ack, a resend's own ack or a NACK.
func (r *Reporter) takeAck(a dta.Ack, now time.Time) {
	wide := a.Wide && r.cfg.WideSequence
	switch {
	case a.NACK:
		r.takeNACK(a, now)
	case wide && a.Resend:
		// A resend applied: its copy is done, and a Send waiting for it
		// (Store.Behind) wakes.
		if r.store.Acked(a.Seq) {
			r.c.ResendAcks++
			r.credit.wake()
		}
		r.credit.heard(now)
	case wide:
		r.c.Acks++
		// Numbers before the span never reached this translator (it
		// started after them): unconfirmed.
		from, to, _ := r.credit.advance(a.Seq+1, r.seq, a.Span, now)
		for n := from; n != to; n++ {
			r.unconfirm(n)
		}
	}
}

// takeNACK takes a NACK of report a.Seq: counted unconfirmed or lost when
// a resend would not help, else queued for a resend after its backoff (at
// most MaxResends).
func (r *Reporter) takeNACK(a dta.Ack, now time.Time) {
	r.c.NACKs++
	r.lastEvent = now
	h := r.store.Held(a.Seq)
	if h != nil {
		h.WaitAt = 0 // answered
	}
	wide := a.Wide && r.cfg.WideSequence
	switch {
	case wide && a.Reason == dta.ReasonUnconfirmed:
		// Taken, but its collector's acknowledgement never came: a
		// resend could apply it twice.
		r.unconfirm(a.Seq)
		return
	case wide && a.Reason == dta.ReasonRejected:
		// Refused for good: a resend would be refused the same way.
		if h == nil || !h.Lost {
			r.c.Rejected++
		}
		r.lose(a.Seq, a.Reason)
		return
	}
	if r.pace.slowDown(now) {
		r.c.Backoffs++
	}
	if h == nil && a.Wide == r.cfg.WideSequence {
		var created bool
		if h, created = r.store.Hold(a.Seq); created {
			h.Order = r.sentOrder(a.Seq) // the ring held it: sent lately
			if rep, err := dta.ParseReport(h.B); err == nil && rep.Header.Opcode == dta.OpKeyWrite {
				h.KW, h.Key = true, rep.KeyWrite.Key
			}
		}
	}
	switch {
	case h == nil || h.Lost:
		r.c.Unknown++ // never sent, no longer in the window, or already lost
		// Sent, and gone from the window: lost, unless a cumulative ack
		// or ackStall passed it (acknowledged, or counted unconfirmed
		// already: a restarted translator NACKs as missing numbers it
		// never saw).
		if wide && r.seq-a.Seq-1 < 1<<31 && !(r.credit.on && int32(a.Seq-r.credit.acked) < 0) {
			r.lose(a.Seq, a.Reason)
		}
	case a.Reason == dta.ReasonBusy && wide:
		// Flow control, not a refusal: the translator is alive and will
		// take it once its queue drains. Resent for as long as it says
		// busy, each time later (up to 128 ms); the window holds
		// Send back meanwhile, and Close counts what is still waiting.
		h.Busy++
		r.queueResend(a, h, now, time.Millisecond<<min(h.Busy-1, busyBackoffShift))
	case h.Resends >= r.cfg.MaxResends:
		r.c.GaveUp++
		r.lose(a.Seq, a.Reason)
	default:
		h.Resends++
		r.queueResend(a, h, now, time.Millisecond<<(h.Resends-1))
	}
}

// busyBackoffShift caps the backoff of a report NACKed busy again and
// again at 1 ms << busyBackoffShift (128 ms).
const busyBackoffShift = 7

// queueResend queues the NACKed report h for a resend after backoff.
func (r *Reporter) queueResend(a dta.Ack, h *exactly.Copy, now time.Time, backoff time.Duration) {
	h.Probes = 0 // refused: its copies start again
	h.Reason = uint8(a.Reason)
	r.store.Resendable(a.Seq)
	r.resends = append(r.resends, resend{seq: a.Seq, due: now.Add(backoff), reason: a.Reason})
}

// checkResent sends again, as probes, the resends that waited resendWait
// without an ack or a NACK: the resend, or its answer, was lost on the
// way, or the translator holds the report (an Append entry waiting for
// its batch: it answers copies of it only once it is written). A probe is
// not a resend: it asks, it does not answer a refusal, so it does not
// spend MaxResends; the probes since the last NACK are bounded by
// MaxResends on their own. r.mu is held.
func (r *Reporter) checkResent(now time.Time) {
	if r.credit.deaf(now) {
		// The reporter itself was paused (descheduled, a machine under
		// load) for part of the silence: the translator's answers may
		// come now. Neither sent again nor unconfirmed until it has
		// listened ackSilence.
		return
	}
	for {
		seq, h, ok := r.store.Overdue(clock.Of(now), resendWait)
		if !ok {
			return
		}
		switch {
		case r.seq-seq >= WideWindow || r.credit.silent(now):
			// The translator no longer tells a copy of it from a new
			// report, or is silent (it may have died, and a restarted one
			// cannot tell), and the last copy may have arrived: sent
			// again, it could be applied twice. (A NACKed copy was not
			// applied, so a resend after a NACK is safe however old.)
			r.unconfirm(seq)
		case h.Probes >= r.cfg.MaxResends:
			// Its last copy went unanswered and may have been applied:
			// unconfirmed, not lost.
			r.c.GaveUp++
			r.unconfirm(seq)
		default:
			h.Probes++
			r.c.Retimed++
			r.resends = append(r.resends, resend{seq: seq, due: now, reason: dta.Reason(h.Reason)})
		}
	}
}

// resendDue sends the NACKed reports whose backoff has passed, as the pace
// allows, and flushes. A Key-Write report a newer one of its key
// superseded is not resent. r.mu is held.
func (r *Reporter) resendDue(now time.Time) {
	r.pace.refill(now)
	keep := r.resends[:0]
	for _, q := range r.resends {
		if q.due.After(now) || r.pace.limited() {
			keep = append(keep, q)
			continue
		}
		h := r.store.Held(q.seq)
		if h == nil || h.Lost {
			r.c.Moot++ // acknowledged or lost meanwhile
			continue
		}
		if h.KW {
			if e := r.kwLast[kwIndex(h.Key)]; e.valid && e.key == h.Key && e.seq != q.seq {
				r.c.Superseded++
				r.store.Drop(q.seq)
				continue
			}
		}
		r.c.Resent++
		r.lastEvent = now // its NACK, if any, is yet to come
		h.LastSent = clock.Of(now)
		if r.credit.on {
			// Wide numbers: the translator acknowledges the resend alone
			// (R), or it is sent again. Narrow ones have no such ack:
			// sent again, one applied would be applied twice.
			r.store.Await(q.seq, h, clock.Of(now))
		}
		r.pace.spend()
		r.batch = append(r.batch, udpio.Datagram{Buf: h.B})
		if len(r.batch) >= r.cfg.Batch {
			_ = r.flushLocked()
		}
	}
	clear(r.resends[len(keep):])
	r.resends = keep
	if len(r.batch) > 0 {
		_ = r.flushLocked()
	}
}
