package target

import (
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// newCMPeer makes a target listening on port 40050 with a greeting, and an
// active-side peer.
func newCMPeer(t *testing.T) (*cmPeer, *[]Completion) {
	t.Helper()
	tg, err := New(Config{Addr: targetAddr, Peers: testPeers})
	if err != nil {
		t.Fatal(err)
	}
	var got []Completion
	if err := tg.Listen(40050, ListenConfig{Greeting: []byte("advertisement"), OnRecv: func(_ *QP, c Completion) { got = append(got, c) }}); err != nil {
		t.Fatal(err)
	}
	return &cmPeer{peer: &peer{tb: t, t: tg, addr: peerAddr, qpn: 0x123, psn: 0x4242}, commID: 0xC0FFEE, tid: 77}, &got
}

// connect runs REQ, REP, RTU and returns the REP and the greeting SEND.
func (c *cmPeer) connect(t *testing.T) (*cm.ConnectReply, rocev2.Packet) {
	t.Helper()
	reqPSN := c.psn
	ms := cmMessages(t, c.send(c.req(40050)))
	if len(ms) != 1 {
		t.Fatalf("REQ answered with %d messages", len(ms))
	}
	rep, ok := ms[0].(*cm.ConnectReply)
	if !ok {
		t.Fatalf("REQ answered with %v", ms[0])
	}
	if rep.RemoteCommID != c.commID || rep.LocalQPN < 2 || rep.LocalQPN > rocev2.PSNMask || rep.StartingPSN > rocev2.PSNMask {
		t.Fatalf("REP %+v", rep)
	}
	c.psn = rocev2.PSN(rep.StartingPSN) // the peer sends from the REP's PSN
	resp := c.send(c.mad(cm.Header(c.tid, cm.AttrRTU), &cm.ReadyToUse{LocalCommID: c.commID, RemoteCommID: rep.LocalCommID}))
	if len(resp) != 1 {
		t.Fatalf("RTU answered with %d packets, want the greeting", len(resp))
	}
	s := resp[0]
	if s.BTH.Opcode != rocev2.RCSendOnly || s.BTH.DestQP != c.qpn || s.BTH.PSN != reqPSN || string(s.Payload) != "advertisement" || !s.BTH.AckReq {
		t.Fatalf("greeting %+v", s)
	}
	return rep, s
}

func TestCMConnectAndWrite(t *testing.T) {
	c, got := newCMPeer(t)
	rep, greet := c.connect(t)
	qp := c.t.qps[rep.LocalQPN]
	if qp == nil || qp.Port() != 40050 || qp.RemoteQPN() != c.qpn || qp.mtu != 1024 {
		t.Fatalf("QP %+v", qp)
	}
	c.qp = qp
	// The peer ACKs the greeting; no resend follows.
	c.send(c.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAcknowledge, PSN: greet.BTH.PSN}, AETH: rocev2.AETH{Syndrome: rocev2.SyndromeACK, MSN: 1}}))
	if resp := c.tick(t0.Add(10 * RetryInterval)); len(resp) != 0 {
		t.Fatalf("after the ACK: %+v", resp)
	}
	// Data at the REQ's starting PSN lands.
	g := newGuarded(64)
	r := register(t, c.t, g, RemoteWrite)
	psn := c.psn
	wantAck(t, c.send(c.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteOnlyImm, PSN: c.next(), AckReq: true},
		RETH: rocev2.RETH{VA: r.VA(), RKey: r.RKey(), DMALength: 4}, ImmDt: rocev2.ImmDt{Data: 3}, Payload: []byte{1, 2, 3, 4}})),
		rocev2.SyndromeACK, psn)
	if g.mem[3] != 4 || len(*got) != 1 || (*got)[0].Imm != 3 {
		t.Fatalf("memory %x, completions %+v", g.mem[:4], *got)
	}
	// DREQ: DREP, and the QP is gone.
	ms := cmMessages(t, c.send(c.mad(cm.Header(99, cm.AttrDREQ), &cm.DisconnectRequest{LocalCommID: c.commID, RemoteCommID: rep.LocalCommID, RemoteQPN: rep.LocalQPN})))
	if len(ms) != 1 {
		t.Fatalf("DREQ answered %v", ms)
	}
	if d, ok := ms[0].(*cm.DisconnectReply); !ok || d.LocalCommID != rep.LocalCommID || d.RemoteCommID != c.commID {
		t.Fatalf("DREQ answered %v", ms[0])
	}
	if c.t.qps[rep.LocalQPN] != nil {
		t.Fatal("QP kept after DREQ")
	}
	if resp := c.send(c.write(r.VA(), r.RKey(), []byte{9, 9, 9, 9}, true)); len(resp) != 0 || g.mem[0] != 1 {
		t.Fatalf("write after disconnect: %+v", resp)
	}
	if cnt := c.t.Counters(); cnt.Connections != 1 || cnt.Disconnects != 1 || cnt.Unknown != 1 {
		t.Errorf("counters %+v", cnt)
	}
}

func TestCMRejectUnknownPort(t *testing.T) {
	c, _ := newCMPeer(t)
	ms := cmMessages(t, c.send(c.req(40051)))
	if len(ms) != 1 {
		t.Fatalf("%d answers", len(ms))
	}
	rej, ok := ms[0].(*cm.Reject)
	if !ok || rej.Reason != cm.RejectInvalidServiceID || rej.RemoteCommID != c.commID || rej.MessageRejected != 0 {
		t.Fatalf("answer %v", ms[0])
	}
	if len(c.t.qps) != 0 {
		t.Fatal("QP made for a rejected REQ")
	}
}

func TestCMRepeatedREQ(t *testing.T) {
	c, _ := newCMPeer(t)
	a := cmMessages(t, c.send(c.req(40050)))
	b := cmMessages(t, c.send(c.req(40050)))
	ra, rb := a[0].(*cm.ConnectReply), b[0].(*cm.ConnectReply)
	if *ra != *rb || len(c.t.qps) != 1 {
		t.Fatalf("repeated REQ: REPs %v / %v, %d QPs", ra, rb, len(c.t.qps))
	}
}

func TestCMREPResentThenDropped(t *testing.T) {
	c, _ := newCMPeer(t)
	first := cmMessages(t, c.send(c.req(40050)))[0].(*cm.ConnectReply)
	sent := 1
	for i := 1; i <= 10; i++ {
		ms := cmMessages(t, c.tick(t0.Add(RetryInterval*timeDur(i))))
		for _, m := range ms {
			if rep, ok := m.(*cm.ConnectReply); !ok || *rep != *first {
				t.Fatalf("resent %v", m)
			}
		}
		sent += len(ms)
	}
	if sent != MaxTries || len(c.t.qps) != 0 || c.t.Counters().CMTimeouts != 1 {
		t.Fatalf("%d REPs, %d QPs left, counters %+v", sent, len(c.t.qps), c.t.Counters())
	}
}

func TestCMFirstPacketCompletesConnection(t *testing.T) {
	c, _ := newCMPeer(t)
	rep := cmMessages(t, c.send(c.req(40050)))[0].(*cm.ConnectReply)
	c.qp = c.t.qps[rep.LocalQPN]
	c.psn = rocev2.PSN(rep.StartingPSN)
	g := newGuarded(64)
	r := register(t, c.t, g, RemoteWrite)
	psn := c.psn
	resp := c.send(c.write(r.VA(), r.RKey(), []byte{5, 5, 5, 5}, true))
	// The greeting goes out (the connection is up), then the ACK.
	if len(resp) != 2 || resp[0].BTH.Opcode != rocev2.RCSendOnly {
		t.Fatalf("responses %+v", resp)
	}
	wantAck(t, resp[1:], rocev2.SyndromeACK, psn)
	if ms := cmMessages(t, c.tick(t0.Add(RetryInterval))); len(ms) != 0 {
		t.Fatalf("REP resent after the connection was up: %v", ms)
	}
}

func TestTargetDisconnect(t *testing.T) {
	c, _ := newCMPeer(t)
	rep, _ := c.connect(t)
	qp := c.t.qps[rep.LocalQPN]
	if err := qp.Disconnect(); err != nil {
		t.Fatal(err)
	}
	ms := cmMessages(t, c.tick(t0))
	d, ok := ms[0].(*cm.DisconnectRequest)
	if len(ms) != 1 || !ok || d.LocalCommID != rep.LocalCommID || d.RemoteCommID != c.commID || d.RemoteQPN != c.qpn {
		t.Fatalf("DREQ %v", ms)
	}
	c.send(c.mad(cm.Header(1, cm.AttrDREP), &cm.DisconnectReply{LocalCommID: c.commID, RemoteCommID: rep.LocalCommID}))
	if len(c.t.qps) != 0 {
		t.Fatal("QP kept after DREP")
	}
}

func TestCMReconnectReplacesOldQP(t *testing.T) {
	c, _ := newCMPeer(t)
	rep1, _ := c.connect(t)
	c.commID++ // a restarted peer on the same address and port
	rep2, _ := c.connect(t)
	if rep1.LocalQPN == rep2.LocalQPN || c.t.qps[rep1.LocalQPN] != nil || c.t.qps[rep2.LocalQPN] == nil || len(c.t.qps) != 1 {
		t.Fatalf("QPs after reconnecting: %d (old %#x, new %#x)", len(c.t.qps), rep1.LocalQPN, rep2.LocalQPN)
	}
	if c.t.Counters().Replaced != 1 {
		t.Errorf("counters %+v", c.t.Counters())
	}
	// Another peer address keeps its own connection.
	other := &cmPeer{peer: &peer{tb: t, t: c.t, addr: peerAddr, qpn: 9, psn: 1}, commID: 5}
	other.addr = netip.AddrPortFrom(peerAddr.Addr(), peerAddr.Port()+1)
	other.connect(t)
	if len(c.t.qps) != 2 {
		t.Fatalf("%d QPs", len(c.t.qps))
	}
}
