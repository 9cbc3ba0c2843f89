package rc

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/dtakit/dtakit/rocev2"
)

// ResponderConfig sets up a Responder on a connected queue pair.
type ResponderConfig struct {
	// Local and Remote are the responses' source and destination (the ICRC
	// covers the addresses); Route changes them.
	Local, Remote netip.AddrPort
	// RemoteQPN is the requester's queue pair, the responses' destination.
	RemoteQPN uint32
	// StartPSN is the first PSN expected.
	StartPSN rocev2.PSN
}

// AtomicResources is how many PSNs back a Responder answers a duplicate
// atomic with its saved result (its responder resources): the results of
// the atomics among the last AtomicResources PSNs.
const AtomicResources = 1024

// ResponderCounters is what a Responder did.
type ResponderCounters struct {
	Duplicates   uint64 // requests behind the expected PSN, not executed again
	OutOfOrder   uint64 // requests ahead of it, dropped
	SeqNAKs      uint64 // PSN sequence error NAKs sent, one per gap
	ACKs         uint64 // ACKs sent
	AtomicACKs   uint64 // ATOMIC ACKs sent, replays of saved results included
	StaleAtomics uint64 // duplicate atomics older than the saved results, answered with an ACK
	RNRNAKs      uint64 // receiver-not-ready NAKs sent
	AccessNAKs   uint64 // remote access error NAKs sent
	InvalidNAKs  uint64 // other fatal NAKs sent (invalid request, operational error)
	EncodeErrors uint64 // responses not sent: addresses of mixed families
}

// Verdict says what the caller does with a request Receive classified.
type Verdict uint8

const (
	// Execute: the request has the expected PSN. Perform it, then call
	// Done, AtomicDone or Refuse.
	Execute Verdict = iota
	// Duplicate: the request was executed before; do not execute it again.
	// The responses answer it (now, or with the pending ACK).
	Duplicate
	// OutOfOrder: a PSN ahead of the expected one; drop it. The first of a
	// gap is answered with a sequence error NAK.
	OutOfOrder
)

// Responder is the receiving side of one RC queue pair (IBTA vol. 1,
// section 9.7.5): it checks each request's PSN against the one it expects,
// counts messages (MSN), answers duplicates without executing them (an ATOMIC
// ACK with the saved result for an atomic), NAKs a sequence error once per
// gap, and coalesces ACKs: one request with AckReq makes an ACK pending,
// sent when the caller flushes (at the end of a batch) or before any later
// response, so responses leave in PSN order; an ACK carries the MSN when it
// is sent. Executing a request is the
// caller's: Receive says whether to, and Done, AtomicDone and Refuse record
// the outcome. A Responder keeps no timer. It is not safe for concurrent
// use.
type Responder struct {
	cfg        ResponderConfig
	epsn       rocev2.PSN // expected
	msn        uint32     // messages completed, 24 bits
	nakSent    bool       // a sequence NAK was sent: silent until an in-order request
	ackPending bool       // an ACK of ackPSN goes out at the next Flush or response
	ackPSN     rocev2.PSN
	atomics    *[AtomicResources]atomicResult // by PSN; allocated at the first atomic

	bases responseBases
	tmpl  [atomicAckLen - rocev2.ICRCLen]byte // the bases' responses (on the heap with r, not each time)
	out   [2][]byte                           // the datagrams of the last call
	c     ResponderCounters
}

// atomicResult is a saved atomic response, to answer a duplicate.
type atomicResult struct {
	psn   rocev2.PSN
	valid bool
	msn   uint32
	orig  uint64
}

// NewResponder returns a responder for cfg.
func NewResponder(cfg ResponderConfig) (*Responder, error) {
	if !cfg.StartPSN.Valid() || cfg.RemoteQPN > rocev2.PSNMask {
		return nil, fmt.Errorf("rc.NewResponder: %w: PSN %d, remote QP %d", ErrConfig, cfg.StartPSN, cfg.RemoteQPN)
	}
	return &Responder{cfg: cfg, epsn: cfg.StartPSN}, nil
}

// Expected returns the PSN of the next request to execute.
func (r *Responder) Expected() rocev2.PSN { return r.epsn }

// MSN returns the number of messages completed, modulo 2^24.
func (r *Responder) MSN() uint32 { return r.msn }

// AckPending reports whether an ACK waits for Flush.
func (r *Responder) AckPending() bool { return r.ackPending }

// Counters returns what r did.
func (r *Responder) Counters() ResponderCounters { return r.c }

// Route sends the responses from local to remote from now on, the pending
// ACK included: a target whose address changed, a requester that sends
// from another port.
func (r *Responder) Route(local, remote netip.AddrPort) {
	if r.cfg.Remote != remote || r.cfg.Local != local { // mostly equal: no stores
		r.cfg.Local, r.cfg.Remote = local, remote
	}
}

// Remote returns where the responses go.
func (r *Responder) Remote() netip.AddrPort { return r.cfg.Remote }

// Receive classifies a request by its BTH (PSN and opcode). The responses
// to send now, if any, are appended to b, and returned as the extended
// buffer and as slices of it, one per datagram, in order (backed by r
// until its next call). It does not allocate when b has room.
func (r *Responder) Receive(b []byte, bth *rocev2.BTH) (v Verdict, out []byte, dgs [][]byte) {
	out = b
	if bth.PSN != r.epsn {
		v, out, dgs = r.unexpected(b, bth)
	}
	return // Execute: nakSent is cleared by the outcome (Done, AtomicDone, Refuse)
}

func (r *Responder) unexpected(b []byte, bth *rocev2.BTH) (Verdict, []byte, [][]byte) {
	psn, op := bth.PSN, bth.Opcode
	if psn.Diff(r.epsn) > 0 {
		r.c.OutOfOrder++
		if r.nakSent {
			return OutOfOrder, b, nil // the gap's NAK went already
		}
		r.nakSent = true
		r.c.SeqNAKs++
		b, dgs := r.respond(b, rocev2.SyndromeNAKPSNSequenceError, r.epsn)
		return OutOfOrder, b, dgs
	}
	r.c.Duplicates++
	if op == rocev2.RCFetchAdd || op == rocev2.RCCompareSwap {
		if r.atomics != nil {
			if a := &r.atomics[psn&(AtomicResources-1)]; a.valid && a.psn == psn {
				b, dgs := r.atomicAck(b, a)
				return Duplicate, b, dgs
			}
		}
		// Older than the saved results: the original value is gone. An
		// ACK of ePSN-1 tells the requester the atomic was executed, so
		// that a go-back-N requester does not resend it forever.
		r.c.StaleAtomics++
	}
	r.setAck(r.epsn.Add(rocev2.PSNMask)) // ePSN-1, the last executed
	return Duplicate, b, nil
}

// Done records that the request with the expected PSN was executed: its
// PSN is consumed, a message completed when last (its last or only
// packet), and an ACK is pending when ackReq.
func (r *Responder) Done(ackReq, last bool) {
	psn := r.epsn
	r.epsn, r.nakSent = psn.Next(), false
	if last {
		r.msn = (r.msn + 1) & rocev2.PSNMask
	}
	if ackReq {
		r.setAck(psn)
	}
}

// AtomicDone records that the atomic with the expected PSN was executed,
// orig being the value it found, saves the result for a duplicate and
// appends the responses to send now to b, the ATOMIC ACK last, as Receive
// does.
func (r *Responder) AtomicDone(b []byte, orig uint64) ([]byte, [][]byte) {
	psn := r.epsn
	r.epsn, r.nakSent = psn.Next(), false
	r.msn = (r.msn + 1) & rocev2.PSNMask
	if r.atomics == nil {
		r.atomics = new([AtomicResources]atomicResult)
	}
	a := &r.atomics[psn&(AtomicResources-1)]
	*a = atomicResult{psn: psn, valid: true, msn: r.msn, orig: orig}
	return r.atomicAck(b, a)
}

// Refuse answers the request with the expected PSN, not executed, with the
// NAK s, appending the responses to send now to b, the NAK last, as Receive
// does. After a receiver-not-ready NAK the PSN stays expected (the
// requester retries it); any other NAK is fatal, and the caller puts the
// queue pair in the error state.
func (r *Responder) Refuse(b []byte, s rocev2.Syndrome) ([]byte, [][]byte) {
	r.nakSent = false
	switch {
	case s.IsRNRNAK():
		r.c.RNRNAKs++
	case s == rocev2.SyndromeNAKRemoteAccessError:
		r.c.AccessNAKs++
	default:
		r.c.InvalidNAKs++
	}
	return r.respond(b, s, r.epsn)
}

// Flush appends the pending ACK, if any, to b, as Receive does.
func (r *Responder) Flush(b []byte) ([]byte, [][]byte) {
	start := len(b)
	b = r.flushFirst(b)
	return b, r.views(b, start, len(b))
}

// setAck makes an ACK of psn pending: one ACK covers every request before.
func (r *Responder) setAck(psn rocev2.PSN) { r.ackPending, r.ackPSN = true, psn }

// respond appends the pending ACK, if any, and the NAK s of psn to b.
func (r *Responder) respond(b []byte, s rocev2.Syndrome, psn rocev2.PSN) ([]byte, [][]byte) {
	start := len(b)
	b = r.flushFirst(b)
	mid := len(b)
	b = r.appendAck(b, s, psn)
	return b, r.views(b, start, mid)
}

// atomicAck appends the pending ACK, if any, and the ATOMIC ACK of a to b.
func (r *Responder) atomicAck(b []byte, a *atomicResult) ([]byte, [][]byte) {
	start := len(b)
	b = r.flushFirst(b)
	mid := len(b)
	if b = r.appendAtomicAck(b, a); len(b) > mid {
		r.c.AtomicACKs++
	}
	return b, r.views(b, start, mid)
}

// flushFirst appends the pending ACK, if any, to b.
func (r *Responder) flushFirst(b []byte) []byte {
	if !r.ackPending {
		return b
	}
	r.ackPending = false
	n := len(b)
	if b = r.appendAck(b, rocev2.SyndromeACK, r.ackPSN); len(b) > n {
		r.c.ACKs++
	}
	return b
}

// views returns the datagrams b[start:mid] and b[mid:], those not empty,
// in r.out.
func (r *Responder) views(b []byte, start, mid int) [][]byte {
	out := r.out[:0]
	if mid > start {
		out = append(out, b[start:mid:mid])
	}
	if n := len(b); n > mid {
		out = append(out, b[mid:n:n])
	}
	return out
}

// Response lengths: BTH, AETH (and AtomicAckETH), ICRC.
const (
	ackLen       = rocev2.BTHLen + rocev2.AETHLen + rocev2.ICRCLen
	atomicAckLen = ackLen + rocev2.AtomicAckETHLen
)

// ackTables are the DeltaTables of a response's window, from its PSN (BTH
// byte 9) to its end: nothing follows the window.
// Allocated, not a global array: 16 KB among the globals moved the
// requester's hot data into conflicting cache sets, a measurable slowdown.
var ackTables = func() *rocev2.DeltaTables {
	t := new(rocev2.DeltaTables)
	t.Fill(0)
	return t
}()

// responseBases caches the ICRCs of a Responder's ACK and ATOMIC ACK with
// the window zeroed, for one route.
type responseBases struct {
	local, remote   netip.AddrPort
	ack, atomicAck  uint32
	valid, mismatch bool
}

// base returns the ICRC base of r's ACK (or ATOMIC ACK) on its route,
// computed again on a change of route; ok is false when the route mixes
// address families.
func (r *Responder) base(atomic bool) (uint32, bool) {
	rb := &r.bases
	if !rb.valid || rb.local != r.cfg.Local || rb.remote != r.cfg.Remote {
		b := r.tmpl[:]
		clear(b)
		rocev2.AppendBTH(b[:0], rocev2.RCAcknowledge, 0, rocev2.DefaultPKey, r.cfg.RemoteQPN, false, 0)
		ack, err1 := rocev2.DatagramICRC(r.cfg.Local, r.cfg.Remote, b[:ackLen-rocev2.ICRCLen])
		b[0] = byte(rocev2.RCAtomicAcknowledge)
		atomicAck, err2 := rocev2.DatagramICRC(r.cfg.Local, r.cfg.Remote, b)
		*rb = responseBases{local: r.cfg.Local, remote: r.cfg.Remote, ack: ack, atomicAck: atomicAck,
			valid: true, mismatch: err1 != nil || err2 != nil}
	}
	if rb.mismatch {
		r.c.EncodeErrors++
		return 0, false
	}
	if atomic {
		return rb.atomicAck, true
	}
	return rb.ack, true
}

// appendAck appends an ACK or NAK of psn with syndrome s to b, or nothing
// when the route cannot carry it.
func (r *Responder) appendAck(b []byte, s rocev2.Syndrome, psn rocev2.PSN) []byte {
	k, ok := r.base(false)
	if !ok {
		return b
	}
	b = rocev2.AppendBTH(b, rocev2.RCAcknowledge, 0, rocev2.DefaultPKey, r.cfg.RemoteQPN, false, psn)
	b = rocev2.AETH{Syndrome: s, MSN: r.msn}.AppendTo(b)
	w := b[len(b)-7:] // the window: PSN, syndrome, MSN (unrolled DeltaTables.Sum)
	t := ackTables
	k ^= t[6][w[0]] ^ t[5][w[1]] ^ t[4][w[2]] ^ t[3][w[3]] ^ t[2][w[4]] ^ t[1][w[5]] ^ t[0][w[6]]
	return binary.LittleEndian.AppendUint32(b, k)
}

// appendAtomicAck appends the ATOMIC ACK of a to b, or nothing when the
// route cannot carry it.
func (r *Responder) appendAtomicAck(b []byte, a *atomicResult) []byte {
	k, ok := r.base(true)
	if !ok {
		return b
	}
	b = rocev2.AppendBTH(b, rocev2.RCAtomicAcknowledge, 0, rocev2.DefaultPKey, r.cfg.RemoteQPN, false, a.psn)
	b = rocev2.AETH{Syndrome: rocev2.SyndromeACK, MSN: a.msn}.AppendTo(b)
	b = rocev2.AtomicAckETH{OrigRemoteData: a.orig}.AppendTo(b)
	w := b[len(b)-15:] // the window: PSN, syndrome, MSN, value (unrolled DeltaTables.Sum)
	t := ackTables
	k ^= t[14][w[0]] ^ t[13][w[1]] ^ t[12][w[2]] ^ t[11][w[3]] ^ t[10][w[4]] ^ t[9][w[5]] ^ t[8][w[6]] ^
		t[7][w[7]] ^ t[6][w[8]] ^ t[5][w[9]] ^ t[4][w[10]] ^ t[3][w[11]] ^ t[2][w[12]] ^ t[1][w[13]] ^ t[0][w[14]]
	return binary.LittleEndian.AppendUint32(b, k)
}
