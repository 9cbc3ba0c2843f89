package translator

import "github.com/dtakit/dtakit/primitive"

// sink is the primitive.Sink of one instance: the Engine's operations on
// its QP and the exactly-once bookkeeping of the report being translated
// (e.cur). The Engine keeps one and points it at the instance at hand, so
// that handing it to a Translator does not allocate.
type sink struct {
	e  *Engine
	in *instance
	// q is in's conn when it is the software QP (nil for another conn,
	// or none): the report path calls it directly, not through conn.
	q *qp
}

// sinkFor returns the engine's sink pointed at in.
func (e *Engine) sinkFor(in *instance) *sink {
	q, _ := in.conn.(*qp)
	e.snk = sink{e: e, in: in, q: q}
	return &e.snk
}

// ready reports whether the instance can take reports.
func (s *sink) ready() bool {
	if s.q != nil {
		return s.q.ready()
	}
	return s.in.ready()
}

func (s *sink) Now() int64 { return s.e.now }

func (s *sink) Room(n int) bool {
	if s.q != nil {
		return s.q.room(s.e, n)
	}
	return s.in.conn.room(s.e, n)
}

func (s *sink) FlushRoom(n int) bool { return s.in.ready() && s.in.conn.flushRoom(n) }

// Write posts one RDMA WRITE of data at offset off of the region: WRITE
// Only, or First/Middle/Last when data exceeds the MTU; with imm, the last
// packet carries the immediate. A write that would reach past the region
// is refused (counted), never sent.
func (s *sink) Write(off uint64, data []byte, imm bool, immData uint32) {
	e, in := s.e, s.in
	if off > uint64(in.ad.Length) || uint64(len(data)) > uint64(in.ad.Length)-off {
		e.c.EncodeErrors++
		return
	}
	e.c.Writes++
	if q := s.q; q != nil && len(data) <= MTU {
		// qp.write's WRITE Only, here to save a call per write.
		if b := q.req.WriteOnly(in.ad.VA+off, in.ad.RKey, data, imm, immData, e.now); b != nil {
			e.send(q, b)
		}
		return
	}
	in.conn.write(e, in.ad.VA+off, in.ad.RKey, data, imm, immData)
}

// FetchAdd posts one FETCH_ADD of add to the counter at offset off of the
// region, with AckReq as every atomic.
func (s *sink) FetchAdd(off, add uint64) {
	e, in := s.e, s.in
	if off > uint64(in.ad.Length) || uint64(in.ad.Length)-off < 8 || (in.ad.VA+off)%8 != 0 {
		e.c.EncodeErrors++
		return
	}
	e.c.FetchAdds++
	if q := s.q; q != nil {
		// qp.fetchAdd, here to save a call per FETCH_ADD.
		e.send(q, q.req.FetchAdd(in.ad.VA+off, in.ad.RKey, add, e.now))
		return
	}
	in.conn.fetchAdd(e, in.ad.VA+off, in.ad.RKey, add)
}

func (s *sink) Settling() bool { return s.e.cur.s != nil }

// Settle queues the report being translated, whose operations were just
// queued, to be settled when they are acknowledged.
func (s *sink) Settle() {
	if e := s.e; e.cur.s != nil {
		s.pend(e.cur)
		e.tracked = true
	}
}

// pend records that t's report is applied once the last operation queued
// is acknowledged.
func (s *sink) pend(t token) {
	if s.q != nil {
		s.q.pend(t)
		return
	}
	s.in.conn.pend(t)
}

func (s *sink) ShareTail(on bool) {
	if s.q != nil {
		s.q.shareTail(on)
	} else if c := s.in.conn; c != nil {
		c.shareTail(on)
	}
}

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
		s.pend(toks[i])
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
