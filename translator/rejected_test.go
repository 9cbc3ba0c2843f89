package translator

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/postcard"
)

// TestRejectedIsNACKed: a wide report the instance cannot hold, a postcard
// whose value is outside the set the collector advertises or a Key-Write of
// the wrong data size, is refused, counted and NACKed with reason Rejected;
// it is never acknowledged on its own, writes nothing, and a copy of it is
// not translated again. The cumulative ack passes it, as every number
// settled.
func TestRejectedIsNACKed(t *testing.T) {
	pc := pcInst(t)
	pc.geom = must(testPC.AppendGeometry(nil, postcard.NewValueSet([]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})))
	kw := kwInst(t)
	ft := newFakeTarget(t, kw, pc)
	h := newHarness(t, Config{}, ft)
	h.connect()
	wide := func(r dta.Report, seq uint32) {
		r.Header.Sequenced, r.Header.Wide, r.Header.Seq = true, true, seq
		h.report(r)
		h.pump()
	}
	p := pcReport(7, 1, 4000) // outside 1..16
	p.Postcard.PathLength = 1
	wide(p, 10)
	bad := kwReport(3, 1, 1)
	bad.KeyWrite.Data = append(bad.KeyWrite.Data, 0, 0, 0, 0) // the layout holds 4 bytes
	wide(bad, 11)
	good := pcReport(8, 1, 16)
	good.Postcard.PathLength = 1
	wide(good, 12)
	wide(p, 10) // a copy
	h.advance(10*time.Millisecond, time.Millisecond)

	var nacks []dta.Ack
	for _, d := range h.nacks {
		a, err := dta.ParseAck(d.Buf)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case a.NACK:
			nacks = append(nacks, a)
		case a.Resend:
			t.Errorf("ack of %d on its own: none was NACKed for a resend", a.Seq)
		}
	}
	want := []dta.Ack{{Seq: 10, NACK: true, Wide: true, Reason: dta.ReasonRejected}, {Seq: 11, NACK: true, Wide: true, Reason: dta.ReasonRejected}}
	if !slices.Equal(nacks, want) {
		t.Fatalf("NACKs %+v, want %+v", nacks, want)
	}
	if top, ok := h.topAck(); !ok || top != 12 {
		t.Errorf("cumulative ack %d (%v), want 12", top, ok)
	}
	c := h.e.Counters()
	if c.Rejected != 2 || c.OutsideValues != 1 || c.Duplicates != 1 || c.Writes != 2 {
		t.Errorf("counters %+v: want 2 rejected (1 outside the values), the copy a duplicate, and only flow 8's two copies written", c)
	}
	if !bytes.Equal(kw.mem, make([]byte, len(kw.mem))) {
		t.Error("the rejected Key-Write wrote")
	}
	st, err := postcard.NewStore(testPC, pc.mem)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := postcard.NewTable(testPC, []uint32{16, 4000})
	if err != nil {
		t.Fatal(err)
	}
	if _, o := st.Query(tab, 7); o != postcard.NotFound {
		t.Errorf("flow 7 (rejected) reads %v", o)
	}
	if path, o := st.Query(tab, 8); o != postcard.Found || !slices.Equal(path.Values(), []uint32{16}) {
		t.Errorf("flow 8 reads %v %v, want [16]", o, path.Values())
	}
}

// TestLargeCacheAcksWhenWritten: a postcard cache of more entry·hop slots
// than one array holds (maxTrackedEntries) keeps its wide postcards in a
// map, and they are acknowledged when their chunk is written and
// acknowledged, as a small cache's: not on being taken (a translator
// killed then would have acknowledged postcards it never wrote).
func TestLargeCacheAcksWhenWritten(t *testing.T) {
	ft := newFakeTarget(t, pcInst(t))
	h := newHarness(t, Config{PostcardCache: 1 << 17, PostcardLinger: time.Minute}, ft)
	h.connect()
	send := func(seq uint32, hop uint8) {
		r := pcReport(42, hop, uint32(hop))
		r.Postcard.PathLength = 3
		r.Header.Sequenced, r.Header.Wide, r.Header.Seq = true, true, seq
		h.report(r)
		h.pump()
	}
	send(10, 1)
	send(11, 2)
	h.advance(20*time.Millisecond, time.Millisecond)
	if top, ok := h.topAck(); ok && top >= 10 {
		t.Fatalf("ack %d with the flow cached, unwritten", top)
	}
	send(12, 3) // completes the flow: written
	h.advance(5*time.Millisecond, time.Millisecond)
	if top, ok := h.topAck(); !ok || top != 12 {
		t.Fatalf("ack %d (%v) after the flow was written, want 12", top, ok)
	}
}

// TestLargeAppendLayoutAcksWhenWritten: the same for an Append layout of
// more list·batch slots than one array holds: an entry is acknowledged
// once its batch is written, after AppendLinger, not on being batched.
func TestLargeAppendLayoutAcksWhenWritten(t *testing.T) {
	l := appendlist.Layout{Lists: 1 << 15, Entries: 16, EntrySize: 4, Batch: 16}
	ft := newFakeTarget(t, alInst(t, l))
	h := newHarness(t, Config{AppendLinger: 10 * time.Millisecond}, ft)
	h.connect()
	r := alReport(7, 1, false)
	r.Append.Data = r.Append.Data[4:]
	r.Header.Sequenced, r.Header.Wide, r.Header.Seq = true, true, 10
	h.report(r)
	h.pump()
	h.advance(5*time.Millisecond, time.Millisecond)
	if top, ok := h.topAck(); ok && top >= 10 {
		t.Fatalf("ack %d with the entry batched, unwritten", top)
	}
	h.advance(10*time.Millisecond, time.Millisecond)
	if top, ok := h.topAck(); !ok || top != 10 {
		t.Fatalf("ack %d (%v) after the linger wrote the batch, want 10", top, ok)
	}
	if c := h.e.Counters(); c.Writes != 1 || c.Lingered != 1 {
		t.Errorf("counters %+v: want the batch written once, after its linger", c)
	}
}
