package target

import (
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
	"github.com/dtakit/dtakit/rocev2/rc"
)

var (
	targetAddr = netip.MustParseAddrPort("10.0.0.1:4791")
	peerAddr   = netip.MustParseAddrPort("10.0.0.2:50000")
	t0         = time.Unix(1_000_000, 0)
	// testPeers lets the tests' 10/8 peers connect (the default is
	// loopback).
	testPeers = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
)

const guard = 64 // guard bytes on each side of a test region

// guarded is a region's memory inside a larger buffer whose guard bytes
// must never change.
type guarded struct {
	all []byte
	mem []byte
}

func newGuarded(n int) *guarded {
	// Backed by uint64s so the region starts 8-byte aligned.
	words := make([]uint64, (n+2*guard+7)/8)
	all := unsafeBytes(words)[:n+2*guard]
	for i := range all {
		all[i] = 0xA5
	}
	mem := all[guard : guard+n : guard+n]
	clear(mem)
	return &guarded{all: all, mem: mem}
}

func (g *guarded) check(tb testing.TB) {
	tb.Helper()
	n := len(g.mem)
	for i, c := range g.all {
		if (i < guard || i >= guard+n) && c != 0xA5 {
			tb.Fatalf("guard byte %d (region is %d..%d) changed to %#x", i, guard, guard+n, c)
		}
	}
}

// peer is an in-test requester on one QP of a target.
type peer struct {
	tb   testing.TB
	t    *Target
	qp   *QP
	addr netip.AddrPort
	qpn  uint32
	psn  rocev2.PSN // next PSN
	out  Output
}

// newPeer makes a target, a QP connected to a peer at peerAddr, and the
// peer.
func newPeer(tb testing.TB, mtu int) *peer {
	tb.Helper()
	tg, err := New(Config{Addr: targetAddr, Peers: testPeers})
	if err != nil {
		tb.Fatal(err)
	}
	p := &peer{tb: tb, t: tg, addr: peerAddr, qpn: 0x123, psn: 0xFFFFF0} // PSNs wrap soon
	p.qp, err = tg.NewQP(QPConfig{Peer: peerAddr, RemoteQPN: p.qpn, RecvPSN: p.psn, SendPSN: 0x777, MTU: mtu})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// setExpected makes qp's Responder expect psn next, as a fresh one.
func setExpected(qp *QP, psn rocev2.PSN) {
	r, err := rc.NewResponder(rc.ResponderConfig{RemoteQPN: qp.remoteQPN, StartPSN: psn})
	if err != nil {
		panic(err)
	}
	qp.resp = r
}

// frame encodes pkt from the peer to the target, with its PSN and QP.
func (p *peer) frame(pkt rocev2.Packet) []byte {
	p.tb.Helper()
	pkt.BTH.PKey = rocev2.DefaultPKey
	if pkt.BTH.DestQP == 0 {
		pkt.BTH.DestQP = p.qp.QPN()
	}
	b, err := pkt.AppendDatagram(nil, p.addr, targetAddr)
	if err != nil {
		p.tb.Fatal(err)
	}
	return b
}

// next returns the next PSN and advances.
func (p *peer) next() rocev2.PSN {
	psn := p.psn
	p.psn = p.psn.Next()
	return psn
}

func (p *peer) write(va uint64, rkey uint32, data []byte, ackReq bool) []byte {
	return p.frame(rocev2.Packet{
		BTH:     rocev2.BTH{Opcode: rocev2.RCWriteOnly, PSN: p.next(), AckReq: ackReq},
		RETH:    rocev2.RETH{VA: va, RKey: rkey, DMALength: uint32(len(data))},
		Payload: data,
	})
}

func (p *peer) atomic(op rocev2.Opcode, va uint64, rkey uint32, add, cmp uint64) []byte {
	return p.frame(rocev2.Packet{
		BTH:       rocev2.BTH{Opcode: op, PSN: p.next(), AckReq: true},
		AtomicETH: rocev2.AtomicETH{VA: va, RKey: rkey, SwapAddData: add, CompareData: cmp},
	})
}

// send processes frames as one batch and returns the decoded responses.
func (p *peer) send(frames ...[]byte) []rocev2.Packet {
	return p.sendAt(t0, frames...)
}

func (p *peer) sendAt(now time.Time, frames ...[]byte) []rocev2.Packet {
	p.tb.Helper()
	in := make([]Datagram, len(frames))
	for i, f := range frames {
		in[i] = Datagram{Buf: f, Addr: p.addr}
	}
	p.out.Reset()
	p.t.Process(now.UnixNano(), in, &p.out)
	return p.decodeOut()
}

func (p *peer) tick(now time.Time) []rocev2.Packet {
	p.out.Reset()
	p.t.Tick(now.UnixNano(), &p.out)
	return p.decodeOut()
}

func (p *peer) decodeOut() []rocev2.Packet {
	p.tb.Helper()
	var res []rocev2.Packet
	for _, d := range p.out.Datagrams() {
		var pkt rocev2.Packet
		if err := pkt.DecodeDatagram(append([]byte(nil), d.Buf...), targetAddr, d.Addr); err != nil {
			p.tb.Fatalf("target sent an undecodable datagram: %v", err)
		}
		res = append(res, pkt)
	}
	return res
}

// wantAck checks that resp is exactly one ACK/NAK with the syndrome and PSN.
func wantAck(tb testing.TB, resp []rocev2.Packet, s rocev2.Syndrome, psn rocev2.PSN) rocev2.Packet {
	tb.Helper()
	if len(resp) != 1 {
		tb.Fatalf("got %d responses, want 1: %+v", len(resp), resp)
	}
	r := resp[0]
	if r.BTH.Opcode != rocev2.RCAcknowledge || r.AETH.Syndrome != s || r.BTH.PSN != psn || r.BTH.DestQP != 0x123 {
		tb.Fatalf("got %v syndrome %#x PSN %#x to QP %#x, want Acknowledge %#x PSN %#x to QP 0x123",
			r.BTH.Opcode, r.AETH.Syndrome, r.BTH.PSN, r.BTH.DestQP, s, psn)
	}
	return r
}

// cmPeer drives the CM from the active side.
type cmPeer struct {
	*peer
	commID uint32
	tid    uint64
}

func (c *cmPeer) mad(h cm.MADHeader, m cm.Message) []byte {
	c.tb.Helper()
	mad, err := cm.AppendMAD(nil, h, m)
	if err != nil {
		c.tb.Fatal(err)
	}
	pkt := cm.Packet(mad, 0)
	b, err := pkt.AppendDatagram(nil, c.addr, targetAddr)
	if err != nil {
		c.tb.Fatal(err)
	}
	return b
}

func (c *cmPeer) req(port uint16) []byte {
	m := &cm.ConnectRequest{
		LocalCommID: c.commID, ServiceID: cm.ServiceID(port), LocalQPN: c.qpn,
		StartingPSN: uint32(c.psn), PKey: 0xFFFF, PathMTU: cm.MTU1024, MaxCMRetries: 15, RetryCount: 3,
		InitiatorDepth: 4, ResponderResources: 4,
	}
	if err := m.SetIPPrivateData(cm.IPHeader{SrcPort: c.addr.Port(), Src: c.addr.Addr(), Dst: targetAddr.Addr()}, nil); err != nil {
		c.tb.Fatal(err)
	}
	return c.mad(cm.Header(c.tid, cm.AttrREQ), m)
}

// cmMessages decodes the CM messages among packets.
func cmMessages(tb testing.TB, pkts []rocev2.Packet) []cm.Message {
	tb.Helper()
	var ms []cm.Message
	for _, p := range pkts {
		if p.BTH.DestQP != cm.GSIQP {
			continue
		}
		if p.BTH.Opcode != rocev2.UDSendOnly || p.DETH.QKey != cm.QKey || p.DETH.SrcQP != cm.GSIQP {
			tb.Fatalf("CM datagram with %v, Q_Key %#x, source QP %d", p.BTH.Opcode, p.DETH.QKey, p.DETH.SrcQP)
		}
		_, m, err := cm.DecodeMAD(p.Payload)
		if err != nil {
			tb.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}
