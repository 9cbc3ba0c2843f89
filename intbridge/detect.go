package intbridge

import (
	"time"

	"github.com/dtakit/dtakit/inband"
)

// EventKind says why the Detector reported a flow.
type EventKind uint8

// Event kinds.
const (
	NewFlow       EventKind = iota + 1 // first sight of the flow
	PathChange                         // the node IDs along the path changed
	LatencyChange                      // a hop's latency moved by more than the threshold
	QueueChange                        // a hop's queue occupancy moved by more than the threshold
	WindowReport                       // no event for a window: the flow's values, once per window
)

func (k EventKind) String() string {
	return [...]string{"", "new-flow", "path-change", "latency-change", "queue-change", "window"}[k]
}

// Event is one thing worth storing about a flow: which hop, the value it
// had when last reported and the value now.
type Event struct {
	Kind     EventKind
	Flow     uint32
	Hop      int // the hop (0 = the source) for latency and queue events
	Old, New uint32
}

// DetectorConfig configures a Detector, INTCollector's event detection.
type DetectorConfig struct {
	// LatencyThreshold and QueueThreshold are the changes of a hop's
	// latency and queue occupancy, from the value last reported, that make
	// an event (0: every change).
	LatencyThreshold, QueueThreshold uint32
	// Window, when positive, reports a flow without events once per
	// window, so that its values are refreshed.
	Window time.Duration
	// MaxFlows bounds the flows tracked (default 65536): a full table
	// forgets the flow observed least recently (in the order of Observe
	// calls), whose next packet is NewFlow.
	MaxFlows int
}

// MaxDetectedHops is the longest path the Detector tracks per flow; hops
// beyond it are ignored.
const MaxDetectedHops = 8

type flowState struct {
	key      uint32
	hops     int
	nodes    [MaxDetectedHops]uint32
	latency  [MaxDetectedHops]uint32
	queue    [MaxDetectedHops]uint32
	reported time.Time // the last event
	// prev and next link the flows from the most to the least recently
	// observed, through the Detector's sentinel.
	prev, next *flowState
}

// Detector turns a stream of per-packet INT paths into the events worth
// storing: new flows, path changes, per-hop latency and queue changes
// beyond a threshold, and one report per window otherwise. Most packets of
// a steady flow produce nothing, which is the point. It is not safe for
// concurrent use.
type Detector struct {
	cfg   DetectorConfig
	flows map[uint32]*flowState
	lru   flowState // sentinel: lru.next the most recent, lru.prev the least
	// Observations and Events count what went in and came out.
	Observations, Events uint64
}

// NewDetector returns a detector with cfg.
func NewDetector(cfg DetectorConfig) *Detector {
	if cfg.MaxFlows <= 0 {
		cfg.MaxFlows = 1 << 16
	}
	d := &Detector{cfg: cfg, flows: make(map[uint32]*flowState, cfg.MaxFlows)}
	d.lru.prev, d.lru.next = &d.lru, &d.lru
	return d
}

// Observe takes one packet of flow key whose path metadata is hops (hop 0
// the source, as the path reads; fields not Present are left out of the
// comparison) seen at now, and appends its events to events.
func (d *Detector) Observe(key uint32, hops []inband.Metadata, now time.Time, events []Event) []Event {
	d.Observations++
	n := min(len(hops), MaxDetectedHops)
	f := d.flows[key]
	before := len(events)
	if f == nil {
		if len(d.flows) >= d.cfg.MaxFlows {
			// Forget the least recently observed flow and reuse its state.
			f = d.lru.prev
			f.unlink()
			delete(d.flows, f.key)
			*f = flowState{key: key}
		} else {
			f = &flowState{key: key}
		}
		d.flows[key] = f
		events = append(events, Event{Kind: NewFlow, Flow: key})
		f.set(hops[:n])
	} else {
		if f.hops != n || !f.samePath(hops[:n]) {
			events = append(events, Event{Kind: PathChange, Flow: key, Old: uint32(f.hops), New: uint32(n)})
			f.set(hops[:n])
		} else {
			for h := range n {
				m := &hops[h]
				if m.Has(inband.BitHopLatency) && diff(m.HopLatency, f.latency[h]) > d.cfg.LatencyThreshold {
					events = append(events, Event{Kind: LatencyChange, Flow: key, Hop: h, Old: f.latency[h], New: m.HopLatency})
					f.latency[h] = m.HopLatency
				}
				if m.Has(inband.BitQueue) && diff(m.QueueOccupancy, f.queue[h]) > d.cfg.QueueThreshold {
					events = append(events, Event{Kind: QueueChange, Flow: key, Hop: h, Old: f.queue[h], New: m.QueueOccupancy})
					f.queue[h] = m.QueueOccupancy
				}
			}
		}
		if len(events) == before && d.cfg.Window > 0 && now.Sub(f.reported) >= d.cfg.Window {
			events = append(events, Event{Kind: WindowReport, Flow: key})
			f.set(hops[:n])
		}
	}
	if len(events) > before {
		f.reported = now
	}
	if d.lru.next != f {
		if f.next != nil {
			f.unlink()
		}
		f.prev, f.next = &d.lru, d.lru.next
		f.next.prev, d.lru.next = f, f
	}
	d.Events += uint64(len(events) - before)
	return events
}

func (f *flowState) set(hops []inband.Metadata) {
	f.hops = len(hops)
	for h := range hops {
		f.nodes[h], f.latency[h], f.queue[h] = hops[h].NodeID, hops[h].HopLatency, hops[h].QueueOccupancy
	}
}

func (f *flowState) samePath(hops []inband.Metadata) bool {
	for h := range hops {
		if hops[h].NodeID != f.nodes[h] {
			return false
		}
	}
	return true
}

func (f *flowState) unlink() {
	f.prev.next, f.next.prev = f.next, f.prev
	f.prev, f.next = nil, nil
}

func diff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
