package intbridge

import (
	"encoding/binary"
	"time"

	"github.com/dtakit/dtakit/inband"
)

// MaxHops is the longest path the analytics (Detector, Aggregator) keep per
// flow; hops beyond it, counted from the source, are left out.
const MaxHops = 8

// HopFields says which of a Hop's values the hop reported.
type HopFields uint16

// Hop fields.
const (
	HasSwitch HopFields = 1 << iota
	HasPorts
	HasQueue // queue ID and occupancy
	HasLatency
	HasTimestamp
	HasTxUtil
	HasDrops
	HasCongestion
	HasBuffer // buffer ID and occupancy
)

// Hop is one hop's telemetry as the analytics read it, whatever format
// carried it (an INT-MD stack entry, a per-hop report, a drop report).
type Hop struct {
	Switch          uint32
	Ingress, Egress uint32 // ports (level 1 or level 2 interface IDs)
	Queue           uint8
	Occupancy       uint32
	Latency         uint32
	Timestamp       uint64 // egress (else ingress) timestamp, the switch's clock
	TxUtil          uint32 // egress link utilisation
	Drops           uint32 // packets the hop reports dropped in Queue
	Congestion      uint32 // the hop's congestion level of Queue (a congested report's occupancy)
	Buffer          uint8  // the shared buffer's ID
	BufferOccupancy uint32
	Has             HopFields
}

// SetMetadata fills h from INT metadata m, leaving out what m lacks.
func (h *Hop) SetMetadata(m *inband.Metadata) {
	*h = Hop{}
	if m.Has(inband.BitNodeID) {
		h.Switch, h.Has = m.NodeID, h.Has|HasSwitch
	}
	switch {
	case m.Has(inband.BitL2Ports):
		h.Ingress, h.Egress, h.Has = m.L2Ingress, m.L2Egress, h.Has|HasPorts
	case m.Has(inband.BitL1Ports):
		h.Ingress, h.Egress, h.Has = uint32(m.L1Ingress), uint32(m.L1Egress), h.Has|HasPorts
	}
	if m.Has(inband.BitQueue) {
		h.Queue, h.Occupancy, h.Has = m.QueueID, m.QueueOccupancy, h.Has|HasQueue
	}
	if m.Has(inband.BitHopLatency) {
		h.Latency, h.Has = m.HopLatency, h.Has|HasLatency
	}
	switch {
	case m.Has(inband.BitEgressTS):
		h.Timestamp, h.Has = m.EgressTimestamp, h.Has|HasTimestamp
	case m.Has(inband.BitIngressTS):
		h.Timestamp, h.Has = m.IngressTimestamp, h.Has|HasTimestamp
	}
	if m.Has(inband.BitTxUtil) {
		h.TxUtil, h.Has = m.TxUtilization, h.Has|HasTxUtil
	}
	if m.Has(inband.BitBuffer) {
		h.Buffer, h.BufferOccupancy, h.Has = m.BufferID, m.BufferOccupancy, h.Has|HasBuffer
	}
}

// hopReader reads the hops of one metadata layout into Hops, as
// SetMetadata reads a decoded Metadata: from the layout's Offsets, each
// field a load and an all-ones check, the choices between fields (level 2
// or 1 ports, egress or ingress timestamp) made once per layout.
type hopReader struct {
	fields inband.Fields // the layout read
	o      inband.Offsets
}

// compile makes r read layout f; nothing to do when it already does.
func (r *hopReader) compile(f *inband.Fields) {
	if r.fields != *f {
		r.fields, r.o = *f, f.Offsets()
	}
}

// word returns b's word at byte at (none: at < 0) unless all ones (not
// available).
func word(b []byte, at int) (uint32, bool) {
	if at < 0 {
		return 0, false
	}
	// b[at:at+4], not b[at:]: one bounds check, no length to carry.
	w := binary.BigEndian.Uint32(b[at : at+4])
	return w, w != 0xFFFFFFFF
}

// double is word of two words.
func double(b []byte, at int) (uint64, bool) {
	if at < 0 {
		return 0, false
	}
	v := binary.BigEndian.Uint64(b[at : at+8])
	return v, v != ^uint64(0)
}

// timestamp returns the timestamp at (8 bytes when wide, else 4).
func timestamp(b []byte, at int, wide bool) (uint64, bool) {
	if wide {
		return double(b, at)
	}
	w, ok := word(b, at)
	return uint64(w), ok
}

// read fills hops from stack s, source first (hops[i] is s.hop(s.n-1-i)):
// each from its metadata, at least the layout's words; a field the hop
// filled with all ones (not available) is left out, zero, as SetMetadata
// leaves it. One loop, no call: its state stays in registers.
func (r *hopReader) read(hops []Hop, s *stack) {
	o := &r.o
	for i := range hops {
		h, b := &hops[i], s.hop(s.n-1-i)
		*h = Hop{}
		var has HopFields // kept in a register, stored once
		if w, ok := word(b, o.NodeID); ok {
			h.Switch, has = w, has|HasSwitch
		}
		if v, ok := double(b, o.L2Ports); ok {
			h.Ingress, h.Egress, has = uint32(v>>32), uint32(v), has|HasPorts
		} else if w, ok := word(b, o.L1Ports); ok {
			h.Ingress, h.Egress, has = w>>16, w&0xFFFF, has|HasPorts
		}
		if w, ok := word(b, o.Queue); ok {
			h.Queue, h.Occupancy, has = uint8(w>>24), w&0xFFFFFF, has|HasQueue
			if o.Queue16 {
				h.Queue, h.Occupancy = uint8(w>>16), w&0xFFFF
			}
			// INT 0.5's congestion word names the queue too, as in Metadata.
			if w, ok := word(b, o.Congestion); ok {
				h.Queue = uint8(w >> 16)
			}
		}
		if w, ok := word(b, o.HopLatency); ok {
			h.Latency, has = w, has|HasLatency
		}
		if v, ok := timestamp(b, o.EgressTS, o.EgressTS64); ok {
			h.Timestamp, has = v, has|HasTimestamp
		} else if v, ok := timestamp(b, o.IngressTS, o.IngressTS64); ok {
			h.Timestamp, has = v, has|HasTimestamp
		}
		if w, ok := word(b, o.TxUtil); ok {
			h.TxUtil, has = w, has|HasTxUtil
		}
		if w, ok := word(b, o.Buffer); ok {
			h.Buffer, h.BufferOccupancy, has = uint8(w>>24), w&0xFFFFFF, has|HasBuffer
		}
		h.Has = has
	}
}

// Record is one packet's telemetry: its flow and the hops it crossed,
// source first. It is what the Detector and the Aggregator take.
type Record struct {
	Flow  uint32 // the flow's key (inband.FlowKey)
	Tuple inband.FiveTuple
	Time  time.Time // when the collector received it
	Hops  []Hop
	// PerHop says the record is one hop's own report (a postcard, a drop
	// report), not the flow's path: the Detector's flow rules (path, flow
	// and hop latency) and the Aggregator's flow path leave it out.
	PerHop bool
	// Position is a PerHop record's place on the path, 1 the source (0:
	// unknown): the flow table keeps its values there.
	Position uint8
}

// SetTrace fills r from an INT-MD path trace received at now, reusing r's
// hop storage: it does not allocate once r.Hops has grown to MaxHops. The
// hops are the stack's, source first, then the reporting node's own
// metadata (Trace.Sink) and its drop and congestion flags: merged into the
// last hop when the stack ends at that node, else a hop of its own.
func (r *Record) SetTrace(t *Trace, now time.Time) {
	r.start(t, now)
	n := min(len(t.Hops), MaxHops)
	r.Hops = r.Hops[:n]
	for i := range n {
		r.Hops[i].SetMetadata(&t.Hops[i])
	}
	r.addSink(t, len(t.Hops))
}

func (r *Record) start(t *Trace, now time.Time) {
	// One field at a time: a multiple assignment would copy the tuple
	// and the time through temporaries.
	r.Flow, r.PerHop, r.Position = t.Key, false, 0
	r.Tuple = t.Flow
	r.Time = now
	r.grow()
}

// setStack is SetTrace of t whose hops are in s, read straight into the
// record (the fields a Hop holds, not a whole Metadata each).
func (r *Record) setStack(t *Trace, s *stack, hr *hopReader, now time.Time) {
	r.start(t, now)
	n := min(s.n, MaxHops)
	r.Hops = r.Hops[:n]
	hr.compile(&s.fields)
	hr.read(r.Hops, s)
	r.addSink(t, s.n)
}

// addSink adds trace t's reporting node to r, whose Hops are the first of
// the stack's n.
func (r *Record) addSink(t *Trace, n int) {
	if t.Sink.Present == 0 && !t.Dropped && !t.Congested {
		return
	}
	var s Hop
	if t.Sink.Present == 0x8000>>inband.BitNodeID && !t.Dropped && !t.Congested {
		// What most sinks report of themselves: their node alone.
		s.Switch, s.Has = t.Node, HasSwitch
	} else {
		s.SetMetadata(&t.Sink)
		s.Switch, s.Has = t.Node, s.Has|HasSwitch
		s.flags(t.Dropped, t.Congested, &t.Sink)
	}
	k := len(r.Hops)
	switch {
	case k == n && k > 0 && r.Hops[k-1].Switch == t.Node:
		r.Hops[k-1].merge(&s)
	case k == n && k < MaxHops:
		r.Hops = append(r.Hops, s)
	}
}

// SetHopReport fills r from a per-hop report received at now: one hop, the
// reporting node with its metadata, a D flag one drop in the drop queue, a
// Q flag the queue's congestion, at the report's place on the path.
func (r *Record) SetHopReport(h *HopReport, now time.Time) {
	r.Flow, r.PerHop, r.Position = h.Key, true, 0
	r.Tuple = h.Flow
	r.Time = now
	if h.Hop >= 1 && h.Hop <= MaxHops {
		r.Position = uint8(h.Hop)
	}
	r.grow()
	r.Hops = r.Hops[:1]
	r.Hops[0].SetMetadata(&h.Meta)
	r.Hops[0].flags(h.Dropped, h.Congested, &h.Meta)
}

func (r *Record) grow() {
	if cap(r.Hops) < MaxHops {
		r.Hops = make([]Hop, 0, MaxHops)
	}
}

// flags adds a report's D (one drop in m's drop queue) and Q (m's queue
// occupancy as the congestion) flags.
func (h *Hop) flags(dropped, congested bool, m *inband.Metadata) {
	if dropped {
		h.Queue, h.Drops, h.Has = m.DropQueueID, 1, h.Has|HasDrops
	}
	if congested && m.Has(inband.BitQueue) {
		h.Congestion, h.Has = m.QueueOccupancy, h.Has|HasCongestion
	}
}

// merge adds the values of s that h lacks.
func (h *Hop) merge(s *Hop) {
	add := s.Has &^ h.Has
	if add == 0 {
		return
	}
	if add&HasPorts != 0 {
		h.Ingress, h.Egress = s.Ingress, s.Egress
	}
	if add&HasQueue != 0 {
		h.Queue, h.Occupancy = s.Queue, s.Occupancy
	}
	if add&HasLatency != 0 {
		h.Latency = s.Latency
	}
	if add&HasTimestamp != 0 {
		h.Timestamp = s.Timestamp
	}
	if add&HasTxUtil != 0 {
		h.TxUtil = s.TxUtil
	}
	if add&HasDrops != 0 {
		h.Queue, h.Drops = s.Queue, s.Drops
	}
	if add&HasCongestion != 0 {
		h.Congestion = s.Congestion
	}
	if add&HasBuffer != 0 {
		h.Buffer, h.BufferOccupancy = s.Buffer, s.BufferOccupancy
	}
	h.Has |= add
}

// Records returns the analytics records of what the last Handle or
// HandlePacket decoded, received at now: one per Trace (as
// Record.SetTrace makes it), then one per HopReport (Record.SetHopReport).
// A trace's record is read from its stack, not from its decoded Metadata.
// They are valid until the next call, and reuse their storage: no
// allocation once grown.
func (b *Bridge) Records(now time.Time) []Record {
	nt := len(b.traces)
	n := nt + len(b.perHop)
	if n > 0 {
		b.record(n - 1)
	}
	recs := b.recs[:n]
	for i := range nt {
		recs[i].setStack(&b.traces[i], &b.stacks[i], &b.reader, now)
	}
	for i := range b.perHop {
		recs[nt+i].SetHopReport(&b.perHop[i], now)
	}
	return recs
}

// Path is a flow's path: the switches' node IDs, source first.
type Path struct {
	Len   uint8
	Nodes [MaxHops]uint32
}

// Slice returns the node IDs.
func (p *Path) Slice() []uint32 { return p.Nodes[:p.Len] }

func (p *Path) set(hops []Hop) {
	*p = Path{Len: uint8(len(hops))}
	for i := range hops {
		p.Nodes[i] = hops[i].Switch
	}
}

func (p *Path) same(hops []Hop) bool {
	if int(p.Len) != len(hops) {
		return false
	}
	for i := range hops {
		if p.Nodes[i] != hops[i].Switch {
			return false
		}
	}
	return true
}
