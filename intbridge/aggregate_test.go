package intbridge

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dtakit/dtakit/inband"
)

func TestHistogram(t *testing.T) {
	var h Histogram
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
	if a := testing.AllocsPerRun(100, func() { h.Add(7) }); a != 0 {
		t.Fatal("Add allocates")
	}
}

func TestAggregatorExports(t *testing.T) {
	a := NewAggregator()
	all := uint16(0x8000 | 0x8000>>inband.BitHopLatency | 0x8000>>inband.BitQueue)
	for p := range 10 {
		a.Add(0xAB, []inband.Metadata{
			{Present: all, NodeID: 11, HopLatency: 100 + uint32(p), QueueOccupancy: 5},
			{Present: all, NodeID: 22, HopLatency: 1000, QueueOccupancy: 40},
		})
	}
	a.Add(0xCD, []inband.Metadata{{Present: 0x8000, NodeID: 22}})
	var b bytes.Buffer
	ts := time.Unix(1700000000, 0)
	if err := a.WriteLineProtocol(&b, ts); err != nil {
		t.Fatal(err)
	}
	want := `dta_switch,switch=11 latency_count=10i,latency_mean=104.5,latency_p50=109i,latency_p99=109i,latency_max=109i,queue_p99=5i,queue_max=5i 1700000000000000000
dta_switch,switch=22 latency_count=10i,latency_mean=1000,latency_p50=1000i,latency_p99=1000i,latency_max=1000i,queue_p99=40i,queue_max=40i 1700000000000000000
dta_flow,flow=0x000000ab packets=10i,max_latency=1109i,hops=2i 1700000000000000000
dta_flow,flow=0x000000cd packets=1i,max_latency=0i,hops=1i 1700000000000000000
`
	if b.String() != want {
		t.Fatalf("line protocol:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	WriteEventLines(&b, []Event{{Kind: LatencyChange, Flow: 0xAB, Hop: 1, Old: 1000, New: 1500}}, ts)
	if b.String() != "dta_event,kind=latency-change,flow=0x000000ab hop=1i,old=1000i,new=1500i 1700000000000000000\n" {
		t.Fatalf("event line %q", b.String())
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(a)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 5 {
		t.Fatalf("%d series, %v", n, err)
	}
	exp := `# HELP dta_flows flows seen
# TYPE dta_flows gauge
dta_flows 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "dta_flows"); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkAggregator(b *testing.B) {
	md := benchHops()
	a := NewAggregator()
	for k := range uint32(10000) {
		a.Add(k, md)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a.Add(uint32(i%10000), md)
	}
}
