package translator

import (
	"net/netip"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
	"github.com/dtakit/dtakit/rocev2/rc"
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

// qp is one RC queue pair to a collector instance: the CM exchange that
// opened it, the responder state for the collector's advertisement SEND,
// and, once ready, the requester (package rc) that carries the writes.
type qp struct {
	inst   *instance
	remote netip.AddrPort // the target
	state  qpState

	// CM.
	qpn         uint32 // ours
	remoteQPN   uint32
	localCommID uint32
	dial        *cm.Dialer // the CM exchange
	cmAt        int64      // when the REP came: the wait for the advertisement starts
	startPSN    rocev2.PSN // the REP's: the requester's first

	// The responder for the SENDs the collector makes (the advertisement,
	// then the Append heads when it says they follow), from the REP on.
	recvPSN   rocev2.PSN // the REQ's starting PSN: the collector's first SEND's
	resp      *rc.Responder
	headsDue  bool   // waiting for ListHeads SENDs
	headsNext uint32 // the first list still without its head

	req     *rc.Requester // from ready on
	touched bool          // posted in this output round

	// Wide reports whose last packet is in the ring, settled when the
	// collector acknowledges it (seqtrack.go).
	fin waitQueue[rocev2.PSN]

	// Token bucket, in packets.
	tokens     float64
	lastRefill int64
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

func (q *qp) ready() bool { return q.state == qpReady }

// room reports whether q can send n more packets now: ring space and, with
// a rate limit, tokens. It counts the reason when it cannot.
func (q *qp) room(e *Engine, n int) bool {
	if !q.req.Room(n) {
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

func (q *qp) flushRoom(n int) bool { return q.req.Room(n) }

// write posts a WRITE Only, or First/Middle/Last when data exceeds the MTU.
func (q *qp) write(e *Engine, va uint64, rkey uint32, data []byte, imm bool, immData uint32) {
	if len(data) <= MTU {
		if b := q.req.WriteOnly(va, rkey, data, imm, immData, e.now); b != nil {
			e.send(q, b)
		}
		return
	}
	p := &e.sc.pkt
	*p = rocev2.Packet{
		BTH:     rocev2.BTH{Opcode: rocev2.RCWriteFirst},
		RETH:    rocev2.RETH{VA: va, RKey: rkey, DMALength: uint32(len(data))},
		Payload: data[:MTU],
	}
	e.post(q, p)
	for data = data[MTU:]; len(data) > MTU; data = data[MTU:] {
		*p = rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteMiddle}, Payload: data[:MTU]}
		e.post(q, p)
	}
	*p = rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteLast}, Payload: data}
	if imm {
		p.BTH.Opcode = rocev2.RCWriteLastImm
		p.ImmDt.Data = immData
	}
	e.post(q, p)
}

func (q *qp) fetchAdd(e *Engine, va uint64, rkey uint32, add uint64) {
	e.send(q, q.req.FetchAdd(va, rkey, add, e.now))
}

func (q *qp) shareTail(on bool) {
	if q.req != nil {
		q.req.ShareTail(on)
	}
}

// tick does nothing: acknowledgements settle as they come (handleAck), and
// the engine ticks its QPs' timers (tickCM, tickQP).
func (q *qp) tick(*Engine) {}

func (q *qp) idle() bool { return q.state != qpReady || q.req.InFlight() == 0 }

// post sends p on q (the multi-packet WRITEs; the one-packet WRITEs and
// FETCH_ADDs take the requester's fast path).
func (e *Engine) post(q *qp, p *rocev2.Packet) {
	b, err := q.req.Post(p, e.now)
	if err != nil {
		// The translation code builds only packets that encode; the
		// requester counts one that does not.
		return
	}
	e.send(q, b)
}

// send queues b, a data packet q's requester just posted.
func (e *Engine) send(q *qp, b []byte) {
	// Set in place: a Datagram built on the stack and copied in stalls on
	// the copy's reads of the stores just made.
	e.out = append(e.out, Datagram{})
	d := &e.out[len(e.out)-1]
	d.Buf, d.Addr = b, q.remote
	if !q.touched {
		q.touched = true
		e.touched = append(e.touched, q)
	}
	if e.cfg.RateLimit > 0 {
		q.tokens--
	}
}

// endRound gives the last packet each QP posted in this round AckReq, so
// that the responder acknowledges every batch.
func (e *Engine) endRound() {
	for _, q := range e.touched {
		if q.state == qpReady {
			q.req.EndRound()
		}
		q.touched = false
	}
	e.touched = e.touched[:0]
}

// resend queues again what q's requester goes back to.
func (e *Engine) resend(q *qp) {
	for p := q.req.ResendFrom(); p != q.req.Next(); p = p.Next() {
		e.out = append(e.out, Datagram{Addr: q.remote, Buf: q.req.Packet(p)})
	}
}

// minusOne added to a PSN steps it back by one.
const minusOne = rocev2.PSNMask

// handleAck processes an ACK, NAK or atomic ACK for q.
func (e *Engine) handleAck(q *qp, psn rocev2.PSN, s rocev2.Syndrome) {
	ev := q.req.HandleAck(psn, s, e.now)
	if ev&rc.Acked != 0 {
		e.settle(q)
	}
	if ev&rc.GoBack != 0 {
		e.resend(q)
	}
	if ev&rc.Broken != 0 {
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
	switch q.req.Tick(e.now) {
	case rc.Dead:
		e.reconnect(q.inst)
	case rc.GoBack:
		e.resend(q)
	}
}
