package translator

import (
	"encoding/binary"
	"net/netip"

	"github.com/dtakit/dtakit/rocev2"
)

// qpState is where a QP is in its life.
type qpState uint8

const (
	qpConnecting qpState = iota // REQ sent, waiting for REP or REJ
	qpWaitAdvert                // RTU sent, waiting for the advertisement SEND
	qpReady                     // sending data
	qpClosed                    // given up or replaced
)

// maxPacketLen is the largest RoCEv2 datagram the translator sends: BTH,
// RETH, ImmDt, one MTU of payload, pad and ICRC.
const maxPacketLen = rocev2.BTHLen + rocev2.RETHLen + rocev2.ImmDtLen + MTU + 3 + rocev2.ICRCLen

// slotCap is the capacity of the largest retransmit ring slot.
const slotCap = (maxPacketLen + 63) &^ 63

// qp is the requester side of one RC queue pair to a collector instance,
// together with the connection state of the CM exchange that opened it and
// the responder state for the collector's advertisement SEND.
type qp struct {
	inst   *instance
	remote netip.AddrPort // the target
	state  qpState

	// CM.
	qpn          uint32 // ours
	remoteQPN    uint32
	localCommID  uint32
	remoteCommID uint32
	tid          uint64
	cmTries      int
	cmAt         int64  // when the last REQ (or the RTU) was sent
	cmPkt        []byte // the REQ datagram, kept for resends
	rtuPkt       []byte // the RTU datagram, resent on a repeated REP

	// Responder state for the SENDs the collector makes (the advertisement,
	// then the Append heads when it says they follow).
	respPSN   rocev2.PSN // expected
	msn       uint32
	headsDue  bool   // waiting for ListHeads SENDs
	headsNext uint32 // the first list still without its head

	// Requester state. Packets [una, next) are unacknowledged and kept in
	// the ring at slot psn & mask.
	una, next    rocev2.PSN
	mask         uint32
	ring         []byte // RingSize slots of slot bytes
	slotSize     int    // the instance's largest packet, rounded up to 64 bytes
	lens         []uint16
	sinceAckReq  int   // packets since the last one with AckReq
	lastProgress int64 // last ACK that moved una, or the first send into an empty ring
	retries      int   // timeouts in a row without progress
	stuckSince   int64 // the first of those timeouts
	// Round-trip time (RFC 6298, in nanoseconds): one packet at a time is
	// timed, never a retransmitted one (Karn); srtt 0 means no sample yet.
	srtt, rttvar int64
	backoff      uint // the timeout's doublings, kept until a new sample (Karn)
	rttPSN       rocev2.PSN
	rttAt        int64
	timing       bool
	nakPSN       rocev2.PSN
	nakAt        int64
	nakValid     bool

	// AckReq policy for one output round: the last packet posted.
	touched   bool
	roundPSN  rocev2.PSN
	roundNeed bool // that packet has no AckReq yet

	icrc [4]*icrcEntry // fast-path ICRC cache, by length

	// Wide reports whose last packet is in the ring, settled when the
	// collector acknowledges it (seqtrack.go).
	fin waitQueue[rocev2.PSN]

	// Token bucket, in packets.
	tokens     float64
	lastRefill int64
}

// inFlight returns the number of unacknowledged packets.
func (q *qp) inFlight() int { return int(q.next.Diff(q.una)) }

// slot returns the ring slot of psn, empty, with room for a packet.
func (q *qp) slot(psn rocev2.PSN) []byte {
	i := int(uint32(psn)&q.mask) * q.slotSize
	return q.ring[i : i : i+q.slotSize]
}

// packet returns the stored datagram of psn.
func (q *qp) packet(psn rocev2.PSN) []byte {
	i := uint32(psn) & q.mask
	o := int(i) * q.slotSize
	return q.ring[o : o+int(q.lens[i])]
}

// refill adds the tokens earned since the last refill.
func (q *qp) refill(now int64, rate float64, burst int) {
	if now > q.lastRefill {
		q.tokens += float64(now-q.lastRefill) * rate / 1e9
		if q.tokens > float64(burst) {
			q.tokens = float64(burst)
		}
	}
	q.lastRefill = now
}

// room reports whether q can send n more packets now: ring space and, with
// a rate limit, tokens. It counts the reason when it cannot.
func (e *Engine) room(q *qp, n int) bool {
	if q.inFlight()+n > len(q.lens) {
		e.c.RingFull++
		return false
	}
	if e.cfg.RateLimit > 0 {
		q.refill(e.now, e.cfg.RateLimit, e.cfg.RateBurst)
		if q.tokens < float64(n) {
			e.c.RateLimited++
			return false
		}
	}
	return true
}

// post sends p on q: it fills in the BTH's P_Key, destination QP, PSN and
// the AckReq policy, stores the datagram in the ring and queues it. The
// one-packet WRITEs and FETCH_ADDs take the fast path (fastpath.go); post
// serves the multi-packet WRITEs.
func (e *Engine) post(q *qp, p *rocev2.Packet) {
	p.BTH.PKey = rocev2.DefaultPKey
	p.BTH.DestQP = q.remoteQPN
	p.BTH.PSN = q.next
	p.BTH.AckReq = q.ackReqPolicy(p.BTH.AckReq)
	b, err := p.AppendDatagram(q.slot(q.next), e.cfg.Local, q.remote)
	if err != nil || len(b) > q.slotSize {
		// The translation code builds only packets that encode; count
		// rather than panic if that ever changes.
		e.c.EncodeErrors++
		return
	}
	e.queued(q, b, p.BTH.AckReq)
}

// queued records b, the datagram just written into q's ring slot for its
// next PSN, and queues it for sending.
func (e *Engine) queued(q *qp, b []byte, ackReq bool) {
	q.lens[uint32(q.next)&q.mask] = uint16(len(b))
	if q.una == q.next {
		q.lastProgress = e.now
	}
	if !q.timing {
		q.rttPSN, q.rttAt, q.timing = q.next, e.now, true
	}
	e.out = append(e.out, Datagram{Addr: q.remote, Buf: b})
	if !q.touched {
		q.touched = true
		e.touched = append(e.touched, q)
	}
	q.roundPSN = q.next
	q.roundNeed = !ackReq
	q.next = q.next.Next()
	if e.cfg.RateLimit > 0 {
		q.tokens--
	}
	e.c.Packets++
}

// setAckReq sets the AckReq bit of psn's stored packet and recomputes its
// ICRC. Slices of the ring already queued see the change.
func (e *Engine) setAckReq(q *qp, psn rocev2.PSN) {
	b := q.packet(psn)
	if b[8]&0x80 != 0 {
		return
	}
	b[8] |= 0x80
	n := len(b) - rocev2.ICRCLen
	c, err := rocev2.DatagramICRC(e.cfg.Local, q.remote, b[:n])
	if err != nil {
		e.c.EncodeErrors++
		return
	}
	binary.LittleEndian.PutUint32(b[n:], c)
}

// endRound gives the last packet each QP posted in this round AckReq, so
// that the responder acknowledges every batch.
func (e *Engine) endRound() {
	for _, q := range e.touched {
		if q.roundNeed && q.state == qpReady && q.roundPSN.Diff(q.una) >= 0 {
			e.setAckReq(q, q.roundPSN)
			q.sinceAckReq = 0
		}
		q.roundNeed = false
		q.touched = false
	}
	e.touched = e.touched[:0]
}

// ackThrough acknowledges every packet up to and including psn.
func (e *Engine) ackThrough(q *qp, psn rocev2.PSN) {
	if psn.Diff(q.una) < 0 {
		e.c.StaleACKs++ // already acknowledged
		return
	}
	if psn.Diff(q.next) >= 0 {
		e.c.BadACKs++ // acknowledges a packet never sent
		return
	}
	if q.timing && psn.Diff(q.rttPSN) >= 0 {
		q.sampleRTT(e.now - q.rttAt)
		q.timing, q.backoff = false, 0
	}
	q.una = psn.Next()
	q.lastProgress = e.now
	q.retries = 0
	e.settle(q)
}

// sampleRTT folds one round-trip time into srtt and rttvar (RFC 6298).
func (q *qp) sampleRTT(r int64) {
	r = max(r, 1)
	if q.srtt == 0 {
		q.srtt, q.rttvar = r, r/2
		return
	}
	d := q.srtt - r
	if d < 0 {
		d = -d
	}
	q.rttvar += (d - q.rttvar) / 4
	q.srtt += (r - q.srtt) / 8
}

// rto is how long q waits for progress before it resends: srtt + 4 rttvar,
// at least cfg.AckTimeout (the floor, as TCP's minimum RTO, and the value
// before any sample), doubled for each timeout up to 4 times (so that a
// peer that is gone is still given up within about 4·MaxRetries timeouts)
// and kept doubled until a packet sent once is timed (Karn's algorithm: a
// round trip longer than the floor is learnt, not resent forever).
func (e *Engine) rto(q *qp) int64 {
	rto := int64(e.cfg.AckTimeout)
	if q.srtt > 0 {
		rto = max(rto, q.srtt+4*q.rttvar)
	}
	return rto << q.backoff
}

// resend queues again every unacknowledged packet from psn on (go-back-N),
// the last one with AckReq.
func (e *Engine) resend(q *qp, from rocev2.PSN) {
	if from.Diff(q.una) < 0 || from.Diff(q.next) >= 0 {
		return
	}
	last := q.next.Add(minusOne)
	e.setAckReq(q, last)
	q.timing = false // Karn: a retransmitted packet's ACK times nothing
	for p := from; p != q.next; p = p.Next() {
		e.out = append(e.out, Datagram{Addr: q.remote, Buf: q.packet(p)})
		e.c.Retransmits++
	}
	q.lastProgress = e.now
}

// minusOne added to a PSN steps it back by one.
const minusOne = rocev2.PSNMask

// handleAck processes an ACK, NAK or atomic ACK for q.
func (e *Engine) handleAck(q *qp, psn rocev2.PSN, s rocev2.Syndrome) {
	switch {
	case s.IsACK():
		e.ackThrough(q, psn)
	case s == rocev2.SyndromeNAKPSNSequenceError:
		// psn is the PSN the responder expects: everything before it
		// arrived.
		e.c.SeqNAKs++
		if psn.Diff(q.una) > 0 {
			e.ackThrough(q, psn.Add(minusOne))
		}
		if q.nakValid && q.nakPSN == psn && e.now-q.nakAt < int64(e.cfg.AckTimeout) {
			e.c.DupNAKs++ // already going back to psn
			return
		}
		q.nakPSN, q.nakAt, q.nakValid = psn, e.now, true
		e.resend(q, psn)
	case s.IsRNRNAK():
		e.c.RNRNAKs++ // the timeout resends
	default:
		switch s {
		case rocev2.SyndromeNAKRemoteAccessError:
			e.c.AccessNAKs++
		case rocev2.SyndromeNAKInvalidRequest:
			e.c.InvalidNAKs++
		default:
			e.c.OtherNAKs++
		}
		e.reconnect(q.inst)
	}
}

// tickQP resends on timeout and gives up on a QP that makes no progress.
func (e *Engine) tickQP(q *qp) {
	if q.una == q.next || e.now-q.lastProgress < e.rto(q) {
		return
	}
	if q.retries == 0 {
		q.stuckSince = e.now
	}
	q.retries++
	q.backoff = min(q.backoff+1, 2)
	e.c.Timeouts++
	if q.retries > e.cfg.MaxRetries && e.now-q.stuckSince >= int64(e.cfg.DeadAfter) {
		e.reconnect(q.inst)
		return
	}
	e.resend(q, q.una)
}
