package intbridge

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dtakit/dtakit/inband"
)

var t0 = time.Unix(1700000000, 0)

// rec builds a record of flow at t0+ms milliseconds.
func rec(flow uint32, ms int, hops ...Hop) *Record {
	return &Record{Flow: flow, Time: t0.Add(time.Duration(ms) * time.Millisecond), Hops: hops}
}

func qhop(sw uint32, q uint8, occ uint32) Hop {
	return Hop{Switch: sw, Queue: q, Occupancy: occ, Has: HasSwitch | HasQueue}
}

func newDetector(t testing.TB, cfg DetectorConfig) *Detector {
	t.Helper()
	d, err := NewDetector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDetectorQueueLevel: a queue held at 250, above a level of 200, for
// 1000 packets raises one Rise event, and coming back to 100 one Fall
// (the Detector had change events only and raised none).
func TestDetectorQueueLevel(t *testing.T) {
	cfg := DetectorConfig{}
	cfg.Rules[MetricQueueOccupancy] = Rule{Threshold: 1000, Level: 200}
	d := newDetector(t, cfg)
	var got []Event
	for p := range 1000 {
		got = d.Observe(rec(1, p, qhop(7, 3, 250)), got)
	}
	got = d.Observe(rec(1, 1000, qhop(7, 3, 100)), got)
	var queue []Event
	for _, e := range got {
		if e.Metric == MetricQueueOccupancy {
			queue = append(queue, e)
		}
	}
	want := []Event{
		{Kind: Change, Metric: MetricQueueOccupancy, Time: t0, Switch: 7, Queue: 3, Old: 0, New: 250},
		{Kind: Rise, Metric: MetricQueueOccupancy, Time: t0, Switch: 7, Queue: 3, Old: 0, New: 250},
		{Kind: Fall, Metric: MetricQueueOccupancy, Time: t0.Add(time.Second), Switch: 7, Queue: 3, Old: 250, New: 100},
	}
	if !reflect.DeepEqual(queue, want) {
		t.Fatalf("queue events:\n%+v\nwant\n%+v", queue, want)
	}
}

// TestDetectorScripted runs a scripted stream through every rule and
// checks the exact events.
func TestDetectorScripted(t *testing.T) {
	cfg := DetectorConfig{Period: time.Second}
	cfg.Rules[MetricHopLatency] = Rule{Threshold: 100}
	cfg.Rules[MetricFlowLatency] = Rule{Threshold: 500, Level: 5000}
	cfg.Rules[MetricQueueOccupancy] = Rule{NoChange: true, Level: 200}
	cfg.Rules[MetricLinkUtilization] = Rule{Threshold: 10}
	cfg.Rules[MetricQueueCongestion] = Rule{NoChange: true}
	cfg.Rules[MetricDrops] = Rule{Threshold: 2}
	d := newDetector(t, cfg)
	lat := func(sw, l uint32) Hop { return Hop{Switch: sw, Latency: l, Has: HasSwitch | HasLatency} }
	link := func(sw, port, u uint32) Hop {
		return Hop{Switch: sw, Egress: port, TxUtil: u, Has: HasSwitch | HasPorts | HasTxUtil}
	}
	drop := func(sw uint32, q uint8) Hop { return Hop{Switch: sw, Queue: q, Drops: 1, Has: HasSwitch | HasDrops} }
	tuple := inband.FiveTuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 5000, DstPort: 80, Proto: 6}
	path := func(ids ...uint32) (p Path) {
		p.Len = uint8(len(ids))
		copy(p.Nodes[:], ids)
		return p
	}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		r    *Record
		want []Event
	}
	fr := func(ms int, hops ...Hop) *Record {
		r := rec(9, ms, hops...)
		r.Tuple = tuple
		return r
	}
	p123 := path(1, 2, 3)
	steps := []step{
		{fr(0, lat(1, 1000), lat(2, 1000), lat(3, 1000)), []Event{
			{Kind: NewFlow, Metric: MetricPath, New: 3, NewPath: p123},
			{Kind: Change, Metric: MetricHopLatency, Switch: 1, Hop: 0, New: 1000},
			{Kind: Change, Metric: MetricHopLatency, Switch: 2, Hop: 1, New: 1000},
			{Kind: Change, Metric: MetricHopLatency, Switch: 3, Hop: 2, New: 1000},
			{Kind: Change, Metric: MetricFlowLatency, New: 3000, NewPath: p123},
		}},
		// Within the thresholds: nothing.
		{fr(100, lat(1, 1100), lat(2, 950), lat(3, 1000)), nil},
		// Hop 2 moves by 150 > 100, the flow by 150 < 500.
		{fr(200, lat(1, 1000), lat(2, 1150), lat(3, 1000)), []Event{
			{Kind: Change, Metric: MetricHopLatency, Switch: 2, Hop: 1, Old: 1000, New: 1150},
		}},
		// Hop 3 jumps by 3000: a hop change, a flow change and a rise above 5000.
		{fr(300, lat(1, 1000), lat(2, 1150), lat(3, 4000)), []Event{
			{Kind: Change, Metric: MetricHopLatency, Switch: 3, Hop: 2, Old: 1000, New: 4000},
			{Kind: Change, Metric: MetricFlowLatency, Old: 3000, New: 6150, NewPath: p123},
			{Kind: Rise, Metric: MetricFlowLatency, Old: 3000, New: 6150, NewPath: p123},
		}},
		// Rerouted through 4: the path's node IDs, old and new.
		{fr(400, lat(1, 1000), lat(4, 1150), lat(3, 4000)), []Event{
			{Kind: Change, Metric: MetricPath, Old: 3, New: 3, OldPath: p123, NewPath: path(1, 4, 3)},
			{Kind: Change, Metric: MetricHopLatency, Switch: 1, Hop: 0, New: 1000},
			{Kind: Change, Metric: MetricHopLatency, Switch: 4, Hop: 1, New: 1150},
			{Kind: Change, Metric: MetricHopLatency, Switch: 3, Hop: 2, New: 4000},
		}},
		// A second with no event: the periodic push.
		{fr(1400, lat(1, 1000), lat(4, 1150), lat(3, 4000)), []Event{
			{Kind: Periodic, Metric: MetricPath, Old: 3, New: 3, OldPath: path(1, 4, 3), NewPath: path(1, 4, 3)},
			{Kind: Periodic, Metric: MetricFlowLatency, Old: 6150, New: 6150, NewPath: path(1, 4, 3)},
			{Kind: Periodic, Metric: MetricHopLatency, Switch: 1, Hop: 0, Old: 1000, New: 1000},
			{Kind: Periodic, Metric: MetricHopLatency, Switch: 4, Hop: 1, Old: 1150, New: 1150},
			{Kind: Periodic, Metric: MetricHopLatency, Switch: 3, Hop: 2, Old: 4000, New: 4000},
		}},
		// Switch-keyed metrics: links, queues, congestion, drops.
		{rec(0, 1500, link(5, 7, 50), qhop(5, 1, 150)), []Event{
			{Kind: NewFlow, Metric: MetricPath, Time: at(1500), New: 2, NewPath: path(5, 5)},
			{Kind: Change, Metric: MetricLinkUtilization, Time: at(1500), Switch: 5, Port: 7, New: 50},
		}},
		{rec(0, 1600, link(5, 7, 65), qhop(5, 1, 201)), []Event{
			{Kind: Change, Metric: MetricLinkUtilization, Time: at(1600), Switch: 5, Port: 7, Old: 50, New: 65},
			{Kind: Rise, Metric: MetricQueueOccupancy, Time: at(1600), Switch: 5, Queue: 1, Old: 150, New: 201},
		}},
		{rec(0, 1700, Hop{Switch: 5, Queue: 1, Congestion: 300, Has: HasSwitch | HasCongestion}), []Event{
			{Kind: Change, Metric: MetricPath, Time: at(1700), Old: 2, New: 1, OldPath: path(5, 5), NewPath: path(5)},
		}},
		{rec(0, 1710, drop(5, 1)), []Event{
			{Kind: Change, Metric: MetricDrops, Time: at(1710), Switch: 5, Queue: 1, New: 1},
		}},
		{rec(0, 1720, drop(5, 1)), nil},
		{rec(0, 1730, drop(5, 1)), nil},
		{rec(0, 1740, drop(5, 1)), []Event{
			{Kind: Change, Metric: MetricDrops, Time: at(1740), Switch: 5, Queue: 1, Old: 1, New: 4},
		}},
		// The switch's shared buffer, keyed by (switch, buffer).
		{rec(0, 1750, Hop{Switch: 5, Buffer: 2, BufferOccupancy: 900, Has: HasSwitch | HasBuffer}), []Event{
			{Kind: Change, Metric: MetricBufferOccupancy, Time: at(1750), Switch: 5, Queue: 2, New: 900},
		}},
	}
	for i, s := range steps {
		for j := range s.want {
			w := &s.want[j]
			if w.Time.IsZero() {
				w.Time = s.r.Time
			}
			if s.r.Flow == 9 && w.Switch == 0 || w.Metric == MetricHopLatency {
				w.Flow, w.Tuple = 9, tuple
			}
		}
		got := d.Observe(s.r, nil)
		if !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d: events\n%+v\nwant\n%+v", i, got, s.want)
		}
	}
	c := d.Counters()
	if c.Records != uint64(len(steps)) || c.Events[MetricPath][Change] != 2 || c.Events[MetricDrops][Change] != 2 || c.Events[MetricHopLatency][Periodic] != 3 {
		t.Fatalf("counters %+v", c)
	}
}

// TestDetectorWithinT checks INTCollector's guarantee: with a change rule
// of threshold T, the value last reported for every key (the value a
// database holds) stays within T of the value the network has, after
// every record, while T itself is changed at runtime.
func TestDetectorWithinT(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cfg := DetectorConfig{}
	for m := range cfg.Rules {
		cfg.Rules[m] = Rule{Threshold: 50}
	}
	d := newDetector(t, cfg)
	const flows, hops = 20, 4
	type key struct {
		m        Metric
		flow, sw uint32
		sub      uint32
		hop      uint8
	}
	stored := map[key]uint32{}
	lat := make([][hops]uint32, flows)
	occ := make([][hops]uint32, flows)
	hs := make([]Hop, hops)
	threshold := uint32(50)
	var ev []Event
	for p := range 20000 {
		if p == 10000 {
			// Tighter thresholds from now on.
			threshold = 10
			for m := MetricPath; int(m) < NumMetrics; m++ {
				d.SetRule(m, Rule{Threshold: threshold})
			}
		}
		f := rng.IntN(flows)
		var total uint32
		for h := range hops {
			lat[f][h] = uint32(max(0, int(lat[f][h])+rng.IntN(41)-20))
			occ[f][h] = uint32(max(0, int(occ[f][h])+rng.IntN(21)-10))
			// Each flow's hop h is switch 10·f+h, its own queue.
			hs[h] = Hop{Switch: uint32(10*f + h), Latency: lat[f][h], Queue: 1, Occupancy: occ[f][h], Has: HasSwitch | HasLatency | HasQueue}
			total += lat[f][h]
		}
		ev = d.Observe(&Record{Flow: uint32(f), Time: t0.Add(time.Duration(p)), Hops: hs}, ev[:0])
		for _, e := range ev {
			switch e.Metric {
			case MetricHopLatency:
				stored[key{m: e.Metric, flow: e.Flow, hop: e.Hop}] = e.New
			case MetricFlowLatency:
				stored[key{m: e.Metric, flow: e.Flow}] = e.New
			case MetricQueueOccupancy:
				stored[key{m: e.Metric, sw: e.Switch, sub: uint32(e.Queue)}] = e.New
			}
		}
		for h := range hops {
			if s := stored[key{m: MetricHopLatency, flow: uint32(f), hop: uint8(h)}]; diff(s, lat[f][h]) > threshold {
				t.Fatalf("record %d: hop %d latency %d, stored %d: beyond %d", p, h, lat[f][h], s, threshold)
			}
			if s := stored[key{m: MetricQueueOccupancy, sw: uint32(10*f + h), sub: 1}]; diff(s, occ[f][h]) > threshold {
				t.Fatalf("record %d: queue %d, stored %d: beyond %d", p, occ[f][h], s, threshold)
			}
		}
		if s := stored[key{m: MetricFlowLatency, flow: uint32(f)}]; diff(s, total) > threshold {
			t.Fatalf("record %d: flow latency %d, stored %d: beyond %d", p, total, s, threshold)
		}
	}
	c := d.Counters()
	if c.Events[MetricHopLatency][Change] == 0 || c.Events[MetricHopLatency][Change] > c.Records*hops/2 {
		t.Fatalf("%d hop latency events for %d records", c.Events[MetricHopLatency][Change], c.Records)
	}
}

// TestDetectorCut runs a synthetic trace through the detector, as
// INTCollector's paper measures its event detection: 1000 flows of 200
// packets over 5 hops, latencies jittering by up to ±20 around a base,
// with 50 injected latency jumps of 500 and 10 path changes. Every
// injected change is an event; the values stored fall by an order of
// magnitude against storing every packet's metadata.
func TestDetectorCut(t *testing.T) {
	cfg := DetectorConfig{Period: time.Second}
	cfg.Rules[MetricHopLatency] = Rule{Threshold: 100}
	cfg.Rules[MetricFlowLatency] = Rule{Threshold: 1000}
	cfg.Rules[MetricQueueOccupancy] = Rule{Threshold: 1000}
	d := newDetector(t, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	const flows, packets, hops = 1000, 200, 5
	type jump struct{ flow, packet, hop int }
	jumps := map[jump]bool{}
	for len(jumps) < 50 {
		jumps[jump{rng.IntN(flows), 1 + rng.IntN(packets-1), rng.IntN(hops)}] = true
	}
	reroutes := map[[2]int]bool{}
	for len(reroutes) < 10 {
		reroutes[[2]int{rng.IntN(flows), 1 + rng.IntN(packets-1)}] = true
	}
	base := make([][hops]uint32, flows)
	path := make([][hops]uint32, flows)
	for f := range flows {
		for h := range hops {
			base[f][h] = 1000 + uint32(rng.IntN(500))
			path[f][h] = uint32(100*h + rng.IntN(4))
		}
	}
	var events []Event
	seen := map[jump]bool{}
	paths := 0
	hs := make([]Hop, hops)
	var r Record
	for p := range packets {
		for f := range flows {
			if reroutes[[2]int{f, p}] {
				path[f][2] += 1000
			}
			for h := range hops {
				if jumps[jump{f, p, h}] {
					base[f][h] += 500
				}
				hs[h] = Hop{Switch: path[f][h], Latency: base[f][h] + uint32(rng.IntN(41)) - 20, Queue: 0, Occupancy: uint32(rng.IntN(800)), Has: HasSwitch | HasLatency | HasQueue}
			}
			r = Record{Flow: uint32(f), Time: t0.Add(time.Duration(p*flows+f) * 10 * time.Microsecond), Hops: hs}
			events = d.Observe(&r, events[:0])
			for _, e := range events {
				switch {
				case e.Metric == MetricHopLatency && e.Kind == Change && p > 0:
					seen[jump{int(e.Flow), p, int(e.Hop)}] = true
				case e.Metric == MetricPath && e.Kind == Change:
					if e.OldPath.Nodes[2]+1000 != e.NewPath.Nodes[2] {
						t.Errorf("path change %v -> %v", e.OldPath.Slice(), e.NewPath.Slice())
					}
					paths++
				}
			}
		}
	}
	for j := range jumps {
		if !seen[j] {
			t.Errorf("the latency jump %+v made no event", j)
		}
	}
	if paths != len(reroutes) {
		t.Errorf("%d path changes seen, %d made", paths, len(reroutes))
	}
	var n uint64
	for m := range d.Counters().Events {
		for _, c := range d.Counters().Events[m] {
			n += c
		}
	}
	all := float64(flows * packets * hops * 2)
	cut := all / float64(n)
	t.Logf("%d records, %d events (one value each) of %.0f values: a %.0f× cut", d.Counters().Records, n, all, cut)
	if cut < 10 {
		t.Errorf("the detector cut the values stored only %.1f×", cut)
	}
}

func TestDetectorEviction(t *testing.T) {
	d := newDetector(t, DetectorConfig{MaxFlows: 2, MaxKeys: 1})
	h := []Hop{qhop(1, 0, 5)}
	kinds := func(es []Event) (k []EventKind) {
		for _, e := range es {
			if e.Metric == MetricPath {
				k = append(k, e.Kind)
			}
		}
		return k
	}
	// Second chance: flows 1 and 2, both inserted since the hand passed,
	// make flow 3 take a whole turn, unmarking both, to evict the first.
	d.Observe(rec(1, 0, h...), nil)
	d.Observe(rec(2, 1, h...), nil)
	d.Observe(rec(3, 2, h...), nil) // evicts 1
	// Flow 4 evicts 2, not observed since the hand passed it, not 3,
	// inserted since.
	d.Observe(rec(4, 3, h...), nil)
	if k := kinds(d.Observe(rec(3, 4, h...), nil)); len(k) != 0 {
		t.Fatalf("flow 3, kept: %v", k)
	}
	if k := kinds(d.Observe(rec(2, 5, h...), nil)); len(k) != 1 || k[0] != NewFlow {
		t.Fatalf("flow 2, evicted: %v", k)
	}
	// One key row: a second queue evicts the first, whose next value is new.
	if ev := d.Observe(rec(2, 6, qhop(1, 1, 5)), nil); len(ev) != 1 || ev[0].Metric != MetricQueueOccupancy || ev[0].Old != 0 {
		t.Fatalf("second queue: %+v", ev)
	}
	if c := d.Counters(); c.Evicted != 4 {
		t.Fatalf("evicted %d, want 4 (flows 1, 2 and one for 2 again, queue 0)", c.Evicted)
	}
	if _, err := NewDetector(DetectorConfig{MaxFlows: -1}); err == nil {
		t.Fatal("a negative table size accepted")
	}
	if err := d.SetRule(0, Rule{}); err == nil {
		t.Fatal("metric 0 accepted")
	}
	if m, err := ParseMetric("link-utilization"); err != nil || m != MetricLinkUtilization || Rise.String() != "rise" {
		t.Fatal("names")
	}
}

func TestDetectorAllocs(t *testing.T) {
	d := newDetector(t, DetectorConfig{Period: time.Millisecond})
	hs := benchRecordHops()
	r := Record{Time: t0, Hops: hs}
	ev := make([]Event, 0, 64)
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		i++
		r.Flow, r.Time = uint32(i%3000), t0.Add(time.Duration(i)*time.Microsecond)
		hs[2].Latency = uint32(i % 7 * 100)
		ev = d.Observe(&r, ev[:0])
	}); a != 0 {
		t.Fatalf("Observe allocates %.1f times", a)
	}
}

// benchRecordHops is a five-hop path with latency, queue and utilisation.
func benchRecordHops() []Hop {
	hs := make([]Hop, 5)
	for h := range hs {
		hs[h] = Hop{Switch: uint32(100 * (h + 1)), Egress: 1, Latency: 500, Occupancy: 10, TxUtil: 30, Has: HasSwitch | HasPorts | HasLatency | HasQueue | HasTxUtil}
	}
	return hs
}

// BenchmarkDetector: steady, records of 10 000 known flows; churn, a new
// flow every record into a full table of 65 536.
func BenchmarkDetector(b *testing.B) {
	hs := benchRecordHops()
	cfg := DetectorConfig{Period: time.Second}
	for m := range cfg.Rules {
		cfg.Rules[m] = Rule{Threshold: 100}
	}
	b.Run("steady", func(b *testing.B) {
		d := newDetector(b, cfg)
		var ev []Event
		r := Record{Time: t0, Hops: hs}
		for k := range uint32(10000) {
			r.Flow = k
			ev = d.Observe(&r, ev[:0])
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r.Flow, r.Time = uint32(i%10000), t0.Add(time.Duration(i))
			ev = d.Observe(&r, ev[:0])
		}
	})
	b.Run("churn", func(b *testing.B) {
		d := newDetector(b, cfg)
		var ev []Event
		r := Record{Time: t0, Hops: hs}
		for k := range uint32(1 << 16) {
			r.Flow = k
			ev = d.Observe(&r, ev[:0])
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r.Flow, r.Time = 1<<16+uint32(i), t0.Add(time.Duration(i))
			ev = d.Observe(&r, ev[:0])
		}
	})
}

// TestDetectorPeriodKeys: a (switch, queue) key with no event for P pushes
// its value again at its next observation, then waits another P.
func TestDetectorPeriodKeys(t *testing.T) {
	cfg := DetectorConfig{Period: time.Second}
	cfg.Rules[MetricQueueOccupancy] = Rule{Threshold: 100}
	d := newDetector(t, cfg)
	var got []string
	for _, s := range []struct {
		ms  int
		occ uint32
	}{{0, 10}, {500, 20}, {1500, 12}, {2000, 15}, {2400, 300}, {3000, 310}, {3500, 305}} {
		for _, e := range d.Observe(rec(1, s.ms, qhop(7, 1, s.occ)), nil) {
			if e.Metric == MetricQueueOccupancy {
				got = append(got, fmt.Sprintf("%d %s %d->%d", s.ms, e.Kind, e.Old, e.New))
			}
		}
	}
	want := "0 change 0->10\n1500 periodic 10->12\n2400 change 12->300\n3500 periodic 300->305"
	if strings.Join(got, "\n") != want {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
}

// TestDetectorRuntimeKeys: a rule or period changed at runtime applies to
// the per-hop keys already seen (queue occupancy and congestion, link
// utilisation, buffer occupancy) from the next record: a tighter
// threshold, a level crossed, a period set where there was none.
func TestDetectorRuntimeKeys(t *testing.T) {
	metrics := []Metric{MetricQueueOccupancy, MetricQueueCongestion, MetricLinkUtilization, MetricBufferOccupancy}
	cfg := DetectorConfig{}
	for _, m := range metrics {
		cfg.Rules[m] = Rule{Threshold: 100}
	}
	d := newDetector(t, cfg)
	hop := func(v uint32) Hop {
		return Hop{Switch: 7, Queue: 1, Occupancy: v, Congestion: v, Egress: 3, TxUtil: v, Buffer: 2, BufferOccupancy: v,
			Has: HasSwitch | HasQueue | HasCongestion | HasPorts | HasTxUtil | HasBuffer}
	}
	step := func(ms int, v uint32, want string) {
		t.Helper()
		var got []string
		for _, e := range d.Observe(rec(1, ms, hop(v)), nil) {
			if e.Metric != MetricPath {
				got = append(got, fmt.Sprintf("%s %s %d->%d", e.Metric, e.Kind, e.Old, e.New))
			}
		}
		if len(got) != len(metrics) && want != "" || len(got) != 0 && want == "" {
			t.Fatalf("%d ms, value %d: events %q, want %q for each metric", ms, v, got, want)
		}
		for i, g := range got {
			if w := fmt.Sprintf("%s %s", metrics[i], want); g != w {
				t.Fatalf("%d ms, value %d: event %q, want %q", ms, v, g, w)
			}
		}
	}
	step(0, 500, "change 0->500")
	step(10, 550, "") // within 100
	for _, m := range metrics {
		if err := d.SetRule(m, Rule{Threshold: 10}); err != nil {
			t.Fatal(err)
		}
	}
	step(20, 550, "change 500->550") // beyond 10
	step(30, 555, "")
	for _, m := range metrics {
		d.SetRule(m, Rule{Threshold: 1000, Level: 560})
	}
	step(40, 561, "rise 550->561")
	step(50, 600, "")
	for _, m := range metrics {
		d.SetRule(m, Rule{Threshold: 1000, Level: 700})
	}
	step(60, 600, "fall 561->600") // at or below the new level
	step(70, 601, "")
	d.SetPeriod(time.Second)
	step(900, 602, "")
	step(1070, 603, "periodic 600->603") // a second after the last event
	step(1500, 604, "")
	d.SetPeriod(0)
	step(5000, 605, "")
}

// TestEventString: an event in words gives every value its unit and a
// path change the node IDs of both paths, not their lengths.
func TestEventString(t *testing.T) {
	d := newDetector(t, DetectorConfig{})
	var evs []Event
	evs = d.Observe(rec(7, 0, Hop{Switch: 1, Has: HasSwitch}, Hop{Switch: 2, Has: HasSwitch}), evs)
	evs = d.Observe(rec(7, 1, Hop{Switch: 1, Has: HasSwitch}, Hop{Switch: 3, Latency: 40, Has: HasSwitch | HasLatency}), evs)
	var got []string
	for i := range evs {
		got = append(got, evs[i].String())
	}
	want := []string{
		"path new-flow flow 0x00000007 path [1 2] at " + t0.UTC().Format(time.RFC3339Nano),
		"path change flow 0x00000007 path [1 2] -> [1 3] at " + t0.Add(time.Millisecond).UTC().Format(time.RFC3339Nano),
		"hop-latency change flow 0x00000007 switch 3 hop 1: 0 ns -> 40 ns at " + t0.Add(time.Millisecond).UTC().Format(time.RFC3339Nano),
		"flow-latency change flow 0x00000007: 0 ns -> 40 ns at " + t0.Add(time.Millisecond).UTC().Format(time.RFC3339Nano),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	q := Event{Kind: Rise, Metric: MetricQueueOccupancy, Switch: 5, Queue: 2, Old: 10, New: 9000}
	if s := q.String(); s != "queue-occupancy rise switch 5 queue 2: 10 cells -> 9000 cells" {
		t.Fatalf("%q", s)
	}
}
