package systest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dtakit/dtakit/internal/test/proctest"
	"github.com/dtakit/dtakit/internal/udpio"
)

// pairs is how many alternating pairs the paired benchmarks run: the
// machine's load changes over seconds, so only figures measured side by
// side, in alternating order, compare.
var pairs = flag.Int("pairs", 1, "alternating pairs the paired benchmarks run (-args -pairs N)")

// profile, when set, makes BenchmarkDeployed's daemons write CPU profiles
// there (collector.pprof, translator.pprof, report.pprof), the last pair's;
// BenchmarkSources's into DIR/sources1 and DIR/sources4.
var profile = flag.String("profile", "", "directory for CPU profiles of BenchmarkDeployed's and BenchmarkSources's daemons (-args -profile DIR)")

// benchReports is b.N reports, at least 20 000: go test runs a benchmark
// once with b.N = 1 before the -benchtime it was asked for, and that run
// warms the processes up. Use -benchtime=1000000x.
func benchReports(b *testing.B) int { return max(b.N, 20_000) }

// BenchmarkDeployed runs, in alternating rounds (-args -pairs N), the
// three daemons as users deploy them (dtacollector with the README's
// instances, dtatranslator and dtareport with every default), the same
// with dtareport -split (a reporter per primitive, as the quickstart has)
// and the in-process quickstart (examples/quickstart: the same work in one
// process, four reporters), b.N reports each, and the loopback ceiling
// (udpio.MeasureCeiling, 64-byte datagrams in batches of 128) for scale.
// Each reports reports/s, lost and unconfirmed reports and datagrams per
// report, and their ratios to the quickstart once both ran.
//
//	go test ./internal/test/systest -run '^$' -bench Deployed -benchtime 1000000x -args -pairs 3
//
// -args -profile DIR writes the daemons' CPU profiles (the last pair's)
// into DIR: go tool pprof -top DIR/translator.pprof.
func BenchmarkDeployed(b *testing.B) {
	qs := proctest.Build(b, "github.com/dtakit/dtakit/examples/quickstart", "quickstart")
	b.Run("ceiling", func(b *testing.B) {
		c, err := udpio.MeasureCeiling(benchReports(b), 64, 128)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(c.Rate(), "datagrams/s")
		b.ReportMetric(float64(c.Sent-c.Received), "lost")
	})
	for i := range *pairs {
		// rates by sub-benchmark; each run after the quickstart, or the
		// quickstart after the others, reports the ratio to it.
		rates := map[string]float64{}
		ratios := func(b *testing.B, name string) {
			q := rates["quickstart"]
			for _, d := range []string{"daemons", "daemons-split"} {
				if rates[d] > 0 && q > 0 && (name == d || name == "quickstart") {
					b.ReportMetric(rates[d]/q, d+"/quickstart")
				}
			}
		}
		daemons := func(name string, repArgs ...string) {
			b.Run(name, func(b *testing.B) {
				p := startConfigured(b, benchReports(b), 4096, options{profile: *profile})
				p.repArgs = append(p.repArgs, repArgs...)
				r := p.sources(b, 1)
				rates[name] = r.rate
				r.report(b)
				ratios(b, name)
				p.stop(b)
				if *profile != "" {
					p.stopCollector(b)
				}
			})
		}
		runs := []func(){
			func() { daemons("daemons") },
			func() { daemons("daemons-split", "-split") },
			func() {
				b.Run("quickstart", func(b *testing.B) {
					r := quickstart(b, qs, benchReports(b))
					rates["quickstart"] = r.rate
					r.report(b)
					ratios(b, "quickstart")
				})
			},
		}
		if i%2 == 1 {
			slices.Reverse(runs)
		}
		for _, run := range runs {
			run()
		}
	}
}

// BenchmarkSources runs the daemons with every default and b.N reports
// from one dtareport (sources=1); from four dtareport processes at once,
// each from its own loopback address (127.x.y.z) with its own seed and a
// quarter of the reports (sources=4); and from one dtareport -split, four
// reporters from four addresses in one process (sources=4-split), in
// alternating rounds (-args -pairs N). The last of a round reports the
// ratios to one source (4/1-sources, 4-split/1-sources). reports/s is all
// the reports over the time from the first start to the last exit.
//
//	go test ./internal/test/systest -run '^$' -bench Sources -benchtime 1000000x -args -pairs 3
//
// -args -profile DIR writes the daemons' CPU profiles (the last round's)
// into DIR/1, DIR/4 and DIR/4-split.
func BenchmarkSources(b *testing.B) {
	type run struct {
		name  string
		procs int  // dtareport processes
		split bool // one dtareport -split: 4 reporters, 4 addresses
	}
	runs := []run{{"sources=1", 1, false}, {"sources=4", 4, false}, {"sources=4-split", 1, true}}
	for i := range *pairs {
		rates := map[string]float64{}
		// ratios reports each run's rate over one source's, once the
		// round's runs all have one.
		ratios := func(b *testing.B) {
			if len(rates) < len(runs) || rates["sources=1"] == 0 {
				return
			}
			for _, r := range runs[1:] {
				b.ReportMetric(rates[r.name]/rates["sources=1"], strings.TrimPrefix(r.name, "sources=")+"/1-sources")
			}
		}
		order := slices.Clone(runs)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, r := range order {
			b.Run(r.name, func(b *testing.B) {
				o := options{}
				if *profile != "" {
					o.profile = filepath.Join(*profile, strings.TrimPrefix(r.name, "sources="))
					if err := os.MkdirAll(o.profile, 0o755); err != nil {
						b.Fatal(err)
					}
				}
				p := startConfigured(b, benchReports(b), 4096, o)
				if r.split {
					p.repArgs = append(p.repArgs, "-split")
				}
				d := p.sources(b, r.procs)
				rates[r.name] = d.rate
				d.report(b)
				ratios(b)
				p.stop(b)
				if *profile != "" {
					p.stopCollector(b)
				}
			})
		}
	}
}

// delivery is what a benchmark run delivered.
type delivery struct {
	rate              float64 // reports per second
	lost, unconfirmed uint64
	// datagrams is the datagrams per report on the translator's sockets,
	// both ways: every datagram the pipeline sent, but those lost.
	datagrams float64
}

// report reports d's metrics.
func (d delivery) report(b *testing.B) {
	b.ReportMetric(d.rate, "reports/s")
	b.ReportMetric(float64(d.lost), "lost")
	b.ReportMetric(float64(d.unconfirmed), "unconfirmed")
	if d.datagrams > 0 {
		b.ReportMetric(d.datagrams, "datagrams/report")
	}
}

// sources runs s dtareport processes at once, each from its own loopback
// address, p.n/s reports each (the first takes the remainder) with its
// own seed. Every report must be sent; those not confirmed are counted
// (and the translator's count is checked only when there are none).
func (p *pipeline) sources(b *testing.B, s int) delivery {
	type proc struct {
		cmd       *exec.Cmd
		out, logs bytes.Buffer
	}
	procs := make([]*proc, s)
	b.ResetTimer()
	start := time.Now()
	for i := range procs {
		n := p.n / s
		if i == 0 {
			n += p.n % s
		}
		ip := fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(250))
		if i == 0 {
			ip = p.reporterIP
		}
		args := []string{"-translator", p.report, "-local", ip + ":0",
			"-count", strconv.Itoa(n), "-keys", strconv.Itoa(p.st.Keys), "-seed", strconv.FormatUint(p.st.Seed+uint64(i), 10)}
		if i == 0 {
			args = append(args, p.repArgs...)
		}
		pr := &proc{cmd: exec.Command(p.dtareport, args...)}
		pr.cmd.Stdout, pr.cmd.Stderr = &pr.out, &pr.logs
		proctest.DieWithTest(pr.cmd)
		if err := pr.cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { pr.cmd.Process.Kill(); pr.cmd.Wait() })
		procs[i] = pr
	}
	var d delivery
	total := 0
	// A NACKed Key-Write that a newer report of its key made moot is
	// confirmed without a resend (docs/DTA-WIRE.md, Superseded): the
	// translator never applies it.
	var superseded uint64
	for i, pr := range procs {
		err := pr.cmd.Wait()
		var res reportResult
		if jerr := json.Unmarshal(pr.out.Bytes(), &res); jerr != nil {
			b.Fatalf("dtareport %d: %v, output %q\n%s", i, err, pr.out.String(), pr.logs.String())
		}
		total += res.Reports
		d.lost += res.Counters.Lost
		d.unconfirmed += res.Counters.Unconfirmed
		superseded += res.Counters.Superseded
		// Exit status 3 is reports not confirmed: counted in the metrics
		// lost and unconfirmed, which must be 0.
		if err != nil && pr.cmd.ProcessState.ExitCode() != 3 {
			b.Fatalf("dtareport %d: %v: %+v\n%s", i, err, res, pr.logs.String())
		}
	}
	el := time.Since(start)
	b.StopTimer()
	d.rate = float64(total) / el.Seconds()
	if total != p.n {
		b.Fatalf("%d sources: %d of %d reports sent", s, total, p.n)
	}
	if d.lost != 0 || d.unconfirmed != 0 {
		b.Logf("%d sources: %d lost, %d unconfirmed: not every report was delivered", s, d.lost, d.unconfirmed)
		return d
	}
	var st struct {
		Counters struct {
			Translated                                                               [5]uint64
			ReportDatagramsIn, ReportDatagramsOut, RDMADatagramsIn, RDMADatagramsOut uint64
		} `json:"counters"`
	}
	if err := get(p.trHTTP+"/v1/translator", &st); err != nil {
		b.Fatal(err)
	}
	c := st.Counters
	d.datagrams = float64(c.ReportDatagramsIn+c.ReportDatagramsOut+c.RDMADatagramsIn+c.RDMADatagramsOut) / float64(p.n)
	if got := st.Counters.Translated[1] + st.Counters.Translated[2] + st.Counters.Translated[3] + st.Counters.Translated[4]; got != uint64(p.n)-superseded {
		b.Errorf("the translator translated %d reports, the reporters confirmed %d, %d of them superseded", got, p.n, superseded)
	}
	return d
}

var (
	quickRate  = regexp.MustCompile(`send phase: (\d+) reports received and acknowledged in [0-9.]+ s: (\d+) reports/s`)
	quickLoss  = regexp.MustCompile(`\bLost:(\d+)\b`)
	quickUncon = regexp.MustCompile(`\bUnconfirmed:(\d+)\b`)
	quickDgram = regexp.MustCompile(`datagrams per report: .*; ([0-9.]+) in all`)
)

// quickstart runs the quickstart binary qs with n reports and returns its
// send phase's rate and its reporters' lost and unconfirmed reports; it
// must exit 0 (every check passed).
func quickstart(b *testing.B, qs string, n int) delivery {
	cmd := exec.Command(qs, "-reports", strconv.Itoa(n), "-quiet", "-v")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	proctest.DieWithTest(cmd)
	b.ResetTimer()
	err := cmd.Run()
	b.StopTimer()
	if err != nil {
		b.Fatalf("quickstart: %v\n%s", err, out.String())
	}
	m := quickRate.FindSubmatch(out.Bytes())
	if m == nil {
		b.Fatalf("quickstart: no send phase rate in\n%s", out.String())
	}
	var d delivery
	d.rate, _ = strconv.ParseFloat(string(m[2]), 64)
	if m := quickDgram.FindSubmatch(out.Bytes()); m != nil {
		d.datagrams, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	// -v prints each reporter's counters (and the translator's, whose
	// Lost counts RDMA packets, and must be 0 too for exit 0).
	for _, line := range bytes.Split(out.Bytes(), []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("reporter ")) {
			continue
		}
		if m := quickLoss.FindSubmatch(line); m != nil {
			v, _ := strconv.ParseUint(string(m[1]), 10, 64)
			d.lost += v
		}
		if m := quickUncon.FindSubmatch(line); m != nil {
			v, _ := strconv.ParseUint(string(m[1]), 10, 64)
			d.unconfirmed += v
		}
	}
	return d
}

// stopCollector ends the collector with SIGTERM and waits for it to exit 0.
func (p *pipeline) stopCollector(t testing.TB) {
	if err := p.coll.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.coll.Cmd.Wait(); err != nil {
		t.Fatalf("collector: %v\n%s", err, p.coll.Logs())
	}
}

// variant is a configuration BenchmarkDefaults measures beside the
// others: the translator's configuration file and more fields of the
// collector's, split by "|".
var variant = flag.String("variant", "", "a configuration BenchmarkDefaults runs too: translator JSON|collector fields (-args -variant '{\"ring_size\": 4096}|\"shards\": 2, ')")

// BenchmarkDefaults runs the daemons with the configuration they had
// before issue 28 chose their defaults from measurements (before:
// translator ring 1024 and one shard, collector one shard), with every
// default (defaults), and with -args -variant, from one dtareport and from
// four at once, -args -pairs N rounds (the order reversed every other
// round).
//
//	go test ./internal/test/systest -run '^$' -bench Defaults -benchtime 1000000x -args -pairs 2
func BenchmarkDefaults(b *testing.B) {
	configs := []struct{ name, tr, coll string }{
		{"before", `{"ring_size": 1024, "shards": 1}`, `"shards": 1, `},
		{"defaults", "", ""},
	}
	if *variant != "" {
		tr, coll, _ := strings.Cut(*variant, "|")
		configs = append(configs, struct{ name, tr, coll string }{"variant", tr, coll})
	}
	for i := range *pairs {
		for _, s := range []int{1, 4} {
			for j := range configs {
				if i%2 == 1 {
					j = len(configs) - 1 - j
				}
				c := configs[j]
				b.Run(fmt.Sprintf("%s/sources=%d", c.name, s), func(b *testing.B) {
					p := startConfigured(b, benchReports(b), 4096, options{trConfig: c.tr, collConfig: c.coll})
					p.sources(b, s).report(b)
					p.stop(b)
				})
			}
		}
	}
}
