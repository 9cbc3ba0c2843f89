package intbridge

import (
	"bufio"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dtakit/dtakit/inband"
)

// Histogram counts a metric's values in powers of two: bucket 0 holds 0,
// bucket i (1..32) the values in [2^(i-1), 2^i). Adding is a few
// instructions and no allocation.
type Histogram struct {
	Buckets  [33]uint64
	Count    uint64
	Sum      uint64
	Min, Max uint32
}

// Add counts v.
func (h *Histogram) Add(v uint32) {
	if h.Count == 0 || v < h.Min {
		h.Min = v
	}
	h.Max = max(h.Max, v)
	h.Count++
	h.Sum += uint64(v)
	h.Buckets[bits.Len32(v)]++
}

// Quantile returns an upper bound of the q-quantile (0 ≤ q ≤ 1): the top
// of the bucket that holds it, capped at Max.
func (h *Histogram) Quantile(q float64) uint32 {
	if h.Count == 0 {
		return 0
	}
	rank := uint64(q*float64(h.Count-1)) + 1
	var seen uint64
	for i, c := range h.Buckets {
		if seen += c; seen >= rank {
			if i == 0 {
				return 0
			}
			return min(uint32(uint64(1)<<i-1), h.Max)
		}
	}
	return h.Max
}

// SwitchStats are one switch's per-hop metrics over the packets that
// crossed it.
type SwitchStats struct {
	Latency, Queue Histogram
}

// FlowStats are one flow's totals.
type FlowStats struct {
	Packets    uint64
	MaxLatency uint32 // the largest end-to-end latency (sum over hops)
	Hops       int    // the path length last seen
}

// Aggregator keeps per-switch histograms of hop latency and queue
// occupancy and per-flow totals, the aggregates a SmartNIC monitor keeps,
// as library pieces a collector calls per packet. It exports them as
// InfluxDB line protocol and as Prometheus metrics. It is not safe for
// concurrent use (guard Add and Collect with one lock).
type Aggregator struct {
	Switches map[uint32]*SwitchStats
	Flows    map[uint32]*FlowStats
}

// NewAggregator returns an empty aggregator.
func NewAggregator() *Aggregator {
	return &Aggregator{Switches: map[uint32]*SwitchStats{}, Flows: map[uint32]*FlowStats{}}
}

// Add counts one packet of flow key with path metadata hops.
func (a *Aggregator) Add(key uint32, hops []inband.Metadata) {
	f := a.Flows[key]
	if f == nil {
		f = &FlowStats{}
		a.Flows[key] = f
	}
	f.Packets++
	f.Hops = len(hops)
	var total uint32
	for h := range hops {
		m := &hops[h]
		if !m.Has(inband.BitNodeID) {
			continue
		}
		s := a.Switches[m.NodeID]
		if s == nil {
			s = &SwitchStats{}
			a.Switches[m.NodeID] = s
		}
		if m.Has(inband.BitHopLatency) {
			s.Latency.Add(m.HopLatency)
			total += m.HopLatency
		}
		if m.Has(inband.BitQueue) {
			s.Queue.Add(m.QueueOccupancy)
		}
	}
	f.MaxLatency = max(f.MaxLatency, total)
}

// WriteLineProtocol writes the aggregates in InfluxDB line protocol at
// time ts, switches and flows in key order:
//
//	dta_switch,switch=11 latency_count=3i,latency_mean=950,latency_p50=1023i,latency_p99=2047i,latency_max=1500i,queue_max=40i 1700000000000000000
//	dta_flow,flow=0x1a2b3c4d packets=200i,max_latency=5200i,hops=5i 1700000000000000000
func (a *Aggregator) WriteLineProtocol(w io.Writer, ts time.Time) error {
	bw := bufio.NewWriter(w)
	t := strconv.FormatInt(ts.UnixNano(), 10)
	for _, id := range sortedKeys(a.Switches) {
		s := a.Switches[id]
		mean := 0.0
		if s.Latency.Count > 0 {
			mean = float64(s.Latency.Sum) / float64(s.Latency.Count)
		}
		fmt.Fprintf(bw, "dta_switch,switch=%d latency_count=%di,latency_mean=%g,latency_p50=%di,latency_p99=%di,latency_max=%di,queue_p99=%di,queue_max=%di %s\n",
			id, s.Latency.Count, mean, s.Latency.Quantile(0.5), s.Latency.Quantile(0.99), s.Latency.Max, s.Queue.Quantile(0.99), s.Queue.Max, t)
	}
	for _, k := range sortedKeys(a.Flows) {
		f := a.Flows[k]
		fmt.Fprintf(bw, "dta_flow,flow=%#08x packets=%di,max_latency=%di,hops=%di %s\n", k, f.Packets, f.MaxLatency, f.Hops, t)
	}
	return bw.Flush()
}

// WriteEventLines writes events in InfluxDB line protocol at time ts.
func WriteEventLines(w io.Writer, events []Event, ts time.Time) error {
	bw := bufio.NewWriter(w)
	t := strconv.FormatInt(ts.UnixNano(), 10)
	for _, e := range events {
		fmt.Fprintf(bw, "dta_event,kind=%s,flow=%#08x hop=%di,old=%di,new=%di %s\n", e.Kind, e.Flow, e.Hop, e.Old, e.New, t)
	}
	return bw.Flush()
}

func sortedKeys[V any](m map[uint32]V) []uint32 {
	ks := make([]uint32, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

var (
	latencyDesc = prometheus.NewDesc("dta_switch_hop_latency", "hop latency reported by INT, per switch (the switch's units)", []string{"switch"}, nil)
	queueDesc   = prometheus.NewDesc("dta_switch_queue_occupancy", "queue occupancy reported by INT, per switch", []string{"switch"}, nil)
	flowsDesc   = prometheus.NewDesc("dta_flows", "flows seen", nil, nil)
)

// Describe implements prometheus.Collector.
func (a *Aggregator) Describe(ch chan<- *prometheus.Desc) {
	ch <- latencyDesc
	ch <- queueDesc
	ch <- flowsDesc
}

// Collect implements prometheus.Collector: per switch, the latency and
// queue histograms with their power-of-two buckets. The caller must not
// Add concurrently (guard both with one lock).
func (a *Aggregator) Collect(ch chan<- prometheus.Metric) {
	for _, id := range sortedKeys(a.Switches) {
		s := a.Switches[id]
		ch <- constHistogram(latencyDesc, &s.Latency, strconv.FormatUint(uint64(id), 10))
		ch <- constHistogram(queueDesc, &s.Queue, strconv.FormatUint(uint64(id), 10))
	}
	ch <- prometheus.MustNewConstMetric(flowsDesc, prometheus.GaugeValue, float64(len(a.Flows)))
}

func constHistogram(d *prometheus.Desc, h *Histogram, label string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Buckets))
	var cum uint64
	for i, c := range h.Buckets {
		cum += c
		upper := 0.0
		if i > 0 {
			upper = float64(uint64(1)<<i - 1)
		}
		buckets[upper] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, float64(h.Sum), buckets, label)
}
