package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/stream"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/translator"
)

// The geometry the demo does not take from flags.
const (
	redundancy = 2    // N of Key-Write, Key-Increment and Postcarding
	kwData     = 4    // Key-Write data bytes
	hops       = 5    // postcard path length
	universe   = 4096 // postcard values are 1..universe (switch IDs, say)
	lists      = 8    // Append lists
	apBatch    = 16   // Append batch B
	// sigmas is the tolerance: a success rate passes when it is at least
	// expected - sigmas·σ, σ the standard deviation of the success fraction
	// of independent queries, sqrt(Σ p_i(1-p_i))/n. Four σ of a binomial
	// is missed by chance about 3 times in 100000; the queries are not quite
	// independent (two keys that collide fail together), which widens the
	// real spread a little: over 200 seeds at the default loads, the
	// z-score of the measured rate had a standard deviation of 1.02 for
	// Key-Write and 1.11 for exact Key-Increment counts, so 4 binomial σ
	// is at least 3.6 real ones.
	sigmas = 4
	// fallbackRate paces each stream where the reporters cannot take NACKs
	// (one loopback address): nothing else would slow them down.
	fallbackRate = 100000
	// delta is the failure probability the count-min error bound is stated
	// for: a Key-Increment estimate may exceed the truth by more than
	// ε·(stream total) with probability at most delta, ε = keyincr.Epsilon.
	delta = 0.01
)

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

// instances are the collector's four primitive instances.
type instances struct {
	kw    *keywrite.Store
	ki    *keyincr.Store
	pc    *postcard.Store
	table *postcard.Table
	ap    *appendlist.Store
}

// plan is what the streams send, derived from the config: the reports of
// each primitive and the keys they use.
type plan struct {
	cfg                   config
	n                     [5]int // reports per primitive, by dta.Opcode
	dropped               [5]int // reports cfg.drop kept from the sockets
	kwKeys, kiKeys, flows []uint32
	kwSlots, kiSlots      uint64
	chunks                uint32
	entries               int // Append entries per list
	kiTruth               []uint64
	kwLayout              keywrite.Layout
	kiLayout              keyincr.Layout
	pcLayout              postcard.Layout
	apLayout              appendlist.Layout
}

func newPlan(cfg config) (*plan, error) {
	if cfg.Keys < 4 || cfg.Slots < 4 || bits.OnesCount(uint(cfg.Slots)) != 1 || cfg.Reports < 1 || cfg.Rate < 0 {
		return nil, fmt.Errorf("quickstart: -keys and -slots must be at least 4, -slots a power of two, -reports positive, -rate not negative")
	}
	p := &plan{cfg: cfg, kwSlots: uint64(cfg.Slots), kiSlots: uint64(cfg.Slots / 4), chunks: uint32(cfg.Slots / 4)}
	if cfg.Bench {
		p.n[dta.OpKeyWrite] = cfg.Reports / 2
		p.n[dta.OpAppend] = cfg.Reports - cfg.Reports/2
	} else {
		q := cfg.Reports / 4
		p.n[dta.OpKeyWrite], p.n[dta.OpKeyIncrement] = q, q
		p.n[dta.OpPostcard] = q / hops * hops // whole flows only
		p.n[dta.OpAppend] = cfg.Reports - 3*q
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	p.kwKeys = distinctKeys(rng, cfg.Keys)
	p.kiKeys = distinctKeys(rng, cfg.Keys/4)
	p.flows = distinctKeys(rng, cfg.Keys/4)
	p.kiTruth = make([]uint64, len(p.kiKeys))
	perList := (p.n[dta.OpAppend] + lists - 1) / lists
	p.entries = 1 << bits.Len(uint(perList+apBatch)) // room for every entry: nothing is lapped
	var err error
	p.kwLayout = keywrite.Layout{Slots: p.kwSlots, DataSize: kwData}
	if err = p.kwLayout.Validate(); err != nil {
		return nil, err
	}
	p.kiLayout = keyincr.Layout{Slots: p.kiSlots}
	if err = p.kiLayout.Validate(); err != nil {
		return nil, err
	}
	p.pcLayout = postcard.Layout{Hops: hops, Chunks: p.chunks, Copies: redundancy}
	if err := p.pcLayout.Validate(); err != nil {
		return nil, err
	}
	p.apLayout = appendlist.Layout{Lists: lists, Entries: p.entries, EntrySize: 4, Batch: apBatch, Markers: true}
	if err := p.apLayout.Validate(); err != nil {
		return nil, fmt.Errorf("quickstart: too many Append reports for one region: %w", err)
	}
	return p, nil
}

func distinctKeys(rng *rand.Rand, n int) []uint32 {
	seen := make(map[uint32]bool, n)
	keys := make([]uint32, 0, n)
	for len(keys) < n {
		k := rng.Uint32()
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// The streams. Report i of each primitive is a function of i alone, so the
// queries can recompute what was sent last under every key.
//
// Key-Write: key i mod K, round i/K; the data changes every round, so a
// query that returns an older round's data counts as a failure. The data is
// stream.Value(seed, key index, round).
//
// Key-Increment: key i mod K/4, adding 1..8.
func (p *plan) kiAdd(i int) uint64 { return 1 + uint64(stream.Value(p.cfg.Seed^1, i, 0)%8) }

// Postcarding: report i is hop i mod 5 + 1 of flow write w = i/5, flow w mod
// F, round w/F; each flow's five postcards are sent back to back, so the
// translator's cache completes the flow and writes it.
func (p *plan) pcValue(flow, round, hop int) uint32 {
	return 1 + stream.Value(p.cfg.Seed^2, flow*hops+hop, round)%universe
}

// Append: report i appends be32(i/8 + 1) to list i mod 8.

// send sends op's stream. The reporter paces it and slows it down when the
// translator NACKs (package reporter's flow control): the demo has no flow
// control of its own.
func (p *plan) send(ctx context.Context, op dta.Opcode, rep *reporter.Reporter) error {
	n := p.n[op]
	var buf [4]byte
	for i := range n {
		var err error
		switch {
		case p.cfg.drop != nil && p.cfg.drop(op, i):
			p.dropped[op]++
			if op == dta.OpKeyIncrement {
				p.kiTruth[i%len(p.kiKeys)] += p.kiAdd(i)
			}
		case op == dta.OpKeyWrite:
			K := len(p.kwKeys)
			binary.BigEndian.PutUint32(buf[:], stream.Value(p.cfg.Seed, i%K, i/K))
			err = rep.KeyWrite(p.kwKeys[i%K], buf[:], redundancy)
		case op == dta.OpKeyIncrement:
			k, add := i%len(p.kiKeys), p.kiAdd(i)
			p.kiTruth[k] += add
			err = rep.KeyIncrement(p.kiKeys[k], add, redundancy)
		case op == dta.OpPostcard:
			w, hop := i/hops, i%hops
			f, round := w%len(p.flows), w/len(p.flows)
			err = rep.Postcard(p.flows[f], postcard.Hop(hop+1), hops, postcard.Value(p.pcValue(f, round, hop)))
		case op == dta.OpAppend:
			binary.BigEndian.PutUint32(buf[:], uint32(i/lists+1))
			err = rep.Append(uint32(i%lists), buf[:], false)
		}
		if err != nil {
			return err
		}
		if (i+1)%reporter.DefaultBatch == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return rep.Flush()
}

func (p *plan) streams() int {
	s := 0
	for _, n := range p.n {
		if n > 0 {
			s++
		}
	}
	return s
}

func (p *plan) total() int { return p.n[1] + p.n[2] + p.n[3] + p.n[4] }

func decoded(tc translator.Counters) uint64 {
	return tc.Reports[1] + tc.Reports[2] + tc.Reports[3] + tc.Reports[4]
}

// run is the whole demo: it returns nil when every check passed.
func run(ctx context.Context, cfg config, w io.Writer) error {
	p, err := newPlan(cfg)
	if err != nil {
		return err
	}
	lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	// One shard per core on both sides: the translator's shards each
	// connect from their own port, and the target reads each connection on
	// its own socket.
	shards := runtime.GOMAXPROCS(0)
	c, err := collector.New(collector.Config{Addr: netip.AddrPortFrom(lo, 0), Shards: shards})
	if err != nil {
		return err
	}
	defer c.Close()
	var in instances
	if in.kw, err = c.AddKeyWrite(p.kwLayout); err != nil {
		return err
	}
	if !cfg.Bench {
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
	defer cancel()
	go c.Serve(sctx)

	tr, err := translator.New(translator.Config{
		ReportAddr: netip.AddrPortFrom(lo, 0),
		Collectors: []netip.AddrPort{c.Addr()},
		Shards:     shards,
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
	trClosed := false
	defer func() {
		if !trClosed {
			tr.Close(0)
		}
	}()
	reps, nacks, err := newReporters(p, tr.ReportAddr())
	if err != nil {
		return err
	}
	defer func() {
		for _, r := range reps {
			if r != nil {
				r.Close()
			}
		}
	}()
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	err = tr.Start(cctx)
	ccancel()
	if err != nil {
		return fmt.Errorf("quickstart: connecting the translator: %w", err)
	}
	fmt.Fprintf(w, "collector at %v: Key-Write %d slots, ", c.Addr(), p.kwSlots)
	if !cfg.Bench {
		fmt.Fprintf(w, "Key-Increment %d counters, Postcarding %d chunks, ", p.kiSlots, p.chunks)
	}
	fmt.Fprintf(w, "Append %d lists of %d entries; translator at %v; %d reporters, NACKs %s\n",
		lists, p.entries, tr.ReportAddr(), p.streams(), nacks)

	// Send phase.
	sentSoFar := func() (reports, datagrams uint64) {
		for _, r := range reps {
			if r != nil {
				rep, dg := sentBy(r.Counters())
				reports, datagrams = reports+rep, datagrams+dg
			}
		}
		return reports, datagrams
	}
	start := time.Now()
	errs := make(chan error, len(reps))
	var senders sync.WaitGroup
	for op, r := range reps {
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
	prog := progress{w: w, quiet: cfg.Quiet, terminal: cfg.Terminal, total: p.total(), start: start}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
sending:
	for {
		select {
		case <-sendersDone:
			break sending
		case <-tick.C:
			reports, datagrams := sentSoFar()
			prog.show(reports, datagrams, decoded(tr.Counters()), false)
		}
	}
	select {
	case err := <-errs:
		return err
	default:
	}

	// Wait until the translator decoded every datagram the reporters sent
	// (resends included) and every NACK it sent was received, or nothing
	// has moved for a second. Closing the reporters then answers the last
	// NACKs and probes for lost last reports.
	last, lastMove := uint64(0), time.Now()
	for {
		tc := tr.Counters()
		var reports, sent, nackd uint64
		for _, r := range reps {
			if r != nil {
				rc := r.Counters()
				rep, dg := sentBy(rc)
				reports, sent = reports+rep, sent+dg
				nackd += rc.NACKs
			}
		}
		got := decoded(tc)
		if got == sent && tc.NACKs+tc.Missing == nackd {
			break
		}
		if got != last {
			last, lastMove = got, time.Now()
		} else if time.Since(lastMove) > time.Second {
			break
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
	var repc [5]reporter.Counters
	for op, r := range reps {
		if r != nil {
			if err := r.Close(); err != nil {
				return err
			}
			repc[op] = r.Counters()
			reps[op] = nil
		}
	}
	// Close flushes the postcard cache and the partial Append batches and
	// waits until every RDMA operation is acknowledged.
	closeErr := tr.Close(10 * time.Second)
	trClosed = true
	elapsed := time.Since(start)
	tc := tr.Counters()
	cc := c.Counters() // also orders this goroutine after the target's writes
	var reportsAll, sentAll uint64
	for _, rc := range repc {
		rep, dg := sentBy(rc)
		reportsAll, sentAll = reportsAll+rep, sentAll+dg
	}
	prog.show(reportsAll, sentAll, decoded(tc), true)

	if cfg.beforeQuery != nil {
		cfg.beforeQuery(&in)
	}
	rows, received := p.query(&in, tc, cc, repc)
	var failures []string
	fmt.Fprintln(w)
	printTable(w, rows)
	for _, r := range rows {
		for _, ck := range r.checks {
			if !ck.ok() {
				failures = append(failures, fmt.Sprintf("%s: %s %.4f%% is below the minimum %.4f%% (expected %.4f%% - %d sigma)%s",
					r.name, ck.query, 100*ck.success, 100*ck.min, 100*ck.expect, sigmas, r.note))
			}
		}
	}
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
	if received > 0 {
		per := func(v uint64) float64 { return float64(v) / float64(received) }
		fmt.Fprintf(w, "datagrams per report: translator's report sockets %.3f in, %.3f out; its RoCEv2 sockets %.3f out, %.3f in; %.3f in all\n",
			per(tc.ReportDatagramsIn), per(tc.ReportDatagramsOut), per(tc.RDMADatagramsOut), per(tc.RDMADatagramsIn),
			per(tc.ReportDatagramsIn+tc.ReportDatagramsOut+tc.RDMADatagramsOut+tc.RDMADatagramsIn))
	}
	if cfg.stats != nil {
		*cfg.stats = stats{received, elapsed}
	}
	rate := float64(received) / elapsed.Seconds()
	fmt.Fprintf(w, "send phase: %d reports received and acknowledged in %.2f s: %.0f reports/s\n", received, elapsed.Seconds(), rate)

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
	if len(failures) > 0 {
		return fmt.Errorf("quickstart: FAILED:\n  %s", strings.Join(failures, "\n  "))
	}
	fmt.Fprintln(w, "all checks passed")
	return nil
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
