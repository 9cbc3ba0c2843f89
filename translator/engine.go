package translator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/exactly"
	"github.com/dtakit/dtakit/internal/netguard"
	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
	"github.com/dtakit/dtakit/rocev2/rc"
)

// Datagram is one UDP datagram the engine wants sent, Buf to Addr: the
// type the translator's sockets write, as the target's do.
type Datagram = udpio.Datagram

// Counters is a snapshot of what an engine did. Reports counts decoded
// reports by opcode (index 1..4, dta.Opcode; index 0 counts the reports of
// every primitive registered beyond the four); every report counted there ends
// as translated (its operations counted in Writes or FetchAdds, or held in a
// postcard cache or append batch), Rejected, Dropped or NACKed.
type Counters struct {
	Reports   [5]uint64 // decoded reports by opcode
	Malformed uint64    // datagrams that are not DTA reports
	// RefusedSource counts datagrams on the report socket from an address
	// outside Config.Reporters, dropped unread.
	RefusedSource uint64
	// Rejected counts reports the instance's geometry cannot take (data
	// size, list, hop, postcard value 0 or outside the instance's set);
	// wide ones are NACKed with reason Rejected.
	Rejected uint64
	// OutsideValues counts postcards rejected because their value is
	// outside the set the collector's advertisement gives.
	OutsideValues uint64
	// NoInstance, RingFull and RateLimited say why reports were refused:
	// each report they count is counted again, as its outcome, in Dropped
	// or NACKs (do not add them to those).
	// NoInstance counts reports for a primitive no ready instance serves.
	NoInstance  uint64
	RingFull    uint64 // reports refused because a retransmit ring (with Verbs, a send queue) was full
	RateLimited uint64 // reports refused by a rate limit
	Dropped     uint64 // unsequenced reports refused (ring, rate, no instance)
	NACKs       uint64 // sequenced reports refused, a NACK sent for each
	// Duplicates counts wide sequenced reports already applied (a resend
	// whose original arrived after all), dropped without a NACK.
	Duplicates uint64
	// Stale counts wide reports more than the window (4096 numbers) behind
	// the newest of their source: whether they were applied is forgotten,
	// so they are refused, NACKed with reason Unconfirmed.
	Stale uint64
	// SourcesEvicted counts sources of wide reports forgotten to make room
	// for a new one, each silent for at least 2 s; SourcesRefused counts
	// reports of new sources refused (NACKed busy) because every tracked
	// source reported within the last 2 s.
	SourcesEvicted, SourcesRefused uint64
	// Missing counts wide sequence numbers a source skipped: each is NACKed
	// with reason Missing.
	Missing uint64
	// MissingWithheld counts missing numbers whose NACK waited because the
	// source had not sent enough reports to pay for it (each report pays
	// for two; docs/DTA-WIRE.md, "Exactly once"): each holds the source's
	// cumulative ack back until it is NACKed (then counted in Missing too)
	// or its report comes. BeyondWithheld counts reports NACKed busy
	// because taking them would move such a number out of the window.
	MissingWithheld, BeyondWithheld uint64
	// Acks counts cumulative acks sent to sources of wide sequenced reports.
	Acks uint64

	Writes      uint64 // RDMA WRITE messages (a multi-packet WRITE counts once)
	FetchAdds   uint64 // FETCH_ADD operations
	Packets     uint64 // RoCEv2 data packets sent the first time
	Retransmits uint64 // data packets sent again
	Timeouts    uint64 // acknowledgement timeouts
	SeqNAKs     uint64 // PSN sequence error NAKs
	DupNAKs     uint64 // sequence error NAKs ignored as repeats
	RNRNAKs     uint64
	AccessNAKs  uint64 // remote access error NAKs (the QP is reconnected)
	InvalidNAKs uint64 // invalid request NAKs (the QP is reconnected)
	OtherNAKs   uint64 // remote operational error and reserved codes (reconnected)
	AtomicACKs  uint64 // atomic ACKs consumed
	StaleACKs   uint64 // ACKs for packets already acknowledged
	BadACKs     uint64 // ACKs for packets never sent
	Reconnects  uint64
	Lost        uint64 // unacknowledged packets abandoned by a reconnection
	// ResendAcks counts acks of one report (Resend): applied after the
	// cumulative ack passed its number.
	ResendAcks uint64
	// Unconfirmed counts wide reports taken whose operations the collector
	// never acknowledged (their QP failed): NACKed with reason Unconfirmed.
	Unconfirmed uint64
	BadICRC     uint64 // RoCEv2 datagrams with a wrong ICRC, dropped
	BadRoCE     uint64 // RoCEv2 datagrams that do not decode, or for no QP
	CMMessages  uint64 // CM messages received
	FlushLost   uint64 // postcard chunks or append batches Flush could not send
	Lingered    uint64 // partial append batches and postcard flows written after their linger
	// PartialChunks counts postcard chunks written before their flow
	// completed that skip the slots of hops not cached (postcard.Chunk.Skip),
	// leaving what earlier writes of the flow put there.
	PartialChunks uint64
	// DiscoveryRetries counts probes of a collector that did not answer,
	// made again after a backoff.
	DiscoveryRetries uint64
	VerbsErrors      uint64 // verbs backend: work requests refused or completed with an error
	EncodeErrors     uint64 // packets that failed to encode (a bug if not 0)

	// Datagrams on the Translator's sockets, summed over its shards (an
	// Engine, which has none, leaves them 0): the report socket's in
	// (reports) and out (acks and NACKs to reporters), the RoCEv2
	// socket's in (ACKs, NAKs, CM messages) and out (RDMA packets,
	// retransmissions, CM messages).
	ReportDatagramsIn, ReportDatagramsOut uint64
	RDMADatagramsIn, RDMADatagramsOut     uint64

	// Translated counts reports by opcode turned into operations (or held
	// in a postcard cache or append batch): each report once, while its
	// datagrams counted in Reports may be NACKed (then resent), duplicates,
	// refused or translated.
	Translated [5]uint64
	// RegisteredReports and RegisteredTranslated count, by opcode, the
	// reports of each primitive registered beyond the four that Reports[0]
	// and Translated[0] sum (metrics by primitive; not in JSON).
	RegisteredReports, RegisteredTranslated [256]uint64 `json:"-"`
}

// collector is one target and the instances discovered on it.
type collector struct {
	index     int
	addr      netip.AddrPort
	instances []*instance    // in CM port order
	byPrim    [256]*instance // the instance serving each primitive, by opcode
	probe     *instance      // the discovery connection under way, if any
	done      bool           // discovery ended (REJ reason 8, or the cap)
	err       error          // discovery failed (the last failure, while it retries)
	retryAt   int64          // when a failed discovery probes again (0: not failed)
	backoff   time.Duration
}

// Engine is the whole software translator without sockets: it takes reports
// (HandleReport, Translate), RoCEv2 datagrams from the targets (HandleRoCE)
// and the time (Tick), and queues the datagrams to send (Output). Every
// method that takes now takes the current time in Unix nanoseconds, as the
// socket-free cores of rocev2 do; the engine has no clock of its own and
// its time never goes back.
//
// Output's datagrams alias the engine's buffers (the retransmit rings,
// which keep each packet until it is acknowledged: the exception rc's
// conventions make for its Requester): send them, then call ResetOutput,
// before translating reports again after HandleRoCE. An Engine is not safe for concurrent use.
//
// Engines shard as Translator shards them, each on its own goroutine and
// sharing nothing: the engine that reads a source's reports keeps their
// state and admits those another engine translates (Admit, TranslateFor,
// HandedOver); what the translating engine settles later it hands out as
// values (TakeSettled) for the caller to take to the reading engine
// (Settle).
type Engine struct {
	cfg        Config
	now        int64
	collectors []*collector
	table      dta.CollectorChoice
	qps        map[uint32]*qp // by our QPN
	byComm     map[uint32]*qp // by our local comm ID
	nextQPN    uint32
	nextComm   uint32
	tid        uint64
	cmPSN      rocev2.PSN
	started    bool
	randPSN    func() uint32 // starting PSNs; tests replace it

	out     []Datagram
	touched []*qp
	acks    []Datagram // to reporters, from the report socket
	nacks   []byte     // their bytes, this round
	rx      rocev2.Packet
	icrc    rocev2.ICRCCache // of the datagrams HandleRoCE receives
	rep     dta.Report
	c       Counters

	seqs   exactly.Table // wide sequence numbers by source (seqtrack.go)
	ackDue []source      // sources owed a cumulative ack
	ackAll bool          // Flush: the next output acknowledges every source due, paced or not
	active int           // sources that reported within the last ackKeepalive (counted by keepAlive)
	// cur is the wide report being translated (s nil: none); tracked says
	// its operations were queued to be settled (seqtrack.go).
	cur     token
	tracked bool
	refused bool // the wide report being translated was NACKed (Rejected, or Unconfirmed by sink.Hold)
	// settled holds the reports translated for other engines and settled
	// since the last TakeSettled.
	settled   []Settlement
	keptAlive int64 // when keepAlive last ran

	// Scratch space of the translation paths, reused by every report.
	sc scratch
	// snk is the primitive.Sink handed to the instances' Translators.
	snk sink
}

// NewEngine returns an engine for cfg, which must name its Local address
// and at least one collector.
func NewEngine(cfg Config) (*Engine, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Local = unmap(cfg.Local)
	e := &Engine{
		cfg:      cfg,
		qps:      make(map[uint32]*qp),
		byComm:   make(map[uint32]*qp),
		nextQPN:  0x100 + rand.Uint32N(0x10000),
		nextComm: rand.Uint32(),
		tid:      rand.Uint64() &^ 0xFFFF_FFFF,
		nacks:    make([]byte, 0, 4096),
		randPSN:  rand.Uint32,
	}
	for i, a := range cfg.Collectors {
		e.collectors = append(e.collectors, &collector{index: i, addr: unmap(a)})
	}
	e.table = dta.DefaultCollectorChoice(len(cfg.Collectors))
	if cfg.Choice != nil {
		e.table = *cfg.Choice
	}
	return e, nil
}

// Config returns the engine's configuration with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Start begins discovery: a REQ to the first CM port of every collector.
// now is the current time in Unix nanoseconds.
func (e *Engine) Start(now int64) {
	e.setNow(now)
	if e.started {
		return
	}
	e.started = true
	for _, col := range e.collectors {
		e.probe(col)
	}
}

// Connected reports whether discovery has ended on every collector and
// every instance found is ready (or has failed), and the errors of the
// collectors and instances that failed: a collector not listening, a
// rejection, an instance's bad or missing advertisement.
func (e *Engine) Connected() (bool, error) {
	var errs []error
	done, failed := true, 0
	for _, col := range e.collectors {
		if col.err != nil {
			errs = append(errs, col.err)
			failed++
			continue
		}
		if !col.done {
			done = false
			continue
		}
		for _, in := range col.instances {
			if in.err != nil {
				errs = append(errs, in.err)
			} else if !in.ready() {
				done = false
			}
		}
	}
	return done || failed == len(e.collectors), errors.Join(errs...)
}

// InstanceInfo describes one instance a collector advertised.
type InstanceInfo struct {
	Collector int
	Port      uint16 // its CM service port
	Primitive dta.Opcode
	Ad        dta.Advertisement
	Ready     bool
	Used      bool  // reports of its primitive go to it
	Err       error // why it is not usable, if it is not
}

// Instances lists the instances discovered so far, by collector and port.
func (e *Engine) Instances() []InstanceInfo {
	var out []InstanceInfo
	for _, col := range e.collectors {
		for _, in := range col.instances {
			out = append(out, InstanceInfo{
				Collector: col.index, Port: in.port, Primitive: in.prim, Ad: in.ad,
				Ready: in.ready(),
				Used:  in.prim.IsKnown() && col.byPrim[in.prim] == in,
				Err:   in.err,
			})
		}
	}
	return out
}

// Counters returns a snapshot of the engine's counters.
func (e *Engine) Counters() Counters {
	c := e.c
	for _, q := range e.qps {
		if q.req != nil {
			c.addRequester(q.req.Counters())
		}
	}
	return c
}

// addRequester adds what a queue pair's requester did to c.
func (c *Counters) addRequester(r rc.Counters) {
	c.Packets += r.Packets
	c.Retransmits += r.Retransmits
	c.Timeouts += r.Timeouts
	c.SeqNAKs += r.SeqNAKs
	c.DupNAKs += r.DupNAKs
	c.RNRNAKs += r.RNRNAKs
	c.StaleACKs += r.StaleACKs
	c.BadACKs += r.BadACKs
	c.EncodeErrors += r.EncodeErrors
}

// setNow advances the engine's time to now, never back.
func (e *Engine) setNow(now int64) {
	if now > e.now {
		e.now = now
	}
}

// Tick advances the engine's time to now: CM requests and acknowledgement
// timeouts resend, failed instances retry.
func (e *Engine) Tick(now int64) {
	e.setNow(now)
	for _, q := range e.qps {
		switch q.state {
		case qpConnecting, qpWaitAdvert:
			e.tickCM(q)
		case qpReady:
			e.tickQP(q)
		}
	}
	if e.now-e.keptAlive >= int64(ackKeepalive) {
		e.keptAlive = e.now
		e.keepAlive()
	}
	for _, col := range e.collectors {
		for _, in := range col.instances {
			if in.tr != nil {
				in.tr.Tick(e.sinkFor(in), e.now)
			}
			if in.conn != nil {
				in.conn.tick(e)
			} else if in.retryAt != 0 && e.now >= in.retryAt {
				in.retryAt = 0
				e.connect(in)
			}
		}
		if col.retryAt != 0 && e.now >= col.retryAt {
			col.retryAt = 0
			e.c.DiscoveryRetries++
			e.probe(col)
		}
	}
}

// Output finishes the round (the AckReq of each QP's last packet) and
// returns the datagrams to send: RoCEv2 to the collectors, and acks and
// NACKs to the reporters (sent from the report socket, the port they sent
// to). They stay valid until ResetOutput.
func (e *Engine) Output() (roce, acks []Datagram) {
	e.endRound()
	e.sendAcks()
	return e.out, e.acks
}

// ResetOutput forgets the datagrams Output returned, once they were sent.
func (e *Engine) ResetOutput() {
	clear(e.out)
	e.out = e.out[:0]
	clear(e.acks)
	e.acks = e.acks[:0]
	e.nacks = e.nacks[:0]
}

// Idle reports whether every QP has had all it sent acknowledged (with
// the verbs backend, every work request completed; a QP in error counts
// as idle: what it had is lost).
func (e *Engine) Idle() bool {
	for _, col := range e.collectors {
		for _, in := range col.instances {
			if in.conn != nil && !in.conn.idle() {
				return false
			}
		}
	}
	return true
}

// AcceptReport decodes d, a datagram from the report socket, into r when
// it comes from a configured reporter (Config.Reporters) and was read
// whole, and reports whether it did; what it refuses it counts
// (RefusedSource, Malformed).
func (e *Engine) AcceptReport(d Datagram, r *dta.Report) bool {
	switch {
	case !netguard.Contains(e.cfg.Reporters, d.Addr.Addr()):
		e.c.RefusedSource++
	case d.Truncated, r.Decode(d.Buf) != nil: // cut: it could decode wrong
		e.c.Malformed++
	default:
		return true
	}
	return false
}

// HandleRoCEDatagram is HandleRoCE for a datagram read from the RoCEv2
// socket: one cut short by the read buffer is counted (BadRoCE) and
// dropped.
func (e *Engine) HandleRoCEDatagram(d Datagram, now int64) {
	if d.Truncated {
		e.c.BadRoCE++
		return
	}
	e.HandleRoCE(d.Buf, d.Addr, now)
}

// Apply translates r as Translate does, except that refusal is returned,
// not NACKed: it wraps ErrNoInstance, ErrBusy or ErrReport. With copy >=
// 0, a Key-Write report writes only that copy (0..N-1) of its N.
func (e *Engine) Apply(r *dta.Report, copy int) error { return e.apply(r, copy) }

// HandleRoCE processes a RoCEv2 datagram received from src at the engine's
// Local address: ACKs, NAKs and atomic ACKs of the data QPs, the
// collectors' advertisement SENDs, and CM messages on QP 1. Datagrams with a
// bad ICRC, that do not decode, or that belong to no QP are counted and
// dropped.
func (e *Engine) HandleRoCE(b []byte, src netip.AddrPort, now int64) {
	e.setNow(now)
	src = unmap(src)
	if err := e.rx.Decode(b); err != nil {
		e.c.BadRoCE++
		return
	}
	if !e.icrc.Verify(src, e.cfg.Local, b) {
		e.c.BadICRC++
		return
	}
	bth := &e.rx.BTH
	if bth.DestQP == cm.GSIQP {
		if bth.Opcode != rocev2.UDSendOnly {
			e.c.BadRoCE++
			return
		}
		e.handleCM(src, e.rx.Payload)
		return
	}
	q := e.qps[bth.DestQP]
	// The peer's address, not its port: a RoCEv2 stack picks the UDP
	// source port per flow, for entropy; only the destination is 4791.
	if q == nil || q.remote.Addr() != src.Addr() || q.state == qpClosed {
		e.c.BadRoCE++
		return
	}
	switch bth.Opcode {
	case rocev2.RCAcknowledge:
		if q.state != qpReady {
			e.c.BadRoCE++
			return
		}
		e.handleAck(q, bth.PSN, e.rx.AETH.Syndrome)
	case rocev2.RCAtomicAcknowledge:
		if q.state != qpReady {
			e.c.BadRoCE++
			return
		}
		// The original value is of no use to a translator: consumed.
		e.c.AtomicACKs++
		e.handleAck(q, bth.PSN, e.rx.AETH.Syndrome)
	case rocev2.RCSendOnly:
		e.handleSend(q)
	default:
		e.c.BadRoCE++
	}
}

// HandleReport decodes a DTA report received from src at time now and
// translates it. A datagram that is not a report is counted (Malformed) and
// dropped.
func (e *Engine) HandleReport(b []byte, src netip.AddrPort, now int64) {
	if err := e.rep.Decode(b); err != nil {
		e.c.Malformed++
		return
	}
	e.Translate(&e.rep, src, now)
}

// chooseCollector returns the collector of key: CRC8(be32(key)) indexes the
// choice table.
func (e *Engine) chooseCollector(key uint32) *collector {
	if len(e.collectors) == 1 {
		return e.collectors[0]
	}
	return e.collectors[e.table.Collector(key)]
}

// ChooseCollector returns the index of the collector that receives reports
// with key (the key, list ID or flow ID).
func (e *Engine) ChooseCollector(key uint32) int { return e.chooseCollector(key).index }

// Translate turns one decoded report, received from src at time now, into RoCEv2
// datagrams queued for Output. A report the translator cannot take now (no
// ready instance, retransmit ring full, rate limit) is dropped: a sequenced
// one gets a NACK to src's address at the ack port, an unsequenced one is
// counted. It does not allocate.
//
// A report with a wide sequence number is applied at most once per source
// (src and the report's session): one whose number its source's reports
// already had applied is counted in Duplicates and dropped, one older than
// the window is refused (Stale), and numbers the source skipped are NACKed
// with reason Missing (docs/DTA-WIRE.md, "Exactly once").
func (e *Engine) Translate(r *dta.Report, src netip.AddrPort, now int64) {
	e.setNow(now)
	if !r.Header.Sequenced || !r.Header.Wide {
		e.translate1(r, src)
		return
	}
	s := e.admit(src, r)
	if s == nil {
		return
	}
	taken, tracked, refused := e.translateFor(r, src, token{s: s, seq: r.Header.Seq})
	s.SetApplied(r.Header.Seq, taken)
	seq := r.Header.Seq
	switch {
	case refused:
		// NACKed with reason Rejected: taken, so that a copy is not
		// translated again, and passed by the cumulative ack, but never
		// acknowledged on its own.
	case taken && tracked:
		if s.InWindow(seq) { // older: nothing to mark, acknowledged when settled
			s.SetPending(seq, true)
		}
	case taken:
		e.ackResend(s, seq) // settled already (a layout too large to track)
	default:
		s.Missed(seq, e.now) // NACKed: its sender resends it
	}
}

// translateFor translates t's report r and reports whether it was taken,
// whether its operations will settle it when acknowledged (a Key-Write, a
// Key-Increment, an Append entry when its batch is written, a postcard
// when its chunk is: docs/DTA-WIRE.md, "Exactly once"), and whether it was
// refused (NACKed with reason Rejected: taken, never acknowledged).
func (e *Engine) translateFor(r *dta.Report, src netip.AddrPort, t token) (taken, tracked, refused bool) {
	e.cur, e.tracked, e.refused = t, false, false
	taken = e.translate1(r, src)
	tracked, refused = e.tracked, e.refused
	e.cur, e.tracked, e.refused = token{}, false, false
	return taken, tracked, refused
}

// translate1 translates r, NACKing or counting it when it cannot be taken
// now, and reports whether it was taken (applied, or refused for good by
// the geometry, which a resend would not change). A wide report the
// geometry refuses is NACKed with reason Rejected and sets e.refused.
func (e *Engine) translate1(r *dta.Report, src netip.AddrPort) bool {
	switch err := e.apply(r, -1); {
	case err == nil:
		return true
	case errors.Is(err, ErrNoInstance):
		e.drop(r, src, dta.ReasonNoInstance)
	case errors.Is(err, ErrBusy):
		e.drop(r, src, dta.ReasonBusy)
	case err == errRejected:
		if r.Header.Sequenced && r.Header.Wide {
			e.nack(source{Addr: src, Session: r.Header.Session}, r.Header.Seq, true, dta.ReasonRejected)
			e.c.NACKs++
			e.refused = true
		}
		return true
	default:
		return true
	}
	return false
}

// apply translates r through its primitive's Translator, counting it, and
// says why it was not applied. A Key-Write writes only copy cp when cp is
// not negative.
func (e *Engine) apply(r *dta.Report, cp int) error {
	op := r.Header.Opcode
	k, ok := primitive.Lookup(op)
	if !ok {
		e.c.Malformed++
		return fmt.Errorf("%w: opcode %v", ErrReport, op)
	}
	countOp(&e.c.Reports, &e.c.RegisteredReports, op)
	col := e.collectors[0]
	if len(e.collectors) > 1 { // one collector needs no key
		col = e.chooseCollector(k.Key(r))
	}
	in := col.byPrim[op]
	if in == nil {
		e.c.NoInstance++
		return errNoInstance
	}
	s := e.sinkFor(in)
	if !s.ready() {
		e.c.NoInstance++
		return errNoInstance
	}
	switch in.tr.Translate(s, r, cp) {
	case primitive.Busy:
		return errBusy
	case primitive.Rejected:
		e.c.Rejected++
		return errRejected
	}
	countOp(&e.c.Translated, &e.c.RegisteredTranslated, op)
	return nil
}

// Preallocated so the refusals on the hot path do not allocate.
var (
	errNoInstance = fmt.Errorf("%w: the collector has no ready instance of the primitive", ErrNoInstance)
	errBusy       = fmt.Errorf("%w: the instance's retransmit ring is full", ErrBusy)
	errRejected   = fmt.Errorf("%w: the instance's geometry refuses it (data size, list, copy, hop)", ErrReport)
)

// drop refuses r: a NACK when it is sequenced, wide (with the reason) when
// r's sequence number is.
func (e *Engine) drop(r *dta.Report, src netip.AddrPort, why dta.Reason) {
	if !r.Header.Sequenced {
		e.c.Dropped++
		return
	}
	e.nack(source{Addr: src, Session: r.Header.Session}, r.Header.Seq, r.Header.Wide, why)
	e.c.NACKs++
}

// nack queues a NACK of number seq to src's address at the ack port, wide
// with the reason and src's session when wide.
func (e *Engine) nack(src source, seq uint32, wide bool, why dta.Reason) {
	a := dta.Ack{Seq: seq, NACK: true, Wide: wide}
	if wide {
		a.Reason = why
	}
	e.toReporter(src, a)
}

// toReporter queues a, a NACK or a cumulative ack, to src's address at the
// ack port; a wide one carries src's session.
func (e *Engine) toReporter(src source, a dta.Ack) {
	if a.Wide {
		a.Session = src.Session
	}
	if cap(e.nacks)-len(e.nacks) < dta.WideAckLen {
		// The queued acks keep the old array alive.
		e.nacks = make([]byte, 0, 4096)
	}
	n := len(e.nacks)
	e.nacks = a.AppendTo(e.nacks)
	e.acks = append(e.acks, Datagram{Addr: netip.AddrPortFrom(src.Addr.Addr(), e.cfg.AckPort), Buf: e.nacks[n:len(e.nacks):len(e.nacks)]})
}

// unmap turns an IPv4-mapped address into IPv4, so that addresses compare
// equal however a socket reports them.
func unmap(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// add adds o's counts to c (TestCountersAdd checks that it adds every
// field).
func (c *Counters) add(o Counters) {
	for i := range c.Reports {
		c.Reports[i] += o.Reports[i]
	}
	for i := range c.RegisteredReports {
		c.RegisteredReports[i] += o.RegisteredReports[i]
		c.RegisteredTranslated[i] += o.RegisteredTranslated[i]
	}
	c.Malformed += o.Malformed
	c.RefusedSource += o.RefusedSource
	c.Rejected += o.Rejected
	c.OutsideValues += o.OutsideValues
	c.NoInstance += o.NoInstance
	c.RingFull += o.RingFull
	c.RateLimited += o.RateLimited
	c.Dropped += o.Dropped
	c.NACKs += o.NACKs
	c.Duplicates += o.Duplicates
	c.Stale += o.Stale
	c.SourcesEvicted += o.SourcesEvicted
	c.SourcesRefused += o.SourcesRefused
	c.Missing += o.Missing
	c.MissingWithheld += o.MissingWithheld
	c.ReportDatagramsIn += o.ReportDatagramsIn
	c.ReportDatagramsOut += o.ReportDatagramsOut
	c.RDMADatagramsIn += o.RDMADatagramsIn
	c.RDMADatagramsOut += o.RDMADatagramsOut
	c.BeyondWithheld += o.BeyondWithheld
	c.Acks += o.Acks
	c.Writes += o.Writes
	c.FetchAdds += o.FetchAdds
	c.Packets += o.Packets
	c.Retransmits += o.Retransmits
	c.Timeouts += o.Timeouts
	c.SeqNAKs += o.SeqNAKs
	c.DupNAKs += o.DupNAKs
	c.RNRNAKs += o.RNRNAKs
	c.AccessNAKs += o.AccessNAKs
	c.InvalidNAKs += o.InvalidNAKs
	c.OtherNAKs += o.OtherNAKs
	c.AtomicACKs += o.AtomicACKs
	c.StaleACKs += o.StaleACKs
	c.BadACKs += o.BadACKs
	c.Reconnects += o.Reconnects
	c.Lost += o.Lost
	c.ResendAcks += o.ResendAcks
	c.Unconfirmed += o.Unconfirmed
	c.BadICRC += o.BadICRC
	c.BadRoCE += o.BadRoCE
	c.CMMessages += o.CMMessages
	c.FlushLost += o.FlushLost
	c.Lingered += o.Lingered
	c.PartialChunks += o.PartialChunks
	c.DiscoveryRetries += o.DiscoveryRetries
	c.VerbsErrors += o.VerbsErrors
	c.EncodeErrors += o.EncodeErrors
	for i := range c.Translated {
		c.Translated[i] += o.Translated[i]
	}
}
