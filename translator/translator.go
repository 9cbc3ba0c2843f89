package translator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/clock"
	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/rocev2"
)

// Socket batch sizes and buffers.
const (
	batchSize    = 64
	maxReport    = 65536 // the largest UDP payload
	maxRoCERecv  = 2048  // ACKs, CM MADs and advertisements are smaller
	socketBuffer = 8 << 20
)

// Translator runs engines on UDP sockets. It has Config.Shards shards, each
// an Engine with its own queue pairs to every collector (its own RoCEv2
// socket and PSN sequences), its own report socket on the shared report
// port (SO_REUSEPORT: the kernel keeps each reporter's flow on one socket)
// and its own mutex; each socket is read by its own goroutine in batches,
// and one ticker drives the timeouts of all. A report is translated by the
// shard that read it, except an Append or a postcard, which its list or
// flow ties to one shard (owner) for its batches and cache: the reader,
// which keeps the state of the report's source, admits it (Engine.Admit)
// and hands it to its owner under the owner's mutex (TranslateFor). When
// the owner's write of it is acknowledged, the settlement goes back to the
// reader as a message (Engine.TakeSettled, Engine.Settle) through the
// reader's inbox: the engines never touch each other.
type Translator struct {
	mu      sync.Mutex // lifecycle: started, closed
	shards  []*shard
	be      backend
	tick    time.Duration
	started bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

// shard is one engine and its sockets.
type shard struct {
	mu   sync.Mutex
	idx  int
	e    *Engine
	rep  *udpio.Conn // read by readReports, written (NACKs) under mu
	roce *udpio.Conn // read by readRoCE, written under mu; nil with Verbs
	// inbox holds the reports other shards settled for this one's
	// sources, to be taken under mu; spare is its other buffer. inMu is
	// taken alone or last, never while waiting for another lock.
	inMu         sync.Mutex
	inbox, spare []Settlement
	out          []Settlement // what the engine settled for other shards, under mu
}

// New binds the translator's sockets and builds its engines. cfg.Local
// defaults to 127.0.0.1:0; the port the system chooses becomes the first
// shard's Local address (the others' RoCEv2 ports are chosen by the
// system). Start connects to the collectors.
func New(cfg Config) (*Translator, error) {
	cfg = cfg.withDefaults()
	if !cfg.Local.IsValid() {
		cfg.Local = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0)
	}
	if cfg.Local.Addr().IsUnspecified() || cfg.ReportAddr.Addr().IsUnspecified() {
		return nil, fmt.Errorf("%w: the translator binds specific addresses, not %v or %v", ErrConfig, cfg.Local, cfg.ReportAddr)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := cfg.Shards
	if n > 1 && cfg.Verbs {
		return nil, fmt.Errorf("%w: %d shards with Verbs: the NIC's queue pairs are one engine's", ErrConfig, n)
	}
	t := &Translator{stop: make(chan struct{})}
	var opened []io.Closer // every socket (or verbs event channel) so far, closed on error
	fail := func(err error) (*Translator, error) {
		for _, c := range opened {
			_ = c.Close() // no engine yet: no QPs to close
		}
		return nil, err
	}
	var reps []*net.UDPConn
	if !cfg.NoReports {
		var err error
		if reps, err = udpio.ListenShards(cfg.ReportAddr, n); err != nil {
			return fail(fmt.Errorf("translator: report socket: %w", err))
		}
		for _, uc := range reps {
			opened = append(opened, uc)
			// Reports come in bursts: ask for a deep receive queue (the
			// kernel caps it at net.core.rmem_max).
			_ = uc.SetReadBuffer(socketBuffer)
		}
		cfg.ReportAddr = reps[0].LocalAddr().(*net.UDPAddr).AddrPort()
	}
	for i := range n {
		sh := &shard{idx: i}
		scfg := cfg
		if i > 0 {
			scfg.Local = netip.AddrPortFrom(cfg.Local.Addr(), 0)
		}
		if cfg.Verbs {
			// The NIC speaks RoCEv2: no socket of ours does.
			vb, err := newVerbsBackend(cfg.Local.Addr())
			if err != nil {
				return fail(err)
			}
			opened = append(opened, vb.ec)
			t.be = vb
		} else {
			t.be = software{}
			cuc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(scfg.Local))
			if err != nil {
				return fail(fmt.Errorf("translator: rocev2 socket: %w", err))
			}
			opened = append(opened, cuc)
			_ = cuc.SetReadBuffer(socketBuffer)
			if err := rocev2.ConfigureSocket(cuc); err != nil {
				return fail(fmt.Errorf("translator: rocev2 socket: %w", err))
			}
			scfg.Local = cuc.LocalAddr().(*net.UDPAddr).AddrPort()
			if sh.roce, err = udpio.New(cuc, batchSize); err != nil {
				return fail(err)
			}
			sh.roce.LoopbackGSOOnly() // the ICRCs assume identification 0
		}
		var err error
		if sh.e, err = NewEngine(scfg); err != nil {
			return fail(err)
		}
		if reps != nil {
			if sh.rep, err = udpio.New(reps[i], batchSize); err != nil {
				return fail(err)
			}
		}
		t.shards = append(t.shards, sh)
	}
	cfg = t.shards[0].e.Config()
	t.tick = max(min(cfg.AckTimeout, cfg.CMTimeout)/4, time.Millisecond)
	return t, nil
}

// ReportAddr returns the address the translator receives reports on.
func (t *Translator) ReportAddr() netip.AddrPort { return t.shards[0].e.Config().ReportAddr }

// LocalAddr returns the first shard's RoCEv2 address.
func (t *Translator) LocalAddr() netip.AddrPort { return t.shards[0].e.Config().Local }

// Start connects to every collector (discovery, advertisements) and starts
// translating reports. It returns when every instance of every shard is
// ready or failed, with the collectors' errors joined (ErrNotListening,
// ErrRejected, ErrAdvertisement; the first shard's that failed), or with
// ctx's error. Either way the translator keeps serving what did connect
// until Close. Reports that arrive before an instance is ready are dropped
// (NACKed when sequenced).
func (t *Translator) Start(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	if t.started {
		t.mu.Unlock()
		return errors.New("translator: already started")
	}
	t.started = true
	t.mu.Unlock()
	for _, sh := range t.shards {
		if sh.rep != nil {
			t.wg.Add(1)
			go t.readReports(sh)
		}
	}
	t.wg.Add(1)
	go t.ticker()
	return t.be.start(ctx, t)
}

// Submit translates r as if it had arrived on the report socket, except
// that refusal is returned, not NACKed: it wraps ErrNoInstance, ErrBusy
// (retry later), ErrReport or ErrClosed. With copy >= 0, a Key-Write
// report writes only that copy (0..N-1) of its N. The packets leave in
// batches: when a batch fills, on the next tick (a few milliseconds) or on
// Flush. Submit is safe for concurrent use.
func (t *Translator) Submit(r *dta.Report, copy int) error {
	t.mu.Lock()
	closed, started := t.closed, t.started
	t.mu.Unlock()
	if closed {
		return fmt.Errorf("translator: submit: %w", ErrClosed)
	}
	if !started {
		return fmt.Errorf("%w: the translator is not started", ErrNoInstance)
	}
	if k, _ := primitive.Lookup(r.Header.Opcode); copy >= 0 {
		if _, ok := k.(primitive.OneCopy); !ok {
			return fmt.Errorf("%w: a copy is chosen only for Key-Write (primitive.OneCopy), not %v", ErrReport, r.Header.Opcode)
		}
	}
	sh := t.shards[0]
	if o := t.owner(r); o >= 0 {
		sh = t.shards[o]
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	err := sh.e.Apply(r, copy)
	if roce, acks := sh.e.Output(); len(roce)+len(acks) >= batchSize {
		t.sendLocked(sh)
	}
	return err
}

// owner returns the shard that must translate r, or -1 when any may: an
// Append list's batches and a flow's cached postcards live in one engine.
func (t *Translator) owner(r *dta.Report) int {
	n := uint32(len(t.shards))
	if n == 1 {
		return -1
	}
	if k, ok := primitive.Lookup(r.Header.Opcode); ok && k.Stateful() {
		return int(k.Key(r) % n)
	}
	return -1
}

// Flush sends what Submit queued.
func (t *Translator) Flush() {
	t.mu.Lock()
	live := t.started && !t.closed
	t.mu.Unlock()
	if !live {
		return
	}
	for _, sh := range t.shards {
		sh.mu.Lock()
		t.sendLocked(sh)
		sh.mu.Unlock()
	}
}

// Counters returns a snapshot of the engines' counters, summed over the
// shards.
func (t *Translator) Counters() Counters {
	var c Counters
	for _, sh := range t.shards {
		sh.mu.Lock()
		c.add(sh.e.Counters())
		sh.mu.Unlock()
		if sh.rep != nil {
			st := sh.rep.Stats()
			c.ReportDatagramsIn, c.ReportDatagramsOut = c.ReportDatagramsIn+st.Read, c.ReportDatagramsOut+st.Written
		}
		if sh.roce != nil {
			st := sh.roce.Stats()
			c.RDMADatagramsIn, c.RDMADatagramsOut = c.RDMADatagramsIn+st.Read, c.RDMADatagramsOut+st.Written
		}
	}
	return c
}

// Instances lists the collectors' instances as the first shard sees them,
// each Ready only when every shard's queue pair to it is.
func (t *Translator) Instances() []InstanceInfo {
	var out []InstanceInfo
	for i, sh := range t.shards {
		sh.mu.Lock()
		ins := sh.e.Instances()
		sh.mu.Unlock()
		if i == 0 {
			out = ins
			continue
		}
		// Ready when every shard's queue pair is: a report goes to the
		// shard that reads its source, and one whose queue pair is not
		// connected yet refuses it.
		for j := range out {
			if j >= len(ins) || ins[j].Collector != out[j].Collector || ins[j].Port != out[j].Port {
				out[j].Ready = false
				continue
			}
			out[j].Ready = out[j].Ready && ins[j].Ready
			if out[j].Err == nil {
				out[j].Err = ins[j].Err
			}
		}
	}
	return out
}

// Close flushes what the translator holds back (cached postcards, partial
// append batches), waits up to timeout for every QP's packets to be
// acknowledged, retransmitting as needed, disconnects (DREQ) and closes the
// sockets. It reports whether all was acknowledged: an error wrapping
// context.DeadlineExceeded otherwise.
func (t *Translator) Close(timeout time.Duration) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	started := t.started
	t.mu.Unlock()
	var err error
	if started {
		for _, sh := range t.shards {
			sh.mu.Lock()
			sh.e.Tick(clock.Now())
			sh.e.Flush()
			t.sendLocked(sh)
			sh.mu.Unlock()
		}
		deadline := time.Now().Add(timeout)
		for _, sh := range t.shards {
			for err == nil {
				sh.mu.Lock()
				idle := sh.e.Idle()
				sh.mu.Unlock()
				if idle {
					break
				}
				if time.Now().After(deadline) {
					err = fmt.Errorf("translator: close: unacknowledged packets: %w", context.DeadlineExceeded)
				}
				time.Sleep(time.Millisecond)
			}
		}
		for _, sh := range t.shards {
			sh.mu.Lock()
			sh.e.Disconnect()
			t.sendLocked(sh)
			sh.mu.Unlock()
		}
	}
	err = errors.Join(err, t.be.close(t))
	close(t.stop)
	for _, sh := range t.shards {
		if sh.rep != nil {
			sh.rep.UDPConn().Close()
		}
		if sh.roce != nil {
			sh.roce.UDPConn().Close()
		}
	}
	t.wg.Wait()
	return err
}

// sendLocked takes in the reports other shards settled for sh's sources,
// sends the engine's output, and posts the reports it settled for other
// shards' sources to their inboxes. sh.mu is held.
func (t *Translator) sendLocked(sh *shard) {
	if len(t.shards) > 1 {
		sh.inMu.Lock()
		in := sh.inbox
		sh.inbox = sh.spare[:0]
		sh.inMu.Unlock()
		sh.e.Settle(in)
		clear(in)
		sh.spare = in[:0]
	}
	roce, acks := sh.e.Output()
	if len(t.shards) > 1 {
		out := sh.e.TakeSettled(sh.out[:0])
		for _, st := range out {
			home := t.shards[st.Home()]
			home.inMu.Lock()
			home.inbox = append(home.inbox, st)
			home.inMu.Unlock()
		}
		clear(out)
		sh.out = out[:0]
	}
	if len(roce)+len(acks) == 0 {
		return
	}
	// A datagram the kernel refuses is skipped: the collector's
	// retransmission or the reporter's resend covers it.
	if sh.roce != nil {
		sh.roce.WriteAll(roce)
	}
	if sh.rep != nil {
		sh.rep.WriteAll(acks)
	}
	sh.e.ResetOutput()
}

// readReports translates the reports sh's socket receives: its own under
// sh.mu, those another shard owns under that shard's mutex, after. Each
// report is decoded once, into reps, which alias the read buffers until the
// next read. The reports of one source come to one socket, in order: sh's
// engine keeps their state (Admit), whichever shard translates them.
func (t *Translator) readReports(sh *shard) {
	defer t.wg.Done()
	reps := make([]dta.Report, batchSize)
	owners := make([]int, batchSize)   // the shard translating each report; -1: none
	toks := make([]Ticket, batchSize)  // reports another shard translates
	outs := make([]Outcome, batchSize) // what it did with them
	_ = sh.rep.ReadLoop(udpio.Buffers(batchSize, maxReport), 0, func(ms []udpio.Datagram, at time.Time) bool {
		now, foreign := clock.Of(at), false
		sh.mu.Lock()
		for i := range ms {
			owners[i] = -1
			r := &reps[i]
			if !sh.e.AcceptReport(ms[i], r) {
				continue
			}
			if o := t.owner(r); o >= 0 && o != sh.idx {
				var ok bool
				if toks[i], ok = sh.e.Admit(r, ms[i].Addr, sh.idx, now); ok {
					owners[i], foreign = o, true
				}
				continue
			}
			owners[i] = sh.idx
			sh.e.Translate(r, ms[i].Addr, now)
		}
		t.sendLocked(sh)
		sh.mu.Unlock()
		if foreign {
			t.handOver(sh, reps[:len(ms)], ms, owners, toks, outs, now)
			// Before the next batch, which may hold a resend of one the
			// owner NACKed.
			sh.mu.Lock()
			for i := range ms {
				if owners[i] >= 0 && owners[i] != sh.idx {
					sh.e.HandedOver(toks[i], outs[i])
				}
				toks[i] = Ticket{}
			}
			sh.mu.Unlock()
		}
		return true
	})
}

// handOver has the reports of reps (decoded from ms) that shards other
// than from own translated by them, recording in outs what became of
// each.
func (t *Translator) handOver(from *shard, reps []dta.Report, ms []udpio.Datagram, owners []int, toks []Ticket, outs []Outcome, now int64) {
	for _, sh := range t.shards {
		if sh == from {
			continue
		}
		locked := false
		for i := range reps {
			if owners[i] != sh.idx {
				continue
			}
			if !locked {
				sh.mu.Lock()
				locked = true
			}
			outs[i] = sh.e.TranslateFor(&reps[i], ms[i].Addr, toks[i], now)
		}
		if locked {
			t.sendLocked(sh)
			sh.mu.Unlock()
		}
	}
}

func (t *Translator) readRoCE(sh *shard) {
	defer t.wg.Done()
	_ = sh.roce.ReadLoop(udpio.Buffers(batchSize, maxRoCERecv), 0, func(ms []udpio.Datagram, at time.Time) bool {
		now := clock.Of(at)
		sh.mu.Lock()
		for i := range ms {
			sh.e.HandleRoCEDatagram(ms[i], now)
		}
		t.sendLocked(sh)
		sh.mu.Unlock()
		return true
	})
}

func (t *Translator) ticker() {
	defer t.wg.Done()
	tk := time.NewTicker(t.tick)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case at := <-tk.C:
			now := clock.Of(at)
			for _, sh := range t.shards {
				sh.mu.Lock()
				sh.e.Tick(now)
				t.sendLocked(sh)
				sh.mu.Unlock()
			}
		}
	}
}

// backend is how a Translator's engines reach the collectors: its shards'
// RoCEv2 sockets (software) or a local RDMA NIC (Config.Verbs, verbs.go).
// New chooses it.
type backend interface {
	// start connects every collector's instances, as Start says.
	start(ctx context.Context, t *Translator) error
	// close releases what the backend holds once the engines
	// disconnected (the shards' sockets are Close's).
	close(t *Translator) error
}

// software is the backend of RoCEv2 over the shards' sockets (shard.roce):
// each engine runs its QPs (qp.go, cm.go).
type software struct{}

// start reads each shard's RoCEv2 socket, starts the discovery and waits
// for every instance to be ready or failed.
func (software) start(ctx context.Context, t *Translator) error {
	for _, sh := range t.shards {
		t.wg.Add(1)
		go t.readRoCE(sh)
		sh.mu.Lock()
		sh.e.Start(clock.Now())
		t.sendLocked(sh)
		sh.mu.Unlock()
	}

	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for {
		done, err := true, error(nil)
		for _, sh := range t.shards {
			sh.mu.Lock()
			d, e := sh.e.Connected()
			sh.mu.Unlock()
			done = done && d
			if err == nil {
				err = e
			}
		}
		if done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("translator: connecting: %w", ctx.Err())
		case <-poll.C:
		}
	}
}

func (software) close(*Translator) error { return nil }
