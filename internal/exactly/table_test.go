package exactly

import "testing"

// TestTableForgetsEvicted: a source evicted is not found, even when it is
// the one Get found last, nor tracked; a state of another table is not
// tracked either.
func TestTableForgetsEvicted(t *testing.T) {
	var tb Table
	s0, _ := tb.Add(Source{Addr: testSrc.Addr, Session: 0}, 0, 0)
	for i := uint64(1); i < MaxSources; i++ {
		s, _ := tb.Add(Source{Addr: testSrc.Addr, Session: i}, 0, 0)
		tb.Touch(s, int64(SourceIdle))
	}
	if tb.Get(s0.Source().Addr, s0.Source().Session) != s0 || !tb.Tracks(s0) {
		t.Fatal("source 0 not found before its eviction")
	}
	src := Source{Addr: testSrc.Addr, Session: 1 << 40}
	s, ev := tb.Add(src, 0, int64(SourceIdle))
	if s == nil || !ev {
		t.Fatalf("new source %v, evicted %v", s, ev)
	}
	if tb.Get(s0.Source().Addr, s0.Source().Session) != nil || tb.Tracks(s0) {
		t.Fatal("the evicted source is still found or tracked")
	}
	if tb.Get(src.Addr, src.Session) != s || !tb.Tracks(s) {
		t.Fatal("the new source is not found or not tracked")
	}
	var other Table
	so, _ := other.Add(s0.Source(), 0, 0)
	if tb.Tracks(so) || !other.Tracks(so) {
		t.Fatal("a state is tracked by a table that does not hold it")
	}
}

// TestTableReplaced: a source added again gets a new state, which Get
// returns; the state it replaced is not tracked.
func TestTableReplaced(t *testing.T) {
	var tb Table
	s1, _ := tb.Add(testSrc, 0, 0)
	if tb.Get(testSrc.Addr, testSrc.Session) != s1 {
		t.Fatal("the source is not found")
	}
	s2, _ := tb.Add(testSrc, 10, 0)
	if tb.Get(testSrc.Addr, testSrc.Session) != s2 || !tb.Tracks(s2) || tb.Tracks(s1) || tb.Len() != 1 {
		t.Fatalf("after a second Add: Get %p (new %p, old %p), tracks new %v, old %v, %d tracked",
			tb.Get(testSrc.Addr, testSrc.Session), s2, s1, tb.Tracks(s2), tb.Tracks(s1), tb.Len())
	}
}
