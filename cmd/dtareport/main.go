// Command dtareport sends DTA reports to a translator at a chosen rate: a
// synthetic stream (package internal/app/stream: report i is a function of the
// flags and i alone) or the reports of a pcap file, replayed. As package
// reporter's zero Config does, it numbers reports with wide sequence
// numbers, takes the translator's acks and NACKs, slows down and resends,
// and counts every report it could not confirm applied. -fire-and-forget
// sends each report once and listens for nothing, as a switch does: then
// no report is confirmed.
//
//	dtareport -translator 127.0.0.1:40040 -count 1000000 -rate 200000
//	dtareport -mix keywrite,append -keys 4096 -count 100000
//	dtareport -pcap reports.pcap -count 0        # the file's valid reports once
//	dtareport -split -count 1000000              # a reporter per primitive, from 127.0.0.1, .2, .3, .4
//
// -split runs one reporter per place of -mix, each from its own address
// (acks come to the ack port of each), as the quickstart does. One reporter
// already sends its batch grouped by primitive (runs of equal datagrams,
// one message each for the kernel); -split adds a credit window and a
// sending goroutine per primitive, so more reports are in flight at once,
// and the translator sees several sources. Each key's, list's and flow's
// reports still come from one reporter, in order.
//
// At the end it prints one JSON object on standard output: the reports
// sent, the time taken, the delivery and the reporter's counters. With
// -losses FILE it writes each report lost or unconfirmed to FILE as a JSON
// line, {"seq": N, "reason": R}: N is the report's index in the stream
// (the first sent is 0), R the NACK's reason (4, unconfirmed: it may or
// may not have been applied; 5, rejected: the collector's instance cannot
// hold it, such as a postcard value outside its set, counted in Rejected
// too).
//
// Exit status: 0 when every report sent was confirmed applied; 3 when
// some were not (lost: NACKed and not resent; unconfirmed: never
// acknowledged, as when no translator listens, or sent with
// -fire-and-forget), and standard error says how many of each; 2 for bad
// flags; 1 for any other failure.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/intbridge"
	"github.com/dtakit/dtakit/internal/app/cli"
	"github.com/dtakit/dtakit/internal/app/cpuprofile"
	"github.com/dtakit/dtakit/internal/app/stream"
	"github.com/dtakit/dtakit/internal/app/threads"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/reporter"
)

// Result is what dtareport prints.
type Result struct {
	Reports  int               `json:"reports"`
	Delivery string            `json:"delivery"`
	Seconds  float64           `json:"seconds"`
	Rate     float64           `json:"reports_per_second"`
	Counters reporter.Counters `json:"counters"`
	// Threads is the threads that ran Go code (GOMAXPROCS): one per
	// reporter, unless the GOMAXPROCS environment variable said.
	Threads int `json:"gomaxprocs"`
}

func main() {
	threadsFor = threads.Set
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// threadsFor makes the reporters the threads that run Go code (package
// internal/app/threads): each sends from one goroutine. main sets it, so
// that tests running run in-process keep their own.
var threadsFor = func(reporters int) int { return runtime.GOMAXPROCS(0) }

func run(args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseFlags(args, stderr)
	if !ok {
		return code
	}
	stopProfile, err := o.profile()
	if err != nil {
		return exit(stderr, err)
	}
	defer stopProfile(func(err error) { fmt.Fprintln(stderr, "dtareport:", err) })
	if o.split {
		return o.sendSplit(stdout, stderr)
	}
	procs := threadsFor(1)
	next, err := o.source()
	if err != nil {
		return exit(stderr, err)
	}
	rep, losses, err := o.newReporter()
	if err != nil {
		return exit(stderr, err)
	}
	var stop atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; stop.Store(true) }()

	start := time.Now()
	sent, err := send(rep, next, &stop, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "dtareport:", err)
		rep.Close()
		return 1
	}
	if err := rep.Close(); err != nil {
		fmt.Fprintln(stderr, "dtareport:", err)
	}
	if losses != nil {
		if err := losses.close(); err != nil {
			return exit(stderr, err)
		}
	}
	el := time.Since(start)
	res := Result{Reports: sent, Delivery: o.rcfg.Delivery.String(), Seconds: el.Seconds(), Rate: float64(sent) / el.Seconds(), Counters: rep.Counters(), Threads: procs}
	return finish(res, o.rcfg, stdout, stderr)
}

// finish prints res and returns the exit status.
func finish(res Result, rcfg reporter.Config, stdout, stderr io.Writer) int {
	b, _ := json.Marshal(res)
	fmt.Fprintln(stdout, string(b))
	if msg := notConfirmed(res, rcfg.Translator, rcfg.AckPort); msg != "" {
		fmt.Fprintln(stderr, "dtareport:", msg)
		return 3
	}
	return 0
}

// options are the flags, checked; rcfg is the reporter's Config they make.
type options struct {
	rcfg      reporter.Config
	count     int
	synthetic stream.Synthetic
	mix       string
	pcapFile  string
	pcapPort  uint16
	lossFile  string
	split     bool                                            // -split
	profile   func() (stop func(fail func(error)), err error) // -cpuprofile
}

// usageError is a bad flag: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usage(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// exit prints err and returns its exit status: 2 for a bad flag or
// reporter configuration, 1 for anything else.
func exit(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "dtareport:", err)
	if errors.As(err, new(usageError)) || errors.Is(err, reporter.ErrConfig) {
		return 2
	}
	return 1
}

// parseFlags parses and checks the flags; on a failure it has said why and
// returns the exit status.
func parseFlags(args []string, stderr io.Writer) (*options, int, bool) {
	fs := flag.NewFlagSet("dtareport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cli.Usage(fs, synopsis, exitStatus)
	to := fs.String("translator", "127.0.0.1:40040", "the translator's report address")
	local := fs.String("local", "", "the address reports are sent from, a specific one unless -fire-and-forget (default: the one the system routes to the translator from)")
	count := fs.Int("count", 100000, "reports to send (with -pcap, 0 replays the file once)")
	rate := fs.Float64("rate", 0, "reports per second, 0 for as fast as the translator allows")
	fireAndForget := fs.Bool("fire-and-forget", false, "send each report once and listen for nothing, as a switch does: no report is confirmed (exit status 3)")
	nacks := fs.Bool("nacks", false, "deprecated, does nothing: acks and NACKs are taken unless -fire-and-forget")
	ackPort := fs.Uint("ack-port", uint(dta.AckPort), "port the translator's acks and NACKs arrive on")
	mix := fs.String("mix", "keywrite,keyincrement,postcard,append", "primitives, in turn (repeat one to weigh it)")
	keys := fs.Int("keys", stream.Default.Keys, "distinct keys (postcard flows) per primitive")
	redundancy := fs.Uint("redundancy", uint(stream.Default.Redundancy), "Key-Write copies and Key-Increment counters")
	hops := fs.Int("hops", stream.Default.Hops, "postcard path length")
	lists := fs.Int("lists", stream.Default.Lists, "Append lists")
	entry := fs.Int("entry-size", stream.Default.EntrySize, "Append entry size in bytes")
	universe := fs.Int("universe", stream.Default.Universe, "postcard values are 1..universe")
	seed := fs.Uint64("seed", stream.Default.Seed, "seed of the values")
	pcapFile := fs.String("pcap", "", "replay the reports of this pcap file instead")
	pcapPort := fs.Uint("pcap-port", uint(dta.ReportPort), "UDP destination port of the reports in the pcap")
	lossFile := fs.String("losses", "", "write each report lost or unconfirmed to this file as a JSON line")
	split := fs.Bool("split", false, "one reporter per place in -mix, each from its own address (-local's, then the next ones): a credit window and a sending goroutine per primitive")
	profile := cpuprofile.Flag(fs)
	if code, ok := cli.Parse(fs, args); !ok {
		return nil, code, false
	}
	if *nacks {
		fmt.Fprintln(stderr, "dtareport: -nacks is deprecated and does nothing: acks and NACKs are taken unless -fire-and-forget")
		if *fireAndForget {
			return nil, exit(stderr, usage("-nacks and -fire-and-forget: choose one")), false
		}
	}
	o := &options{count: *count, mix: *mix, pcapFile: *pcapFile, lossFile: *lossFile, split: *split, profile: profile,
		synthetic: stream.Synthetic{Synthetic: primitive.Synthetic{Seed: *seed, Keys: *keys, Redundancy: int(*redundancy), Hops: *hops, Lists: *lists, EntrySize: *entry, Universe: *universe}}}
	if err := o.check(*to, *local, *rate, *ackPort, *redundancy, *pcapPort); err != nil {
		return nil, exit(stderr, err), false
	}
	if *fireAndForget {
		o.rcfg.Delivery = reporter.FireAndForget
	}
	return o, 0, true
}

// check checks the flags that need no file and fills in the reporter's
// addresses, rate and ack port.
func (o *options) check(to, local string, rate float64, ackPort, redundancy, pcapPort uint) error {
	translator, err := netip.ParseAddrPort(to)
	if err != nil {
		return usage("-translator: %v", err)
	}
	var from netip.AddrPort
	if local != "" {
		if from, err = netip.ParseAddrPort(local); err != nil {
			return usage("-local: %v", err)
		}
	}
	if o.count < 0 || (o.count == 0 && o.pcapFile == "") {
		return usage("-count %d: want at least 1", o.count)
	}
	if rate < 0 || ackPort == 0 || ackPort > 65535 || redundancy > 255 || pcapPort > 65535 {
		return usage("-rate, -ack-port, -redundancy or -pcap-port out of range")
	}
	o.pcapPort = uint16(pcapPort)
	o.rcfg = reporter.Config{Translator: translator, Local: from, Rate: rate, AckPort: uint16(ackPort)}
	return nil
}

// source returns the function that fills the next report and returns
// false at the end: the pcap's reports or the synthetic stream.
func (o *options) source() (func(r *dta.Report) bool, error) {
	if o.pcapFile != "" {
		return o.pcapSource()
	}
	s, err := o.stream()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, s.EntrySize)
	i := 0
	return func(r *dta.Report) bool {
		if i == o.count {
			return false
		}
		s.Report(i, r, buf)
		i++
		return true
	}, nil
}

// stream returns the synthetic stream the flags describe.
func (o *options) stream() (*stream.Synthetic, error) {
	m, err := stream.ParseMix(o.mix)
	if err != nil {
		return nil, usage("-mix: %v", err)
	}
	s := o.synthetic
	s.Mix = m
	if err := s.Validate(); err != nil {
		return nil, usage("%v", err)
	}
	return &s, nil
}

// pcapSource returns the reports of the pcap file in turn, -count of them
// (0: each once).
func (o *options) pcapSource() (func(r *dta.Report) bool, error) {
	reports, err := readPcap(o.pcapFile, o.pcapPort)
	if err != nil {
		return nil, err
	}
	if len(reports) == 0 {
		return nil, usage("-pcap %s: no report to UDP port %d", o.pcapFile, o.pcapPort)
	}
	n := o.count
	if n == 0 {
		n = len(reports)
	}
	i := 0
	return func(r *dta.Report) bool {
		if i == n {
			return false
		}
		*r = reports[i%len(reports)]
		i++
		return true
	}, nil
}

// newReporter opens the loss log (-losses) and the reporter.
func (o *options) newReporter() (*reporter.Reporter, *lossLog, error) {
	losses, err := o.openLosses()
	if err != nil {
		return nil, nil, err
	}
	if losses != nil {
		o.rcfg.OnLoss = losses.add
	}
	rep, err := reporter.New(o.rcfg)
	if err != nil {
		return nil, nil, err
	}
	return rep, losses, nil
}

// openLosses opens the loss log (-losses), nil without it.
func (o *options) openLosses() (*lossLog, error) {
	if o.lossFile == "" {
		return nil, nil
	}
	if o.rcfg.Delivery == reporter.FireAndForget {
		return nil, usage("-losses with -fire-and-forget: no report is confirmed, so none is known lost")
	}
	return newLossLog(o.lossFile)
}

// send sends the reports next gives until it gives none or stop is set,
// and returns how many it sent. A datagram the socket refuses (nothing
// listening yet) is counted in Errors and the stream goes on; the first
// such error is shown. Any other error ends it.
func send(rep *reporter.Reporter, next func(*dta.Report) bool, stop *atomic.Bool, stderr io.Writer) (int, error) {
	sent := 0
	var r dta.Report
	var sendErr error
	for !stop.Load() && next(&r) {
		if err := rep.Send(&r); err != nil {
			var netErr *net.OpError
			if !errors.As(err, &netErr) {
				return sent, err
			}
			if sendErr == nil {
				sendErr = err
				fmt.Fprintln(stderr, "dtareport:", err, "(counted; going on)")
			}
		}
		sent++
	}
	return sent, nil
}

// sendSplit sends -count reports of the stream with one reporter per
// place of its Mix, reporter j from the j-th address from -local's (each
// needs its own, for the acks on the ack port; 127.0.0.1 without -local)
// sending reports j, j+m, j+2m, ... (m places): each sends reports of one
// primitive, which are of one size. -rate is shared among them; a loss is
// logged under its index in the stream.
func (o *options) sendSplit(stdout, stderr io.Writer) int {
	if o.pcapFile != "" {
		return exit(stderr, usage("-split takes a synthetic stream, not -pcap"))
	}
	s, err := o.stream()
	if err != nil {
		return exit(stderr, err)
	}
	losses, err := o.openLosses()
	if err != nil {
		return exit(stderr, err)
	}
	rcfg, from, count := o.rcfg, o.rcfg.Local, o.count
	if !from.IsValid() {
		from = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0)
	}
	m := len(s.Mix)
	procs := threadsFor(min(m, runtime.NumCPU()))
	rcfg.Rate /= float64(m)
	reps := make([]*reporter.Reporter, m)
	addr := from.Addr()
	for j := range reps {
		c := rcfg
		c.Local = netip.AddrPortFrom(addr, from.Port())
		addr = addr.Next()
		if losses != nil {
			c.OnLoss = func(seq uint32, b []byte, reason dta.Reason) { losses.add(seq*uint32(m)+uint32(j), b, reason) }
		}
		var err error
		if reps[j], err = reporter.New(c); err != nil {
			fmt.Fprintf(stderr, "dtareport: -split: reporter %d of %d from %v: %v\n", j+1, m, c.Local, err)
			for _, r := range reps[:j] {
				r.Close()
			}
			if errors.Is(err, reporter.ErrConfig) {
				return 2
			}
			return 1
		}
	}
	var stop atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; stop.Store(true) }()
	start := time.Now()
	var wg sync.WaitGroup
	sent := make([]int, m)
	failed := make([]error, m)
	closeErrs := make([]error, m)
	for j, rep := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each reporter closes when its share is sent: every Close
			// waits a while for NACKs of its last reports, and the waits
			// overlap.
			defer func() { closeErrs[j] = rep.Close() }()
			var r dta.Report
			buf := make([]byte, s.EntrySize)
			for i := j; i < count && !stop.Load(); i += m {
				s.Report(i, &r, buf)
				// A datagram the socket refuses is counted in Errors, as
				// without -split; anything else ends this reporter.
				if err := rep.Send(&r); err != nil {
					var netErr *net.OpError
					if !errors.As(err, &netErr) {
						failed[j] = err
						return
					}
				}
				sent[j]++
			}
		}()
	}
	wg.Wait()
	res := Result{Delivery: rcfg.Delivery.String(), Threads: procs}
	code := 0
	for j, rep := range reps {
		if closeErrs[j] != nil {
			fmt.Fprintln(stderr, "dtareport:", closeErrs[j])
		}
		if failed[j] != nil {
			fmt.Fprintln(stderr, "dtareport:", failed[j])
			code = 1
		}
		res.Reports += sent[j]
		addCounters(&res.Counters, rep.Counters())
	}
	if losses != nil {
		if err := losses.close(); err != nil {
			fmt.Fprintln(stderr, "dtareport:", err)
			return 1
		}
	}
	el := time.Since(start)
	res.Seconds, res.Rate = el.Seconds(), float64(res.Reports)/el.Seconds()
	if fc := finish(res, rcfg, stdout, stderr); code == 0 {
		code = fc
	}
	return code
}

// addCounters adds o's counts to c's (every field of reporter.Counters is
// a uint64 count).
func addCounters(c *reporter.Counters, o reporter.Counters) {
	cv, ov := reflect.ValueOf(c).Elem(), reflect.ValueOf(o)
	for i := range cv.NumField() {
		cv.Field(i).SetUint(cv.Field(i).Uint() + ov.Field(i).Uint())
	}
}

// notConfirmed says why some reports of res were not confirmed applied,
// or returns "" when every one was.
func notConfirmed(res Result, translator netip.AddrPort, ackPort uint16) string {
	c := res.Counters
	if c.Lost == 0 && c.Unconfirmed == 0 {
		return ""
	}
	msg := fmt.Sprintf("%d of %d reports not confirmed applied: %d lost (NACKed and not resent), %d unconfirmed (never acknowledged: they may or may not have been applied)",
		c.Lost+c.Unconfirmed, res.Reports, c.Lost, c.Unconfirmed)
	if res.Delivery == reporter.FireAndForget.String() {
		msg += "; -fire-and-forget: nothing confirms a report"
	} else if c.Acks == 0 {
		msg += fmt.Sprintf("; no ack came: is a translator listening on %v, sending acks to port %d here?", translator, ackPort)
	}
	if c.Rejected > 0 {
		msg += fmt.Sprintf("; %d of the lost were rejected (NACK reason 5): the collector's instance cannot hold them, such as postcard values outside its set", c.Rejected)
	}
	if c.Errors > 0 {
		msg += fmt.Sprintf("; the socket refused %d datagrams (nothing listening at %v)", c.Errors, translator)
	}
	return msg
}

// readPcap returns the DTA reports in the UDP datagrams to port of a pcap
// or pcapng file (intbridge.Replay reads it). A datagram that is not a
// valid report is skipped (a sender cannot encode it).
func readPcap(name string, port uint16) ([]dta.Report, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []dta.Report
	_, err = intbridge.Replay(f, port, func(payload []byte, _ time.Time) error {
		if r, err := dta.ParseReport(append([]byte(nil), payload...)); err == nil {
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// lossLog writes the reports OnLoss hands over as JSON lines.
type lossLog struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	err error
}

func newLossLog(name string) (*lossLog, error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	return &lossLog{f: f, w: bufio.NewWriter(f)}, nil
}

func (l *lossLog) add(seq uint32, _ []byte, reason dta.Reason) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := fmt.Fprintf(l.w, "{\"seq\": %d, \"reason\": %d}\n", seq, reason); err != nil && l.err == nil {
		l.err = err
	}
}

func (l *lossLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Flush(); err != nil && l.err == nil {
		l.err = err
	}
	if err := l.f.Close(); err != nil && l.err == nil {
		l.err = err
	}
	if l.err != nil {
		return fmt.Errorf("-losses: %w", l.err)
	}
	return nil
}
