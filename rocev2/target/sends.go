package target

import (
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/rc"
)

// The target's own SENDs (a collector's advertisement and Append heads):
// an rc.Requester while any is unacknowledged, so that its ring lives only
// as long as SENDs are outstanding.

// unacked returns the SENDs posted and not yet acknowledged, queued ones
// included.
func (qp *QP) unacked() int {
	n := len(qp.queued)
	if qp.sender != nil {
		n += qp.sender.InFlight()
	}
	return n
}

// newSender makes the Requester of qp's SENDs, from the next SEND's PSN.
func (qp *QP) newSender(now int64) bool {
	s, err := rc.New(rc.Config{
		Local: qp.t.local(), Remote: qp.t.replyTo(qp.peer), RemoteQPN: qp.remoteQPN, StartPSN: qp.sendPSN,
		Ring: MaxPendingSends, MaxPacket: rocev2.BTHLen + qp.mtu + 3 + rocev2.ICRCLen,
		AckReqEvery: 1, // every SEND asks for its ACK
		AckTimeout:  RetryInterval, MaxRetries: MaxTries - 1,
	}, now)
	if err != nil {
		return false // a peer of the other address family: nothing can reach it
	}
	qp.sender = s
	return true
}

// retireSender drops qp's Requester once every SEND is acknowledged,
// keeping its counts and its next PSN.
func (qp *QP) retireSender() {
	if qp.sender == nil || qp.sender.InFlight() > 0 || len(qp.queued) > 0 {
		return
	}
	addSender(&qp.c, qp.sender.Counters())
	qp.sendPSN = qp.sender.Next()
	qp.sender = nil
}

// addSender adds a Requester's counts to c.
func addSender(c *Counters, s rc.Counters) {
	c.SendPackets += s.Packets + s.Retransmits
	c.SendRetransmits += s.Retransmits
	c.PeerNAKs += s.SeqNAKs + s.RNRNAKs
}

// transmit posts the queued SENDs that fit, and resends on timeout; qp is
// ready.
func (qp *QP) transmit(now int64, out *Output) {
	if qp.sender == nil {
		if len(qp.queued) == 0 {
			return
		}
		if !qp.newSender(now) {
			qp.fail(0)
			return
		}
	}
	s, dst := qp.sender, qp.t.replyTo(qp.peer)
	for len(qp.queued) > 0 && s.Room(1) {
		p := rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCSendOnly}, Payload: qp.queued[0]}
		qp.queued[0] = nil
		qp.queued = qp.queued[1:]
		b, err := s.Post(&p, now)
		if err != nil {
			qp.c.SendFailures++ // longer than the path MTU: PostSend refuses those
			continue
		}
		out.emit1(b, dst)
	}
	s.EndRound()
	qp.senderEvent(s.Tick(now), out)
}

// sendAck handles an ACK or NAK of the target's own SENDs.
func (qp *QP) sendAck(now int64, p *rocev2.Packet, out *Output) {
	if p.BTH.Opcode != rocev2.RCAcknowledge {
		qp.c.Unknown++ // the target sends no atomics
		return
	}
	if qp.sender == nil {
		return // every SEND was acknowledged already
	}
	ev := qp.sender.HandleAck(p.BTH.PSN, p.AETH.Syndrome, now)
	if ev&rc.Broken != 0 {
		qp.c.PeerNAKs++
	}
	qp.senderEvent(ev, out)
	if qp.sender != nil && ev&rc.Acked != 0 {
		qp.transmit(now, out)
	}
}

// senderEvent does what the Requester's event asks: resend from where it
// says (go-back-N), or give the SENDs up and the queue pair with them.
func (qp *QP) senderEvent(ev rc.Event, out *Output) {
	s := qp.sender
	switch {
	case ev&(rc.Broken|rc.Dead) != 0:
		qp.fail(s.InFlight())
		return
	case ev&rc.GoBack != 0:
		dst := qp.t.replyTo(qp.peer)
		for psn := s.ResendFrom(); psn != s.Next(); psn = psn.Next() {
			out.emit1(s.Packet(psn), dst)
		}
	}
	qp.retireSender()
}

// fail gives up the SENDs, inFlight of them posted, and puts qp in the
// error state.
func (qp *QP) fail(inFlight int) {
	qp.c.SendFailures += uint64(inFlight + len(qp.queued))
	if qp.sender != nil {
		addSender(&qp.c, qp.sender.Counters())
	}
	qp.sender, qp.queued = nil, nil
	qp.state = qpError
}
