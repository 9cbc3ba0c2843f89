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
		tb.Touch(tb.Get(Source{Addr: testSrc.Addr, Session: i}), int64(SourceIdle))
	}
	s, ev := tb.Add(Source{Addr: testSrc.Addr, Session: 1 << 40}, 0, int64(SourceIdle))
	if s == nil || !ev || tb.Len() != MaxSources {
		t.Fatalf("new source %v evicted %v, %d tracked", s, ev, tb.Len())
	}
	old := Source{Addr: testSrc.Addr, Session: 0}
	if tb.Get(old) != nil {
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
