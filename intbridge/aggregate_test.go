package intbridge

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dtakit/dtakit/inband"
)

func TestHistogram(t *testing.T) {
	h := NewHistogram(PowerOfTwoBins())
	for v := uint32(1); v <= 1000; v++ {
		h.Add(v)
	}
	h.Add(0)
	if h.Count != 1001 || h.Min != 0 || h.Max != 1000 || h.Sum != 500500 {
		t.Fatalf("%+v", h)
	}
	// The median 500 lies in [256, 512): its bucket's top is 511.
	if q := h.Quantile(0.5); q != 511 {
		t.Fatalf("p50 bound %d, want 511", q)
	}
	if q := h.Quantile(1); q != 1000 {
		t.Fatalf("p100 %d, want the max", q)
	}
	if q := h.Quantile(0); q != 0 {
		t.Fatalf("p0 %d", q)
	}
	// Configured bins: ≤10, ≤100, ≤1000, above.
	c := NewHistogram(Bins{10, 100, 1000})
	for _, v := range []uint32{0, 10, 11, 100, 101, 1000, 1001, 5000} {
		c.Add(v)
	}
	if want := []uint64{2, 2, 2, 2}; !slicesEqual(c.Counts, want) {
		t.Fatalf("counts %v, want %v", c.Counts, want)
	}
	// The bit count for powers of two agrees with the binary search.
	fast, slow := NewHistogram(PowerOfTwoBins()), Histogram{Bins: PowerOfTwoBins(), Counts: make([]uint64, 33)}
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 100000 {
		v := rng.Uint32() >> (i % 32)
		fast.Add(v)
		slow.Add(v)
	}
	if !fast.pow2 || slow.pow2 || !slicesEqual(fast.Counts, slow.Counts) {
		t.Fatalf("power-of-two bins: %v by bit count, %v by search", fast.Counts, slow.Counts)
	}
	if a := testing.AllocsPerRun(100, func() { h.Add(7) }); a != 0 {
		t.Fatal("Add allocates")
	}
}

func slicesEqual(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func newAggregator(t testing.TB, cfg AggregatorConfig) *Aggregator {
	t.Helper()
	a, err := NewAggregator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAggregatorScripted: a scripted stream whose histogram counts,
// recent and average values are known.
func TestAggregatorScripted(t *testing.T) {
	a := newAggregator(t, AggregatorConfig{AverageShift: 1, LatencyBins: Bins{100, 1000}, QueueBins: Bins{10, 100}, TxUtilBins: Bins{50}})
	hop := func(sw, lat, q, u uint32) Hop {
		return Hop{Switch: sw, Latency: lat, Occupancy: q, TxUtil: u, Has: HasSwitch | HasLatency | HasQueue | HasTxUtil}
	}
	// Flow 1 over 11, 22: latencies at 11 of 50, 150, 250, 2000.
	for i, l := range []uint32{50, 150, 250, 2000} {
		a.Add(rec(1, i, hop(11, l, 5, 10), hop(22, 500, 50, 90)))
	}
	// Flow 2 over 22 alone.
	a.Add(rec(2, 10, hop(22, 90, 200, 40)))
	s11, s22 := a.Switch(11), a.Switch(22)
	if s11 == nil || s22 == nil || a.Switch(33) != nil {
		t.Fatal("switches")
	}
	for _, c := range []struct {
		name      string
		got, want []uint64
	}{
		{"11 latency", s11.Latency.Counts, []uint64{1, 2, 1}},
		{"11 queue", s11.Queue.Counts, []uint64{4, 0, 0}},
		{"11 txutil", s11.TxUtil.Counts, []uint64{4, 0}},
		{"22 latency", s22.Latency.Counts, []uint64{1, 4, 0}},
		{"22 queue", s22.Queue.Counts, []uint64{0, 4, 1}},
		{"22 txutil", s22.TxUtil.Counts, []uint64{1, 4}},
	} {
		if !slicesEqual(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	f, ok := a.Flow(1)
	// Averages with weight 1/2: 50, 100, 175, 1087.
	if !ok || f.Packets != 4 || f.Path.Len != 2 || f.Hops[0].Latency != (Value{Recent: 2000, Average: 1087}) || f.Hops[1].Latency != (Value{500, 500}) ||
		f.MaxLatency != 2500 || f.Latency.Recent != 2500 || f.First != t0 || f.Last != t0.Add(3*time.Millisecond) {
		t.Fatalf("flow 1: %+v", f)
	}
	// A new path starts the hops afresh.
	a.Add(rec(1, 20, hop(33, 7, 1, 1)))
	if f, _ = a.Flow(1); f.Path.Slice()[0] != 33 || f.Hops[0].Samples != 1 || f.Hops[1].Samples != 0 || f.Packets != 5 {
		t.Fatalf("flow 1 rerouted: %+v", f)
	}
	if a.Len() != 2 || a.Counters().Records != 6 {
		t.Fatalf("%d flows, %+v", a.Len(), a.Counters())
	}
	if _, err := NewAggregator(AggregatorConfig{LatencyBins: Bins{5, 5}}); err == nil {
		t.Fatal("bins not ascending accepted")
	}
}

func TestAggregatorEvictionAndAgeing(t *testing.T) {
	a := newAggregator(t, AggregatorConfig{Flows: 3, Switches: 2, Idle: time.Second})
	h := []Hop{{Switch: 1, Has: HasSwitch}}
	for k := range uint32(4) {
		a.Add(rec(k, int(k), h...)) // flow 3 evicts flow 0
	}
	if _, ok := a.Flow(0); ok || a.Len() != 3 || a.Counters().FlowsEvicted != 1 {
		t.Fatalf("eviction: %d flows, %+v", a.Len(), a.Counters())
	}
	a.Add(rec(1, 500, h...)) // flow 1 is now the most recent
	a.Add(rec(4, 1200, h...))
	// At 1.2 s flows 2 and 3 (last seen at 2 and 3 ms) have aged out.
	var keys []uint32
	a.Flows(func(f *FlowStats) bool { keys = append(keys, f.Key); return true })
	if len(keys) != 2 || keys[0] != 4 || keys[1] != 1 || a.Counters().FlowsAged != 2 {
		t.Fatalf("after ageing: %v, %+v", keys, a.Counters())
	}
	if n := a.Expire(t0.Add(5 * time.Second)); n != 2 || a.Len() != 0 {
		t.Fatalf("Expire: %d, %d left", n, a.Len())
	}
	a.Add(rec(9, 6000, Hop{Switch: 2, Has: HasSwitch}, Hop{Switch: 3, Has: HasSwitch}))
	if a.Switch(1) != nil || a.Switch(3).Packets != 1 || a.Counters().SwitchesEvicted != 1 {
		t.Fatalf("switch eviction: %+v", a.Counters())
	}
}

// TestTable checks the hash index against a map through random inserts,
// lookups and removals.
func TestTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tb := newTable(100)
	ref := map[uint64]int32{}
	order := []uint64{} // least recent first
	for i := range 100000 {
		k := uint64(rng.IntN(300))
		if i%7 == 0 && len(ref) > 0 {
			// Remove the oldest.
			row := tb.oldest()
			if tb.keys[row] != order[0] {
				t.Fatalf("op %d: oldest row holds %d, want %d", i, tb.keys[row], order[0])
			}
			tb.remove(row)
			delete(ref, order[0])
			order = order[1:]
			continue
		}
		row := tb.find(k)
		// A hint, however stale (a row the key had, or any row), never
		// changes the answer.
		if h := tb.lookup(k, int32(rng.IntN(101))); h != row {
			t.Fatalf("op %d: lookup(%d) with a hint = %d, find = %d", i, k, h, row)
		}
		if r, ok := ref[k]; ok != (row >= 0) || ok && r != row {
			t.Fatalf("op %d: find(%d) = %d, want %d %v", i, k, row, r, ok)
		}
		for j, o := range order {
			if o == k {
				order = append(order[:j:j], order[j+1:]...)
			}
		}
		if row >= 0 {
			tb.touch(row)
		} else {
			r, ev := tb.insert(k)
			if ev >= 0 {
				delete(ref, order[0])
				order = order[1:]
			}
			ref[k] = r
		}
		order = append(order, k)
		if tb.used != len(ref) {
			t.Fatalf("op %d: %d used, want %d", i, tb.used, len(ref))
		}
	}
}

// TestAggregatorMemoryBounded floods a 65 536-row flow table with
// distinct flows, 10 million of them (1 million with -short), and the
// Detector's table of the same size with the first million, and checks
// that neither the heap nor the RSS grows once the tables are full.
func TestAggregatorMemoryBounded(t *testing.T) {
	total := 10_000_000
	if testing.Short() {
		total = 1_000_000
	}
	a := newAggregator(t, AggregatorConfig{Flows: 1 << 16, Idle: time.Minute})
	d := newDetector(t, DetectorConfig{MaxFlows: 1 << 16, Period: time.Second})
	hs := benchRecordHops()
	r := Record{Hops: hs}
	ev := make([]Event, 0, 64)
	feed := func(from, to int) {
		for i := from; i < to; i++ {
			r.Flow, r.Time = uint32(i)*2654435761, t0.Add(time.Duration(i))
			a.Add(&r)
			if i < 1_000_000 {
				ev = d.Observe(&r, ev[:0])
			}
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	feed(0, 1<<17)
	base, baseRSS := heap(), rss(t)
	feed(1<<17, total)
	after, afterRSS := heap(), rss(t)
	t.Logf("%d flows: heap %d MiB, RSS %d MiB after %d; heap %d MiB, RSS %d MiB after all; %d in the table, %d evicted",
		total, base>>20, baseRSS>>20, 1<<17, after>>20, afterRSS>>20, a.Len(), a.Counters().FlowsEvicted)
	if after > base+1<<20 {
		t.Fatalf("the heap grew from %d to %d bytes", base, after)
	}
	if baseRSS > 0 && afterRSS > baseRSS+8<<20 {
		t.Fatalf("the RSS grew from %d to %d bytes", baseRSS, afterRSS)
	}
	if a.Len() != 1<<16 || a.Counters().FlowsEvicted != uint64(total-1<<16) || d.Counters().Evicted != 1_000_000-1<<16 {
		t.Fatalf("%d flows, %+v, %+v", a.Len(), a.Counters(), d.Counters().Evicted)
	}
}

// rss returns the process's resident set size from /proc (0 where there
// is none).
func rss(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Logf("no RSS: %v", err)
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" && f[2] == "kB" {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			return n << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

func TestAggregatorAllocs(t *testing.T) {
	a := newAggregator(t, AggregatorConfig{Flows: 1000, Idle: time.Millisecond})
	r := Record{Hops: benchRecordHops()}
	i := 0
	if n := testing.AllocsPerRun(5000, func() {
		i++
		r.Flow, r.Time = uint32(i%3000), t0.Add(time.Duration(i)*time.Microsecond)
		a.Add(&r)
	}); n != 0 {
		t.Fatalf("Add allocates %.1f times", n)
	}
}

func TestExports(t *testing.T) {
	a := newAggregator(t, AggregatorConfig{LatencyBins: Bins{100, 1000}, QueueBins: Bins{10}, TxUtilBins: Bins{50}})
	all := HasSwitch | HasLatency | HasQueue
	for p := range 10 {
		a.Add(rec(0xAB, p, Hop{Switch: 11, Latency: 100 + uint32(p), Occupancy: 5, Has: all}, Hop{Switch: 22, Latency: 1000, Occupancy: 40, Has: all}))
	}
	var b bytes.Buffer
	ts := time.Unix(1700000000, 0)
	if err := a.WriteLineProtocol(&b, ts); err != nil {
		t.Fatal(err)
	}
	want := `dta_switch,switch=11 packets=10i,latency_mean=104.5,latency_p50=109i,latency_p99=109i,latency_max=109i,queue_p99=5i,queue_max=5i,txutil_max=0i 1700000000000000000
dta_switch,switch=22 packets=10i,latency_mean=1000,latency_p50=1000i,latency_p99=1000i,latency_max=1000i,queue_p99=40i,queue_max=40i,txutil_max=0i 1700000000000000000
dta_flow,flow=0x000000ab packets=10i,latency=1109i,latency_avg=1102i,max_latency=1109i,hops=2i 1700000000000000000
`
	if b.String() != want {
		t.Fatalf("line protocol:\n%s\nwant\n%s", b.String(), want)
	}
	tuple := inband.FiveTuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 5000, DstPort: 5000, Proto: 17}
	var p Path
	p.set([]Hop{{Switch: 11}, {Switch: 22}, {Switch: 33}})
	b.Reset()
	WriteEventLines(&b, []Event{
		{Kind: NewFlow, Metric: MetricPath, Time: ts, Flow: 1, Tuple: tuple, NewPath: p},
		{Kind: Change, Metric: MetricFlowLatency, Time: ts, Flow: 1, Tuple: tuple, New: 950, NewPath: p},
		{Kind: Change, Metric: MetricHopLatency, Time: ts, Flow: 1, Tuple: tuple, Switch: 4, New: 400},
		{Kind: Rise, Metric: MetricQueueOccupancy, Time: ts, Switch: 22, Queue: 3, New: 250},
		{Kind: Change, Metric: MetricQueueCongestion, Time: ts, Switch: 22, Queue: 3, New: 250},
		{Kind: Change, Metric: MetricLinkUtilization, Time: ts, Switch: 22, Port: 7, New: 80},
		{Kind: Change, Metric: MetricDrops, Time: ts, Switch: 22, Queue: 3, New: 12},
		{Kind: Change, Metric: MetricBufferOccupancy, Time: ts, Switch: 22, New: 900},
	})
	want = `flow_stat\,10.0.0.1:5000->10.0.0.2:5000\,proto=17 path="11:22:33" 1700000000000000000
flow_stat\,10.0.0.1:5000->10.0.0.2:5000\,proto=17 flow_latency=950i,path="11:22:33" 1700000000000000000
flow_hop_latency\,10.0.0.1:5000->10.0.0.2:5000\,proto=17\,sw_id=4 value=400i 1700000000000000000
queue_occupancy\,sw_id=22\,queue_id=3 value=250i 1700000000000000000
queue_congestion\,sw_id=22\,queue_id=3 value=250i 1700000000000000000
port_tx_utilize\,sw_id=22\,port_id=7 value=80i 1700000000000000000
queue_drop\,sw_id=22\,queue_id=3 value=12i 1700000000000000000
buffer_occupancy\,sw_id=22\,queue_id=0 value=900i 1700000000000000000
`
	if b.String() != want {
		t.Fatalf("event lines:\n%s\nwant\n%s", b.String(), want)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(a)
	d := newDetector(t, DetectorConfig{})
	d.Observe(rec(1, 0, Hop{Switch: 1, Has: HasSwitch}), nil)
	reg.MustRegister(d)
	if n, err := testutil.GatherAndCount(reg, "dtakit_int_hop_latency_nanoseconds", "dtakit_int_queue_occupancy_cells", "dtakit_int_link_utilization_percent"); err != nil || n != 6 {
		t.Fatalf("%d histogram series, %v", n, err)
	}
	exp := `# HELP dtakit_int_flows flows in the flow table
# TYPE dtakit_int_flows gauge
dtakit_int_flows 1
# HELP dtakit_int_hop_latency_nanoseconds hop latency reported by INT, per switch, in nanoseconds (as INT 2.x defines it)
# TYPE dtakit_int_hop_latency_nanoseconds histogram
dtakit_int_hop_latency_nanoseconds_bucket{switch="11",le="100"} 1
dtakit_int_hop_latency_nanoseconds_bucket{switch="11",le="1000"} 10
dtakit_int_hop_latency_nanoseconds_bucket{switch="11",le="+Inf"} 10
dtakit_int_hop_latency_nanoseconds_sum{switch="11"} 1045
dtakit_int_hop_latency_nanoseconds_count{switch="11"} 10
dtakit_int_hop_latency_nanoseconds_bucket{switch="22",le="100"} 0
dtakit_int_hop_latency_nanoseconds_bucket{switch="22",le="1000"} 10
dtakit_int_hop_latency_nanoseconds_bucket{switch="22",le="+Inf"} 10
dtakit_int_hop_latency_nanoseconds_sum{switch="22"} 10000
dtakit_int_hop_latency_nanoseconds_count{switch="22"} 10
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "dtakit_int_flows", "dtakit_int_hop_latency_nanoseconds"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "dtakit_int_events_total"); err != nil || n != 5*8-7 {
		t.Fatalf("%d event series, %v", n, err)
	}
}

func BenchmarkAggregator(b *testing.B) {
	hs := benchRecordHops()
	a := newAggregator(b, AggregatorConfig{Idle: time.Minute})
	r := Record{Time: t0, Hops: hs}
	for k := range uint32(10000) {
		r.Flow = k
		a.Add(&r)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Flow, r.Time = uint32(i%10000), t0.Add(time.Duration(i))
		a.Add(&r)
	}
}

// TestSharedTables checks a strict and a second-chance table sharing one
// index against a map each through random inserts, lookups, touches and
// removals: neither sees the other's keys or rows.
func TestSharedTables(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	tabs := [2]*table{newTable(50), newClockTable(80)}
	share(tabs[0], tabs[1])
	refs := [2]map[uint64]int32{{}, {}}
	for i := range 200000 {
		s := rng.IntN(2)
		tb, ref := tabs[s], refs[s]
		k := uint64(rng.IntN(200))
		row := tb.find(k)
		if r, ok := ref[k]; ok != (row >= 0) || ok && r != row {
			t.Fatalf("op %d: table %d: find(%d) = %d, want %d %v", i, s, k, row, r, ok)
		}
		switch {
		case row >= 0 && rng.IntN(4) == 0:
			tb.remove(row)
			delete(ref, k)
		case row >= 0:
			tb.touch(row)
		default:
			r, ev := tb.insert(k)
			if ev >= 0 {
				for j, rj := range ref {
					if rj == ev {
						delete(ref, j)
					}
				}
			}
			ref[k] = r
		}
		if tb.used != len(ref) {
			t.Fatalf("op %d: table %d: %d used, want %d", i, s, tb.used, len(ref))
		}
	}
	for s, tb := range tabs {
		for k, r := range refs[s] {
			if tb.keys[r] != k || tb.find(k) != r {
				t.Fatalf("table %d: key %d row %d: keys %d, find %d", s, k, r, tb.keys[r], tb.find(k))
			}
		}
	}
}

// TestClockTable checks the second-chance table against a map through
// random inserts, lookups and touches, and its contract: a row touched or
// inserted since the hand last passed it is never evicted before one
// that was not.
func TestClockTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	tb := newClockTable(100)
	ref := map[uint64]int32{}
	for i := range 100000 {
		k := uint64(rng.IntN(300))
		row := tb.find(k)
		if h := tb.lookup(k, int32(rng.IntN(101))); h != row {
			t.Fatalf("op %d: lookup(%d) with a hint = %d, find = %d", i, k, h, row)
		}
		if r, ok := ref[k]; ok != (row >= 0) || ok && r != row {
			t.Fatalf("op %d: find(%d) = %d, want %d %v", i, k, row, r, ok)
		}
		if row >= 0 {
			tb.touch(row)
			continue
		}
		r, ev := tb.insert(k)
		if ev >= 0 {
			if ev != r {
				t.Fatalf("op %d: evicted row %d, reused %d", i, ev, r)
			}
			n := len(ref)
			for j, rj := range ref {
				if rj == ev {
					delete(ref, j)
				}
			}
			if len(ref) != n-1 {
				t.Fatalf("op %d: evicted row %d held no key", i, ev)
			}
		}
		ref[k] = r
		if tb.used != len(ref) {
			t.Fatalf("op %d: %d used, want %d", i, tb.used, len(ref))
		}
	}
	n := 0
	tb.each(func(int32) { n++ })
	if n != len(ref) {
		t.Fatalf("each: %d rows, want %d", n, len(ref))
	}

	// Eight rows hold keys 0..7, all inserted since the hand passed: the
	// ninth key takes a whole turn to find one, the first. Keys 1, 3 and 5
	// touched then outlast 2, 4, 6 and 7, which were not, and key 8,
	// inserted after; then 1 goes, its mark spent.
	tb = newClockTable(8)
	held := map[int32]uint64{}
	var evicted []uint64
	insert := func(k uint64) {
		row, ev := tb.insert(k)
		if ev >= 0 {
			evicted = append(evicted, held[ev])
		}
		held[row] = k
	}
	for k := range uint64(9) {
		insert(k)
	}
	for _, k := range []uint64{1, 3, 5} {
		tb.touch(tb.find(k))
	}
	for k := range uint64(5) {
		insert(9 + k)
	}
	if fmt.Sprint(evicted) != "[0 2 4 6 7 1]" {
		t.Fatalf("evicted %v, want [0 2 4 6 7 1]", evicted)
	}
}
