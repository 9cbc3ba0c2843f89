package keywrite

import "testing"

// TestVerdict: a status in the words Postcarding's outcomes use.
func TestVerdict(t *testing.T) {
	for s, want := range map[Status]string{Found: "found", Empty: "not found", Ambiguous: "conflict", NoConsensus: "conflict"} {
		if got := s.Verdict(); got != want {
			t.Errorf("%v: %q, want %q", s, got, want)
		}
	}
}
