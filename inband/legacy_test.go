package inband

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func words(ws ...uint32) []byte {
	var b []byte
	for _, w := range ws {
		b = binary.BigEndian.AppendUint32(b, w)
	}
	return b
}

// TestReportV1 decodes a Telemetry Report 1.0 laid out by hand from the
// specification's diagram, reads its metadata, and re-encodes it to the
// same bytes.
func TestReportV1(t *testing.T) {
	inner := bytes.Repeat([]byte{0x45}, 8)
	// Ver 1, Length 4+6, NProt 1 (IPv4), RepMdBits 0x3F, D, F, hw_id 9.
	hdr := uint32(1)<<28 | 10<<24 | 1<<21 | 0x3F<<15 | 1<<8 | 1<<6 | 9
	pkt := append(words(hdr, 77, 0xDEADBEEF, 123456,
		3<<16|4,    // ports
		500,        // hop latency
		2<<24|9000, // queue
		654321,     // egress timestamp
		5<<24|33<<16,
		80, // tx utilisation
	), inner...)
	var r Report
	if err := r.DecodeFromBytes(pkt, gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	if r.Format != FormatV1 || r.Version != 1 || r.NodeID != 77 || r.Sequence != 0xDEADBEEF || r.IngressTimestamp != 123456 || r.HardwareID != 9 || len(r.Individuals) != 1 {
		t.Fatalf("%+v", r)
	}
	ind := r.Individuals[0]
	if ind.RepType != RepINT || ind.InType != InIPv4 || ind.NProto != NProtoIPv4 || !ind.Dropped || ind.Congested || !ind.Tracked || ind.RepMdBits != 0x3F || len(ind.MD) != 24 || !bytes.Equal(ind.Inner, inner) {
		t.Fatalf("report %+v", ind)
	}
	var m Metadata
	if err := ind.Metadata(&m); err != nil {
		t.Fatal(err)
	}
	want := Metadata{NodeID: 77, L1Ingress: 3, L1Egress: 4, HopLatency: 500, QueueID: 2, QueueOccupancy: 9000, IngressTimestamp: 123456, EgressTimestamp: 654321,
		DropQueueID: 5, DropReason: 33, TxUtilization: 80}
	want.Present = 0x8000>>BitNodeID | 0x8000>>BitL1Ports | 0x8000>>BitHopLatency | 0x8000>>BitQueue | 0x8000>>BitIngressTS | 0x8000>>BitEgressTS | 0x8000>>BitDropReason | 0x8000>>BitTxUtil
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("metadata\n%+v\nwant\n%+v", m, want)
	}
	if again := serialize(t, &r); !bytes.Equal(again, pkt) {
		t.Fatalf("re-encoded\n%x\nwant\n%x", again, pkt)
	}
	// Built from fields, the same bytes.
	b := Report{Format: FormatV1, NodeID: 77, Sequence: 0xDEADBEEF, IngressTimestamp: 123456, HardwareID: 9,
		Individuals: []Individual{{NProto: NProtoIPv4, RepMdBits: 0x3F, Dropped: true, Tracked: true, Inner: inner}}}
	if err := b.SetLocalMetadata(&want); err != nil {
		t.Fatal(err)
	}
	if enc := serialize(t, &b); !bytes.Equal(enc, pkt) {
		t.Fatalf("encoded\n%x\nwant\n%x", enc, pkt)
	}
}

// TestReportV05 decodes 0.5 reports: a switch local report and a drop
// report laid out by hand, and INTCollector's variant (the 0.5 layout
// under version number 1), byte for byte as its generator writes it.
func TestReportV05(t *testing.T) {
	eth := bytes.Repeat([]byte{0xAA}, 14)
	local := append(words(uint32(NProtoLocal)<<24|1<<21|7, 999, 11, 42, 1<<16|2, 3<<24|4000, 5555), eth...)
	drop := append(words(uint32(NProtoDrop)<<24|1<<23, 1000, 12, 43, 1<<16|2, 6<<24|71<<16), eth...)
	// INTCollector: ver 1, nProto 0, f 1, seqNumber 0, ingressTimestamp 1524138290.
	intc := append(words(1<<28|1<<21, 0, 1524138290), eth...)
	for _, c := range []struct {
		name    string
		pkt     []byte
		version uint8
		rep     uint8
		m       Metadata
	}{
		{"local", local, 0, RepINT, Metadata{Present: 0x8000>>BitNodeID | 0x8000>>BitL1Ports | 0x8000>>BitQueue | 0x8000>>BitIngressTS | 0x8000>>BitEgressTS,
			NodeID: 42, L1Ingress: 1, L1Egress: 2, QueueID: 3, QueueOccupancy: 4000, IngressTimestamp: 11, EgressTimestamp: 5555}},
		{"drop", drop, 0, RepINT, Metadata{Present: 0x8000>>BitNodeID | 0x8000>>BitL1Ports | 0x8000>>BitIngressTS | 0x8000>>BitDropReason,
			NodeID: 43, L1Ingress: 1, L1Egress: 2, QueueID: 6, DropQueueID: 6, DropReason: 71, IngressTimestamp: 12}},
		{"intcollector", intc, 1, RepInnerOnly, Metadata{}},
	} {
		var r Report
		if err := r.DecodeFromBytes(c.pkt, gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ind := r.Individuals[0]
		if r.Format != FormatV05 || r.Version != c.version || len(r.Individuals) != 1 || ind.RepType != c.rep || ind.InType != InEthernet || !bytes.Equal(ind.Inner, eth) || r.NodeID != c.m.NodeID {
			t.Fatalf("%s: %+v", c.name, r)
		}
		var m Metadata
		err := ind.Metadata(&m)
		if c.rep == RepINT && (err != nil || !reflect.DeepEqual(m, c.m)) || c.rep != RepINT && !errors.Is(err, ErrType) {
			t.Fatalf("%s: metadata %v\n%+v\nwant\n%+v", c.name, err, m, c.m)
		}
		if again := serialize(t, &r); !bytes.Equal(again, c.pkt) {
			t.Fatalf("%s: re-encoded\n%x\nwant\n%x", c.name, again, c.pkt)
		}
	}
	if r := (Report{Format: FormatV05, Sequence: 999, IngressTimestamp: 11, HardwareID: 7, Individuals: []Individual{{NProto: NProtoLocal, Tracked: true, Inner: eth}}}); r.SetLocalMetadata(&Metadata{
		NodeID: 42, L1Ingress: 1, L1Egress: 2, QueueID: 3, QueueOccupancy: 4000, EgressTimestamp: 5555}) != nil || !bytes.Equal(serialize(t, &r), local) {
		t.Fatalf("encoded local report\n%x\nwant\n%x", serialize(t, &r), local)
	}
}

func TestReportV1Errors(t *testing.T) {
	for name, c := range map[string]struct {
		b   []byte
		err error
	}{
		"v1 short":       {words(1<<28|4<<24, 1, 2), ErrTruncated},
		"v1 length":      {words(1<<28|5<<24, 1, 2, 3, 4), ErrLength},
		"v1 md past":     {words(1<<28|5<<24|1<<15, 1, 2, 3), ErrTruncated},
		"v1 nprot":       {words(1<<28|4<<24|3<<21, 1, 2, 3), ErrType},
		"v05 short":      {words(0, 1), ErrTruncated},
		"v05 nproto":     {words(3<<24, 1, 2), ErrType},
		"v05 local past": {words(2<<24, 1, 2, 3), ErrTruncated},
	} {
		var r Report
		if err := r.DecodeFromBytes(c.b, gopacket.NilDecodeFeedback); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", name, err, c.err)
		}
	}
	two := Report{Format: FormatV1, Individuals: make([]Individual, 2)}
	if _, err := two.AppendTo(nil); !errors.Is(err, ErrLength) {
		t.Errorf("two reports in 1.0: %v", err)
	}
	bad := Report{Format: FormatV05, Individuals: []Individual{{NProto: NProtoLocal, MD: make([]byte, 12)}}}
	if _, err := bad.AppendTo(nil); !errors.Is(err, ErrLength) {
		t.Errorf("0.5 local header of 12 bytes: %v", err)
	}
}

// TestINTV05 decodes an INT 0.5 header laid out as INTCollector's
// generator writes it (every instruction of bits 0..7, three hops, the
// tail), and re-encodes it to the same bytes.
func TestINTV05(t *testing.T) {
	var stack []uint32
	for j := range uint32(3) {
		// sw_id, ports, hop latency, queue, ingress ts, egress ts, congestion, tx utilisation
		stack = append(stack, 10+j, 2<<16|3, 4+j, (5+j)<<16|6, 7+j, 1524234560, (5+j)<<16|(10+j), 11+j)
	}
	// Shim: type 1, length 4 + 24 words of stack; header: ver 0, InsCnt 8, MaxHopCnt 8, TotalHopCnt 3, ins 0xFF00.
	pkt := words(1<<24|uint32(4+len(stack))<<8, 8<<16|8<<8|3, 0xFF00<<16)
	pkt = append(pkt, words(stack...)...)
	pkt = append(pkt, words(17<<24|5000<<8|14)...)
	pkt = append(pkt, "payload"...)
	var i INT
	if err := i.DecodeFromBytes(pkt, gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	if !i.Legacy || i.Type != TypeMD || i.Version != 0 || i.HopML != 8 || i.MaxHopCount != 8 || i.TotalHopCount != 3 || i.Instructions != 0xFF00 ||
		i.TailProto != 17 || i.TailPort != 5000 || i.TailDSCP != 14 || string(i.Payload) != "payload" {
		t.Fatalf("%+v", i)
	}
	if n, err := i.Hops(); n != 3 || err != nil {
		t.Fatalf("%d hops: %v", n, err)
	}
	var m Metadata
	if err := i.Hop(0, &m); err != nil {
		t.Fatal(err)
	}
	// INTCollector lists hop j = 0 first: the top of the stack, Hop(0).
	want := Metadata{NodeID: 10, L1Ingress: 2, L1Egress: 3, HopLatency: 4, QueueID: 5, QueueOccupancy: 6, IngressTimestamp: 7, EgressTimestamp: 1524234560,
		QueueCongestion: 10, TxUtilization: 11,
		Present: 0x8000>>BitNodeID | 0x8000>>BitL1Ports | 0x8000>>BitHopLatency | 0x8000>>BitQueue | 0x8000>>BitIngressTS | 0x8000>>BitEgressTS | 0x8000>>BitQueueCongestion | 0x8000>>BitTxUtil}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("hop 0\n%+v\nwant\n%+v", m, want)
	}
	if again := serialize(t, &i, gopacket.Payload(i.Payload)); !bytes.Equal(again, pkt) {
		t.Fatalf("re-encoded\n%x\nwant\n%x", again, pkt)
	}
	// Built hop by hop, the same stack.
	b := &INT{Legacy: true, Type: TypeMD, HopML: 8, MaxHopCount: 8, Instructions: 0xFF00, TailProto: 17, TailPort: 5000, TailDSCP: 14}
	for h := range 3 {
		i.Hop(h, &m)
		b.AppendHop(&m)
	}
	if enc := serialize(t, b, gopacket.Payload("payload")); !bytes.Equal(enc, pkt) {
		t.Fatalf("built\n%x\nwant\n%x", enc, pkt)
	}
	// A stack that disagrees with Total Hop Count.
	pkt[7] = 4
	if err := i.DecodeFromBytes(pkt, gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	if _, err := i.Hops(); !errors.Is(err, ErrLength) {
		t.Fatalf("4 hops claimed, 3 present: %v", err)
	}
}

// TestINTV1 decodes an INT 1.0 header laid out by hand: 4-byte
// timestamps, 8-byte level 2 ports, the DSCP in the shim.
func TestINTV1(t *testing.T) {
	// node, ingress ts, egress ts, L2 ports: 5 words a hop; two hops.
	stack := words(7, 100, 200, 1, 2, 8, 300, 0xFFFFFFFF, 3, 4)
	pkt := words(1<<24|uint32(3+10)<<8|0x17<<2, 1<<28|1<<24|5<<8|6, 0x8E00<<16)
	pkt = append(pkt, stack...)
	var i INT
	if err := i.DecodeFromBytes(pkt, gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	if !i.Legacy || i.Version != 1 || i.Field != 0x17 || !i.HopCountExceeded || i.Replication != 0 || i.HopML != 5 || i.RemainingHopCount != 6 || len(i.Payload) != 0 {
		t.Fatalf("%+v", i)
	}
	var m0, m1 Metadata
	if n, err := i.Hops(); n != 2 || err != nil || i.Hop(0, &m0) != nil || i.Hop(1, &m1) != nil {
		t.Fatalf("%d hops: %v", n, err)
	}
	if m0.NodeID != 7 || m0.IngressTimestamp != 100 || m0.EgressTimestamp != 200 || m0.L2Ingress != 1 || m0.L2Egress != 2 ||
		m1.NodeID != 8 || m1.IngressTimestamp != 300 || m1.Has(BitEgressTS) || m1.L2Egress != 4 {
		t.Fatalf("hops %+v %+v", m0, m1)
	}
	if again := serialize(t, &i); !bytes.Equal(again, pkt) {
		t.Fatalf("re-encoded\n%x\nwant\n%x", again, pkt)
	}
	rejectsBadLegacy(t, &i)
}

// rejectsBadLegacy: i refuses legacy shims that do not add up.
func rejectsBadLegacy(t *testing.T, i *INT) {
	t.Helper()
	for name, b := range map[string][]byte{
		"version 2 in a legacy shim": words(1<<24|3<<8, 2<<28, 0),
		"hop ML below instructions":  words(1<<24|3<<8, 1<<28|1<<8, 0xC000<<16),
		"0.5 without its tail":       words(1<<24|3<<8, 0, 0),
	} {
		if err := i.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestGopacketVersions: on the registered report port, gopacket decodes
// 1.0 and 0.5 reports as the same TelemetryReport layer.
func TestGopacketVersions(t *testing.T) {
	RegisterReportPort(32766)
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}
	udp := &layers.UDP{SrcPort: 1, DstPort: 32766}
	udp.SetNetworkLayerForChecksum(ip)
	for _, r := range []*Report{
		{Format: FormatV1, NodeID: 5, Individuals: []Individual{{NProto: NProtoIPv4, Inner: make([]byte, 20)}}},
		{Format: FormatV05, Individuals: []Individual{{NProto: NProtoLocal, MD: words(5, 0, 0, 0), Inner: make([]byte, 14)}}},
	} {
		p := gopacket.NewPacket(serialize(t, eth, ip, udp, r), layers.LayerTypeEthernet, gopacket.Default)
		got, ok := p.Layer(LayerTypeReport).(*Report)
		if !ok || p.ErrorLayer() != nil || got.Format != r.Format || got.NodeID != 5 || len(got.Individuals) != 1 {
			t.Fatalf("format %d: %v", r.Format, p)
		}
	}
}
