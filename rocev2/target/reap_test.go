package target

import (
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/rocev2/cm"
)

// connectN opens n connections from c's address, each from its own port
// (one port's new connection would replace the last) with its own comm ID,
// at now, and completes them with an RTU.
func connectN(t *testing.T, c *cmPeer, n int, now time.Time) {
	t.Helper()
	for i := range n {
		c.commID = uint32(0x10000 + i)
		c.addr = netip.AddrPortFrom(c.addr.Addr(), uint16(20000+i))
		ms := cmMessages(t, c.sendAt(now, c.req(40050)))
		rep, ok := ms[0].(*cm.ConnectReply)
		if len(ms) != 1 || !ok {
			t.Fatalf("REQ %d answered with %v", i, ms)
		}
		c.sendAt(now, c.mad(cm.Header(c.tid, cm.AttrRTU), &cm.ReadyToUse{LocalCommID: c.commID, RemoteCommID: rep.LocalCommID}))
	}
}

// TestAbandonedQPsDoNotLockOut: 1024 connections whose peer vanished
// without a DREQ fill the target; a new connection is refused only while
// they are fresh, and evicts the longest silent one after that.
func TestAbandonedQPsDoNotLockOut(t *testing.T) {
	c, _ := newCMPeer(t)
	connectN(t, c, 1024, t0)
	if n := len(c.t.qps); n != 1024 {
		t.Fatalf("%d QPs, want 1024", n)
	}
	c.commID, c.addr = 0xABCDEF, netip.AddrPortFrom(c.addr.Addr(), 5000)
	ms := cmMessages(t, c.sendAt(t0.Add(100*time.Millisecond), c.req(40050)))
	if rej, ok := ms[0].(*cm.Reject); !ok || rej.Reason != rejectNoResources {
		t.Fatalf("REQ while 1024 live QPs: %v, want REJ reason %d", ms[0], rejectNoResources)
	}
	c.commID, c.addr = 0xABCDF0, netip.AddrPortFrom(c.addr.Addr(), 5001)
	ms = cmMessages(t, c.sendAt(t0.Add(2*ErrorLinger), c.req(40050)))
	if _, ok := ms[0].(*cm.ConnectReply); !ok {
		t.Fatalf("REQ after the QPs fell silent: %v, want a REP", ms[0])
	}
	if got := c.t.Counters().Reaped; got != 1 {
		t.Errorf("Reaped = %d, want 1", got)
	}
}

// TestIdleQPsAreDisconnected: a QP silent past IdleTimeout gets a DREQ and
// is gone when the DREQ times out.
func TestIdleQPsAreDisconnected(t *testing.T) {
	c, _ := newCMPeer(t)
	connectN(t, c, 3, t0)
	now := t0.Add(DefaultIdleTimeout + time.Second)
	var dreqs int
	for range MaxTries + 2 { // the DREQ and its resends, then the timeout
		for _, m := range cmMessages(t, c.tick(now)) {
			if _, ok := m.(*cm.DisconnectRequest); ok {
				dreqs++
			}
		}
		now = now.Add(RetryInterval)
	}
	if dreqs < 3 || len(c.t.qps) != 0 {
		t.Fatalf("%d DREQs, %d QPs left; want a DREQ each and none left", dreqs, len(c.t.qps))
	}
	if got := c.t.Counters().Reaped; got != 3 {
		t.Errorf("Reaped = %d, want 3", got)
	}
}

// TestForeignCMIgnored: an RTU or DREQ naming a connection, sent from
// another address than its peer's, neither completes nor ends it.
func TestForeignCMIgnored(t *testing.T) {
	c, _ := newCMPeer(t)
	rep, _ := c.connect(t)
	qp := c.t.qps[rep.LocalQPN]
	forger := &cmPeer{peer: &peer{tb: t, t: c.t, addr: netip.MustParseAddrPort("127.0.0.99:4791"), qpn: 0x999}, commID: c.commID, tid: 5}
	resp := forger.send(forger.mad(cm.Header(5, cm.AttrDREQ), &cm.DisconnectRequest{LocalCommID: c.commID, RemoteCommID: rep.LocalCommID, RemoteQPN: rep.LocalQPN}))
	if len(cmMessages(t, resp)) != 0 {
		t.Errorf("a forged DREQ was answered: %v", cmMessages(t, resp))
	}
	if c.t.qps[rep.LocalQPN] != qp || qp.state != qpReady {
		t.Fatalf("a forged DREQ ended the connection (state %v)", qp.state)
	}
	if got := c.t.Counters().ForeignCM; got != 1 {
		t.Errorf("ForeignCM = %d, want 1", got)
	}
	// The real peer's DREQ still works.
	resp = c.send(c.mad(cm.Header(6, cm.AttrDREQ), &cm.DisconnectRequest{LocalCommID: c.commID, RemoteCommID: rep.LocalCommID, RemoteQPN: rep.LocalQPN}))
	if ms := cmMessages(t, resp); len(ms) != 1 || c.t.qps[rep.LocalQPN] != nil {
		t.Fatalf("the peer's DREQ: %v, QP still there: %v", ms, c.t.qps[rep.LocalQPN] != nil)
	}
}
