package exactly

import (
	"iter"
	"net/netip"
	"time"
)

const (
	// MaxSources bounds the sources a Table tracks.
	MaxSources = 4096
	// SourceIdle is how long a source must have been silent before a new
	// one may take its place when MaxSources are tracked: longer than a
	// reporter waits for an ack before it counts its reports unconfirmed
	// (a second), so that new sessions, forged or not, never push out one
	// that is reporting.
	SourceIdle = 2 * time.Second
)

// Table holds the State of each source, at most MaxSources. The zero
// value is an empty table. A Table is not safe for concurrent use, Get
// included (it remembers the state it found).
type Table struct {
	m map[Source]*State
	// last is the state Get found last: a source's reports come in runs,
	// and comparing its Source costs less than hashing it.
	last    *State
	tick    uint64 // counts uses, to age the states
	evictAt int64  // while full, no source is idle before this time
}

// Get returns the state of the source at addr with session, or nil. It
// takes the Source's fields, not a Source: a struct stored and at once
// loaded whole stalls the CPU (store forwarding), on every report.
func (t *Table) Get(addr netip.AddrPort, session uint64) *State {
	if s := t.last; s != nil && s.src.Addr == addr && s.src.Session == session {
		return s
	}
	s := t.m[Source{Addr: addr, Session: session}]
	if s != nil {
		t.last = s
	}
	return s
}

// Tracks reports whether s is the state t holds for its source: a state
// forgotten since (and perhaps replaced) is not.
func (t *Table) Tracks(s *State) bool { return s.table == t }

// Len returns the number of sources tracked.
func (t *Table) Len() int { return len(t.m) }

// All yields every state tracked.
func (t *Table) All() iter.Seq[*State] {
	return func(yield func(*State) bool) {
		for _, s := range t.m {
			if !yield(s) {
				return
			}
		}
	}
}

// Add starts tracking src, whose first number is seq, at time now. When
// MaxSources are tracked it forgets the source used least recently if
// that one has been silent for SourceIdle (evicted true), and otherwise
// returns nil: a flood of new sessions cannot push out a source that is
// reporting.
func (t *Table) Add(src Source, seq uint32, now int64) (s *State, evicted bool) {
	if t.m == nil {
		t.m = make(map[Source]*State)
	}
	if len(t.m) >= MaxSources {
		if now < t.evictAt {
			return nil, false // no source can have been silent long enough yet
		}
		var s0 *State
		for _, s := range t.m {
			if s0 == nil || s.lastUse < s0.lastUse {
				s0 = s
			}
		}
		if now-s0.lastAt < int64(SourceIdle) {
			// Every other source reported after s0: none is idle
			// before s0 would be, so a flood of new sessions does not
			// cost a scan of the table each.
			t.evictAt = s0.lastAt + int64(SourceIdle)
			return nil, false
		}
		delete(t.m, s0.src)
		s0.table = nil
		if t.last == s0 {
			t.last = nil
		}
		evicted = true
	}
	s = &State{src: src, table: t, first: seq, next: seq, ackFrom: seq, lastAt: now, budget: NewSourceNACKs}
	if old := t.m[src]; old != nil { // replaced: forgotten
		old.table = nil
	}
	t.m[src], t.last = s, s
	return s, evicted
}

// Touch records that s's source sent a report at time now.
func (t *Table) Touch(s *State, now int64) {
	t.tick++
	s.lastUse, s.lastAt = t.tick, now
}
