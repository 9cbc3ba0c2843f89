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
// and acts on each Event. As rc's cores do, every method that answers
// appends the MAD to send to the caller's buffer b and returns the extended
// buffer (b itself when there is nothing to send); none allocates when b
// has room for a MAD (MADLen bytes). Times are Unix nanoseconds. A Dialer
// is not safe for concurrent use.
type Dialer struct {
	cfg          DialConfig
	state        dialState
	remoteCommID uint32
	remoteQPN    uint32
	startPSN     rocev2.PSN
	reason       uint16
	rtuTID       uint64 // the REP's transaction ID, which the RTU and its resends carry
	tries        int
	at           int64 // when the last REQ was sent
	// The messages the Dialer sends, encoded from here each time, so that
	// an answer appended to the caller's buffer allocates nothing.
	rtu  ReadyToUse
	drep DisconnectReply
	dreq DisconnectRequest
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
// Dialer and b with the REQ to send appended.
func Dial(b []byte, cfg DialConfig, now int64) (*Dialer, []byte, error) {
	if cfg.Tries < 1 || cfg.Timeout <= 0 {
		return nil, b, fmt.Errorf("cm.Dial: %w: %d tries, timeout %v", ErrDial, cfg.Tries, cfg.Timeout)
	}
	d := &Dialer{cfg: cfg, tries: 1, at: now}
	out, err := d.appendREQ(b)
	if err != nil {
		return nil, b, fmt.Errorf("cm.Dial: %w", err)
	}
	return d, out, nil
}

// appendREQ appends the REQ to b.
func (d *Dialer) appendREQ(b []byte) ([]byte, error) {
	return AppendMAD(b, Header(d.cfg.TID, AttrREQ), &d.cfg.Request)
}

// appendRTU appends the RTU answering the REP to b.
func (d *Dialer) appendRTU(b []byte) []byte {
	d.rtu = ReadyToUse{LocalCommID: d.LocalCommID(), RemoteCommID: d.remoteCommID}
	out, err := AppendMAD(b, Header(d.rtuTID, AttrRTU), &d.rtu)
	if err != nil {
		return b // a ReadyToUse always encodes
	}
	return out
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
// header) and returns what it means and b with the MAD to send in answer,
// if any, appended.
func (d *Dialer) Handle(b []byte, h MADHeader, m Message) (Event, []byte) {
	switch m := m.(type) {
	case *ConnectReply:
		switch {
		case m.RemoteCommID != d.LocalCommID():
			return Foreign, b
		case d.state == dialing:
			d.remoteCommID, d.remoteQPN = m.LocalCommID, m.LocalQPN
			d.startPSN = rocev2.PSN(m.StartingPSN & rocev2.PSNMask)
			d.rtuTID, d.state = h.TransactionID, connected
			return Established, d.appendRTU(b)
		case d.state == connected && m.LocalCommID == d.remoteCommID:
			return None, d.appendRTU(b) // our RTU was lost
		}
	case *Reject:
		if m.RemoteCommID == d.LocalCommID() && d.state == dialing {
			d.reason, d.state = m.Reason, closed
			return Rejected, b
		}
	case *DisconnectRequest:
		if m.RemoteCommID == d.LocalCommID() {
			d.drep = DisconnectReply{LocalCommID: d.LocalCommID(), RemoteCommID: d.remoteCommID}
			out, err := AppendMAD(b, Header(h.TransactionID, AttrDREP), &d.drep)
			if err != nil {
				return Foreign, b // a DisconnectReply always encodes
			}
			if d.state == closed {
				return None, out
			}
			d.state = closed
			return Closed, out
		}
	case *DisconnectReply:
		if m.RemoteCommID == d.LocalCommID() {
			return None, b // the connection was forgotten with the DREQ
		}
	}
	return Foreign, b
}

// Tick resends the REQ once Timeout passed without an answer, appending it
// to b, or gives up after Tries of them.
func (d *Dialer) Tick(b []byte, now int64) (Event, []byte) {
	if d.state != dialing || d.waiting(now) {
		return None, b
	}
	if d.tries >= d.cfg.Tries {
		d.state = closed
		return GaveUp, b
	}
	d.tries++
	d.at = now
	out, err := d.appendREQ(b)
	if err != nil {
		return None, b // the REQ was encoded once already
	}
	return None, out
}

// Disconnect ends the connection and returns b with the DREQ to send, with
// transaction ID tid, appended (b itself if it was never established).
func (d *Dialer) Disconnect(b []byte, tid uint64) []byte {
	if d.state != connected {
		d.state = closed
		return b
	}
	d.state = closed
	d.dreq = DisconnectRequest{LocalCommID: d.LocalCommID(), RemoteCommID: d.remoteCommID, RemoteQPN: d.remoteQPN}
	out, err := AppendMAD(b, Header(tid, AttrDREQ), &d.dreq)
	if err != nil {
		return b // a DisconnectRequest always encodes
	}
	return out
}
