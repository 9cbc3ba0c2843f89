package exactly

import (
	"bytes"
	"testing"
	"time"
)

// TestStoreRing: the ring holds the last n reports by number; a NACKed
// one is copied out so a newer report may take its slot.
func TestStoreRing(t *testing.T) {
	st := NewStore(4)
	for seq := uint32(0); seq < 6; seq++ {
		st.Put(seq, []byte{byte(seq)})
	}
	if b := st.Sent(1); b != nil {
		t.Fatalf("report 1, overwritten by 5: %x", b)
	}
	if b := st.Sent(5); !bytes.Equal(b, []byte{5}) {
		t.Fatalf("report 5: %x", b)
	}
	c, created := st.Hold(4)
	if c == nil || !created || !bytes.Equal(c.B, []byte{4}) {
		t.Fatalf("hold 4: %+v created %v", c, created)
	}
	st.Put(8, []byte{8}) // takes 4's slot
	if c2, created := st.Hold(4); c2 != c || created || !bytes.Equal(c2.B, []byte{4}) {
		t.Fatal("the copy of 4 did not survive its slot's reuse")
	}
	if c, _ := st.Hold(1); c != nil {
		t.Fatal("held a report the ring no longer has")
	}
}

// TestStoreLoseUnconfirm: a report is counted lost or unconfirmed once;
// its marker stays until it expires, so a late NACK is not a second loss;
// an acknowledged copy is done.
func TestStoreLoseUnconfirm(t *testing.T) {
	t0 := time.Unix(1000, 0).UnixNano()
	st := NewStore(8)
	for seq := uint32(0); seq < 4; seq++ {
		st.Put(seq, []byte{byte(seq)})
	}
	if b, first := st.Lose(1, t0); !first || !bytes.Equal(b, []byte{1}) {
		t.Fatalf("lose 1: %x first %v", b, first)
	}
	if _, first := st.Lose(1, t0); first {
		t.Fatal("1 lost twice")
	}
	if _, ok := st.Unconfirm(1, t0); ok {
		t.Fatal("1, lost, unconfirmed too")
	}
	if st.Sent(1) != nil {
		t.Fatal("a lost report is still probed")
	}
	if b, ok := st.Unconfirm(2, t0); !ok || !bytes.Equal(b, []byte{2}) {
		t.Fatalf("unconfirm 2: %x %v", b, ok)
	}
	st.Hold(3)
	if !st.Acked(3) || st.Acked(3) || st.Held(3) != nil {
		t.Fatal("the acknowledged copy of 3 was not done once")
	}
	st.Expire(t0+int64(time.Second), time.Second)
	if c := st.Held(1); c == nil || !c.Lost {
		t.Fatal("1's marker expired early")
	}
	st.Expire(t0+int64(time.Second+1), time.Second)
	if st.Held(1) != nil {
		t.Fatal("1's marker did not expire")
	}
}

// TestStoreOverdue: a copy sent and unanswered for the wait is overdue
// once; one answered (WaitAt cleared) or sent again since is not.
func TestStoreOverdue(t *testing.T) {
	t0 := time.Unix(1000, 0).UnixNano()
	st := NewStore(8)
	for seq := uint32(0); seq < 3; seq++ {
		st.Put(seq, []byte{byte(seq)})
		c, _ := st.Hold(seq)
		st.Await(seq, c, t0)
	}
	st.Held(1).WaitAt = 0 // a NACK answered it
	st.Await(2, st.Held(2), t0+int64(time.Millisecond))
	wait := 200 * time.Millisecond
	if _, _, ok := st.Overdue(t0+int64(wait), wait); ok {
		t.Fatal("overdue before the wait")
	}
	seq, c, ok := st.Overdue(t0+int64(wait+time.Nanosecond), wait)
	if !ok || seq != 0 || c != st.Held(0) {
		t.Fatalf("overdue %d %v, want 0", seq, ok)
	}
	if seq, _, ok := st.Overdue(t0+int64(wait+time.Nanosecond), wait); ok {
		t.Fatalf("%d overdue: answered or sent again since", seq)
	}
	if seq, _, ok := st.Overdue(t0+int64(wait+2*time.Millisecond), wait); !ok || seq != 2 {
		t.Fatalf("the second copy of 2: %d %v", seq, ok)
	}
	if st.Settled() || len(st.Unsettled()) != 3 {
		t.Fatalf("settled %v, unsettled %v", st.Settled(), st.Unsettled())
	}
}

// TestStoreBehind: a copy held for its resend holds the stream back when
// the next number would put it a window behind, unless it was last sent
// long ago.
func TestStoreBehind(t *testing.T) {
	t0 := time.Unix(1000, 0).UnixNano()
	st := NewStore(Window)
	st.Put(5, []byte{5})
	c, _ := st.Hold(5)
	st.Resendable(5)
	if st.Behind(5+Window-2, t0, time.Second) {
		t.Fatal("behind before a window")
	}
	if !st.Behind(5+Window-1, t0, time.Second) {
		t.Fatal("not behind a window on")
	}
	c.LastSent = t0
	if st.Behind(5+Window-1, t0+int64(time.Second), time.Second) {
		t.Fatal("a copy sent long ago held the stream back")
	}
}
