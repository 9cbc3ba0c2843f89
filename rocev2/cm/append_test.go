package cm

import (
	"bytes"
	"testing"
	"time"
)

// TestDialerAcceptorDoNotAllocate: with a buffer that has room, the
// Dialer's and the Acceptor's resends and answers (REQ, RTU, DREP, DREQ,
// REP) allocate nothing, as rc's Responder (TestResponderDoesNotAllocate).
func TestDialerAcceptorDoNotAllocate(t *testing.T) {
	d, _ := testDial(t)
	ms := int64(time.Millisecond)
	rep := &ConnectReply{LocalCommID: 0x3333, RemoteCommID: 0x1111, LocalQPN: 0x44, StartingPSN: 9}
	dreq := &DisconnectRequest{LocalCommID: 0x3333, RemoteCommID: 0x1111}
	a, _ := testAccept(t)
	buf := make([]byte, 0, 4*MADLen)
	var sent int
	n := testing.AllocsPerRun(100, func() {
		d.state, d.tries = dialing, 1
		_, b := d.Tick(buf[:0], d.at+10*ms)              // REQ resent
		_, b = d.Handle(b, Header(0xAB, AttrREP), rep)   // RTU
		_, b = d.Handle(b, Header(0xAB, AttrREP), rep)   // the same RTU again
		_, b = d.Handle(b, Header(0x77, AttrDREQ), dreq) // DREP
		sent = len(b)
		a.state, a.tries = waitRTU, 1
		_, b = a.Tick(buf[:0], a.due) // REP resent
		b, _ = a.REP(b)
		a.Close()
		_, b = a.Tick(b, a.due) // DREQ
		d.state = connected
		b = d.Disconnect(b, 0xCD)
		sent += len(b)
	})
	if n != 0 {
		t.Errorf("%v allocations per run", n)
	}
	if sent != 8*MADLen {
		t.Errorf("%d bytes sent per run, want 8 MADs", sent)
	}
}

// TestDialerAcceptorAppend: every MAD is appended to the caller's buffer,
// after what it holds, and nothing is appended when there is nothing to
// send.
func TestDialerAcceptorAppend(t *testing.T) {
	prefix := []byte("held")
	cfg := DialConfig{Request: ConnectRequest{LocalCommID: 0x1111, LocalQPN: 0x22, StartingPSN: 5},
		TID: 0xAB, Timeout: 10 * time.Millisecond, Tries: 3}
	_, want := testDial(t)
	d, b, err := Dial(bytes.Clone(prefix), cfg, 0)
	if err != nil || !bytes.Equal(b, append(bytes.Clone(prefix), want...)) {
		t.Fatalf("Dial: % x, %v", b, err)
	}
	if _, b := d.Tick(prefix, 1); !bytes.Equal(b, prefix) {
		t.Errorf("Tick before the timeout appended % x", b[len(prefix):])
	}
	rep := &ConnectReply{LocalCommID: 0x3333, RemoteCommID: 0x1111, LocalQPN: 0x44, StartingPSN: 9}
	ev, b := d.Handle(bytes.Clone(prefix), Header(0xAB, AttrREP), rep)
	if ev != Established || !bytes.Equal(b[:len(prefix)], prefix) {
		t.Fatalf("REP: %v, % x", ev, b)
	}
	decodeAs[*ReadyToUse](t, b[len(prefix):], AttrRTU)

	_, wantREP := testAccept(t)
	req := &ConnectRequest{LocalCommID: 0x1111, LocalQPN: 0x22}
	a, b, err := Accept(bytes.Clone(prefix), Header(0xAB, AttrREQ), req, ConnectReply{LocalCommID: 0x3333, LocalQPN: 0x44, StartingPSN: 9},
		AcceptConfig{Timeout: 100 * time.Millisecond, Tries: 3}, 0)
	if err != nil || !bytes.Equal(b, append(bytes.Clone(prefix), wantREP...)) {
		t.Fatalf("Accept: % x, %v", b, err)
	}
	if b, err := a.REP(bytes.Clone(prefix)); err != nil || !bytes.Equal(b, append(bytes.Clone(prefix), wantREP...)) {
		t.Errorf("REP: % x, %v", b, err)
	}
	a.Close()
	if _, b := a.Tick(bytes.Clone(prefix), 0); !bytes.Equal(b[:len(prefix)], prefix) || len(b) != len(prefix)+MADLen {
		t.Errorf("DREQ: % x", b)
	} else {
		decodeAs[*DisconnectRequest](t, b[len(prefix):], AttrDREQ)
	}
}
