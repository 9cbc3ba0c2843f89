package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/dtakit/dtakit/inband"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// TestInband: a Telemetry Report whose inner packet carries INT-MD over
// UDP, and INT over UDP captured directly, come out with their reports,
// metadata and hops.
func TestInband(t *testing.T) {
	*intPort = 555
	registerInband()
	ser := func(ls ...gopacket.SerializableLayer) []byte {
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), buf.Bytes()...)
	}
	udpTo := func(port uint16) (*layers.Ethernet, *layers.IPv4, *layers.UDP) {
		eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}
		u := &layers.UDP{SrcPort: 7, DstPort: layers.UDPPort(port)}
		u.SetNetworkLayerForChecksum(ip)
		return eth, ip, u
	}
	// Hop 0 is the last to push: node 3, nearest the sink.
	md := &inband.INT{Type: inband.TypeMD, Version: 2, HopML: 2, RemainingHopCount: 6, Instructions: 0xA000} // node ID, hop latency
	for _, n := range []uint32{3, 2, 1} {
		if err := md.AppendHop(&inband.Metadata{Present: 0xA000, NodeID: n, HopLatency: n * 100}); err != nil {
			t.Fatal(err)
		}
	}
	eth, ip, u := udpTo(555)
	inner := ser(eth, ip, u, md, gopacket.Payload("app"))
	rep := &inband.Report{NodeID: 9, Sequence: 4, Individuals: []inband.Individual{{RepType: inband.RepINT, InType: inband.InEthernet, Tracked: true, RepMdBits: 0x2000,
		Inner: append(inner, make([]byte, (4-len(inner)%4)%4)...)}}}
	rep.Individuals[0].SetMetadata(&inband.Metadata{Present: 0x2000, HopLatency: 555})
	e2, i2, u2 := udpTo(32766)
	var capture bytes.Buffer
	w := pcapgo.NewWriter(&capture)
	w.WriteFileHeader(65536, layers.LinkTypeEthernet)
	for _, frame := range [][]byte{ser(e2, i2, u2, rep), inner} {
		w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(frame), Length: len(frame)}, frame)
	}
	var out bytes.Buffer
	if err := dump(&capture, &out); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	var first struct {
		TelemetryReport struct {
			NodeID  uint32 `json:"node_id"`
			Reports []struct {
				F        bool
				Metadata struct {
					HopLatency uint32 `json:"hop_latency"`
				}
				Inner struct {
					INT struct {
						Hops []struct {
							NodeID     uint32 `json:"node_id"`
							HopLatency uint32 `json:"hop_latency"`
						}
					} `json:"int"`
				}
			}
		} `json:"telemetry_report"`
		Error string
	}
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	r := first.TelemetryReport
	if first.Error != "" || r.NodeID != 9 || len(r.Reports) != 1 || !r.Reports[0].F || r.Reports[0].Metadata.HopLatency != 555 ||
		len(r.Reports[0].Inner.INT.Hops) != 3 || r.Reports[0].Inner.INT.Hops[0].NodeID != 3 || r.Reports[0].Inner.INT.Hops[2].HopLatency != 100 {
		t.Fatalf("report line:\n%s", lines[0])
	}
	var second struct {
		INT struct {
			Hops []struct {
				NodeID uint32 `json:"node_id"`
			}
		} `json:"int"`
		Error string
	}
	if err := json.Unmarshal(lines[1], &second); err != nil || second.Error != "" || len(second.INT.Hops) != 3 || second.INT.Hops[1].NodeID != 2 {
		t.Fatalf("INT line:\n%s", lines[1])
	}
}
