package intbridge

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dtakit/dtakit/internal/promname"
)

// WriteEventLines writes events in InfluxDB line protocol, in INTCollector's
// schema so that its dashboards keep working: the tags are part of the
// measurement's name (commas escaped, as INTCollector's client writes
// them) and each point's time is the event's.
//
//	flow_stat\,10.0.0.1:5000->10.0.0.2:5000\,proto=17 flow_latency=950i,path="11:22:33" 1700000000000000000
//	flow_stat\,10.0.0.1:5000->10.0.0.2:5000\,proto=17 path="11:44:33" 1700000000000000000
//	flow_hop_latency\,10.0.0.1:5000->10.0.0.2:5000\,proto=17\,sw_id=22 value=400i 1700000000000000000
//	queue_occupancy\,sw_id=22\,queue_id=3 value=250i 1700000000000000000
//	queue_congestion\,sw_id=22\,queue_id=3 value=250i 1700000000000000000
//	port_tx_utilize\,sw_id=22\,port_id=7 value=80i 1700000000000000000
//	queue_drop\,sw_id=22\,queue_id=3 value=12i 1700000000000000000
//	buffer_occupancy\,sw_id=22\,queue_id=0 value=900i 1700000000000000000
//
// A flow latency event writes flow_stat with the latency and the path, a
// path event with the path alone; queue_drop (the drops summed) and
// buffer_occupancy (the switch's shared buffer, its ID as queue_id) are
// dtakit's, INTCollector having no such measurements.
func WriteEventLines(w io.Writer, events []Event) error {
	bw := bufio.NewWriter(w)
	var b []byte
	for i := range events {
		b = AppendEventLine(b[:0], &events[i])
		bw.Write(b)
	}
	return bw.Flush()
}

// AppendEventLine appends event e's line (see WriteEventLines).
func AppendEventLine(b []byte, e *Event) []byte {
	switch e.Metric {
	case MetricPath, MetricFlowLatency:
		b = append(b, "flow_stat"...)
		b = appendFlowTags(b, e)
		b = append(b, ' ')
		if e.Metric == MetricFlowLatency {
			b = append(b, "flow_latency="...)
			b = strconv.AppendUint(b, uint64(e.New), 10)
			b = append(b, "i,"...)
		}
		b = append(b, `path="`...)
		for i, n := range e.NewPath.Slice() {
			if i > 0 {
				b = append(b, ':')
			}
			b = strconv.AppendUint(b, uint64(n), 10)
		}
		b = append(b, '"')
	case MetricHopLatency:
		b = append(b, "flow_hop_latency"...)
		b = appendFlowTags(b, e)
		b = append(b, `\,sw_id=`...)
		b = strconv.AppendUint(b, uint64(e.Switch), 10)
		b = appendValue(b, e.New)
	case MetricLinkUtilization:
		b = append(b, `port_tx_utilize\,sw_id=`...)
		b = strconv.AppendUint(b, uint64(e.Switch), 10)
		b = append(b, `\,port_id=`...)
		b = strconv.AppendUint(b, uint64(e.Port), 10)
		b = appendValue(b, e.New)
	default:
		name := "queue_occupancy"
		switch e.Metric {
		case MetricQueueCongestion:
			name = "queue_congestion"
		case MetricDrops:
			name = "queue_drop"
		case MetricBufferOccupancy:
			name = "buffer_occupancy"
		}
		b = append(b, name...)
		b = append(b, `\,sw_id=`...)
		b = strconv.AppendUint(b, uint64(e.Switch), 10)
		b = append(b, `\,queue_id=`...)
		b = strconv.AppendUint(b, uint64(e.Queue), 10)
		b = appendValue(b, e.New)
	}
	b = append(b, ' ')
	b = strconv.AppendInt(b, e.Time.UnixNano(), 10)
	return append(b, '\n')
}

func appendFlowTags(b []byte, e *Event) []byte {
	t := &e.Tuple
	b = append(b, `\,`...)
	b = netip.AddrPortFrom(t.Src, t.SrcPort).AppendTo(b)
	b = append(b, "->"...)
	b = netip.AddrPortFrom(t.Dst, t.DstPort).AppendTo(b)
	b = append(b, `\,proto=`...)
	return strconv.AppendUint(b, uint64(t.Proto), 10)
}

func appendValue(b []byte, v uint32) []byte {
	b = append(b, " value="...)
	b = strconv.AppendUint(b, uint64(v), 10)
	return append(b, 'i')
}

// WriteLineProtocol writes the aggregates in InfluxDB line protocol at
// time ts, switches in ID order, then the flows, most recent first:
//
//	dta_switch,switch=11 packets=3i,latency_mean=950,latency_p50=1023i,latency_p99=2047i,latency_max=1500i,queue_p99=63i,queue_max=40i,txutil_max=0i 1700000000000000000
//	dta_flow,flow=0x1a2b3c4d packets=200i,latency=5200i,latency_avg=5100i,max_latency=5300i,hops=5i 1700000000000000000
func (a *Aggregator) WriteLineProtocol(w io.Writer, ts time.Time) error {
	bw := bufio.NewWriter(w)
	t := ts.UnixNano()
	for _, id := range a.SwitchIDs() {
		s := a.Switch(id)
		mean := 0.0
		if s.Latency.Count > 0 {
			mean = float64(s.Latency.Sum) / float64(s.Latency.Count)
		}
		fmt.Fprintf(bw, "dta_switch,switch=%d packets=%di,latency_mean=%g,latency_p50=%di,latency_p99=%di,latency_max=%di,queue_p99=%di,queue_max=%di,txutil_max=%di %d\n",
			id, s.Packets, mean, s.Latency.Quantile(0.5), s.Latency.Quantile(0.99), s.Latency.Max, s.Queue.Quantile(0.99), s.Queue.Max, s.TxUtil.Max, t)
	}
	a.Flows(func(f *FlowStats) bool {
		fmt.Fprintf(bw, "dta_flow,flow=%#08x packets=%di,latency=%di,latency_avg=%di,max_latency=%di,hops=%di %d\n",
			f.Key, f.Packets, f.Latency.Recent, f.Latency.Average, f.MaxLatency, f.Path.Len, t)
		return true
	})
	return bw.Flush()
}

var (
	latencyDesc = prometheus.NewDesc("dtakit_int_hop_latency_nanoseconds", "hop latency reported by INT, per switch, in nanoseconds (as INT 2.x defines it)", []string{"switch"}, nil)
	queueDesc   = prometheus.NewDesc("dtakit_int_queue_occupancy_cells", "queue occupancy reported by INT, per switch, in cells", []string{"switch"}, nil)
	txutilDesc  = prometheus.NewDesc("dtakit_int_link_utilization_percent", "egress link utilisation reported by INT, per switch, in percent", []string{"switch"}, nil)
	flowsDesc   = prometheus.NewDesc("dtakit_int_flows", "flows in the flow table", nil, nil)
	eventsDesc  = prometheus.NewDesc("dtakit_int_events_total", "events detected, by metric and kind", []string{"metric", "kind"}, nil)
)

// Describe implements prometheus.Collector.
func (a *Aggregator) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(a, ch)
}

// Collect implements prometheus.Collector: per switch the latency, queue
// and utilisation histograms in their bins, the flows in the table, and
// the counters. The caller must not Add concurrently (guard both with one
// lock).
func (a *Aggregator) Collect(ch chan<- prometheus.Metric) {
	for _, id := range a.SwitchIDs() {
		s := a.Switch(id)
		label := strconv.FormatUint(uint64(id), 10)
		ch <- constHistogram(latencyDesc, &s.Latency, label)
		ch <- constHistogram(queueDesc, &s.Queue, label)
		ch <- constHistogram(txutilDesc, &s.TxUtil, label)
	}
	ch <- prometheus.MustNewConstMetric(flowsDesc, prometheus.GaugeValue, float64(a.Len()))
	promname.Counters(ch, "dtakit_int_aggregator", "INT flow table and histograms:", a.c)
}

// Describe implements prometheus.Collector.
func (d *Detector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(d, ch)
}

// Collect implements prometheus.Collector: the events by metric and kind
// and the counters. The caller must not Observe concurrently.
func (d *Detector) Collect(ch chan<- prometheus.Metric) {
	for m := MetricPath; int(m) < NumMetrics; m++ {
		for k := NewFlow; int(k) < len(kindNames); k++ {
			if k == NewFlow && m != MetricPath {
				continue
			}
			ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, float64(d.c.Events[m][k]), m.String(), k.String())
		}
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("dtakit_int_detector_records_total", "INT records the detector observed", nil, nil),
		prometheus.CounterValue, float64(d.c.Records))
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("dtakit_int_detector_evicted_total", "keys the detector forgot to make room", nil, nil),
		prometheus.CounterValue, float64(d.c.Evicted))
}

func constHistogram(d *prometheus.Desc, h *Histogram, label string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bins))
	var cum uint64
	for i, c := range h.Counts[:len(h.Bins)] {
		cum += c
		buckets[float64(h.Bins[i])] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, float64(h.Sum), buckets, label)
}

// DetectorEntrySize is the bytes of an event in an Append list, the size
// of the bridge's drop and congestion entries (EventEntrySize) so that
// one Append instance holds all three lists (docs/DTA-WIRE.md 8.11):
// metric << 4 | kind, the queue (queue metrics) or hop (hop latency), the
// egress port's low 16 bits (link utilisation), then the switch (switch-
// and hop-keyed metrics) or the flow key (path, flow latency), then the
// new value (for a path, its length), big-endian.
const DetectorEntrySize = EventEntrySize

// AppendEventEntry appends e's Append-list entry to b.
func AppendEventEntry(b []byte, e *Event) []byte {
	var sub uint8
	var port uint16
	id := e.Switch
	switch e.Metric {
	case MetricPath, MetricFlowLatency:
		id = e.Flow
	case MetricHopLatency:
		sub = e.Hop
	case MetricLinkUtilization:
		port = uint16(e.Port)
	default:
		sub = e.Queue
	}
	b = append(b, uint8(e.Metric)<<4|uint8(e.Kind)&0xF, sub, byte(port>>8), byte(port))
	b = binary.BigEndian.AppendUint32(b, id)
	return binary.BigEndian.AppendUint32(b, e.New)
}
