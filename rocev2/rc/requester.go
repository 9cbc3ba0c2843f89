// Package rc is a RoCEv2 reliable connection (RC), both ways, as state
// machines with no sockets.
//
// A Requester sends RDMA WRITEs, SENDs and FETCH_ADDs on one connected
// queue pair and makes sure they arrive: it numbers the packets (PSNs),
// keeps each until the responder acknowledges it, asks for
// acknowledgement at the end of every batch, and goes back N on a
// sequence error NAK or a timeout (an RFC 6298 timer with Karn's rule).
// The translator builds DTA's writes with it, one Requester per collector
// instance, and rocev2/target its own SENDs.
//
// A Responder is the other side: it checks each request's PSN, answers
// duplicates and sequence errors, and acknowledges; the caller executes
// the requests (rocev2/target into registered memory, the translator its
// collector's advertisement).
//
// Neither knows what the packets carry or the connection manager that
// opened the queue pair (package cm). The conventions every socket-free
// core of rocev2 follows (rc's, cm's Dialer and Acceptor, the target's
// queue pairs):
//   - Time is given as Unix nanoseconds (now int64), so that a caller
//     driving many of them reads the clock once; a core that keeps no
//     timer takes none.
//   - Datagrams to send are written into the caller's buffer: appended to
//     a b []byte the call takes, and returned as the extended buffer and
//     as one slice of it per datagram, in the order to send them. The
//     Requester, which must keep each packet until it is acknowledged,
//     writes into its ring instead and returns slices of it. An Event or
//     a Verdict says what else the caller must do.
//
// None is safe for concurrent use.
package rc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/dtakit/dtakit/rocev2"
)

// ErrConfig is wrapped by the errors of New and NewResponder.
var ErrConfig = errors.New("rc: invalid configuration")

// Config sets up a Requester on a connected queue pair.
type Config struct {
	// Local and Remote are the datagrams' source and destination: the
	// ICRC covers the addresses.
	Local, Remote netip.AddrPort
	// RemoteQPN is the responder's queue pair.
	RemoteQPN uint32
	// StartPSN is the first PSN sent, the one the responder expects.
	StartPSN rocev2.PSN
	// Ring is how many packets may wait for acknowledgement, a power of two
	// up to 2^16.
	Ring int
	// MaxPacket is the largest datagram posted, ICRC included (at most
	// MaxDatagram); ring slots are that large, rounded up to 64 bytes.
	MaxPacket int
	// AckReqEvery asks for an acknowledgement at least every that many
	// packets within a round (0: at the end of each round and on atomics
	// only).
	AckReqEvery int
	// AckTimeout is the floor of the retransmission timeout, and the
	// timeout before any round trip was measured.
	AckTimeout time.Duration
	// MaxRetries and DeadAfter: the queue pair is dead once more than
	// MaxRetries timeouts in a row passed without progress, the first at
	// least DeadAfter ago.
	MaxRetries int
	DeadAfter  time.Duration
}

// MaxDatagram is the largest datagram a Requester sends: BTH, RETH,
// immediate data, a 4096-byte MTU of payload, pad and ICRC.
const MaxDatagram = rocev2.BTHLen + rocev2.RETHLen + rocev2.ImmDtLen + 4096 + 3 + rocev2.ICRCLen

// Counters is what a Requester did.
type Counters struct {
	Packets      uint64 // data packets sent the first time
	Retransmits  uint64 // data packets sent again
	Timeouts     uint64 // acknowledgement timeouts
	SeqNAKs      uint64 // PSN sequence error NAKs
	DupNAKs      uint64 // sequence error NAKs ignored as repeats
	RNRNAKs      uint64 // receiver-not-ready NAKs (the timeout resends)
	StaleACKs    uint64 // ACKs for packets already acknowledged
	BadACKs      uint64 // ACKs for packets never sent
	EncodeErrors uint64 // packets that failed to encode (a bug if not 0)
}

// Event says what a caller must do after HandleAck or Tick. It is a set:
// one sequence error NAK both acknowledges packets and asks for a resend.
type Event uint8

const (
	// Acked: packets were acknowledged (Una moved); settle what waited
	// for them.
	Acked Event = 1 << iota
	// GoBack: resend every packet from ResendFrom to Next, in order, as
	// Packet returns them.
	GoBack
	// Broken: the responder refused an operation (remote access error,
	// invalid request, operational error); the queue pair is unusable.
	Broken
	// Dead: no progress for longer than the configuration allows.
	Dead
)

// Requester is the sending side of one RC queue pair. Packets [Una, Next)
// are unacknowledged and kept in the ring.
type Requester struct {
	cfg       Config
	una, next rocev2.PSN
	mask      uint32
	ring      []byte // Ring slots of slotSize bytes
	slotSize  int
	lens      []uint16
	from      rocev2.PSN // where the last GoBack resends from

	sinceAckReq  int   // packets since the last one with AckReq
	lastProgress int64 // last ACK that moved una, or the first send into an empty ring
	retries      int   // timeouts in a row without progress
	stuckSince   int64 // the first of those timeouts
	// Round-trip time (RFC 6298, in nanoseconds): one packet at a time is
	// timed, never a retransmitted one (Karn); srtt 0 means no sample yet.
	srtt, rttvar int64
	backoff      uint // the timeout's doublings, kept until a new sample
	rttPSN       rocev2.PSN
	rttAt        int64
	timing       bool
	nakPSN       rocev2.PSN
	nakAt        int64
	nakValid     bool

	// AckReq for one output round: the last packet posted.
	roundPSN  rocev2.PSN
	roundNeed bool // that packet has no AckReq yet

	fast fastICRC
	c    Counters
}

// New returns a requester for cfg, starting at time now.
func New(cfg Config, now int64) (*Requester, error) {
	switch {
	case cfg.Ring < 1 || cfg.Ring > 1<<16 || cfg.Ring&(cfg.Ring-1) != 0:
		return nil, fmt.Errorf("rc.New: %w: ring of %d packets, want a power of two up to 2^16", ErrConfig, cfg.Ring)
	case cfg.MaxPacket < rocev2.BTHLen+rocev2.ICRCLen || cfg.MaxPacket > MaxDatagram:
		return nil, fmt.Errorf("rc.New: %w: largest packet %d bytes, want %d..%d", ErrConfig, cfg.MaxPacket, rocev2.BTHLen+rocev2.ICRCLen, MaxDatagram)
	case !cfg.StartPSN.Valid() || cfg.RemoteQPN > rocev2.PSNMask:
		return nil, fmt.Errorf("rc.New: %w: PSN %d, remote QP %d", ErrConfig, cfg.StartPSN, cfg.RemoteQPN)
	case cfg.Local.Addr().Is4() != cfg.Remote.Addr().Is4():
		return nil, fmt.Errorf("rc.New: %w: %v to %v mixes address families", ErrConfig, cfg.Local, cfg.Remote)
	}
	slot := (cfg.MaxPacket + 63) &^ 63 // a ring of small packets stays in cache
	return &Requester{
		cfg: cfg, una: cfg.StartPSN, next: cfg.StartPSN,
		mask: uint32(cfg.Ring - 1), ring: make([]byte, cfg.Ring*slot), slotSize: slot,
		lens: make([]uint16, cfg.Ring), lastProgress: now,
	}, nil
}

// Una returns the oldest unacknowledged PSN (Next when all are).
func (r *Requester) Una() rocev2.PSN { return r.una }

// Next returns the PSN of the next packet.
func (r *Requester) Next() rocev2.PSN { return r.next }

// InFlight returns the number of unacknowledged packets.
func (r *Requester) InFlight() int { return int(r.next.Diff(r.una)) }

// Room reports whether n more packets fit in the ring.
func (r *Requester) Room(n int) bool { return r.InFlight()+n <= len(r.lens) }

// Counters returns what r did.
func (r *Requester) Counters() Counters { return r.c }

// ResendFrom returns the first PSN the last GoBack resends.
func (r *Requester) ResendFrom() rocev2.PSN { return r.from }

// Packet returns the stored datagram of psn, which must be unacknowledged.
// It aliases the ring.
func (r *Requester) Packet(psn rocev2.PSN) []byte {
	i := uint32(psn) & r.mask
	o := int(i) * r.slotSize
	return r.ring[o : o+int(r.lens[i])]
}

// slot returns the ring slot of psn, empty, with room for a packet.
func (r *Requester) slot(psn rocev2.PSN) []byte {
	i := int(uint32(psn)&r.mask) * r.slotSize
	return r.ring[i : i : i+r.slotSize]
}

// ackReqPolicy decides the AckReq bit of the next packet: always for
// atomics, and every AckReqEvery packets (the last packet of a round gets
// it in EndRound).
func (r *Requester) ackReqPolicy(atomic bool) bool {
	r.sinceAckReq++
	if atomic || (r.cfg.AckReqEvery > 0 && r.sinceAckReq >= r.cfg.AckReqEvery) {
		r.sinceAckReq = 0
		return true
	}
	return false
}

// Post sends p: it fills in the BTH's P_Key, destination QP, PSN and
// AckReq, stores the datagram in the ring and returns it, to be sent; the
// caller checks Room first. Post serves any packet; WriteOnly and FetchAdd
// are faster for theirs.
func (r *Requester) Post(p *rocev2.Packet, now int64) ([]byte, error) {
	p.BTH.PKey = rocev2.DefaultPKey
	p.BTH.DestQP = r.cfg.RemoteQPN
	p.BTH.PSN = r.next
	p.BTH.AckReq = r.ackReqPolicy(p.BTH.AckReq)
	b, err := p.AppendDatagram(r.slot(r.next), r.cfg.Local, r.cfg.Remote)
	if err == nil && len(b) > r.slotSize {
		err = fmt.Errorf("%d bytes, above the configured largest packet", len(b))
	}
	if err != nil {
		r.c.EncodeErrors++
		return nil, fmt.Errorf("rc: post: %w", err)
	}
	r.queued(b, p.BTH.AckReq, now)
	return b, nil
}

// queued records b, the datagram just written into the ring slot of the
// next PSN.
func (r *Requester) queued(b []byte, ackReq bool, now int64) {
	r.lens[uint32(r.next)&r.mask] = uint16(len(b))
	if r.una == r.next {
		r.lastProgress = now
	}
	if !r.timing {
		r.rttPSN, r.rttAt, r.timing = r.next, now, true
	}
	r.roundPSN = r.next
	r.roundNeed = !ackReq
	r.next = r.next.Next()
	r.c.Packets++
}

// setAckReq sets the AckReq bit of psn's stored packet and recomputes its
// ICRC. Slices of the ring already handed out see the change.
func (r *Requester) setAckReq(psn rocev2.PSN) {
	b := r.Packet(psn)
	if b[8]&0x80 != 0 {
		return
	}
	b[8] |= 0x80
	n := len(b) - rocev2.ICRCLen
	c, err := rocev2.DatagramICRC(r.cfg.Local, r.cfg.Remote, b[:n])
	if err != nil {
		r.c.EncodeErrors++
		return
	}
	binary.LittleEndian.PutUint32(b[n:], c)
}

// EndRound gives the last packet posted since the previous round AckReq,
// so that the responder acknowledges every batch. Call it once the round's
// packets are posted, before they are sent.
func (r *Requester) EndRound() {
	if r.roundNeed && r.roundPSN.Diff(r.una) >= 0 {
		r.setAckReq(r.roundPSN)
		r.sinceAckReq = 0
	}
	r.roundNeed = false
}

// ackThrough acknowledges every packet up to and including psn.
func (r *Requester) ackThrough(psn rocev2.PSN, now int64) Event {
	if psn.Diff(r.una) < 0 {
		r.c.StaleACKs++
		return 0
	}
	if psn.Diff(r.next) >= 0 {
		r.c.BadACKs++
		return 0
	}
	if r.timing && psn.Diff(r.rttPSN) >= 0 {
		r.sampleRTT(now - r.rttAt)
		r.timing, r.backoff = false, 0
	}
	r.una = psn.Next()
	r.lastProgress = now
	r.retries = 0
	return Acked
}

// sampleRTT folds one round-trip time into srtt and rttvar (RFC 6298).
func (r *Requester) sampleRTT(d int64) {
	d = max(d, 1)
	if r.srtt == 0 {
		r.srtt, r.rttvar = d, d/2
		return
	}
	dev := r.srtt - d
	if dev < 0 {
		dev = -dev
	}
	r.rttvar += (dev - r.rttvar) / 4
	r.srtt += (d - r.srtt) / 8
}

// RTO is how long r waits for progress before it resends: srtt + 4 rttvar,
// at least AckTimeout (the floor, as TCP's minimum RTO, and the value
// before any sample), doubled for each timeout up to 2 times (so that a
// peer that is gone is still given up within about 4·MaxRetries timeouts)
// and kept doubled until a packet sent once is timed (Karn's algorithm: a
// round trip longer than the floor is learnt, not resent forever).
func (r *Requester) RTO() time.Duration {
	rto := int64(r.cfg.AckTimeout)
	if r.srtt > 0 {
		rto = max(rto, r.srtt+4*r.rttvar)
	}
	return time.Duration(rto << r.backoff)
}

// goBack prepares the resend of every unacknowledged packet from psn on,
// the last one with AckReq.
func (r *Requester) goBack(from rocev2.PSN, now int64) Event {
	if from.Diff(r.una) < 0 || from.Diff(r.next) >= 0 {
		return 0
	}
	r.setAckReq(r.next.Add(rocev2.PSNMask))
	r.timing = false // Karn: a retransmitted packet's ACK times nothing
	r.c.Retransmits += uint64(r.next.Diff(from))
	r.from = from
	r.lastProgress = now
	return GoBack
}

// HandleAck processes the responder's ACK, NAK or atomic ACK with PSN psn
// and syndrome s.
func (r *Requester) HandleAck(psn rocev2.PSN, s rocev2.Syndrome, now int64) Event {
	switch {
	case s.IsACK():
		return r.ackThrough(psn, now)
	case s == rocev2.SyndromeNAKPSNSequenceError:
		// psn is the PSN the responder expects: everything before it
		// arrived.
		r.c.SeqNAKs++
		var ev Event
		if psn.Diff(r.una) > 0 {
			ev = r.ackThrough(psn.Add(rocev2.PSNMask), now)
		}
		if r.nakValid && r.nakPSN == psn && now-r.nakAt < int64(r.cfg.AckTimeout) {
			r.c.DupNAKs++ // already going back to psn
			return ev
		}
		r.nakPSN, r.nakAt, r.nakValid = psn, now, true
		return ev | r.goBack(psn, now)
	case s.IsRNRNAK():
		r.c.RNRNAKs++ // the timeout resends
		return 0
	}
	return Broken
}

// Tick resends on timeout (GoBack from Una) and gives up on a queue pair
// that makes no progress (Dead).
func (r *Requester) Tick(now int64) Event {
	if r.una == r.next || now-r.lastProgress < int64(r.RTO()) {
		return 0
	}
	if r.retries == 0 {
		r.stuckSince = now
	}
	r.retries++
	r.backoff = min(r.backoff+1, 2)
	r.c.Timeouts++
	if r.retries > r.cfg.MaxRetries && now-r.stuckSince >= int64(r.cfg.DeadAfter) {
		return Dead
	}
	return r.goBack(r.una, now)
}
