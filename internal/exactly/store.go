package exactly

import "time"

// Store is a reporter's store of copies: the last reports sent, in a ring
// by number, and the reports NACKed for a resend, copied out of the ring
// (newer reports may take their slot) until the resend is acknowledged on
// its own or the report is counted lost or unconfirmed. A report counted
// so stays a marker for a while (the Expire age), so that a late NACK of
// it is not a second loss.
type Store struct {
	ring []slot
	held map[uint32]*Copy
	// low bounds the numbers held, not lost, from below (resendable).
	low uint32
	// waiting lists the resends sent that wait for an answer, oldest
	// first (Await, Overdue); markers lists the lost markers by age.
	waiting, markers []stamp
}

// slot is a report in the ring.
type slot struct {
	seq  uint32
	b    []byte
	lost bool // counted lost or unconfirmed: later NACKs of it are ignored
}

// stamp is a number and a time, in the order of the times.
type stamp struct {
	seq uint32
	at  int64 // Unix nanoseconds
}

// Copy is a NACKed report held for its resend.
type Copy struct {
	B        []byte // the report (nil once lost)
	Resends  int    // resends sent after NACKs
	Probes   int    // copies sent since the last NACK because no answer came
	LastSent int64  // Unix nanoseconds; 0: never
	// WaitAt is when the last copy was sent while no answer has come
	// since, in Unix nanoseconds (0 after a NACK).
	WaitAt int64
	Reason uint8 // of its last NACK (a dta.Reason)
	Lost   bool  // counted lost or unconfirmed: kept, without B, as a marker
	// KW says the report is a Key-Write of Key: a newer report of the key
	// supersedes it.
	KW  bool
	Key uint32
	// Busy counts its busy NACKs (the translator's queue full or its
	// rate spent): flow control, they set the backoff but spend no
	// resend.
	Busy int
	// Order is the sender's own name for the report (the reporter's:
	// its place in the order of Send calls).
	Order uint32
}

// NewStore returns a store whose ring keeps the last n reports.
func NewStore(n int) *Store { return &Store{ring: make([]slot, n)} }

// Put keeps b, report seq, in the ring (copying it into the slot's
// buffer).
func (st *Store) Put(seq uint32, b []byte) {
	w := &st.ring[int(seq)%len(st.ring)]
	w.seq, w.b, w.lost = seq, append(w.b[:0], b...), false
}

// Sent returns report seq from the ring, or nil when the ring no longer
// holds it or it was counted lost.
func (st *Store) Sent(seq uint32) []byte {
	if w := &st.ring[int(seq)%len(st.ring)]; w.b != nil && w.seq == seq && !w.lost {
		return w.b
	}
	return nil
}

// Held returns seq's copy, or nil.
func (st *Store) Held(seq uint32) *Copy { return st.held[seq] }

// Hold returns seq's copy, copying it out of the ring if it has none yet;
// nil when it has none and the ring no longer holds it. created says the
// copy is new.
func (st *Store) Hold(seq uint32) (c *Copy, created bool) {
	if c = st.held[seq]; c != nil {
		return c, false
	}
	b := st.Sent(seq)
	if b == nil {
		return nil, false
	}
	c = &Copy{B: append([]byte(nil), b...)}
	if st.held == nil {
		st.held = make(map[uint32]*Copy)
	}
	st.held[seq] = c
	return c, true
}

// Resendable notes that seq, held, is to be resent: Behind keeps it
// within the window.
func (st *Store) Resendable(seq uint32) {
	if Diff(seq, st.low) < 0 {
		st.low = seq
	}
}

// Drop forgets seq's copy.
func (st *Store) Drop(seq uint32) { delete(st.held, seq) }

// Acked takes the acknowledgement of seq's resend: its copy is done. It
// reports whether a copy not lost was held.
func (st *Store) Acked(seq uint32) bool {
	if c := st.held[seq]; c != nil && !c.Lost {
		delete(st.held, seq)
		return true
	}
	return false
}

// Lose counts report seq lost at time now, whether it is held or only in
// the ring (then a marker is held), and returns its bytes (nil if neither
// holds them); first is false when it was counted lost before.
func (st *Store) Lose(seq uint32, now int64) (b []byte, first bool) {
	c := st.held[seq]
	if c == nil {
		c = &Copy{}
		if st.held == nil {
			st.held = make(map[uint32]*Copy)
		}
		st.held[seq] = c
	}
	if c.Lost {
		return nil, false
	}
	b = c.B
	if w := &st.ring[int(seq)%len(st.ring)]; w.b != nil && w.seq == seq {
		w.lost = true
		if b == nil {
			b = w.b
		}
	}
	st.mark(seq, c, now)
	return b, true
}

// Unconfirm counts report seq unconfirmed (it may or may not have been
// applied) at time now and returns its bytes; ok is false when it was
// lost or unconfirmed before, or neither held nor in the ring.
func (st *Store) Unconfirm(seq uint32, now int64) (b []byte, ok bool) {
	c := st.held[seq]
	if c != nil && c.Lost {
		return nil, false
	}
	w := &st.ring[int(seq)%len(st.ring)]
	inRing := w.b != nil && w.seq == seq && !w.lost
	if c == nil && !inRing {
		return nil, false
	}
	b = w.b
	if c != nil {
		b = c.B
		st.mark(seq, c, now)
	}
	if inRing {
		w.lost = true
	}
	return b, true
}

// mark turns c, seq's copy, into a lost marker from time now.
func (st *Store) mark(seq uint32, c *Copy, now int64) {
	c.B, c.Lost, c.LastSent = nil, true, now
	st.markers = append(st.markers, stamp{seq: seq, at: now})
}

// Expire forgets the lost markers older than age at time now.
func (st *Store) Expire(now int64, age time.Duration) {
	for len(st.markers) > 0 && now-st.markers[0].at > int64(age) {
		e := st.markers[0]
		st.markers = st.markers[1:]
		if c := st.held[e.seq]; c != nil && c.LastSent == e.at {
			delete(st.held, e.seq)
		}
	}
}

// Await records that a copy of seq, held, was sent at time now and waits
// for an answer.
func (st *Store) Await(seq uint32, c *Copy, now int64) {
	c.WaitAt = now
	st.waiting = append(st.waiting, stamp{seq: seq, at: now})
}

// Overdue returns the oldest copy that has waited more than wait at time
// now with no answer since (not acknowledged, NACKed, lost or sent again
// since), and forgets it; ok is false when there is none.
func (st *Store) Overdue(now int64, wait time.Duration) (seq uint32, c *Copy, ok bool) {
	for len(st.waiting) > 0 && now-st.waiting[0].at > int64(wait) {
		e := st.waiting[0]
		st.waiting = st.waiting[1:]
		if c := st.held[e.seq]; c != nil && !c.Lost && c.WaitAt == e.at {
			return e.seq, c, true
		}
	}
	return 0, nil, false
}

// Settled reports whether every copy held was acknowledged (or lost).
func (st *Store) Settled() bool {
	for _, c := range st.held {
		if !c.Lost {
			return false
		}
	}
	return true
}

// Unsettled returns the numbers of the copies held, not lost.
func (st *Store) Unsettled() []uint32 {
	var out []uint32
	for seq, c := range st.held {
		if !c.Lost {
			out = append(out, seq)
		}
	}
	return out
}

// MayBeBehind reports whether Behind(next, ...) may be true, without a
// clock: false when no copy is held or none can be that far behind.
func (st *Store) MayBeBehind(next uint32) bool {
	return len(st.held) != 0 && next-st.low >= Window-1
}

// Behind reports whether a copy held for its resend (not lost) is so old
// that number next would put it Window behind the newest. The bound low
// makes the map scanned only when the oldest may be that far behind. A
// copy last sent more than stale before now holds nothing back: it was
// resent before acks came (no answer is awaited).
func (st *Store) Behind(next uint32, now int64, stale time.Duration) bool {
	if !st.MayBeBehind(next) {
		return false
	}
	low := next
	for seq, c := range st.held {
		if !c.Lost && Diff(seq, low) < 0 && (c.LastSent == 0 || now-c.LastSent < int64(stale)) {
			low = seq
		}
	}
	st.low = low
	return next-low >= Window-1
}
