package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/dtakit/dtakit/inband"
)

// instructions is the INT-MD bitmap the generated packets carry: node ID,
// hop latency, queue ID and occupancy (three words per hop).
const instructions = 0x8000 | 0x8000>>inband.BitHopLatency | 0x8000>>inband.BitQueue

// truth is what the generated trace holds, for the test to check against.
type truth struct {
	paths      map[uint32][]uint32 // flow key -> last path, source first
	reports    map[uint32]int      // flow key -> Telemetry Reports
	drops      int
	congestion int
	reroutes   int
}

// generate writes a capture of Telemetry Reports, as the sinks of a
// leaf-spine fabric would send them: flows × packets INT-MD path traces of
// five hops over UDP to intPort, one report per packet to reportPort, with
// some packets dropped or congested at the sink, one flow rerouted halfway
// and one hop's latency jumping.
func generate(w io.Writer, flows, packets int, intPort, reportPort uint16, seed uint64) (truth, error) {
	rng := rand.New(rand.NewPCG(seed, 1))
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		return truth{}, err
	}
	tr := truth{paths: map[uint32][]uint32{}, reports: map[uint32]int{}}
	type flow struct {
		tuple   inband.FiveTuple
		path    []uint32
		latency []uint32
	}
	fs := make([]flow, flows)
	for i := range fs {
		f := &fs[i]
		f.tuple = inband.FiveTuple{Src: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Dst: netip.AddrFrom4([4]byte{10, 1, 0, byte(i % 7)}),
			Proto: 6, SrcPort: uint16(20000 + i), DstPort: 443}
		// leaf, spine, core, spine, leaf
		f.path = []uint32{100 + uint32(rng.IntN(4)), 200 + uint32(rng.IntN(4)), 300, 400 + uint32(rng.IntN(4)), 500 + uint32(rng.IntN(4))}
		for range f.path {
			f.latency = append(f.latency, 400+uint32(rng.IntN(400)))
		}
	}
	start := time.Unix(1764000000, 0)
	var seq uint32
	for p := range packets {
		for i := range fs {
			f := &fs[i]
			if i == 0 && p == packets/2 {
				f.path[1] ^= 1 // rerouted through another spine
				tr.reroutes++
			}
			if i == 1 && p == packets/2 {
				f.latency[2] += 5000 // the core congests for this flow
			}
			key := inband.FlowKey(f.tuple)
			tr.paths[key] = append([]uint32(nil), f.path...)
			tr.reports[key]++
			md := &inband.INT{Type: inband.TypeMD, NPT: inband.NPTL4Header, Field: 6, Version: 2, HopML: 3,
				RemainingHopCount: 3, Instructions: instructions}
			for h := len(f.path) - 1; h >= 0; h-- { // the last hop pushed last
				md.AppendHop(&inband.Metadata{Present: instructions, NodeID: f.path[h],
					HopLatency: f.latency[h] + uint32(rng.IntN(50)), QueueID: 0, QueueOccupancy: uint32(rng.IntN(64))})
			}
			inner, err := innerPacket(f.tuple, intPort, md)
			if err != nil {
				return tr, err
			}
			ind := inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, Inner: inner}
			switch {
			case (p*flows+i)%97 == 13:
				ind.Dropped = true
				ind.RepMdBits = 1 // bit 15: drop queue ID and reason
				ind.SetMetadata(&inband.Metadata{Present: 1, DropQueueID: 3, DropReason: 71})
				tr.drops++
			case (p*flows+i)%89 == 7:
				ind.Congested = true
				ind.RepMdBits = 0x8000 >> inband.BitQueue
				ind.SetMetadata(&inband.Metadata{Present: 0x8000 >> inband.BitQueue, QueueID: 2, QueueOccupancy: 9000 + uint32(i)})
				tr.congestion++
			}
			seq++
			rep := inband.Report{Sequence: seq, NodeID: f.path[len(f.path)-1], Individuals: []inband.Individual{ind}}
			pkt, err := reportPacket(&rep, reportPort)
			if err != nil {
				return tr, err
			}
			ts := start.Add(time.Duration(p*flows+i) * 50 * time.Microsecond)
			if err := pw.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(pkt), Length: len(pkt)}, pkt); err != nil {
				return tr, err
			}
		}
	}
	return tr, nil
}

var serializeOpts = gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}

// innerPacket is the flow's TCP packet with INT-MD over UDP to intPort
// inserted before its TCP header, as the sink truncates it.
func innerPacket(t inband.FiveTuple, intPort uint16, md *inband.INT) ([]byte, error) {
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	src, dst := t.Src.As4(), t.Dst.As4()
	ip := &layers.IPv4{Version: 4, TTL: 59, Protocol: layers.IPProtocolUDP, SrcIP: src[:], DstIP: dst[:]}
	u := &layers.UDP{SrcPort: layers.UDPPort(t.SrcPort), DstPort: layers.UDPPort(intPort)}
	u.SetNetworkLayerForChecksum(ip)
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp, t.SrcPort)
	binary.BigEndian.PutUint16(tcp[2:], t.DstPort)
	tcp[12] = 5 << 4
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serializeOpts, eth, ip, u, md, gopacket.Payload(tcp)); err != nil {
		return nil, fmt.Errorf("inner packet: %w", err)
	}
	b := buf.Bytes()
	return append(b, make([]byte, (4-len(b)%4)%4)...), nil // whole words
}

// reportPacket is the Telemetry Report in its UDP datagram from the sink.
func reportPacket(r *inband.Report, port uint16) ([]byte, error) {
	payload, err := r.AppendTo(nil)
	if err != nil {
		return nil, err
	}
	eth := &layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{192, 0, 2, 1}, DstIP: []byte{192, 0, 2, 100}}
	u := &layers.UDP{SrcPort: 40000, DstPort: layers.UDPPort(port)}
	u.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serializeOpts, eth, ip, u, gopacket.Payload(payload)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// reportBits are the metadata a generated per-hop report carries: hop
// latency, queue ID and occupancy.
const reportBits = 0x8000>>inband.BitHopLatency | 0x8000>>inband.BitQueue

// generatePerHop writes a capture of per-hop Telemetry Reports (INT-XD:
// every switch on a flow's path reports each packet itself, with its
// metadata and the packet's head, whose TTL gives the hop): flows ×
// packets × 5 reports, some congested (Q) at the core.
func generatePerHop(w io.Writer, flows, packets int, reportPort uint16, seed uint64) (truth, error) {
	rng := rand.New(rand.NewPCG(seed, 2))
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		return truth{}, err
	}
	tr := truth{paths: map[uint32][]uint32{}, reports: map[uint32]int{}}
	start := time.Unix(1764000000, 0)
	var seq uint32
	n := 0
	for p := range packets {
		for i := range flows {
			t := inband.FiveTuple{Src: netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), Dst: netip.AddrFrom4([4]byte{10, 3, 0, byte(i % 5)}),
				Proto: 6, SrcPort: uint16(30000 + i), DstPort: 80}
			path := []uint32{100 + uint32(i%4), 200 + uint32(i%2), 300, 400 + uint32(i%2), 500 + uint32(i%4)}
			key := inband.FlowKey(t)
			tr.paths[key] = path
			for h, node := range path {
				m := inband.Metadata{Present: reportBits, HopLatency: 400 + uint32(rng.IntN(100)), QueueOccupancy: uint32(rng.IntN(30))}
				ind := inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, RepMdBits: reportBits}
				if h == 2 && i == 0 && p >= packets/2 {
					// The core's queue builds up for flow 0's second half.
					m.QueueOccupancy, m.HopLatency = 9000, 6000
					ind.Congested = true
					tr.congestion++
				}
				ind.SetMetadata(&m)
				inner, err := headPacket(t, uint8(64-h))
				if err != nil {
					return tr, err
				}
				ind.Inner = inner
				seq++
				rep := inband.Report{Sequence: seq, NodeID: node, Individuals: []inband.Individual{ind}}
				pkt, err := reportPacket(&rep, reportPort)
				if err != nil {
					return tr, err
				}
				tr.reports[key]++
				ts := start.Add(time.Duration(n) * 10 * time.Microsecond)
				n++
				if err := pw.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(pkt), Length: len(pkt)}, pkt); err != nil {
					return tr, err
				}
			}
		}
	}
	return tr, nil
}

// headPacket is the head of the flow's TCP packet as a switch at ttl
// truncates it.
func headPacket(t inband.FiveTuple, ttl uint8) ([]byte, error) {
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	src, dst := t.Src.As4(), t.Dst.As4()
	ip := &layers.IPv4{Version: 4, TTL: ttl, Protocol: layers.IPProtocolTCP, SrcIP: src[:], DstIP: dst[:]}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(t.SrcPort), DstPort: layers.TCPPort(t.DstPort), DataOffset: 5}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serializeOpts, eth, ip, tcp); err != nil {
		return nil, fmt.Errorf("head packet: %w", err)
	}
	b := buf.Bytes()
	return append(b, make([]byte, (4-len(b)%4)%4)...), nil
}
