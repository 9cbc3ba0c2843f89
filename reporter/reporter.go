// Package reporter sends DTA reports over UDP: it builds them with package
// dta, batches them (sendmmsg through internal/udpio), and, when asked,
// numbers them (the S flag) and resends the ones a translator NACKs.
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
}

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
	// MaxResends bounds the resends of one report (default 3), so that a
	// translator that keeps refusing it does not make the two ping-pong.
	MaxResends int
	// Batch is the number of reports sent per system call (default 64).
	Batch int
}

// Counters counts what a Reporter did.
type Counters struct {
	Sent    uint64 // reports sent (resends included)
	Resent  uint64 // reports resent after a NACK
	NACKs   uint64 // NACKs received
	Unknown uint64 // NACKs for a sequence number not in the window, and malformed acks
	Foreign uint64 // acks from an address other than the translator's report socket, ignored
	GaveUp  uint64 // NACKs not answered: the report was resent MaxResends times
	Errors  uint64 // datagrams the socket refused
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
		cfg.MaxResends = 3
	}
	if cfg.Batch < 1 || cfg.Batch > 1024 {
		return nil, fmt.Errorf("%w: batch of %d, want 1..1024", ErrConfig, cfg.Batch)
	}
	if cfg.WideSequence && !cfg.Sequenced {
		return nil, fmt.Errorf("%w: wide sequence numbers need Sequenced", ErrConfig)
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
	r := &Reporter{cfg: cfg, conn: conn, batch: make([]udpio.Message, 0, cfg.Batch)}
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
	if r.closed {
		return ErrClosed
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
		w.seq, w.b, w.resends = h.Seq, append(w.b[:0], msg...), 0
		r.seq++
	}
	r.batch = append(r.batch, udpio.Message{Buf: msg})
	if len(r.batch) == cap(r.batch) {
		return r.flushLocked()
	}
	return nil
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

// Close sends what is queued, stops listening for NACKs and closes the
// sockets.
func (r *Reporter) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	err := r.flushLocked()
	r.closed = true
	r.mu.Unlock()
	if r.ack != nil {
		r.ack.UDPConn().Close()
	}
	r.wg.Wait()
	r.conn.UDPConn().Close()
	return err
}

// readAcks resends the reports the translator NACKs.
func (r *Reporter) readAcks() {
	defer r.wg.Done()
	_ = r.ack.ReadLoop(udpio.Buffers(16, 64), 0, func(ms []udpio.Message, _ time.Time) bool {
		return r.handleAcks(ms)
	})
}

// handleAcks takes a batch of acks and resends what they NACK; it reports
// false once the reporter is closed.
func (r *Reporter) handleAcks(ms []udpio.Message) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	resent := false
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
		w := &r.window[int(a.Seq)%len(r.window)]
		switch {
		case a.Wide != r.cfg.WideSequence || w.b == nil || w.seq != a.Seq:
			r.c.Unknown++ // never sent, or no longer in the window
		case w.resends >= r.cfg.MaxResends:
			r.c.GaveUp++
		default:
			w.resends++
			r.c.Resent++
			resent = true
			r.batch = append(r.batch, udpio.Message{Buf: w.b})
			if len(r.batch) == cap(r.batch) {
				_ = r.flushLocked()
			}
		}
	}
	if resent {
		_ = r.flushLocked()
	}
	return true
}

func unmapped(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}
