package exactly

import (
	"math/bits"
	"net/netip"
	"time"
)

// Source names the sender of wide reports: its address and port, and the
// session its reports carry. The session, random and chosen by the
// sender, keeps a sender that cannot see the traffic from moving
// another's numbers or sending acks it believes ("Threat model").
type Source struct {
	Addr    netip.AddrPort
	Session uint64
}

// A source's missing NACKs are paid for by the reports it sends, so that a
// report skipping numbers of a forged source cannot draw a flood of NACKs
// to the address it forged (docs/DTA-WIRE.md, "Threat model"): a new
// source may draw NewSourceNACKs, each report it sends earns
// NACKsPerReport more, and the unspent budget is capped at MaxNACKBudget.
// A missing number whose NACK waits for budget holds the cumulative ack
// back until it is NACKed or its report comes.
const (
	NewSourceNACKs = 16
	NACKsPerReport = 2
	MaxNACKBudget  = Window
)

// OwedFor is how long after its last NACK for a resend a source still
// gets acks while a resend is owed: longer than a sender holds a copy (a
// second) and resends it.
const OwedFor = 2 * time.Second

// State is what a translator keeps of one source: the next number it
// expects and, for the Window numbers before it, which were applied,
// which wait for their collector's acknowledgement, which were NACKed for
// a resend; and which of the Window numbers before those were NACKed and
// left the window before their resend came (late). Its times are Unix
// nanoseconds.
type State struct {
	src     Source
	table   *Table // the Table tracking s, nil once it forgot s
	first   uint32 // the first number seen: the ack's span starts there
	next    uint32 // one past the newest number seen
	ackFrom uint32 // one past the number the last cumulative ack named
	applied Bits
	// pending marks reports taken whose operations the collector has not
	// acknowledged yet: the cumulative ack stops before the oldest.
	pending Bits
	// nacked marks numbers NACKed for a resend: their sender holds a copy,
	// which it resends until that is acknowledged on its own (Resend).
	nacked Bits
	nackAt int64 // the last NACK for a resend
	// late marks, among the Window numbers before the window, those
	// NACKed for a resend that left the window before their resend was
	// applied: a resend of one is taken once, where any other number
	// older than the window is refused (Stale). A fixed bitmap, so that
	// however many are owed, none is forgotten while its sender may
	// still hold a copy, and a source costs the same.
	late Bits
	// withheld marks missing numbers in the window whose NACK waits for
	// budget (NACKs left the source may draw): the cumulative ack stops
	// before the oldest, so that silence about a number is never taken
	// for its acknowledgement.
	withheld     Bits
	nWithheld    uint32
	withheldFrom uint32 // no withheld number is before it
	budget       uint32
	lastUse      uint64 // the table's admission count when last used
	lastAt       int64  // the time of its last report
	// AckDue says an ack may have moved since the last one sent: the
	// translator lists the source to be acknowledged once.
	AckDue bool
	// AckedAt is when the translator last sent the source a cumulative
	// ack (0: never), which paces the next.
	AckedAt int64
}

// Source returns the source whose state s is.
func (s *State) Source() Source { return s.src }

// Verdict is what Admit decided about a number.
type Verdict uint8

const (
	// Take: translate it (new, in the window and not applied, or a late
	// number's resend).
	Take Verdict = iota
	// Duplicate: applied already; dropped without a NACK.
	Duplicate
	// BeforeFirst: in the window but before the first number this state
	// saw: a translator before this one may have applied it, so it is
	// unconfirmed.
	BeforeFirst
	// Stale: older than the window and not owed: its fate is forgotten.
	Stale
	// Beyond: taken, it would move a number whose NACK is withheld out
	// of the window, unacknowledged and never NACKed: refused for now (a
	// sender keeping its credit never gets this far ahead).
	Beyond
)

// Admit decides about number seq of the source, which earns the source
// NACKsPerReport of budget. A number at or past the next expected one
// moves the window to it and returns in gap how many it skipped: those
// still in the window are withheld until the caller NACKs them as missing
// (NextMissing). A late number's resend is taken once.
func (s *State) Admit(seq uint32) (v Verdict, gap uint32) {
	s.budget = min(s.budget+NACKsPerReport, MaxNACKBudget)
	d := Diff(seq, s.next)
	switch {
	case d >= 0:
		if s.nWithheld > 0 && s.passesWithheld(seq) {
			return Beyond, 0
		}
		return Take, s.advance(seq)
	case d > -Window:
		switch {
		case s.applied.Has(seq):
			return Duplicate, 0
		case Diff(seq, s.first) < 0:
			return BeforeFirst, 0
		}
		if s.withheld.Has(seq) {
			s.withheld.Set(seq, false)
			s.nWithheld--
		}
		return Take, 0
	case s.takeLate(seq):
		return Take, 0
	}
	return Stale, 0
}

// advance moves the window so that seq is its newest number and returns
// how many numbers were skipped.
func (s *State) advance(seq uint32) uint32 {
	gap := seq - s.next
	// The numbers now entering the window were not applied. Those that
	// left it (n - Window, on the same bit) NACKed for a resend and not
	// applied stay owed while they are late numbers of the new next
	// (seq+1); the bit forgets the number a window older still.
	for n, i := s.next, uint32(0); i <= min(gap, Window); n, i = n+1, i+1 {
		old := n - Window
		owed := Diff(old, s.first) >= 0 && Diff(n, seq) > 1-Window &&
			s.nacked.Has(n) && !s.applied.Has(n)
		s.late.Set(n, owed)
		s.applied.Set(n, false)
		s.pending.Set(n, false)
		s.nacked.Set(n, false)
	}
	// The skipped numbers still in the window wait for their NACK.
	from := s.next
	if gap >= Window {
		from = seq - Window + 1
	}
	if s.nWithheld == 0 {
		s.withheldFrom = from
	}
	for n := from; n != seq; n++ {
		s.withheld.Set(n, true)
	}
	s.nWithheld += seq - from
	s.next = seq + 1
	return gap
}

// passesWithheld reports whether moving the window to seq would move a
// withheld number out of it.
func (s *State) passesWithheld(seq uint32) bool {
	if Diff(seq, s.next) >= Window {
		return true
	}
	for n := s.next; n != seq+1; n++ {
		if s.withheld.Has(n) { // the bit of n - Window, leaving
			return true
		}
	}
	return false
}

// Withheld returns how many missing numbers wait for their NACK.
func (s *State) Withheld() uint32 { return s.nWithheld }

// NextMissing returns the oldest missing number whose NACK was withheld,
// when the source's budget pays for one more NACK, and records it NACKed
// at time now (Missed); ok is false otherwise.
func (s *State) NextMissing(now int64) (seq uint32, ok bool) {
	if s.nWithheld == 0 || s.budget == 0 {
		return 0, false
	}
	n := s.withheldFrom
	if !s.InWindow(n) {
		n = s.next - Window + 1
	}
	for ; n != s.next; n++ {
		if s.withheld.Has(n) {
			s.withheld.Set(n, false)
			s.nWithheld--
			s.budget--
			s.withheldFrom = n + 1
			s.Missed(n, now)
			return n, true
		}
	}
	s.nWithheld = 0 // not reached: every withheld number is in the window
	return 0, false
}

// InWindow reports whether seq is one of the Window numbers before next.
func (s *State) InWindow(seq uint32) bool {
	d := Diff(seq, s.next)
	return d < 0 && d > -Window
}

// inLate reports whether seq is one of the Window numbers before the
// window, those the late bitmap covers.
func (s *State) inLate(seq uint32) bool {
	d := Diff(seq, s.next)
	return d <= -Window && d > -2*Window
}

// Missed records that seq was NACKed for a resend at time now: in the
// window, or among the late numbers when it is older.
func (s *State) Missed(seq uint32, now int64) {
	switch {
	case s.InWindow(seq):
		s.nacked.Set(seq, true)
		s.nackAt = now
	case s.inLate(seq):
		s.late.Set(seq, true)
	}
}

// takeLate reports whether seq is a late number, and forgets it: its
// resend is taken once. The newest late number (a window behind next)
// is still in the window's bitmaps: its bit moves to late only when the
// number a window after it comes.
func (s *State) takeLate(seq uint32) bool {
	switch {
	case !s.inLate(seq):
		return false
	case Diff(seq, s.next) == -Window:
		if Diff(seq, s.first) < 0 || !s.nacked.Has(seq) || s.applied.Has(seq) {
			return false
		}
		s.applied.Set(seq, true)
	case s.late.Has(seq):
		s.late.Set(seq, false)
	default:
		return false
	}
	return true
}

// SetPending marks seq pending (taken, its operations not acknowledged
// yet) or not.
func (s *State) SetPending(seq uint32, on bool) { s.pending.Set(seq, on) }

// Pending reports whether seq is marked pending.
func (s *State) Pending(seq uint32) bool { return s.pending.Has(seq) }

// Nacked reports whether seq was NACKed for a resend.
func (s *State) Nacked(seq uint32) bool { return s.nacked.Has(seq) }

// SetApplied records that number seq was taken (or, taken false, that it
// was not after all). The newest late number's mark is still in the
// window's bitmaps (takeLate): a resend of it not taken stays owed when
// the number a window after it comes.
func (s *State) SetApplied(seq uint32, taken bool) {
	if d := Diff(seq, s.next); d < 0 && d >= -Window {
		s.applied.Set(seq, taken)
	}
}

// Owes reports whether a number NACKed for a resend is not applied yet.
func (s *State) Owes() bool {
	for i := range s.nacked {
		if s.nacked[i]&^s.applied[i] != 0 {
			return true
		}
	}
	return false
}

// Unacked reports whether the source has numbers its last cumulative ack
// did not pass (while numbers whose NACK waits for budget hold it back,
// only for OwedFor after its last report: a forged gap draws no acks for
// ever), a resend taken and not yet acknowledged (pending: its sender
// waits for its ack of its own), or, for OwedFor after its last NACK for
// a resend, a resend owed: its sender takes silence for a translator that
// died.
func (s *State) Unacked(now int64) bool {
	return s.ackFrom != s.next && (s.nWithheld == 0 || now-s.lastAt < int64(OwedFor)) ||
		s.resendPending() || now-s.nackAt < int64(OwedFor) && s.Owes()
}

// resendPending reports whether a number NACKed for a resend is pending.
func (s *State) resendPending() bool {
	for i := range s.nacked {
		if s.nacked[i]&s.pending[i] != 0 {
			return true
		}
	}
	return false
}

// firstPending returns the oldest pending number from ackFrom on, or next.
func (s *State) firstPending() uint32 {
	from := s.ackFrom
	if d := Diff(s.next, from); d > Window || d < 0 {
		from = s.next - Window + 1
	}
	for n := from; n != s.next; {
		i := n % Window
		w := (s.pending[i/64] | s.withheld[i/64]) >> (i % 64)
		if w != 0 {
			if p := n + uint32(bits.TrailingZeros64(w)); Diff(p, s.next) < 0 {
				return p
			}
			break // a stale mark of a number older than the window
		}
		n += 64 - i%64
		if Diff(n, s.next) > 0 {
			break
		}
	}
	return s.next
}

// Recent reports whether the source reported within d before now.
func (s *State) Recent(now int64, d time.Duration) bool { return now-s.lastAt < int64(d) }

// Next returns one past the newest number the source sent.
func (s *State) Next() uint32 { return s.next }

// AckMove returns at most how far an ack capped at limit would move past
// the last one (AckBelow): it does not look for pending numbers, which
// could stop it sooner.
func (s *State) AckMove(limit uint32) uint32 {
	to := s.next
	if Diff(to, limit) > 0 {
		to = limit
	}
	if Diff(to, s.ackFrom) <= 0 {
		return 0
	}
	return to - s.ackFrom
}

// AckBelow is Ack naming at most the number before limit; capped says
// limit held it back (ok is false when so held it would not move).
func (s *State) AckBelow(limit uint32) (seq uint32, span uint16, ok, capped bool) {
	to := s.firstPending()
	if Diff(to, limit) > 0 {
		if Diff(limit, s.ackFrom) <= 0 {
			return 0, 0, false, true // it would not move
		}
		to, capped = limit, true
	}
	if to == s.first {
		return 0, 0, false, capped
	}
	s.ackFrom = to
	return to - 1, uint16(min(to-s.first, 0xffff)), true, capped
}

// Ack returns the cumulative ack the source is owed: the number before
// its oldest report still pending, or before the next expected, and the
// span (how many numbers from the first this state saw it covers, at most
// 0xffff); ok is false while nothing this state saw is settled. It
// records the ack as sent.
func (s *State) Ack() (seq uint32, span uint16, ok bool) {
	to := s.firstPending()
	if to == s.first {
		return 0, 0, false
	}
	s.ackFrom = to
	return to - 1, uint16(min(to-s.first, 0xffff)), true
}
