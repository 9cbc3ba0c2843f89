package translator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/rocev2"
)

// Socket batch sizes and buffers.
const (
	batchSize    = 64
	maxReport    = 65536 // the largest UDP payload
	maxRoCERecv  = 2048  // ACKs, CM MADs and advertisements are smaller
	socketBuffer = 8 << 20
)

// Translator runs an Engine on UDP sockets: one for reports (Config.ReportAddr,
// which also sends NACKs), one for RoCEv2 (Config.Local), each read by its
// own goroutine in batches, and a ticker for timeouts. One mutex serialises
// the engine.
type Translator struct {
	mu      sync.Mutex
	e       *Engine
	rep     *udpio.Conn // read by readReports, written (NACKs) under mu
	roce    *udpio.Conn // read by readRoCE, written under mu; nil with Verbs
	vb      *verbsBackend
	tick    time.Duration
	started bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup

	roceOut []udpio.Message // send scratch, under mu
	repOut  []udpio.Message
}

// New binds the translator's sockets and builds its engine. cfg.Local
// defaults to 127.0.0.1:0; the port the system chooses becomes the engine's
// Local address. Start connects to the collectors.
func New(cfg Config) (*Translator, error) {
	cfg = cfg.withDefaults()
	if !cfg.Local.IsValid() {
		cfg.Local = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0)
	}
	if cfg.Local.Addr().IsUnspecified() || cfg.ReportAddr.Addr().IsUnspecified() {
		return nil, fmt.Errorf("%w: the translator binds specific addresses, not %v or %v", ErrConfig, cfg.Local, cfg.ReportAddr)
	}
	var ruc, cuc *net.UDPConn
	var err error
	if !cfg.NoReports {
		if ruc, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(cfg.ReportAddr)); err != nil {
			return nil, fmt.Errorf("translator: report socket: %w", err)
		}
		// Reports come in bursts: ask for a deep receive queue (the kernel
		// caps it at net.core.rmem_max).
		_ = ruc.SetReadBuffer(socketBuffer)
		cfg.ReportAddr = ruc.LocalAddr().(*net.UDPAddr).AddrPort()
	}
	t := &Translator{stop: make(chan struct{})}
	closeAll := func() {
		if ruc != nil {
			ruc.Close()
		}
		if cuc != nil {
			cuc.Close()
		}
	}
	if cfg.Verbs {
		// The NIC speaks RoCEv2: no socket of ours does.
		if t.vb, err = newVerbsBackend(cfg.Local.Addr()); err != nil {
			closeAll()
			return nil, err
		}
	} else {
		if cuc, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(cfg.Local)); err != nil {
			closeAll()
			return nil, fmt.Errorf("translator: rocev2 socket: %w", err)
		}
		_ = cuc.SetReadBuffer(socketBuffer)
		if err := rocev2.ConfigureSocket(cuc); err != nil {
			closeAll()
			return nil, fmt.Errorf("translator: rocev2 socket: %w", err)
		}
		cfg.Local = cuc.LocalAddr().(*net.UDPAddr).AddrPort()
	}
	if t.e, err = NewEngine(cfg); err != nil {
		closeAll()
		return nil, err
	}
	if ruc != nil {
		if t.rep, err = udpio.New(ruc, batchSize); err != nil {
			closeAll()
			return nil, err
		}
	}
	if cuc != nil {
		if t.roce, err = udpio.New(cuc, batchSize); err != nil {
			closeAll()
			return nil, err
		}
		t.roce.LoopbackGSOOnly() // the ICRCs assume identification 0
	}
	cfg = t.e.Config()
	t.tick = max(min(cfg.AckTimeout, cfg.CMTimeout)/4, time.Millisecond)
	return t, nil
}

// ReportAddr returns the address the translator receives reports on.
func (t *Translator) ReportAddr() netip.AddrPort { return t.e.cfg.ReportAddr }

// LocalAddr returns the translator's RoCEv2 address.
func (t *Translator) LocalAddr() netip.AddrPort { return t.e.cfg.Local }

// Start connects to every collector (discovery, advertisements) and starts
// translating reports. It returns when every instance is ready or failed,
// with the collectors' errors joined (ErrNotListening, ErrRejected,
// ErrAdvertisement), or with ctx's error. Either way the translator keeps
// serving what did connect until Close. Reports that arrive before an
// instance is ready are dropped (NACKed when sequenced).
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
	if t.rep != nil {
		t.wg.Add(1)
		go t.readReports()
	}
	if t.vb != nil {
		t.wg.Add(1)
		go t.ticker()
		t.mu.Unlock()
		return t.discoverVerbs(ctx)
	}
	t.wg.Add(2)
	go t.readRoCE()
	go t.ticker()
	t.e.Start(time.Now())
	t.sendLocked()
	t.mu.Unlock()

	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for {
		t.mu.Lock()
		done, err := t.e.Connected()
		t.mu.Unlock()
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

// Submit translates r as if it had arrived on the report socket, except
// that refusal is returned, not NACKed: it wraps ErrNoInstance, ErrBusy
// (retry later), ErrReport or ErrClosed. With copy >= 0, a Key-Write
// report writes only that copy (0..N-1) of its N. The packets leave in
// batches: when a batch fills, on the next tick (a few milliseconds) or on
// Flush. Submit is safe for concurrent use.
func (t *Translator) Submit(r *dta.Report, copy int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("translator: submit: %w", ErrClosed)
	}
	if !t.started {
		return fmt.Errorf("%w: the translator is not started", ErrNoInstance)
	}
	if copy >= 0 && r.Header.Opcode != dta.OpKeyWrite {
		return fmt.Errorf("%w: a copy is chosen only for Key-Write, not %v", ErrReport, r.Header.Opcode)
	}
	err := t.e.apply(r, copy)
	if len(t.e.Output()) >= batchSize {
		t.sendLocked()
	}
	return err
}

// Flush sends what Submit queued.
func (t *Translator) Flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started && !t.closed {
		t.sendLocked()
	}
}

// Counters returns a snapshot of the engine's counters.
func (t *Translator) Counters() Counters {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.e.Counters()
}

// Instances lists the collectors' instances.
func (t *Translator) Instances() []InstanceInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.e.Instances()
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
	var err error
	if t.started {
		t.e.Tick(time.Now())
		t.e.Flush()
		t.sendLocked()
		t.mu.Unlock()
		deadline := time.Now().Add(timeout)
		for {
			t.mu.Lock()
			idle := t.e.Idle() && t.e.verbsIdle()
			t.mu.Unlock()
			if idle {
				break
			}
			if time.Now().After(deadline) {
				err = fmt.Errorf("translator: close: unacknowledged packets: %w", context.DeadlineExceeded)
				break
			}
			time.Sleep(time.Millisecond)
		}
		t.mu.Lock()
		t.e.Disconnect()
		t.sendLocked()
	}
	if t.vb != nil {
		err = errors.Join(err, t.vb.close(t.e))
	}
	t.mu.Unlock()
	close(t.stop)
	if t.rep != nil {
		t.rep.UDPConn().Close()
	}
	if t.roce != nil {
		t.roce.UDPConn().Close()
	}
	t.wg.Wait()
	return err
}

// sendLocked sends the engine's output. t.mu is held.
func (t *Translator) sendLocked() {
	out := t.e.Output()
	if len(out) == 0 {
		return
	}
	t.roceOut, t.repOut = t.roceOut[:0], t.repOut[:0]
	for _, d := range out {
		m := udpio.Message{Buf: d.Buf, Addr: d.Addr}
		if d.ToReporter {
			t.repOut = append(t.repOut, m)
		} else {
			t.roceOut = append(t.roceOut, m)
		}
	}
	// A datagram the kernel refuses is skipped: the collector's
	// retransmission or the reporter's resend covers it.
	if t.roce != nil {
		t.roce.WriteAll(t.roceOut)
	}
	if t.rep != nil {
		t.rep.WriteAll(t.repOut)
	}
	clear(t.roceOut)
	clear(t.repOut)
	t.e.ResetOutput()
}

func (t *Translator) readReports() {
	t.readLoop(t.rep, maxReport, func(ms []udpio.Message, now time.Time) {
		t.e.setNow(now)
		for i := range ms {
			if ms[i].Truncated { // longer than any report: cut, it could decode wrong
				t.e.c.Malformed++
				continue
			}
			t.e.HandleReport(ms[i].Buf[:ms[i].N], ms[i].Addr)
		}
	})
}

func (t *Translator) readRoCE() {
	t.readLoop(t.roce, maxRoCERecv, func(ms []udpio.Message, now time.Time) {
		for i := range ms {
			if ms[i].Truncated {
				t.e.c.BadRoCE++
				continue
			}
			t.e.HandleRoCE(ms[i].Buf[:ms[i].N], ms[i].Addr, now)
		}
	})
}

// readLoop reads batches of datagrams of up to size bytes from c until the
// socket closes, and hands each batch, with its arrival time, to handle
// under mu, then sends what handling queued.
func (t *Translator) readLoop(c *udpio.Conn, size int, handle func(ms []udpio.Message, now time.Time)) {
	defer t.wg.Done()
	_ = c.ReadLoop(udpio.Buffers(batchSize, size), 0, func(ms []udpio.Message, now time.Time) bool {
		t.mu.Lock()
		handle(ms, now)
		t.sendLocked()
		t.mu.Unlock()
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
		case now := <-tk.C:
			t.mu.Lock()
			t.e.Tick(now)
			t.sendLocked()
			t.mu.Unlock()
		}
	}
}

// discoverVerbs connects every collector's instances through the RDMA CM,
// one collector after the other, and returns their errors joined.
func (t *Translator) discoverVerbs(ctx context.Context) error {
	var errs []error
	for c := range t.e.collectors {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("translator: connecting: %w", err)
		}
		err := t.vb.discover(t.e, c, func(port uint16, ad dta.Advertisement, q *verbsQP) error {
			t.mu.Lock()
			defer t.mu.Unlock()
			return t.e.attachVerbs(c, port, ad, q)
		})
		t.mu.Lock()
		col := t.e.collectors[c]
		col.done, col.err = true, err
		for _, in := range col.instances {
			if in.err != nil {
				err = errors.Join(err, in.err)
			}
		}
		t.mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
