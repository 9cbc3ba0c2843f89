package appendlist

import (
	"errors"
	"testing"
)

// TestPeek: Peek returns what Read would, and leaves it for Read; a lapped
// reader skips the lost entries either way.
func TestPeek(t *testing.T) {
	for _, markers := range []bool{false, true} {
		for _, e := range []int{4, 12} {
			g := newRig(t, Layout{Lists: 1, Entries: 16, EntrySize: e, Markers: markers})
			rd, err := g.r.Reader(0)
			if err != nil {
				t.Fatal(err)
			}
			dst := make([]byte, 32*e)
			g.appendN(t, 0, 0, 5, false)
			for range 2 {
				if n, err := rd.Peek(dst); n != 5 || err != nil || value(dst[4*e:]) != 4 || rd.Tail() != 0 {
					t.Fatalf("markers %v, e %d: Peek %d %v, tail %d", markers, e, n, err, rd.Tail())
				}
			}
			if n, err := rd.Read(dst); n != 5 || err != nil || value(dst) != 0 || rd.Tail() != 5 {
				t.Fatalf("markers %v, e %d: Read after Peek %d %v", markers, e, n, err)
			}
			if n, err := rd.Peek(dst); n != 0 || err != nil {
				t.Fatalf("markers %v, e %d: Peek of an empty list %d %v", markers, e, n, err)
			}
			if !markers {
				continue
			}
			g.appendN(t, 0, 5, 20, false) // 5..24: 16 slots keep 9..24
			n, err := rd.Peek(dst)
			var lap *LapError
			if n != 0 || !errors.As(err, &lap) || lap.Lost != 4 {
				t.Fatalf("e %d: lapped Peek %d %v, want 4 lost", e, n, err)
			}
			if n, err := rd.Peek(dst); n != 16 || err != nil || value(dst) != 9 {
				t.Fatalf("e %d: Peek after the lap %d %v, first %d", e, n, err, value(dst))
			}
			if n, err := rd.Read(dst); n != 16 || err != nil || value(dst[15*e:]) != 24 {
				t.Fatalf("e %d: Read after the lap %d %v", e, n, err)
			}
		}
	}
}
