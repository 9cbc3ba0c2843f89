package translator

import "github.com/dtakit/dtakit/primitive"

// sink is the primitive.Sink of one instance: the Engine's operations on
// its QP and the exactly-once bookkeeping of the report being translated
// (e.cur). The Engine keeps one and points it at the instance at hand, so
// that handing it to a Translator does not allocate.
type sink struct {
	e  *Engine
	in *instance
}

// sinkFor returns the engine's sink pointed at in.
func (e *Engine) sinkFor(in *instance) *sink {
	e.snk = sink{e: e, in: in}
	return &e.snk
}

func (s *sink) Now() int64      { return s.e.now }
func (s *sink) Room(n int) bool { return s.e.hasRoom(s.in, n) }

func (s *sink) FlushRoom(n int) bool { return s.in.ready() && s.e.canFlush(s.in, n) }

func (s *sink) Write(off uint64, data []byte, imm bool, immData uint32) {
	s.e.write(s.in, off, data, imm, immData)
}

func (s *sink) FetchAdd(off, add uint64) { s.e.fetchAdd(s.in, off, add) }
func (s *sink) ShareTail(on bool)        { s.in.shareTail(on) }
func (s *sink) Settling() bool           { return s.e.cur.s != nil }
func (s *sink) Settle()                  { s.e.track(s.in) }

// Hold holds the wide report being translated under slot; an unsequenced
// one is not held (nothing waits for it).
func (s *sink) Hold(slot int) {
	e, in := s.e, s.in
	if e.cur.s == nil {
		return
	}
	if in.held == nil {
		in.held = newHeldTokens(in.tr.Held())
	}
	if !in.held.add(slot, e.cur) {
		// More than the Translator said it holds (a bug): the report is
		// NACKed as unconfirmed now, and taken, not pending (as a
		// refused one), rather than acknowledged before its write.
		e.c.EncodeErrors++
		e.done(e.cur, true)
		e.refused = true
		return
	}
	e.tracked = true
}

func (s *sink) Held(slot int) int {
	if s.in.held == nil {
		return 0
	}
	return s.in.held.count(slot)
}

// Release queues slot's held reports to be settled when the operation
// just queued is acknowledged.
func (s *sink) Release(slot int) {
	if s.in.held == nil {
		return
	}
	toks := s.in.held.take(slot)
	for i := range toks {
		s.e.pendOn(s.in, toks[i])
	}
	clear(toks)
}

// Lose settles slot's held reports as unconfirmed: their write will not
// come.
func (s *sink) Lose(slot int) {
	if s.in.held == nil {
		return
	}
	toks := s.in.held.take(slot)
	s.e.unconfirmTokens(toks)
	clear(toks)
}

func (s *sink) Count(c primitive.Counter) {
	switch c {
	case primitive.OutsideValues:
		s.e.c.OutsideValues++
	case primitive.PartialChunks:
		s.e.c.PartialChunks++
	case primitive.Lingered:
		s.e.c.Lingered++
	case primitive.FlushLost:
		s.e.c.FlushLost++
	}
}
