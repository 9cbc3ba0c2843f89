package translator

import (
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

// overhold is a misbehaving primitive registered for these tests alone: it
// says it holds one report in one slot, then holds every report it gets.
type overhold struct{}

const opOverhold dta.Opcode = 0xE1

func init() { primitive.Register(overhold{}) }

func (overhold) Opcode() dta.Opcode                           { return opOverhold }
func (overhold) Name() string                                 { return "overhold" }
func (overhold) Key(*dta.Report) uint32                       { return 0 }
func (overhold) Stateful() bool                               { return false }
func (overhold) ParseLayout([]byte) (primitive.Layout, error) { return overhold{}, nil }
func (overhold) Kind() primitive.Kind                         { return overhold{} }
func (overhold) RegionSize() uint64                           { return 64 }
func (overhold) Validate() error                              { return nil }
func (overhold) AppendBinary(b []byte) ([]byte, error)        { return b, nil }
func (overhold) Atomic() bool                                 { return false }
func (overhold) NewTranslator(primitive.Config) (primitive.Translator, error) {
	return overhold{}, nil
}
func (overhold) NewStore([]byte) (primitive.Store, error) { return nil, primitive.ErrUnsupported }
func (overhold) Translate(s primitive.Sink, _ *dta.Report, _ int) primitive.Outcome {
	s.Hold(0)
	return primitive.Applied
}
func (overhold) Tick(primitive.Sink, int64) {}
func (overhold) Flush(s primitive.Sink)     { s.Lose(0) }
func (overhold) MaxWrite() int              { return 0 }
func (overhold) Held() (int, int)           { return 1, 1 }

// TestHoldBeyondHeld: a wide report a primitive holds beyond what its
// Held() said is NACKed Unconfirmed at once and counted (EncodeErrors),
// never acknowledged, and the engine neither panics nor loses track of
// the report held within bounds, which Flush then gives up as unconfirmed.
func TestHoldBeyondHeld(t *testing.T) {
	ft := newFakeTarget(t, &fakeInst{prim: opOverhold, mem: make([]byte, 64)})
	h := newHarness(t, Config{}, ft)
	h.connect()
	for seq := uint32(10); seq <= 12; seq++ {
		r := dta.Report{Header: dta.Header{Opcode: opOverhold, Sequenced: true, Wide: true, Seq: seq}, Body: []byte{1}}
		h.report(r)
		h.pump()
	}
	var unconfirmed []uint32
	for _, a := range h.acksSent() {
		switch {
		case a.NACK && a.Reason == dta.ReasonUnconfirmed:
			unconfirmed = append(unconfirmed, a.Seq)
		case a.NACK:
			t.Errorf("NACK %+v", a)
		case a.Seq >= 10 && !a.Resend:
			t.Errorf("cumulative ack %d: report 10 is held, unwritten", a.Seq)
		case a.Resend:
			t.Errorf("ack of %d on its own", a.Seq)
		}
	}
	if len(unconfirmed) != 2 || unconfirmed[0] != 11 || unconfirmed[1] != 12 {
		t.Errorf("NACKed unconfirmed %v, want 11 and 12", unconfirmed)
	}
	if c := h.e.Counters(); c.EncodeErrors != 2 || c.Unconfirmed != 2 || c.Reports[0] != 3 || c.Translated[0] != 3 {
		t.Errorf("counters: encode errors %d, unconfirmed %d, reports %d, translated %d; want 2, 2, 3, 3", c.EncodeErrors, c.Unconfirmed, c.Reports[0], c.Translated[0])
	}
	h.e.Flush()
	h.pump()
	acks := h.acksSent()
	found := false
	for _, a := range acks {
		found = found || a.NACK && a.Seq == 10 && a.Reason == dta.ReasonUnconfirmed
	}
	if !found || h.e.Counters().Unconfirmed != 3 {
		t.Errorf("after Flush: acks %+v; want 10 NACKed unconfirmed", acks)
	}
}
