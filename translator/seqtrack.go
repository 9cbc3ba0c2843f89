package translator

import (
	"math/bits"
	"net/netip"
	"time"

	"github.com/dtakit/dtakit/dta"
)

// Wide sequence numbers let the translator apply each report once and say
// which ones never came (docs/DTA-WIRE.md, "Exactly once"). Per source
// address, port and session it keeps the next number it expects and which
// of the seqWindow numbers before it it applied. The session, random and
// chosen by the sender, keeps a sender that cannot see the traffic from
// moving another's numbers or sending acks it believes ("Threat model").
const (
	// seqWindow is the span of numbers behind the newest that a source's
	// state remembers: the reporter's resend window (reporter.WideWindow).
	seqWindow = 4096
	// maxSources bounds the sources tracked.
	maxSources = 4096
	// sourceIdle is how long a source must have been silent before a new
	// one may take its place when maxSources are tracked: longer than a
	// reporter waits for an ack before it counts its reports unconfirmed
	// (a second), so that new sessions, forged or not, never push out one
	// that is reporting.
	sourceIdle = 2 * time.Second
	// maxMissingNACKs bounds the NACKs one gap sends: a larger gap is more
	// than the sender still holds.
	maxMissingNACKs = seqWindow
)

// source names the sender of wide reports: its address and port, and the
// session its reports carry.
type source struct {
	addr    netip.AddrPort
	session uint64
}

type seqState struct {
	src     source
	first   uint32 // the first number seen: the ack's span starts there
	next    uint32 // one past the newest number seen
	ackFrom uint32 // one past the number the last cumulative ack named
	applied [seqWindow / 64]uint64
	// pending marks reports taken whose operations the collector has not
	// acknowledged yet: the cumulative ack stops before the oldest.
	pending [seqWindow / 64]uint64
	// nacked marks numbers NACKed for a resend: their sender holds a copy,
	// which it resends until that is acknowledged on its own (Resend).
	nacked [seqWindow / 64]uint64
	nackAt int64 // engine time of the last NACK for a resend
	// late marks, among the seqWindow numbers before the window, those
	// NACKed for a resend that left the window before their resend was
	// applied: a resend of one is taken once, where any other number
	// older than the window is refused (Stale). A fixed bitmap, so that
	// however many are owed, none is forgotten while its sender may
	// still hold a copy, and a source costs the same.
	late    [seqWindow / 64]uint64
	lastUse uint64 // the engine's report count when last used
	lastAt  int64  // engine time of its last report
	ackDue  bool   // an ack may have moved since the last one sent
}

// inWindow reports whether seq is one of the seqWindow numbers before next.
func (s *seqState) inWindow(seq uint32) bool {
	d := int32(seq - s.next)
	return d < 0 && d > -seqWindow
}

// inLate reports whether seq is one of the seqWindow numbers before the
// window, those the late bitmap covers.
func (s *seqState) inLate(seq uint32) bool {
	d := int32(seq - s.next)
	return d <= -seqWindow && d > -2*seqWindow
}

// nackFor records that seq was NACKed for a resend: in the window, or
// among the late numbers when it is older.
func (s *seqState) nackFor(seq uint32, now int64) {
	switch {
	case s.inWindow(seq):
		s.nack(seq, now)
	case s.inLate(seq):
		mark(&s.late, seq, true)
	}
}

// takeLate reports whether seq is a late number, and forgets it: its
// resend is taken once. The newest late number (a window behind next)
// is still in the window's bitmaps: its bit moves to late only when the
// number a window after it comes.
func (s *seqState) takeLate(seq uint32) bool {
	switch {
	case !s.inLate(seq):
		return false
	case int32(seq-s.next) == -seqWindow:
		if int32(seq-s.first) < 0 || !marked(&s.nacked, seq) || marked(&s.applied, seq) {
			return false
		}
		mark(&s.applied, seq, true)
	case marked(&s.late, seq):
		mark(&s.late, seq, false)
	default:
		return false
	}
	return true
}

// setPending marks seq pending or not.
func (s *seqState) setPending(seq uint32, on bool) { mark(&s.pending, seq, on) }

// nack marks seq NACKed for a resend, at engine time now.
func (s *seqState) nack(seq uint32, now int64) {
	mark(&s.nacked, seq, true)
	s.nackAt = now
}

// owes reports whether a number NACKed for a resend is not applied yet.
func (s *seqState) owes() bool {
	for i := range s.nacked {
		if s.nacked[i]&^s.applied[i] != 0 {
			return true
		}
	}
	return false
}

// mark sets or clears seq's bit in bits.
func mark(bits *[seqWindow / 64]uint64, seq uint32, on bool) {
	i := seq % seqWindow
	if on {
		bits[i/64] |= 1 << (i % 64)
	} else {
		bits[i/64] &^= 1 << (i % 64)
	}
}

// marked reports seq's bit in bits.
func marked(bits *[seqWindow / 64]uint64, seq uint32) bool {
	i := seq % seqWindow
	return bits[i/64]&(1<<(i%64)) != 0
}

// firstPending returns the oldest pending number from ackFrom on, or next.
func (s *seqState) firstPending() uint32 {
	from := s.ackFrom
	if d := int32(s.next - from); d > seqWindow || d < 0 {
		from = s.next - seqWindow + 1
	}
	for n := from; n != s.next; {
		i := n % seqWindow
		w := s.pending[i/64] >> (i % 64)
		if w != 0 {
			if p := n + uint32(bits.TrailingZeros64(w)); int32(p-s.next) < 0 {
				return p
			}
			break // a stale mark of a number older than the window
		}
		n += 64 - i%64
		if int32(n-s.next) > 0 {
			break
		}
	}
	return s.next
}

// token names a wide report whose source engine by keeps in s: the engine
// that translates it may be another shard's.
type token struct {
	s   *seqState
	by  *Engine
	seq uint32
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
func (e *Engine) pend(q *qp, t token) { q.fin.push(t, q.req.Next().Add(minusOne)) }

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
// reason). Another engine's report goes to its inbox, which it takes in at
// its next Output.
func (e *Engine) done(t token, unconfirmed bool) {
	if t.by != e {
		t.by.inMu.Lock()
		t.by.inbox = append(t.by.inbox, settled{token: t, unconfirmed: unconfirmed})
		t.by.inMu.Unlock()
		return
	}
	e.release(t.s, t.seq, !unconfirmed)
	if unconfirmed {
		e.nack(t.s.src, t.seq, true, dta.ReasonUnconfirmed)
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

// settled is a report another engine settled for this one.
type settled struct {
	token
	unconfirmed bool
}

// takeInbox settles the reports other engines settled for this one.
func (e *Engine) takeInbox() {
	e.inMu.Lock()
	in := e.inbox
	e.inbox = e.spare[:0]
	e.inMu.Unlock()
	for i := range in {
		e.done(in[i].token, in[i].unconfirmed)
		in[i] = settled{}
	}
	e.spare = in[:0]
}

// release clears the pending mark of s's report seq and owes s an ack.
// applied says the report was applied: one whose number a cumulative ack
// already passed (a resend) is acknowledged on its own.
func (e *Engine) release(s *seqState, seq uint32, applied bool) {
	if e.seqs[s.src] != s {
		return // forgotten
	}
	if !s.inWindow(seq) {
		// A resend that came after the window moved on: no mark to
		// clear, and its sender waits for this.
		if applied {
			e.ackResend(s, seq)
		}
		return
	}
	s.setPending(seq, false)
	if !s.ackDue {
		s.ackDue = true
		e.ackDue = append(e.ackDue, s.src)
	}
	if applied {
		e.ackResend(s, seq)
	}
}

// ackResend acknowledges report seq of s on its own (Resend) when it was
// NACKed for a resend before, or is older than the window (a late
// resend): its sender holds a resent copy until then.
func (e *Engine) ackResend(s *seqState, seq uint32) {
	if !s.inWindow(seq) || marked(&s.nacked, seq) {
		e.toReporter(s.src, dta.Ack{Seq: seq, Wide: true, Resend: true})
		e.c.ResendAcks++
	}
}

// admit decides about r, a wide report from addr, before it is translated:
// the state of its source (addr and r's session), or nil when it is not to
// be translated (counted with the reports): a duplicate of one applied
// (Duplicates; dropped without a NACK), a copy older than the window
// (Stale; NACKed unconfirmed), or a new source when no room is free
// (SourcesRefused; NACKed busy). A number past the next expected one NACKs
// the numbers skipped, with reason Missing. e.seqs tracks the source from
// its first report on.
func (e *Engine) admit(addr netip.AddrPort, r *dta.Report) *seqState {
	seq := r.Header.Seq
	src := source{addr, r.Header.Session}
	s := e.seqs[src]
	if s == nil {
		if s = e.newSource(src); s == nil {
			e.nack(src, seq, true, dta.ReasonBusy)
			e.c.SourcesRefused++
			e.countRefused(r)
			return nil
		}
		s.first, s.next, s.ackFrom = seq, seq, seq
	}
	e.seqTick++
	s.lastUse, s.lastAt = e.seqTick, e.now
	if !s.ackDue {
		s.ackDue = true
		e.ackDue = append(e.ackDue, src)
	}
	d := int32(seq - s.next)
	switch {
	case d >= 0:
		gap := uint32(d)
		// The numbers now entering the window were not applied. Those
		// that left it (n - seqWindow, on the same bit) NACKed for a
		// resend and not applied stay owed while they are late numbers
		// of the new next (seq+1); the bit forgets the number a window
		// older still.
		for n, i := s.next, uint32(0); i <= min(gap, seqWindow); n, i = n+1, i+1 {
			old := n - seqWindow
			owed := int32(old-s.first) >= 0 && int32(n-seq) > 1-seqWindow &&
				marked(&s.nacked, n) && !marked(&s.applied, n)
			mark(&s.late, n, owed)
			mark(&s.applied, n, false)
			mark(&s.pending, n, false)
			mark(&s.nacked, n, false)
		}
		s.next = seq + 1
		for i := uint32(0); i < min(gap, maxMissingNACKs); i++ {
			n := seq - gap + i
			e.nack(src, n, true, dta.ReasonMissing)
			s.nackFor(n, e.now)
			e.c.Missing++
		}
		return s
	case d > -seqWindow:
		switch {
		case marked(&s.applied, seq):
			e.c.Duplicates++
			if !marked(&s.pending, seq) {
				e.ackResend(s, seq) // applied before: its sender may wait
			}
		case int32(seq-s.first) < 0:
			// Before the first number this engine saw from src: a copy
			// (a resend or a probe) of a report that a translator before
			// this one, on this address, may have applied. Applied again
			// it could count twice: unconfirmed.
			e.nack(src, seq, true, dta.ReasonUnconfirmed)
			e.c.Unconfirmed++
		default:
			return s
		}
		e.countRefused(r)
		return nil
	}
	// Older than the window: the resend of a report NACKed that left the
	// window since is taken; any other number's fate is forgotten, so it
	// is refused (a copy from the network, a replay or a forgery).
	if s.takeLate(seq) {
		return s
	}
	e.nack(src, seq, true, dta.ReasonUnconfirmed)
	e.c.Stale++
	e.countRefused(r)
	return nil
}

// countRefused counts r, a report admit refused, with the reports.
func (e *Engine) countRefused(r *dta.Report) {
	if op := r.Header.Opcode; op.IsKnown() {
		e.c.Reports[opIndex(op)]++
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
// saw the source (docs/DTA-WIRE.md, "Exactly once").
func (e *Engine) sendAcks() {
	for _, src := range e.ackDue {
		s := e.seqs[src]
		if s == nil || !s.ackDue {
			continue
		}
		s.ackDue = false
		to := s.firstPending()
		if to == s.first {
			continue // nothing this engine saw is settled yet
		}
		s.ackFrom = to
		e.toReporter(src, dta.Ack{Seq: to - 1, Wide: true, Span: uint16(min(to-s.first, 0xffff))})
		e.c.Acks++
	}
	clear(e.ackDue)
	e.ackDue = e.ackDue[:0]
}

// ackKeepalive is how often a source with reports not yet acknowledged
// gets its cumulative ack again, moved or not: its sender, waiting for
// credit, learns that the translator is there (reporter's ackStall).
const ackKeepalive = 50 * time.Millisecond

// owedFor is how long after its last NACK for a resend a source gets
// keepalive acks while a resend is owed: longer than a sender holds a
// copy (a second) and resends it.
const owedFor = 2 * time.Second

// keepAlive owes an ack to every source with numbers not yet acknowledged.
func (e *Engine) keepAlive() {
	for src, s := range e.seqs {
		// Also while a resend is owed (for a while: its sender may have
		// given up): a sender takes silence for a translator that died.
		owed := e.now-s.nackAt < int64(owedFor) && s.owes()
		if (s.ackFrom != s.next || owed) && !s.ackDue {
			s.ackDue = true
			e.ackDue = append(e.ackDue, src)
		}
	}
}

// setApplied records that the wide report numbered seq was taken (or,
// taken false, that it was not after all). The newest late number's mark
// is still in the window's bitmaps (takeLate): a resend of it not taken
// stays owed when the number a window after it comes.
func (s *seqState) setApplied(seq uint32, taken bool) {
	if d := int32(seq - s.next); d < 0 && d >= -seqWindow {
		mark(&s.applied, seq, taken)
	}
}

// newSource starts tracking src. When maxSources are tracked it forgets the
// source used least recently if that one has been silent for sourceIdle
// (counted in SourcesEvicted), and otherwise returns nil: a flood of new
// sessions cannot push out a source that is reporting.
func (e *Engine) newSource(src source) *seqState {
	if e.seqs == nil {
		e.seqs = make(map[source]*seqState)
	}
	if len(e.seqs) >= maxSources {
		if e.now < e.evictAt {
			return nil // no source can have been silent long enough yet
		}
		var s0 *seqState
		for _, s := range e.seqs {
			if s0 == nil || s.lastUse < s0.lastUse {
				s0 = s
			}
		}
		if e.now-s0.lastAt < int64(sourceIdle) {
			// Every other source reported after s0: none is idle
			// before s0 would be, so a flood of new sessions does not
			// cost a scan of the table each.
			e.evictAt = s0.lastAt + int64(sourceIdle)
			return nil
		}
		delete(e.seqs, s0.src)
		e.c.SourcesEvicted++
	}
	s := &seqState{src: src, lastAt: e.now}
	e.seqs[src] = s
	return s
}
