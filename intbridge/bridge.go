// Package intbridge turns Telemetry Reports into DTA reports, the mapping
// of the DTA paper's Table 2:
//
//   - an INT-MD path trace (a report whose truncated packet carries an INT-MD
//     stack) becomes a Key-Write of the flow's path, the hops' node IDs from
//     the source, under the flow's key (inband.FlowKey);
//   - a per-hop report of INT-XD or INT-MX (RepType INT, no stack) becomes a
//     Postcard: hop number from the inner packet's TTL, value the reporting
//     node's ID;
//   - a report with the D (dropped) or Q (congested) flag becomes an Append
//     to the drop or congestion list: node, flow key, and the drop reason or
//     queue occupancy;
//   - every report of a flow becomes a Key-Increment of the flow's counter.
//
// A report the bridge cannot map (no flow in it, a stack it cannot split) is
// counted, never silently dropped.
package intbridge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/inband"
)

// ErrConfig is wrapped by configuration errors.
var ErrConfig = errors.New("intbridge: invalid configuration")

// Config configures a Bridge. The zero value of each field takes the
// default beside it.
type Config struct {
	// INTPort is the UDP port that carries INT over UDP inside the reports'
	// truncated packets (0: INT is looked for on no port, and no path
	// trace is made).
	INTPort uint16
	// PathHops is the hops a Key-Write path value holds (default 5): 4-byte
	// node IDs, source first, zero where the path is shorter; longer paths
	// keep their last PathHops hops.
	PathHops int
	// PathRedundancy and CountRedundancy are the N of the path Key-Writes
	// and of the flow counters' Key-Increments (default 2).
	PathRedundancy, CountRedundancy uint8
	// InitialTTL is the TTL (IPv4) or hop limit (IPv6) flows leave their
	// source with, from which a postcard's hop number is 1 + InitialTTL -
	// TTL (default 64).
	InitialTTL uint8
	// PostcardHops is the Postcarding layout's B: postcards of a higher
	// hop are counted in HopOutOfRange (default 5).
	PostcardHops int
	// DropList and CongestionList are the Append lists of drop and
	// congestion events (default 0 and 1).
	DropList, CongestionList uint32
}

// EventEntrySize is the bytes of a drop or congestion entry: node ID, flow
// key, then the drop reason (drops: queue ID << 24 | reason << 16) or the
// queue occupancy (congestion: queue ID << 24 | occupancy), big-endian.
const EventEntrySize = 12

// Counters count what the bridge did.
type Counters struct {
	Packets     uint64 // Telemetry Report packets handled
	Malformed   uint64 // packets that did not decode (Handle returned the error)
	Individuals uint64 // individual reports
	NoFlow      uint64 // individual reports without a flow (no IP in the truncated packet)
	BadStack    uint64 // INT-MD stacks that do not split into hops
	HopRange    uint64 // postcards whose hop falls outside 1..PostcardHops
	KeyWrites   uint64
	Postcards   uint64
	Appends     uint64
	Increments  uint64
}

// Bridge maps Telemetry Reports to DTA reports. It is not safe for
// concurrent use; give each goroutine its own.
type Bridge struct {
	cfg Config
	rep inband.Report
	// parsers by the truncated packet's first header.
	parsers map[gopacket.LayerType]*gopacket.DecodingLayerParser
	eth     layers.Ethernet
	ip4     layers.IPv4
	ip6     layers.IPv6
	udp     layers.UDP
	tcp     layers.TCP
	decs    []gopacket.LayerType
	in      inband.INT
	out     []dta.Report
	arena   []byte
	traces  []Trace
	hops    []inband.Metadata // the traces' hops
	c       Counters
}

// Trace is an INT-MD path trace Handle decoded: the flow, its key, the
// node that sent the Telemetry Report, and each hop's metadata, source
// first.
type Trace struct {
	Flow inband.FiveTuple
	Key  uint32
	Node uint32
	Hops []inband.Metadata
}

// New returns a bridge with cfg.
func New(cfg Config) (*Bridge, error) {
	if cfg.PathHops == 0 {
		cfg.PathHops = 5
	}
	if cfg.PathRedundancy == 0 {
		cfg.PathRedundancy = 2
	}
	if cfg.CountRedundancy == 0 {
		cfg.CountRedundancy = 2
	}
	if cfg.InitialTTL == 0 {
		cfg.InitialTTL = 64
	}
	if cfg.PostcardHops == 0 {
		cfg.PostcardHops = 5
	}
	if cfg.CongestionList == 0 && cfg.DropList == 0 {
		cfg.CongestionList = 1
	}
	if cfg.PathHops < 1 || cfg.PathHops > 64 || cfg.PostcardHops < 1 || cfg.PostcardHops > 255 || cfg.DropList == cfg.CongestionList {
		return nil, fmt.Errorf("%w: path hops %d (1..64), postcard hops %d (1..255), drop list %d and congestion list %d must differ",
			ErrConfig, cfg.PathHops, cfg.PostcardHops, cfg.DropList, cfg.CongestionList)
	}
	b := &Bridge{cfg: cfg, parsers: map[gopacket.LayerType]*gopacket.DecodingLayerParser{}}
	for _, first := range []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeIPv6} {
		p := gopacket.NewDecodingLayerParser(first, &b.eth, &b.ip4, &b.ip6, &b.udp, &b.tcp)
		p.IgnoreUnsupported = true
		b.parsers[first] = p
	}
	return b, nil
}

// Counters returns the counters.
func (b *Bridge) Counters() Counters { return b.c }

// Handle maps the Telemetry Report in payload (a UDP payload) to DTA
// reports. The reports and their data are valid until the next call. It
// allocates nothing once its buffers have grown to the largest packet.
func (b *Bridge) Handle(payload []byte) ([]dta.Report, error) {
	b.c.Packets++
	b.out, b.arena, b.traces, b.hops = b.out[:0], b.arena[:0], b.traces[:0], b.hops[:0]
	if err := b.rep.DecodeFromBytes(payload, gopacket.NilDecodeFeedback); err != nil {
		b.c.Malformed++
		return nil, err
	}
	// Reports point into the arena: size it first so appends never move
	// it (three entries and a path per individual report at most).
	need := len(b.rep.Individuals) * (2*EventEntrySize + 4*b.cfg.PathHops)
	if cap(b.arena) < need {
		b.arena = make([]byte, 0, need)
	}
	for k := range b.rep.Individuals {
		b.individual(&b.rep.Individuals[k])
	}
	return b.out, nil
}

// flow is what the bridge learned from a truncated packet.
type flow struct {
	ok    bool
	tuple inband.FiveTuple
	ttl   uint8
	md    bool // an INT-MD stack was found (in b.in)
}

func (b *Bridge) individual(r *inband.Individual) {
	b.c.Individuals++
	f := b.inner(r)
	if !f.ok {
		b.c.NoFlow++
		return
	}
	key := inband.FlowKey(f.tuple)
	node := b.rep.NodeID
	switch {
	case f.md:
		b.path(key)
		b.trace(f.tuple, key, node)
	case r.RepType == inband.RepINT:
		hop := 1 + int(b.cfg.InitialTTL) - int(f.ttl)
		if hop < 1 || hop > b.cfg.PostcardHops {
			b.c.HopRange++
		} else {
			b.emit(dta.Report{Header: dta.Header{Opcode: dta.OpPostcard}, Postcard: dta.Postcard{Key: key, Hop: uint8(hop), Value: node}})
			b.c.Postcards++
		}
	}
	var m inband.Metadata
	if r.RepType == inband.RepINT {
		r.Metadata(&m)
	}
	if r.Dropped {
		b.event(b.cfg.DropList, node, key, uint32(m.DropQueueID)<<24|uint32(m.DropReason)<<16)
	}
	if r.Congested {
		b.event(b.cfg.CongestionList, node, key, uint32(m.QueueID)<<24|m.QueueOccupancy&0xFFFFFF)
	}
	b.emit(dta.Report{Header: dta.Header{Opcode: dta.OpKeyIncrement}, KeyIncrement: dta.KeyIncrement{Redundancy: b.cfg.CountRedundancy, Key: key, Counter: 1}})
	b.c.Increments++
}

func (b *Bridge) emit(r dta.Report) { b.out = append(b.out, r) }

// Traces returns the INT-MD path traces the last Handle decoded, for
// analytics beside the DTA reports (Detector, Aggregator). They are valid
// until the next Handle.
func (b *Bridge) Traces() []Trace {
	// b.hops may have grown after a trace was recorded: slice it now.
	at := 0
	for i := range b.traces {
		n := len(b.traces[i].Hops)
		b.traces[i].Hops = b.hops[at : at+n : at+n]
		at += n
	}
	return b.traces
}

// trace records the INT-MD stack in b.in as a Trace.
func (b *Bridge) trace(flow inband.FiveTuple, key, node uint32) {
	n, err := b.in.Hops()
	if err != nil {
		return // counted by path
	}
	start := len(b.hops)
	b.hops = slices.Grow(b.hops, n)[:start+n]
	for i := range n {
		b.in.Hop(n-1-i, &b.hops[start+i])
	}
	b.traces = append(b.traces, Trace{Flow: flow, Key: key, Node: node, Hops: b.hops[start : start+n]})
}

// path emits the Key-Write of the INT-MD stack in b.in.
func (b *Bridge) path(key uint32) {
	n, err := b.in.Hops()
	if err != nil {
		b.c.BadStack++
		return
	}
	start := len(b.arena)
	b.arena = b.arena[:start+4*b.cfg.PathHops]
	v := b.arena[start:]
	clear(v)
	var m inband.Metadata
	// Hop n-1 is the source: it goes first.
	for i := 0; i < min(n, b.cfg.PathHops); i++ {
		b.in.Hop(min(n, b.cfg.PathHops)-1-i, &m)
		binary.BigEndian.PutUint32(v[4*i:], m.NodeID)
	}
	b.emit(dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite}, KeyWrite: dta.KeyWrite{Redundancy: b.cfg.PathRedundancy, Key: key, Data: v}})
	b.c.KeyWrites++
}

func (b *Bridge) event(list, node, key, detail uint32) {
	start := len(b.arena)
	b.arena = b.arena[:start+EventEntrySize]
	v := b.arena[start:]
	binary.BigEndian.PutUint32(v, node)
	binary.BigEndian.PutUint32(v[4:], key)
	binary.BigEndian.PutUint32(v[8:], detail)
	b.emit(dta.Report{Header: dta.Header{Opcode: dta.OpAppend}, Append: dta.Append{ListID: list, Data: v}})
	b.c.Appends++
}

// inner decodes a report's truncated packet: its flow, its TTL, and an
// INT-MD stack over UDP on INTPort.
func (b *Bridge) inner(r *inband.Individual) (f flow) {
	var first gopacket.LayerType
	switch r.InType {
	case inband.InEthernet:
		first = layers.LayerTypeEthernet
	case inband.InIPv4:
		first = layers.LayerTypeIPv4
	case inband.InIPv6:
		first = layers.LayerTypeIPv6
	default:
		return f
	}
	// A truncated packet ends where the switch cut it: use what decoded.
	_ = b.parsers[first].DecodeLayers(r.Inner, &b.decs)
	var l4 []byte
	for _, t := range b.decs {
		switch t {
		case layers.LayerTypeIPv4:
			f.ok, f.ttl = true, b.ip4.TTL
			f.tuple.Src, _ = netip.AddrFromSlice(b.ip4.SrcIP.To4())
			f.tuple.Dst, _ = netip.AddrFromSlice(b.ip4.DstIP.To4())
			f.tuple.Proto = uint8(b.ip4.Protocol)
		case layers.LayerTypeIPv6:
			f.ok, f.ttl = true, b.ip6.HopLimit
			f.tuple.Src, _ = netip.AddrFromSlice(b.ip6.SrcIP)
			f.tuple.Dst, _ = netip.AddrFromSlice(b.ip6.DstIP)
			f.tuple.Proto = uint8(b.ip6.NextHeader)
		case layers.LayerTypeUDP:
			f.tuple.SrcPort, f.tuple.DstPort = uint16(b.udp.SrcPort), uint16(b.udp.DstPort)
			l4 = b.udp.Payload
		case layers.LayerTypeTCP:
			f.tuple.SrcPort, f.tuple.DstPort = uint16(b.tcp.SrcPort), uint16(b.tcp.DstPort)
		}
	}
	if !f.ok || b.cfg.INTPort == 0 || l4 == nil || f.tuple.DstPort != b.cfg.INTPort {
		return f
	}
	if b.in.DecodeFromBytes(l4, gopacket.NilDecodeFeedback) != nil || b.in.Type != inband.TypeMD {
		return f
	}
	f.md = true
	// The flow is the original one the INT headers were inserted into.
	switch b.in.NPT {
	case inband.NPTUDPPayload:
		f.tuple.DstPort = b.in.Field
	case inband.NPTL4Header:
		f.tuple.Proto = uint8(b.in.Field)
		if p := b.in.Payload; len(p) >= 4 {
			f.tuple.SrcPort, f.tuple.DstPort = binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:])
		}
	}
	return f
}
