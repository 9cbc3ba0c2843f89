package target

import (
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// A REQ from an address outside Config.Peers gets a REJ (consumer) and no
// queue pair; the configured peer still connects.
func TestCMRefusesForeignPeer(t *testing.T) {
	tg, err := New(Config{Addr: targetAddr, Peers: []netip.Prefix{netip.PrefixFrom(peerAddr.Addr(), 32)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Listen(40050, ListenConfig{}); err != nil {
		t.Fatal(err)
	}
	foreign := &cmPeer{peer: &peer{tb: t, t: tg, addr: netip.MustParseAddrPort("10.0.0.3:50000"), qpn: 0x123, psn: 1}, commID: 7, tid: 1}
	ms := cmMessages(t, foreign.send(foreign.req(40050)))
	if len(ms) != 1 {
		t.Fatalf("foreign REQ answered with %d messages", len(ms))
	}
	if rej, ok := ms[0].(*cm.Reject); !ok || rej.Reason != cm.RejectConsumer || rej.RemoteCommID != 7 {
		t.Fatalf("foreign REQ answered with %v, want a REJ (reason %d)", ms[0], cm.RejectConsumer)
	}
	if c := tg.Counters(); c.RefusedPeer != 1 || c.Rejects != 1 || len(tg.qps) != 0 {
		t.Fatalf("after a foreign REQ: RefusedPeer %d, Rejects %d, %d QPs; want 1, 1, 0", c.RefusedPeer, c.Rejects, len(tg.qps))
	}
	good := &cmPeer{peer: &peer{tb: t, t: tg, addr: peerAddr, qpn: 0x124, psn: 1}, commID: 8, tid: 2}
	if ms := cmMessages(t, good.send(good.req(40050))); len(ms) != 1 {
		t.Fatalf("configured peer's REQ answered with %d messages", len(ms))
	} else if _, ok := ms[0].(*cm.ConnectReply); !ok {
		t.Fatalf("configured peer's REQ answered with %v, want a REP", ms[0])
	}
}

// The default peers are loopback only.
func TestCMDefaultPeersLoopback(t *testing.T) {
	tg, err := New(Config{Addr: targetAddr})
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Listen(40050, ListenConfig{}); err != nil {
		t.Fatal(err)
	}
	c := &cmPeer{peer: &peer{tb: t, t: tg, addr: peerAddr, qpn: 0x123, psn: 1}, commID: 7, tid: 1}
	if ms := cmMessages(t, c.send(c.req(40050))); len(ms) != 1 {
		t.Fatalf("REQ answered with %d messages", len(ms))
	} else if _, ok := ms[0].(*cm.Reject); !ok {
		t.Fatalf("REQ from %v to a target with default peers answered with %v, want a REJ", peerAddr, ms[0])
	}
	if c := tg.Counters(); c.RefusedPeer != 1 {
		t.Fatalf("RefusedPeer %d, want 1", c.RefusedPeer)
	}
	if _, err := New(Config{Addr: targetAddr, Peers: []netip.Prefix{{}}}); err == nil {
		t.Fatal("New accepted an invalid peer prefix")
	}
}

// A flood of REQs from one allowed address that never sends an RTU holds
// MaxHalfOpen queue pairs at most: another peer still connects while the
// target is small enough that the flood would otherwise fill it.
func TestCMHalfOpenFlood(t *testing.T) {
	tg, err := New(Config{Addr: targetAddr, Peers: testPeers, MaxQPs: 16})
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Listen(40050, ListenConfig{}); err != nil {
		t.Fatal(err)
	}
	const flood = 1000
	reps := 0
	for i := range flood {
		f := &cmPeer{peer: &peer{tb: t, t: tg, addr: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.3"), uint16(10000+i)), qpn: 0x200, psn: 1}, commID: uint32(1000 + i), tid: uint64(i)}
		for _, m := range cmMessages(t, f.send(f.req(40050))) {
			if _, ok := m.(*cm.ConnectReply); ok {
				reps++
			}
		}
	}
	if reps != DefaultMaxHalfOpen {
		t.Errorf("flood of %d REQs from one address got %d REPs, want MaxHalfOpen = %d", flood, reps, DefaultMaxHalfOpen)
	}
	if c := tg.Counters(); c.HalfOpen != flood-DefaultMaxHalfOpen {
		t.Errorf("HalfOpen %d, want %d", c.HalfOpen, flood-DefaultMaxHalfOpen)
	}
	c, _ := newCMPeerOn(t, tg)
	rep, _ := c.connect(t)
	if qp := tg.qps[rep.LocalQPN]; qp == nil || qp.state != qpReady {
		t.Fatalf("configured peer not connected during the flood: %+v", qp)
	}
}

// newCMPeerOn returns an active-side peer at peerAddr for tg, which
// listens on 40050 with a greeting (as newCMPeer's).
func newCMPeerOn(t *testing.T, tg *Target) (*cmPeer, *[]Completion) {
	t.Helper()
	tg.Unlisten(40050)
	var got []Completion
	if err := tg.Listen(40050, ListenConfig{Greeting: []byte("advertisement"), OnRecv: func(_ *QP, c Completion) { got = append(got, c) }}); err != nil {
		t.Fatal(err)
	}
	return &cmPeer{peer: &peer{tb: t, t: tg, addr: peerAddr, qpn: 0x123, psn: 0x4242}, commID: 0xC0FFEE, tid: 77}, &got
}

// An RDMA WRITE on a QP from an address other than the QP's peer (with a
// correct ICRC for its own addresses, the right QPN and the expected PSN)
// writes nothing and is counted as Foreign, as a NIC's responder checks
// the packet's source against the QP's remote address.
func TestForeignSourceDoesNotWrite(t *testing.T) {
	p := newPeer(t, 1024)
	g := newGuarded(64)
	r := register(t, p.t, g, RemoteWrite)
	p.addr = netip.MustParseAddrPort("10.0.0.3:50000")
	psn := p.psn
	if resp := p.send(p.write(r.VA(), r.RKey(), []byte{1, 2, 3, 4}, true)); len(resp) != 0 {
		t.Fatalf("foreign WRITE answered: %+v", resp)
	}
	if g.mem[0] != 0 {
		t.Fatalf("foreign WRITE wrote %x", g.mem[:4])
	}
	if c := p.t.Counters(); c.Foreign != 1 || c.WritePackets != 0 {
		t.Fatalf("Foreign %d, WritePackets %d; want 1, 0", c.Foreign, c.WritePackets)
	}
	// The peer's own WRITE with the same PSN lands.
	p.addr, p.psn = peerAddr, psn
	wantAck(t, p.send(p.write(r.VA(), r.RKey(), []byte{1, 2, 3, 4}, true)), rocev2.SyndromeACK, psn)
	if g.mem[0] != 1 {
		t.Fatal("the peer's WRITE did not land")
	}
	g.check(t)
}

// REQs from many allowed addresses, each within MaxHalfOpen, fill the
// target; a REQ from a peer holding none then evicts a waiting connection
// of the address holding the most, and the peer connects.
func TestCMHalfOpenManyAddresses(t *testing.T) {
	tg, err := New(Config{Addr: targetAddr, Peers: testPeers, MaxQPs: 16})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		a := netip.AddrFrom4([4]byte{10, 0, 1, byte(i % 8)})
		f := &cmPeer{peer: &peer{tb: t, t: tg, addr: netip.AddrPortFrom(a, uint16(10000+i)), qpn: 0x200, psn: 1}, commID: uint32(1000 + i), tid: uint64(i)}
		if i == 0 {
			if err := tg.Listen(40050, ListenConfig{}); err != nil {
				t.Fatal(err)
			}
		}
		f.send(f.req(40050))
	}
	if len(tg.qps) != 16 {
		t.Fatalf("%d QPs after the flood, want the target full (16)", len(tg.qps))
	}
	reaped := tg.Counters().Reaped
	c, _ := newCMPeerOn(t, tg)
	rep, _ := c.connect(t)
	if qp := tg.qps[rep.LocalQPN]; qp == nil || qp.state != qpReady {
		t.Fatalf("peer not connected to a target full of waiting connections: %+v", qp)
	}
	if r := tg.Counters().Reaped; r != reaped+1 {
		t.Errorf("Reaped %d -> %d, want one waiting connection evicted", reaped, r)
	}
}

// TestPrefetchForgetsDeregistered: a worker's prefetch keeps the region it
// last looked up, but not once the region is deregistered: its memory is
// its owner's again.
func TestPrefetchForgetsDeregistered(t *testing.T) {
	p := newPeer(t, 1024)
	r := register(t, p.t, newGuarded(4096), RemoteWrite)
	b := p.write(r.VA(), r.RKey(), []byte{1, 2, 3, 4}, true)
	var w worker
	w.prefetch(p.t, b)
	if w.region != r {
		t.Fatalf("prefetch kept %p, want the region %p", w.region, r)
	}
	if err := p.t.Deregister(r); err != nil {
		t.Fatal(err)
	}
	w.prefetch(p.t, b)
	if w.region != nil {
		t.Fatal("prefetch still holds the deregistered region")
	}
}
