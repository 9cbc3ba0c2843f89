package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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

// TestInbandVersions: Telemetry Reports 0.5 and 1.0 come out with their
// format, header metadata and the INT 0.5 / 1.0 stacks of their inner
// packets (INT over TCP read with -int-after-l4); and, where scapy is
// installed, the reports of every version scapy builds from the
// specifications (inband/testdata/mkreports.py) decode the same way.
func TestInbandVersions(t *testing.T) {
	*reportPort, *intAfterL4 = 32766, true
	registerInband()
	defer func() { *intAfterL4 = false }()
	ls := dumpLines(t, versionsCapture(t))
	if len(ls) != 2 {
		t.Fatalf("%d lines", len(ls))
	}
	a, b := ls[0].TelemetryReport, ls[1].TelemetryReport
	if a.Version != 1 || a.Format != "1.0" || a.NodeID != 23 || a.IngressTimestamp != 5 || len(a.Reports) != 1 || !a.Reports[0].D || a.Reports[0].DropReason != 9 ||
		!a.Reports[0].Inner.INT.Legacy || len(a.Reports[0].Inner.INT.Hops) != 2 || a.Reports[0].Inner.INT.Hops[0].NodeID != 22 {
		t.Fatalf("1.0: %+v", a)
	}
	if b.Version != 0 || b.Format != "0.5" || b.NodeID != 31 || b.Reports[0].Metadata.QueueOccupancy != 400 {
		t.Fatalf("0.5: %+v", b)
	}
	checkScapyDump(t)
}

// serPadded serializes ls with their lengths fixed, zero-padded to whole
// words.
func serPadded(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	b := append([]byte(nil), buf.Bytes()...)
	return append(b, make([]byte, (4-len(b)%4)%4)...)
}

// versionsCapture returns a capture of a Telemetry Report 1.0 whose inner
// packet carries INT 1.0 over TCP, and a 0.5 report.
func versionsCapture(t *testing.T) *bytes.Buffer {
	t.Helper()
	// INT 1.0 over TCP, two hops (node IDs 21, 22, 22 nearest the sink).
	in1 := &inband.INT{Legacy: true, Type: inband.TypeMD, Version: 1, HopML: 1, RemainingHopCount: 6, Instructions: 0x8000}
	for _, n := range []uint32{22, 21} {
		in1.AppendHop(&inband.Metadata{Present: 0x8000, NodeID: n})
	}
	ip := &layers.IPv4{Version: 4, TTL: 62, Protocol: layers.IPProtocolTCP, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}
	tcp := &layers.TCP{SrcPort: 1, DstPort: 2, DataOffset: 5}
	tcp.SetNetworkLayerForChecksum(ip)
	v1 := inband.Report{Format: inband.FormatV1, NodeID: 23, IngressTimestamp: 5, Individuals: []inband.Individual{{NProto: inband.NProtoIPv4, RepMdBits: 0x02, Dropped: true, Inner: serPadded(t, ip, tcp, in1)}}}
	v1.SetLocalMetadata(&inband.Metadata{Present: 1, DropQueueID: 2, DropReason: 9})
	v05 := inband.Report{Format: inband.FormatV05, Sequence: 3, Individuals: []inband.Individual{{NProto: inband.NProtoLocal, Inner: make([]byte, 14)}}}
	v05.SetLocalMetadata(&inband.Metadata{NodeID: 31, QueueID: 1, QueueOccupancy: 400})

	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	oip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{192, 0, 2, 1}, DstIP: []byte{192, 0, 2, 2}}
	u := &layers.UDP{SrcPort: 7, DstPort: 32766}
	u.SetNetworkLayerForChecksum(oip)
	var capture bytes.Buffer
	w := pcapgo.NewWriter(&capture)
	w.WriteFileHeader(65536, layers.LinkTypeEthernet)
	for _, r := range []*inband.Report{&v1, &v05} {
		frame := serPadded(t, eth, oip, u, r)
		w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(frame), Length: len(frame)}, frame)
	}
	return &capture
}

// versionLine is the part of a dumped report line TestInbandVersions reads.
type versionLine struct {
	TelemetryReport struct {
		Version          uint8
		Format           string
		NodeID           uint32 `json:"node_id"`
		IngressTimestamp uint32 `json:"ingress_timestamp"`
		Reports          []struct {
			D          bool
			DropReason uint8 `json:"drop_reason"`
			Metadata   struct {
				QueueOccupancy uint32 `json:"queue_occupancy"`
			}
			Inner struct {
				INT struct {
					Legacy bool
					Hops   []struct {
						NodeID uint32 `json:"node_id"`
					}
				} `json:"int"`
			}
		}
	} `json:"telemetry_report"`
	Error string
}

// dumpLines dumps capture and returns its lines, none an error.
func dumpLines(t *testing.T, capture io.Reader) []versionLine {
	t.Helper()
	var out bytes.Buffer
	if err := dump(capture, &out); err != nil {
		t.Fatal(err)
	}
	var ls []versionLine
	for _, b := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var l versionLine
		if err := json.Unmarshal(b, &l); err != nil || l.Error != "" {
			t.Fatalf("%v: %s", err, b)
		}
		ls = append(ls, l)
	}
	return ls
}

// checkScapyDump dumps the reports of every version scapy builds from the
// specifications, where scapy is installed.
func checkScapyDump(t *testing.T) {
	py := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import scapy.all").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		if os.Getenv("DTAKIT_REQUIRE_TOOLS") == "1" {
			t.Fatal("no python3 with scapy (apt-get install python3-scapy), and DTAKIT_REQUIRE_TOOLS=1")
		}
		t.Skip("no python3 with scapy (apt-get install python3-scapy): the scapy-built reports are not dumped")
	}
	path := filepath.Join(t.TempDir(), "reports.pcap")
	if out, err := exec.Command(py, "../../inband/testdata/mkreports.py", path).CombinedOutput(); err != nil {
		t.Fatalf("mkreports.py: %v\n%s", err, out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ls := dumpLines(t, f)
	// mkreports.py: 0.5 from switch 301 with hops 13, 12, 11; 1.0 from
	// 401 with 22, 21; 2.0 from 501 with 34, 33, 32, 31 (top of stack first).
	want := []struct {
		version uint8
		node    uint32
		top     uint32
		hops    int
	}{{0, 301, 13, 3}, {1, 401, 22, 2}, {2, 501, 34, 4}}
	if len(ls) != len(want) {
		t.Fatalf("%d lines", len(ls))
	}
	for i, w := range want {
		r := ls[i].TelemetryReport
		if r.Version != w.version || r.NodeID != w.node || len(r.Reports) != 1 || len(r.Reports[0].Inner.INT.Hops) != w.hops || r.Reports[0].Inner.INT.Hops[0].NodeID != w.top {
			t.Fatalf("scapy report %d: %+v", i, r)
		}
	}
}
