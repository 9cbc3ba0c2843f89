package exactly

import (
	"net/netip"
	"testing"
)

var testSrc = Source{Addr: netip.MustParseAddrPort("127.0.0.1:5000"), Session: 7}

func TestBits(t *testing.T) {
	var b Bits
	for _, n := range []uint32{0, 63, 64, Window - 1, 1<<32 - 1} {
		if b.Has(n) {
			t.Fatalf("%d set in an empty bitmap", n)
		}
		b.Set(n, true)
		if !b.Has(n) || !b.Has(n+Window) {
			t.Fatalf("%d (or %d, its bit) not set", n, n+Window)
		}
		b.Set(n, false)
		if b.Has(n) {
			t.Fatalf("%d still set", n)
		}
	}
}

func TestDiff(t *testing.T) {
	for _, c := range []struct {
		a, b uint32
		want int32
	}{{5, 3, 2}, {3, 5, -2}, {0, 1<<32 - 1, 1}, {1<<32 - 1, 0, -1}} {
		if d := Diff(c.a, c.b); d != c.want {
			t.Errorf("Diff(%d, %d) = %d, want %d", c.a, c.b, d, c.want)
		}
	}
}

func newState(first uint32) *State {
	var tb Table
	s, _ := tb.Add(testSrc, first, 0)
	return s
}

// TestAdmitInOrder: numbers in order are taken, a copy of one applied is
// a duplicate, and a number skipped is reported as the gap.
func TestAdmitInOrder(t *testing.T) {
	s := newState(10)
	for seq := uint32(10); seq < 20; seq++ {
		if v, gap := s.Admit(seq); v != Take || gap != 0 {
			t.Fatalf("%d: %v gap %d, want Take gap 0", seq, v, gap)
		}
		s.SetApplied(seq, true)
	}
	if v, _ := s.Admit(15); v != Duplicate {
		t.Fatalf("copy of 15: %v, want Duplicate", v)
	}
	if v, gap := s.Admit(25); v != Take || gap != 5 {
		t.Fatalf("25 after 19: %v gap %d, want Take gap 5", v, gap)
	}
	if v, _ := s.Admit(22); v != Take {
		t.Fatalf("22, skipped: %v, want Take", v)
	}
	if v, _ := s.Admit(9); v != BeforeFirst {
		t.Fatalf("9, before the first seen: %v, want BeforeFirst", v)
	}
}

// TestAdmitStaleAndLate: a number more than the window behind is stale,
// unless it was NACKed for a resend and left the window before its resend
// came: that one is taken once.
func TestAdmitStaleAndLate(t *testing.T) {
	s := newState(0)
	for seq := uint32(0); seq < 10; seq++ {
		s.Admit(seq)
		s.SetApplied(seq, seq != 4)
	}
	s.Missed(4, 1) // NACKed: its sender resends it
	if !s.Owes() {
		t.Fatal("a NACKed number not applied is not owed")
	}
	if v, _ := s.Admit(4 + Window + 5); v != Take {
		t.Fatalf("%v", v)
	}
	if v, _ := s.Admit(3); v != Stale {
		t.Fatalf("3, applied and a window behind: %v, want Stale", v)
	}
	if v, _ := s.Admit(4); v != Take {
		t.Fatalf("4, NACKed and late: %v, want Take", v)
	}
	if v, _ := s.Admit(4); v != Stale {
		t.Fatalf("4 again: %v, want Stale (a late resend is taken once)", v)
	}
}

// TestAck: the cumulative ack stops before the oldest pending number and
// carries the span from the first number seen.
func TestAck(t *testing.T) {
	s := newState(100)
	if _, _, ok := s.Ack(); ok {
		t.Fatal("an ack before any number")
	}
	for seq := uint32(100); seq < 110; seq++ {
		s.Admit(seq)
		s.SetApplied(seq, true)
	}
	s.SetPending(105, true)
	if seq, span, ok := s.Ack(); !ok || seq != 104 || span != 5 {
		t.Fatalf("ack %d span %d ok %v, want 104 span 5", seq, span, ok)
	}
	if !s.Unacked(0) {
		t.Fatal("numbers 105..109 are not acknowledged")
	}
	s.SetPending(105, false)
	if seq, span, ok := s.Ack(); !ok || seq != 109 || span != 10 {
		t.Fatalf("ack %d span %d ok %v, want 109 span 10", seq, span, ok)
	}
	if s.Unacked(0) {
		t.Fatal("everything acknowledged, yet unacked")
	}
}

// TestAckBelow: a limit before the oldest pending number holds the ack
// there, a limit at or before the last ack draws none, and a limit past
// what Ack would name changes nothing; a pending number still stops it.
func TestAckBelow(t *testing.T) {
	s := newState(100)
	for seq := uint32(100); seq < 120; seq++ {
		s.Admit(seq)
		s.SetApplied(seq, true)
	}
	s.SetPending(115, true)
	if seq, span, ok, capped := s.AckBelow(105); !ok || !capped || seq != 104 || span != 5 {
		t.Fatalf("limit 105: ack %d span %d ok %v capped %v, want 104 span 5 capped", seq, span, ok, capped)
	}
	if _, _, ok, capped := s.AckBelow(103); ok || !capped {
		t.Fatalf("a limit before the last ack: ok %v capped %v, want no ack, capped", ok, capped)
	}
	if !s.Unacked(0) {
		t.Fatal("numbers 105..119 are not acknowledged")
	}
	if seq, _, ok, capped := s.AckBelow(s.Next() + 1); !ok || capped || seq != 114 {
		t.Fatalf("no limit: ack %d ok %v capped %v, want 114, not capped", seq, ok, capped)
	}
}

// TestUnackedWhileOwed: a resend owed keeps the source acknowledged for
// OwedFor after its NACK.
func TestUnackedWhileOwed(t *testing.T) {
	s := newState(0)
	s.Admit(0)
	s.SetApplied(0, true)
	s.Admit(1)
	s.Missed(1, 10)
	s.Ack()
	if !s.Unacked(10 + int64(OwedFor) - 1) {
		t.Fatal("a resend owed, within OwedFor: not unacked")
	}
	if s.Unacked(10 + int64(OwedFor)) {
		t.Fatal("unacked past OwedFor")
	}
}

// TestTableBounded: a full table refuses a new source while every source
// reported within SourceIdle, then evicts the least recently used.
func TestTableBounded(t *testing.T) {
	var tb Table
	for i := range uint64(MaxSources) {
		s, ev := tb.Add(Source{Addr: testSrc.Addr, Session: i}, 0, 0)
		if s == nil || ev {
			t.Fatalf("source %d: %v evicted %v", i, s, ev)
		}
		tb.Touch(s, 0)
	}
	if s, ev := tb.Add(Source{Addr: testSrc.Addr, Session: 1 << 40}, 0, 1); s != nil || ev {
		t.Fatal("a full table took a new source")
	}
	for i := uint64(1); i < MaxSources; i++ {
		tb.Touch(tb.Get(testSrc.Addr, i), int64(SourceIdle))
	}
	s, ev := tb.Add(Source{Addr: testSrc.Addr, Session: 1 << 40}, 0, int64(SourceIdle))
	if s == nil || !ev || tb.Len() != MaxSources {
		t.Fatalf("new source %v evicted %v, %d tracked", s, ev, tb.Len())
	}
	if tb.Get(testSrc.Addr, 0) != nil {
		t.Fatal("the silent source was kept")
	}
	if !tb.Tracks(s) {
		t.Fatal("the new source is not tracked")
	}
	n := 0
	for range tb.All() {
		n++
	}
	if n != MaxSources {
		t.Fatalf("All yields %d, want %d", n, MaxSources)
	}
}

// TestUnackedWhileResendHeld: a resend taken and held (pending: an Append
// entry waiting for its batch) keeps its source acknowledged, however
// long after its NACK, so that its sender, waiting for its ack, does not
// take the silence for a translator that died.
func TestUnackedWhileResendHeld(t *testing.T) {
	s := newState(0)
	for seq := uint32(0); seq < 10; seq++ {
		s.Admit(seq)
		s.SetApplied(seq, seq != 5)
	}
	s.Missed(5, 0)
	s.Ack()
	if v, _ := s.Admit(5); v != Take {
		t.Fatalf("resend of 5: %v", v)
	}
	s.SetApplied(5, true)
	s.SetPending(5, true)
	later := int64(10 * OwedFor)
	if !s.Unacked(later) {
		t.Fatal("a resend held: not unacked")
	}
	s.SetPending(5, false)
	if s.Unacked(later) {
		t.Fatal("the resend settled, all acknowledged: still unacked")
	}
}

// TestBudgetKeepsHonestSender: a sender that keeps its credit (3072
// numbers beyond the ack) and resends what is NACKed, losing most of its
// first reports and some later, has every number applied: the NACK
// budget its reports earn pays for every missing NACK in time, none of
// its reports is refused (Beyond), and no cumulative ack passes a number
// neither received nor NACKed. Losing four in five at first, more than
// its reports pay for at once, it still moves on: the NACKs are paid
// oldest first, so the ack, and its credit, keep moving.
func TestBudgetKeepsHonestSender(t *testing.T) {
	const n, credit = 20000, 3072
	s := newState(0)
	rng := uint64(1)
	lose := func(seq uint32) bool {
		rng = rng*6364136223846793005 + 1442695040888963407
		p := uint64(5) // percent
		if seq < 4000 {
			p = 80
		}
		return (rng>>33)%100 < p
	}
	seen := make([]bool, n) // received, or NACKed missing
	var acked, next uint32  // one past the ack; the next new number
	var nacked []uint32
	var now int64
	take := func(seq uint32, why string) {
		if v, _ := s.Admit(seq); v != Take {
			t.Fatalf("%s %d: %v, want Take", why, seq, v)
		}
		s.SetApplied(seq, true)
		seen[seq] = true
	}
	probes, most := 0, uint32(0)
	for round := 0; acked < n; round++ {
		if round > 100000 {
			t.Fatalf("stuck: acked %d, next %d, %d withheld", acked, next, s.Withheld())
		}
		now += 1e6
		sent := false
		for ; next < n && next-acked < credit; next++ {
			sent = true
			if !lose(next) {
				take(next, "report")
			}
		}
		if !sent && next > 0 {
			// Waiting for credit: a probe, a copy of the last report
			// (the reporter's probeAfter), which pays too.
			probes++
			if v, _ := s.Admit(next - 1); v != Duplicate && v != Take {
				t.Fatalf("probe %d: %v", next-1, v)
			}
		}
		most = max(most, s.Withheld())
		for seq, ok := s.NextMissing(now); ok; seq, ok = s.NextMissing(now) {
			seen[seq] = true
			nacked = append(nacked, seq)
		}
		if seq, _, ok := s.Ack(); ok {
			for m := acked; m != seq+1; m++ {
				if !seen[m] {
					t.Fatalf("the ack (%d) passed %d, neither received nor NACKed", seq, m)
				}
			}
			acked = seq + 1
		}
		for _, seq := range nacked {
			take(seq, "resend")
		}
		nacked = nacked[:0]
	}
	if s.Withheld() != 0 {
		t.Errorf("%d still withheld", s.Withheld())
	}
	if most == 0 {
		t.Error("no NACK was ever withheld: the budget went untested")
	}
	t.Logf("at most %d NACKs withheld; %d probes", most, probes)
}

// TestWithheldKeepaliveEnds: a source held back only by numbers whose
// NACK waits (a forged gap that nothing pays for) is kept alive with acks
// for OwedFor after its last report, not for ever: a forged report draws
// a bounded number of acks to the address it forged.
func TestWithheldKeepaliveEnds(t *testing.T) {
	s := newState(1000)
	s.Admit(1000)
	s.SetApplied(1000, true)
	s.Admit(4000)
	s.SetApplied(4000, true)
	for _, ok := s.NextMissing(0); ok; _, ok = s.NextMissing(0) {
	}
	seq, _, ok := s.Ack()
	if w := s.Withheld(); !ok || w == 0 || seq != 4000-w-1 {
		t.Fatalf("ack %d (%v) with %d withheld: want the number before the oldest withheld", seq, ok, w)
	}
	if !s.Unacked(int64(OwedFor) / 2) {
		t.Error("no keepalive while its reports are recent")
	}
	if s.Unacked(int64(OwedFor) + 1) {
		t.Errorf("keepalive %v after its last report", OwedFor)
	}
}
