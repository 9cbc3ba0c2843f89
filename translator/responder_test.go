package translator

import (
	"testing"

	"github.com/dtakit/dtakit/rocev2"
)

// TestAdvertisementResponder: the translator's responder for the
// collector's SENDs re-ACKs a repeated advertisement (its PSN, MSN 1)
// without taking it again, and NAKs SENDs ahead of the expected PSN once
// per gap (IBTA 9.7.5.1.1), not once per SEND.
func TestAdvertisementResponder(t *testing.T) {
	ft := newFakeTarget(t, kwInst(t))
	h := newHarness(t, Config{}, ft)
	h.connect()
	var q *fakeQP
	for _, x := range ft.qps {
		q = x
	}
	send := func(psn rocev2.PSN) []rocev2.Packet {
		t.Helper()
		h.e.ResetOutput()
		b, err := (&rocev2.Packet{
			BTH:     rocev2.BTH{Opcode: rocev2.RCSendOnly, PKey: 0xFFFF, DestQP: q.peerQPN, PSN: psn, AckReq: true},
			Payload: []byte("late"),
		}).AppendDatagram(nil, ft.addr, ft.peer)
		if err != nil {
			t.Fatal(err)
		}
		h.e.HandleRoCE(b, ft.addr, h.now)
		roce, _ := h.e.Output()
		var out []rocev2.Packet
		for _, d := range roce {
			var p rocev2.Packet
			if err := p.DecodeDatagram(d.Buf, ft.peer, ft.addr); err != nil || d.Addr != ft.addr {
				t.Fatalf("response to %v: %v", d.Addr, err)
			}
			out = append(out, p)
		}
		return out
	}
	if got := send(q.sendPSN); len(got) != 1 || got[0].BTH.PSN != q.sendPSN || got[0].AETH.Syndrome != rocev2.SyndromeACK || got[0].AETH.MSN != 1 {
		t.Errorf("repeated advertisement: responses %+v, want one ACK of PSN %#x, MSN 1", got, q.sendPSN)
	}
	want := q.sendPSN.Next()
	if got := send(want.Add(2)); len(got) != 1 || got[0].BTH.PSN != want || got[0].AETH.Syndrome != rocev2.SyndromeNAKPSNSequenceError {
		t.Errorf("a SEND ahead: responses %+v, want one sequence NAK of PSN %#x", got, want)
	}
	if got := send(want.Add(3)); len(got) != 0 {
		t.Errorf("a second SEND in the same gap: responses %+v, want none", got)
	}
	if infos := h.e.Instances(); len(infos) != 1 || !infos[0].Ready {
		t.Errorf("instances %+v", infos)
	}
}
