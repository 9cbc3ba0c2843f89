// Package primitivetest helps test a primitive.Kind without a translator
// or a network: a Sink that applies a Translator's operations straight to
// a Store, as the collector's memory would receive them, and keeps the
// exactly-once bookkeeping in plain counts.
package primitivetest

import (
	"github.com/dtakit/dtakit/primitive"
)

// Sink is a primitive.Sink over a Store: Write and FetchAdd apply at once
// (the first error is kept in Err). Room and FlushRoom answer !Full. The
// report being translated is tracked when Tracking is set.
type Sink struct {
	Store    primitive.Store
	Full     bool  // no room
	Time     int64 // what Now returns
	Tracking bool  // the report being translated is wide and sequenced

	Writes, FetchAdds int
	Err               error
	// Settled counts reports settled by the operations just queued (by
	// Settle, or released from a slot); Lost those a Lose gave up.
	Settled, Lost int
	Counts        map[primitive.Counter]int
	held          map[int]int
}

var _ primitive.Sink = (*Sink)(nil)

func (s *Sink) Now() int64         { return s.Time }
func (s *Sink) Room(int) bool      { return !s.Full }
func (s *Sink) FlushRoom(int) bool { return !s.Full }
func (s *Sink) ShareTail(bool)     {}
func (s *Sink) Settling() bool     { return s.Tracking }
func (s *Sink) Held(slot int) int  { return s.held[slot] }
func (s *Sink) Count(c primitive.Counter) {
	if s.Counts == nil {
		s.Counts = map[primitive.Counter]int{}
	}
	s.Counts[c]++
}

func (s *Sink) Write(off uint64, data []byte, imm bool, immData uint32) {
	s.Writes++
	if err := s.Store.Write(off, data, imm, immData); err != nil && s.Err == nil {
		s.Err = err
	}
}

func (s *Sink) FetchAdd(off, add uint64) {
	s.FetchAdds++
	if _, err := s.Store.FetchAdd(off, add); err != nil && s.Err == nil {
		s.Err = err
	}
}

func (s *Sink) Settle() {
	if s.Tracking {
		s.Settled++
	}
}

func (s *Sink) Hold(slot int) {
	if !s.Tracking {
		return
	}
	if s.held == nil {
		s.held = map[int]int{}
	}
	s.held[slot]++
}

func (s *Sink) Release(slot int) {
	s.Settled += s.held[slot]
	delete(s.held, slot)
}

func (s *Sink) Lose(slot int) {
	s.Lost += s.held[slot]
	delete(s.held, slot)
}

// Holding returns how many reports every slot holds together.
func (s *Sink) Holding() int {
	n := 0
	for _, c := range s.held {
		n += c
	}
	return n
}
