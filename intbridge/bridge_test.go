package intbridge

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/inband"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
)

const intPort = 555

func ser(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	b := append([]byte(nil), buf.Bytes()...)
	return append(b, make([]byte, (4-len(b)%4)%4)...) // whole words, as reports carry them
}

func ipv4(ttl uint8, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, TTL: ttl, Protocol: proto, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}
}

// mdPacket is a flow's packet (TCP 1000 → 80) with INT-MD over UDP
// inserted before its TCP header, after the nodes of path pushed their
// node IDs (path[0] is the source).
func mdPacket(t testing.TB, path []uint32) []byte {
	md := &inband.INT{Type: inband.TypeMD, NPT: inband.NPTL4Header, Field: 6, Version: 2, HopML: 1, RemainingHopCount: 8, Instructions: 0x8000}
	for i := len(path) - 1; i >= 0; i-- { // hop 0 is the last to push
		md.AppendHop(&inband.Metadata{Present: 0x8000, NodeID: path[i]})
	}
	return intPacket(t, md)
}

func intPacket(t testing.TB, md *inband.INT) []byte {
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	ip := ipv4(60, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 9, DstPort: intPort}
	u.SetNetworkLayerForChecksum(ip)
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp, 1000)
	binary.BigEndian.PutUint16(tcp[2:], 80)
	tcp[12] = 5 << 4
	return ser(t, eth, ip, u, md, gopacket.Payload(tcp))
}

var tcpFlow = inband.FiveTuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 6, SrcPort: 1000, DstPort: 80}

func encode(t testing.TB, r *inband.Report) []byte {
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBridge(t *testing.T) {
	b, err := New(Config{INTPort: intPort})
	if err != nil {
		t.Fatal(err)
	}
	key := inband.FlowKey(tcpFlow)

	// The sink's report of an INT-MD packet, dropped there.
	sink := inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, Dropped: true, Tracked: true, RepMdBits: 1, Inner: mdPacket(t, []uint32{11, 22, 33})}
	sink.SetMetadata(&inband.Metadata{Present: 1, DropQueueID: 4, DropReason: 71})
	// A per-hop (INT-MX) report of a TCP packet at its third hop, congested.
	tcp := &layers.TCP{SrcPort: 1000, DstPort: 80, DataOffset: 5}
	ip := ipv4(62, layers.IPProtocolTCP)
	tcp.SetNetworkLayerForChecksum(ip)
	hop := inband.Individual{RepType: inband.RepINT, InType: inband.InIPv4, Congested: true, RepMdBits: 0x1000, Inner: ser(t, ip, tcp)}
	hop.SetMetadata(&inband.Metadata{Present: 0x1000, QueueID: 2, QueueOccupancy: 5000})
	// A report whose inner packet names no flow.
	none := inband.Individual{RepType: inband.RepInnerOnly, InType: inband.InNone, Inner: []byte{1, 2, 3, 4}}
	pkt := encode(t, &inband.Report{NodeID: 77, Individuals: []inband.Individual{sink, hop, none}})

	out, err := b.Handle(pkt)
	if err != nil {
		t.Fatal(err)
	}
	kw, pc, drops, congestion, incr := bridgeReports(t, out, key)
	if kw != 1 || pc != 1 || drops != 1 || congestion != 1 || incr != 2 {
		t.Fatalf("reports: %d paths, %d postcards, %d drops, %d congestion, %d counters", kw, pc, drops, congestion, incr)
	}
	c := b.Counters()
	if c.Packets != 1 || c.Individuals != 3 || c.NoFlow != 1 || c.KeyWrites != 1 || c.Postcards != 1 || c.Appends != 2 || c.Increments != 2 {
		t.Fatalf("counters %+v", c)
	}

	bridgeStores(t, out)
}

// bridgeReports checks each of TestBridge's DTA reports and counts them
// by kind.
func bridgeReports(t *testing.T, out []dta.Report, key uint32) (kw, pc, drops, congestion, incr int) {
	t.Helper()
	for _, r := range out {
		if err := r.Validate(); err != nil {
			t.Fatalf("invalid DTA report %+v: %v", r, err)
		}
		switch r.Header.Opcode {
		case dta.OpKeyWrite:
			kw++
			want := []uint32{11, 22, 33, 0, 0}
			for i, w := range want {
				if got := binary.BigEndian.Uint32(r.KeyWrite.Data[4*i:]); got != w || r.KeyWrite.Key != key || r.KeyWrite.Redundancy != 2 {
					t.Fatalf("path report %+v: hop %d is %d, want %d (key %#x)", r.KeyWrite, i, got, w, key)
				}
			}
		case dta.OpPostcard:
			pc++
			if p := r.Postcard; p.Key != key || p.Hop != 3 || p.Value != 77 {
				t.Fatalf("postcard %+v, want key %#x hop 3 value 77", p, key)
			}
		case dta.OpAppend:
			d, c := bridgeAppend(t, r.Append, key)
			drops, congestion = drops+d, congestion+c
		case dta.OpKeyIncrement:
			incr++
			if r.KeyIncrement.Key != key || r.KeyIncrement.Counter != 1 {
				t.Fatalf("counter %+v", r.KeyIncrement)
			}
		}
	}
	return kw, pc, drops, congestion, incr
}

// bridgeAppend checks one of TestBridge's Appends: a drop or a congestion
// entry, counted.
func bridgeAppend(t *testing.T, a dta.Append, key uint32) (drops, congestion int) {
	t.Helper()
	d := a.Data
	node, k, detail := binary.BigEndian.Uint32(d), binary.BigEndian.Uint32(d[4:]), binary.BigEndian.Uint32(d[8:])
	switch {
	case a.ListID == 0 && node == 77 && k == key && detail == 4<<24|71<<16:
		drops++
	case a.ListID == 1 && node == 77 && k == key && detail == 2<<24|5000:
		congestion++
	default:
		t.Fatalf("append %+v: node %d key %#x detail %#x", a, node, k, detail)
	}
	return drops, congestion
}

// bridgeStores puts TestBridge's reports into DTA stores: the flow's path
// and count come back by its key.
func bridgeStores(t *testing.T, out []dta.Report) {
	t.Helper()
	kl := keywrite.Layout{Slots: 1024, DataSize: 20}
	ks, _ := keywrite.NewStore(kl, nil)
	il := keyincr.Layout{Slots: 256}
	is, _ := keyincr.NewStore(il, nil)
	for _, r := range out {
		switch r.Header.Opcode {
		case dta.OpKeyWrite:
			ks.Put(r.KeyWrite.Key, r.KeyWrite.Data, int(r.KeyWrite.Redundancy))
		case dta.OpKeyIncrement:
			is.Add(r.KeyIncrement.Key, r.KeyIncrement.Counter, int(r.KeyIncrement.Redundancy))
		}
	}
	if res, _ := ks.Query(inband.FlowKey(tcpFlow), 2, keywrite.Plurality); res.Status != keywrite.Found || binary.BigEndian.Uint32(res.Data[8:]) != 33 {
		t.Fatalf("path query: %+v", res)
	}
	if n, _ := is.Query(inband.FlowKey(tcpFlow), 2); n != 2 {
		t.Fatalf("the flow counted %d reports, want 2", n)
	}
}

func TestBridgeErrors(t *testing.T) {
	b, _ := New(Config{INTPort: intPort})
	if _, err := b.Handle([]byte{0x30, 0, 0, 0, 0, 0, 0, 0}); !errors.Is(err, inband.ErrVersion) || b.Counters().Malformed != 1 {
		t.Fatalf("a version-3 report: %v %+v", err, b.Counters())
	}
	// An INT-MD stack that is not whole hops (source-only metadata of a
	// domain the bridge does not know): counted, the counter still made.
	// Two-word hops and a three-word stack.
	bad := intPacket(t, &inband.INT{Type: inband.TypeMD, NPT: inband.NPTL4Header, Field: 6, Version: 2, HopML: 2, Instructions: 0x8000, Stack: make([]byte, 12)})
	out, err := b.Handle(encode(t, &inband.Report{NodeID: 1, Individuals: []inband.Individual{{RepType: inband.RepInnerOnly, InType: inband.InEthernet, Inner: bad}}}))
	if err != nil || len(out) != 1 || out[0].Header.Opcode != dta.OpKeyIncrement || b.Counters().BadStack != 1 {
		t.Fatalf("bad stack: %v, %d reports, %+v", err, len(out), b.Counters())
	}
	// A postcard beyond the layout's hops.
	ip := ipv4(50, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 1, DstPort: 2}
	u.SetNetworkLayerForChecksum(ip)
	if _, err := b.Handle(encode(t, &inband.Report{Individuals: []inband.Individual{{RepType: inband.RepINT, InType: inband.InIPv4, Inner: ser(t, ip, u)}}})); err != nil || b.Counters().HopRange != 1 {
		t.Fatalf("hop 15: %v %+v", err, b.Counters())
	}
	if _, err := New(Config{DropList: 3, CongestionList: 3}); !errors.Is(err, ErrConfig) {
		t.Fatalf("equal lists: %v", err)
	}
	for _, c := range []Config{{PathRedundancy: 256}, {CountRedundancy: 256}, {PathRedundancy: -1}} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("redundancy path %d count %d: %v; want ErrConfig, not a truncated 8-bit N", c.PathRedundancy, c.CountRedundancy, err)
		}
	}
}

func TestBridgeAllocs(t *testing.T) {
	b, _ := New(Config{INTPort: intPort})
	sink := inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, Dropped: true, RepMdBits: 1, Inner: mdPacket(t, []uint32{11, 22, 33})}
	sink.SetMetadata(&inband.Metadata{Present: 1, DropReason: 3})
	pkt := encode(t, &inband.Report{NodeID: 7, Individuals: []inband.Individual{sink, sink}})
	b.Handle(pkt)
	if a := testing.AllocsPerRun(100, func() { b.Handle(pkt) }); a != 0 {
		t.Fatalf("Handle allocates %v times", a)
	}
}

// BenchmarkBridge: Telemetry Reports of INT-MD path traces (three hops,
// dropped) through the bridge, on one core.
func BenchmarkBridge(b *testing.B) {
	br, _ := New(Config{INTPort: intPort})
	sink := inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, Dropped: true, RepMdBits: 1, Inner: mdPacket(b, []uint32{11, 22, 33})}
	sink.SetMetadata(&inband.Metadata{Present: 1, DropReason: 3})
	pkt := encode(b, &inband.Report{NodeID: 7, Individuals: []inband.Individual{sink}})
	b.ReportAllocs()
	for range b.N {
		if _, err := br.Handle(pkt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
}

// Traces hand the INT-MD stacks to analytics, source first, each one its
// own hops even when a report carries several.
func TestTraces(t *testing.T) {
	b, _ := New(Config{INTPort: intPort})
	paths := [][]uint32{{11, 22, 33}, {5, 6, 7, 8, 9, 10, 11, 12, 13}, {1}}
	var ins []inband.Individual
	for _, p := range paths {
		ins = append(ins, inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, Inner: mdPacket(t, p)})
	}
	for round := range 2 {
		if _, err := b.Handle(encode(t, &inband.Report{NodeID: 77, Individuals: ins})); err != nil {
			t.Fatal(err)
		}
		tr := b.Traces()
		if len(tr) != len(paths) {
			t.Fatalf("round %d: %d traces", round, len(tr))
		}
		for i, p := range paths {
			if tr[i].Key != inband.FlowKey(tcpFlow) || tr[i].Node != 77 || tr[i].Flow != tcpFlow || len(tr[i].Hops) != len(p) {
				t.Fatalf("trace %d: %+v", i, tr[i])
			}
			for h, id := range p {
				if tr[i].Hops[h].NodeID != id {
					t.Fatalf("trace %d hop %d: node %d, want %d", i, h, tr[i].Hops[h].NodeID, id)
				}
			}
		}
	}
	if _, err := b.Handle(encode(t, &inband.Report{Individuals: ins[:1]})); err != nil || len(b.Traces()) != 1 {
		t.Fatalf("a later report: %d traces, %v", len(b.Traces()), err)
	}
}
