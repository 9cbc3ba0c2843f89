package translator

import (
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/rocev2"
)

// FuzzHandleReport feeds arbitrary datagrams to a connected engine with one
// instance of each primitive: it must never panic, every datagram must be
// counted once (malformed, or a report by opcode), and every write the
// responder executes must land inside its region (the responder checks).
func FuzzHandleReport(f *testing.F) {
	for _, r := range []dta.Report{
		kwReport(1, 2, 3), kiReport(1, 2, 3), alReport(1, 2, true), pcReport(1, 2, 3),
		sequenced(kwReport(7, 255, 1), 9),
	} {
		b, _ := dta.AppendPayload(nil, &r)
		f.Add(b)
	}
	f.Add([]byte{2, 0x80, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{4, 0, 0, 0, 0, 1, 6, 0, 0, 0, 1, 2})
	h := newHarness(f, Config{}, newFakeTarget(f, allInsts(f)...))
	h.connect()
	f.Fuzz(func(t *testing.T, b []byte) {
		h.t = t
		h.fts[0].t = t
		before := h.e.Counters()
		h.e.HandleReport(b, testReporter, h.now)
		h.pump()
		after := h.e.Counters()
		counted := after.Malformed - before.Malformed
		for op := range after.Reports {
			counted += after.Reports[op] - before.Reports[op]
		}
		if counted != 1 {
			t.Fatalf("datagram counted %d times", counted)
		}
		if after.EncodeErrors != 0 {
			t.Fatalf("encode errors: %+v", after)
		}
	})
}

// FuzzHandleRoCE feeds arbitrary RoCEv2 datagrams (ICRC fixed up, so they
// reach the state machines) to a connected engine: no panic, and the engine
// still translates afterwards.
func FuzzHandleRoCE(f *testing.F) {
	ack := rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAcknowledge, PKey: 0xFFFF, DestQP: 0x101}, AETH: rocev2.AETH{Syndrome: 0x60}}
	b, _ := ack.AppendTo(nil)
	f.Add(b)
	f.Add(make([]byte, 12+8+256))
	f.Fuzz(fuzzRoCEBody)
}

func fuzzRoCEBody(t *testing.T, b []byte) {
	{
		h := newHarness(t, Config{RingSize: 16}, newFakeTarget(t, kwInst(t)))
		h.connect()
		if len(b) >= rocev2.BTHLen {
			// Aim at the QP or QP 1 half the time, and fix the ICRC.
			q := h.e.collectors[0].instances[0].conn.(*qp)
			if b[0]&1 == 0 {
				b[5], b[6], b[7] = byte(q.qpn>>16), byte(q.qpn>>8), byte(q.qpn)
			}
			c, _ := rocev2.DatagramICRC(testTarget, testLocal, b)
			b = append(b, byte(c), byte(c>>8), byte(c>>16), byte(c>>24))
		}
		h.e.HandleRoCE(b, testTarget, h.now)
		h.pump()
		h.advance(50*time.Millisecond, 5*time.Millisecond)
		before := h.e.Counters().Packets
		h.report(kwReport(1, 1, 1))
		h.pump()
		if c := h.e.Counters(); c.EncodeErrors != 0 || c.Packets != before+1 || !h.e.Idle() {
			t.Fatalf("after the datagram the engine does not translate: %+v", c)
		}
	}
}

// FuzzAdvertisement replaces the advertisement one collector instance
// sends (input byte 0 picks which of four) with the fuzzer's bytes while
// the engine waits for it. An input that parses as an advertisement keeps
// the instance's real address, length and rkey, so that what the engine
// accepts is bounded by the memory it names: whatever the primitive and
// geometry, the engine must not panic, must finish discovery, must write
// only inside that memory (the fake target checks every write) and must
// count every report it is then given.
func FuzzAdvertisement(f *testing.F) {
	for i, in := range allInsts(f) {
		ad := dta.Advertisement{VA: 1, Length: uint32(len(in.mem)), RKey: 2, Primitive: in.prim, Geometry: in.geom}
		b, _ := ad.AppendTo(nil)
		f.Add(append([]byte{byte(i)}, b...))
		f.Add(append([]byte{byte(i)}, b[:len(b)-1]...))
	}
	f.Add([]byte{0, 0xff, 0xff})
	// A Postcarding geometry with a value set (version 2), at index 2.
	pcv := dta.Advertisement{VA: 1, Length: uint32(testPC.RegionSize()), RKey: 2, Primitive: dta.OpPostcard,
		Geometry: must(testPC.AppendGeometry(nil, postcard.NewValueSet([]uint32{1, 2, 3, 9})))}
	if b, err := pcv.AppendTo(nil); err == nil {
		f.Add(append([]byte{2}, b...))
	}
	// b[0] >= 128: the Append instance says heads follow, and b[1:] is the
	// SEND that follows.
	f.Add(append([]byte{128}, dta.AppendListHeads(nil, 0, make([]uint64, testAL.Lists))...))
	f.Add(append([]byte{128}, dta.AppendListHeads(nil, 1, []uint64{3})...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || len(b) > 512 { // an advertisement is tens of bytes; long inputs only slow minimising
			return
		}
		insts := allInsts(t)
		ft := newFakeTarget(t, insts...)
		pick := int(b[0]) % len(insts)
		heads := b[0] >= 128
		if heads {
			ft.followUp = func(q *fakeQP) [][]byte {
				if insts[q.inst].prim != dta.OpAppend {
					return nil
				}
				return [][]byte{b[1:]}
			}
		}
		ft.advertBody = func(q *fakeQP, real []byte) []byte {
			if heads {
				if ad, err := dta.ParseAdvertisement(real); err == nil && ad.Primitive == dta.OpAppend {
					ad.HeadsFollow = true
					real, _ = ad.AppendTo(nil)
				}
				return real
			}
			if q.inst != pick {
				return real
			}
			body := append([]byte(nil), b[1:]...)
			if ad, err := dta.ParseAdvertisement(body); err == nil {
				in := insts[pick]
				ad.VA, ad.Length, ad.RKey = in.va, uint32(len(in.mem)), in.rkey
				if enc, err := ad.AppendTo(nil); err == nil {
					body = enc
				}
			}
			return body
		}
		h := newHarness(t, Config{RingSize: 64}, ft)
		h.e.Start(h.now)
		h.pump()
		h.advance(time.Second, 100*time.Millisecond)
		if done, _ := h.e.Connected(); !done {
			t.Fatal("discovery did not finish")
		}
		reports := []dta.Report{kwReport(1, 2, 3), kiReport(1, 2, 3), alReport(1, 2, true), pcReport(1, 2, 3), pcReport(1, 1, 4)}
		for _, r := range reports {
			h.report(r)
			h.pump()
		}
		h.e.Flush()
		h.pump()
		c := h.e.Counters()
		var counted uint64
		for _, n := range c.Reports {
			counted += n
		}
		if counted != uint64(len(reports)) || c.Malformed != 0 {
			t.Fatalf("%d reports counted of %d: %+v", counted, len(reports), c)
		}
		if c.EncodeErrors != 0 || !h.e.Idle() {
			t.Fatalf("engine after the advertisement: %+v", c)
		}
	})
}

// TestHandleRoCECountsBadICRC: an ACK for the engine's QP with one ICRC bit
// wrong is counted BadICRC; the same ACK right,
// to a QP that does not exist, is BadRoCE; a datagram cut short of its ICRC
// is BadRoCE. Twice each, so that the second comes from the ICRC cache.
func TestHandleRoCECountsBadICRC(t *testing.T) {
	h := newHarness(t, Config{RingSize: 16}, newFakeTarget(t, kwInst(t)))
	h.connect()
	q := h.e.collectors[0].instances[0].conn.(*qp)
	ack := func(qpn uint32) []byte {
		p := rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAcknowledge, PKey: 0xFFFF, DestQP: qpn}, AETH: rocev2.AETH{Syndrome: 0x1F}}
		b, err := p.AppendDatagram(nil, testTarget, testLocal)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := h.e.Counters()
	for range 2 {
		bad := ack(q.qpn)
		bad[len(bad)-1] ^= 0x10
		h.e.HandleRoCE(bad, testTarget, h.now)
		h.e.HandleRoCE(ack(q.qpn^0x800000), testTarget, h.now)
		h.e.HandleRoCE(bad[:rocev2.BTHLen+rocev2.AETHLen+1], testTarget, h.now)
	}
	c := h.e.Counters()
	if c.BadICRC-before.BadICRC != 2 || c.BadRoCE-before.BadRoCE != 4 {
		t.Fatalf("BadICRC +%d, BadRoCE +%d; want +2 and +4", c.BadICRC-before.BadICRC, c.BadRoCE-before.BadRoCE)
	}
}
