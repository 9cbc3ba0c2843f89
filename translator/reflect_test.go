package translator

import (
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/exactly"
)

// TestMissingNACKsPaidFor: a source's missing NACKs are paid for by its
// reports, so one report that skips numbers of a new source (a forgery
// from a victim's address) draws a few NACKs, not thousands; the numbers
// not NACKed hold the cumulative ack back, so silence is never an
// acknowledgement, and are NACKed as the source's next reports pay. A
// report that would move one out of the window is NACKed busy.
func TestMissingNACKsPaidFor(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	// An ack after every report: each check reads where it stands.
	h := newHarness(t, Config{AckPace: -1}, ft)
	h.connect()
	l := ackLog{seen: map[uint32]bool{}}
	check := func(when string) { t.Helper(); l.take(t, h, when) }
	send := func(seq uint32) { l.seen[seq] = true; h.wideKI(seq) }
	send(1000)
	send(4000)
	check("after the gap")
	const bound = exactly.NewSourceNACKs + 2*exactly.NACKsPerReport
	if l.missing > bound || l.missing == 0 {
		t.Fatalf("a new source skipping 2999 numbers drew %d missing NACKs, want 1 to %d", l.missing, bound)
	}
	c := h.e.Counters()
	if c.MissingWithheld != uint64(2999-l.missing) {
		t.Errorf("MissingWithheld %d, want %d", c.MissingWithheld, 2999-l.missing)
	}
	// A report that would push a number not NACKed out of the window.
	h.wideKI(1000 + exactly.Window + 100)
	got := h.nacks
	check("beyond")
	if c := h.e.Counters(); c.BeyondWithheld != 1 || len(got) == 0 {
		t.Fatalf("a report past a withheld number: BeyondWithheld %d", c.BeyondWithheld)
	}
	busy := false
	for _, d := range got {
		a, _ := dta.ParseAck(d.Buf)
		busy = busy || a.NACK && a.Reason == dta.ReasonBusy && a.Seq == 1000+exactly.Window+100
	}
	if !busy {
		t.Errorf("answers %d, none a busy NACK of it", len(got))
	}
	// The source's next reports pay for the rest, oldest first.
	seq := uint32(4001)
	for ; l.missing < 2999; seq++ {
		if seq > 5600 {
			t.Fatalf("after reports up to %d, %d of 2999 missing numbers NACKed", seq-1, l.missing)
		}
		send(seq)
		check("paying")
	}
	// Their resends come: the ack reaches the newest.
	for n := uint32(1001); n != 4000; n++ {
		h.wideKI(n)
	}
	l.acks = 0
	h.pump()
	check("resent")
	if c := h.e.Counters(); c.Missing != 2999 || l.acks == 0 || l.acked != seq-1 {
		t.Errorf("Missing %d, want 2999; %d acks, the last %d, want %d", c.Missing, l.acks, l.acked, seq-1)
	}
}

// ackLog follows what a translator answered one source (testReporter)
// that sends from 1000 on: seen holds the numbers sent or NACKed missing.
type ackLog struct {
	seen          map[uint32]bool
	missing, acks int
	acked         uint32 // the last cumulative ack
}

// take reads h's answers, failing t if a cumulative ack passes a number
// neither sent nor NACKed.
func (l *ackLog) take(t *testing.T, h *harness, when string) {
	t.Helper()
	for _, d := range h.nacks {
		a, err := dta.ParseAck(d.Buf)
		if err != nil || d.Addr != netip.AddrPortFrom(testReporter.Addr(), dta.AckPort) || !a.Wide {
			t.Fatalf("ack %x to %v: %v", d.Buf, d.Addr, err)
		}
		switch {
		case a.NACK && a.Reason == dta.ReasonMissing:
			l.seen[a.Seq] = true
			l.missing++
		case a.NACK:
		default:
			l.acks++
			l.acked = a.Seq
			for n := uint32(1001); n != a.Seq+1; n++ {
				if !l.seen[n] {
					t.Fatalf("%s: the cumulative ack passed %d, neither received nor NACKed (ack %d)", when, n, a.Seq)
				}
			}
		}
	}
	h.nacks = nil
}
