// Package reporter sends DTA reports over UDP: it builds them with package
// dta, batches them (sendmmsg through internal/udpio), numbers them, and
// resends the ones a translator NACKs.
//
// The zero Config is the reliable one (Delivery Confirmed): reports carry
// 32-bit sequence numbers (the S and W flags), the reporter listens for the
// translator's acks and NACKs, resends what it NACKs and keeps within a
// credit of its cumulative acks; every report it cannot confirm applied is
// counted, in Lost or Unconfirmed, and handed to OnLoss. FireAndForget,
// a switch's behaviour, must be asked for by name: its reports are sent
// once and each counts Unconfirmed.
//
// Flow control (docs/DTA-WIRE.md, "Reporter flow control"): Config.Rate
// paces the stream (Send blocks). With Confirmed delivery the pace starts
// low and doubles until a NACK, a NACK halves it, and quiet raises it by a
// quarter; Send also keeps within a credit of the translator's cumulative
// acks. A NACKed report is resent from a copy after a backoff (1 ms,
// doubling per resend). A report the translator refused for good is
// counted in Lost and handed to OnLoss.
//
// A Reporter is the software stand-in for a switch or host that emits
// telemetry: one socket to the translator's report port, and (Confirmed)
// one listening for acks on the ack port (docs/DTA-WIRE.md section 8.6).
package reporter

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/postcard"
)

// Errors of the package.
var (
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("reporter: bad config")
	// ErrClosed: the reporter was closed.
	ErrClosed = errors.New("reporter: closed")
	// ErrNarrowNACKs: NACK resends were asked of 8-bit sequence numbers.
	// Such a number names a different report every 256 reports, so a
	// NACK that arrives after the numbers wrapped resends the wrong one
	// (and the right one is lost). It matches ErrConfig too.
	ErrNarrowNACKs error = &configError{"reporter: bad config: NACK resends need WideSequence: an 8-bit sequence number names another report once 256 more were sent, so a late NACK would resend the wrong one"}
	// ErrRedundancy: a redundancy n outside 1..MaxRedundancy.
	ErrRedundancy = errors.New("reporter: redundancy out of range")
)

// configError is a refused Config that is also ErrConfig.
type configError struct{ msg string }

func (e *configError) Error() string        { return e.msg }
func (e *configError) Is(target error) bool { return target == ErrConfig }

// Delivery is what a reporter learns of its reports' fate.
type Delivery uint8

const (
	// Confirmed, the zero value: 32-bit sequence numbers, acks and NACKs
	// taken on AckPort, NACKed reports resent, at most a credit of
	// reports beyond the translator's cumulative ack in flight. A report
	// the translator does not confirm applied is counted Lost or
	// Unconfirmed.
	Confirmed Delivery = iota
	// FireAndForget sends each report once and listens for nothing, as a
	// switch does: no report is ever confirmed, so each one counts
	// Unconfirmed as it is sent (OnLoss is not called for them).
	// Sequenced and WideSequence number the reports, for a translator
	// that counts gaps.
	FireAndForget
)

func (d Delivery) String() string {
	switch d {
	case Confirmed:
		return "confirmed"
	case FireAndForget:
		return "fire-and-forget"
	}
	return fmt.Sprintf("Delivery(%d)", uint8(d))
}

// MaxRedundancy is the largest n of KeyWrite and KeyIncrement: the wire
// field is 8 bits.
const MaxRedundancy = 255

// WideWindow is how many reports a reporter with WideSequence keeps for
// resending.
const WideWindow = 4096

// sent is a sequenced report kept for resending.
type sent struct {
	seq  uint32
	b    []byte
	lost bool // counted lost: later NACKs for it are ignored
}

// heldReport is a NACKed report's copy.
type heldReport struct {
	b        []byte
	resends  int
	lastSent time.Time
	waitAt   time.Time  // its last resend, while no answer came (zero after a NACK)
	reason   dta.Reason // of its last NACK
	lost     bool       // counted lost: kept (without b) so later NACKs are not
	kw       bool       // a Key-Write report, of key
	key      uint32
}

// kwSlot remembers the newest Key-Write report sent with a key (a direct-
// mapped table: a key whose slot another took is not remembered).
type kwSlot struct {
	key, seq uint32
	valid    bool
}

// kwIndex returns the table slot of key.
func kwIndex(key uint32) uint32 { return (key * 0x9E3779B1) >> (32 - 14) }

// resent is a resend's number and time, for expiring held copies.
type resent struct {
	seq uint32
	at  time.Time
}

// resend is a NACKed report waiting for its backoff to pass.
type resend struct {
	seq    uint32
	due    time.Time
	reason dta.Reason
}

// Pacing parameters.
const (
	// paceWindow is the period over which the send rate is measured and
	// the pace raised when no NACK came: a few round trips on a LAN, and
	// a few socket buffers' worth of reports at a million per second.
	paceWindow = 2 * time.Millisecond
	// credit is how many reports beyond the last acknowledged one a
	// reporter keeps in flight, so that a NACK for any of them comes while
	// the window still holds it.
	credit = WideWindow * 3 / 4
	// heldFor is how long a lost report's marker is kept, so that a late
	// NACK of it is not a second loss.
	heldFor = time.Second
	// resendWait is how long a resend waits for its ack or NACK before it
	// is sent again (the translator acknowledges a resend once its
	// collector did).
	resendWait = 200 * time.Millisecond
	// ackStall is how long Send waits for an ack (the translator sends
	// one at least every 50 ms while reports are pending) before it stops
	// counting on them (counting the reports in flight Unconfirmed).
	ackStall = time.Second
	// probeAfter is how long Send waits for credit before it sends a copy
	// of the last report (probeTail), and again each probeAfter.
	probeAfter = 20 * time.Millisecond
	// ackSilence is how long without any ack (the translator sends one
	// at least every 50 ms while reports are pending) before copies stop:
	// a translator that died may have applied the last copy, and one
	// restarted on its address would apply it again. Credit probes wait
	// for an ack; a resend that waited resendWait is unconfirmed.
	ackSilence = 150 * time.Millisecond
	// listenGap is a pause between two rounds of the ack loop (which
	// wakes at least every millisecond) that says the reporter itself was
	// not running: the acks of that time may still be on their way, so
	// no silence is judged until it has listened ackSilence since.
	listenGap = 20 * time.Millisecond
	// startPace is where a reporter that takes NACKs starts (slow start):
	// the pace doubles each quiet window until the first NACK, then grows
	// by a quarter.
	startPace = 50000.0
	// minPace is the lowest pace backpressure brings a reporter to.
	minPace = 1000.0
	// lingerQuiet is how long Close waits after the last NACK, and
	// lingerMax the most it waits, for NACKs of the reports just sent.
	lingerQuiet = 20 * time.Millisecond
	lingerMax   = time.Second
)

// DefaultBatch is the number of reports sent in one system call.
const DefaultBatch = 64

// Config configures a Reporter. The zero value (with the translator's
// address) is reliable: see Delivery.
type Config struct {
	// Translator is where reports go (default 127.0.0.1:40040).
	Translator netip.AddrPort
	// Local is the address the report socket binds (default: the address
	// the system routes to Translator from, any port). With Confirmed
	// delivery it must be a specific address: the translator sends its
	// acks to it, at AckPort.
	Local netip.AddrPort
	// Delivery is Confirmed (the zero value) or FireAndForget.
	Delivery Delivery
	// Sequenced numbers every report (S flag). With FireAndForget the
	// numbers are 8-bit (0, 1, ..., 255, 0, ...) unless WideSequence is
	// set too. Confirmed delivery always numbers wide: there Sequenced
	// without WideSequence is refused (ErrNarrowNACKs).
	Sequenced bool
	// WideSequence numbers reports with 32-bit sequence numbers (S and W
	// flags) and keeps the last WideWindow for resending. A NACK names its
	// report unambiguously: one that comes after the window moved on (a
	// late or repeated NACK) resends nothing, where an 8-bit number would
	// name whatever report holds it now. Confirmed delivery implies it;
	// with FireAndForget it needs Sequenced.
	WideSequence bool
	// HandleNACKs is implied by Confirmed delivery and refused with
	// FireAndForget; with Sequenced and not WideSequence it is refused
	// (ErrNarrowNACKs).
	//
	// Deprecated: leave it unset; Delivery says whether NACKs are taken.
	HandleNACKs bool
	// AckPort is the port acks and NACKs arrive on (default 40044,
	// dta.AckPort), with Confirmed delivery. Two confirmed reporters on
	// one address need different ones, and translators that know it.
	AckPort uint16
	// MaxResends bounds the resends of one report (default 8), so that a
	// translator that keeps refusing it does not make the two ping-pong.
	// The first waits 1 ms, each next one twice as long.
	MaxResends int
	// Batch is the number of reports sent per system call (default 64).
	Batch int
	// Rate caps the reports sent per second, resends included (0: no
	// cap). Send blocks while the cap is reached, sending what it queued
	// first; a burst of at most Batch (or a millisecond's worth) goes at
	// once.
	Rate float64
	// OnLoss, when not nil, is called for each report the translator
	// NACKed and that is not resent, and each one counted Unconfirmed
	// with Confirmed delivery (not for FireAndForget's): its
	// sequence number, its bytes (nil when the window no longer holds it)
	// and the NACK's reason (Unconfirmed for those). It runs on
	// the reporter's ack goroutine, or in Close, without the reporter's
	// lock.
	OnLoss func(seq uint32, report []byte, reason dta.Reason)
}

// Counters counts what a Reporter did.
type Counters struct {
	// Datagrams counts report datagrams the socket took: each report once,
	// and its resends and probes (Resent, Probes).
	Datagrams uint64
	Resent    uint64 // reports resent after a NACK
	NACKs     uint64 // NACKs received
	Unknown   uint64 // NACKs for a sequence number not in the window or already lost, and malformed acks
	// Foreign counts acks ignored: from an address other than the
	// translator's report socket, or (WideSequence) narrow or of another
	// session than the reporter's (a forgery, or the answer to one).
	Foreign uint64
	GaveUp  uint64 // reports resent MaxResends times, then counted Lost (still NACKed) or Unconfirmed (the last copy unanswered)
	Lost    uint64 // reports NACKed and never resent: given up, left the window before their resend, or pending at Close
	Errors  uint64 // datagrams the socket refused

	Probes uint64 // copies of the last report sent (by Close, or while acks stop moving; wide, with NACKs), to reveal lost last reports
	Acks   uint64 // cumulative acks taken (wide)
	// Unconfirmed counts reports that may or may not have been applied:
	// in flight when the translator's acks stopped for a second, never
	// acknowledged by Close, skipped by a restarted translator's first
	// ack (its span), or NACKed with reason Unconfirmed; they are not
	// resent and go to OnLoss. With FireAndForget, every report sent.
	Unconfirmed uint64
	Backoffs    uint64 // busy NACKs that halved the pace
	Waits       uint64 // times Send blocked for the pace, for credit, or for a resend a window behind
	// ResendAcks counts resends the translator acknowledged on their own;
	// Retimed, resends sent again because neither an ack nor a NACK came
	// within 200 ms.
	ResendAcks, Retimed uint64
	// Superseded counts NACKed Key-Write reports not resent because a
	// newer report of the same key was sent since: a resend would put the
	// older data back over it.
	Superseded uint64
	// Rejected counts reports the translator NACKed with reason Rejected:
	// the collector's instance cannot hold them (a postcard value outside
	// its set, a wrong data size, a list or hop out of range). They are
	// not resent, are counted in Lost too, and go to OnLoss.
	Rejected uint64
	// Moot counts resends dropped before they went out: a copy of the
	// report was acknowledged meanwhile (the translator applied it), or
	// it was counted lost or unconfirmed by another path.
	Moot uint64
}

// Reporter builds and sends reports. Its methods are safe for concurrent use.
type Reporter struct {
	mu      sync.Mutex
	cfg     Config
	conn    *udpio.Conn
	ack     *udpio.Conn
	batch   []udpio.Datagram
	slab    []byte // the batch's bytes
	seq     uint32
	session uint64 // WideSequence: random, the session of every report
	window  []sent // by sequence number modulo its length
	c       Counters
	closed  bool
	wg      sync.WaitGroup
	scratch dta.Report

	// Pacing (see the package comment). pace is the current cap in
	// reports per second, 0 for none.
	pace      float64
	tokens    float64
	lastFill  time.Time
	winStart  time.Time
	winSent   int
	peak      float64 // the highest rate measured over a window
	lastCut   time.Time
	congested bool // a NACK came: the pace grows by a quarter, not double

	// Credit: a translator that acknowledges wide numbers cumulatively
	// (ackMode) has taken every number before acked; Send keeps at most
	// credit reports beyond it.
	ackMode   bool
	acked     uint32
	lastAckAt time.Time     // the last ack, advancing or not (the translator is there)
	movedAt   time.Time     // when acked last moved, or a probe was sent
	loopAt    time.Time     // the ack loop's last round
	awakeAt   time.Time     // when the ack loop last came back from a pause (listenGap)
	ackMoved  chan struct{} // signalled when acked moves: a Send waiting for credit wakes
	// A NACKed report is copied out of the window into held until its
	// resend is acknowledged on its own (Resend) or it is lost: newer
	// reports may take its window slot meanwhile.
	held      map[uint32]*heldReport
	heldLow   uint32    // no report in held, not lost, is older (ackMode: see resendBehind)
	waiting   []resent  // resent numbers by resend time, oldest first: acked, NACKed or resent again after resendWait
	expiry    []resent  // lost numbers by when, oldest first: their markers go after heldFor
	lastEvent time.Time // the last NACK taken or resend sent: Close waits for quiet after it
	resends   []resend  // NACKed reports waiting for their backoff
	losses    []loss    // to hand to OnLoss once the lock is released
	lossCalls sync.Mutex
	kwLast    []kwSlot // sequenced: the newest Key-Write per key (1<<14 slots)
}

type loss struct {
	seq    uint32
	b      []byte
	reason dta.Reason
}

// New checks cfg and opens a reporter's sockets. A Config it refuses
// gives an error that matches ErrConfig (and ErrNarrowNACKs for NACK
// resends of 8-bit numbers).
func New(cfg Config) (*Reporter, error) {
	lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	if !cfg.Translator.IsValid() {
		cfg.Translator = netip.AddrPortFrom(lo, dta.ReportPort)
	}
	if cfg.AckPort == 0 {
		cfg.AckPort = dta.AckPort
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.MaxResends == 0 {
		cfg.MaxResends = 8
	}
	if cfg.MaxResends < 0 || cfg.MaxResends > 16 {
		return nil, fmt.Errorf("%w: %d resends, want 1..16", ErrConfig, cfg.MaxResends)
	}
	if cfg.Batch < 1 || cfg.Batch > 1024 {
		return nil, fmt.Errorf("%w: batch of %d, want 1..1024", ErrConfig, cfg.Batch)
	}
	if cfg.Rate < 0 || cfg.Rate != cfg.Rate {
		return nil, fmt.Errorf("%w: rate %v", ErrConfig, cfg.Rate)
	}
	switch cfg.Delivery {
	case Confirmed:
		if cfg.Sequenced && !cfg.WideSequence {
			return nil, ErrNarrowNACKs
		}
		if cfg.Local.IsValid() && cfg.Local.Addr().IsUnspecified() {
			return nil, fmt.Errorf("%w: confirmed delivery needs a specific local address, not %v: the translator sends acks to it", ErrConfig, cfg.Local)
		}
		cfg.Sequenced, cfg.WideSequence, cfg.HandleNACKs = true, true, true
	case FireAndForget:
		if cfg.HandleNACKs {
			return nil, fmt.Errorf("%w: HandleNACKs with FireAndForget: a fire-and-forget reporter takes no NACKs", ErrConfig)
		}
		if cfg.WideSequence && !cfg.Sequenced {
			return nil, fmt.Errorf("%w: wide sequence numbers need Sequenced", ErrConfig)
		}
	default:
		return nil, fmt.Errorf("%w: delivery %v, want Confirmed or FireAndForget", ErrConfig, cfg.Delivery)
	}
	// Without Local, the system picks the source address its route to
	// the translator uses; the ack socket binds that address.
	var laddr *net.UDPAddr
	if cfg.Local.IsValid() {
		laddr = net.UDPAddrFromAddrPort(cfg.Local)
	}
	uc, err := net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(cfg.Translator))
	if err != nil {
		return nil, fmt.Errorf("reporter: %w", err)
	}
	cfg.Local = unmapped(uc.LocalAddr().(*net.UDPAddr).AddrPort())
	conn, err := udpio.New(uc, cfg.Batch)
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("reporter: %w", err)
	}
	now := time.Now()
	r := &Reporter{cfg: cfg, conn: conn, batch: make([]udpio.Datagram, 0, cfg.Batch),
		pace: cfg.Rate, lastFill: now, winStart: now}
	if cfg.HandleNACKs && (r.pace == 0 || r.pace > startPace) {
		r.pace = startPace
	}
	// A translator that takes wide numbers acknowledges them: credit
	// applies from the first report (and lapses after ackStall without
	// an ack, for one that does not).
	r.ackMode, r.lastAckAt, r.movedAt = cfg.HandleNACKs && cfg.WideSequence, now, now
	r.ackMoved = make(chan struct{}, 1)
	if cfg.Sequenced {
		r.kwLast = make([]kwSlot, 1<<14)
	}
	r.tokens = r.burst()
	if cfg.Sequenced {
		r.window = make([]sent, 256)
		if cfg.WideSequence {
			r.window = make([]sent, WideWindow)
			// Unpredictable, so that a sender that cannot see the
			// reports cannot forge acks the reporter believes nor move
			// its numbers at the translator (docs/DTA-WIRE.md, "Threat
			// model").
			var b [8]byte
			if _, err := rand.Read(b[:]); err != nil {
				return nil, fmt.Errorf("reporter: session: %w", err)
			}
			r.session = binary.BigEndian.Uint64(b[:])
		}
	}
	if cfg.HandleNACKs {
		auc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(cfg.Local.Addr(), cfg.AckPort)))
		if err != nil {
			uc.Close()
			return nil, fmt.Errorf("reporter: ack socket: %w", err)
		}
		_ = auc.SetReadBuffer(4 << 20) // a burst of NACKs must not overflow it
		if r.ack, err = udpio.New(auc, cfg.Batch); err != nil {
			uc.Close()
			auc.Close()
			return nil, fmt.Errorf("reporter: %w", err)
		}
		r.wg.Add(1)
		go r.readAcks()
	}
	return r, nil
}

// Session returns the session the reporter's wide reports carry, chosen
// at random by New (0 without WideSequence).
func (r *Reporter) Session() uint64 { return r.session }

// LocalAddr returns the address reports are sent from.
func (r *Reporter) LocalAddr() netip.AddrPort {
	return r.conn.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort()
}

// Counters returns a snapshot of the counters.
func (r *Reporter) Counters() Counters {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c
}

// Send queues one report, validated and encoded by package dta, and sends
// the batch when it is full. With Sequenced, the reporter sets the S flag and
// the sequence number itself, whatever rep's header says, and keeps the bytes
// for resending. rep's Data may be reused once Send returns.
func (r *Reporter) Send(rep *dta.Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.waitLocked(); err != nil {
		return err
	}
	r.scratch = *rep
	h := &r.scratch.Header
	if r.cfg.Sequenced {
		h.Sequenced, h.Wide, h.Seq, h.Session = true, r.cfg.WideSequence, r.seq, r.session
		if !r.cfg.WideSequence {
			h.Seq &= 0xff
		}
	}
	if cap(r.slab)-len(r.slab) < r.scratch.Len() {
		if err := r.flushLocked(); err != nil {
			return err
		}
		if cap(r.slab) < r.scratch.Len() || cap(r.slab) < 64*1024 {
			r.slab = make([]byte, 0, max(r.scratch.Len(), 64*1024))
		}
	}
	n := len(r.slab)
	b, err := dta.AppendPayload(r.slab, &r.scratch)
	if err != nil {
		return fmt.Errorf("reporter: send: %w", err)
	}
	r.slab = b
	msg := b[n:len(b):len(b)]
	if r.kwLast != nil && r.scratch.Header.Opcode == dta.OpKeyWrite {
		k := r.scratch.KeyWrite.Key
		r.kwLast[kwIndex(k)] = kwSlot{key: k, seq: h.Seq, valid: true}
	}
	if r.cfg.Sequenced {
		w := &r.window[int(h.Seq)%len(r.window)]
		w.seq, w.b, w.lost = h.Seq, append(w.b[:0], msg...), false
		r.seq++
	}
	if r.cfg.Delivery == FireAndForget {
		r.c.Unconfirmed++ // nothing will confirm it
	}
	r.batch = append(r.batch, udpio.Datagram{Buf: msg})
	r.spend()
	if len(r.batch) == cap(r.batch) {
		return r.flushLocked()
	}
	return nil
}

// spend counts one report sent, taking a token when paced.
func (r *Reporter) spend() {
	if r.pace > 0 {
		r.tokens--
	}
	r.winSent++
}

// burst is the most reports the pace lets go at once.
func (r *Reporter) burst() float64 {
	return max(float64(r.cfg.Batch), r.pace/1000)
}

// refill adds the tokens the pace earned since the last call, and at the
// end of each paceWindow measures the rate and raises a pace that no busy
// NACK lowered during it.
func (r *Reporter) refill(now time.Time) {
	if r.pace > 0 {
		r.tokens = min(r.tokens+now.Sub(r.lastFill).Seconds()*r.pace, r.burst())
	}
	r.lastFill = now
	if el := now.Sub(r.winStart); el >= paceWindow {
		rate := float64(r.winSent) / el.Seconds()
		r.peak = max(r.peak, rate)
		r.winStart, r.winSent = now, 0
		if r.pace > 0 && now.Sub(r.lastCut) >= paceWindow {
			if r.congested {
				r.pace *= 1.25
			} else {
				r.pace *= 2
			}
			switch {
			case r.cfg.Rate > 0:
				r.pace = min(r.pace, r.cfg.Rate)
			case r.pace >= 2*r.peak:
				r.pace = 0 // back to no cap
			}
		}
	}
}

// waitLocked blocks, with the lock released, until the pace allows one
// more report, the credit one more, and no NACKed report held for its
// resend would be WideWindow behind the newest when it is sent
// (resendBehind). r.mu is held.
func (r *Reporter) waitLocked() error {
	for {
		if r.closed {
			return ErrClosed
		}
		now := time.Now()
		r.refill(now)
		var d time.Duration
		switch {
		case r.ackMode && r.resendBehind(now):
			// The translator takes a resend once its number is a window
			// behind the newest only while it still owes it (up to two
			// windows, docs/DTA-WIRE.md "Exactly once"); a NACK says the
			// report was not applied, so it must stay resendable: the
			// stream waits for the resend to be acknowledged or lost.
			if err := r.waitAckLocked(); err != nil {
				return err
			}
			continue
		case r.ackMode && r.seq-r.acked >= credit:
			if now.Sub(r.lastAckAt) > ackStall && now.Sub(r.awakeAt) > ackSilence {
				// The translator is gone or stuck: the reports in flight
				// may or may not have been applied. Credit starts again
				// from here, so that a dead translator slows Send down.
				for ; r.acked != r.seq; r.acked++ {
					r.unconfirm(r.acked)
				}
				r.lastAckAt = now
				continue
			}
			// The translator has not caught up: wait for its next ack
			// (a sleep would last a whole timer tick, a millisecond).
			// Acks that stop moving while the translator still talks may
			// mean the last reports never reached it: a copy of the last
			// one shows it their numbers.
			if now.Sub(r.movedAt) > probeAfter && now.Sub(r.lastAckAt) <= ackSilence {
				r.probeLocked()
				r.movedAt = now
			}
			if err := r.waitAckLocked(); err != nil {
				return err
			}
			continue
		case r.pace > 0 && r.tokens < 1:
			d = time.Duration((1 - r.tokens) / r.pace * float64(time.Second))
		default:
			return nil
		}
		r.c.Waits++
		if err := r.flushLocked(); err != nil {
			return err
		}
		r.mu.Unlock()
		time.Sleep(max(d, 20*time.Microsecond))
		r.mu.Lock()
	}
}

// waitAckLocked counts a wait, sends what is queued and waits, with r.mu
// released, for the next ack that moves (at most 10 ms: a sleep would
// last a whole timer tick). r.mu is held.
func (r *Reporter) waitAckLocked() error {
	r.c.Waits++
	if err := r.flushLocked(); err != nil {
		return err
	}
	r.mu.Unlock()
	select {
	case <-r.ackMoved:
	case <-time.After(10 * time.Millisecond):
	}
	r.mu.Lock()
	return nil
}

// resendBehind reports whether a report held for its resend (NACKed, not
// lost) is so old that the next number sent would put it WideWindow
// behind the newest. heldLow bounds the numbers NACKed for a resend from
// below, so the map is scanned only when the oldest may be that far
// behind. A copy last sent more than ackStall ago holds nothing back: it
// was resent before acks came (no answer is awaited), and Close counts it.
// r.mu is held.
func (r *Reporter) resendBehind(now time.Time) bool {
	if len(r.held) == 0 || r.seq-r.heldLow < WideWindow-1 {
		return false
	}
	low := r.seq
	for seq, h := range r.held {
		if !h.lost && int32(seq-low) < 0 && (h.lastSent.IsZero() || now.Sub(h.lastSent) < ackStall) {
			low = seq
		}
	}
	r.heldLow = low
	return r.seq-low >= WideWindow-1
}

// KeyWrite sends a Key-Write report: data under key, n copies
// (1..MaxRedundancy).
func (r *Reporter) KeyWrite(key uint32, data []byte, n int) error {
	if n < 1 || n > MaxRedundancy {
		return fmt.Errorf("reporter: key-write: %w: %d, want 1..%d", ErrRedundancy, n, MaxRedundancy)
	}
	return r.Send(&dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite},
		KeyWrite: dta.KeyWrite{Redundancy: uint8(n), Key: key, Data: data}})
}

// KeyIncrement sends a Key-Increment report: add to key's n counters
// (1..MaxRedundancy).
func (r *Reporter) KeyIncrement(key uint32, add uint64, n int) error {
	if n < 1 || n > MaxRedundancy {
		return fmt.Errorf("reporter: key-increment: %w: %d, want 1..%d", ErrRedundancy, n, MaxRedundancy)
	}
	return r.Send(&dta.Report{Header: dta.Header{Opcode: dta.OpKeyIncrement},
		KeyIncrement: dta.KeyIncrement{Redundancy: uint8(n), Key: key, Counter: add}})
}

// Append sends an Append report: data to list. imm sets the I flag (the
// translator writes the batch with an immediate, waking the collector).
func (r *Reporter) Append(list uint32, data []byte, imm bool) error {
	return r.Send(&dta.Report{Header: dta.Header{Opcode: dta.OpAppend, Immediate: imm},
		Append: dta.Append{ListID: list, Data: data}})
}

// Postcard sends a Postcarding report: hop (1-based) of flow key, whose
// path has pathLen hops, saw value. The arguments come in the order of
// postcard.Cache.Insert, each of its own type. With pathLen 0 (unknown)
// the report carries no path-length byte (the 9-byte sub-header,
// docs/DTA-WIRE.md); the translator then writes the flow once all the
// layout's hops have arrived, or when the flow leaves its cache.
func (r *Reporter) Postcard(key uint32, hop postcard.Hop, pathLen postcard.PathLength, value postcard.Value) error {
	return r.Send(&dta.Report{Header: dta.Header{Opcode: dta.OpPostcard},
		Postcard: dta.Postcard{Key: key, Hop: uint8(hop), Value: uint32(value), PathLength: uint8(pathLen)}})
}

// Flush sends the queued reports.
func (r *Reporter) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	return r.flushLocked()
}

func (r *Reporter) flushLocked() error {
	// A refused datagram (no listener yet: ECONNREFUSED) is counted and
	// skipped; the rest still go.
	refused, err := r.conn.WriteAll(r.batch)
	r.c.Datagrams += uint64(len(r.batch) - refused)
	r.c.Errors += uint64(refused)
	var first error
	if err != nil {
		first = fmt.Errorf("reporter: send: %w", err)
	}
	clear(r.batch)
	r.batch = r.batch[:0]
	r.slab = r.slab[:0]
	return first
}

// Close sends what is queued; with Confirmed delivery it sends the last
// report twice more (see probeTail) and keeps answering NACKs
// until 20 ms passed without a NACK or a resend and none is pending (at
// most a second);
// what is still pending then is lost, and what was never acknowledged
// unconfirmed (counted, and handed to OnLoss). It then stops listening and
// closes the sockets.
func (r *Reporter) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	err := r.flushLocked()
	r.lastEvent = time.Now() // the reports just sent may yet be NACKed
	r.mu.Unlock()
	if r.ack != nil && r.cfg.WideSequence {
		r.probeTail()
	}
	if r.ack != nil {
		for end := time.Now().Add(lingerMax); time.Now().Before(end); time.Sleep(time.Millisecond) {
			r.mu.Lock()
			quiet := len(r.resends) == 0 && time.Since(r.lastEvent) >= lingerQuiet && (!r.ackMode || r.acked == r.seq && r.resentSettled())
			r.mu.Unlock()
			if quiet {
				break
			}
		}
	}
	r.mu.Lock()
	r.closed = true
	for _, q := range r.resends {
		r.lose(q.seq, q.reason)
	}
	r.resends = nil
	// Never acknowledged, in credit mode: the translator may or may not
	// have applied them.
	for ; r.ackMode && r.acked != r.seq; r.acked++ {
		r.unconfirm(r.acked)
	}
	if r.ackMode {
		for seq, h := range r.held {
			if !h.lost {
				r.unconfirm(seq)
			}
		}
	}
	r.mu.Unlock()
	r.deliverLosses()
	if r.ack != nil {
		r.ack.UDPConn().Close()
	}
	r.wg.Wait()
	r.conn.UDPConn().Close()
	return err
}

// probeTail sends the last report again, twice, 5 ms apart: a translator
// that applied it drops the copies as duplicates, and one that lost the
// last reports learns from the copy's number which ones it never got, and
// NACKs them (reason Missing). No later report would have shown it.
func (r *Reporter) probeTail() {
	for range 2 {
		r.mu.Lock()
		if r.probeLocked() {
			_ = r.flushLocked()
		}
		r.lastEvent = time.Now()
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

// probeLocked queues a copy of the last report sent, if the window still
// holds it, and reports whether it did. r.mu is held.
func (r *Reporter) probeLocked() bool {
	if r.seq == 0 {
		return false
	}
	w := &r.window[int(r.seq-1)%len(r.window)]
	if w.b == nil || w.seq != r.seq-1 || w.lost {
		return false
	}
	r.batch = append(r.batch, udpio.Datagram{Buf: w.b})
	r.c.Probes++
	return true
}

// lose counts the report with seq as lost and queues it for OnLoss. r.mu
// is held.
func (r *Reporter) lose(seq uint32, reason dta.Reason) {
	h := r.held[seq]
	if h == nil {
		h = &heldReport{}
		if r.held == nil {
			r.held = make(map[uint32]*heldReport)
		}
		r.held[seq] = h
	}
	if h.lost {
		return
	}
	b := h.b
	if w := &r.window[int(seq)%len(r.window)]; w.b != nil && w.seq == seq {
		w.lost = true
		if b == nil {
			b = w.b
		}
	}
	r.markLost(seq, h)
	r.c.Lost++
	r.queueLoss(seq, b, reason)
}

// markLost turns h, seq's held copy, into a marker that stays heldFor, so
// that a late NACK of seq is not a second loss. r.mu is held.
func (r *Reporter) markLost(seq uint32, h *heldReport) {
	h.b, h.lost, h.lastSent = nil, true, time.Now()
	r.expiry = append(r.expiry, resent{seq: seq, at: h.lastSent})
}

// queueLoss queues seq, whose bytes are b, for OnLoss. r.mu is held.
func (r *Reporter) queueLoss(seq uint32, b []byte, reason dta.Reason) {
	if r.cfg.OnLoss != nil {
		r.losses = append(r.losses, loss{seq: seq, b: append([]byte(nil), b...), reason: reason})
	}
}

// unconfirm counts the report with seq as unconfirmed (it may or may not
// have been applied) and queues it for OnLoss with reason Unconfirmed,
// unless it was lost or unconfirmed before. r.mu is held.
func (r *Reporter) unconfirm(seq uint32) {
	h := r.held[seq]
	if h != nil && h.lost {
		return
	}
	w := &r.window[int(seq)%len(r.window)]
	inWindow := w.b != nil && w.seq == seq && !w.lost
	if h == nil && !inWindow {
		return
	}
	b := w.b
	if h != nil {
		b = h.b
		r.markLost(seq, h)
	}
	if inWindow {
		w.lost = true
	}
	r.c.Unconfirmed++
	r.queueLoss(seq, b, dta.ReasonUnconfirmed)
}

// deliverLosses calls OnLoss for the losses queued, without r.mu, one
// caller at a time.
func (r *Reporter) deliverLosses() {
	r.lossCalls.Lock()
	defer r.lossCalls.Unlock()
	r.mu.Lock()
	ls := r.losses
	r.losses = nil
	r.mu.Unlock()
	for _, l := range ls {
		r.cfg.OnLoss(l.seq, l.b, l.reason)
	}
}

// readAcks resends the reports the translator NACKs.
func (r *Reporter) readAcks() {
	defer r.wg.Done()
	_ = r.ack.ReadLoop(udpio.Buffers(16, 64), time.Millisecond, func(ms []udpio.Datagram, now time.Time) bool {
		more := r.handleAcks(ms, now)
		r.deliverLosses()
		return more
	})
}

// handleAcks takes a batch of acks (empty on an idle tick), queues the
// reports they NACK for resending and resends those whose backoff passed,
// as the pace allows; it reports false once the reporter is closed.
func (r *Reporter) handleAcks(ms []udpio.Datagram, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	if now.Sub(r.loopAt) > listenGap {
		r.awakeAt = now
	}
	r.loopAt = now
	for i := range ms {
		if unmapped(ms[i].Addr) != r.cfg.Translator {
			r.c.Foreign++ // only the translator NACKs: a forgery or a stray
			continue
		}
		a, err := dta.ParseAck(ms[i].Buf)
		if err != nil {
			r.c.Unknown++
			continue
		}
		if r.cfg.WideSequence && (!a.Wide || a.Session != r.session) {
			// Not about this reporter's reports: not believed, and no
			// sign that the translator is there.
			r.c.Foreign++
			continue
		}
		if !a.NACK {
			if a.Wide && r.cfg.WideSequence && a.Resend {
				// A resend applied: its copy is done.
				if h := r.held[a.Seq]; h != nil && !h.lost {
					delete(r.held, a.Seq)
					r.c.ResendAcks++
					select { // a Send waiting for it (resendBehind) wakes
					case r.ackMoved <- struct{}{}:
					default:
					}
				}
				r.lastAckAt = now
				continue
			}
			if a.Wide && r.cfg.WideSequence {
				r.c.Acks++
				// Numbers before r.seq only: a forged or stale ack
				// cannot give credit for reports not sent.
				if next := a.Seq + 1; int32(next-r.acked) > 0 && int32(r.seq-next) >= 0 {
					// Numbers before the span never reached this
					// translator (it started after them): unconfirmed.
					if a.Span != 0 {
						for from := next - uint32(a.Span); int32(from-r.acked) > 0; r.acked++ {
							r.unconfirm(r.acked)
						}
					}
					r.acked, r.movedAt = next, now
					select {
					case r.ackMoved <- struct{}{}:
					default:
					}
				}
				r.ackMode, r.lastAckAt = true, now
			}
			continue
		}
		r.c.NACKs++
		r.lastEvent = now
		if h := r.held[a.Seq]; h != nil {
			h.waitAt = time.Time{} // answered
		}
		if a.Reason == dta.ReasonUnconfirmed && a.Wide && r.cfg.WideSequence {
			// Taken, but its collector's acknowledgement never came: a
			// resend could apply it twice.
			r.unconfirm(a.Seq)
			continue
		}
		if a.Reason == dta.ReasonRejected && a.Wide && r.cfg.WideSequence {
			// Refused for good: a resend would be refused the same way.
			if h := r.held[a.Seq]; h == nil || !h.lost {
				r.c.Rejected++
			}
			r.lose(a.Seq, a.Reason)
			continue
		}
		r.slowDown(now)
		h := r.held[a.Seq]
		if h == nil && a.Wide == r.cfg.WideSequence {
			if w := &r.window[int(a.Seq)%len(r.window)]; w.b != nil && w.seq == a.Seq && !w.lost {
				h = &heldReport{b: append([]byte(nil), w.b...)}
				if rep, err := dta.ParseReport(h.b); err == nil && rep.Header.Opcode == dta.OpKeyWrite {
					h.kw, h.key = true, rep.KeyWrite.Key
				}
				if r.held == nil {
					r.held = make(map[uint32]*heldReport)
				}
				r.held[a.Seq] = h
			}
		}
		switch {
		case h == nil || h.lost:
			r.c.Unknown++ // never sent, no longer in the window, or already lost
			// Sent, and gone from the window: lost, unless a cumulative
			// ack or ackStall passed it (acknowledged, or counted
			// unconfirmed already: a restarted translator NACKs as
			// missing numbers it never saw).
			if r.cfg.WideSequence && a.Wide && r.seq-a.Seq-1 < 1<<31 && !(r.ackMode && int32(a.Seq-r.acked) < 0) {
				r.lose(a.Seq, a.Reason)
			}
		case h.resends >= r.cfg.MaxResends:
			r.c.GaveUp++
			r.lose(a.Seq, a.Reason)
		default:
			h.resends++
			h.reason = a.Reason
			if int32(a.Seq-r.heldLow) < 0 {
				r.heldLow = a.Seq
			}
			r.resends = append(r.resends, resend{seq: a.Seq, due: now.Add(time.Millisecond << (h.resends - 1)), reason: a.Reason})
		}
	}
	r.checkResent(now)
	r.resendDue(now)
	for len(r.expiry) > 0 && now.Sub(r.expiry[0].at) > heldFor {
		e := r.expiry[0]
		r.expiry = r.expiry[1:]
		if h := r.held[e.seq]; h != nil && h.lastSent.Equal(e.at) {
			delete(r.held, e.seq)
		}
	}
	return true
}

// resentSettled reports whether every resend is acknowledged (or lost).
// r.mu is held.
func (r *Reporter) resentSettled() bool {
	for _, h := range r.held {
		if !h.lost {
			return false
		}
	}
	return true
}

// checkResent sends again the resends that waited resendWait without an
// ack or a NACK (the resend, or its answer, was lost on the way), up to
// MaxResends times in all. r.mu is held.
func (r *Reporter) checkResent(now time.Time) {
	if now.Sub(r.lastAckAt) > ackSilence && now.Sub(r.awakeAt) <= ackSilence {
		// The reporter itself was paused (descheduled, a machine under
		// load) for part of the silence: the translator's answers may
		// come now. Neither sent again nor unconfirmed until it has
		// listened ackSilence.
		return
	}
	for len(r.waiting) > 0 && now.Sub(r.waiting[0].at) > resendWait {
		e := r.waiting[0]
		r.waiting = r.waiting[1:]
		h := r.held[e.seq]
		if h == nil || h.lost || !h.waitAt.Equal(e.at) {
			continue // acknowledged, NACKed, lost, or resent since
		}
		switch {
		case r.seq-e.seq >= WideWindow || now.Sub(r.lastAckAt) > ackSilence:
			// The translator no longer tells a copy of it from a new
			// report, or is silent (it may have died, and a restarted one
			// cannot tell), and the last copy may have arrived: sent
			// again, it could be applied twice. (A NACKed copy was not
			// applied, so a resend after a NACK is safe however old.)
			r.unconfirm(e.seq)
		case h.resends >= r.cfg.MaxResends:
			// Its last copy went unanswered and may have been applied:
			// unconfirmed, not lost.
			r.c.GaveUp++
			r.unconfirm(e.seq)
		default:
			h.resends++
			r.c.Retimed++
			r.resends = append(r.resends, resend{seq: e.seq, due: now, reason: h.reason})
		}
	}
}

// slowDown halves the pace for a NACK, once per paceWindow: the
// translator refused a report, so it or its collector cannot keep up. A
// reporter without a pace starts from the rate it measured. r.mu is held.
func (r *Reporter) slowDown(now time.Time) {
	if now.Sub(r.lastCut) < paceWindow {
		return
	}
	r.refill(now)
	base := r.pace
	if base == 0 {
		base = r.peak
		if el := now.Sub(r.winStart); el > 0 {
			base = max(base, float64(r.winSent)/el.Seconds())
		}
	}
	r.pace = max(base/2, minPace)
	if r.cfg.Rate > 0 {
		r.pace = min(r.pace, r.cfg.Rate)
	}
	r.tokens = max(0, min(r.tokens, r.burst()))
	r.lastCut, r.congested = now, true
	r.c.Backoffs++
}

// resendDue sends the NACKed reports whose backoff has passed, as the pace
// allows, and flushes. A report whose slot a newer one took meanwhile is
// lost. r.mu is held.
func (r *Reporter) resendDue(now time.Time) {
	r.refill(now)
	keep := r.resends[:0]
	for _, q := range r.resends {
		if q.due.After(now) || (r.pace > 0 && r.tokens < 1) {
			keep = append(keep, q)
			continue
		}
		h := r.held[q.seq]
		if h == nil || h.lost {
			r.c.Moot++ // acknowledged or lost meanwhile
			continue
		}
		if h.kw {
			if e := r.kwLast[kwIndex(h.key)]; e.valid && e.key == h.key && e.seq != q.seq {
				r.c.Superseded++
				delete(r.held, q.seq)
				continue
			}
		}
		r.c.Resent++
		r.lastEvent = now // its NACK, if any, is yet to come
		h.lastSent = now
		if r.ackMode {
			// Wide numbers: the translator acknowledges the resend alone
			// (R), or it is sent again. Narrow ones have no such ack:
			// sent again, one applied would be applied twice.
			h.waitAt = now
			r.waiting = append(r.waiting, resent{seq: q.seq, at: now})
		}
		r.spend()
		r.batch = append(r.batch, udpio.Datagram{Buf: h.b})
		if len(r.batch) == cap(r.batch) {
			_ = r.flushLocked()
		}
	}
	clear(r.resends[len(keep):])
	r.resends = keep
	if len(r.batch) > 0 {
		_ = r.flushLocked()
	}
}

func unmapped(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}
