package target

import (
	"fmt"
	"net/netip"

	"github.com/dtakit/dtakit/internal/netguard"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// The passive side of the RDMA CM, as a librdmacm listener behaves to an
// active peer (contract of issue 7, section 8.6).

// ListenConfig configures a CM listener.
type ListenConfig struct {
	// Greeting, when not nil, is SENT (one SEND Only, at most 256 bytes, the
	// smallest path MTU) on each connection as soon as it is established,
	// and resent until acknowledged. A DTA collector sends its
	// advertisement this way.
	Greeting []byte
	// FollowUp, when not nil, is called when a connection is established
	// (inside Process, like OnConnect) and each message it returns, at
	// most the path MTU, is SENT after the greeting, in order: what the
	// peer must learn from the memory's state at that moment (a DTA
	// collector's Append heads). They are not bound by MaxPendingSends.
	FollowUp func() [][]byte
	// OnRecv, when not nil, is called for each receive completion of the
	// listener's connections: a SEND into a posted receive buffer, or an RDMA
	// WRITE with Immediate. It runs inside Process with the queue pair
	// locked: it must not call the Target's or a QP's methods, and should
	// return quickly.
	OnRecv func(*QP, Completion)
	// OnConnect, when not nil, is called (like OnRecv, inside Process) when
	// a connection is established, before the greeting is sent.
	OnConnect func(*QP)
}

type listener struct {
	port uint16
	cfg  ListenConfig
}

// Listen accepts connections on CM port (service ID cm.ServiceID(port)).
func (t *Target) Listen(port uint16, cfg ListenConfig) error {
	if len(cfg.Greeting) > 256 {
		return fmt.Errorf("target.Listen: %w: greeting of %d bytes, more than 256", ErrListen, len(cfg.Greeting))
	}
	t.mu.Lock()
	defer t.unlock()
	if t.closed.Load() {
		return fmt.Errorf("target.Listen: %w", ErrClosed)
	}
	if _, ok := t.listen[port]; ok {
		return fmt.Errorf("target.Listen: %w: port %d already listened on", ErrListen, port)
	}
	if cfg.Greeting != nil {
		cfg.Greeting = append([]byte{}, cfg.Greeting...)
	}
	t.listen[port] = &listener{port: port, cfg: cfg}
	return nil
}

// Unlisten stops accepting connections on port; established connections
// stay.
func (t *Target) Unlisten(port uint16) error {
	t.mu.Lock()
	defer t.unlock()
	if _, ok := t.listen[port]; !ok {
		return fmt.Errorf("target.Unlisten: %w: port %d not listened on", ErrListen, port)
	}
	delete(t.listen, port)
	return nil
}

// Reject reasons the target sends (IBTA vol. 1, table 108), beyond those of
// package cm.
const (
	rejectNoResources   = 3
	rejectTransportType = 9
)

// handleCM handles a datagram to QP 1; t.mu is held, and each QP's lock is
// taken to change it.
func (t *Target) handleCM(now int64, p *rocev2.Packet, src netip.AddrPort, out *Output) {
	if p.BTH.Opcode != rocev2.UDSendOnly || p.DETH.QKey != cm.QKey {
		t.c.Malformed++
		return
	}
	h, m, err := cm.DecodeMAD(p.Payload)
	if err != nil {
		t.c.Malformed++
		return
	}
	t.c.CMReceived++
	switch m := m.(type) {
	case *cm.ConnectRequest:
		t.onREQ(now, h, m, src, out)
	case *cm.ReadyToUse:
		if qp := t.connection(m.RemoteCommID, m.LocalCommID, src); qp != nil {
			qp.mu.Lock()
			if qp.state == qpWaitRTU {
				qp.lastRx = now
				qp.establish(now, out)
			}
			qp.mu.Unlock()
		}
	case *cm.DisconnectRequest:
		qp := t.connection(m.RemoteCommID, m.LocalCommID, src)
		if qp == nil && t.byComm[m.RemoteCommID] != nil {
			return // another address's connection: no DREP, no disconnection
		}
		// A DREP answers every DREQ, repeated ones too: the first DREP may
		// have been lost.
		t.sendMAD(cm.Header(h.TransactionID, cm.AttrDREP),
			&cm.DisconnectReply{LocalCommID: m.RemoteCommID, RemoteCommID: m.LocalCommID}, src, out)
		if qp != nil {
			t.c.Disconnects++
			qp.mu.Lock()
			t.destroy(qp)
			qp.mu.Unlock()
		}
	case *cm.DisconnectReply:
		if qp := t.connection(m.RemoteCommID, m.LocalCommID, src); qp != nil {
			qp.mu.Lock()
			if qp.state == qpClosing {
				t.c.Disconnects++
				t.destroy(qp)
			}
			qp.mu.Unlock()
		}
	case *cm.Reject:
		// The peer refused the REP (a timeout on its side, say): forget the
		// connection.
		if qp := t.connection(m.RemoteCommID, m.LocalCommID, src); qp != nil {
			qp.mu.Lock()
			t.destroy(qp)
			qp.mu.Unlock()
		}
	default:
		t.c.Malformed++ // a REP: the target makes no REQs
	}
}

// connection returns the QP whose comm IDs are local and remote, if its
// peer is at src's address; a message naming another address's connection
// is counted and ignored. t.mu is held.
func (t *Target) connection(local, remote uint32, src netip.AddrPort) *QP {
	qp := t.byComm[local]
	if qp == nil || qp.acc.RemoteCommID() != remote {
		return nil
	}
	if qp.peer.Addr().Unmap() != src.Addr().Unmap() {
		t.c.ForeignCM++
		return nil
	}
	return qp
}

func (t *Target) onREQ(now int64, h cm.MADHeader, m *cm.ConnectRequest, src netip.AddrPort, out *Output) {
	reject := func(reason uint16) {
		t.c.Rejects++
		t.sendMAD(cm.Header(h.TransactionID, cm.AttrREJ),
			&cm.Reject{RemoteCommID: m.LocalCommID, MessageRejected: 0, Reason: reason}, src, out)
	}
	if !netguard.Contains(t.peers, src.Addr()) {
		// Refused before any state: a REJ the size of the REQ, so a
		// forged source gains no amplification, and a misconfigured
		// translator learns why at once.
		t.c.RefusedPeer++
		reject(cm.RejectConsumer)
		return
	}
	key := reqKey{commID: m.LocalCommID, from: src}
	if qp := t.byReq[key]; qp != nil {
		// A repeated REQ: our REP was lost or is slow. Same REP again.
		var buf [cm.MADLen]byte
		if rep, err := qp.acc.REP(buf[:0]); err == nil {
			t.sendRawMAD(rep, src, out)
		}
		return
	}
	var l *listener
	if m.ServiceID>>16 == cm.ServiceID(0)>>16 {
		l = t.listen[uint16(m.ServiceID)]
	}
	switch {
	case l == nil:
		reject(cm.RejectInvalidServiceID)
		return
	case m.TransportType != 0:
		reject(rejectTransportType)
		return
	case m.PathMTU < cm.MTU256 || m.PathMTU > cm.MTU4096:
		reject(cm.RejectInvalidMTU)
		return
	case t.halfOpen(src, l) >= t.maxHalfOpen:
		t.c.HalfOpen++
		reject(rejectNoResources)
		return
	case len(t.qps) >= t.maxQPs && !t.evictIdle(now) && !t.evictHalfOpen(src):
		reject(rejectNoResources)
		return
	}
	if _, err := cm.DecodeIPHeader(m.PrivateData[:]); err != nil {
		reject(cm.RejectConsumer) // as librdmacm does with a private data header it cannot read
		return
	}
	// A new connection from the same address and port to the same listener
	// replaces the old one: the peer restarted, or gave up on it.
	for _, old := range t.qps {
		if old.listener == l && old.peer == src {
			t.c.Replaced++
			old.mu.Lock()
			t.destroy(old)
			old.mu.Unlock()
		}
	}
	// Each side's starting PSN is the one it expects to receive, as the
	// Linux CM and librdmacm use them (section 8.3): the target sends from
	// the REQ's and advertises its own in the REP.
	qp := t.newQP(src, m.LocalQPN, rocev2.PSN(random32()&rocev2.PSNMask), rocev2.PSN(m.StartingPSN&rocev2.PSNMask), 128<<m.PathMTU)
	qp.listener = l
	qp.onRecv = l.cfg.OnRecv
	qp.state = qpWaitRTU
	qp.lastRx = now
	for {
		qp.localCommID = random32()
		if _, used := t.byComm[qp.localCommID]; !used && qp.localCommID != 0 {
			break
		}
	}
	qp.req = key
	var buf [cm.MADLen]byte
	acc, rep, err := cm.Accept(buf[:0], h, m, cm.ConnectReply{
		LocalCommID:        qp.localCommID,
		LocalQPN:           qp.qpn,
		StartingPSN:        uint32(qp.resp.Expected()),
		ResponderResources: m.InitiatorDepth, // any depth: see rc.AtomicResources
		RNRRetryCount:      7,
		LocalCAGUID:        t.guid(),
	}, cm.AcceptConfig{Timeout: RetryInterval, Tries: MaxTries}, now)
	if err != nil {
		t.destroy(qp) // a REP of the target's own making always encodes
		return
	}
	qp.acc = acc
	t.byComm[qp.localCommID] = qp
	t.byReq[key] = qp
	t.sendRawMAD(rep, src, out)
}

// halfOpen returns the connections from src's address still waiting for
// their RTU, but for the one a REQ from src to l replaces. t.mu is held.
func (t *Target) halfOpen(src netip.AddrPort, l *listener) int {
	n := 0
	for _, qp := range t.qps {
		if qp.peer.Addr().Unmap() != src.Addr().Unmap() || qp.listener == l && qp.peer == src {
			continue
		}
		qp.mu.Lock()
		if qp.state == qpWaitRTU {
			n++
		}
		qp.mu.Unlock()
	}
	return n
}

// guid returns the target's CA GUID, made from its address as a RoCE NIC
// makes it from its MAC.
func (t *Target) guid() uint64 {
	addr := t.local()
	a := addr.Addr().As16()
	var g uint64
	for _, c := range a[8:] {
		g = g<<8 | uint64(c)
	}
	return g ^ uint64(addr.Port())<<48
}

// sendMAD sends a CM message to QP 1 of dst.
func (t *Target) sendMAD(h cm.MADHeader, m cm.Message, dst netip.AddrPort, out *Output) {
	var buf [cm.MADLen]byte
	mad, err := cm.AppendMAD(buf[:0], h, m)
	if err != nil {
		return // the target's messages are valid
	}
	t.sendRawMAD(mad, dst, out)
}

// sendRawMAD sends a MAD to QP 1 of dst.
func (t *Target) sendRawMAD(mad []byte, dst netip.AddrPort, out *Output) {
	p := cm.Packet(mad, t.udPSN)
	t.udPSN = t.udPSN.Next()
	out.add(&p, t.local(), t.replyTo(dst))
}
