package target

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
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

// QP is an RC queue pair of the target: the responder for the peer's
// requests, and a small requester for the target's own SENDs.
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
	c          Counters   // the QP's own counts, summed by Target.Counters
	lastRx     time.Time  // the last packet from the peer, or the connection's start
	state      qpState
	lastRegion *Region

	// Responder.
	epsn       rocev2.PSN // expected PSN
	msn        uint32     // messages completed, 24 bits
	nakSent    bool       // a sequence NAK was sent: silent until an in-order packet
	ackPending bool       // an ACK of ackPSN to ackTo goes out at the end of the batch
	ackPSN     rocev2.PSN
	ackTo      netip.AddrPort
	msg        msgKind
	wRegion    *Region // the WRITE in progress: region, next offset, bytes left
	wOff       uint64
	wLeft      uint64
	sLen       int                            // bytes of the SEND in progress in recvs[0]
	atomics    *[atomicResources]atomicResult // by PSN mod atomicResources; allocated at the first atomic
	recvs      [][]byte                       // posted receive buffers, oldest first

	// Requester.
	sendPSN rocev2.PSN // PSN of the next SEND
	sends   []pendingSend

	respBase respBase // ICRC bases of the responses to the last destination

	// Connection manager: the first five fixed from the REQ on, the
	// timers under mu.
	localCommID uint32 // 0: made by NewQP, no CM
	req         reqKey
	acc         *cm.Acceptor
}

// atomicResult is a saved atomic response, to answer a duplicate.
type atomicResult struct {
	psn   rocev2.PSN
	valid bool
	msn   uint32
	orig  uint64
}

type pendingSend struct {
	psn   rocev2.PSN
	data  []byte
	sent  time.Time // zero: (re)send at the next chance
	tries int
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
	qp := &QP{t: t, peer: peer, remoteQPN: remoteQPN, epsn: recvPSN, sendPSN: sendPSN, mtu: mtu}
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
	t.c.add(&qp.c)
	qp.c = Counters{}
	qp.sends, qp.recvs = nil, nil
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
// connection is up, and is resent every RetryInterval until acknowledged,
// MaxTries times in all. data is copied.
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
	case len(qp.sends) >= MaxPendingSends:
		return fmt.Errorf("target: post send: %w: %d sends unacknowledged", ErrQP, MaxPendingSends)
	}
	qp.sends = append(qp.sends, pendingSend{psn: qp.sendPSN, data: append([]byte(nil), data...)})
	qp.sendPSN = qp.sendPSN.Next()
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
func (qp *QP) receive(now time.Time, p *rocev2.Packet, src netip.AddrPort, out *Output) {
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
		qp.requesterAck(now, p, out)
		return
	}
	d := p.BTH.PSN.Diff(qp.epsn)
	switch {
	case d > 0:
		qp.c.OutOfOrder++
		if !qp.nakSent {
			qp.nakSent = true
			qp.respond(rocev2.SyndromeNAKPSNSequenceError, qp.epsn, src, out)
			qp.c.NAKSequence++
		}
		return
	case d < 0:
		qp.duplicate(p, src, out)
		return
	}
	qp.nakSent = false
	if !qp.execute(p, src, out) {
		return
	}
	qp.epsn = qp.epsn.Next()
	// An atomic's ATOMIC ACK went out already and acknowledges it.
	if p.BTH.AckReq && op != rocev2.RCFetchAdd && op != rocev2.RCCompareSwap {
		qp.setAck(p.BTH.PSN, src, out)
	}
}

// setAck records that an ACK of psn is due to dst at the end of the batch:
// one ACK covers every packet of the batch before it.
func (qp *QP) setAck(psn rocev2.PSN, dst netip.AddrPort, out *Output) {
	if !qp.ackPending {
		qp.ackPending = true
		out.acking = append(out.acking, qp)
	}
	qp.ackPSN, qp.ackTo = psn, dst
}

// flushAck sends the pending ACK now, so that a response that follows it
// (NAK, atomic ACK) stays in PSN order.
func (qp *QP) flushAck(out *Output) {
	if qp.ackPending {
		qp.ackPending = false
		qp.respond(rocev2.SyndromeACK, qp.ackPSN, qp.ackTo, out)
		qp.c.ACKs++
	}
}

// respond sends an ACK or NAK with the given syndrome and PSN.
func (qp *QP) respond(s rocev2.Syndrome, psn rocev2.PSN, dst netip.AddrPort, out *Output) {
	if s != rocev2.SyndromeACK {
		qp.flushAck(out)
	}
	dst = qp.t.replyTo(dst)
	if rb, ok := qp.bases(dst); ok {
		out.buf = rb.appendAck(out.buf, qp.remoteQPN, s, psn, qp.msn)
		out.commit(dst)
	}
}

// fail sends a fatal NAK for the packet with psn and puts the QP in the
// error state, as a NIC does for invalid requests and access errors.
func (qp *QP) fail(s rocev2.Syndrome, psn rocev2.PSN, dst netip.AddrPort, out *Output) {
	qp.respond(s, psn, dst, out)
	if s == rocev2.SyndromeNAKRemoteAccessError {
		qp.c.NAKAccess++
	} else {
		qp.c.NAKInvalid++
	}
	qp.state = qpError
	qp.msg = msgNone
}

// duplicate answers a request behind the expected PSN without executing it.
func (qp *QP) duplicate(p *rocev2.Packet, src netip.AddrPort, out *Output) {
	qp.c.Duplicates++
	switch p.BTH.Opcode {
	case rocev2.RCFetchAdd, rocev2.RCCompareSwap:
		if qp.atomics != nil {
			if a := &qp.atomics[p.BTH.PSN&(atomicResources-1)]; a.valid && a.psn == p.BTH.PSN {
				qp.atomicAck(a, src, out)
				return
			}
		}
		// More than atomicResources PSNs old: the original value is gone.
		// A plain ACK of ePSN-1 tells the requester the atomic was
		// executed, so that a go-back-N requester does not resend it
		// forever (section 8.6).
		qp.c.StaleAtomics++
		qp.setAck(qp.epsn.Add(rocev2.PSNMask), src, out)
	default:
		qp.setAck(qp.epsn.Add(rocev2.PSNMask), src, out) // ePSN-1, the last executed
	}
}

func (qp *QP) atomicAck(a *atomicResult, dst netip.AddrPort, out *Output) {
	qp.flushAck(out)
	dst = qp.t.replyTo(dst)
	if rb, ok := qp.bases(dst); ok {
		out.buf = rb.appendAtomicAck(out.buf, qp.remoteQPN, a.psn, a.msn, a.orig)
		out.commit(dst)
	}
	qp.c.AtomicACKs++
}

// complete counts a finished message and delivers its completion.
func (qp *QP) complete(c *Completion) {
	qp.msn = (qp.msn + 1) & rocev2.PSNMask
	if c != nil {
		qp.c.Completions++
		if qp.onRecv != nil {
			qp.onRecv(qp, *c)
		}
	}
}

// execute performs an in-order request and reports whether it was executed
// (and its PSN consumed). Every check comes before any byte is written: a
// request refused gets its NAK here.
func (qp *QP) execute(p *rocev2.Packet, src netip.AddrPort, out *Output) bool {
	var nak rocev2.Syndrome
	switch p.BTH.Opcode {
	case rocev2.RCWriteFirst, rocev2.RCWriteOnly, rocev2.RCWriteOnlyImm:
		nak = qp.writeFirst(p)
	case rocev2.RCWriteMiddle, rocev2.RCWriteLast, rocev2.RCWriteLastImm:
		nak = qp.writeNext(p)
	case rocev2.RCSendFirst, rocev2.RCSendOnly, rocev2.RCSendOnlyImm:
		nak = qp.sendFirst(p)
	case rocev2.RCSendMiddle, rocev2.RCSendLast, rocev2.RCSendLastImm:
		nak = qp.sendNext(p)
	case rocev2.RCFetchAdd, rocev2.RCCompareSwap:
		var res *atomicResult
		if res, nak = qp.atomic(p); res != nil {
			qp.atomicAck(res, src, out)
			return true
		}
	default:
		// RDMA READ, SEND with Invalidate and responses the peer has no
		// reason to send: this responder does not implement them.
		nak = rocev2.SyndromeNAKInvalidRequest
	}
	switch {
	case nak == executed:
		return true
	case nak.IsRNRNAK():
		// Receiver not ready: the requester retries the same PSN.
		qp.respond(nak, p.BTH.PSN, src, out)
		qp.c.RNRNAKs++
	default:
		qp.fail(nak, p.BTH.PSN, src, out)
	}
	return false
}

// executed is what the request handlers below return when they performed
// the request, and otherwise the NAK that refuses it.
const executed rocev2.Syndrome = rocev2.SyndromeACK

// writeFirst performs a WRITE First or Only.
func (qp *QP) writeFirst(p *rocev2.Packet) rocev2.Syndrome {
	op, n, mtu := p.BTH.Opcode, uint64(len(p.Payload)), uint64(qp.mtu)
	dma := uint64(p.RETH.DMALength)
	only := op != rocev2.RCWriteFirst
	if qp.msg != msgNone || n > mtu || (only && n != dma) || (!only && (n != mtu || dma <= mtu)) {
		return rocev2.SyndromeNAKInvalidRequest
	}
	var r *Region
	var off uint64
	if dma > 0 { // a zero-length WRITE names no memory, and is not checked
		r = qp.t.lookup(qp, p.RETH.RKey)
		ok := r != nil && r.access&RemoteWrite != 0
		if ok {
			off, ok = r.span(p.RETH.VA, dma)
		}
		if !ok {
			return rocev2.SyndromeNAKRemoteAccessError
		}
		r.write(off, p.Payload)
		qp.c.WritePackets++
		qp.c.WriteBytes += n
	}
	if !only {
		qp.msg, qp.wRegion, qp.wOff, qp.wLeft = msgWrite, r, off+n, dma-n
		return executed
	}
	qp.completeWrite(op == rocev2.RCWriteOnlyImm, p.ImmDt.Data)
	return executed
}

// writeNext performs a WRITE Middle or Last.
func (qp *QP) writeNext(p *rocev2.Packet) rocev2.Syndrome {
	op, n, mtu := p.BTH.Opcode, uint64(len(p.Payload)), uint64(qp.mtu)
	last := op != rocev2.RCWriteMiddle
	if qp.msg != msgWrite || n > mtu || (last && n != qp.wLeft) || (!last && (n != mtu || n >= qp.wLeft)) {
		return rocev2.SyndromeNAKInvalidRequest
	}
	r := qp.wRegion
	if r.dead.Load() { // deregistered in the middle of the message
		return rocev2.SyndromeNAKRemoteAccessError
	}
	// wOff+wLeft stays within the span checked at the First packet.
	r.write(qp.wOff, p.Payload)
	qp.c.WritePackets++
	qp.c.WriteBytes += n
	qp.wOff += n
	qp.wLeft -= n
	if last {
		qp.msg, qp.wRegion = msgNone, nil
		qp.completeWrite(op == rocev2.RCWriteLastImm, p.ImmDt.Data)
	}
	return executed
}

// sendFirst performs a SEND First or Only into the oldest posted receive.
func (qp *QP) sendFirst(p *rocev2.Packet) rocev2.Syndrome {
	op, n, mtu := p.BTH.Opcode, uint64(len(p.Payload)), uint64(qp.mtu)
	only := op != rocev2.RCSendFirst
	switch {
	case qp.msg != msgNone || n > mtu || (!only && n != mtu):
		return rocev2.SyndromeNAKInvalidRequest
	case len(qp.recvs) == 0:
		return rocev2.SyndromeRNRNAK | rnrTimer
	case n > uint64(len(qp.recvs[0])):
		return rocev2.SyndromeNAKInvalidRequest
	}
	copy(qp.recvs[0], p.Payload)
	qp.sLen = int(n)
	if !only {
		qp.msg = msgSend
		return executed
	}
	qp.completeSend(op == rocev2.RCSendOnlyImm, p.ImmDt.Data)
	return executed
}

// sendNext performs a SEND Middle or Last.
func (qp *QP) sendNext(p *rocev2.Packet) rocev2.Syndrome {
	op, n, mtu := p.BTH.Opcode, uint64(len(p.Payload)), uint64(qp.mtu)
	last := op != rocev2.RCSendMiddle
	buf := qp.recvs
	if qp.msg != msgSend || n > mtu || (!last && n != mtu) || len(buf) == 0 || n > uint64(len(buf[0])-qp.sLen) {
		return rocev2.SyndromeNAKInvalidRequest
	}
	copy(buf[0][qp.sLen:], p.Payload)
	qp.sLen += int(n)
	if last {
		qp.msg = msgNone
		qp.completeSend(op == rocev2.RCSendLastImm, p.ImmDt.Data)
	}
	return executed
}

// atomic performs a FETCH_ADD or CMP_SWAP and returns its saved result, to
// be acknowledged, or the NAK that refuses it.
func (qp *QP) atomic(p *rocev2.Packet) (*atomicResult, rocev2.Syndrome) {
	a := &p.AtomicETH
	if qp.msg != msgNone || a.VA&7 != 0 {
		return nil, rocev2.SyndromeNAKInvalidRequest
	}
	r := qp.t.lookup(qp, a.RKey)
	ok := r != nil && r.access&RemoteAtomic != 0
	var off uint64
	if ok {
		off, ok = r.span(a.VA, 8)
	}
	if !ok {
		return nil, rocev2.SyndromeNAKRemoteAccessError
	}
	// The region's base address is 8-byte aligned (Register checks it)
	// and VAs are page-aligned, so off keeps the VA's alignment.
	word := (*uint64)(unsafe.Pointer(&r.mem[off]))
	var orig uint64
	if p.BTH.Opcode == rocev2.RCFetchAdd {
		orig = atomic.AddUint64(word, a.SwapAddData) - a.SwapAddData
	} else {
		for {
			orig = atomic.LoadUint64(word)
			if orig != a.CompareData || atomic.CompareAndSwapUint64(word, orig, a.SwapAddData) {
				break
			}
		}
	}
	qp.c.Atomics++
	qp.complete(nil)
	if qp.atomics == nil {
		qp.atomics = new([atomicResources]atomicResult)
	}
	psn := p.BTH.PSN
	res := &qp.atomics[psn&(atomicResources-1)]
	*res = atomicResult{psn: psn, valid: true, msn: qp.msn, orig: orig}
	return res, executed
}

// rnrTimer is the RNR NAK timer code: 14, 1.28 ms.
const rnrTimer rocev2.Syndrome = 14

func (qp *QP) completeWrite(imm bool, data uint32) {
	if !imm {
		qp.complete(nil)
		return
	}
	qp.complete(&Completion{Write: true, HasImm: true, Imm: data})
}

func (qp *QP) completeSend(imm bool, data uint32) {
	buf := qp.recvs[0]
	qp.recvs[0] = nil
	qp.recvs = qp.recvs[1:]
	qp.c.Sends++
	qp.complete(&Completion{Data: buf[:qp.sLen:qp.sLen], HasImm: imm, Imm: data})
	qp.sLen = 0
}

// establish completes the connection and sends the listener's greeting.
func (qp *QP) establish(now time.Time, out *Output) {
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
			qp.sends = append(qp.sends, pendingSend{psn: qp.sendPSN, data: m})
			qp.sendPSN = qp.sendPSN.Next()
		}
	}
	if len(qp.sends) > 0 {
		qp.transmit(now, out)
	}
}

// requesterAck handles an ACK or NAK of the target's own SENDs.
func (qp *QP) requesterAck(now time.Time, p *rocev2.Packet, out *Output) {
	if p.BTH.Opcode != rocev2.RCAcknowledge {
		qp.c.Unknown++ // the target sends no atomics
		return
	}
	s := p.AETH.Syndrome
	psn := p.BTH.PSN
	switch {
	case s.IsACK():
		qp.dropAcked(psn, true)
	case s == rocev2.SyndromeNAKPSNSequenceError:
		qp.c.PeerNAKs++
		// Everything before psn arrived; resend from psn (go-back-N).
		qp.dropAcked(psn, false)
		for i := range qp.sends {
			qp.sends[i].sent = time.Time{}
		}
		qp.transmit(now, out)
	case s.IsRNRNAK():
		qp.c.PeerNAKs++
		qp.dropAcked(psn, false) // the NAKed SEND is retried after RetryInterval
	default:
		qp.c.PeerNAKs++
		qp.c.SendFailures += uint64(len(qp.sends))
		qp.sends = qp.sends[:0]
		qp.state = qpError
	}
}

// dropAcked forgets the sends up to psn (inclusive) or before it.
func (qp *QP) dropAcked(psn rocev2.PSN, inclusive bool) {
	k := 0
	for k < len(qp.sends) {
		d := qp.sends[k].psn.Diff(psn)
		if d > 0 || (d == 0 && !inclusive) {
			break
		}
		k++
	}
	qp.sends = append(qp.sends[:0], qp.sends[k:]...)
}

// transmit sends the SENDs that were never sent or whose wait ran out.
func (qp *QP) transmit(now time.Time, out *Output) {
	t := qp.t
	for i := range qp.sends {
		s := &qp.sends[i]
		if !s.sent.IsZero() && now.Sub(s.sent) < RetryInterval {
			continue
		}
		if s.tries >= MaxTries {
			qp.c.SendFailures += uint64(len(qp.sends))
			qp.sends = qp.sends[:0]
			qp.state = qpError
			return
		}
		if s.tries > 0 {
			qp.c.SendRetransmits++
		}
		s.tries++
		s.sent = now
		r := rocev2.Packet{
			BTH:     rocev2.BTH{Opcode: rocev2.RCSendOnly, PKey: rocev2.DefaultPKey, DestQP: qp.remoteQPN, PSN: s.psn, AckReq: true},
			Payload: s.data,
		}
		out.add(&r, t.local(), t.replyTo(qp.peer))
		qp.c.SendPackets++
	}
}
