package translator

import "testing"

// TestHeldTokens: both forms hold up to per reports a slot, count and
// take them, and refuse a report beyond per or a slot beyond n (a
// Translator that holds more than it said) rather than panic.
func TestHeldTokens(t *testing.T) {
	for _, n := range []int{4, maxTrackedEntries} { // dense, sparse (n·per beyond the array)
		h := newHeldTokens(n, 2)
		if (h.dense != nil) != (n == 4) {
			t.Fatalf("n %d: dense %v", n, h.dense != nil)
		}
		a, b := token{seq: 1}, token{seq: 2}
		if !h.add(3, a) || !h.add(3, b) || h.add(3, a) || h.count(3) != 2 || h.count(2) != 0 {
			t.Errorf("n %d: two of per 2 held, the third refused: count %d", n, h.count(3))
		}
		for _, bad := range []int{-1, n} {
			if h.add(bad, a) || h.count(bad) != 0 || h.take(bad) != nil {
				t.Errorf("n %d: slot %d accepted", n, bad)
			}
		}
		got := h.take(3)
		if len(got) != 2 || got[0] != a || got[1] != b || h.count(3) != 0 {
			t.Errorf("n %d: take = %v, count after %d", n, got, h.count(3))
		}
		clear(got)
		if !h.add(3, b) || h.take(3)[0] != b {
			t.Errorf("n %d: slot 3 not reusable after take", n)
		}
	}
}
