package translator

import (
	"fmt"
	"net/netip"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
	"github.com/dtakit/dtakit/rocev2/rc"
)

// The active side of the RDMA CM (docs/DTA-WIRE.md section 8.6): discovery
// connects to CMPort, CMPort+1, ... of a collector until a REJ with reason
// 8; each REP is answered with an RTU, then the collector's advertisement
// SEND is acknowledged and the QP is ready.

// REQ parameters the contract fixes, and the ones the translator chooses.
const (
	reqRetryCount    = 3
	reqRNRRetryCount = 7
	reqMaxCMRetries  = 15
	reqCMTimeout     = 20 // 4.096 µs · 2^20, about 4 s, as librdmacm sends
	reqACKTimeout    = 14 // 4.096 µs · 2^14, about 67 ms
	reqRDMAResources = 16 // atomics in flight, each way
	reqHopLimit      = 64
)

// probe starts the discovery connection to col's next CM port.
func (e *Engine) probe(col *collector) {
	if len(col.instances) >= e.cfg.MaxInstances {
		col.done = true
		return
	}
	in := &instance{col: col, port: e.cfg.CMPort + uint16(len(col.instances))}
	col.probe = in
	e.connect(in)
}

// connect opens a new QP for in: a fresh QPN, comm ID and random starting
// PSN, and a REQ to its port.
func (e *Engine) connect(in *instance) {
	var fin waitQueue[rocev2.PSN]
	if old, ok := in.conn.(*qp); ok {
		e.closeQP(old)
		fin = old.fin // empty, its memory reused
	}
	e.nextQPN = (e.nextQPN + 1) & rocev2.PSNMask
	if e.nextQPN < 2 {
		e.nextQPN = 2
	}
	e.nextComm++
	e.tid++
	start := rocev2.PSN(e.randPSN() & rocev2.PSNMask)
	q := &qp{
		inst: in, remote: in.col.addr, qpn: e.nextQPN,
		localCommID: e.nextComm,
		recvPSN:     start,
		fin:         fin,
	}
	in.conn = q
	e.qps[q.qpn] = q
	e.byComm[q.localCommID] = q

	local, remote := e.cfg.Local, q.remote
	req := cm.ConnectRequest{
		LocalCommID:             q.localCommID,
		ServiceID:               cm.ServiceID(in.port),
		LocalQPN:                q.qpn,
		ResponderResources:      reqRDMAResources,
		InitiatorDepth:          reqRDMAResources,
		RemoteCMResponseTimeout: reqCMTimeout,
		TransportType:           0, // RC
		StartingPSN:             uint32(start),
		LocalCMResponseTimeout:  reqCMTimeout,
		RetryCount:              reqRetryCount,
		PKey:                    rocev2.DefaultPKey,
		PathMTU:                 cm.MTU1024,
		RNRRetryCount:           reqRNRRetryCount,
		MaxCMRetries:            reqMaxCMRetries,
		Primary: cm.Path{
			LocalLID: 0xFFFF, RemoteLID: 0xFFFF,
			LocalGID: cm.GID(local.Addr()), RemoteGID: cm.GID(remote.Addr()),
			HopLimit: reqHopLimit, LocalACKTimeout: reqACKTimeout,
		},
	}
	h := cm.IPHeader{SrcPort: local.Port(), Src: local.Addr().Unmap(), Dst: remote.Addr().Unmap()}
	if err := req.SetIPPrivateData(h, nil); err != nil {
		e.failConnect(q, fmt.Errorf("%w: %w", ErrConfig, err))
		return
	}
	var buf [cm.MADLen]byte
	d, mad, err := cm.Dial(buf[:0], cm.DialConfig{Request: req, TID: e.tid, Timeout: e.cfg.CMTimeout, Tries: e.cfg.CMTries}, e.now)
	if err != nil {
		e.failConnect(q, fmt.Errorf("%w: %w", ErrConfig, err))
		return
	}
	q.dial = d
	q.state = qpConnecting
	e.sendMAD(q, mad)
}

// sendMAD queues a CM MAD to QP 1 of q's target.
func (e *Engine) sendMAD(q *qp, mad []byte) {
	p := cm.Packet(mad, e.cmPSN)
	e.cmPSN = e.cmPSN.Next()
	b, err := p.AppendDatagram(make([]byte, 0, 512), e.cfg.Local, q.remote)
	if err != nil {
		e.c.EncodeErrors++
		return
	}
	e.out = append(e.out, Datagram{Addr: q.remote, Buf: b})
}

// tickCM resends a REQ, or gives up on a connection that does not answer.
func (e *Engine) tickCM(q *qp) {
	switch q.state {
	case qpConnecting:
		var buf [cm.MADLen]byte
		ev, mad := q.dial.Tick(buf[:0], e.now)
		if len(mad) > 0 {
			e.sendMAD(q, mad)
		}
		if ev != cm.GaveUp {
			return
		}
		e.failConnect(q, fmt.Errorf("%w: %v, CM port %d: no answer to %d requests %v apart",
			ErrNotListening, q.remote, q.inst.port, e.cfg.CMTries, e.cfg.CMTimeout))
	case qpWaitAdvert:
		// The collector resends its advertisement CMTries times, CMTimeout
		// apart; a repeated REP gets the RTU again.
		if e.now-q.cmAt < int64(e.cfg.CMTimeout)*int64(e.cfg.CMTries+1) {
			return
		}
		e.failConnect(q, fmt.Errorf("%w: %v, CM port %d: no advertisement", ErrAdvertisement, q.remote, q.inst.port))
	}
}

// closeQP forgets q.
func (e *Engine) closeQP(q *qp) {
	if q.req != nil && q.state != qpClosed {
		e.c.addRequester(q.req.Counters())
	}
	q.state = qpClosed
	e.unconfirm(q)
	if e.qps[q.qpn] == q {
		delete(e.qps, q.qpn)
	}
	if e.byComm[q.localCommID] == q {
		delete(e.byComm, q.localCommID)
	}
	if q.inst.conn == q {
		q.inst.conn = nil
	}
}

// failConnect ends a connection attempt with err: a failed discovery probe
// fails its collector for now (Connected reports err) and probes the same
// port again after a backoff, RetryInterval doubling up to
// MaxDiscoveryBackoff, since a collector may start after its translator;
// an instance already discovered retries after RetryInterval.
func (e *Engine) failConnect(q *qp, err error) {
	in := q.inst
	e.closeQP(q)
	col := in.col
	if col.probe == in {
		col.probe = nil
		col.err = err
		col.backoff = min(max(2*col.backoff, e.cfg.RetryInterval), MaxDiscoveryBackoff)
		col.retryAt = e.now + int64(col.backoff)
		return
	}
	in.err = err
	in.retryAt = e.now + int64(e.cfg.RetryInterval)
}

// reconnect replaces in's QP by a new connection to the same port. The old
// QP's unacknowledged packets are lost (counted).
func (e *Engine) reconnect(in *instance) {
	e.c.Reconnects++
	if old, ok := in.conn.(*qp); ok {
		if old.state == qpReady {
			e.c.Lost += uint64(old.req.InFlight())
		}
		if old.state == qpReady || old.state == qpWaitAdvert {
			e.sendDREQ(old)
		}
	}
	e.connect(in)
}

func (e *Engine) sendDREQ(q *qp) {
	if q.dial == nil {
		return // made without the CM exchange: none to end
	}
	e.tid++
	var buf [cm.MADLen]byte
	if mad := q.dial.Disconnect(buf[:0], e.tid); len(mad) > 0 {
		e.sendMAD(q, mad)
	}
}

// handleCM processes a CM MAD from src: the connection it names (by our
// comm ID) takes it (cm.Dialer), and the translator acts on what it means.
func (e *Engine) handleCM(src netip.AddrPort, mad []byte) {
	h, msg, err := cm.DecodeMAD(mad)
	if err != nil {
		e.c.BadRoCE++
		return
	}
	e.c.CMMessages++
	var ours uint32
	switch m := msg.(type) {
	case *cm.ConnectReply:
		ours = m.RemoteCommID
	case *cm.Reject:
		ours = m.RemoteCommID
	case *cm.DisconnectRequest:
		ours = m.RemoteCommID
	case *cm.DisconnectReply:
		return // nothing to do: the QP was forgotten when the DREQ was sent
	default:
		e.c.BadRoCE++ // a REQ or RTU: the translator is never the passive side
		return
	}
	q := e.byComm[ours]
	if q == nil || q.dial == nil || q.remote.Addr() != src.Addr() {
		e.c.BadRoCE++
		return
	}
	var buf [cm.MADLen]byte
	ev, answer := q.dial.Handle(buf[:0], h, msg)
	if len(answer) > 0 {
		e.sendMAD(q, answer)
	}
	in := q.inst
	switch ev {
	case cm.Foreign:
		e.c.BadRoCE++
	case cm.Established:
		q.remoteQPN, q.startPSN = q.dial.RemoteQPN(), q.dial.StartPSN()
		// Valid: the REQ's PSN and the REP's 24-bit QPN.
		q.resp, _ = rc.NewResponder(rc.ResponderConfig{Local: e.cfg.Local, Remote: q.remote, RemoteQPN: q.remoteQPN, StartPSN: q.recvPSN})
		q.state = qpWaitAdvert
		q.cmAt = e.now
		if col := in.col; col.probe == in {
			col.probe = nil
			col.err, col.backoff = nil, 0
			col.instances = append(col.instances, in)
			e.probe(col)
		}
	case cm.Rejected:
		if col := in.col; col.probe == in && q.dial.Reason() == cm.RejectInvalidServiceID {
			// No instance on this port: discovery is complete.
			e.closeQP(q)
			col.probe = nil
			col.done = true
			return
		}
		e.failConnect(q, fmt.Errorf("%w: %v, CM port %d: reason %d", ErrRejected, q.remote, in.port, q.dial.Reason()))
	case cm.Closed:
		// The collector closed the QP: open a new one, unless it was still
		// being discovered.
		if q.state == qpReady {
			e.c.Lost += uint64(q.req.InFlight())
		}
		e.closeQP(q)
		if in.col.probe != in {
			e.c.Reconnects++
			e.connect(in)
		}
	}
}

// handleSend takes the collector's SEND on q through q's Responder: the
// advertisement (and the heads after it), each acknowledged with an RC ACK.
func (e *Engine) handleSend(q *qp) {
	if q.state != qpWaitAdvert && q.state != qpReady {
		e.c.BadRoCE++
		return
	}
	v, b, dgs := q.resp.Receive(nil, &e.rx.BTH)
	if v == rc.Execute {
		// Each SEND acknowledged at once, AckReq or not: the collector
		// waits for it before its next.
		q.resp.Done(true, true)
	}
	e.sendResponses(q, dgs)
	_, dgs = q.resp.Flush(b) // the ACK, or again for a repeat (not executed)
	e.sendResponses(q, dgs)
	if v != rc.Execute {
		return
	}
	if q.state != qpWaitAdvert {
		return // a later SEND means nothing to the translator
	}
	in := q.inst
	var err error
	if q.headsDue {
		err = e.takeHeads(q)
	} else {
		var ad dta.Advertisement
		ad, err = dta.ParseAdvertisement(e.rx.Payload)
		held := in.held
		if err == nil {
			err = in.configure(ad, e.cfg)
		}
		// A new layout: the pending entries and cached postcards are
		// gone, unwritten.
		if in.held == nil {
			e.unconfirmHeld(held)
		}
		if err == nil && ad.HeadsFollow {
			q.headsDue, q.headsNext = true, 0
		}
	}
	if err != nil {
		in.err = fmt.Errorf("%w: %v, CM port %d: %w", ErrAdvertisement, q.remote, in.port, err)
		e.sendDREQ(q)
		e.closeQP(q)
		return
	}
	if q.headsDue {
		return // more heads to come
	}
	in.err = nil
	req, err := e.newRequester(q)
	if err != nil {
		in.err = fmt.Errorf("%v, CM port %d: %w", q.remote, in.port, err)
		e.sendDREQ(q)
		e.closeQP(q)
		return
	}
	q.req = req
	q.tokens = float64(e.cfg.RateBurst)
	q.lastRefill = e.now
	q.state = qpReady
	e.assign(in.col)
}

// newRequester returns the requester of q, a connected QP of q.inst, from
// its REP's starting PSN.
func (e *Engine) newRequester(q *qp) (*rc.Requester, error) {
	return rc.New(rc.Config{
		Local: e.cfg.Local, Remote: q.remote, RemoteQPN: q.remoteQPN, StartPSN: q.startPSN,
		Ring: e.cfg.RingSize, MaxPacket: q.inst.maxPacket(), AckReqEvery: AckReqInterval,
		AckTimeout: e.cfg.AckTimeout, MaxRetries: e.cfg.MaxRetries, DeadAfter: e.cfg.DeadAfter,
	}, e.now)
}

// takeHeads sets the Append heads of q's instance from a ListHeads SEND,
// which must start at the next list still without its head.
func (e *Engine) takeHeads(q *qp) error {
	m, err := dta.ParseListHeads(e.rx.Payload, e.sc.heads[:0])
	if err != nil {
		return err
	}
	e.sc.heads = m.Heads[:0]
	rs, _ := q.inst.tr.(primitive.Resumer)
	lists := 0
	if rs != nil {
		lists = rs.Heads()
	}
	if m.First != q.headsNext || int(m.First)+len(m.Heads) > lists {
		return fmt.Errorf("list heads for lists %d..%d, want from %d of %d", m.First, int(m.First)+len(m.Heads)-1, q.headsNext, lists)
	}
	for i, h := range m.Heads {
		if err := rs.SetHead(m.First+uint32(i), h); err != nil {
			return err
		}
	}
	q.headsNext += uint32(len(m.Heads))
	q.headsDue = int(q.headsNext) < lists
	return nil
}

// sendResponses queues q's Responder's responses (ACKs, NAKs) to the
// collector.
func (e *Engine) sendResponses(q *qp, dgs [][]byte) {
	for _, b := range dgs {
		e.out = append(e.out, Datagram{Addr: q.remote, Buf: b})
	}
}

// assign maps each primitive of col to its first configured instance, in
// CM port order.
func (e *Engine) assign(col *collector) {
	col.byPrim = [256]*instance{}
	for _, in := range col.instances {
		if in.prim.IsKnown() && col.byPrim[in.prim] == nil {
			col.byPrim[in.prim] = in
		}
	}
}

// Disconnect sends a DREQ on every connected QP and forgets them all
// (Close does it after Flush).
func (e *Engine) Disconnect() {
	for _, q := range e.qps {
		if q.state == qpReady || q.state == qpWaitAdvert {
			e.sendDREQ(q)
		}
		e.closeQP(q)
	}
}
