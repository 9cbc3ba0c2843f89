package cm

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func testAccept(t *testing.T) (*Acceptor, []byte) {
	t.Helper()
	req := &ConnectRequest{LocalCommID: 0x1111, LocalQPN: 0x22}
	a, rep, err := Accept(nil, Header(0xAB, AttrREQ), req, ConnectReply{LocalCommID: 0x3333, LocalQPN: 0x44, StartingPSN: 9},
		AcceptConfig{Timeout: 100 * time.Millisecond, Tries: 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return a, rep
}

func TestAcceptResendsREPUntilUp(t *testing.T) {
	a, rep := testAccept(t)
	h, m := decodeAs[*ConnectReply](t, rep, AttrREP)
	if h.TransactionID != 0xAB || m.RemoteCommID != 0x1111 || m.LocalCommID != 0x3333 || a.RemoteCommID() != 0x1111 || a.LocalCommID() != 0x3333 {
		t.Fatalf("REP %+v %+v", h, m)
	}
	if again, err := a.REP(nil); err != nil || !bytes.Equal(again, rep) {
		t.Errorf("REP for a repeated REQ differs: %v", err)
	}
	ms := int64(time.Millisecond)
	if ev, b := a.Tick(nil, 99*ms); ev != None || b != nil {
		t.Fatalf("before the timeout: %v", ev)
	}
	if ev, b := a.Tick(nil, 100*ms); ev != None || !bytes.Equal(b, rep) {
		t.Fatalf("timeout: %v, the REP again %v", ev, bytes.Equal(b, rep))
	}
	a.Up()
	if ev, b := a.Tick(nil, time.Hour.Nanoseconds()); ev != None || b != nil {
		t.Errorf("a REP after the RTU: %v, %d bytes", ev, len(b))
	}

	a, _ = testAccept(t)
	a.Tick(nil, 100*ms)
	a.Tick(nil, 200*ms)
	if ev, _ := a.Tick(nil, 300*ms); ev != GaveUp {
		t.Errorf("no RTU after 3 REPs: %v, want GaveUp", ev)
	}
}

func TestAcceptCloseResendsDREQ(t *testing.T) {
	a, _ := testAccept(t)
	a.Up()
	a.Close()
	ms := int64(time.Millisecond)
	var tids []uint64
	for _, at := range []int64{0, 100, 200} {
		ev, b := a.Tick(nil, at*ms)
		if ev != None || b == nil {
			t.Fatalf("DREQ at %d ms: %v", at, ev)
		}
		h, m := decodeAs[*DisconnectRequest](t, b, AttrDREQ)
		if m.LocalCommID != 0x3333 || m.RemoteCommID != 0x1111 || m.RemoteQPN != 0x22 {
			t.Fatalf("DREQ %+v", m)
		}
		tids = append(tids, h.TransactionID)
		if ev, b := a.Tick(nil, at*ms+99*ms); ev != None || b != nil {
			t.Fatalf("DREQ before its timeout: %v", ev)
		}
	}
	if tids[0] == tids[1] || tids[1] == tids[2] {
		t.Errorf("DREQ transaction IDs %x: each try its own", tids)
	}
	if ev, _ := a.Tick(nil, 300*ms); ev != GaveUp {
		t.Errorf("no DREP after 3 DREQs: %v, want GaveUp", ev)
	}
}

func TestAcceptRefusesBadConfig(t *testing.T) {
	if _, _, err := Accept(nil, Header(1, AttrREQ), &ConnectRequest{}, ConnectReply{}, AcceptConfig{}, 0); !errors.Is(err, ErrDial) {
		t.Errorf("zero config: %v, want ErrDial", err)
	}
}
