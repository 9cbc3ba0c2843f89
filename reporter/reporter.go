// Package reporter sends DTA reports over UDP: it builds them with package
// dta, batches them (sendmmsg through internal/udpio), and, when asked,
// numbers them (the S flag) and resends the ones a translator NACKs.
//
// Flow control: Config.Rate paces the stream (Send blocks), and with
// HandleNACKs a NACK saying the translator is busy halves the pace, which
// then grows back by a quarter every 10 ms without one; the NACKed report is
// resent after a backoff (1 ms, doubling per resend). A report the
// translator refused for good is counted in Lost and handed to OnLoss.
//
// A Reporter is the software stand-in for a switch or host that emits
// telemetry: one socket to the translator's report port, and optionally one
// listening for NACKs on the ack port (docs/DTA-WIRE.md section 8.6).
package reporter

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/udpio"
)

// Errors of the package.
var (
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("reporter: bad config")
	// ErrClosed: the reporter was closed.
	ErrClosed = errors.New("reporter: closed")
)

// WideWindow is how many reports a reporter with WideSequence keeps for
// resending.
const WideWindow = 4096

// sent is a sequenced report kept for resending.
type sent struct {
	seq     uint32
	b       []byte
	resends int
	lost    bool // counted lost: later NACKs for it are ignored
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
	// the pace raised when no NACK said busy.
	paceWindow = 10 * time.Millisecond
	// minPace is the lowest pace backpressure brings a reporter to.
	minPace = 1000.0
	// lingerQuiet is how long Close waits after the last NACK, and
	// lingerMax the most it waits, for NACKs of the reports just sent.
	lingerQuiet = 20 * time.Millisecond
	lingerMax   = time.Second
)

// DefaultBatch is the number of reports sent in one system call.
const DefaultBatch = 64

// Config configures a Reporter.
type Config struct {
	// Translator is where reports go (default 127.0.0.1:40040).
	Translator netip.AddrPort
	// Local is the address the report socket binds (default 127.0.0.1:0).
	// It must be a specific address when NACKs are handled: the translator
	// sends them to it.
	Local netip.AddrPort
	// Sequenced numbers every report (S flag, sequence numbers 0, 1, ...,
	// 255, 0, ...) and keeps the last 256 for resending.
	Sequenced bool
	// WideSequence numbers reports with 32-bit sequence numbers (S and W
	// flags) and keeps the last WideWindow for resending. A NACK names its
	// report unambiguously: one that comes after the window moved on (a
	// late or repeated NACK) resends nothing, where an 8-bit number would
	// name whatever report holds it now. It needs Sequenced.
	WideSequence bool
	// HandleNACKs listens for NACKs on Local's address at AckPort and resends
	// the NACKed reports still in the window. It needs Sequenced.
	HandleNACKs bool
	// AckPort is the port NACKs arrive on (default 40044, dta.AckPort).
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
	// NACKed and that is not resent: its sequence number, its bytes (nil
	// when the window no longer holds it) and the NACK's reason. It runs on
	// the reporter's ack goroutine, or in Close, without the reporter's
	// lock.
	OnLoss func(seq uint32, report []byte, reason dta.Reason)
}

// Counters counts what a Reporter did.
type Counters struct {
	Sent    uint64 // reports sent (resends included)
	Resent  uint64 // reports resent after a NACK
	NACKs   uint64 // NACKs received
	Unknown uint64 // NACKs for a sequence number not in the window or already lost, and malformed acks
	Foreign uint64 // acks from an address other than the translator's report socket, ignored
	GaveUp  uint64 // NACKs not answered: the report was resent MaxResends times
	Lost    uint64 // reports NACKed and never resent: given up, left the window before their resend, or pending at Close
	Errors  uint64 // datagrams the socket refused

	Probes   uint64 // copies of the last report Close sent (wide, with NACKs), to reveal lost last reports
	Backoffs uint64 // busy NACKs that halved the pace
	Waits    uint64 // times Send blocked for the pace or for a resend to leave the window
}

// Reporter builds and sends reports. Its methods are safe for concurrent use.
type Reporter struct {
	mu      sync.Mutex
	cfg     Config
	conn    *udpio.Conn
	ack     *udpio.Conn
	batch   []udpio.Message
	slab    []byte // the batch's bytes
	seq     uint32
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
	lastEvent time.Time // the last NACK taken or resend sent: Close waits for quiet after it
	resends   []resend  // NACKed reports waiting, oldest first
	losses    []loss    // to hand to OnLoss once the lock is released
	lossCalls sync.Mutex
}

type loss struct {
	seq    uint32
	b      []byte
	reason dta.Reason
}

// New opens a reporter's sockets.
func New(cfg Config) (*Reporter, error) {
	lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	if !cfg.Translator.IsValid() {
		cfg.Translator = netip.AddrPortFrom(lo, dta.ReportPort)
	}
	if !cfg.Local.IsValid() {
		cfg.Local = netip.AddrPortFrom(lo, 0)
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
	if cfg.WideSequence && !cfg.Sequenced {
		return nil, fmt.Errorf("%w: wide sequence numbers need Sequenced", ErrConfig)
	}
	if cfg.Rate < 0 || cfg.Rate != cfg.Rate {
		return nil, fmt.Errorf("%w: rate %v", ErrConfig, cfg.Rate)
	}
	if cfg.HandleNACKs && (!cfg.Sequenced || cfg.Local.Addr().IsUnspecified()) {
		return nil, fmt.Errorf("%w: NACK handling needs sequenced reports and a specific local address", ErrConfig)
	}
	uc, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(cfg.Local), net.UDPAddrFromAddrPort(cfg.Translator))
	if err != nil {
		return nil, fmt.Errorf("reporter: %w", err)
	}
	conn, err := udpio.New(uc, cfg.Batch)
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("reporter: %w", err)
	}
	now := time.Now()
	r := &Reporter{cfg: cfg, conn: conn, batch: make([]udpio.Message, 0, cfg.Batch),
		pace: cfg.Rate, lastFill: now, winStart: now}
	r.tokens = r.burst()
	if cfg.Sequenced {
		r.window = make([]sent, 256)
		if cfg.WideSequence {
			r.window = make([]sent, WideWindow)
		}
	}
	if cfg.HandleNACKs {
		auc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(cfg.Local.Addr(), cfg.AckPort)))
		if err != nil {
			uc.Close()
			return nil, fmt.Errorf("reporter: ack socket: %w", err)
		}
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
		h.Sequenced, h.Wide, h.Seq = true, r.cfg.WideSequence, r.seq
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
	if r.cfg.Sequenced {
		w := &r.window[int(h.Seq)%len(r.window)]
		w.seq, w.b, w.resends, w.lost = h.Seq, append(w.b[:0], msg...), 0, false
		r.seq++
	}
	r.batch = append(r.batch, udpio.Message{Buf: msg})
	r.tokens--
	r.winSent++
	if len(r.batch) == cap(r.batch) {
		return r.flushLocked()
	}
	return nil
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
			r.pace *= 1.25
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
// more report and no NACKed report waiting for its resend would leave the
// window when it is sent. r.mu is held.
func (r *Reporter) waitLocked() error {
	for {
		if r.closed {
			return ErrClosed
		}
		now := time.Now()
		r.refill(now)
		var d time.Duration
		switch {
		case len(r.resends) > 0 && r.window != nil && r.seq-r.resends[0].seq >= uint32(len(r.window)):
			d = time.Millisecond // the ack goroutine resends it
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

// KeyWrite sends a Key-Write report: data under key, n copies.
func (r *Reporter) KeyWrite(key uint32, data []byte, n uint8) error {
	return r.Send(&dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite},
		KeyWrite: dta.KeyWrite{Redundancy: n, Key: key, Data: data}})
}

// KeyIncrement sends a Key-Increment report: add to key's n counters.
func (r *Reporter) KeyIncrement(key uint32, add uint64, n uint8) error {
	return r.Send(&dta.Report{Header: dta.Header{Opcode: dta.OpKeyIncrement},
		KeyIncrement: dta.KeyIncrement{Redundancy: n, Key: key, Counter: add}})
}

// Append sends an Append report: data to list. imm sets the I flag (the
// translator writes the batch with an immediate, waking the collector).
func (r *Reporter) Append(list uint32, data []byte, imm bool) error {
	return r.Send(&dta.Report{Header: dta.Header{Opcode: dta.OpAppend, Immediate: imm},
		Append: dta.Append{ListID: list, Data: data}})
}

// Postcard sends a Postcarding report: hop (1-based) of flow key saw value;
// pathLen is the path's length, 0 when unknown (then not sent).
func (r *Reporter) Postcard(key uint32, hop uint8, value uint32, pathLen uint8) error {
	return r.Send(&dta.Report{Header: dta.Header{Opcode: dta.OpPostcard},
		Postcard: dta.Postcard{Key: key, Hop: hop, Value: value, PathLength: pathLen}})
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
	r.c.Sent += uint64(len(r.batch) - refused)
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

// Close sends what is queued; with HandleNACKs and WideSequence it sends
// the last report twice more (see probeTail); with HandleNACKs it keeps
// answering NACKs
// until 20 ms passed without a NACK or a resend and none is pending (at
// most a second);
// what is still pending then is lost (counted, and handed to OnLoss). It
// then stops listening and closes the sockets.
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
			quiet := len(r.resends) == 0 && time.Since(r.lastEvent) >= lingerQuiet
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
		if r.seq > 0 {
			if w := &r.window[int(r.seq-1)%len(r.window)]; w.b != nil && w.seq == r.seq-1 && !w.lost {
				r.batch = append(r.batch, udpio.Message{Buf: w.b})
				r.c.Probes++
				_ = r.flushLocked()
			}
		}
		r.lastEvent = time.Now()
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

// lose counts the report with seq as lost and queues it for OnLoss. r.mu
// is held.
func (r *Reporter) lose(seq uint32, reason dta.Reason) {
	w := &r.window[int(seq)%len(r.window)]
	held := w.b != nil && w.seq == seq
	if held {
		if w.lost {
			return
		}
		w.lost = true
	}
	r.c.Lost++
	if r.cfg.OnLoss == nil {
		return
	}
	var b []byte
	if held {
		b = append([]byte(nil), w.b...)
	}
	r.losses = append(r.losses, loss{seq: seq, b: b, reason: reason})
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
	_ = r.ack.ReadLoop(udpio.Buffers(16, 64), time.Millisecond, func(ms []udpio.Message, now time.Time) bool {
		more := r.handleAcks(ms, now)
		r.deliverLosses()
		return more
	})
}

// handleAcks takes a batch of acks (empty on an idle tick), queues the
// reports they NACK for resending and resends those whose backoff passed,
// as the pace allows; it reports false once the reporter is closed.
func (r *Reporter) handleAcks(ms []udpio.Message, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	for i := range ms {
		if unmapped(ms[i].Addr) != r.cfg.Translator {
			r.c.Foreign++ // only the translator NACKs: a forgery or a stray
			continue
		}
		a, err := dta.ParseAck(ms[i].Buf[:ms[i].N])
		if err != nil || !a.NACK {
			if err != nil {
				r.c.Unknown++
			}
			continue
		}
		r.c.NACKs++
		r.lastEvent = now
		r.slowDown(now)
		w := &r.window[int(a.Seq)%len(r.window)]
		switch {
		case a.Wide != r.cfg.WideSequence || w.b == nil || w.seq != a.Seq || w.lost:
			r.c.Unknown++ // never sent, no longer in the window, or already lost
			if r.cfg.WideSequence && a.Wide && r.seq-a.Seq-1 < 1<<31 {
				r.lose(a.Seq, a.Reason) // sent, and gone from the window
			}
		case w.resends >= r.cfg.MaxResends:
			r.c.GaveUp++
			r.lose(a.Seq, a.Reason)
		default:
			w.resends++
			r.resends = append(r.resends, resend{seq: a.Seq, due: now.Add(time.Millisecond << (w.resends - 1)), reason: a.Reason})
		}
	}
	r.resendDue(now)
	return true
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
	r.tokens = min(r.tokens, r.burst())
	r.lastCut = now
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
		w := &r.window[int(q.seq)%len(r.window)]
		if w.b == nil || w.seq != q.seq {
			r.lose(q.seq, q.reason)
			continue
		}
		r.c.Resent++
		r.lastEvent = now // its NACK, if any, is yet to come
		r.tokens--
		r.winSent++
		// The batch aliases the window: it is sent before the lock is
		// released, before a new report can take the slot.
		r.batch = append(r.batch, udpio.Message{Buf: w.b})
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
