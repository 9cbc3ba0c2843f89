package translator

import (
	"net/netip"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/exactly"
)

// Wide sequence numbers let the translator apply each report once and say
// which ones never came (docs/DTA-WIRE.md, "Exactly once"): per source
// (address, port and session) an exactly.State, in an exactly.Table.
type source = exactly.Source

// token names a wide report whose source's state is s. away says another
// engine keeps s (the one that read the report, home): settled, the report
// goes back to it as a Settlement, through the Translator.
type token struct {
	s    *exactly.State
	seq  uint32
	home int32
	away bool
}

// waiting is a report applied once the operation at pos (a packet's PSN,
// a work request's ID) is acknowledged.
type waiting[P any] struct {
	token
	pos P
}

// waitQueue holds reports waiting for their last operation's
// acknowledgement, in the order the operations were queued.
type waitQueue[P any] struct {
	q    []waiting[P]
	head int
}

// push appends t, waiting for pos. Settled entries are dropped from the
// front once they are half the queue, so that a queue never empty does not
// grow without end.
func (w *waitQueue[P]) push(t token, pos P) {
	if w.head > 0 && w.head >= len(w.q)/2 {
		n := copy(w.q, w.q[w.head:])
		clear(w.q[n:])
		w.q, w.head = w.q[:n], 0
	}
	w.q = append(w.q, waiting[P]{token: t, pos: pos})
}

// front returns the oldest report still waiting, or nil.
func (w *waitQueue[P]) front() *waiting[P] {
	if w.head == len(w.q) {
		w.q, w.head = w.q[:0], 0
		return nil
	}
	return &w.q[w.head]
}

// pop removes the oldest report and returns its token.
func (w *waitQueue[P]) pop() token {
	t := w.q[w.head].token
	w.q[w.head] = waiting[P]{}
	w.head++
	return t
}

// pend records that t's report is applied when q's last packet queued is
// acknowledged.
func (q *qp) pend(t token) { q.fin.push(t, q.req.Next().Add(minusOne)) }

// settle settles the reports whose packets q's responder acknowledged.
func (e *Engine) settle(q *qp) {
	for f := q.fin.front(); f != nil && f.pos.Diff(q.req.Una()) < 0; f = q.fin.front() {
		e.done(q.fin.pop(), false)
	}
}

// unconfirm settles the reports whose packets q never had acknowledged as
// unconfirmed: q failed, and they may or may not have been applied.
func (e *Engine) unconfirm(q *qp) {
	for q.fin.front() != nil {
		e.done(q.fin.pop(), true)
	}
}

// done settles t's report: applied, or unconfirmed (NACKed with that
// reason). A report whose source another engine keeps is kept for
// TakeSettled, for the Translator to take to that engine (Settle).
func (e *Engine) done(t token, unconfirmed bool) {
	if t.away {
		e.settled = append(e.settled, Settlement{t: t, unconfirmed: unconfirmed})
		return
	}
	e.release(t.s, t.seq, !unconfirmed)
	if unconfirmed {
		e.nack(t.s.Source(), t.seq, true, dta.ReasonUnconfirmed)
		e.c.Unconfirmed++
	}
}

// unconfirmTokens settles the reports of toks as unconfirmed; empty
// tokens are skipped.
func (e *Engine) unconfirmTokens(toks []token) {
	for _, t := range toks {
		if t.s != nil {
			e.done(t, true)
		}
	}
}

// Ticket names a wide report that one engine, its home, admitted (Admit)
// for another to translate (TranslateFor): the home keeps its source's
// state, since it reads the source's reports in order.
type Ticket struct{ t token }

// Outcome is what TranslateFor did with a report, for its home engine
// (HandedOver).
type Outcome struct{ taken, tracked, refused bool }

// Settlement is a report that an engine translated for another (its home)
// and whose operations were acknowledged or failed since: the home takes
// it with Settle.
type Settlement struct {
	t           token
	unconfirmed bool
}

// Home returns the index of the engine the settlement goes to, as given
// to Admit.
func (s Settlement) Home() int { return int(s.t.home) }

// Admit takes r, a report from src that another engine translates
// (TranslateFor), into the state e keeps of its source: the caller reads
// each source's reports in order and hands its wide ones to other engines
// through e. home is e's index among the engines, which the Settlement names.
// It returns false when r is not to be translated (refused: NACKed or
// counted as Translate would). A report that is not wide gets an empty
// Ticket.
func (e *Engine) Admit(r *dta.Report, src netip.AddrPort, home int, now int64) (Ticket, bool) {
	e.setNow(now)
	if !r.Header.Sequenced || !r.Header.Wide {
		return Ticket{}, true
	}
	s := e.admit(src, r)
	if s == nil {
		return Ticket{}, false
	}
	// Taken, and pending, until its translator says otherwise: a copy
	// later in this batch (a resend, a closing reporter's probe) is a
	// duplicate, and no ack passes it before its entry is written.
	seq := r.Header.Seq
	s.SetApplied(seq, true)
	if s.InWindow(seq) {
		s.SetPending(seq, true)
	}
	return Ticket{token{s: s, seq: seq, home: int32(home), away: true}}, true
}

// TranslateFor translates r, a report from src that another engine
// admitted (tk), and says what became of it: that engine takes the
// outcome (HandedOver) before it reads the source's next reports.
func (e *Engine) TranslateFor(r *dta.Report, src netip.AddrPort, tk Ticket, now int64) Outcome {
	e.setNow(now)
	var o Outcome
	o.taken, o.tracked, o.refused = e.translateFor(r, src, tk.t)
	return o
}

// HandedOver records o, what another engine's TranslateFor did with tk's
// report: one not taken is NACKed for a resend; one its translator does
// not settle later (not taken, or taken and not tracked) is settled now.
func (e *Engine) HandedOver(tk Ticket, o Outcome) {
	t := tk.t
	if t.s == nil {
		return
	}
	if !o.taken {
		t.s.SetApplied(t.seq, false)
		t.s.Missed(t.seq, e.now)
	}
	if !o.taken || !o.tracked {
		e.release(t.s, t.seq, o.taken && !o.refused)
	}
}

// TakeSettled appends to dst the reports e translated for other engines
// that were settled since the last call, forgets them, and returns the
// extended slice: each goes to its Home's Settle.
func (e *Engine) TakeSettled(dst []Settlement) []Settlement {
	dst = append(dst, e.settled...)
	clear(e.settled)
	e.settled = e.settled[:0]
	return dst
}

// Settle takes the reports other engines settled for e's sources.
func (e *Engine) Settle(ss []Settlement) {
	for _, st := range ss {
		t := st.t
		t.away = false
		e.done(t, st.unconfirmed)
	}
}

// release clears the pending mark of s's report seq and owes s an ack.
// applied says the report was applied: one whose number a cumulative ack
// already passed (a resend) is acknowledged on its own.
func (e *Engine) release(s *exactly.State, seq uint32, applied bool) {
	if !e.seqs.Tracks(s) {
		return // forgotten
	}
	if !s.InWindow(seq) {
		// A resend that came after the window moved on: no mark to
		// clear, and its sender waits for this.
		if applied {
			e.ackResend(s, seq)
		}
		return
	}
	s.SetPending(seq, false)
	e.owesAck(s)
	if applied {
		e.ackResend(s, seq)
	}
}

// owesAck lists s to get a cumulative ack with this round's output.
func (e *Engine) owesAck(s *exactly.State) {
	if !s.AckDue {
		s.AckDue = true
		e.ackDue = append(e.ackDue, s.Source())
	}
}

// ackResend acknowledges report seq of s on its own (Resend) when it was
// NACKed for a resend before, or is older than the window (a late
// resend): its sender holds a resent copy until then.
func (e *Engine) ackResend(s *exactly.State, seq uint32) {
	if !s.InWindow(seq) || s.Nacked(seq) {
		e.toReporter(s.Source(), dta.Ack{Seq: seq, Wide: true, Resend: true})
		e.c.ResendAcks++
	}
}

// admit decides about r, a wide report from addr, before it is translated:
// the state of its source (addr and r's session), or nil when it is not to
// be translated (counted with the reports): a duplicate of one applied
// (Duplicates; dropped without a NACK), a copy older than the window
// (Stale; NACKed unconfirmed), or a new source when no room is free
// (SourcesRefused; NACKed busy). A number past the next expected one NACKs
// the numbers skipped, with reason Missing, as the source's budget allows
// (nackMissing); one that would move a number not NACKed yet out of the
// window is NACKed busy (BeyondWithheld). e.seqs tracks the source from
// its first report on.
func (e *Engine) admit(addr netip.AddrPort, r *dta.Report) *exactly.State {
	seq := r.Header.Seq
	src := source{Addr: addr, Session: r.Header.Session}
	s := e.seqs.Get(addr, r.Header.Session)
	if s == nil {
		var evicted bool
		if s, evicted = e.seqs.Add(src, seq, e.now); s == nil {
			e.nack(src, seq, true, dta.ReasonBusy)
			e.c.SourcesRefused++
			e.countRefused(r)
			return nil
		}
		if evicted {
			e.c.SourcesEvicted++
		}
	}
	e.seqs.Touch(s, e.now)
	e.owesAck(s)
	w0 := s.Withheld()
	v, _ := s.Admit(seq)
	switch v {
	case exactly.Take:
		e.nackMissing(s, w0)
		return s
	case exactly.Beyond:
		// It would move a number whose NACK is withheld out of the
		// window: its sender may resend it once that is settled.
		e.nackMissing(s, w0)
		e.nack(src, seq, true, dta.ReasonBusy)
		e.c.NACKs++
		e.c.BeyondWithheld++
	case exactly.Duplicate:
		e.c.Duplicates++
		if !s.Pending(seq) {
			e.ackResend(s, seq) // applied before: its sender may wait
		}
	case exactly.BeforeFirst:
		// A copy (a resend or a probe) of a report that a translator
		// before this one, on this address, may have applied. Applied
		// again it could count twice: unconfirmed.
		e.nack(src, seq, true, dta.ReasonUnconfirmed)
		e.c.Unconfirmed++
	case exactly.Stale:
		// Older than the window and not owed: a copy from the network,
		// a replay or a forgery, whose fate is forgotten.
		e.nack(src, seq, true, dta.ReasonUnconfirmed)
		e.c.Stale++
	}
	e.countRefused(r)
	return nil
}

// nackMissing NACKs, as missing, the numbers s skipped whose NACK waits,
// as far as s's budget pays (exactly.State.NextMissing), and counts those
// of its newest gap left waiting; w0 is how many waited before the report.
// The rest hold its cumulative ack back, so that its sender never takes
// silence for an acknowledgement, until reports it sends pay for them.
func (e *Engine) nackMissing(s *exactly.State, w0 uint32) {
	w1 := s.Withheld()
	for n, ok := s.NextMissing(e.now); ok; n, ok = s.NextMissing(e.now) {
		e.nack(s.Source(), n, true, dta.ReasonMissing)
		e.c.Missing++
	}
	if w1 > w0 {
		// The older ones are NACKed first: the newest gap's left are
		// the last min(w2, w1-w0).
		e.c.MissingWithheld += uint64(min(s.Withheld(), w1-w0))
	}
}

// countRefused counts r, a report admit refused, with the reports.
func (e *Engine) countRefused(r *dta.Report) {
	if op := r.Header.Opcode; op.IsKnown() {
		countOp(&e.c.Reports, &e.c.RegisteredReports, op)
	} else {
		e.c.Malformed++
	}
}

// sendAcks queues a cumulative ack (wide, NACK clear) to each source that
// sent reports, or had reports applied, since its last one: the number
// before its oldest report still pending, or before the next it expects.
// Every number up to it was applied, held, NACKed, or is a duplicate, so
// the sender may reuse their resend slots: its window of unacknowledged
// reports is its credit. The span says from which number on this engine
// saw the source (docs/DTA-WIRE.md, "Exactly once"). A source acknowledged
// less than Config.AckPace ago stays due, for a later round (the next
// batch or tick), unless the engine flushes; so does one whose ack is held
// to its share of the credit. With n sources reporting, a source's ack
// that would move less than half its share waits n paces (at most
// ackCalm): each ack wakes its sender, and a sender with half its share
// left has no need of one yet, so the engine sends about as many acks
// with n sources as with one.
func (e *Engine) sendAcks() {
	// What a sender sent and the engine has not read yet waits in its
	// socket, up to a credit's worth (exactly.Credit): with n sources
	// reporting, the ack of one that keeps sending names at most the
	// number a credit's nth before one past its newest, so that the
	// socket holds about one credit however many send, not n. Acking
	// less than it could is safe: the sender keeps its copies longer.
	share := uint32(exactly.Credit)
	if e.active > 1 {
		share /= uint32(e.active)
	}
	calm := e.cfg.AckPace
	if e.active > 1 {
		calm = max(min(calm*time.Duration(e.active), ackCalm), e.cfg.AckPace)
	}
	kept := e.ackDue[:0]
	for _, src := range e.ackDue {
		s := e.seqs.Get(src.Addr, src.Session)
		if s == nil || !s.AckDue {
			continue
		}
		limit := s.Next() + 1
		if share < exactly.Credit && !e.ackAll && s.Recent(e.now, ackIdle) {
			limit = s.Next() + share - exactly.Credit
		}
		if since := e.now - s.AckedAt; !e.ackAll && s.AckedAt != 0 &&
			(since < int64(e.cfg.AckPace) || since < int64(calm) && s.AckMove(limit) < share/2) {
			kept = append(kept, src)
			continue
		}
		seq, span, ok, capped := s.AckBelow(limit)
		if capped {
			kept = append(kept, src) // again once it sends more, or stops
		} else {
			s.AckDue = false
		}
		if ok {
			s.AckedAt = e.now
			e.toReporter(src, dta.Ack{Seq: seq, Wide: true, Span: span})
			e.c.Acks++
		}
	}
	clear(e.ackDue[len(kept):])
	e.ackDue = kept
	e.ackAll = false
}

// ackIdle is how long a source sends nothing before its ack is no longer
// held to its share of the credit: none of its reports wait unread.
const ackIdle = 2 * time.Millisecond

// ackCalm bounds how long a source's ack waits for its sender to use half
// its share of the credit (sendAcks).
const ackCalm = time.Millisecond

// ackKeepalive is how often a source with reports not yet acknowledged
// gets its cumulative ack again, moved or not: its sender, waiting for
// credit, learns that the translator is there (reporter's ackStall).
const ackKeepalive = 50 * time.Millisecond

// keepAlive owes an ack to every source with numbers not yet
// acknowledged, or (for a while: its sender may have given up) a resend
// owed: a sender takes silence for a translator that died.
func (e *Engine) keepAlive() {
	e.active = 0
	for s := range e.seqs.All() {
		if s.Unacked(e.now) {
			e.owesAck(s)
		}
		if s.Recent(e.now, ackKeepalive) {
			e.active++
		}
	}
}
