package cm

import (
	"fmt"
	"time"
)

// Acceptor is the passive side of the CM exchange of one RC queue pair,
// as a librdmacm listener behaves: the REP that accepts a REQ, resent until
// the RTU comes (or the caller sees the connection used), and the DREQ that
// closes the connection, resent until the DREP. Like Dialer it deals in
// MADs and events; the caller decides whom to accept, keeps its tables of
// connections and answers every DREQ with a DREP (Dialer.Handle shows the
// shape), and appends each MAD to the caller's buffer as Dialer does. An
// Acceptor is not safe for concurrent use.
type Acceptor struct {
	cfg     AcceptConfig
	rep     ConnectReply
	tid     uint64 // the REQ's transaction ID, which the REP carries
	peerQPN uint32 // the REQ's queue pair, which the DREQ names
	state   acceptState
	tries   int   // REPs or DREQs sent
	due     int64 // when the REP or DREQ goes again
	dreq    DisconnectRequest
}

type acceptState uint8

const (
	waitRTU acceptState = iota
	up
	closing
	down
)

// AcceptConfig is how an Acceptor resends: Timeout apart, Tries times in
// all, for the REP and for the DREQ.
type AcceptConfig struct {
	Timeout time.Duration
	Tries   int
}

// Accept answers req, whose MAD header is h, with rep (its RemoteCommID
// set to the REQ's comm ID) at time now (Unix nanoseconds), and returns the
// Acceptor and b with the REP to send appended.
func Accept(b []byte, h MADHeader, req *ConnectRequest, rep ConnectReply, cfg AcceptConfig, now int64) (*Acceptor, []byte, error) {
	if cfg.Tries < 1 || cfg.Timeout <= 0 {
		return nil, b, fmt.Errorf("cm.Accept: %w: %d tries, timeout %v", ErrDial, cfg.Tries, cfg.Timeout)
	}
	rep.RemoteCommID = req.LocalCommID
	a := &Acceptor{cfg: cfg, rep: rep, tid: h.TransactionID, peerQPN: req.LocalQPN}
	out, err := a.REP(b)
	if err != nil {
		return nil, b, fmt.Errorf("cm.Accept: %w", err)
	}
	a.sent(now)
	return a, out, nil
}

// LocalCommID and RemoteCommID are the REP's: ours, and the REQ's.
func (a *Acceptor) LocalCommID() uint32  { return a.rep.LocalCommID }
func (a *Acceptor) RemoteCommID() uint32 { return a.rep.RemoteCommID }

// REP appends the REP to b again, for a repeated REQ (the first was lost
// or is slow); it does not count as a try.
func (a *Acceptor) REP(b []byte) ([]byte, error) { return AppendMAD(b, Header(a.tid, AttrREP), &a.rep) }

// Up records that the connection is established: the RTU came, or a first
// packet on the queue pair. The REP is not sent again.
func (a *Acceptor) Up() {
	if a.state == waitRTU {
		a.state = up
	}
}

// Close starts closing the connection: the next Tick sends the DREQ.
func (a *Acceptor) Close() { a.state, a.tries, a.due = closing, 0, 0 }

// Tick appends the REP or the DREQ that is due to b, or gives up (GaveUp)
// after Tries of them.
func (a *Acceptor) Tick(b []byte, now int64) (Event, []byte) {
	if (a.state != waitRTU && a.state != closing) || now < a.due {
		return None, b
	}
	if a.tries >= a.cfg.Tries {
		a.state = down
		return GaveUp, b
	}
	var out []byte
	var err error
	if a.state == waitRTU {
		out, err = a.REP(b)
	} else {
		// Each DREQ a transaction of its own.
		a.dreq = DisconnectRequest{LocalCommID: a.rep.LocalCommID, RemoteCommID: a.rep.RemoteCommID, RemoteQPN: a.peerQPN}
		out, err = AppendMAD(b, Header(uint64(a.rep.LocalCommID)<<32|uint64(a.tries), AttrDREQ), &a.dreq)
	}
	if err != nil {
		return None, b // the REP was encoded once already; a DREQ always encodes
	}
	a.sent(now)
	return None, out
}

func (a *Acceptor) sent(now int64) {
	a.tries++
	a.due = now + int64(a.cfg.Timeout)
}
