package intbridge

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dtakit/dtakit/inband"
)

// Metric names what an event is about, INTCollector's network information
// (its Table I) with drops beside it; the comment says what keys it.
type Metric uint8

// Metrics.
const (
	MetricPath            Metric = iota + 1 // flow: the switches along its path
	MetricFlowLatency                       // flow: the sum of its hops' latencies
	MetricHopLatency                        // (flow, switch): the hop's latency
	MetricQueueOccupancy                    // (switch, queue)
	MetricQueueCongestion                   // (switch, queue)
	MetricLinkUtilization                   // (switch, egress port): egress Tx utilisation
	MetricDrops                             // (switch, queue): packets reported dropped, summed
	MetricBufferOccupancy                   // (switch, buffer): the switch's shared buffer
	NumMetrics            = int(MetricBufferOccupancy) + 1
)

var metricNames = [NumMetrics]string{"", "path", "flow-latency", "hop-latency", "queue-occupancy", "queue-congestion", "link-utilization", "drops", "buffer-occupancy"}

func (m Metric) String() string {
	if int(m) < NumMetrics {
		return metricNames[m]
	}
	return fmt.Sprintf("metric(%d)", uint8(m))
}

var metricUnits = [NumMetrics]string{"", "hops", "ns", "ns", "cells", "cells", "%", "packets", "cells"}

// Unit is the unit of the metric's values, as INT switches report them:
// latencies in nanoseconds (INT 2.x's hop latency), queue and buffer
// occupancy in cells, link utilisation in percent, drops in packets; a
// path's Old and New are its length in hops (its node IDs are OldPath and
// NewPath).
func (m Metric) Unit() string {
	if int(m) < NumMetrics {
		return metricUnits[m]
	}
	return ""
}

// ParseMetric returns the metric String names.
func ParseMetric(s string) (Metric, error) {
	for m := MetricPath; int(m) < NumMetrics; m++ {
		if metricNames[m] == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown metric %q", ErrConfig, s)
}

// EventKind says why the Detector reported a value.
type EventKind uint8

// Event kinds.
const (
	NewFlow  EventKind = iota + 1 // first sight of a flow (Metric is MetricPath)
	Change                        // the value moved from the stored one by more than the rule's Threshold; for MetricPath, any node ID changed
	Rise                          // the value went above the rule's Level
	Fall                          // the value came back to the Level or below
	Periodic                      // no event for Period: the value, pushed again
)

var kindNames = [...]string{"", "new-flow", "change", "rise", "fall", "periodic"}

func (k EventKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one thing worth storing: when, about what (the flow, switch,
// queue or link its Metric is keyed by), the value stored before and the
// value now. Path events carry both paths' node IDs.
type Event struct {
	Kind   EventKind
	Metric Metric
	Time   time.Time
	Flow   uint32           // flow-keyed metrics (path, flow latency, hop latency)
	Switch uint32           // hop latency, queue and link metrics
	Queue  uint8            // queue metrics and drops; buffer occupancy: the buffer ID
	Port   uint32           // link utilisation: the egress port
	Hop    uint8            // hop latency: the hop's position, 0 the source
	Tuple  inband.FiveTuple // flow-keyed metrics: the flow
	// Old and New are the value stored and the value now (for MetricPath,
	// the path lengths).
	Old, New uint32
	// OldPath and NewPath are a path event's paths (OldPath empty for
	// NewFlow).
	OldPath, NewPath Path
}

// String says the event in words, every value with its unit and a path by
// its node IDs, source first:
//
//	path change flow 0xe5c16daf path [100 203 300] -> [100 202 300] at 2025-11-24T16:00:00.024Z
//	hop-latency change flow 0xc09dbf03 switch 300 hop 2: 775 ns -> 5775 ns at 2025-11-24T16:00:00.02405Z
func (e *Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", e.Metric, e.Kind)
	u := e.Metric.Unit()
	switch e.Metric {
	case MetricPath:
		fmt.Fprintf(&b, " flow %#08x path ", e.Flow)
		if e.Kind != NewFlow {
			fmt.Fprintf(&b, "%v -> ", e.OldPath.Slice())
		}
		fmt.Fprintf(&b, "%v", e.NewPath.Slice())
	case MetricFlowLatency:
		fmt.Fprintf(&b, " flow %#08x: %d %s -> %d %s", e.Flow, e.Old, u, e.New, u)
	case MetricHopLatency:
		fmt.Fprintf(&b, " flow %#08x switch %d hop %d: %d %s -> %d %s", e.Flow, e.Switch, e.Hop, e.Old, u, e.New, u)
	case MetricLinkUtilization:
		fmt.Fprintf(&b, " switch %d port %d: %d %s -> %d %s", e.Switch, e.Port, e.Old, u, e.New, u)
	case MetricBufferOccupancy:
		fmt.Fprintf(&b, " switch %d buffer %d: %d %s -> %d %s", e.Switch, e.Queue, e.Old, u, e.New, u)
	default:
		fmt.Fprintf(&b, " switch %d queue %d: %d %s -> %d %s", e.Switch, e.Queue, e.Old, u, e.New, u)
	}
	if !e.Time.IsZero() {
		fmt.Fprintf(&b, " at %s", e.Time.UTC().Format(time.RFC3339Nano))
	}
	return b.String()
}

// Rule is how one metric makes events. The zero Rule makes a change event
// for every change of the value. A key's first value (a new flow's, a
// new path's hop's, a queue's or link's first seen) is reported as a
// change from 0, and as a rise when above the level.
type Rule struct {
	// Threshold is T: a change event when |value - stored| > T, the value
	// then stored; the stored value so stays within T of the last one.
	Threshold uint32
	// NoChange turns change events off (leaving level and periodic ones).
	NoChange bool
	// Level, when positive, makes a Rise event when the value goes above
	// it and a Fall event when it comes back to it or below.
	Level uint32
}

// DetectorConfig configures a Detector, INTCollector's event detection.
type DetectorConfig struct {
	// Rules are the metrics' rules, indexed by Metric. MetricPath's
	// Threshold is not used: any change of a node ID is an event.
	Rules [NumMetrics]Rule
	// Period, when positive, is INTCollector's P: a key with no event for
	// Period pushes its value again (Periodic) at its next observation.
	Period time.Duration
	// MaxFlows and MaxKeys bound the flows and the (switch, queue),
	// (switch, port) and (switch, buffer) keys tracked, one per metric
	// (default 65536 each); a full table forgets one to make room,
	// whose next value is then new (counted in Evicted): one not observed
	// since the eviction sweep last passed it (second chance: a flow or
	// key observed since is never forgotten before one that was not).
	MaxFlows, MaxKeys int
}

// DetectorCounters count what went in and came out.
type DetectorCounters struct {
	Records uint64
	Events  [NumMetrics][len(kindNames)]uint64 // by metric and kind
	Evicted uint64                             // keys forgotten to make room
}

type flowRow struct {
	path     Path
	latency  uint32
	hop      [MaxHops]uint32
	above    uint16 // level state: bit 0 the flow latency, bit 1+h hop h
	reported int64  // the last event, unix ns
}

// keyHints are the rows a switch's keys were last found in, one per
// per-hop metric (queue occupancy, congestion, link utilisation, drops,
// buffer occupancy), -1 none: a hop's keys are mostly the ones it named
// before, and checking a row's key is cheaper than a hash lookup. A slot
// of Detector.hints is shared by the switches hashing to it, the last one
// seen holding it.
type keyHints struct {
	sw   uint32
	rows [5]int32
}

const hintBits = 10

var noHints = [5]int32{-1, -1, -1, -1, -1}

type keyRow struct {
	key uint64 // the row's key in d.keys (0: none), beside its values for quiet
	// lo to hi are the values quiet (none when lo > hi): within the
	// rule's threshold of value and on the side of its level the key is
	// (above); due is when the key falls due for the periodic push
	// (reported + period; math.MaxInt64: never). setQuiet keeps them.
	lo, hi   uint32
	due      int64
	value    uint32 // the value stored: last reported
	sum      uint32 // drops: the sum of the drops reported
	above    bool
	reported int64
}

// setQuiet sets k's quiet values from its value, level state and time
// reported, under bounds b (its metric's) and period.
func (k *keyRow) setQuiet(b quietBounds, period int64) {
	lo, hi := k.value-min(k.value, b.threshold), k.value+min(math.MaxUint32-k.value, b.threshold)
	switch {
	case !k.above:
		hi = min(hi, b.level)
	case b.level == math.MaxUint32:
		lo, hi = 1, 0 // above a level no value is above
	default:
		lo = max(lo, b.level+1)
	}
	k.lo, k.hi = lo, hi
	k.due = math.MaxInt64
	if period > 0 && k.reported <= math.MaxInt64-period {
		k.due = k.reported + period
	}
}

// Detector turns a stream of telemetry records into the events worth
// storing, INTCollector's event detection: new flows and path changes,
// and per metric a change beyond its threshold, a crossing of its level,
// and the periodic push. Most records of a steady network produce
// nothing, which is the point. It allocates nothing per record. It is
// not safe for concurrent use.
type Detector struct {
	cfg   DetectorConfig
	flows *table
	frows []flowRow
	keys  *table
	krows []keyRow
	hints *[1 << hintBits]keyHints // by a hash of the switch
	c     DetectorCounters
	now   int64 // the record's time being observed, unix ns
	// bounds are the rules' values for quiet, by metric.
	bounds [NumMetrics]quietBounds
}

// NewDetector returns a detector with cfg.
func NewDetector(cfg DetectorConfig) (*Detector, error) {
	if cfg.MaxFlows == 0 {
		cfg.MaxFlows = 1 << 16
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = 1 << 16
	}
	if cfg.MaxFlows < 1 || cfg.MaxFlows > 1<<26 || cfg.MaxKeys < 1 || cfg.MaxKeys > 1<<26 || cfg.Period < 0 {
		return nil, fmt.Errorf("%w: detector: max flows %d and max keys %d (1..2^26), period %v", ErrConfig, cfg.MaxFlows, cfg.MaxKeys, cfg.Period)
	}
	d := &Detector{cfg: cfg, flows: newClockTable(cfg.MaxFlows), frows: make([]flowRow, cfg.MaxFlows),
		keys: newClockTable(cfg.MaxKeys), krows: make([]keyRow, cfg.MaxKeys), hints: new([1 << hintBits]keyHints)}
	for m := range d.bounds {
		d.bounds[m] = cfg.Rules[m].bounds()
	}
	return d, nil
}

// SetRule replaces metric m's rule, taking effect from the next record.
func (d *Detector) SetRule(m Metric, r Rule) error {
	if m < MetricPath || int(m) >= NumMetrics {
		return fmt.Errorf("%w: unknown metric %d", ErrConfig, m)
	}
	d.cfg.Rules[m], d.bounds[m] = r, r.bounds()
	for row := range d.keys.fresh {
		if k := &d.krows[row]; Metric(k.key>>56) == m {
			k.setQuiet(d.bounds[m], int64(d.cfg.Period))
		}
	}
	return nil
}

// Rule returns metric m's rule.
func (d *Detector) Rule(m Metric) Rule {
	if int(m) >= NumMetrics {
		return Rule{}
	}
	return d.cfg.Rules[m]
}

// SetPeriod replaces the period.
func (d *Detector) SetPeriod(p time.Duration) {
	d.cfg.Period = max(p, 0)
	for row := range d.keys.fresh {
		k := &d.krows[row]
		k.setQuiet(d.bounds[k.key>>56], int64(d.cfg.Period))
	}
}

// Counters returns the counters.
func (d *Detector) Counters() DetectorCounters { return d.c }

// Observe takes one record and appends its events to events.
func (d *Detector) Observe(r *Record, events []Event) []Event {
	d.c.Records++
	before := len(events)
	hops := r.Hops[:min(len(r.Hops), MaxHops)]
	now := r.Time.UnixNano()
	d.now = now
	switch p := int(r.Position); {
	case !r.PerHop:
		events = d.flow(r, hops, now, events)
	case p >= 1 && p <= MaxHops && len(hops) == 1 && hops[0].Has&HasSwitch != 0:
		events = d.postcard(r, &hops[0], p-1, now, events)
	}
	if h, m := d.quietKeys(hops, now); h < len(hops) {
		events = d.hopKeys(r, hops, h, m, events)
	}
	for _, e := range events[before:] {
		d.c.Events[e.Metric][e.Kind]++
	}
	return events
}

// quietKeys runs quiet, the check most hops' keys need, on the per-hop
// metrics of hops in Observe's order (hop by hop; queue occupancy,
// congestion, link utilisation, drops, buffer occupancy: keyHints.rows'
// order), marking each quiet key's row seen (the keys' table is a clock
// table). It returns the first hop and metric that is not quiet (a switch
// not in its hint, a new key or value, a drop), from which hopKeys goes on,
// or len(hops) when every one is. It makes no call: its state stays in
// registers.
func (d *Detector) quietKeys(hops []Hop, now int64) (int, int) {
	krows := d.krows
	ref := d.keys.ref[:len(krows)]
	hints := d.hints
	for h := range hops {
		hp := &hops[h]
		has, sw := hp.Has, hp.Switch
		if has&HasSwitch == 0 {
			continue
		}
		c := &hints[uint32(sw*0x9E3779B1)>>(32-hintBits)]
		if c.sw != sw {
			return h, 0
		}
		if has&HasQueue != 0 {
			row := c.rows[0]
			if !quiet(krows, row, keyOf(MetricQueueOccupancy, sw, uint32(hp.Queue)), hp.Occupancy, now) {
				return h, 0
			}
			ref[row] = true
		}
		if has&HasCongestion != 0 {
			row := c.rows[1]
			if !quiet(krows, row, keyOf(MetricQueueCongestion, sw, uint32(hp.Queue)), hp.Congestion, now) {
				return h, 1
			}
			ref[row] = true
		}
		if has&(HasTxUtil|HasPorts) == HasTxUtil|HasPorts {
			row := c.rows[2]
			if !quiet(krows, row, keyOf(MetricLinkUtilization, sw, hp.Egress), hp.TxUtil, now) {
				return h, 2
			}
			ref[row] = true
		}
		if has&HasDrops != 0 {
			return h, 3
		}
		if has&HasBuffer != 0 {
			row := c.rows[4]
			if !quiet(krows, row, keyOf(MetricBufferOccupancy, sw, uint32(hp.Buffer)), hp.BufferOccupancy, now) {
				return h, 4
			}
			ref[row] = true
		}
	}
	return len(hops), 0
}

// hopKeys runs the per-hop metrics' rules on hops from hop h's metric
// from (an index of keyHints.rows) on, as quietKeys orders them: a
// quiet key marked seen, any other to key.
func (d *Detector) hopKeys(r *Record, hops []Hop, h, from int, events []Event) []Event {
	krows, ref, now := d.krows, d.keys.ref, d.now
	for ; h < len(hops); h, from = h+1, 0 {
		hp := &hops[h]
		if hp.Has&HasSwitch == 0 {
			continue
		}
		c := &d.hints[uint32(hp.Switch*0x9E3779B1)>>(32-hintBits)]
		if c.sw != hp.Switch {
			*c = keyHints{sw: hp.Switch, rows: noHints}
		}
		if from <= 0 && hp.Has&HasQueue != 0 {
			m, sub := MetricQueueOccupancy, uint32(hp.Queue)
			if row := c.rows[0]; quiet(krows, row, keyOf(m, hp.Switch, sub), hp.Occupancy, now) {
				ref[row] = true
			} else {
				events = d.key(m, hp.Switch, sub, hp.Occupancy, r, &c.rows[0], events)
			}
		}
		if from <= 1 && hp.Has&HasCongestion != 0 {
			m, sub := MetricQueueCongestion, uint32(hp.Queue)
			if row := c.rows[1]; quiet(krows, row, keyOf(m, hp.Switch, sub), hp.Congestion, now) {
				ref[row] = true
			} else {
				events = d.key(m, hp.Switch, sub, hp.Congestion, r, &c.rows[1], events)
			}
		}
		if from <= 2 && hp.Has&(HasTxUtil|HasPorts) == HasTxUtil|HasPorts {
			m, sub := MetricLinkUtilization, hp.Egress
			if row := c.rows[2]; quiet(krows, row, keyOf(m, hp.Switch, sub), hp.TxUtil, now) {
				ref[row] = true
			} else {
				events = d.key(m, hp.Switch, sub, hp.TxUtil, r, &c.rows[2], events)
			}
		}
		if from <= 3 && hp.Has&HasDrops != 0 {
			events = d.key(MetricDrops, hp.Switch, uint32(hp.Queue), hp.Drops, r, &c.rows[3], events)
		}
		if hp.Has&HasBuffer != 0 {
			m, sub := MetricBufferOccupancy, uint32(hp.Buffer)
			if row := c.rows[4]; quiet(krows, row, keyOf(m, hp.Switch, sub), hp.BufferOccupancy, now) {
				ref[row] = true
			} else {
				events = d.key(m, hp.Switch, sub, hp.BufferOccupancy, r, &c.rows[4], events)
			}
		}
	}
	return events
}

// flow runs the flow-keyed rules: path, flow latency, hop latency.
func (d *Detector) flow(r *Record, hops []Hop, now int64, events []Event) []Event {
	row := d.flows.find(uint64(r.Flow))
	latency, hasLatency := flowLatency(hops)
	var f *flowRow
	fresh := row < 0
	if fresh {
		var ev int32
		row, ev = d.flows.insert(uint64(r.Flow))
		if ev >= 0 {
			d.c.Evicted++
		}
		f = &d.frows[row]
		*f = flowRow{reported: now}
		f.path.set(hops)
		events = append(events, Event{Kind: NewFlow, Metric: MetricPath, Time: r.Time, Flow: r.Flow, Tuple: r.Tuple, New: uint32(len(hops)), NewPath: f.path})
	} else {
		d.flows.touch(row)
		f = &d.frows[row]
		if d.quietFlow(f, hops, latency, hasLatency, now) {
			return events
		}
	}
	before := len(events)
	periodic := !fresh && d.cfg.Period > 0 && now-f.reported >= int64(d.cfg.Period)
	// A new flow's values, and a new path's hops, are new keys: each
	// value is reported, as a change from nothing known, and a rise when
	// above its level.
	newHops := fresh
	if !fresh && !f.path.same(hops) {
		e := Event{Kind: Change, Metric: MetricPath, Time: r.Time, Flow: r.Flow, Tuple: r.Tuple, Old: uint32(f.path.Len), New: uint32(len(hops)), OldPath: f.path}
		f.path.set(hops)
		e.NewPath = f.path
		events = append(events, e)
		f.above &= 1
		f.hop = [MaxHops]uint32{}
		newHops, periodic = true, false
	}
	rule := &d.cfg.Rules[MetricHopLatency]
	for h := range hops {
		if hops[h].Has&HasLatency == 0 || !newHops && rule.quiet(f.hop[h], f.above&(2<<h) != 0, hops[h].Latency) {
			continue
		}
		k1, k2, old := judge(rule, newHops, &f.hop[h], &f.above, 2<<h, hops[h].Latency)
		for _, k := range [2]EventKind{k1, k2} {
			if k != 0 {
				events = append(events, Event{Kind: k, Metric: MetricHopLatency, Time: r.Time, Flow: r.Flow, Tuple: r.Tuple, Switch: hops[h].Switch, Hop: uint8(h), Old: old, New: hops[h].Latency})
			}
		}
	}
	if fl := &d.cfg.Rules[MetricFlowLatency]; hasLatency && (fresh || !fl.quiet(f.latency, f.above&1 != 0, latency)) {
		k1, k2, old := judge(fl, fresh, &f.latency, &f.above, 1, latency)
		for _, k := range [2]EventKind{k1, k2} {
			if k != 0 {
				events = append(events, Event{Kind: k, Metric: MetricFlowLatency, Time: r.Time, Flow: r.Flow, Tuple: r.Tuple, Old: old, New: latency, NewPath: f.path})
			}
		}
	}
	if len(events) > before {
		f.reported = now
	} else if periodic {
		f.reported = now
		events = append(events, Event{Kind: Periodic, Metric: MetricPath, Time: r.Time, Flow: r.Flow, Tuple: r.Tuple, Old: uint32(f.path.Len), New: uint32(f.path.Len), OldPath: f.path, NewPath: f.path})
		if hasLatency {
			events = append(events, Event{Kind: Periodic, Metric: MetricFlowLatency, Time: r.Time, Flow: r.Flow, Tuple: r.Tuple, Old: f.latency, New: latency, NewPath: f.path})
			f.latency = latency
		}
		for h := range hops {
			if hops[h].Has&HasLatency != 0 {
				events = append(events, Event{Kind: Periodic, Metric: MetricHopLatency, Time: r.Time, Flow: r.Flow, Tuple: r.Tuple, Switch: hops[h].Switch, Hop: uint8(h), Old: f.hop[h], New: hops[h].Latency})
				f.hop[h] = hops[h].Latency
			}
		}
	}
	return events
}

// flowLatency returns the sum of hops' latencies (0 where absent) and
// whether any hop has one.
func flowLatency(hops []Hop) (latency uint32, has bool) {
	for h := range hops {
		latency += hops[h].Latency
		has = has || hops[h].Has&HasLatency != 0
	}
	return latency, has
}

// quietFlow says whether a record of hops, with flow latency latency
// (when hasLatency), leaves the flow in row f as it is and makes no event
// (the check most records need): its path unchanged, every latency quiet
// under its rule's bounds, and the flow not due for the periodic push. It
// makes no call.
func (d *Detector) quietFlow(f *flowRow, hops []Hop, latency uint32, hasLatency bool, now int64) bool {
	if p := int64(d.cfg.Period); p > 0 && now-f.reported >= p || !f.path.same(hops) {
		return false
	}
	hb := d.bounds[MetricHopLatency]
	stored := f.hop[:len(hops)]
	for h := range hops {
		v := hops[h].Latency
		if hops[h].Has&HasLatency != 0 && (diff(v, stored[h]) > hb.threshold || (v > hb.level) != (f.above&(2<<h) != 0)) {
			return false
		}
	}
	fb := d.bounds[MetricFlowLatency]
	return !hasLatency || diff(latency, f.latency) <= fb.threshold && (latency > fb.level) == (f.above&1 != 0)
}

// postcard runs the hop latency rule on a flow's hop h, reported by the
// hop itself: the flow's path is what its hops reported, each at its
// place, and a hop whose switch is new there has new values.
func (d *Detector) postcard(r *Record, hp *Hop, h int, now int64, events []Event) []Event {
	row := d.flows.find(uint64(r.Flow))
	if row < 0 {
		var ev int32
		if row, ev = d.flows.insert(uint64(r.Flow)); ev >= 0 {
			d.c.Evicted++
		}
		d.frows[row] = flowRow{reported: now}
	} else {
		d.flows.touch(row)
	}
	f := &d.frows[row]
	first := int(f.path.Len) <= h || f.path.Nodes[h] != hp.Switch
	if first {
		f.path.Nodes[h], f.path.Len = hp.Switch, max(f.path.Len, uint8(h+1))
	}
	if hp.Has&HasLatency == 0 {
		return events
	}
	v := hp.Latency
	k1, k2, old := judge(&d.cfg.Rules[MetricHopLatency], first, &f.hop[h], &f.above, 2<<h, v)
	switch {
	case k1 != 0:
		f.reported = now
	case d.cfg.Period > 0 && now-f.reported >= int64(d.cfg.Period):
		k1, f.hop[h], f.reported = Periodic, v, now
	}
	for _, k := range [2]EventKind{k1, k2} {
		if k != 0 {
			events = append(events, Event{Kind: k, Metric: MetricHopLatency, Time: r.Time, Flow: r.Flow, Tuple: r.Tuple, Switch: hp.Switch, Hop: uint8(h), Old: old, New: v})
		}
	}
	return events
}

// judge applies rule r to value v against the value *stored and the
// level bit in *above, updating both, and returns the events it makes
// (up to two kinds, 0 for none) with the value stored before. A first
// value (a new key's) is a change from nothing known (old 0) and a rise
// when above the level.
func judge(r *Rule, first bool, stored *uint32, above *uint16, bit uint16, v uint32) (k1, k2 EventKind, old uint32) {
	if first {
		*stored, *above = 0, *above&^bit
	}
	old = *stored
	if !r.NoChange && (first || diff(v, old) > r.Threshold) {
		k1 = Change
		*stored = v
	}
	if r.Level > 0 {
		if was, is := *above&bit != 0, v > r.Level; was != is {
			k2 = Fall
			if is {
				k2 = Rise
			}
			*above ^= bit
			*stored = v
		}
	}
	if first {
		*stored = v
	}
	if k1 == 0 {
		k1, k2 = k2, 0
	}
	return k1, k2, old
}

func keyOf(m Metric, sw, sub uint32) uint64 {
	return uint64(m)<<56 | uint64(sw)<<24 | uint64(sub&0xFFFFFF)
}

// quiet says whether the key in row hint of krows is key and takes value
// v at now without an event (the caller marks the row seen): the value in
// the row's quiet range (its rule's bounds, keyRow.setQuiet), and the key
// not due. It is the check most hops' values need, kept apart from key's
// event making (which the rest go to, and drops always: their value is a
// sum kept in the row), and small enough to inline.
func quiet(krows []keyRow, hint int32, key uint64, v uint32, now int64) bool {
	i := int(hint)
	if uint(i) >= uint(len(krows)) {
		return false
	}
	k := &krows[i]
	return k.key == key && v >= k.lo && v <= k.hi && now < k.due
}

// quietBounds are a Rule's values as the quiet checks read them
// (keyRow.setQuiet, quietFlow): a value within threshold of the one
// stored, and on the side of level the key was, makes no event. No change
// events: threshold the largest value; no level: level the largest value
// (no value is above it), so a key whose level state was left above when
// the level was removed is not quiet, and goes to key, which reads the
// Rule.
type quietBounds struct{ threshold, level uint32 }

func (r *Rule) bounds() quietBounds {
	b := quietBounds{threshold: r.Threshold, level: r.Level}
	if r.NoChange {
		b.threshold = math.MaxUint32
	}
	if r.Level == 0 {
		b.level = math.MaxUint32
	}
	return b
}

// key runs metric m's rule on a (switch, queue) or (switch, port) key;
// drops run it on the sum of the drops reported.
// *hint is the row the switch's key of metric m was last found in (checked
// before use), and is updated.
func (d *Detector) key(m Metric, sw, sub, v uint32, r *Record, hint *int32, events []Event) []Event {
	kk := keyOf(m, sw, sub)
	row := d.keys.lookup(kk, *hint)
	if row < 0 {
		return d.keyEvent(m, sw, sub, v, r, row, events)
	}
	*hint = row
	d.keys.ref[row] = true // touch: the keys' table is a clock table
	k := &d.krows[row]
	if m == MetricDrops {
		k.sum += v
		v = k.sum
	}
	// Most values of a steady network make no event and change nothing:
	// within the threshold (or no change events), on the same side of the
	// level, and not due for the periodic push.
	if d.cfg.Rules[m].quiet(k.value, k.above, v) && (d.cfg.Period <= 0 || d.now-k.reported < int64(d.cfg.Period)) {
		return events
	}
	return d.keyEvent(m, sw, sub, v, r, row, events)
}

// keyEvent is key's rule on value v (a sum, for drops) of a key in row
// (-1: a new key).
func (d *Detector) keyEvent(m Metric, sw, sub, v uint32, r *Record, row int32, events []Event) []Event {
	now := d.now
	fresh := row < 0
	if fresh {
		var ev int32
		kk := keyOf(m, sw, sub)
		if row, ev = d.keys.insert(kk); ev >= 0 {
			d.c.Evicted++
		}
		d.krows[row] = keyRow{key: kk, reported: now}
		if m == MetricDrops {
			d.krows[row].sum = v
		}
	}
	k := &d.krows[row]
	var above uint16
	if k.above {
		above = 1
	}
	k1, k2, old := judge(&d.cfg.Rules[m], fresh, &k.value, &above, 1, v)
	k.above = above != 0
	if k1 == 0 && d.cfg.Period > 0 && now-k.reported >= int64(d.cfg.Period) {
		k1 = Periodic
		k.value = v
	}
	if k1 != 0 {
		k.reported = now
	}
	k.setQuiet(d.bounds[m], int64(d.cfg.Period))
	if k1 == 0 {
		return events
	}
	var port uint32
	q := uint8(sub)
	if m == MetricLinkUtilization {
		port, q = sub, 0
	}
	for _, k := range [2]EventKind{k1, k2} {
		if k != 0 {
			events = append(events, Event{Kind: k, Metric: m, Time: r.Time, Switch: sw, Queue: q, Port: port, Old: old, New: v})
		}
	}
	return events
}

// quiet says whether the rule, judging value v of a key seen before
// against the value stored and its level state above, makes no event and
// changes nothing (judge would return no kind).
func (r *Rule) quiet(stored uint32, above bool, v uint32) bool {
	return (r.NoChange || diff(v, stored) <= r.Threshold) && (r.Level == 0 || (v > r.Level) == above)
}

func diff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
