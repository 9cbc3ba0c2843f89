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
	"github.com/dtakit/dtakit/internal/clock"
	"github.com/dtakit/dtakit/internal/exactly"
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

// WideWindow is how many reports (4096) a reporter with WideSequence
// keeps for resending: the translator's window of numbers per source.
const WideWindow = exactly.Window

// kwSlot remembers the newest Key-Write report sent with a key (a direct-
// mapped table: a key whose slot another took is not remembered).
type kwSlot struct {
	key, seq uint32
	valid    bool
}

// kwIndex returns the table slot of key.
func kwIndex(key uint32) uint32 { return (key * 0x9E3779B1) >> (32 - 14) }

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
	// lingerHeard is the most Close waits while the translator's acks
	// still come (it sends one every 50 ms while reports are pending)
	// without every report acknowledged: a collector backing off its
	// retransmissions, or daemons on a machine under load, can take more
	// than lingerMax to acknowledge reports the translator took. Waiting
	// sends nothing new, so it cannot apply a report twice.
	lingerHeard = 10 * time.Second
)

// maxBatch is the most reports Config.Batch may ask for in one system call.
const maxBatch = 1024

// DefaultBatch is the number of reports sent in one system call: with a
// mix of four primitives, runs of about 64 equal datagrams, each one
// message for the kernel (see Send).
const DefaultBatch = 256

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
	// MaxResends bounds the resends of one report after NACKs (default
	// 8), so that a translator that keeps refusing it does not make the
	// two ping-pong. The first waits 1 ms, each next one twice as long.
	// Busy NACKs are flow control and spend none: a report NACKed busy
	// is resent, at most 128 ms apart, until the translator takes it or
	// Close counts it lost.
	// The copies sent because a resend drew no answer in 200 ms (probes:
	// the translator may hold the report) are bounded apart, MaxResends
	// since the last NACK.
	MaxResends int
	// Batch is the number of reports sent per system call (default
	// DefaultBatch, at most 1024). Reports wait in the batch until it is
	// full, Flush, Close, or Send waits for the pace or credit.
	Batch int
	// Rate caps the reports sent per second, resends included (0: no
	// cap). Send blocks while the cap is reached, sending what it queued
	// first; a burst of at most Batch (or a millisecond's worth) goes at
	// once.
	Rate float64
	// OnLoss, when not nil, is called for each report the translator
	// NACKed and that is not resent, and each one counted Unconfirmed
	// with Confirmed delivery (not for FireAndForget's): its place in
	// the order of Send calls (the first report sent is 0: the numbers
	// on the wire are given in the order a batch leaves, grouped by
	// opcode, see Send; exact while a copy is held for its resend or it
	// is among the last 65536 sent), its bytes (nil
	// when the window no longer holds it) and the NACK's reason
	// (Unconfirmed for those). It runs on
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
	GaveUp  uint64 // reports resent MaxResends times, then counted Lost (NACKed again, not busy), or probed MaxResends times since the last NACK, then Unconfirmed (the last copy unanswered)
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

// Reporter builds and sends reports: a pacer, a credit window and a store
// of copies (exactly.Store) wired to two sockets. Its methods are safe for
// concurrent use.
type Reporter struct {
	mu    sync.Mutex
	cfg   Config
	conn  *udpio.Conn
	ack   *udpio.Conn
	batch []udpio.Datagram // to send as they are: resends, probes, numbered reports
	// fresh holds the reports Send queued, unnumbered: the flush numbers
	// them in the order they go (queueFresh).
	fresh   []fresh
	slab    []byte // the queued reports' bytes
	seq     uint32 // the number of the next report Send takes
	session uint64 // WideSequence: random, the session of every report
	c       Counters
	closed  bool
	wg      sync.WaitGroup
	scratch dta.Report

	pace   pacer
	credit creditWindow
	// store keeps the reports sent (sequenced) and the NACKed ones until
	// their resend is acknowledged or they are lost.
	store     *exactly.Store
	resends   []resend  // NACKed reports waiting for their backoff
	lastEvent time.Time // the last NACK taken or resend sent: Close waits for quiet after it
	losses    []loss    // to hand to OnLoss once the lock is released
	lossCalls sync.Mutex
	kwLast    []kwSlot // sequenced: the newest Key-Write per key (1<<14 slots)
	// sendOrder holds, for the last 1<<16 wide numbers sent, the place of
	// the report in the order of Send less its number (less than a batch
	// apart), for OnLoss.
	sendOrder []int16
}

// fresh is a report Send queued: its bytes (numbered 0) and its header,
// encoded again with its number when it goes.
type fresh struct {
	h   dta.Header
	key uint32 // a Key-Write's key
	b   []byte
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
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
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
	now := time.Now()
	// A flush sends the queued reports after the resends and probes
	// queued before them: up to two batches in one call.
	r := &Reporter{cfg: cfg, batch: make([]udpio.Datagram, 0, 2*cfg.Batch), fresh: make([]fresh, 0, cfg.Batch),
		pace:   newPacer(cfg.Rate, cfg.Batch, cfg.HandleNACKs, now),
		credit: newCreditWindow(cfg.HandleNACKs && cfg.WideSequence, now),
		store:  exactly.NewStore(1),
	}
	if r.conn, err = udpio.New(uc, min(2*cfg.Batch, maxBatch)); err == nil {
		err = r.number()
	}
	if err == nil && cfg.HandleNACKs {
		err = r.listen()
	}
	if err != nil {
		uc.Close()
		return nil, err
	}
	return r, nil
}

// normalize fills in cfg's defaults and checks it.
func (cfg Config) normalize() (Config, error) {
	if !cfg.Translator.IsValid() {
		cfg.Translator = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), dta.ReportPort)
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
	switch {
	case cfg.MaxResends < 0 || cfg.MaxResends > 16:
		return cfg, fmt.Errorf("%w: %d resends, want 1..16", ErrConfig, cfg.MaxResends)
	case cfg.Batch < 1 || cfg.Batch > maxBatch:
		return cfg, fmt.Errorf("%w: batch of %d, want 1..%d", ErrConfig, cfg.Batch, maxBatch)
	case cfg.Rate < 0 || cfg.Rate != cfg.Rate:
		return cfg, fmt.Errorf("%w: rate %v", ErrConfig, cfg.Rate)
	}
	switch cfg.Delivery {
	case Confirmed:
		if cfg.Sequenced && !cfg.WideSequence {
			return cfg, ErrNarrowNACKs
		}
		if cfg.Local.IsValid() && cfg.Local.Addr().IsUnspecified() {
			return cfg, fmt.Errorf("%w: confirmed delivery needs a specific local address, not %v: the translator sends acks to it", ErrConfig, cfg.Local)
		}
		cfg.Sequenced, cfg.WideSequence, cfg.HandleNACKs = true, true, true
	case FireAndForget:
		if cfg.HandleNACKs {
			return cfg, fmt.Errorf("%w: HandleNACKs with FireAndForget: a fire-and-forget reporter takes no NACKs", ErrConfig)
		}
		if cfg.WideSequence && !cfg.Sequenced {
			return cfg, fmt.Errorf("%w: wide sequence numbers need Sequenced", ErrConfig)
		}
	default:
		return cfg, fmt.Errorf("%w: delivery %v, want Confirmed or FireAndForget", ErrConfig, cfg.Delivery)
	}
	return cfg, nil
}

// number sets up what numbering needs: the store of the last reports
// sent (256 of 8-bit numbers, WideWindow of wide ones), the newest
// Key-Write per key, and a wide reporter's session.
func (r *Reporter) number() error {
	if !r.cfg.Sequenced {
		return nil
	}
	r.kwLast = make([]kwSlot, 1<<14)
	if !r.cfg.WideSequence {
		r.store = exactly.NewStore(256)
		return nil
	}
	r.store = exactly.NewStore(WideWindow)
	r.sendOrder = make([]int16, 1<<16)
	// Unpredictable, so that a sender that cannot see the reports cannot
	// forge acks the reporter believes nor move its numbers at the
	// translator (docs/DTA-WIRE.md, "Threat model").
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("reporter: session: %w", err)
	}
	r.session = binary.BigEndian.Uint64(b[:])
	return nil
}

// listen opens the ack socket and starts the ack loop.
func (r *Reporter) listen() error {
	auc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(r.cfg.Local.Addr(), r.cfg.AckPort)))
	if err != nil {
		return fmt.Errorf("reporter: ack socket: %w", err)
	}
	_ = auc.SetReadBuffer(4 << 20) // a burst of NACKs must not overflow it
	if r.ack, err = udpio.New(auc, r.cfg.Batch); err != nil {
		auc.Close()
		return fmt.Errorf("reporter: %w", err)
	}
	r.wg.Add(1)
	go r.readAcks()
	return nil
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
//
// With Sequenced (so by default) a batch goes grouped by opcode
// (queueFresh): reports of one primitive keep the order of their Send
// calls, those of different primitives may not. Sequence numbers follow
// the order on the wire.
func (r *Reporter) Send(rep *dta.Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.waitLocked(); err != nil {
		return err
	}
	r.scratch = *rep
	h := &r.scratch.Header
	if r.cfg.Sequenced {
		// Numbered when it goes (queueFresh); the number's length does
		// not depend on its value.
		h.Sequenced, h.Wide, h.Seq, h.Session = true, r.cfg.WideSequence, 0, r.session
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
	// Appended zero, then set: a literal built on the stack and copied in
	// would be loaded just after its stores, and stall.
	r.fresh = append(r.fresh, fresh{})
	f := &r.fresh[len(r.fresh)-1]
	f.h, f.key, f.b = *h, r.scratch.KeyWrite.Key, b[n:len(b):len(b)]
	if r.cfg.Sequenced {
		r.seq++
	}
	if r.cfg.Delivery == FireAndForget {
		r.c.Unconfirmed++ // nothing will confirm it
	}
	r.pace.spend()
	if len(r.fresh) == r.cfg.Batch {
		// The pace measures the rate it may fall back to once per batch
		// at least, when no cap makes waitLocked read the clock.
		r.pace.refill(time.Now())
		return r.flushLocked()
	}
	return nil
}

// queueFresh numbers the reports Send queued and appends them to the
// batch grouped by opcode, the groups in the order of their first report:
// the reports of a primitive are of one size, usually, and the kernel
// sends a run of equal datagrams as one message (UDP GSO, internal/udpio),
// where a mixed stream costs it one message per change of size. Within a
// group, Send's order is kept, so a key's, list's or flow's reports keep
// theirs. Each is numbered in the order it goes, so the translator sees
// the numbers ascending, as it would without grouping (a number that came
// after a higher one would be NACKed missing), kept for resending, and
// remembered as its key's newest Key-Write. A reporter that does not
// number its reports (not Sequenced) sends them in the order of Send: the
// caller's headers go as they are, and may carry numbers of its own (a
// capture replayed). r.mu is held.
func (r *Reporter) queueFresh() {
	base := r.seq - uint32(len(r.fresh))
	seq := base
	for i := range r.fresh {
		if r.fresh[i].b == nil {
			continue // in an earlier group
		}
		op := r.fresh[i].h.Opcode
		for j := i; j < len(r.fresh); j++ {
			f := &r.fresh[j]
			if f.b == nil || f.h.Opcode != op && r.cfg.Sequenced {
				continue
			}
			if r.cfg.Sequenced {
				f.h.Seq = seq
				if !r.cfg.WideSequence {
					f.h.Seq &= 0xff
				}
				dta.AppendHeader(f.b[:0], &f.h) // the header again, in place, numbered
				r.store.Put(f.h.Seq, f.b)
				if r.sendOrder != nil {
					r.sendOrder[seq&0xffff] = int16(int32(base + uint32(j) - seq))
				}
				if r.kwLast != nil && op == dta.OpKeyWrite {
					r.kwLast[kwIndex(f.key)] = kwSlot{key: f.key, seq: f.h.Seq, valid: true}
				}
				seq++
			}
			// Appended zero, then set: a Datagram built on the stack and
			// copied in would be loaded just after its stores, and stall.
			r.batch = append(r.batch, udpio.Datagram{})
			r.batch[len(r.batch)-1].Buf = f.b
			f.b = nil
		}
	}
	clear(r.fresh)
	r.fresh = r.fresh[:0]
}

// waitLocked blocks, with the lock released, until the pace allows one
// more report, the credit one more, and no NACKed report held for its
// resend would be WideWindow behind the newest when it is sent
// (exactly.Store.Behind). r.mu is held.
func (r *Reporter) waitLocked() error {
	for {
		if r.closed {
			return ErrClosed
		}
		if r.pace.rate == 0 && !r.credit.full(r.seq) && !r.store.MayBeBehind(r.seq) {
			return nil // nothing binds: no clock read per report
		}
		now := time.Now()
		r.pace.refill(now)
		switch {
		case r.credit.on && r.store.Behind(r.seq, clock.Of(now), ackStall):
			// The translator takes a resend once its number is a window
			// behind the newest only while it still owes it (up to two
			// windows, docs/DTA-WIRE.md "Exactly once"); a NACK says the
			// report was not applied, so it must stay resendable: the
			// stream waits for the resend to be acknowledged or lost.
			// A copy last sent more than ackStall ago holds nothing
			// back: it was resent before acks came, and Close counts it.
			if err := r.waitAckLocked(); err != nil {
				return err
			}
		case r.credit.full(r.seq):
			r.credit.waiting(now)
			if r.credit.stalled(now) {
				// The translator is gone or stuck: the reports in flight
				// may or may not have been applied. Credit starts again
				// from here, so that a dead translator slows Send down.
				r.queueFresh() // numbered and kept, so that each is counted
				for ; r.credit.acked != r.seq; r.credit.acked++ {
					r.unconfirm(r.credit.acked)
				}
				r.credit.restart(now)
				continue
			}
			// The translator has not caught up: wait for its next ack
			// (a sleep would last a whole timer tick, a millisecond).
			// Acks that stop moving while the translator still talks may
			// mean the last reports never reached it: a copy of the last
			// one shows it their numbers.
			if r.credit.probeDue(now) {
				r.probeLocked()
			}
			if err := r.waitAckLocked(); err != nil {
				return err
			}
		case r.pace.limited():
			d := r.pace.wait()
			r.c.Waits++
			if err := r.flushLocked(); err != nil {
				return err
			}
			r.mu.Unlock()
			time.Sleep(max(d, 20*time.Microsecond))
			r.mu.Lock()
		default:
			return nil
		}
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
	case <-r.credit.moved:
	case <-time.After(10 * time.Millisecond):
	}
	r.mu.Lock()
	return nil
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
	r.queueFresh()
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
// most a second, or up to ten while the translator's acks still come and
// reports wait for theirs);
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
		start := time.Now()
		for end := start.Add(lingerMax); ; time.Sleep(time.Millisecond) {
			now := time.Now()
			r.mu.Lock()
			quiet := len(r.resends) == 0 && now.Sub(r.lastEvent) >= lingerQuiet && (!r.credit.on || r.credit.acked == r.seq && r.store.Settled())
			heard := r.credit.on && !r.credit.silent(now)
			r.mu.Unlock()
			if quiet || now.After(end) && (!heard || now.Sub(start) > lingerHeard) {
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
	for ; r.credit.on && r.credit.acked != r.seq; r.credit.acked++ {
		r.unconfirm(r.credit.acked)
	}
	if r.credit.on {
		for _, seq := range r.store.Unsettled() {
			r.unconfirm(seq)
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
// NACKs them (reason Missing). No later report would have shown it. Each
// copy waits first, up to the 5 ms, for an ack of every report sent: a
// translator that names them all has seen them all, and the copies would
// tell it nothing.
func (r *Reporter) probeTail() {
	for range 2 {
		if r.awaitAllAcked(probeTailGap) {
			return
		}
		r.mu.Lock()
		if r.probeLocked() {
			_ = r.flushLocked()
		}
		r.lastEvent = time.Now()
		r.mu.Unlock()
	}
}

// probeTailGap is how long Close waits before each copy of the last report.
const probeTailGap = 5 * time.Millisecond

// awaitAllAcked waits up to d for a cumulative ack of every report sent,
// and reports whether it came.
func (r *Reporter) awaitAllAcked(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		r.mu.Lock()
		done := r.credit.on && r.credit.acked == r.seq
		r.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-r.credit.moved:
		case <-t.C:
			return false
		}
	}
}

// probeLocked queues a copy of the last report sent, if the store still
// holds it, and reports whether it did. r.mu is held.
func (r *Reporter) probeLocked() bool {
	r.queueFresh() // the last report sent is the last one queued
	if r.seq == 0 {
		return false
	}
	b := r.store.Sent(r.seq - 1)
	if b == nil {
		return false
	}
	r.batch = append(r.batch, udpio.Datagram{Buf: b})
	r.c.Probes++
	return true
}

// lose counts the report with seq as lost and queues it for OnLoss. r.mu
// is held.
func (r *Reporter) lose(seq uint32, reason dta.Reason) {
	order := r.orderOf(seq)
	if b, first := r.store.Lose(seq, clock.Now()); first {
		r.c.Lost++
		r.queueLoss(order, b, reason)
	}
}

// orderOf returns the place in the order of Send of the report numbered
// seq: its copy's, while one is held for a resend (however long ago it was
// sent), else from sendOrder. r.mu is held.
func (r *Reporter) orderOf(seq uint32) uint32 {
	if h := r.store.Held(seq); h != nil && !h.Lost {
		return h.Order
	}
	return r.sentOrder(seq)
}

// sentOrder returns the place in the order of Send of the report numbered
// seq, one of the last 1<<16 sent. r.mu is held.
func (r *Reporter) sentOrder(seq uint32) uint32 {
	if r.sendOrder == nil {
		return seq
	}
	return seq + uint32(int32(r.sendOrder[seq&0xffff]))
}

// queueLoss queues the report whose place in the order of Send is order,
// and whose bytes are b, for OnLoss. r.mu is held.
func (r *Reporter) queueLoss(order uint32, b []byte, reason dta.Reason) {
	if r.cfg.OnLoss != nil {
		r.losses = append(r.losses, loss{seq: order, b: append([]byte(nil), b...), reason: reason})
	}
}

// unconfirm counts the report with seq as unconfirmed (it may or may not
// have been applied) and queues it for OnLoss with reason Unconfirmed,
// unless it was lost or unconfirmed before. r.mu is held.
func (r *Reporter) unconfirm(seq uint32) {
	order := r.orderOf(seq)
	if b, ok := r.store.Unconfirm(seq, clock.Now()); ok {
		r.c.Unconfirmed++
		r.queueLoss(order, b, dta.ReasonUnconfirmed)
	}
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

func unmapped(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}
