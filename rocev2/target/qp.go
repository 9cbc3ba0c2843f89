package target

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
	"github.com/dtakit/dtakit/rocev2/rc"
)

type qpState uint8

const (
	qpWaitRTU   qpState = iota + 1 // REP sent; an RTU or a first packet completes the connection
	qpReady                        // connected
	qpError                        // a fatal NAK was sent or a SEND failed: requests are dropped
	qpClosing                      // DREQ sent, waiting for the DREP
	qpDestroyed                    // gone from the target's tables
)

// msgKind is the multi-packet message a responder is in the middle of.
type msgKind uint8

const (
	msgNone msgKind = iota
	msgWrite
	msgSend
)

// Completion is a receive completion: a SEND that landed in a posted receive
// buffer, or an RDMA WRITE with Immediate.
type Completion struct {
	// Data is the filled part of the posted receive buffer a SEND landed in;
	// nil for a WRITE with Immediate.
	Data []byte
	// Write reports an RDMA WRITE with Immediate (which consumes no receive
	// buffer here; see section 8.6).
	Write bool
	// HasImm reports immediate data; Imm holds it (as the ImmDt header
	// carries it, a big-endian number on the wire).
	HasImm bool
	Imm    uint32
}

// QPConfig describes a queue pair made without the CM (NewQP), as a verbs
// program connects one with attributes exchanged out of band.
type QPConfig struct {
	// Peer is the peer's address: requests are accepted only from its IP
	// address, and the target's own SENDs go to it.
	Peer netip.AddrPort
	// RemoteQPN is the peer's QPN (24 bits).
	RemoteQPN uint32
	// RecvPSN is the first PSN the target expects from the peer; SendPSN
	// the first PSN of the target's own SENDs.
	RecvPSN, SendPSN rocev2.PSN
	// MTU is the path MTU in bytes: 256, 512, 1024, 2048 or 4096 (0 means
	// 1024).
	MTU int
	// OnRecv, when not nil, receives every completion (see ListenConfig).
	OnRecv func(*QP, Completion)
}

// QP is an RC queue pair of the target: an rc.Responder for the peer's
// requests, which the QP executes into registered regions and posted
// receive buffers (execute.go); an rc.Requester for the target's own SENDs
// (sends.go); and, for a connection the CM made, a cm.Acceptor (cm.go).
// Its methods take time as Unix nanoseconds, as rc and cm do; Target's
// exported methods convert once.
type QP struct {
	// Set before the QP is published in the target's table, then fixed.
	t         *Target
	qpn       uint32
	remoteQPN uint32
	peer      netip.AddrPort
	mtu       int
	onRecv    func(*QP, Completion)
	listener  *listener

	mu         sync.Mutex // guards the rest; taken after the target's
	c          Counters   // the QP's own counts; counters adds the Responder's and Requester's
	lastRx     int64      // the last packet from the peer, or the connection's start
	state      qpState
	lastRegion *Region
	acking     bool // in the Output's list of ACKs to flush at the end of the batch

	resp    *rc.Responder
	msg     msgKind // the message in progress
	wRegion *Region // the WRITE in progress: region, next offset, bytes left
	wOff    uint64
	wLeft   uint64
	sLen    int      // bytes of the SEND in progress in recvs[0]
	recvs   [][]byte // posted receive buffers, oldest first

	sender  *rc.Requester // while SENDs are unacknowledged
	sendPSN rocev2.PSN    // the next SEND's PSN while sender is nil
	queued  [][]byte      // SENDs not posted to sender yet

	// Connection manager: the first five fixed from the REQ on, the
	// timers under mu.
	localCommID uint32 // 0: made by NewQP, no CM
	req         reqKey
	acc         *cm.Acceptor
}

// QPN returns the queue pair's number.
func (qp *QP) QPN() uint32 { return qp.qpn }

// RemoteQPN returns the peer's queue pair number.
func (qp *QP) RemoteQPN() uint32 { return qp.remoteQPN }

// Peer returns the peer's address (of its CM REQ, or from QPConfig).
func (qp *QP) Peer() netip.AddrPort { return qp.peer }

// Port returns the CM port the queue pair was accepted on, 0 for one made by
// NewQP.
func (qp *QP) Port() uint16 {
	if qp.listener == nil {
		return 0
	}
	return qp.listener.port
}

// NewQP makes a connected queue pair without the CM.
func (t *Target) NewQP(cfg QPConfig) (*QP, error) {
	if cfg.MTU == 0 {
		cfg.MTU = 1024
	}
	if !validMTU(cfg.MTU) {
		return nil, fmt.Errorf("target.NewQP: %w: MTU %d", ErrConfig, cfg.MTU)
	}
	if !cfg.Peer.IsValid() || cfg.RemoteQPN > rocev2.PSNMask || !cfg.RecvPSN.Valid() || !cfg.SendPSN.Valid() {
		return nil, fmt.Errorf("target.NewQP: %w: invalid peer, QPN or PSN", ErrConfig)
	}
	t.mu.Lock()
	defer t.unlock()
	if t.closed.Load() {
		return nil, fmt.Errorf("target.NewQP: %w", ErrClosed)
	}
	if len(t.qps) >= t.maxQPs {
		return nil, fmt.Errorf("target.NewQP: %w: %d queue pairs already", ErrQP, len(t.qps))
	}
	qp := t.newQP(cfg.Peer, cfg.RemoteQPN, cfg.RecvPSN, cfg.SendPSN, cfg.MTU)
	qp.onRecv = cfg.OnRecv
	qp.state = qpReady
	return qp, nil
}

func validMTU(n int) bool { return n >= 256 && n <= 4096 && n&(n-1) == 0 }

// newQP makes a queue pair with a fresh QPN and registers it; t.mu is held.
// The data path sees it once t.unlock publishes the table.
func (t *Target) newQP(peer netip.AddrPort, remoteQPN uint32, recvPSN, sendPSN rocev2.PSN, mtu int) *QP {
	// The Responder's route follows each request's source (receive).
	resp, _ := rc.NewResponder(rc.ResponderConfig{RemoteQPN: remoteQPN, StartPSN: recvPSN}) // both valid: checked by the callers
	qp := &QP{t: t, peer: peer, remoteQPN: remoteQPN, resp: resp, sendPSN: sendPSN, mtu: mtu}
	for {
		qp.qpn = random32() & rocev2.PSNMask
		if _, used := t.qps[qp.qpn]; !used && qp.qpn > cm.GSIQP {
			break
		}
	}
	t.qps[qp.qpn] = qp
	t.qpsChanged = true
	return qp
}

// destroy removes qp from the target's tables and keeps its counts; t.mu and
// qp.mu are held.
func (t *Target) destroy(qp *QP) {
	qp.state = qpDestroyed
	delete(t.qps, qp.qpn)
	t.qpsChanged = true
	if qp.localCommID != 0 {
		delete(t.byComm, qp.localCommID)
		delete(t.byReq, qp.req)
	}
	t.c.add(qp.counters())
	qp.c = Counters{}
	qp.sender, qp.queued, qp.recvs = nil, nil, nil
}

// PostRecv posts buf to receive one SEND (at most len(buf) bytes). Buffers
// are used in the order posted; the completion hands buf back.
func (qp *QP) PostRecv(buf []byte) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state == qpDestroyed || qp.state == qpError {
		return fmt.Errorf("target: post receive: %w: queue pair not usable", ErrQP)
	}
	if len(qp.recvs) >= MaxPostedRecvs {
		return fmt.Errorf("target: post receive: %w: %d buffers posted already", ErrQP, MaxPostedRecvs)
	}
	qp.recvs = append(qp.recvs, buf)
	return nil
}

// PostSend queues data (at most the path MTU) as one SEND Only to the peer.
// It goes out at the next Process or Tick (Serve ticks every 10 ms) once the
// connection is up, and is resent, going back N, until acknowledged: after
// RetryInterval without an answer at first, a retransmission timeout
// learnt from round trips later (RFC 6298), MaxTries times in all. data is
// copied.
func (qp *QP) PostSend(data []byte) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.postSend(data)
}

func (qp *QP) postSend(data []byte) error {
	switch {
	case qp.state == qpDestroyed || qp.state == qpError || qp.state == qpClosing:
		return fmt.Errorf("target: post send: %w: queue pair not usable", ErrQP)
	case len(data) > qp.mtu:
		return fmt.Errorf("target: post send: %w: %d bytes, more than the path MTU %d", ErrQP, len(data), qp.mtu)
	case qp.unacked() >= MaxPendingSends:
		return fmt.Errorf("target: post send: %w: %d sends unacknowledged", ErrQP, MaxPendingSends)
	}
	qp.queued = append(qp.queued, append([]byte(nil), data...))
	return nil
}

// Disconnect ends the connection: a queue pair accepted through the CM sends
// a DREQ (at the next Tick, resent until a DREP comes, MaxTries times) and is
// destroyed; one made by NewQP is destroyed at once. Requests arriving after
// Disconnect are dropped.
func (qp *QP) Disconnect() error {
	t := qp.t
	t.mu.Lock()
	defer t.unlock()
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state == qpDestroyed || qp.state == qpClosing {
		return fmt.Errorf("target: disconnect: %w: already disconnected", ErrQP)
	}
	if qp.localCommID == 0 {
		t.destroy(qp)
		return nil
	}
	qp.state = qpClosing
	qp.acc.Close()
	return nil
}

// receive handles a packet from the peer, ICRC and address checked; qp.mu
// is held.
func (qp *QP) receive(now int64, p *rocev2.Packet, src netip.AddrPort, out *Output) {
	switch qp.state {
	case qpReady:
	case qpWaitRTU:
		qp.establish(now, out) // a packet on the QP completes the connection, as an RTU does
	default:
		qp.c.Flushed++
		return
	}
	op := p.BTH.Opcode
	if op == rocev2.RCAcknowledge || op == rocev2.RCAtomicAcknowledge {
		qp.sendAck(now, p, out)
		return
	}
	qp.resp.Route(qp.t.local(), qp.t.replyTo(src))
	var v rc.Verdict
	var dgs [][]byte
	v, out.buf, dgs = qp.resp.Receive(out.buf, &p.BTH)
	out.commitAll(dgs, qp.resp.Remote())
	if v == rc.Execute {
		qp.execute(p, out)
	}
	if !qp.acking && qp.resp.AckPending() {
		qp.acking = true
		out.acking = append(out.acking, qp)
	}
}

// flushAck sends the ACK pending at the end of a batch.
func (qp *QP) flushAck(out *Output) {
	var dgs [][]byte
	out.buf, dgs = qp.resp.Flush(out.buf)
	out.commitAll(dgs, qp.resp.Remote())
}

// counters returns the QP's counts, its Responder's and Requester's
// included.
func (qp *QP) counters() *Counters {
	c := qp.c
	r := qp.resp.Counters()
	c.Duplicates += r.Duplicates
	c.OutOfOrder += r.OutOfOrder
	c.NAKSequence += r.SeqNAKs
	c.ACKs += r.ACKs
	c.AtomicACKs += r.AtomicACKs
	c.StaleAtomics += r.StaleAtomics
	c.RNRNAKs += r.RNRNAKs
	c.NAKAccess += r.AccessNAKs
	c.NAKInvalid += r.InvalidNAKs
	if qp.sender != nil {
		addSender(&c, qp.sender.Counters())
	}
	return &c
}

// establish completes the connection and sends the listener's greeting.
func (qp *QP) establish(now int64, out *Output) {
	qp.state = qpReady
	if qp.acc != nil {
		qp.acc.Up()
	}
	qp.c.Connections++
	l := qp.listener
	if l != nil && l.cfg.OnConnect != nil {
		l.cfg.OnConnect(qp)
	}
	if l != nil && l.cfg.Greeting != nil {
		_ = qp.postSend(l.cfg.Greeting) // fits: the listener checked its length against the smallest MTU
	}
	if l != nil && l.cfg.FollowUp != nil {
		for _, m := range l.cfg.FollowUp() {
			if len(m) > qp.mtu {
				qp.c.SendFailures++ // cannot be sent; the peer will time out waiting
				continue
			}
			qp.queued = append(qp.queued, m)
		}
	}
	qp.transmit(now, out)
}
