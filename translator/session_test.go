package translator

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/exactly"
	"github.com/dtakit/dtakit/keyincr"
)

// sessionKI sends a wide Key-Increment of key 7 (add 1) numbered seq, of
// session sess, from src, and pumps.
func (h *harness) sessionKI(src netip.AddrPort, sess uint64, seq uint32) {
	h.t.Helper()
	r := kiReport(7, 1, 1)
	r.Header.Sequenced, r.Header.Wide, r.Header.Seq, r.Header.Session = true, true, seq, sess
	b, err := dta.AppendPayload(nil, &r)
	if err != nil {
		h.t.Fatal(err)
	}
	h.e.HandleReport(b, src, h.now)
	h.pump()
}

// acksSent decodes the acks and NACKs sent since the last call.
func (h *harness) acksSent() []dta.Ack {
	var out []dta.Ack
	for _, d := range h.nacks {
		if a, err := dta.ParseAck(d.Buf); err == nil {
			out = append(out, a)
		}
	}
	h.nacks = nil
	return out
}

// key7 returns key 7's count in the fake target's Key-Increment memory.
func key7(t *testing.T, ft *fakeTarget) uint64 {
	t.Helper()
	st, err := keyincr.NewStore(testKI, ft.insts[0].mem)
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.Query(7, 1)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStaleCopyRefused: a copy of a wide report more than the window
// (4096 numbers) behind its source's newest is refused, NACKed
// unconfirmed with its session and counted Stale, not applied again.
func TestStaleCopyRefused(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{}, ft)
	h.connect()
	const sess = 0x5e55
	for seq := uint32(0); seq < seqWindow+10; seq++ {
		h.sessionKI(testReporter, sess, seq)
	}
	if v := key7(t, ft); v != seqWindow+10 {
		t.Fatalf("key 7 counts %d, want %d", v, seqWindow+10)
	}
	h.acksSent()
	h.sessionKI(testReporter, sess, 3) // 4106 behind the newest
	h.advance(20*time.Millisecond, 5*time.Millisecond)
	if v := key7(t, ft); v != seqWindow+10 {
		t.Errorf("key 7 counts %d after a stale copy, want %d: applied again", v, seqWindow+10)
	}
	var nacks []dta.Ack
	for _, a := range h.acksSent() {
		if a.NACK || a.Resend {
			nacks = append(nacks, a)
		}
	}
	if want := []dta.Ack{{Seq: 3, NACK: true, Wide: true, Reason: dta.ReasonUnconfirmed, Session: sess}}; !slices.Equal(nacks, want) {
		t.Errorf("NACKs and resend acks %+v, want %+v", nacks, want)
	}
	if c := h.e.Counters(); c.Stale != 1 || c.Reports[dta.OpKeyIncrement] != seqWindow+11 {
		t.Errorf("Stale %d, Key-Increment reports %d: want 1, %d", c.Stale, c.Reports[dta.OpKeyIncrement], seqWindow+11)
	}
}

// TestSessionsKeptApart: reports forged with the victim's address and port
// but another session (a sender that cannot see the victim's) neither move
// the victim's numbers nor draw acks with the victim's session: the
// victim's own reports with the same numbers are applied, and acknowledged
// with its session.
func TestSessionsKeptApart(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{AckPace: -1}, ft) // an ack after every report
	h.connect()
	const victim, forger = 0x1111, 0x2222
	for seq := uint32(0); seq < 10; seq++ {
		h.sessionKI(testReporter, victim, seq)
	}
	h.acksSent()
	for seq := uint32(10); seq < 20; seq++ {
		h.sessionKI(testReporter, forger, seq)
	}
	for _, a := range h.acksSent() {
		if a.Session != forger {
			t.Fatalf("ack %+v of a forged report, want the forger's session", a)
		}
	}
	for seq := uint32(10); seq < 20; seq++ {
		h.sessionKI(testReporter, victim, seq)
	}
	top := uint32(0)
	for _, a := range h.acksSent() {
		if a.Session != victim || a.NACK {
			t.Fatalf("ack %+v to the victim's reports", a)
		}
		top = max(top, a.Seq)
	}
	if top != 19 {
		t.Errorf("victim acknowledged to %d, want 19", top)
	}
	if v := key7(t, ft); v != 30 {
		t.Errorf("key 7 counts %d, want 30: each report of both sessions once", v)
	}
	if c := h.e.Counters(); c.Duplicates != 0 {
		t.Errorf("%d duplicates: the forged numbers took the victim's", c.Duplicates)
	}
}

// TestSourcesBounded: with maxSources tracked, all reporting, a new
// session is refused (NACKed busy with its session, counted) and pushes no
// one out; once the least recent has been silent for sourceIdle, a new
// session takes its place (counted), and the others keep their numbers.
func TestSourcesBounded(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{}, ft)
	h.connect()
	for i := range uint64(exactly.MaxSources) {
		h.sessionKI(testReporter, 1000+i, 0)
	}
	h.acksSent()
	h.sessionKI(testReporter, 1, 0)
	if acks := h.acksSent(); !slices.Contains(acks, dta.Ack{Seq: 0, NACK: true, Wide: true, Reason: dta.ReasonBusy, Session: 1}) {
		t.Fatalf("acks %+v to a new session with no room, want a busy NACK", acks)
	}
	if c := h.e.Counters(); c.SourcesRefused != 1 || c.SourcesEvicted != 0 || h.e.seqs.Len() != exactly.MaxSources {
		t.Fatalf("refused %d, evicted %d, tracked %d", c.SourcesRefused, c.SourcesEvicted, h.e.seqs.Len())
	}
	// All but the first go on reporting; the first falls silent.
	h.now += int64(exactly.SourceIdle)
	for i := uint64(1); i < exactly.MaxSources; i++ {
		h.sessionKI(testReporter, 1000+i, 1)
	}
	h.sessionKI(testReporter, 1, 0)
	if c := h.e.Counters(); c.SourcesRefused != 1 || c.SourcesEvicted != 1 || h.e.seqs.Len() != exactly.MaxSources {
		t.Fatalf("refused %d, evicted %d, tracked %d", c.SourcesRefused, c.SourcesEvicted, h.e.seqs.Len())
	}
	if h.e.seqs.Get(testReporter, 1000) != nil || h.e.seqs.Get(testReporter, 1) == nil {
		t.Fatal("the silent source was kept or the new one not tracked")
	}
	h.acksSent()
	h.sessionKI(testReporter, 1001, 1) // a copy: its numbers were kept
	if c := h.e.Counters(); c.Duplicates != 1 {
		t.Errorf("Duplicates %d: the reporting sources lost their numbers", c.Duplicates)
	}
}

// TestLateResendTaken: a report NACKed for a resend whose number left the
// window before its resend came (its sender went on meanwhile) is still
// owed: its resend is applied once and acknowledged on its own; a second
// copy of it, and a copy of a report applied before, are stale.
func TestLateResendTaken(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{RingSize: 4}, ft)
	h.connect()
	const sess = 7
	ft.noAck = true
	for seq := uint32(0); seq < 5; seq++ { // a ring of 4: 4 is NACKed busy
		h.sessionKI(testReporter, sess, seq)
	}
	ft.noAck = false
	h.advance(100*time.Millisecond, 10*time.Millisecond)
	for seq := uint32(5); seq < 5+seqWindow+10; seq++ {
		h.sessionKI(testReporter, sess, seq)
	}
	want := uint64(4 + seqWindow + 10)
	if v := key7(t, ft); v != want {
		t.Fatalf("key 7 counts %d, want %d", v, want)
	}
	h.acksSent()
	h.sessionKI(testReporter, sess, 4) // the late resend
	h.advance(20*time.Millisecond, 5*time.Millisecond)
	if v := key7(t, ft); v != want+1 {
		t.Fatalf("key 7 counts %d after the late resend, want %d", v, want+1)
	}
	var got []dta.Ack
	for _, a := range h.acksSent() {
		if a.NACK || a.Resend {
			got = append(got, a)
		}
	}
	if wantAcks := []dta.Ack{{Seq: 4, Wide: true, Resend: true, Session: sess}}; !slices.Equal(got, wantAcks) {
		t.Fatalf("acks %+v to the late resend, want %+v", got, wantAcks)
	}
	h.sessionKI(testReporter, sess, 4) // its copy
	h.sessionKI(testReporter, sess, 3) // a copy of one applied
	h.advance(20*time.Millisecond, 5*time.Millisecond)
	if v := key7(t, ft); v != want+1 {
		t.Errorf("key 7 counts %d after stale copies, want %d", v, want+1)
	}
	if c := h.e.Counters(); c.Stale != 2 {
		t.Errorf("Stale %d, want 2", c.Stale)
	}
}

// TestManyLateResendsTaken: however many reports NACKed for a resend leave
// the window before their resends come, each is taken once while it is
// less than two windows behind, the newest of them (a window behind)
// included; later, or a second time, a copy is stale.
func TestManyLateResendsTaken(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{RingSize: 4}, ft)
	h.connect()
	const sess, nacked = 9, 1000
	ft.noAck = true
	for seq := uint32(0); seq < 4+nacked; seq++ { // a ring of 4: 4.. NACKed busy
		h.sessionKI(testReporter, sess, seq)
	}
	ft.noAck = false
	h.advance(100*time.Millisecond, 10*time.Millisecond)
	// Up to 4+nacked-1+seqWindow: number 4+nacked-1 is a window behind.
	last := uint32(4 + nacked - 1 + seqWindow)
	for seq := uint32(4 + nacked); seq < last; seq++ {
		h.sessionKI(testReporter, sess, seq)
	}
	base := key7(t, ft)
	if want := uint64(4 + seqWindow - 1); base != want {
		t.Fatalf("key 7 counts %d before the resends, want %d", base, want)
	}
	for seq := uint32(4); seq < 4+nacked; seq++ {
		h.sessionKI(testReporter, sess, seq)
	}
	h.advance(20*time.Millisecond, 5*time.Millisecond)
	if v := key7(t, ft); v != base+nacked {
		t.Fatalf("key 7 counts %d after %d late resends, want %d (stale: %d)", v, nacked, base+nacked, h.e.Counters().Stale)
	}
	for _, seq := range []uint32{4, 4 + nacked - 1, 3} { // second copies, a copy of one applied
		h.sessionKI(testReporter, sess, seq)
	}
	// Two windows on, the rest are forgotten: a copy is stale.
	for seq := last; seq < last+seqWindow; seq++ {
		h.sessionKI(testReporter, sess, seq)
	}
	h.advance(20*time.Millisecond, 5*time.Millisecond)
	before := key7(t, ft)
	h.sessionKI(testReporter, sess, last-1)
	h.advance(20*time.Millisecond, 5*time.Millisecond)
	if v, want := key7(t, ft), before; v != want {
		t.Errorf("key 7 counts %d after a copy two windows behind, want %d", v, want)
	}
	if c := h.e.Counters(); c.Stale != 4 {
		t.Errorf("Stale %d, want 4 (two second copies, a copy applied, one too old)", c.Stale)
	}
}

// TestLateResendAtEdgeNACKedAgain: the resend of a report NACKed busy
// comes when its number is exactly a window behind the newest (its marks
// still in the window's bitmaps), and is NACKed busy again: it stays owed,
// so that its next resend, after the window moved on, is taken once, not
// refused as stale.
func TestLateResendAtEdgeNACKedAgain(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{RingSize: 4}, ft)
	h.connect()
	const sess = 11
	ft.noAck = true
	for seq := uint32(0); seq < 5; seq++ { // a ring of 4: 4 is NACKed busy
		h.sessionKI(testReporter, sess, seq)
	}
	ft.noAck = false
	h.advance(100*time.Millisecond, 10*time.Millisecond)
	edge := uint32(4 + seqWindow) // with next there, 4 is a window behind
	for seq := uint32(5); seq < edge-4; seq++ {
		h.sessionKI(testReporter, sess, seq)
	}
	h.advance(20*time.Millisecond, 5*time.Millisecond)
	ft.noAck = true // the last 4 fill the ring
	for seq := edge - 4; seq < edge; seq++ {
		h.sessionKI(testReporter, sess, seq)
	}
	h.acksSent()
	h.sessionKI(testReporter, sess, 4) // its resend, at the edge: busy
	var got []dta.Ack
	for _, a := range h.acksSent() {
		if a.NACK {
			got = append(got, a)
		}
	}
	if want := []dta.Ack{{Seq: 4, NACK: true, Wide: true, Reason: dta.ReasonBusy, Session: sess}}; !slices.Equal(got, want) {
		t.Fatalf("NACKs %+v to the resend at the edge, want %+v", got, want)
	}
	ft.noAck = false
	h.advance(100*time.Millisecond, 10*time.Millisecond)
	want := uint64(edge - 1)
	if v := key7(t, ft); v != want {
		t.Fatalf("key 7 counts %d, want %d", v, want)
	}
	h.sessionKI(testReporter, sess, edge) // 4 leaves the window's bitmaps
	h.sessionKI(testReporter, sess, 4)    // its next resend
	h.advance(20*time.Millisecond, 5*time.Millisecond)
	if v, c := key7(t, ft), h.e.Counters(); v != want+2 || c.Stale != 0 {
		t.Fatalf("key 7 counts %d after the resend, want %d; Stale %d, want 0", v, want+2, c.Stale)
	}
	h.sessionKI(testReporter, sess, 4) // a copy of it now is stale
	h.advance(20*time.Millisecond, 5*time.Millisecond)
	if v, c := key7(t, ft), h.e.Counters(); v != want+2 || c.Stale != 1 {
		t.Errorf("key 7 counts %d after a second copy, want %d; Stale %d, want 1", v, want+2, c.Stale)
	}
}

// TestAcksPaced: a source acknowledged less than AckPace ago gets its next
// cumulative ack once the pace has passed (on a tick), naming the newest
// number then; Flush sends a due ack at once.
func TestAcksPaced(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{AckPace: time.Millisecond}, ft)
	h.connect()
	cumulative := func() (top []uint32) {
		t.Helper()
		for _, a := range h.acksSent() {
			if a.NACK || a.Resend {
				t.Fatalf("ack %+v, want only cumulative acks", a)
			}
			top = append(top, a.Seq)
		}
		return top
	}
	const sess = 0x77
	h.sessionKI(testReporter, sess, 0)
	if got := cumulative(); !slices.Equal(got, []uint32{0}) {
		t.Fatalf("the first report drew acks %v, want [0]", got)
	}
	for seq := uint32(1); seq < 5; seq++ {
		h.sessionKI(testReporter, sess, seq)
	}
	if got := cumulative(); len(got) != 0 {
		t.Fatalf("reports within the pace drew acks %v, want none yet", got)
	}
	h.advance(time.Millisecond, 250*time.Microsecond)
	if got := cumulative(); !slices.Equal(got, []uint32{4}) {
		t.Fatalf("after the pace, acks %v, want [4]", got)
	}
	h.sessionKI(testReporter, sess, 5)
	if got := cumulative(); len(got) != 0 {
		t.Fatalf("a report within the pace drew acks %v, want none yet", got)
	}
	h.e.Flush()
	h.pump()
	if got := cumulative(); !slices.Equal(got, []uint32{5}) {
		t.Fatalf("after Flush, acks %v, want [5]", got)
	}
	if c := h.e.Counters(); c.Acks != 3 {
		t.Errorf("Acks %d, want 3", c.Acks)
	}
}

// TestAcksCalm: with two sources reporting, a source whose ack would move
// less than half its share of the credit gets it two paces after the
// last, not one; a source whose ack moves more gets it every pace; every
// report is applied once.
func TestAcksCalm(t *testing.T) {
	const pace, step = 100 * time.Microsecond, 10 * time.Microsecond
	for _, tc := range []struct {
		name    string
		perStep uint32 // reports per step from each source
		gap     time.Duration
	}{
		{"slow", 4, 2 * pace},  // 40 reports a pace: held for calm
		{"fast", 80, 1 * pace}, // 800 a pace, over half of a 1536 share
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := newFakeTarget(t, kiInst(t))
			h := newHarness(t, Config{AckPace: pace}, ft)
			h.connect()
			a, b := testReporter, netip.MustParseAddrPort("127.0.0.10:41000")
			const sess = 0x77
			h.sessionKI(a, sess, 0)
			h.sessionKI(b, sess, 0)
			h.advance(time.Millisecond, time.Millisecond) // the keepalive counts two sources
			h.acksSent()
			var at []int64 // when a got a cumulative ack
			seq := uint32(1)
			for range 1000 {
				h.now += int64(step)
				h.e.Tick(h.now)
				h.pump()
				for range tc.perStep {
					h.sessionKI(a, sess, seq)
					h.sessionKI(b, sess, seq)
					seq++
				}
				for _, d := range h.nacks {
					if x, err := dta.ParseAck(d.Buf); err == nil && d.Addr.Addr() == a.Addr() && !x.NACK {
						at = append(at, h.now)
					}
				}
				h.nacks = nil
			}
			if len(at) < 5 {
				t.Fatalf("%d acks to a, want at least 5", len(at))
			}
			for i := 1; i < len(at); i++ {
				if d := time.Duration(at[i] - at[i-1]); d != tc.gap {
					t.Fatalf("acks to a at %v, want %v apart", d, tc.gap)
				}
			}
			if v, want := key7(t, ft), uint64(2*seq); v != want {
				t.Errorf("key 7 counts %d, want %d: each report once", v, want)
			}
		})
	}
}

// TestAckHeldToShare: with two sources reporting, the ack of one that
// keeps sending names at most the number a credit's half before one past
// its newest (exactly.Credit), so that it keeps at most half a credit
// unread; a source that stops for ackIdle gets the whole ack; every report
// is applied once.
func TestAckHeldToShare(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{AckPace: -1}, ft)
	h.connect()
	a, b := testReporter, netip.MustParseAddrPort("127.0.0.10:41000")
	const sess = 0x77
	top := func() (n uint32, any bool) {
		t.Helper()
		for _, x := range h.acksSent() {
			if x.NACK || x.Resend {
				t.Fatalf("ack %+v, want only cumulative acks", x)
			}
			n, any = x.Seq, true
		}
		return n, any
	}
	h.sessionKI(a, sess, 0)
	h.sessionKI(b, sess, 0)
	if n, ok := top(); !ok || n != 0 {
		t.Fatalf("first reports acknowledged to %d (%v), want 0", n, ok)
	}
	h.advance(time.Millisecond, time.Millisecond) // the keepalive counts two sources
	h.acksSent()
	for seq := uint32(1); seq <= 100; seq++ {
		h.sessionKI(a, sess, seq)
	}
	if n, _ := top(); n != 0 {
		t.Fatalf("100 more reports acknowledged to %d, want 0: held to half a credit", n)
	}
	for seq := uint32(101); seq < 2000; seq++ {
		h.sessionKI(a, sess, seq)
	}
	if n, want := uint32(0), uint32(2000+exactly.Credit/2-exactly.Credit-1); true {
		n, _ = top()
		if n != want {
			t.Fatalf("reports to 1999 acknowledged to %d, want %d", n, want)
		}
	}
	h.advance(2*ackIdle, time.Millisecond)
	if n, _ := top(); n != 1999 {
		t.Fatalf("after the source stopped, acknowledged to %d, want 1999", n)
	}
	if v := key7(t, ft); v != 2001 {
		t.Errorf("key 7 counts %d, want 2001: each report once", v)
	}
}
