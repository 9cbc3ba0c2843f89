package translator

import (
	"net/netip"

	"github.com/dtakit/dtakit/dta"
)

// Wide sequence numbers let the translator apply each report once and say
// which ones never came (docs/DTA-WIRE.md, "Exactly once"). Per source
// address and port it keeps the next number it expects and which of the
// seqWindow numbers before it it applied.
const (
	// seqWindow is the span of numbers behind the newest that a source's
	// state remembers: the reporter's resend window (reporter.WideWindow).
	seqWindow = 4096
	// maxSources bounds the sources tracked; beyond it the one silent
	// longest is forgotten.
	maxSources = 4096
	// maxMissingNACKs bounds the NACKs one gap sends: a larger gap is more
	// than the sender still holds.
	maxMissingNACKs = seqWindow
)

type seqState struct {
	next    uint32 // one past the newest number seen
	applied [seqWindow / 64]uint64
	lastUse uint64 // the engine's report count when last used
	ackDue  bool   // next moved since the last cumulative ack
}

func (s *seqState) bit(seq uint32) (word *uint64, mask uint64) {
	i := seq % seqWindow
	return &s.applied[i/64], 1 << (i % 64)
}

// admit decides about r, a wide report from src, before it is translated:
// false for a duplicate of one applied (counted with the reports, and in
// Duplicates; dropped without a NACK). A number past the next expected one
// NACKs the numbers skipped, with reason Missing. e.seqs tracks the source
// from its first report on.
func (e *Engine) admit(src netip.AddrPort, r *dta.Report) bool {
	seq := r.Header.Seq
	s := e.seqs[src]
	if s == nil {
		s = e.newSource(src)
		s.next = seq
	}
	e.seqTick++
	s.lastUse = e.seqTick
	if !s.ackDue {
		s.ackDue = true
		e.ackDue = append(e.ackDue, src)
	}
	d := int32(seq - s.next)
	switch {
	case d >= 0:
		gap := uint32(d)
		for i := uint32(0); i < min(gap, maxMissingNACKs); i++ {
			e.nack(src, seq-gap+i, true, dta.ReasonMissing)
			e.c.Missing++
		}
		// The numbers now entering the window were not applied.
		for n, i := s.next, uint32(0); i <= min(gap, seqWindow); n, i = n+1, i+1 {
			w, m := s.bit(n)
			*w &^= m
		}
		s.next = seq + 1
		return true
	case d > -seqWindow:
		w, m := s.bit(seq)
		if *w&m != 0 {
			e.c.Duplicates++
			if op := r.Header.Opcode; op.IsValid() {
				e.c.Reports[op]++
			} else {
				e.c.Malformed++
			}
			return false
		}
		return true
	}
	return true // older than any resend: nothing to compare with
}

// sendAcks queues a cumulative ack (wide, NACK clear) to each source that
// sent reports since its last one: the number before the next it expects.
// Every number up to it was applied, NACKed, or is a duplicate, so the
// sender may reuse their resend slots: its window of unacknowledged reports
// is its credit (docs/DTA-WIRE.md, "Exactly once").
func (e *Engine) sendAcks() {
	for _, src := range e.ackDue {
		s := e.seqs[src]
		if s == nil || !s.ackDue {
			continue
		}
		s.ackDue = false
		e.toReporter(src, dta.Ack{Seq: s.next - 1, Wide: true})
		e.c.Acks++
	}
	clear(e.ackDue)
	e.ackDue = e.ackDue[:0]
}

// applied records that the wide report numbered seq from src was taken
// (or, taken false, that it was not after all).
func (e *Engine) applied(src netip.AddrPort, seq uint32, taken bool) {
	if s := e.seqs[src]; s != nil && int32(seq-s.next) < 0 && int32(seq-s.next) > -seqWindow {
		w, m := s.bit(seq)
		if taken {
			*w |= m
		} else {
			*w &^= m
		}
	}
}

// newSource starts tracking src, forgetting the source used least recently
// when maxSources are tracked.
func (e *Engine) newSource(src netip.AddrPort) *seqState {
	if e.seqs == nil {
		e.seqs = make(map[netip.AddrPort]*seqState)
	}
	if len(e.seqs) >= maxSources {
		var oldest netip.AddrPort
		var s0 *seqState
		for a, s := range e.seqs {
			if s0 == nil || s.lastUse < s0.lastUse {
				oldest, s0 = a, s
			}
		}
		delete(e.seqs, oldest)
	}
	s := new(seqState)
	e.seqs[src] = s
	return s
}
