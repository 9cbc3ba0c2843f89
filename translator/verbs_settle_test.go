package translator

import (
	"errors"
	"slices"
	"testing"
)

// TestVerbsSettle: with the verbs backend a wide report is settled when
// the last of its work requests completes, in posting order; when the QP
// fails, the reports whose work requests all completed before the error
// are applied and every later one is unconfirmed.
func TestVerbsSettle(t *testing.T) {
	q := &verbsQP{}
	type got struct {
		seq     uint32
		applied bool
	}
	pop := func() (out []got) {
		for tk, applied, ok := q.popSettled(); ok; tk, applied, ok = q.popSettled() {
			out = append(out, got{tk.seq, applied})
		}
		return out
	}
	// Report 1 is work requests 0-1, report 2 is 2, report 3 is 3-4.
	for _, r := range []struct {
		seq    uint32
		posted uint64
	}{{1, 2}, {2, 3}, {3, 5}} {
		q.posted = r.posted
		q.pend(token{seq: r.seq})
	}
	if out := pop(); len(out) != 0 {
		t.Fatalf("settled %v before any completion", out)
	}
	q.done = 1
	if out := pop(); len(out) != 0 {
		t.Fatalf("settled %v with one of report 1's two work requests complete", out)
	}
	q.done = 4
	if out := pop(); !slices.Equal(out, []got{{1, true}, {2, true}}) {
		t.Fatalf("settled %v after 4 completions, want reports 1 and 2 applied", out)
	}
	q.fail(errors.New("remote access error"), 4) // work request 4 completes in error
	q.done = 5
	if out := pop(); !slices.Equal(out, []got{{3, false}}) {
		t.Fatalf("settled %v after the error, want report 3 unconfirmed", out)
	}
	// A QP that failed settles what comes later at once, unconfirmed.
	q.posted = 6
	q.pend(token{seq: 4})
	if out := pop(); !slices.Equal(out, []got{{4, false}}) {
		t.Fatalf("settled %v on a failed QP, want report 4 unconfirmed", out)
	}
}
