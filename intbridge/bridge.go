// Package intbridge turns Telemetry Reports (0.5, 1.0, 2.0) and raw INT
// data packets into DTA reports, the mapping of the DTA paper's Table 2:
//
//   - an INT-MD path trace (a report whose truncated packet carries an INT-MD
//     stack, over UDP or TCP) becomes a Key-Write of the flow's path, the
//     hops' node IDs from the source, under the flow's key (inband.FlowKey);
//   - a per-hop report (INT-XD or INT-MX, a 0.5 local or drop report, a 1.0
//     report: the reporting node's own metadata, no stack) becomes a
//     Postcard: hop number from the inner packet's TTL, value the reporting
//     node's ID;
//   - a report with the D (dropped) or Q (congested) flag becomes an Append
//     to the drop or congestion list: node, flow key, and the drop reason or
//     queue occupancy;
//   - every report of a flow becomes a Key-Increment of the flow's counter.
//
// Beside the DTA reports, the bridge hands analytics every hop's metadata
// in one type, inband.Metadata: Traces for INT-MD stacks (and the sink's
// own metadata), HopReports for per-hop reports; and both as the
// analytics' Records, whose hops are read straight from the stacks (the
// fields a Hop holds): a Trace's Metadata is decoded only when Traces is
// called.
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
	// INTPort is the UDP destination port that marks INT over UDP in the
	// inner packets (0: no port marks INT).
	INTPort uint16
	// INTDSCP under INTDSCPMask is the IP DSCP that marks INT after a TCP
	// or UDP header (INT over TCP/UDP marked by DSCP; mask 0: DSCP marks
	// nothing).
	INTDSCP, INTDSCPMask uint8
	// INTAfterL4 looks for INT after every TCP and UDP header, as
	// INTCollector does; bytes there that do not decode as INT-MD or
	// INT-MX are taken as no INT.
	INTAfterL4 bool
	// PathHops is the hops a Key-Write path value holds (default 5): 4-byte
	// node IDs, source first, zero where the path is shorter; a longer
	// path keeps its PathHops hops nearest the source and is counted in
	// PathTruncated (its Trace keeps every hop).
	PathHops int
	// PathRedundancy and CountRedundancy are the N of the path Key-Writes
	// and of the flow counters' Key-Increments (default 2; at most 255).
	PathRedundancy, CountRedundancy int
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
	// SinkNode is the node ID HandlePacket, the bridge acting as INT sink,
	// reports its traces under.
	SinkNode uint32
}

// EventEntrySize is the bytes of a drop or congestion entry: node ID, flow
// key, then the drop reason (drops: queue ID << 24 | reason << 16) or the
// queue occupancy (congestion: queue ID << 24 | occupancy), big-endian.
const EventEntrySize = 12

// Counters count what the bridge did.
type Counters struct {
	Packets       uint64 // Telemetry Report packets and raw INT packets handled
	Malformed     uint64 // packets that did not decode (Handle returned the error)
	Individuals   uint64 // individual reports
	NoFlow        uint64 // individual reports without a flow (no IP in the truncated packet)
	BadStack      uint64 // INT-MD stacks that do not split into hops
	HopRange      uint64 // postcards whose hop falls outside 1..PostcardHops
	PathTruncated uint64 // paths longer than PathHops (their hops nearest the source written)
	NoINT         uint64 // raw packets (HandlePacket) without INT-MD
	KeyWrites     uint64
	Postcards     uint64
	Appends       uint64
	Increments    uint64
}

// Bridge maps Telemetry Reports to DTA reports. It is not safe for
// concurrent use; give each goroutine its own.
type Bridge struct {
	cfg     Config
	rep     inband.Report
	in      inband.INT
	fields  inband.Fields // b.in's hop layout
	out     []dta.Report
	arena   []byte
	traces  []Trace
	stacks  []stack           // by trace
	decoded bool              // the traces' Hops are decoded (Traces)
	hops    []inband.Metadata // the traces' hops
	perHop  []HopReport
	meta    inband.Metadata // a report's metadata kept by neither
	recs    []Record        // the traces' records, then the per-hop reports'
	reader  hopReader       // the records' hop layout
	c       Counters
}

// stack is where a Trace's hops are: n hops of per bytes, the top of the
// stack (nearest the sink) first, laid out by fields.
type stack struct {
	hops   []byte
	per, n int
	fields inband.Fields
}

// Trace is an INT-MD path trace the bridge decoded: the flow, its key, the
// node that sent the Telemetry Report (the sink, or a transit node for an
// intermediate report), each hop's metadata from the stack, source first,
// and the reporting node's own metadata when the report carried it
// (Sink.Present 0 otherwise; Sink.NodeID is Node), with the report's D and
// Q flags.
type Trace struct {
	Flow               inband.FiveTuple
	Key                uint32
	Node               uint32
	Hops               []inband.Metadata
	Sink               inband.Metadata
	Dropped, Congested bool
}

// HopReport is a per-hop report the bridge decoded (INT-XD, INT-MX, a 0.5
// local or drop report, a 1.0 report): the flow, its key, the hop number
// from the inner packet's TTL (1 + InitialTTL - TTL, unchecked), the
// report's D and Q flags, and the reporting node's metadata, whose NodeID
// is always present.
type HopReport struct {
	Flow               inband.FiveTuple
	Key                uint32
	Hop                int
	Dropped, Congested bool
	Meta               inband.Metadata
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
	if cfg.PathHops < 1 || cfg.PathHops > 64 || cfg.PostcardHops < 1 || cfg.PostcardHops > 255 || cfg.DropList == cfg.CongestionList || cfg.INTDSCPMask > 0x3F {
		return nil, fmt.Errorf("%w: path hops %d (1..64), postcard hops %d (1..255), drop list %d and congestion list %d must differ, DSCP mask %#x (6 bits)",
			ErrConfig, cfg.PathHops, cfg.PostcardHops, cfg.DropList, cfg.CongestionList, cfg.INTDSCPMask)
	}
	if cfg.PathRedundancy < 1 || cfg.PathRedundancy > 255 || cfg.CountRedundancy < 1 || cfg.CountRedundancy > 255 {
		return nil, fmt.Errorf("%w: path redundancy %d and count redundancy %d, want 1..255", ErrConfig, cfg.PathRedundancy, cfg.CountRedundancy)
	}
	return &Bridge{cfg: cfg}, nil
}

// Counters returns the counters.
func (b *Bridge) Counters() Counters { return b.c }

// start resets the per-call outputs.
func (b *Bridge) start() {
	b.c.Packets++
	b.out, b.arena, b.traces, b.stacks, b.hops, b.perHop = b.out[:0], b.arena[:0], b.traces[:0], b.stacks[:0], b.hops[:0], b.perHop[:0]
	b.decoded = false
}

// Handle maps the Telemetry Report in payload (a UDP payload; any version)
// to DTA reports. The reports and their data are valid until the next
// call. It allocates nothing once its buffers have grown to the largest
// packet.
func (b *Bridge) Handle(payload []byte) ([]dta.Report, error) {
	b.start()
	if err := b.rep.DecodeFromBytes(payload, gopacket.NilDecodeFeedback); err != nil {
		b.c.Malformed++
		return nil, err
	}
	b.reserve(len(b.rep.Individuals))
	for k := range b.rep.Individuals {
		b.individual(&b.rep.Individuals[k])
	}
	return b.out, nil
}

// reserve sizes the arena for n reports so appends never move it (reports
// point into it): two entries and a path each at most.
func (b *Bridge) reserve(n int) {
	if need := n * (2*EventEntrySize + 4*b.cfg.PathHops); cap(b.arena) < need {
		b.arena = make([]byte, 0, need)
	}
}

// HandlePacket is the bridge as INT sink ("bump in the wire"): frame is a
// data packet (first is layers.LayerTypeEthernet, LayerTypeIPv4 or
// LayerTypeIPv6) that may carry INT over UDP or TCP, found as Config's
// INTPort, INTDSCP and INTAfterL4 say. A packet with an INT-MD stack
// becomes a path Key-Write and a Trace under Config.SinkNode, and a
// Key-Increment of its flow; any other packet is counted in NoINT (or
// NoFlow) and yields nothing. The reports are valid until the next call.
func (b *Bridge) HandlePacket(frame []byte, first gopacket.LayerType) ([]dta.Report, error) {
	b.start()
	var start uint8
	switch first {
	case layers.LayerTypeEthernet:
		start = inband.InEthernet
	case layers.LayerTypeIPv4:
		start = inband.InIPv4
	case layers.LayerTypeIPv6:
		start = inband.InIPv6
	default:
		return nil, fmt.Errorf("%w: first layer %v: want Ethernet, IPv4 or IPv6", ErrConfig, first)
	}
	b.reserve(1)
	f := b.inner(start, frame)
	switch {
	case !f.ok:
		b.c.NoFlow++
	case !f.md:
		b.c.NoINT++
	default:
		key := inband.FlowKey(f.tuple)
		b.stack(f.tuple, key, b.cfg.SinkNode, true)
		b.increment(key)
	}
	return b.out, nil
}

func (b *Bridge) individual(r *inband.Individual) {
	b.c.Individuals++
	f := b.inner(r.InType, r.Inner)
	if !f.ok {
		b.c.NoFlow++
		return
	}
	key := inband.FlowKey(f.tuple)
	node := b.rep.NodeID
	local := r.RepType == inband.RepINT
	// The report's own metadata is decoded where it is kept (the trace's
	// Sink, the per-hop report's Meta), not copied there.
	m := &b.meta
	var hr *HopReport
	switch {
	case f.md:
		// An intermediate report (I) holds the stack as far as a transit
		// node: a Trace, but not the flow's path, which the sink's report
		// writes whole.
		if t := b.stack(f.tuple, key, node, !r.Intermediate); t != nil {
			t.Dropped, t.Congested = r.Dropped, r.Congested
			m = &t.Sink
		}
	case local:
		hr = b.nextHop()
		hr.Flow = f.tuple
		hr.Key, hr.Hop, hr.Dropped, hr.Congested = key, 1+int(b.cfg.InitialTTL)-int(f.ttl), r.Dropped, r.Congested
		m = &hr.Meta
	}
	if local {
		_ = r.Metadata(m) // RepType is INT: no error
		if !m.Has(inband.BitNodeID) {
			m.NodeID, m.Present = node, m.Present|0x8000>>inband.BitNodeID
		}
	} else if m == &b.meta {
		*m = inband.Metadata{}
	}
	if hr != nil {
		if hr.Hop < 1 || hr.Hop > b.cfg.PostcardHops {
			b.c.HopRange++
		} else {
			o := b.next(dta.OpPostcard)
			o.Postcard.Key, o.Postcard.Hop, o.Postcard.Value = key, uint8(hr.Hop), m.NodeID
			b.c.Postcards++
		}
	}
	if r.Dropped {
		b.event(b.cfg.DropList, node, key, uint32(m.DropQueueID)<<24|uint32(m.DropReason)<<16)
	}
	if r.Congested {
		b.event(b.cfg.CongestionList, node, key, uint32(m.QueueID)<<24|m.QueueOccupancy&0xFFFFFF)
	}
	b.increment(key)
}

func (b *Bridge) increment(key uint32) {
	o := b.next(dta.OpKeyIncrement)
	o.KeyIncrement.Redundancy, o.KeyIncrement.Key, o.KeyIncrement.Counter = uint8(b.cfg.CountRedundancy), key, 1
	b.c.Increments++
}

// next returns the next report's slot in b.out, zeroed but for its
// opcode. The reports are written in place: a composite literal would be
// built aside and copied.
func (b *Bridge) next(op dta.Opcode) *dta.Report {
	n := len(b.out)
	if n == cap(b.out) {
		b.out = slices.Grow(b.out, 1)
	}
	b.out = b.out[:n+1]
	o := &b.out[n]
	*o = dta.Report{}
	o.Header.Opcode = op
	return o
}

// nextHop returns the next per-hop report's slot, zeroed.
func (b *Bridge) nextHop() *HopReport {
	n := len(b.perHop)
	if n == cap(b.perHop) {
		b.perHop = slices.Grow(b.perHop, 1)
	}
	b.perHop = b.perHop[:n+1]
	h := &b.perHop[n]
	*h = HopReport{}
	return h
}

// Traces returns the INT-MD path traces the last Handle or HandlePacket
// decoded, for analytics beside the DTA reports (Detector, Aggregator).
// They are valid until the next call. Their hops are decoded (every field,
// inband.Metadata) when first asked for: Records reads the stacks itself.
func (b *Bridge) Traces() []Trace {
	if b.decoded {
		return b.traces
	}
	b.decoded = true
	total := 0
	for i := range b.stacks {
		total += b.stacks[i].n
	}
	b.hops = slices.Grow(b.hops[:0], total)[:total]
	at := 0
	for i := range b.traces {
		s := &b.stacks[i]
		hops := b.hops[at : at+s.n : at+s.n]
		at += s.n
		// Hop n-1 (the bottom of the stack) is the source: it goes first.
		for h := range hops {
			s.fields.Decode(&hops[h], s.hop(s.n-1-h))
		}
		b.traces[i].Hops = hops
	}
	return b.traces
}

// hop returns hop h's bytes, h = 0 the top of the stack.
func (s *stack) hop(h int) []byte { return s.hops[h*s.per : (h+1)*s.per] }

// HopReports returns the per-hop reports the last Handle decoded (those
// whose hop falls outside 1..PostcardHops included). They are valid until
// the next call.
func (b *Bridge) HopReports() []HopReport { return b.perHop }

// stack reads the INT-MD stack in b.in: the Trace of flow, key and node
// (returned, for its caller to add the reporting node's own), whose hops
// are read when asked for (Records, Traces), and (with path) the path
// Key-Write of the PathHops hops nearest the source, source first. It
// returns nil for a stack that does not split into hops.
func (b *Bridge) stack(flow inband.FiveTuple, key, node uint32, path bool) *Trace {
	n, err := b.in.Hops()
	if err != nil {
		b.c.BadStack++
		return nil
	}
	b.fields.Compile(&b.in)
	per := 4 * int(b.in.HopML)
	k := len(b.stacks) // = len(b.traces)
	b.stacks, b.traces = slices.Grow(b.stacks, 1)[:k+1], slices.Grow(b.traces, 1)[:k+1]
	s := &b.stacks[k]
	// Field by field: a multiple assignment copies through temporaries.
	s.hops, s.per, s.n = b.in.Stack[:n*per], per, n
	s.fields = b.fields
	t := &b.traces[k]
	*t = Trace{}
	t.Flow = flow
	t.Key, t.Node = key, node
	if !path {
		return t
	}
	if n > b.cfg.PathHops {
		b.c.PathTruncated++
	}
	at := len(b.arena)
	b.arena = b.arena[:at+4*b.cfg.PathHops]
	v := b.arena[at:]
	w := min(n, b.cfg.PathHops)
	for i := range w {
		id, _ := b.fields.NodeID(s.hop(n - 1 - i))
		binary.BigEndian.PutUint32(v[4*i:], id)
	}
	clear(v[4*w:]) // a shorter path's zeros
	o := b.next(dta.OpKeyWrite)
	o.KeyWrite.Redundancy, o.KeyWrite.Key, o.KeyWrite.Data = uint8(b.cfg.PathRedundancy), key, v
	b.c.KeyWrites++
	return t
}

// record returns record i's storage.
func (b *Bridge) record(i int) *Record {
	for len(b.recs) <= i {
		b.recs = append(b.recs, Record{Hops: make([]Hop, 0, MaxHops)})
	}
	return &b.recs[i]
}

func (b *Bridge) event(list, node, key, detail uint32) {
	start := len(b.arena)
	b.arena = b.arena[:start+EventEntrySize]
	v := b.arena[start:]
	binary.BigEndian.PutUint32(v, node)
	binary.BigEndian.PutUint32(v[4:], key)
	binary.BigEndian.PutUint32(v[8:], detail)
	o := b.next(dta.OpAppend)
	o.Append.ListID, o.Append.Data = list, v
	b.c.Appends++
}

// flow is what the bridge learned from an inner packet.
type flow struct {
	ok    bool
	tuple inband.FiveTuple
	ttl   uint8
	md    bool // an INT-MD stack was found (in b.in)
}

// Header sizes and values of the inner packets' headers.
const (
	ethLen, vlanLen, ip4Len, ip6Len, udpLen, tcpLen = 14, 4, 20, 40, 8, 20
	etherIPv4, etherIPv6, etherVLAN, etherQinQ      = 0x0800, 0x86DD, 0x8100, 0x88A8
	protoTCP, protoUDP                              = 6, 17
)

// inner reads an inner packet (a report's truncated packet of InType typ,
// or a raw frame): its flow, its TTL, and INT after its TCP or UDP header
// where Config marks it. A truncated packet ends where the switch cut it:
// whatever headers are whole are used.
func (b *Bridge) inner(typ uint8, p []byte) (f flow) {
	typ, p = network(typ, p)
	var dscp uint8
	var l4 []byte
	switch typ {
	case inband.InIPv4:
		l4, dscp = ipv4Header(&f, p)
	case inband.InIPv6:
		l4, dscp = ipv6Header(&f, p)
	}
	if !f.ok {
		return f
	}
	payload, ok := transport(&f, l4)
	if !ok || !b.marked(&f, dscp) || b.in.DecodeFromBytes(payload, gopacket.NilDecodeFeedback) != nil || b.in.Type != inband.TypeMD {
		return f
	}
	f.md = true
	b.original(&f)
	return f
}

// network returns the network header's type (InIPv4, InIPv6, or 0 for
// none) and its bytes: an Ethernet frame's payload past its VLAN tags, or
// p itself.
func network(typ uint8, p []byte) (uint8, []byte) {
	switch typ {
	case inband.InEthernet:
		if len(p) < ethLen {
			return 0, nil
		}
		et, off := binary.BigEndian.Uint16(p[12:]), ethLen
		for (et == etherVLAN || et == etherQinQ) && len(p) >= off+vlanLen {
			et, off = binary.BigEndian.Uint16(p[off+2:]), off+vlanLen
		}
		switch et {
		case etherIPv4:
			return inband.InIPv4, p[off:]
		case etherIPv6:
			return inband.InIPv6, p[off:]
		}
	case inband.InIPv4, inband.InIPv6:
		return typ, p
	}
	return 0, nil
}

// ipv4Header reads an IPv4 header into f (f.ok when whole) and returns
// what follows it (nil for a later fragment, which has no L4 header) and
// the DSCP.
func ipv4Header(f *flow, p []byte) (l4 []byte, dscp uint8) {
	if len(p) < ip4Len || p[0]>>4 != 4 {
		return nil, 0
	}
	ihl := 4 * int(p[0]&0xF)
	f.ok, f.ttl, dscp = true, p[8], p[1]>>2
	f.tuple.Src = netip.AddrFrom4([4]byte(p[12:16]))
	f.tuple.Dst = netip.AddrFrom4([4]byte(p[16:20]))
	f.tuple.Proto = p[9]
	if ihl >= ip4Len && len(p) >= ihl && binary.BigEndian.Uint16(p[6:])&0x1FFF == 0 {
		l4 = p[ihl:]
	}
	return l4, dscp
}

// ipv6Header is ipv4Header for IPv6.
func ipv6Header(f *flow, p []byte) (l4 []byte, dscp uint8) {
	if len(p) < ip6Len || p[0]>>4 != 6 {
		return nil, 0
	}
	f.ok, f.ttl, dscp = true, p[7], uint8(binary.BigEndian.Uint16(p)>>6)&0x3F
	f.tuple.Src = netip.AddrFrom16([16]byte(p[8:24]))
	f.tuple.Dst = netip.AddrFrom16([16]byte(p[24:40]))
	f.tuple.Proto = p[6]
	return p[ip6Len:], dscp
}

// transport reads the ports of a TCP or UDP header in l4 into f and
// returns the header's payload; false for another protocol or a header
// cut short.
func transport(f *flow, l4 []byte) ([]byte, bool) {
	var payload []byte
	switch f.tuple.Proto {
	case protoUDP:
		if len(l4) < udpLen {
			return nil, false
		}
		payload = l4[udpLen:]
	case protoTCP:
		off := 4 * int(l4Byte(l4, 12)>>4)
		if len(l4) < tcpLen || off < tcpLen || len(l4) < off {
			return nil, false
		}
		payload = l4[off:]
	default:
		return nil, false
	}
	f.tuple.SrcPort, f.tuple.DstPort = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
	return payload, true
}

// marked says whether Config marks INT after f's L4 header.
func (b *Bridge) marked(f *flow, dscp uint8) bool {
	return b.cfg.INTAfterL4 ||
		b.cfg.INTPort != 0 && f.tuple.Proto == protoUDP && f.tuple.DstPort == b.cfg.INTPort ||
		b.cfg.INTDSCPMask != 0 && dscp&b.cfg.INTDSCPMask == b.cfg.INTDSCP&b.cfg.INTDSCPMask
}

// original makes f the flow the INT headers in b.in were inserted into.
func (b *Bridge) original(f *flow) {
	switch {
	case b.in.Legacy && b.in.Version == 0:
		if f.tuple.Proto == protoUDP && f.tuple.DstPort == b.cfg.INTPort && b.cfg.INTPort != 0 {
			f.tuple.DstPort = b.in.TailPort
		}
	case b.in.Legacy:
	case b.in.NPT == inband.NPTUDPPayload:
		f.tuple.DstPort = b.in.Field
	case b.in.NPT == inband.NPTL4Header:
		f.tuple.Proto = uint8(b.in.Field)
		if p := b.in.Payload; len(p) >= 4 {
			f.tuple.SrcPort, f.tuple.DstPort = binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:])
		}
	}
}

// l4Byte returns b[i], or 0 when b is shorter.
func l4Byte(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}
