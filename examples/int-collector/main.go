// Command int-collector is an INT collector built on dtakit: it replays a
// capture of Telemetry Reports (v2.0) through the INT→DTA bridge into a DTA
// collector, then prints what the collector's memory answers — each flow's
// path (Key-Write) and report count (Key-Increment), the drops and
// congestion events (Append), per-hop postcards (Postcarding) — and what
// the analytics beside the bridge computed: INTCollector's events and
// per-switch histograms.
//
// Without -pcap it generates a trace of INT-MD path traces first (24 flows
// over a five-hop leaf-spine path, one rerouted and one congested halfway,
// some packets dropped or congested at the sink); with -per-hop, per-hop
// reports (INT-XD) of the same kind of fabric instead. Everything runs in this
// process over loopback UDP: collector, translator, reporter.
//
//	go run ./examples/int-collector
//	go run ./examples/int-collector -pcap reports.pcap -int-port 5000 -report-port 32766
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/inband"
	"github.com/dtakit/dtakit/intbridge"
	"github.com/dtakit/dtakit/internal/app/cli"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/translator"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "int-collector:", err)
		os.Exit(1)
	}
}

const (
	pathHops   = 5
	redundancy = 2
)

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("int-collector", flag.ContinueOnError)
	cli.Usage(fs, synopsis, exitStatus)
	pcap := fs.String("pcap", "", "capture of Telemetry Reports to replay (default: generate one)")
	intPort := fs.Uint("int-port", 5000, "UDP port of INT over UDP inside the reports' packets")
	reportPort := fs.Uint("report-port", 32766, "UDP port the Telemetry Reports are sent to")
	flows := fs.Int("flows", 24, "flows in the generated trace")
	packets := fs.Int("packets", 40, "packets per flow in the generated trace")
	write := fs.String("write", "", "write the generated trace to this file and exit")
	hopReports := fs.Bool("per-hop", false, "generate per-hop reports (INT-XD postcards) instead of INT-MD path traces")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *intPort > 65535 || *reportPort > 65535 || *intPort == 0 || *reportPort == 0 {
		return fmt.Errorf("ports must be 1..65535, not %d and %d", *intPort, *reportPort)
	}
	if *pcap == "" || *write != "" {
		path := *write
		if path == "" {
			dir, err := os.MkdirTemp("", "int-collector")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			path = filepath.Join(dir, "reports.pcap")
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if *hopReports {
			_, err = generatePerHop(f, *flows, *packets, uint16(*reportPort), 1)
		} else {
			_, err = generate(f, *flows, *packets, uint16(*intPort), uint16(*reportPort), 1)
		}
		if err = errors.Join(err, f.Close()); err != nil {
			return fmt.Errorf("generating %s: %w", path, err)
		}
		if *write != "" {
			return nil
		}
		*pcap = path
	}
	return collect(*pcap, uint16(*intPort), uint16(*reportPort), out)
}

// pipeline is the DTA side: a collector with the bridge's three instances,
// a translator and a reporter, on loopback.
type pipeline struct {
	c    *collector.Collector
	kw   *keywrite.Store
	ki   *keyincr.Store
	pc   *postcard.Store
	al   *appendlist.Store
	tr   *translator.Translator
	rep  *reporter.Reporter
	stop context.CancelFunc
}

func startPipeline() (*pipeline, error) {
	p := &pipeline{}
	var err error
	if p.c, err = collector.New(collector.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0"), CMPort: 41050}); err != nil {
		return nil, err
	}
	kwl := keywrite.Layout{Slots: 1 << 14, DataSize: 4 * pathHops}
	kil := keyincr.Layout{Slots: 1 << 14}
	all := appendlist.Layout{Lists: 2, Entries: 4096, EntrySize: intbridge.EventEntrySize, Batch: 1, Markers: true}
	if p.kw, err = p.c.AddKeyWrite(kwl); err != nil {
		return nil, err
	}
	if p.ki, err = p.c.AddKeyIncrement(kil); err != nil {
		return nil, err
	}
	if p.al, err = p.c.AddAppend(all); err != nil {
		return nil, err
	}
	// Per-hop reports (INT-XD, INT-MX) become postcards: without this
	// instance the translator refuses every one.
	if p.pc, err = p.c.AddPostcard(postcard.Layout{Hops: pathHops, Chunks: 1 << 12, Copies: redundancy}); err != nil {
		return nil, err
	}
	if err := p.c.Start(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	go p.c.Serve(ctx)
	// A ring that holds the whole replay: the reporter does not pace.
	if p.tr, err = translator.New(translator.Config{Collectors: []netip.AddrPort{p.c.Addr()}, CMPort: 41050, RingSize: 16384,
		ReportAddr: netip.MustParseAddrPort("127.0.0.1:0")}); err != nil {
		return nil, err
	}
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if err := p.tr.Start(sctx); err != nil {
		return nil, err
	}
	if p.rep, err = reporter.New(reporter.Config{Translator: p.tr.ReportAddr(), Delivery: reporter.FireAndForget}); err != nil {
		return nil, err
	}
	return p, nil
}

// drain waits until the collector holds everything sent.
func (p *pipeline) drain() error {
	if err := p.rep.Close(); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond) // the last reports cross the socket
	if err := p.tr.Close(10 * time.Second); err != nil {
		return err
	}
	p.c.Counters() // orders the target's writes before our reads
	return nil
}

func (p *pipeline) close() {
	p.stop()
	p.c.Close()
}

func collect(pcap string, intPort, reportPort uint16, out io.Writer) error {
	f, err := os.Open(pcap)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := startPipeline()
	if err != nil {
		return fmt.Errorf("starting the collector and translator: %w", err)
	}
	defer p.close()
	a, err := newAnalysis(intPort)
	if err != nil {
		return err
	}
	st, err := a.replay(f, reportPort, p)
	if err != nil {
		return err
	}
	bc, tc := a.b.Counters(), p.tr.Counters()
	fmt.Fprintf(out, "replayed %s: %d packets, %d Telemetry Reports, %d skipped\n", pcap, st.Packets, st.Reports, st.Skipped)
	fmt.Fprintf(out, "bridge: %d reports (%d malformed, %d without a flow, %d bad stacks) -> %d Key-Writes, %d Key-Increments, %d Appends, %d Postcards\n",
		bc.Individuals, bc.Malformed, bc.NoFlow, bc.BadStack, bc.KeyWrites, bc.Increments, bc.Appends, bc.Postcards)
	fmt.Fprintf(out, "translator: %d RDMA writes, %d fetch-and-adds, %d reports dropped\n", tc.Writes, tc.FetchAdds, tc.Dropped+tc.NACKs+tc.Rejected)
	if err := a.printFlows(out, p); err != nil {
		return err
	}
	if err := printLists(out, p); err != nil {
		return err
	}
	a.printEvents(out)
	a.printHistograms(out)
	return nil
}

// analysis is the bridge and the analytics over a replayed capture.
type analysis struct {
	b          *intbridge.Bridge
	det        *intbridge.Detector
	agg        *intbridge.Aggregator
	flows      map[uint32]inband.FiveTuple
	postcarded map[uint32]bool
	events     []intbridge.Event
}

func newAnalysis(intPort uint16) (*analysis, error) {
	b, err := intbridge.New(intbridge.Config{INTPort: intPort, PathHops: pathHops, PathRedundancy: redundancy, CountRedundancy: redundancy})
	if err != nil {
		return nil, err
	}
	cfg := intbridge.DetectorConfig{}
	cfg.Rules[intbridge.MetricHopLatency] = intbridge.Rule{Threshold: 1000}
	cfg.Rules[intbridge.MetricFlowLatency] = intbridge.Rule{Threshold: 2000}
	cfg.Rules[intbridge.MetricQueueOccupancy] = intbridge.Rule{Threshold: 1000, Level: 5000}
	cfg.Rules[intbridge.MetricQueueCongestion] = intbridge.Rule{NoChange: true, Level: 5000}
	cfg.Rules[intbridge.MetricLinkUtilization] = intbridge.Rule{Threshold: 100}
	cfg.Rules[intbridge.MetricDrops] = intbridge.Rule{} // every drop
	det, agg, err := intbridge.NewAnalytics(cfg, intbridge.AggregatorConfig{LatencyBins: intbridge.Bins{250, 500, 1000, 2000, 4000, 8000}, QueueBins: intbridge.Bins{16, 32, 64, 1024}})
	if err != nil {
		return nil, err
	}
	return &analysis{b: b, det: det, agg: agg, flows: map[uint32]inband.FiveTuple{}, postcarded: map[uint32]bool{}}, nil
}

// replay bridges the capture's Telemetry Reports to the pipeline's
// translator and runs the analytics on them, then waits for the
// translator's writes.
func (a *analysis) replay(f io.Reader, reportPort uint16, p *pipeline) (intbridge.ReplayStats, error) {
	var sendErr error
	st, err := intbridge.Replay(f, reportPort, func(payload []byte, ts time.Time) error {
		reps, err := a.b.Handle(payload)
		if err != nil {
			return nil // counted by the bridge as Malformed
		}
		for i := range reps {
			if err := p.rep.Send(&reps[i]); err != nil && sendErr == nil {
				sendErr = err
			}
		}
		recs := a.b.Records(ts)
		for i := range recs {
			r := &recs[i]
			if r.PerHop {
				a.postcarded[r.Flow] = true
			}
			a.flows[r.Flow] = r.Tuple
			a.agg.Add(r)
			a.events = a.det.Observe(r, a.events)
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	if sendErr != nil {
		return st, fmt.Errorf("sending DTA reports: %w", sendErr)
	}
	return st, p.drain()
}

// printFlows prints each flow's path (its Key-Write, or its postcards) and
// report count as the collector's memory holds them.
func (a *analysis) printFlows(out io.Writer, p *pipeline) error {
	fmt.Fprintln(out, "\nflows: path (Key-Write), reports (Key-Increment)")
	keys := make([]uint32, 0, len(a.flows))
	for k := range a.flows {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y uint32) int { return a.flows[x].Src.Compare(a.flows[y].Src) })
	// Postcards decode against the node IDs they may hold.
	table, err := postcard.NewTable(p.pc.Layout(), a.agg.SwitchIDs())
	if err != nil {
		return err
	}
	for _, k := range keys {
		t := a.flows[k]
		path := "?"
		if res, err := p.kw.Query(k, redundancy, keywrite.Plurality); err == nil && res.Status == keywrite.Found {
			var ids []string
			for i := 0; i+4 <= len(res.Data); i += 4 {
				if id := binary.BigEndian.Uint32(res.Data[i:]); id != 0 {
					ids = append(ids, fmt.Sprint(id))
				}
			}
			path = strings.Join(ids, " ")
		} else if pp, o := p.pc.Query(table, k); a.postcarded[k] && o == postcard.Found {
			var ids []string
			for _, id := range pp.Hops[:pp.Len] {
				ids = append(ids, fmt.Sprint(id))
			}
			path = strings.Join(ids, " ")
		}
		count, _ := p.ki.Query(k, redundancy)
		fmt.Fprintf(out, "flow %#08x %v:%d > %v:%d proto %d path %s reports %d\n", k, t.Src, t.SrcPort, t.Dst, t.DstPort, t.Proto, path, count)
	}
	return nil
}

// printLists prints the drop and congestion Append lists.
func printLists(out io.Writer, p *pipeline) error {
	fmt.Fprintln(out, "\ndrops and congestion (Append lists 0 and 1)")
	for list, name := range []string{"drop", "congestion"} {
		rd, err := p.al.Reader(uint32(list))
		if err != nil {
			return err
		}
		buf := make([]byte, 4096*intbridge.EventEntrySize)
		n, err := rd.Read(buf)
		if err != nil {
			return fmt.Errorf("reading the %s list: %w", name, err)
		}
		for e := buf[:n*intbridge.EventEntrySize]; len(e) >= intbridge.EventEntrySize; e = e[intbridge.EventEntrySize:] {
			node, flow, detail := binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:]), binary.BigEndian.Uint32(e[8:])
			if list == 0 {
				fmt.Fprintf(out, "drop node %d flow %#08x queue %d reason %d\n", node, flow, detail>>24, detail>>16&0xFF)
			} else {
				fmt.Fprintf(out, "congestion node %d flow %#08x queue %d occupancy %d %s\n", node, flow, detail>>24, detail&0xFFFFFF, intbridge.MetricQueueOccupancy.Unit())
			}
		}
	}
	return nil
}

// printEvents prints the event counts and the events worth reading.
func (a *analysis) printEvents(out io.Writer) {
	fmt.Fprintln(out, "\nevents (INTCollector's rules: metric, kind, count)")
	dc := a.det.Counters()
	for m := intbridge.MetricPath; int(m) < intbridge.NumMetrics; m++ {
		for k := intbridge.NewFlow; k <= intbridge.Periodic; k++ {
			if n := dc.Events[m][k]; n > 0 {
				fmt.Fprintf(out, "events %s %s %d\n", m, k, n)
			}
		}
	}
	for _, e := range a.events {
		if e.Metric == intbridge.MetricPath && e.Kind == intbridge.Change || e.Kind == intbridge.Change && e.Old != 0 || e.Kind == intbridge.Rise || e.Kind == intbridge.Fall {
			fmt.Fprintf(out, "event %s\n", e.String())
		}
	}
}

// printHistograms prints each switch's histograms.
func (a *analysis) printHistograms(out io.Writer) {
	fmt.Fprintln(out, "\nper-switch hop latency and queue occupancy histograms (packets per bin, the bin's upper bound in brackets)")
	for _, id := range a.agg.SwitchIDs() {
		s := a.agg.Switch(id)
		fmt.Fprintf(out, "switch %d packets %d latency (%s) %s queue (%s) %s\n", id, s.Packets,
			intbridge.MetricHopLatency.Unit(), bins(&s.Latency), intbridge.MetricQueueOccupancy.Unit(), bins(&s.Queue))
	}
}

// bins prints a histogram as count[bound] pairs and the count above.
func bins(h *intbridge.Histogram) string {
	var b strings.Builder
	for i, c := range h.Counts {
		if i > 0 {
			b.WriteByte(' ')
		}
		if i < len(h.Bins) {
			fmt.Fprintf(&b, "%d[%d]", c, h.Bins[i])
		} else {
			fmt.Fprintf(&b, "%d[+]", c)
		}
	}
	return b.String()
}
