package intbridge

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dtakit/dtakit/inband"
)

// TestDetectorCut runs a synthetic trace through the detector, as
// INTCollector's paper measures its event detection: 1000 flows of 200
// packets over 5 hops, latencies jittering by up to ±20 around a base,
// with 50 injected latency jumps of 500 and 10 path changes. Every
// injected change is an event; the values stored fall by two orders of
// magnitude against storing every packet's metadata.
func TestDetectorCut(t *testing.T) {
	d := NewDetector(DetectorConfig{LatencyThreshold: 100, QueueThreshold: 1000, Window: time.Second})
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
	start := time.Unix(0, 0)
	var events []Event
	seen := map[jump]bool{}
	paths := 0
	md := make([]inband.Metadata, hops)
	// Packets interleave across flows, 10 µs apart: the trace spans 2 s,
	// two windows.
	for p := range packets {
		for f := range flows {
			now := start.Add(time.Duration(p*flows+f) * 10 * time.Microsecond)
			if reroutes[[2]int{f, p}] {
				path[f][2] += 1000
			}
			for h := range hops {
				if jumps[jump{f, p, h}] {
					base[f][h] += 500
				}
				md[h] = inband.Metadata{Present: 0x8000 | 0x8000>>inband.BitHopLatency | 0x8000>>inband.BitQueue,
					NodeID: path[f][h], HopLatency: base[f][h] + uint32(rng.IntN(41)) - 20, QueueOccupancy: uint32(rng.IntN(800))}
			}
			events = d.Observe(uint32(f), md, now, events[:0])
			for _, e := range events {
				switch e.Kind {
				case LatencyChange:
					seen[jump{int(e.Flow), p, e.Hop}] = true
				case PathChange:
					paths++
				case QueueChange:
					t.Fatalf("queue jitter below the threshold made an event: %+v", e)
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
	// Values stored: every packet's 5 hops × 3 metrics without the
	// detector; with it, one value per event (a path change or window
	// report stores the path's 15).
	all := float64(flows * packets * hops * 3)
	stored := float64(d.Events) * hops * 3
	cut := all / stored
	t.Logf("%d observations, %d events: %.0f values stored of %.0f, a %.0f× cut", d.Observations, d.Events, stored, all, cut)
	if cut < 20 {
		t.Errorf("the detector cut the values stored only %.1f×", cut)
	}
}

func TestDetectorWindowAndEviction(t *testing.T) {
	d := NewDetector(DetectorConfig{Window: time.Second, MaxFlows: 2})
	md := []inband.Metadata{{Present: 0x8000, NodeID: 1}}
	t0 := time.Unix(100, 0)
	kinds := func(es []Event) (k []EventKind) {
		for _, e := range es {
			k = append(k, e.Kind)
		}
		return k
	}
	if k := kinds(d.Observe(1, md, t0, nil)); len(k) != 1 || k[0] != NewFlow {
		t.Fatalf("first packet: %v", k)
	}
	if k := kinds(d.Observe(1, md, t0.Add(500*time.Millisecond), nil)); len(k) != 0 {
		t.Fatalf("a steady packet inside the window: %v", k)
	}
	if k := kinds(d.Observe(1, md, t0.Add(time.Second), nil)); len(k) != 1 || k[0] != WindowReport {
		t.Fatalf("a steady packet a window later: %v", k)
	}
	d.Observe(2, md, t0.Add(2*time.Second), nil)
	d.Observe(3, md, t0.Add(3*time.Second), nil) // evicts flow 1, seen least recently
	if k := kinds(d.Observe(1, md, t0.Add(4*time.Second), nil)); len(k) != 1 || k[0] != NewFlow {
		t.Fatalf("an evicted flow's next packet: %v", k)
	}
	if NewFlow.String() != "new-flow" || WindowReport.String() != "window" {
		t.Fatal("event names")
	}
}

// benchHops is a five-hop path with latency and queue.
func benchHops() []inband.Metadata {
	md := make([]inband.Metadata, 5)
	for h := range md {
		md[h] = inband.Metadata{Present: 0x8000 | 0x8000>>inband.BitHopLatency | 0x8000>>inband.BitQueue,
			NodeID: uint32(100 * (h + 1)), HopLatency: 500, QueueOccupancy: 10}
	}
	return md
}

// BenchmarkDetector: steady, packets of 10 000 known flows; churn, a new
// flow every packet into a full table of 65 536.
func BenchmarkDetector(b *testing.B) {
	md := benchHops()
	t0 := time.Unix(0, 0)
	b.Run("steady", func(b *testing.B) {
		d := NewDetector(DetectorConfig{LatencyThreshold: 100, QueueThreshold: 100})
		var ev []Event
		for k := range uint32(10000) {
			ev = d.Observe(k, md, t0, ev[:0])
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			ev = d.Observe(uint32(i%10000), md, t0.Add(time.Duration(i)), ev[:0])
		}
	})
	b.Run("churn", func(b *testing.B) {
		d := NewDetector(DetectorConfig{})
		var ev []Event
		for k := range uint32(1 << 16) {
			ev = d.Observe(k, md, t0.Add(time.Duration(k)), ev[:0])
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			ev = d.Observe(1<<16+uint32(i), md, t0.Add(time.Duration(1<<16+i)), ev[:0])
		}
	})
}
