package intbridge

import (
	"fmt"
	"math/bits"
	"sort"
	"time"

	"github.com/dtakit/dtakit/inband"
)

// Bins are a histogram's bucket upper bounds, ascending: bucket i counts
// the values v with Bins[i-1] < v ≤ Bins[i], and one bucket more the
// values above the last bound.
type Bins []uint32

// PowerOfTwoBins are the bounds 0, 1, 3, 7, …, 2^31-1: bucket i > 0 holds
// [2^(i-1), 2^i).
func PowerOfTwoBins() Bins {
	b := make(Bins, 32)
	for i := range b {
		b[i] = uint32(uint64(1)<<i - 1)
	}
	return b
}

func (b Bins) validate(what string) error {
	if len(b) == 0 || len(b) > 256 {
		return fmt.Errorf("%w: %s bins: %d bounds (1..256)", ErrConfig, what, len(b))
	}
	for i := 1; i < len(b); i++ {
		if b[i] <= b[i-1] {
			return fmt.Errorf("%w: %s bins: bound %d (%d) not above the one before (%d)", ErrConfig, what, i, b[i], b[i-1])
		}
	}
	return nil
}

// Histogram counts a metric's values in Bins. Adding is a binary search
// (a bit count for PowerOfTwoBins) and no allocation.
type Histogram struct {
	Bins     Bins
	Counts   []uint64 // len(Bins)+1
	Count    uint64
	Sum      uint64
	Min, Max uint32
	pow2     bool // Bins are PowerOfTwoBins
}

// NewHistogram returns an empty histogram over bins.
func NewHistogram(bins Bins) Histogram {
	return Histogram{Bins: bins, Counts: make([]uint64, len(bins)+1), pow2: bins.powersOfTwo()}
}

func (b Bins) powersOfTwo() bool {
	if len(b) != 32 {
		return false
	}
	for i, v := range b {
		if v != uint32(uint64(1)<<i-1) {
			return false
		}
	}
	return true
}

// Add counts v.
func (h *Histogram) Add(v uint32) { h.addAt(v, h.bucket(v)) }

// bucket returns v's bucket: a bit count for PowerOfTwoBins, else a
// binary search of Bins (a call of its own, so that bucket inlines).
func (h *Histogram) bucket(v uint32) int {
	if h.pow2 {
		return bits.Len32(v)
	}
	return h.search(v)
}

func (h *Histogram) search(v uint32) int {
	lo, hi := 0, len(h.Bins)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if h.Bins[m] < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// addAt counts v in bucket i.
func (h *Histogram) addAt(v uint32, i int) {
	if h.Count == 0 || v < h.Min {
		h.Min = v
	}
	h.Max = max(h.Max, v)
	h.Count++
	h.Sum += uint64(v)
	h.Counts[i]++
}

func (h *Histogram) reset() {
	clear(h.Counts)
	h.Count, h.Sum, h.Min, h.Max = 0, 0, 0, 0
}

// Quantile returns an upper bound of the q-quantile (0 ≤ q ≤ 1): the
// bound of the bucket that holds it, capped at Max.
func (h *Histogram) Quantile(q float64) uint32 {
	if h.Count == 0 {
		return 0
	}
	rank := uint64(q*float64(h.Count-1)) + 1
	var seen uint64
	for i, c := range h.Counts {
		if seen += c; seen >= rank && i < len(h.Bins) {
			return min(h.Bins[i], h.Max)
		}
	}
	return h.Max
}

// Value is a per-hop value as the flow table keeps it: the most recent
// and an exponentially weighted moving average.
type Value struct {
	Recent, Average uint32
}

func (v *Value) add(x uint32, first bool, shift uint8) {
	v.Recent = x
	if first {
		v.Average = x
		return
	}
	v.Average = uint32(int64(v.Average) + (int64(x)-int64(v.Average))>>shift)
}

// HopStats are one hop of a flow's path.
type HopStats struct {
	Switch                 uint32
	Latency, Queue, TxUtil Value
	Samples                uint64 // records that carried this hop on this path
}

// FlowStats are one flow's row in the flow table.
type FlowStats struct {
	Key         uint32
	Tuple       inband.FiveTuple
	First, Last time.Time
	Packets     uint64
	Path        Path
	Latency     Value  // end to end: the sum of the hops' latencies
	MaxLatency  uint32 // the largest end-to-end latency
	Hops        [MaxHops]HopStats
}

// SwitchStats are one switch's histograms over the records that crossed
// it.
type SwitchStats struct {
	Switch                 uint32
	Packets                uint64
	Latency, Queue, TxUtil Histogram
}

// AggregatorConfig configures an Aggregator. The zero value takes the
// defaults beside each field.
type AggregatorConfig struct {
	// Flows is the flow table's rows (default 65536): a new flow in a full
	// table evicts the flow seen least recently.
	Flows int
	// Switches is the switches with histograms (default 1024): a new
	// switch in a full table evicts one not seen since the eviction sweep
	// last passed it (second chance: a switch seen since is never evicted
	// before one that was not).
	Switches int
	// Idle, when positive, ages out flows not seen for Idle.
	Idle time.Duration
	// AverageShift is the moving averages' weight, 2^-AverageShift per
	// new value (default 3: 1/8).
	AverageShift uint8
	// LatencyBins, QueueBins and TxUtilBins are the per-switch histograms'
	// bins (default PowerOfTwoBins).
	LatencyBins, QueueBins, TxUtilBins Bins
}

// AggregatorCounters count what the Aggregator did.
type AggregatorCounters struct {
	Records         uint64
	FlowsEvicted    uint64 // flows forgotten for a new one in a full table
	FlowsAged       uint64 // flows forgotten after Idle
	SwitchesEvicted uint64
}

// Aggregator is the SmartNIC INT monitor's state: a bounded per-flow table
// with each hop's recent and average values, least-recently-used eviction
// and ageing, and per-switch histograms of hop latency, queue occupancy
// and egress link utilisation. Its memory is allocated once, at its
// configured size; Add allocates nothing. It is not safe for concurrent
// use.
type Aggregator struct {
	cfg      AggregatorConfig
	flows    *table
	rows     []FlowStats
	switches *table
	sw       []SwitchStats
	hints    *[1 << hintBits]int32 // by a hash of the switch: the row it was last found in
	c        AggregatorCounters
}

// NewAggregator returns an aggregator with cfg.
func NewAggregator(cfg AggregatorConfig) (*Aggregator, error) {
	if cfg.Flows == 0 {
		cfg.Flows = 1 << 16
	}
	if cfg.Switches == 0 {
		cfg.Switches = 1024
	}
	if cfg.AverageShift == 0 {
		cfg.AverageShift = 3
	}
	for _, b := range []*Bins{&cfg.LatencyBins, &cfg.QueueBins, &cfg.TxUtilBins} {
		if *b == nil {
			*b = PowerOfTwoBins()
		}
	}
	if cfg.Flows < 1 || cfg.Flows > 1<<26 || cfg.Switches < 1 || cfg.Switches > 1<<20 || cfg.AverageShift > 16 || cfg.Idle < 0 {
		return nil, fmt.Errorf("%w: aggregator: flows %d (1..2^26), switches %d (1..2^20), average shift %d (0..16), idle %v",
			ErrConfig, cfg.Flows, cfg.Switches, cfg.AverageShift, cfg.Idle)
	}
	for name, b := range map[string]Bins{"latency": cfg.LatencyBins, "queue": cfg.QueueBins, "tx utilisation": cfg.TxUtilBins} {
		if err := b.validate(name); err != nil {
			return nil, err
		}
	}
	a := &Aggregator{cfg: cfg, flows: newTable(cfg.Flows), rows: make([]FlowStats, cfg.Flows),
		switches: newClockTable(cfg.Switches), sw: make([]SwitchStats, cfg.Switches), hints: new([1 << hintBits]int32)}
	// One slab for every switch's counts.
	nl, nq, nu := len(cfg.LatencyBins)+1, len(cfg.QueueBins)+1, len(cfg.TxUtilBins)+1
	slab := make([]uint64, cfg.Switches*(nl+nq+nu))
	for i := range a.sw {
		s := &a.sw[i]
		s.Latency = Histogram{Bins: cfg.LatencyBins, Counts: slab[:nl:nl], pow2: cfg.LatencyBins.powersOfTwo()}
		s.Queue = Histogram{Bins: cfg.QueueBins, Counts: slab[nl : nl+nq : nl+nq], pow2: cfg.QueueBins.powersOfTwo()}
		s.TxUtil = Histogram{Bins: cfg.TxUtilBins, Counts: slab[nl+nq : nl+nq+nu : nl+nq+nu], pow2: cfg.TxUtilBins.powersOfTwo()}
		slab = slab[nl+nq+nu:]
	}
	return a, nil
}

// Counters returns the counters.
func (a *Aggregator) Counters() AggregatorCounters { return a.c }

// Add counts one record.
func (a *Aggregator) Add(r *Record) {
	a.c.Records++
	a.expire(r.Time)
	hops := r.Hops[:min(len(r.Hops), MaxHops)]
	row := a.flows.find(uint64(r.Flow))
	// Every hop of a switch counts in its histograms, whatever the flow:
	// counted first, while the flow's row (most often a cache miss) is
	// fetched.
	for h := a.addHinted(hops, 0); h < len(hops); h = a.addHinted(hops, h) {
		a.hint(hops[h].Switch)
	}
	fresh := row < 0
	if fresh {
		var ev int32
		if row, ev = a.flows.insert(uint64(r.Flow)); ev >= 0 {
			a.c.FlowsEvicted++
		}
		a.rows[row] = FlowStats{Key: r.Flow, Tuple: r.Tuple, First: r.Time}
	} else {
		a.flows.touch(row)
	}
	f := &a.rows[row]
	f.Packets++
	f.Last = r.Time
	sh := a.cfg.AverageShift
	if r.PerHop {
		// A hop's own report: its place on the path, when known, holds
		// its values.
		p := int(r.Position)
		if p < 1 || p > MaxHops || len(hops) != 1 || hops[0].Has&HasSwitch == 0 {
			return
		}
		hp := &hops[0]
		if int(f.Path.Len) < p || f.Path.Nodes[p-1] != hp.Switch {
			f.Hops[p-1] = HopStats{}
			f.Path.Nodes[p-1], f.Path.Len = hp.Switch, max(f.Path.Len, uint8(p))
		}
		update(f.Hops[p-1:p], hops[:1], sh)
		return
	}
	newPath := !f.Path.same(hops)
	if newPath {
		f.Path.set(hops)
		f.Hops = [MaxHops]HopStats{}
	}
	total := update(f.Hops[:len(hops)], hops, sh)
	f.Latency.add(total, fresh, sh)
	f.MaxLatency = max(f.MaxLatency, total)
}

// update adds each hop's values to its stats (sts[h] hops[h]'s) and
// returns the sum of their latencies (0 where absent). One loop, no call:
// its state stays in registers.
func update(sts []HopStats, hops []Hop, sh uint8) uint32 {
	var total uint32
	for h := range min(len(sts), len(hops)) {
		st, hp := &sts[h], &hops[h]
		st.Switch = hp.Switch
		first := st.Samples == 0
		st.Samples++
		if hp.Has&HasQueue != 0 {
			st.Queue.add(hp.Occupancy, first, sh)
		}
		if hp.Has&HasTxUtil != 0 {
			st.TxUtil.add(hp.TxUtil, first, sh)
		}
		if hp.Has&HasLatency != 0 {
			st.Latency.add(hp.Latency, first, sh)
			total += hp.Latency
		}
	}
	return total
}

// addHinted counts hops from hop h on in their switches' histograms while
// each switch is in the row its hint names (the row it was last found
// in), and returns the first hop whose switch is not (hint makes it so),
// or len(hops). It makes no call: its state stays in registers.
func (a *Aggregator) addHinted(hops []Hop, h int) int {
	t := a.switches
	for ; h < len(hops); h++ {
		hp := &hops[h]
		if hp.Has&HasSwitch == 0 {
			continue
		}
		row := a.hints[uint32(hp.Switch*0x9E3779B1)>>(32-hintBits)]
		if row < 0 || row >= t.fresh || t.keys[row] != uint64(hp.Switch) {
			return h
		}
		t.ref[row] = true // touch: the switches' table is a clock table
		s := &a.sw[row]
		s.Packets++
		if hp.Has&HasLatency != 0 {
			s.Latency.addAt(hp.Latency, s.Latency.bucket(hp.Latency))
		}
		if hp.Has&HasQueue != 0 {
			s.Queue.addAt(hp.Occupancy, s.Queue.bucket(hp.Occupancy))
		}
		if hp.Has&HasTxUtil != 0 {
			s.TxUtil.addAt(hp.TxUtil, s.TxUtil.bucket(hp.TxUtil))
		}
	}
	return h
}

// hint makes switch sw's hint name its row: found, or new.
func (a *Aggregator) hint(sw uint32) {
	hint := &a.hints[uint32(sw*0x9E3779B1)>>(32-hintBits)]
	row := a.switches.find(uint64(sw))
	if row < 0 {
		row = a.newSwitch(sw)
	}
	*hint = row
}

// newSwitch returns a row for switch sw, new and empty.
func (a *Aggregator) newSwitch(sw uint32) int32 {
	row, ev := a.switches.insert(uint64(sw))
	if ev >= 0 {
		a.c.SwitchesEvicted++
	}
	s := &a.sw[row]
	s.Switch, s.Packets = sw, 0
	s.Latency.reset()
	s.Queue.reset()
	s.TxUtil.reset()
	return row
}

// Expire ages out the flows not seen for Idle before now and returns how
// many; Add does it as records arrive, a caller whose records stop may
// call it.
func (a *Aggregator) Expire(now time.Time) int { return a.expire(now) }

func (a *Aggregator) expire(now time.Time) int {
	if a.cfg.Idle <= 0 {
		return 0
	}
	// A row is idle when now.Sub(Last) >= Idle: when Last is not after
	// now - Idle, one Add per record and a compare per row (Sub is an Add
	// and a compare more).
	cut := now.Add(-a.cfg.Idle)
	n := 0
	for row := a.flows.oldest(); row >= 0 && !a.rows[row].Last.After(cut); row = a.flows.oldest() {
		a.flows.remove(row)
		a.c.FlowsAged++
		n++
	}
	return n
}

// Len returns the flows in the table.
func (a *Aggregator) Len() int { return a.flows.used }

// Flow returns flow key's row.
func (a *Aggregator) Flow(key uint32) (FlowStats, bool) {
	row := a.flows.find(uint64(key))
	if row < 0 {
		return FlowStats{}, false
	}
	return a.rows[row], true
}

// Flows calls fn with each flow's row, the most recently seen first, until
// fn returns false. fn must not keep the pointer.
func (a *Aggregator) Flows(fn func(*FlowStats) bool) {
	s := int32(a.flows.rows())
	for r := a.flows.links[s].next; r != s; r = a.flows.links[r].next {
		if !fn(&a.rows[r]) {
			return
		}
	}
}

// Switch returns switch id's histograms, or nil.
func (a *Aggregator) Switch(id uint32) *SwitchStats {
	row := a.switches.find(uint64(id))
	if row < 0 {
		return nil
	}
	return &a.sw[row]
}

// SwitchIDs returns the switches with histograms, in ascending order.
func (a *Aggregator) SwitchIDs() []uint32 {
	ids := make([]uint32, 0, a.switches.used)
	a.switches.each(func(row int32) { ids = append(ids, a.sw[row].Switch) })
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// NewAnalytics returns a Detector and an Aggregator that share one flow
// index: a record's flow is probed for once, the second lookup finding the
// entry the first brought into cache. Each keeps its own rows, bound and
// eviction as its configuration says, and behaves as NewDetector's and
// NewAggregator's; being joined, the two are used together, on one
// goroutine at a time.
func NewAnalytics(dcfg DetectorConfig, acfg AggregatorConfig) (*Detector, *Aggregator, error) {
	d, err := NewDetector(dcfg)
	if err != nil {
		return nil, nil, err
	}
	a, err := NewAggregator(acfg)
	if err != nil {
		return nil, nil, err
	}
	share(a.flows, d.flows)
	return d, a, nil
}
