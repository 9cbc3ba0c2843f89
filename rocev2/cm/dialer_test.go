package cm

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/dtakit/dtakit/rocev2"
)

func testDial(t testing.TB) (*Dialer, []byte) {
	t.Helper()
	d, req, err := Dial(nil, DialConfig{Request: ConnectRequest{LocalCommID: 0x1111, LocalQPN: 0x22, StartingPSN: 5},
		TID: 0xAB, Timeout: 10 * time.Millisecond, Tries: 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d, req
}

func decodeAs[M Message](t *testing.T, mad []byte, attr AttrID) (MADHeader, M) {
	t.Helper()
	h, m, err := DecodeMAD(mad)
	if err != nil || h.AttrID != attr {
		t.Fatalf("MAD % x: attribute %v, %v; want %v", mad[:24], h.AttrID, err, attr)
	}
	mm, ok := m.(M)
	if !ok {
		t.Fatalf("message %T", m)
	}
	return h, mm
}

func TestDialEstablish(t *testing.T) {
	d, req := testDial(t)
	h, r := decodeAs[*ConnectRequest](t, req, AttrREQ)
	if h.TransactionID != 0xAB || r.LocalCommID != 0x1111 || r.LocalQPN != 0x22 {
		t.Fatalf("REQ %+v %+v", h, r)
	}
	rep := &ConnectReply{LocalCommID: 0x3333, RemoteCommID: 0x1111, LocalQPN: 0x44, StartingPSN: 0x123456}
	ev, rtu := d.Handle(nil, Header(0xAB, AttrREP), rep)
	if ev != Established || d.RemoteQPN() != 0x44 || d.RemoteCommID() != 0x3333 || d.StartPSN() != 0x123456 || !d.Connected() {
		t.Fatalf("REP: %v, remote QP %#x comm %#x PSN %#x", ev, d.RemoteQPN(), d.RemoteCommID(), d.StartPSN())
	}
	if h, m := decodeAs[*ReadyToUse](t, rtu, AttrRTU); h.TransactionID != 0xAB || m.LocalCommID != 0x1111 || m.RemoteCommID != 0x3333 {
		t.Errorf("RTU %+v %+v", h, m)
	}
	// A repeated REP (the RTU was lost) gets the same RTU; one from
	// another connection is foreign.
	if ev, again := d.Handle(nil, Header(0xAB, AttrREP), rep); ev != None || !bytes.Equal(again, rtu) {
		t.Errorf("repeated REP: %v, RTU equal %v", ev, bytes.Equal(again, rtu))
	}
	other := *rep
	other.LocalCommID = 0x9999
	if ev, b := d.Handle(nil, Header(0xAB, AttrREP), &other); ev != Foreign || b != nil {
		t.Errorf("REP of another peer connection: %v", ev)
	}
	if ev, _ := d.Handle(nil, Header(0xAB, AttrREJ), &Reject{RemoteCommID: 0x1111}); ev != Foreign {
		t.Errorf("REJ after the REP: %v, want Foreign", ev)
	}
	if ev, _ := d.Tick(nil, int64(time.Hour)); ev != None {
		t.Errorf("Tick once connected: %v", ev)
	}
	dreq := d.Disconnect(nil, 0xCD)
	if h, m := decodeAs[*DisconnectRequest](t, dreq, AttrDREQ); h.TransactionID != 0xCD || m.RemoteCommID != 0x3333 || m.RemoteQPN != 0x44 {
		t.Errorf("DREQ %+v %+v", h, m)
	}
	if d.Connected() || d.Disconnect(nil, 0xCE) != nil {
		t.Error("connected after Disconnect, or a second DREQ")
	}
}

func TestDialResendsAndGivesUp(t *testing.T) {
	d, req := testDial(t)
	ms := int64(time.Millisecond)
	if ev, b := d.Tick(nil, 9*ms); ev != None || b != nil {
		t.Fatalf("before the timeout: %v, %d bytes", ev, len(b))
	}
	for i, at := range []int64{10, 20} {
		if ev, b := d.Tick(nil, at*ms); ev != None || !bytes.Equal(b, req) {
			t.Fatalf("resend %d: %v, same REQ %v", i+1, ev, bytes.Equal(b, req))
		}
	}
	if ev, b := d.Tick(nil, 30*ms); ev != GaveUp || b != nil {
		t.Fatalf("after 3 REQs: %v", ev)
	}
	if ev, _ := d.Handle(nil, Header(0xAB, AttrREP), &ConnectReply{RemoteCommID: 0x1111}); ev != Foreign {
		t.Errorf("REP after giving up: %v", ev)
	}
}

func TestDialRejectedAndClosed(t *testing.T) {
	d, _ := testDial(t)
	if ev, _ := d.Handle(nil, Header(0xAB, AttrREJ), &Reject{RemoteCommID: 0x2222, Reason: RejectInvalidServiceID}); ev != Foreign {
		t.Errorf("REJ of another connection: %v", ev)
	}
	if ev, _ := d.Handle(nil, Header(0xAB, AttrREJ), &Reject{RemoteCommID: 0x1111, Reason: RejectInvalidServiceID}); ev != Rejected || d.Reason() != RejectInvalidServiceID {
		t.Errorf("REJ: %v, reason %d", ev, d.Reason())
	}

	d, _ = testDial(t)
	d.Handle(nil, Header(0xAB, AttrREP), &ConnectReply{LocalCommID: 0x3333, RemoteCommID: 0x1111, LocalQPN: 0x44})
	ev, drep := d.Handle(nil, Header(0x77, AttrDREQ), &DisconnectRequest{LocalCommID: 0x3333, RemoteCommID: 0x1111})
	if ev != Closed || d.Connected() {
		t.Fatalf("DREQ: %v", ev)
	}
	if h, m := decodeAs[*DisconnectReply](t, drep, AttrDREP); h.TransactionID != 0x77 || m.LocalCommID != 0x1111 || m.RemoteCommID != 0x3333 {
		t.Errorf("DREP %+v %+v", h, m)
	}
	if ev, again := d.Handle(nil, Header(0x77, AttrDREQ), &DisconnectRequest{RemoteCommID: 0x1111}); ev != None || again == nil {
		t.Errorf("repeated DREQ: %v, want a DREP again", ev)
	}
}

func TestDialRefusesBadConfig(t *testing.T) {
	for _, c := range []DialConfig{{Tries: 0, Timeout: time.Second}, {Tries: 1}} {
		if _, _, err := Dial(nil, c, 0); !errors.Is(err, ErrDial) {
			t.Errorf("%+v: %v, want ErrDial", c, err)
		}
	}
}

// FuzzDialer: any MAD a peer sends, decoded, leaves a Dialer in a state it
// can explain, without panicking; an answer it sends decodes.
func FuzzDialer(f *testing.F) {
	for _, m := range []struct {
		a AttrID
		m Message
	}{
		{AttrREP, &ConnectReply{LocalCommID: 0x3333, RemoteCommID: 0x1111, LocalQPN: 0x44}},
		{AttrREJ, &Reject{RemoteCommID: 0x1111, Reason: 8}},
		{AttrDREQ, &DisconnectRequest{RemoteCommID: 0x1111}},
		{AttrDREP, &DisconnectReply{RemoteCommID: 0x1111}},
	} {
		b, err := AppendMAD(nil, Header(1, m.a), m.m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(0))
	}
	f.Fuzz(func(t *testing.T, mad []byte, tick uint8) {
		d, _ := testDial(t)
		d.Tick(nil, int64(tick)*int64(time.Millisecond))
		h, m, err := DecodeMAD(mad)
		if err != nil {
			return
		}
		for range 2 {
			ev, answer := d.Handle(nil, h, m)
			if ev > Foreign {
				t.Fatalf("event %d", ev)
			}
			if answer != nil {
				if _, _, err := DecodeMAD(answer); err != nil {
					t.Fatalf("answer does not decode: %v", err)
				}
			}
			if ev == Established && (d.StartPSN() > rocev2.PSNMask || !d.Connected()) {
				t.Fatalf("established with PSN %#x", d.StartPSN())
			}
		}
	})
}
