package inband

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// scapyPython returns a Python that imports scapy, or "".
func scapyPython() string {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import scapy.all").Run() == nil {
			return py
		}
	}
	return ""
}

// TestScapyReports decodes Telemetry Reports of versions 0.5, 1.0 and 2.0
// that scapy built from the specifications' diagrams
// (testdata/mkreports.py), and the INT 0.5, 1.0 and 2.1 stacks in their
// inner packets: a check independent of dtakit's encoder and of tshark.
func TestScapyReports(t *testing.T) {
	py := scapyPython()
	if py == "" {
		if os.Getenv("DTAKIT_REQUIRE_TOOLS") == "1" {
			t.Fatal("no python3 with scapy (apt-get install python3-scapy), and DTAKIT_REQUIRE_TOOLS=1")
		}
		t.Skip("no python3 with scapy (apt-get install python3-scapy): the scapy-built reports are not checked")
	}
	reports := scapyReports(t, py)
	checkScapyV05(t, reports[0])
	checkScapyV1(t, reports[1])
	checkScapyV2(t, reports[2])
}

// scapyReports runs testdata/mkreports.py and decodes its three reports.
func scapyReports(t *testing.T, py string) []Report {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reports.pcap")
	if out, err := exec.Command(py, "testdata/mkreports.py", path).CombinedOutput(); err != nil {
		t.Fatalf("mkreports.py: %v\n%s", err, out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var reports []Report
	for {
		data, _, err := rd.ReadPacketData()
		if err != nil {
			break
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if !ok || u.DstPort != 32766 {
			t.Fatalf("not a report: %v", p)
		}
		var r Report
		if err := r.DecodeFromBytes(u.Payload, gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("report %d: %v", len(reports), err)
		}
		reports = append(reports, r)
	}
	if len(reports) != 3 {
		t.Fatalf("%d reports", len(reports))
	}
	return reports
}

// scapyHops decodes the INT after the inner packet's L4 header and returns
// its hops, source first.
func scapyHops(t *testing.T, name string, ind *Individual) []Metadata {
	t.Helper()
	first := map[uint8]gopacket.LayerType{InEthernet: layers.LayerTypeEthernet, InIPv4: layers.LayerTypeIPv4}[ind.InType]
	p := gopacket.NewPacket(ind.Inner, first, gopacket.Default)
	tl := p.TransportLayer()
	if tl == nil {
		t.Fatalf("%s: no L4 header in %v", name, p)
	}
	var in INT
	if err := in.DecodeFromBytes(tl.LayerPayload(), gopacket.NilDecodeFeedback); err != nil {
		t.Fatalf("%s: INT: %v", name, err)
	}
	n, err := in.Hops()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ms := make([]Metadata, n)
	for h := range n {
		in.Hop(n-1-h, &ms[h])
	}
	return ms
}

// checkScapyV05: fixed header, switch local report header, INT 0.5 over UDP.
func checkScapyV05(t *testing.T, r Report) {
	t.Helper()
	var m Metadata
	ind := &r.Individuals[0]
	if r.Format != FormatV05 || r.Version != 0 || r.HardwareID != 5 || r.Sequence != 1001 || r.IngressTimestamp != 111111 || r.NodeID != 301 ||
		ind.NProto != NProtoLocal || !ind.Tracked || ind.Dropped || ind.Metadata(&m) != nil {
		t.Fatalf("0.5: %+v", r)
	}
	if m.NodeID != 301 || m.L1Ingress != 7 || m.L1Egress != 8 || m.QueueID != 2 || m.QueueOccupancy != 4321 || m.EgressTimestamp != 222222 || m.IngressTimestamp != 111111 {
		t.Fatalf("0.5 metadata %+v", m)
	}
	hs := scapyHops(t, "0.5", ind)
	if len(hs) != 3 || hs[0].NodeID != 11 || hs[0].HopLatency != 10 || hs[2].NodeID != 13 || hs[2].HopLatency != 30 {
		t.Fatalf("0.5 hops %+v", hs)
	}
}

// checkScapyV1: header with its optional metadata, INT 1.0 over TCP.
func checkScapyV1(t *testing.T, r Report) {
	t.Helper()
	var m Metadata
	ind := &r.Individuals[0]
	if r.Format != FormatV1 || r.Version != 1 || r.HardwareID != 6 || r.Sequence != 2002 || r.IngressTimestamp != 333333 || r.NodeID != 401 ||
		ind.NProto != NProtoIPv4 || ind.InType != InIPv4 || !ind.Dropped || !ind.Tracked || ind.RepMdBits != 0x3E || ind.Metadata(&m) != nil {
		t.Fatalf("1.0: %+v", r)
	}
	if m.NodeID != 401 || m.L1Ingress != 9 || m.L1Egress != 10 || m.HopLatency != 650 || m.QueueID != 3 || m.QueueOccupancy != 5555 ||
		m.EgressTimestamp != 444444 || m.DropQueueID != 3 || m.DropReason != 71 || m.Has(BitTxUtil) {
		t.Fatalf("1.0 metadata %+v", m)
	}
	checkScapyV1Hops(t, ind)
}

func checkScapyV1Hops(t *testing.T, ind *Individual) {
	t.Helper()
	hs := scapyHops(t, "1.0", ind)
	if len(hs) != 2 || hs[0].NodeID != 21 || hs[0].IngressTimestamp != 8000 || hs[1].NodeID != 22 || hs[1].IngressTimestamp != 9000 {
		t.Fatalf("1.0 hops %+v", hs)
	}
}

// checkScapyV2: group header, one INT report, INT-MD over UDP before TCP.
func checkScapyV2(t *testing.T, r Report) {
	t.Helper()
	var m Metadata
	ind := &r.Individuals[0]
	if r.Format != FormatV2 || r.Version != 2 || r.HardwareID != 7 || r.Sequence != 3003 || r.NodeID != 501 || len(r.Individuals) != 1 ||
		ind.RepType != RepINT || ind.InType != InIPv4 || !ind.Congested || !ind.Tracked || ind.Metadata(&m) != nil || m.QueueID != 4 || m.QueueOccupancy != 777 {
		t.Fatalf("2.0: %+v %+v", r, m)
	}
	hs := scapyHops(t, "2.0", ind)
	if len(hs) != 4 || hs[0].NodeID != 31 || hs[0].HopLatency != 100 || hs[3].NodeID != 34 || hs[3].HopLatency != 400 {
		t.Fatalf("2.0 hops %+v", hs)
	}
}
