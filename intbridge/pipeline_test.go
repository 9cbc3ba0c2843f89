package intbridge

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dtakit/dtakit/inband"
)

// fullBits is node ID, ports, hop latency, queue, egress timestamp, Tx
// utilisation and buffer.
const fullBits = 0x8000 | 0x8000>>inband.BitL1Ports | 0x8000>>inband.BitHopLatency | 0x8000>>inband.BitQueue |
	0x8000>>inband.BitEgressTS | 0x8000>>inband.BitTxUtil | 0x8000>>inband.BitBuffer

// traceReport is a Telemetry Report of a five-hop INT-MD trace of the TCP
// flow from port sport, every hop with fullBits metadata.
func traceReport(t testing.TB, sport uint16, latency uint32) []byte {
	hops := make([]inband.Metadata, 5)
	for i := range hops {
		h := 4 - i
		hops[i] = inband.Metadata{Present: fullBits, NodeID: uint32(100 * (h + 1)), L1Ingress: 1, L1Egress: 2, HopLatency: latency,
			QueueID: 1, QueueOccupancy: 10, EgressTimestamp: 1e9, TxUtilization: 30, BufferID: 3, BufferOccupancy: 77}
	}
	return mdReport(t, 500, sport, 80, hops)
}

// mdReport is a Telemetry Report from node of an INT-MD trace (stacked in
// the order of hops) of the TCP flow from port sport to dport.
func mdReport(t testing.TB, node uint32, sport, dport uint16, hops []inband.Metadata) []byte {
	md := &inband.INT{Type: inband.TypeMD, NPT: inband.NPTL4Header, Field: 6, Version: 2, HopML: uint8(inband.BaselineWords(fullBits)), RemainingHopCount: 3, Instructions: fullBits}
	for i := range hops {
		if err := md.AppendHop(&hops[i]); err != nil {
			t.Fatal(err)
		}
	}
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	ip := ipv4(60, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 9, DstPort: intPort}
	u.SetNetworkLayerForChecksum(ip)
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp, sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	tcp[12] = 5 << 4
	inner := ser(t, eth, ip, u, md, gopacket.Payload(tcp))
	return encode(t, &inband.Report{NodeID: node, Individuals: []inband.Individual{{RepType: inband.RepINT, InType: inband.InEthernet, Inner: inner}}})
}

// pipeline is the whole path a collector runs per Telemetry Report:
// decode, bridge, the analytics records, the Detector and the Aggregator.
type pipeline struct {
	b      *Bridge
	d      *Detector
	a      *Aggregator
	rec    *Record // the last
	events []Event
}

func newPipeline(t testing.TB) *pipeline {
	b, err := New(Config{INTPort: intPort})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DetectorConfig{Period: time.Second}
	for m := range cfg.Rules {
		cfg.Rules[m] = Rule{Threshold: 100}
	}
	d, a, err := NewAnalytics(cfg, AggregatorConfig{Idle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return &pipeline{b: b, d: d, a: a, events: make([]Event, 0, 64)}
}

func (p *pipeline) handle(pkt []byte, now time.Time) error {
	if _, err := p.b.Handle(pkt); err != nil {
		return err
	}
	p.events = p.events[:0]
	recs := p.b.Records(now)
	for i := range recs {
		p.rec = &recs[i]
		p.a.Add(p.rec)
		p.events = p.d.Observe(p.rec, p.events)
	}
	return nil
}

// TestPipeline: a trace's every field reaches the record, and the whole
// path allocates nothing per report.
func TestPipeline(t *testing.T) {
	p := newPipeline(t)
	if err := p.handle(traceReport(t, 1000, 500), t0); err != nil {
		t.Fatal(err)
	}
	want := Hop{Switch: 100, Ingress: 1, Egress: 2, Queue: 1, Occupancy: 10, Latency: 500, Timestamp: 1e9, TxUtil: 30, Buffer: 3, BufferOccupancy: 77,
		Has: HasSwitch | HasPorts | HasQueue | HasLatency | HasTimestamp | HasTxUtil | HasBuffer}
	if len(p.rec.Hops) != 5 || p.rec.Hops[0] != want || p.rec.Hops[4].Switch != 500 || p.rec.Flow != inband.FlowKey(tcpFlow) {
		t.Fatalf("record %+v", p.rec)
	}
	// A new flow: its path, 5 hop latencies, the flow latency, 5 queues,
	// 5 links, 5 buffers.
	if len(p.events) != 22 {
		t.Fatalf("%d events for a new flow: %+v", len(p.events), p.events)
	}
	pkts := make([][]byte, 64)
	for i := range pkts {
		pkts[i] = traceReport(t, uint16(2000+i), 500)
	}
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		i++
		if err := p.handle(pkts[i%len(pkts)], t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("the whole path allocates %.1f times per report", a)
	}
}

// BenchmarkPipeline: Telemetry Reports of 4096 flows' five-hop INT-MD
// traces (node, ports, latency, queue, timestamp, utilisation, buffer) through
// decode, bridge, Detector and Aggregator on one core; analytics alone
// is the Detector and the Aggregator on the records.
// The target (issue 29): whole at 3 M reports/s or more per core, 0 allocations.
func BenchmarkPipeline(b *testing.B) {
	pkts := make([][]byte, 4096)
	for i := range pkts {
		pkts[i] = traceReport(b, uint16(2000+i), 500)
	}
	b.Run("whole", func(b *testing.B) {
		p := newPipeline(b)
		for i := range pkts {
			p.handle(pkts[i], t0)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := p.handle(pkts[i%len(pkts)], t0.Add(time.Duration(i))); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
	})
	b.Run("analytics", func(b *testing.B) {
		p := newPipeline(b)
		recs := make([]Record, len(pkts))
		for i := range pkts {
			p.handle(pkts[i], t0)
			recs[i].SetTrace(&p.b.Traces()[0], t0)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r := &recs[i%len(recs)]
			r.Time = t0.Add(time.Duration(i))
			p.a.Add(r)
			p.events = p.d.Observe(r, p.events[:0])
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
	})
}

// TestRecords: a per-hop report becomes a one-hop record of the reporting
// node, with its drop and congestion; an INT-MD trace one record of its
// stack, the sink's own metadata and flags merged into its hop; nothing is
// counted twice.
func TestRecords(t *testing.T) {
	b, err := New(Config{INTPort: intPort})
	if err != nil {
		t.Fatal(err)
	}
	head := ser(t, &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}, ipv4(62, layers.IPProtocolTCP),
		&layers.TCP{SrcPort: 1000, DstPort: 80, DataOffset: 5})
	bits := uint16(0x8000>>inband.BitHopLatency | 0x8000>>inband.BitQueue | 1)
	post := inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, RepMdBits: bits, Dropped: true, Congested: true, Inner: head}
	post.SetMetadata(&inband.Metadata{Present: bits, HopLatency: 700, QueueID: 2, QueueOccupancy: 9000, DropQueueID: 2, DropReason: 5})
	// The sink 42 is the stack's last hop: its latency joins that hop.
	trace := inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, RepMdBits: 0x8000 >> inband.BitHopLatency, Dropped: true, Inner: mdPacket(t, []uint32{1, 42})}
	trace.SetMetadata(&inband.Metadata{Present: 0x8000 >> inband.BitHopLatency, HopLatency: 33})
	if _, err := b.Handle(encode(t, &inband.Report{NodeID: 42, Individuals: []inband.Individual{post, trace}})); err != nil {
		t.Fatal(err)
	}
	recs := b.Records(t0)
	if len(recs) != 2 {
		t.Fatalf("%d records: %+v", len(recs), recs)
	}
	tr := recs[0]
	sink := Hop{Switch: 42, Latency: 33, Drops: 1, Has: HasSwitch | HasLatency | HasDrops}
	if tr.PerHop || len(tr.Hops) != 2 || tr.Hops[0] != (Hop{Switch: 1, Has: HasSwitch}) || tr.Hops[1] != sink {
		t.Fatalf("trace record %+v", tr)
	}
	want := Hop{Switch: 42, Queue: 2, Occupancy: 9000, Latency: 700, Drops: 1, Congestion: 9000, Has: HasSwitch | HasQueue | HasLatency | HasDrops | HasCongestion}
	// TTL 62 of 64: the third hop.
	if r := recs[1]; !r.PerHop || r.Position != 3 || r.Flow != inband.FlowKey(tcpFlow) || r.Tuple != tcpFlow || !r.Time.Equal(t0) || len(r.Hops) != 1 || r.Hops[0] != want {
		t.Fatalf("record %+v", r)
	}
	if _, err := b.Handle([]byte{1, 2, 3}); err == nil || len(b.Records(t0)) != 0 {
		t.Fatal("a short datagram decoded")
	}
}

// TestRecordsNotAvailable: a hop that fills a field with all ones (not
// available) has the field left out of its record's hop, zero, as its
// decoded Trace has it; the flow latency is the sum of the latencies
// available.
func TestRecordsNotAvailable(t *testing.T) {
	var hops []inband.Metadata
	for h, lat := range []uint32{300, 0, 200} {
		m := inband.Metadata{Present: fullBits, NodeID: uint32(h + 1), L1Ingress: 1, L1Egress: 2, HopLatency: lat,
			QueueID: 1, QueueOccupancy: 10, EgressTimestamp: 1e9, TxUtilization: 30, BufferID: 3, BufferOccupancy: 77}
		if lat == 0 {
			// Written as all ones: the node, its latency and its
			// utilisation not available.
			m.Present &^= 0x8000>>inband.BitNodeID | 0x8000>>inband.BitHopLatency | 0x8000>>inband.BitTxUtil
		}
		hops = append(hops, m)
	}
	p := newPipeline(t)
	if err := p.handle(mdReport(t, 9, 0, 0, hops), t0); err != nil {
		t.Fatal(err)
	}
	var want Record
	want.SetTrace(&p.b.Traces()[0], t0)
	if h := p.rec.Hops[1]; h.Switch != 0 || h.Latency != 0 || h.TxUtil != 0 || h.Has != HasPorts|HasQueue|HasTimestamp|HasBuffer || !reflect.DeepEqual(*p.rec, want) {
		t.Fatalf("record %+v\nfrom its trace %+v", p.rec, want)
	}
	for _, e := range p.events {
		if e.Metric == MetricFlowLatency {
			if e.New != 500 {
				t.Fatalf("flow latency %d, want 500 (300 + 200)", e.New)
			}
			return
		}
	}
	t.Fatalf("no flow latency event: %+v", p.events)
}

// TestPostcards: per-hop records at their places make a flow's path, its
// hops' values in the flow table, and hop latency events.
func TestPostcards(t *testing.T) {
	cfg := DetectorConfig{}
	cfg.Rules[MetricHopLatency] = Rule{Threshold: 100}
	d := newDetector(t, cfg)
	a := newAggregator(t, AggregatorConfig{AverageShift: 1})
	var got []string
	post := func(ms int, pos uint8, sw, lat uint32) {
		r := rec(9, ms, Hop{Switch: sw, Latency: lat, Has: HasSwitch | HasLatency})
		r.PerHop, r.Position = true, pos
		a.Add(r)
		for _, e := range d.Observe(r, nil) {
			got = append(got, fmt.Sprintf("%s %s switch %d hop %d %d->%d", e.Metric, e.Kind, e.Switch, e.Hop, e.Old, e.New))
		}
	}
	post(0, 1, 11, 100)
	post(0, 2, 22, 200)
	post(0, 3, 33, 300)
	post(1, 2, 22, 250) // within 100
	post(2, 2, 22, 400) // a change
	post(3, 2, 44, 50)  // another switch at hop 2: new
	post(4, 9, 55, 1)   // beyond MaxHops: histograms only
	want := []string{
		"hop-latency change switch 11 hop 0 0->100",
		"hop-latency change switch 22 hop 1 0->200",
		"hop-latency change switch 33 hop 2 0->300",
		"hop-latency change switch 22 hop 1 200->400",
		"hop-latency change switch 44 hop 1 0->50",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	f, _ := a.Flow(9)
	if fmt.Sprint(f.Path.Slice()) != "[11 44 33]" || f.Packets != 7 || f.Hops[1].Switch != 44 || f.Hops[1].Samples != 1 ||
		f.Hops[2].Latency != (Value{300, 300}) || a.Switch(22).Latency.Count != 3 || a.Switch(55) == nil {
		t.Fatalf("flow %+v", f)
	}
}

// FuzzRecords: any datagram gives records or an error, never a panic; a
// per-hop record is one hop of the reporting node (or the node its
// metadata names), a trace's record at most MaxHops hops.
func FuzzRecords(f *testing.F) {
	head := ser(f, &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}, ipv4(62, layers.IPProtocolTCP),
		&layers.TCP{SrcPort: 1000, DstPort: 80, DataOffset: 5})
	post := inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, RepMdBits: 0x8000 >> inband.BitQueue, Congested: true, Inner: head}
	post.SetMetadata(&inband.Metadata{Present: 0x8000 >> inband.BitQueue, QueueOccupancy: 9})
	f.Add(encode(f, &inband.Report{NodeID: 7, Individuals: []inband.Individual{post}}))
	f.Add(traceReport(f, 1, 2))
	b, err := New(Config{INTPort: intPort, INTAfterL4: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		if _, err := b.Handle(pkt); err != nil {
			return
		}
		recs := b.Records(t0)
		if len(recs) != len(b.Traces())+len(b.HopReports()) {
			t.Fatalf("%d records of %d traces and %d per-hop reports", len(recs), len(b.Traces()), len(b.HopReports()))
		}
		for i, r := range recs {
			if len(r.Hops) > MaxHops || len(r.Hops) == 0 && len(b.Traces()) <= i {
				t.Fatalf("record %+v", r)
			}
			// A trace's record, read from its stack, is the one its
			// decoded Trace makes.
			if i < len(b.Traces()) {
				var want Record
				want.SetTrace(&b.Traces()[i], t0)
				if !reflect.DeepEqual(r, want) {
					t.Fatalf("record %+v\nfrom its trace %+v", r, want)
				}
			}
			if r.PerHop && (len(r.Hops) != 1 || r.Hops[0].Has&HasSwitch == 0) {
				t.Fatalf("per-hop record %+v", r)
			}
		}
	})
}
