package cm

import (
	"errors"
	"fmt"
	"time"

	"github.com/dtakit/dtakit/rocev2"
)

// Dialer is the active side of the CM exchange that opens one RC queue
// pair: it sends a REQ and resends it until a REP or a REJ answers, answers
// the REP with an RTU (and a repeated REP with the same RTU), answers the
// peer's DREQ with a DREP, and makes the DREQ that closes the connection.
// It deals in MADs (AppendMAD's bytes) and knows nothing of sockets or of
// what the queue pair carries: the caller sends each MAD on QP 1 (Packet)
// and acts on each Event. A Dialer is not safe for concurrent use.
type Dialer struct {
	cfg          DialConfig
	state        dialState
	remoteCommID uint32
	remoteQPN    uint32
	startPSN     rocev2.PSN
	reason       uint16
	req, rtu     []byte // MADs kept for resends
	tries        int
	at           int64 // when the last REQ was sent
}

type dialState uint8

const (
	dialing dialState = iota
	connected
	closed
)

// DialConfig is what a Dialer needs.
type DialConfig struct {
	// Request is the REQ to send, complete (its private data included).
	Request ConnectRequest
	// TID is the REQ's transaction ID.
	TID uint64
	// Timeout is the wait for an answer before the REQ is sent again, and
	// Tries the number of REQs sent before the Dialer gives up.
	Timeout time.Duration
	Tries   int
}

// ErrDial is wrapped by the errors of Dial and Accept about their
// configuration.
var ErrDial = errors.New("cm: invalid dial")

// Event is what a message or the passing of time means for a Dialer's
// connection.
type Event uint8

const (
	// None: nothing to do but send the MAD returned with it, if any (a
	// resent REQ or RTU, a DREP to a repeated DREQ).
	None Event = iota
	// Established: the REP arrived (RemoteQPN, RemoteCommID and StartPSN
	// are set); send the RTU returned with it.
	Established
	// Rejected: a REJ answered the REQ (Reason says why).
	Rejected
	// Closed: the peer disconnected; send the DREP returned with it.
	Closed
	// GaveUp: Tries REQs went unanswered.
	GaveUp
	// Foreign: a message that is not for this connection in its state,
	// ignored.
	Foreign
)

// Dial starts the exchange at time now (Unix nanoseconds) and returns the
// Dialer and the REQ to send.
func Dial(cfg DialConfig, now int64) (*Dialer, []byte, error) {
	if cfg.Tries < 1 || cfg.Timeout <= 0 {
		return nil, nil, fmt.Errorf("cm.Dial: %w: %d tries, timeout %v", ErrDial, cfg.Tries, cfg.Timeout)
	}
	req, err := AppendMAD(nil, Header(cfg.TID, AttrREQ), &cfg.Request)
	if err != nil {
		return nil, nil, fmt.Errorf("cm.Dial: %w", err)
	}
	return &Dialer{cfg: cfg, req: req, tries: 1, at: now}, req, nil
}

// LocalCommID returns the connection's comm ID, the REQ's.
func (d *Dialer) LocalCommID() uint32 { return d.cfg.Request.LocalCommID }

// RemoteCommID, RemoteQPN and StartPSN are the REP's: the peer's comm ID,
// its queue pair, and the first PSN to send it (the one it expects, as the
// Linux CM and librdmacm use it).
func (d *Dialer) RemoteCommID() uint32   { return d.remoteCommID }
func (d *Dialer) RemoteQPN() uint32      { return d.remoteQPN }
func (d *Dialer) StartPSN() rocev2.PSN   { return d.startPSN }
func (d *Dialer) Reason() uint16         { return d.reason }
func (d *Dialer) Connected() bool        { return d.state == connected }
func (d *Dialer) waiting(now int64) bool { return now-d.at < int64(d.cfg.Timeout) }

// Handle takes a CM message the peer sent on this connection (h its
// header) and returns what it means and the MAD to send in answer, if any.
func (d *Dialer) Handle(h MADHeader, m Message) (Event, []byte) {
	switch m := m.(type) {
	case *ConnectReply:
		switch {
		case m.RemoteCommID != d.LocalCommID():
			return Foreign, nil
		case d.state == dialing:
			d.remoteCommID, d.remoteQPN = m.LocalCommID, m.LocalQPN
			d.startPSN = rocev2.PSN(m.StartingPSN & rocev2.PSNMask)
			rtu, err := AppendMAD(nil, Header(h.TransactionID, AttrRTU),
				&ReadyToUse{LocalCommID: d.LocalCommID(), RemoteCommID: d.remoteCommID})
			if err != nil {
				return Foreign, nil // a ReadyToUse always encodes
			}
			d.rtu, d.state = rtu, connected
			return Established, rtu
		case d.state == connected && m.LocalCommID == d.remoteCommID:
			return None, d.rtu // our RTU was lost
		}
	case *Reject:
		if m.RemoteCommID == d.LocalCommID() && d.state == dialing {
			d.reason, d.state = m.Reason, closed
			return Rejected, nil
		}
	case *DisconnectRequest:
		if m.RemoteCommID == d.LocalCommID() {
			drep, err := AppendMAD(nil, Header(h.TransactionID, AttrDREP),
				&DisconnectReply{LocalCommID: d.LocalCommID(), RemoteCommID: d.remoteCommID})
			if err != nil {
				return Foreign, nil // a DisconnectReply always encodes
			}
			if d.state == closed {
				return None, drep
			}
			d.state = closed
			return Closed, drep
		}
	case *DisconnectReply:
		if m.RemoteCommID == d.LocalCommID() {
			return None, nil // the connection was forgotten with the DREQ
		}
	}
	return Foreign, nil
}

// Tick resends the REQ once Timeout passed without an answer, or gives up
// after Tries of them.
func (d *Dialer) Tick(now int64) (Event, []byte) {
	if d.state != dialing || d.waiting(now) {
		return None, nil
	}
	if d.tries >= d.cfg.Tries {
		d.state = closed
		return GaveUp, nil
	}
	d.tries++
	d.at = now
	return None, d.req
}

// Disconnect ends the connection and returns the DREQ to send, with
// transaction ID tid (nil if it was never established).
func (d *Dialer) Disconnect(tid uint64) []byte {
	if d.state != connected {
		d.state = closed
		return nil
	}
	d.state = closed
	dreq, err := AppendMAD(nil, Header(tid, AttrDREQ), &DisconnectRequest{
		LocalCommID: d.LocalCommID(), RemoteCommID: d.remoteCommID, RemoteQPN: d.remoteQPN})
	if err != nil {
		return nil // a DisconnectRequest always encodes
	}
	return dreq
}
