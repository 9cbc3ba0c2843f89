package intbridge

import (
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
// hop storage: it does not allocate once r.Hops has grown to MaxHops.
func (r *Record) SetTrace(t *Trace, now time.Time) {
	r.Flow, r.Tuple, r.Time = t.Key, t.Flow, now
	n := min(len(t.Hops), MaxHops)
	if cap(r.Hops) < MaxHops {
		r.Hops = make([]Hop, 0, MaxHops)
	}
	r.Hops = r.Hops[:n]
	for i := range n {
		r.Hops[i].SetMetadata(&t.Hops[i])
	}
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
