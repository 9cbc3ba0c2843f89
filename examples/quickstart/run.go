package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/rocev2/target"
	"github.com/dtakit/dtakit/translator"
)

// loopback is where the whole demo runs.
var loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// config is what run does; main fills it from flags.
type config struct {
	Keys     int     // Key-Write keys; Key-Increment keys and postcard flows are Keys/4
	Slots    int     // Key-Write slots; Key-Increment counters and postcard chunks are Slots/4
	Reports  int     // reports to send, split across the primitives
	Rate     float64 // reports per second, 0 for no cap
	Seed     uint64
	Quiet    bool // no progress line
	Terminal bool // the progress line is rewritten in place (\r)
	Bench    bool // Key-Write and Append only

	// beforeQuery, when set, runs after the send phase, before the
	// queries: tests corrupt the collector's memory with it to see the
	// checks fail.
	beforeQuery func(*instances)
	// drop, when set, names reports the streams count as sent but do not
	// send: tests stand in with it for reports a reporter gives up on.
	drop    func(op dta.Opcode, i int) bool
	verbose bool
	// stats, when set, receives the send phase's numbers (benchmarks).
	stats *stats
}

func defaultConfig() config {
	return config{Keys: 1 << 15, Slots: 1 << 18, Reports: 1 << 22, Seed: 1}
}

// stats are the send phase's numbers.
type stats struct {
	received uint64        // reports the translator took
	elapsed  time.Duration // from the first report sent to the last acknowledgement
}

// run is the whole demo: it returns nil when every check passed.
func run(ctx context.Context, cfg config, w io.Writer) error {
	p, err := newPlan(cfg)
	if err != nil {
		return err
	}
	// 1. The pipeline: a collector holding one instance of each primitive,
	// a translator connected to it, a reporter per primitive.
	pl, err := startPipeline(ctx, p, w)
	if err != nil {
		return err
	}
	defer pl.close()

	// 2. The send phase: every stream sent, every report acknowledged.
	start := time.Now()
	prog := &progress{w: w, quiet: cfg.Quiet, terminal: cfg.Terminal, total: p.total(), start: start}
	if err := pl.send(ctx, p, prog); err != nil {
		return err
	}
	if err := pl.awaitTranslator(ctx, prog); err != nil {
		return err
	}
	repc, closeErr, err := pl.finish()
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	tc := pl.tr.Counters()
	cc := pl.c.Counters() // also orders this goroutine after the target's writes
	reports, datagrams := sentByAll(repc[:])
	prog.show(reports, datagrams, decoded(tc), true)

	// 3. The queries: what the collector's memory answers, against what
	// was sent and what the analysis predicts.
	if cfg.beforeQuery != nil {
		cfg.beforeQuery(&pl.in)
	}
	rows, received := p.query(&pl.in, tc, cc, repc)
	fmt.Fprintln(w)
	printTable(w, rows)
	failures := queryFailures(rows)
	printCounters(w, cfg, tc, cc, repc)
	printDatagrams(w, tc, received)
	if cfg.stats != nil {
		*cfg.stats = stats{received, elapsed}
	}
	fmt.Fprintf(w, "send phase: %d reports received and acknowledged in %.2f s: %.0f reports/s\n",
		received, elapsed.Seconds(), float64(received)/elapsed.Seconds())

	// 4. The accounting: nothing out of bounds, every report taken once.
	failures = append(failures, p.accounting(w, tc, cc, repc, closeErr)...)
	if len(failures) > 0 {
		return fmt.Errorf("quickstart: FAILED:\n  %s", strings.Join(failures, "\n  "))
	}
	fmt.Fprintln(w, "all checks passed")
	return nil
}

// pipeline is the demo's collector, translator and reporters.
type pipeline struct {
	c        *collector.Collector
	in       instances
	tr       *translator.Translator
	trClosed bool
	reps     [5]*reporter.Reporter // by opcode; nil for a primitive the plan does not send
	cancel   context.CancelFunc    // stops the collector serving
}

// startPipeline starts the collector, the translator and the reporters, and
// says what it started.
func startPipeline(ctx context.Context, p *plan, w io.Writer) (*pipeline, error) {
	pl := &pipeline{}
	if err := pl.startCollector(ctx, p); err != nil {
		pl.close()
		return nil, err
	}
	if err := pl.newTranslator(); err != nil {
		pl.close()
		return nil, err
	}
	var nacks string
	var err error
	if pl.reps, nacks, err = newReporters(p, pl.tr.ReportAddr()); err != nil {
		pl.close()
		return nil, err
	}
	if err := pl.connect(ctx); err != nil {
		pl.close()
		return nil, err
	}
	fmt.Fprintf(w, "collector at %v: Key-Write %d slots, ", pl.c.Addr(), p.kwSlots)
	if !p.cfg.Bench {
		fmt.Fprintf(w, "Key-Increment %d counters, Postcarding %d chunks, ", p.kiSlots, p.chunks)
	}
	fmt.Fprintf(w, "Append %d lists of %d entries; translator at %v; %d reporters, NACKs %s\n",
		lists, p.entries, pl.tr.ReportAddr(), p.streams(), nacks)
	return pl, nil
}

// startCollector starts a collector on loopback holding the plan's
// instances (Key-Write and Append only in a -bench run). One shard per
// core on both sides: the translator's shards each connect from their own
// port, and the target reads each connection on its own socket.
func (pl *pipeline) startCollector(ctx context.Context, p *plan) error {
	c, err := collector.New(collector.Config{Addr: netip.AddrPortFrom(loopback, 0), Shards: runtime.GOMAXPROCS(0)})
	if err != nil {
		return err
	}
	pl.c = c
	in := &pl.in
	if in.kw, err = c.AddKeyWrite(p.kwLayout); err != nil {
		return err
	}
	if !p.cfg.Bench {
		if in.ki, err = c.AddKeyIncrement(p.kiLayout); err != nil {
			return err
		}
		if in.pc, err = c.AddPostcard(p.pcLayout); err != nil {
			return err
		}
		values := make([]uint32, universe)
		for i := range values {
			values[i] = uint32(i + 1)
		}
		if in.table, err = postcard.NewTable(p.pcLayout, values); err != nil {
			return err
		}
	}
	if in.ap, err = c.AddAppend(p.apLayout); err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	pl.cancel = cancel
	go c.Serve(sctx)
	return nil
}

// newTranslator makes a translator on loopback for the collector.
func (pl *pipeline) newTranslator() error {
	tr, err := translator.New(translator.Config{
		ReportAddr: netip.AddrPortFrom(loopback, 0),
		Collectors: []netip.AddrPort{pl.c.Addr()},
		Shards:     runtime.GOMAXPROCS(0),
		// A deep ring: the translator refuses a report (a NACK, which
		// slows its reporter down) only when the target falls far behind.
		RingSize: 1 << 14,
		// The default 10 ms resends everything unacknowledged whenever a
		// busy 2-core machine deschedules a goroutine that long; resends
		// are harmless but slow the demo down.
		AckTimeout: 50 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	pl.tr = tr
	return nil
}

// connect connects the translator to the collector (the RDMA CM).
func (pl *pipeline) connect(ctx context.Context) error {
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	if err := pl.tr.Start(cctx); err != nil {
		return fmt.Errorf("quickstart: connecting the translator: %w", err)
	}
	return nil
}

// send sends every stream, each from its own goroutine, showing the
// progress until all are sent.
func (pl *pipeline) send(ctx context.Context, p *plan, prog *progress) error {
	errs := make(chan error, len(pl.reps))
	var senders sync.WaitGroup
	for op, r := range pl.reps {
		if r == nil {
			continue
		}
		senders.Add(1)
		go func() {
			defer senders.Done()
			if err := p.send(ctx, dta.Opcode(op), r); err != nil {
				errs <- fmt.Errorf("quickstart: sending %v reports: %w", dta.Opcode(op), err)
			}
		}()
	}
	sendersDone := make(chan struct{})
	go func() { senders.Wait(); close(sendersDone) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-sendersDone:
			select {
			case err := <-errs:
				return err
			default:
				return nil
			}
		case <-tick.C:
			reports, datagrams := pl.sentSoFar()
			prog.show(reports, datagrams, decoded(pl.tr.Counters()), false)
		}
	}
}

// sentSoFar returns the reports the reporters sent and the datagrams they
// took.
func (pl *pipeline) sentSoFar() (reports, datagrams uint64) {
	var c []reporter.Counters
	for _, r := range pl.reps {
		if r != nil {
			c = append(c, r.Counters())
		}
	}
	return sentByAll(c)
}

// awaitTranslator waits until the translator decoded every datagram the
// reporters sent (resends included) and every NACK it sent was received,
// or nothing has moved for a second. Closing the reporters then answers
// the last NACKs and probes for lost last reports.
func (pl *pipeline) awaitTranslator(ctx context.Context, prog *progress) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastMove := uint64(0), time.Now()
	for {
		tc := pl.tr.Counters()
		var reports, sent, nackd uint64
		for _, r := range pl.reps {
			if r != nil {
				rc := r.Counters()
				rep, dg := sentBy(rc)
				reports, sent = reports+rep, sent+dg
				nackd += rc.NACKs
			}
		}
		got := decoded(tc)
		if got == sent && tc.NACKs+tc.Missing == nackd {
			return nil
		}
		if got != last {
			last, lastMove = got, time.Now()
		} else if time.Since(lastMove) > time.Second {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			prog.show(reports, sent, got, false)
		default:
			time.Sleep(time.Millisecond)
		}
	}
}

// finish closes the reporters, returning their final counters, then the
// translator, whose Close flushes the postcard cache and the partial
// Append batches and waits until every RDMA operation is acknowledged; it
// returns the translator's Close error apart, as a failed check. The
// reporters close at once: each Close waits a while for NACKs of its last
// reports, and their waits overlap.
func (pl *pipeline) finish() (repc [5]reporter.Counters, closeErr, err error) {
	var errs [5]error
	var wg sync.WaitGroup
	for op, r := range pl.reps {
		if r != nil {
			wg.Go(func() { errs[op] = r.Close() })
		}
	}
	wg.Wait()
	for op, r := range pl.reps {
		if r != nil {
			if errs[op] != nil {
				return repc, nil, errs[op]
			}
			repc[op] = r.Counters()
			pl.reps[op] = nil
		}
	}
	closeErr = pl.tr.Close(10 * time.Second)
	pl.trClosed = true
	return repc, closeErr, nil
}

// close closes what is still open.
func (pl *pipeline) close() {
	for _, r := range pl.reps {
		if r != nil {
			r.Close()
		}
	}
	if pl.tr != nil && !pl.trClosed {
		pl.tr.Close(0)
	}
	if pl.cancel != nil {
		pl.cancel()
	}
	if pl.c != nil {
		pl.c.Close()
	}
}

// queryFailures returns a line for each query below its pass mark.
func queryFailures(rows []row) []string {
	var failures []string
	for _, r := range rows {
		for _, ck := range r.checks {
			if !ck.ok() {
				failures = append(failures, fmt.Sprintf("%s: %s %.4f%% is below the minimum %.4f%% (expected %.4f%% - %d sigma)%s",
					r.name, ck.query, 100*ck.success, 100*ck.min, 100*ck.expect, sigmas, r.note))
			}
		}
	}
	return failures
}

// printCounters prints what the translator and the target did (every
// counter with -v).
func printCounters(w io.Writer, cfg config, tc translator.Counters, cc target.Counters, repc [5]reporter.Counters) {
	if cfg.verbose {
		fmt.Fprintf(w, "%+v\n%+v\n", tc, cc)
		for op, rc := range repc {
			if op > 0 {
				fmt.Fprintf(w, "reporter %v: %+v\n", dta.Opcode(op), rc)
			}
		}
	}
	fmt.Fprintf(w, "\ntranslator: %d RDMA WRITEs, %d FETCH_ADDs, %d packets, %d retransmitted, %d NACKs to reporters\n",
		tc.Writes, tc.FetchAdds, tc.Packets, tc.Retransmits, tc.NACKs)
	fmt.Fprintf(w, "target: %d WRITE packets and %d atomics applied, %d duplicates, %d remote access NAKs, %d invalid request NAKs, %d bad ICRCs\n",
		cc.WritePackets, cc.Atomics, cc.Duplicates, cc.NAKAccess, cc.NAKInvalid, cc.BadICRC)
}

// printDatagrams prints the datagrams per report on the translator's
// sockets.
func printDatagrams(w io.Writer, tc translator.Counters, received uint64) {
	if received == 0 {
		return
	}
	per := func(v uint64) float64 { return float64(v) / float64(received) }
	fmt.Fprintf(w, "datagrams per report: translator's report sockets %.3f in, %.3f out; its RoCEv2 sockets %.3f out, %.3f in; %.3f in all\n",
		per(tc.ReportDatagramsIn), per(tc.ReportDatagramsOut), per(tc.RDMADatagramsOut), per(tc.RDMADatagramsIn),
		per(tc.ReportDatagramsIn+tc.ReportDatagramsOut+tc.RDMADatagramsOut+tc.RDMADatagramsIn))
}

// accounting returns a line for each count that betrays a fault: a
// translator that did not close cleanly, anything out of bounds, a report
// taken twice or not at all, a WRITE or atomic sent and not applied. It
// prints the reports no acknowledgement confirmed.
func (p *plan) accounting(w io.Writer, tc translator.Counters, cc target.Counters, repc [5]reporter.Counters, closeErr error) []string {
	var failures []string
	if closeErr != nil {
		failures = append(failures, fmt.Sprintf("translator: %v", closeErr))
	}
	if cc.NAKAccess != 0 || cc.NAKInvalid != 0 || cc.BadICRC != 0 || cc.Malformed != 0 {
		failures = append(failures, fmt.Sprintf("target: %d remote access NAKs, %d invalid request NAKs, %d bad ICRCs, %d malformed: something was written or sent out of bounds",
			cc.NAKAccess, cc.NAKInvalid, cc.BadICRC, cc.Malformed))
	}
	if tc.EncodeErrors != 0 || tc.Rejected != 0 || tc.Malformed != 0 || tc.Lost != 0 {
		failures = append(failures, fmt.Sprintf("translator: %d encode errors, %d reports rejected, %d malformed, %d packets abandoned", tc.EncodeErrors, tc.Rejected, tc.Malformed, tc.Lost))
	}
	// Exactly once: every report the translator took (counted, less the
	// ones it NACKed and the duplicates it dropped) is one the reporters
	// did not count lost.
	// A NACKed Key-Write superseded by a newer one of its key is not
	// resent: delivered, in that the key holds the newer data, but never
	// taken.
	// An unconfirmed report (no acknowledgement came) may or may not have
	// been taken.
	var delivered, unconfirmed uint64
	for op, rc := range repc {
		if op > 0 {
			delivered += p.delivered(dta.Opcode(op), rc) - rc.Superseded
			unconfirmed += rc.Unconfirmed
		}
	}
	if taken := decoded(tc) - tc.NACKs - tc.Duplicates; taken < delivered || taken > delivered+unconfirmed {
		failures = append(failures, fmt.Sprintf("the translator took %d reports, the reporters delivered %d and do not know of %d more", taken, delivered, unconfirmed))
	}
	for op, rc := range repc {
		if op > 0 && rc.Unconfirmed > 0 {
			fmt.Fprintf(w, "%v reporter: %d reports unconfirmed (no acknowledgement came), %d resends sent again after 200 ms without an answer\n", dta.Opcode(op), rc.Unconfirmed, rc.Retimed)
		}
	}
	if cc.WritePackets != tc.Writes || cc.Atomics != tc.FetchAdds {
		failures = append(failures, fmt.Sprintf("the target applied %d WRITE packets and %d atomics, the translator sent %d and %d",
			cc.WritePackets, cc.Atomics, tc.Writes, tc.FetchAdds))
	}
	return failures
}

// newReporters opens one reporter per primitive the plan sends, indexed by
// opcode. Each binds its own loopback address 127.a.b.i (a, b random), so
// that each can listen for NACKs on the DTA ack port of its own address; the
// addresses are random so that runs side by side do not collide. Where only
// 127.0.0.1 exists (not Linux), the reporters share it and NACKs are off.
// The translator sends its NACKs to dta.AckPort, its default. Reports carry
// wide sequence numbers: the translator applies each once and NACKs what
// it missed or could not take, and the reporters slow down and resend.
func newReporters(p *plan, to netip.AddrPort) (reps [5]*reporter.Reporter, nacks string, err error) {
	rate := p.cfg.Rate / float64(p.streams()) // each stream's share of -rate
	closeAll := func() {
		for i, r := range reps {
			if r != nil {
				r.Close()
				reps[i] = nil
			}
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for try := 0; try < 8; try++ {
		base := [4]byte{127, byte(1 + rng.IntN(254)), byte(rng.IntN(256)), 0}
		ok := true
		for op := range reps {
			if op == 0 || p.n[op] == 0 {
				continue
			}
			a := base
			a[3] = byte(op)
			reps[op], err = reporter.New(reporter.Config{ // confirmed delivery
				Translator: to,
				Local:      netip.AddrPortFrom(netip.AddrFrom4(a), 0),
				Rate:       rate,
			})
			if err != nil {
				ok = false
				break
			}
		}
		if ok {
			return reps, "on", nil
		}
		closeAll()
		if !errors.Is(err, syscall.EADDRINUSE) {
			break // no such address here: share 127.0.0.1
		}
	}
	for op := range reps {
		if op == 0 || p.n[op] == 0 {
			continue
		}
		// Without NACKs nothing slows a reporter down: a pace keeps loopback
		// UDP from dropping.
		if rate == 0 {
			rate = fallbackRate
		}
		if reps[op], err = reporter.New(reporter.Config{Translator: to, Delivery: reporter.FireAndForget, Sequenced: true, WideSequence: true, Rate: rate}); err != nil {
			closeAll()
			return reps, "", err
		}
	}
	return reps, "off (one loopback address)", nil
}

// progress prints the progress line.
type progress struct {
	w        io.Writer
	quiet    bool
	terminal bool
	total    int
	start    time.Time
	lastLine time.Time
}

// sentByAll is sentBy summed over reporters.
func sentByAll(cs []reporter.Counters) (reports, datagrams uint64) {
	for _, c := range cs {
		r, d := sentBy(c)
		reports, datagrams = reports+r, datagrams+d
	}
	return reports, datagrams
}

// sentBy returns the reports a reporter sent and the datagrams they took:
// each report once, plus its resends after NACKs and the probes of the
// last report.
func sentBy(c reporter.Counters) (reports, datagrams uint64) {
	return c.Datagrams - min(c.Datagrams, c.Resent+c.Probes), c.Datagrams
}

// show prints the progress: reports sent of the total, the datagrams
// they took (resends and probes apart) and the datagrams the translator
// received.
func (pr *progress) show(reports, datagrams, received uint64, final bool) {
	if pr.quiet {
		return
	}
	el := time.Since(pr.start)
	line := fmt.Sprintf("sent %d/%d reports in %d datagrams (%d resends and probes), translator received %d datagrams, %.0f datagrams/s",
		reports, pr.total, datagrams, datagrams-reports, received, float64(received)/el.Seconds())
	switch {
	case pr.terminal:
		fmt.Fprintf(pr.w, "\r%-80s", line)
		if final {
			fmt.Fprintln(pr.w)
		}
	case final || time.Since(pr.lastLine) >= time.Second:
		pr.lastLine = time.Now()
		fmt.Fprintln(pr.w, line)
	}
}
