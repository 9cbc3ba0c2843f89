package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"net"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

var update = flag.Bool("update", false, "rewrite ../../testdata/reports.pcap, testdata/reports.jsonl, testdata/rocev2.pcap and testdata/rocev2.jsonl from the generators")

const (
	pcapPath   = "../../testdata/reports.pcap"
	goldenPath = "testdata/reports.jsonl"
)

// sample is one packet of testdata/reports.pcap and what dtadump must say
// about it. The expectations are written by hand from the spec, not taken
// from dtadump's output.
type sample struct {
	frame   []byte
	key     string // "dta" or "dta_ack" for packets that decode
	want    string // the expected JSON of that field
	wantErr string // for packets that do not: a substring of "error"
}

var reporter = dta.FrameBuilder{
	SrcMAC:  [6]byte{0x0c, 0x42, 0xa1, 0, 0, 1},
	DstMAC:  [6]byte{0xb8, 0xce, 0xf6, 0xd2, 0x12, 0xc7},
	SrcIP:   netip.MustParseAddr("10.0.0.200"),
	DstIP:   netip.MustParseAddr("10.0.0.51"),
	SrcPort: 40041,
}

func reportFrame(t testing.TB, r dta.Report) []byte {
	t.Helper()
	b, err := reporter.AppendFrame(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// udpFrame builds an Ethernet/IPv4/UDP frame around any payload with
// gopacket's own serializer, so malformed reports can be shipped.
func udpFrame(t testing.TB, sport, dport uint16, payload []byte) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 200}, DstIP: net.IP{10, 0, 0, 51}}
	udp := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: net.HardwareAddr(reporter.SrcMAC[:]), DstMAC: net.HardwareAddr(reporter.DstMAC[:]), EthernetType: layers.EthernetTypeIPv4},
		ip, udp, gopacket.Payload(payload))
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func samples(t testing.TB) []sample {
	d := func(b ...byte) []byte { return b }
	return []sample{
		{frame: reportFrame(t, dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite}, KeyWrite: dta.KeyWrite{Redundancy: 4, Key: 1, Data: d(0, 0, 0, 1)}}),
			key: "dta", want: `{"opcode":"keywrite","immediate":false,"sequenced":false,"reserved":0,"redundancy":4,"key":1,"data":"00000001"}`},
		{frame: reportFrame(t, dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite, Immediate: true, Sequenced: true, Seq: 17}, KeyWrite: dta.KeyWrite{Redundancy: 2, Key: 0xc0a80001, Data: d(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)}}),
			key: "dta", want: `{"opcode":"keywrite","immediate":true,"sequenced":true,"seq":17,"reserved":0,"redundancy":2,"key":3232235521,"data":"0102030405060708090a0b0c"}`},
		{frame: udpFrame(t, 40041, 40040, d(0x01, 0x00, 0x00, 0, 0, 0, 1, 0, 0, 0, 1)),
			wantErr: "dta: keywrite: redundancy 0"},
		{frame: reportFrame(t, dta.Report{Header: dta.Header{Opcode: dta.OpAppend}, Append: dta.Append{ListID: 3, Data: d(0, 0, 0, 42)}}),
			key: "dta", want: `{"opcode":"append","immediate":false,"sequenced":false,"reserved":0,"list":3,"data":"0000002a"}`},
		{frame: reportFrame(t, dta.Report{Header: dta.Header{Opcode: dta.OpAppend, Sequenced: true, Seq: 0}, Append: dta.Append{ListID: 0xffffffff, Data: d(0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 7)}}),
			key: "dta", want: `{"opcode":"append","immediate":false,"sequenced":true,"seq":0,"reserved":0,"list":4294967295,"data":"deadbeef00000007"}`},
		{frame: udpFrame(t, 40041, 40040, d(0x07, 0x00, 1, 2, 3, 4)),
			wantErr: "dta: base header: unknown opcode (0x07)"},
		{frame: reportFrame(t, dta.Report{Header: dta.Header{Opcode: dta.OpKeyIncrement}, KeyIncrement: dta.KeyIncrement{Redundancy: 3, Key: 99, Counter: 1500}}),
			key: "dta", want: `{"opcode":"keyincrement","immediate":false,"sequenced":false,"reserved":0,"redundancy":3,"key":99,"counter":1500}`},
		{frame: udpFrame(t, 40041, 40040, d(0x02, 0x00, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1)),
			wantErr: "dta: append: bad data length (not a multiple of 4 bytes)"},
		{frame: reportFrame(t, dta.Report{Header: dta.Header{Opcode: dta.OpPostcard}, Postcard: dta.Postcard{Key: 0x0a000001, Hop: 2, Value: 777}}),
			key: "dta", want: `{"opcode":"postcard","immediate":false,"sequenced":false,"reserved":0,"key":167772161,"hop":2,"value":777}`},
		{frame: reportFrame(t, dta.Report{Header: dta.Header{Opcode: dta.OpPostcard, Immediate: true, Sequenced: true, Seq: 200}, Postcard: dta.Postcard{Key: 5, Hop: 5, Value: 1, PathLength: 5}}),
			key: "dta", want: `{"opcode":"postcard","immediate":true,"sequenced":true,"seq":200,"reserved":0,"key":5,"hop":5,"value":1,"path_length":5}`},
		{frame: udpFrame(t, 40041, 40040, d(0x04, 0x00, 0, 0, 0, 5, 0, 0, 0, 0, 1)),
			wantErr: "dta: postcard: hop number 0"},
		{frame: udpFrame(t, 40041, 40040, d(0x03, 0x00, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0xee)),
			wantErr: "dta: keyincrement: trailing bytes"},
		{frame: udpFrame(t, 40041, 40040, d(0x01)),
			wantErr: "dta: base header: truncated header"},
		{frame: udpFrame(t, 40041, 40040, nil),
			wantErr: "dta: base header: truncated header"},
		{frame: udpFrame(t, 40040, 40044, d(17, 0x00)),
			key: "dta_ack", want: `{"seq":17,"nack":false,"reserved":0}`},
		{frame: udpFrame(t, 40040, 40044, d(18, 0x80)),
			key: "dta_ack", want: `{"seq":18,"nack":true,"reserved":0}`},
		{frame: udpFrame(t, 40041, 40040, d(0x01, 0x40)),
			wantErr: "dta: base header: truncated header (S flag set"},
		{frame: udpFrame(t, 5353, 9999, d(1, 2, 3, 4)),
			wantErr: "not a DTA, RoCEv2, INT or Telemetry Report packet"},
		{frame: reportFrame(t, dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite, Sequenced: true, Seq: 255}, KeyWrite: dta.KeyWrite{Redundancy: 255, Key: 0xffffffff, Data: d(0, 0, 0, 0)}}),
			key: "dta", want: `{"opcode":"keywrite","immediate":false,"sequenced":true,"seq":255,"reserved":0,"redundancy":255,"key":4294967295,"data":"00000000"}`},
		{frame: reportFrame(t, dta.Report{Header: dta.Header{Opcode: dta.OpKeyIncrement, Sequenced: true, Wide: true, Seq: 70000, Session: 0xa1a2a3a4a5a6a7a8}, KeyIncrement: dta.KeyIncrement{Redundancy: 2, Key: 9, Counter: 1}}),
			key: "dta", want: `{"opcode":"keyincrement","immediate":false,"sequenced":true,"wide":true,"seq":70000,"session":"a1a2a3a4a5a6a7a8","reserved":0,"redundancy":2,"key":9,"counter":1}`},
		{frame: udpFrame(t, 40040, 40044, dta.Ack{Seq: 70000, Wide: true, Span: 3, Session: 0xa1a2a3a4a5a6a7a8}.AppendTo(nil)),
			key: "dta_ack", want: `{"seq":70000,"nack":false,"reserved":0,"wide":true,"resend":false,"reason":0,"span":3,"session":"a1a2a3a4a5a6a7a8"}`},
	}
}

// writeCapture writes the samples as a pcap file, one packet a
// millisecond from a fixed time.
func writeCapture(t *testing.T, ss []sample) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		if err := w.WritePacket(captureInfo(i, s), s.frame); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func captureInfo(i int, s sample) gopacket.CaptureInfo {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return gopacket.CaptureInfo{Timestamp: start.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(s.frame), Length: len(s.frame)}
}

// TestReportsPcap checks that the shipped capture is what the generator
// above produces (run with -update, or go generate, to rewrite it), that
// dtadump's output on it meets the hand-written expectations, and that the
// output matches the golden file.
func TestReportsPcap(t *testing.T) {
	ss := samples(t)
	capture := writeCapture(t, ss)
	var out bytes.Buffer
	if err := dump(bytes.NewReader(capture), &out); err != nil {
		t.Fatalf("dump: %v", err)
	}
	if *update {
		if err := os.WriteFile(pcapPath, capture, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shipped, err := os.ReadFile(pcapPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shipped, capture) {
		t.Errorf("%s differs from the generator's output; run go generate ./examples/dtadump", pcapPath)
	}
	checkExpectations(t, ss, out.Bytes())
	golden, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), golden) {
		t.Errorf("output differs from %s:\n%s", goldenPath, out.Bytes())
	}
}

func checkExpectations(t *testing.T, ss []sample, out []byte) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(ss) {
		t.Fatalf("%d lines for %d packets:\n%s", len(lines), len(ss), out)
	}
	for i, s := range ss {
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, lines[i])
		}
		if got["packet"] != float64(i+1) {
			t.Errorf("line %d: packet = %v", i+1, got["packet"])
		}
		for _, k := range []string{"ethernet", "ipv4", "udp"} {
			if _, ok := got[k]; !ok {
				t.Errorf("line %d: no %q field", i+1, k)
			}
		}
		errMsg, hasErr := got["error"].(string)
		if s.wantErr != "" {
			if !hasErr || !strings.Contains(errMsg, s.wantErr) {
				t.Errorf("line %d: error = %q, want it to contain %q\n%s", i+1, errMsg, s.wantErr, lines[i])
			}
			if got["dta"] != nil || got["dta_ack"] != nil {
				t.Errorf("line %d: a malformed packet printed DTA fields: %s", i+1, lines[i])
			}
			continue
		}
		if hasErr {
			t.Errorf("line %d: unexpected error %q", i+1, errMsg)
		}
		var want any
		if err := json.Unmarshal([]byte(s.want), &want); err != nil {
			t.Fatalf("sample %d: bad expectation: %v", i+1, err)
		}
		if !reflect.DeepEqual(got[s.key], want) {
			t.Errorf("line %d: %s =\n %v\nwant\n %v", i+1, s.key, got[s.key], want)
		}
	}
}

// TestPcapng checks that a pcapng capture of the same packets prints the
// same lines.
func TestPcapng(t *testing.T) {
	ss := samples(t)
	var pcap, ng bytes.Buffer
	if err := dump(bytes.NewReader(writeCapture(t, ss)), &pcap); err != nil {
		t.Fatal(err)
	}
	var capture bytes.Buffer
	w, err := pcapgo.NewNgWriter(&capture, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		if err := w.WritePacket(captureInfo(i, s), s.frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := dump(&capture, &ng); err != nil {
		t.Fatal(err)
	}
	if ng.String() != pcap.String() {
		t.Errorf("pcapng output\n%s\npcap output\n%s", ng.String(), pcap.String())
	}
}

// TestDamagedCapture checks that a capture cut inside a record prints the
// packets before the cut and then fails, and that a file that is no
// capture at all fails at once.
func TestDamagedCapture(t *testing.T) {
	ss := samples(t)
	capture := writeCapture(t, ss)
	var out bytes.Buffer
	err := dump(bytes.NewReader(capture[:len(capture)-5]), &out)
	if err == nil {
		t.Fatal("cut capture: no error")
	}
	if n := strings.Count(out.String(), "\n"); n != len(ss)-1 {
		t.Errorf("cut capture: %d lines before the error, want %d", n, len(ss)-1)
	}
	if err := dump(strings.NewReader("this is not a capture"), &out); err == nil {
		t.Error("not a capture: no error")
	}
}

// FuzzDump checks that any frame prints exactly one JSON line, carrying
// either DTA fields or an error, and never stops dtadump.
func FuzzDump(f *testing.F) {
	for _, s := range samples(f) {
		f.Add(s.frame)
	}
	for _, s := range roceSamples(f) {
		f.Add(s.frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		capture := writeCapture(t, []sample{{frame: frame}})
		var out bytes.Buffer
		if err := dump(bytes.NewReader(capture), &out); err != nil {
			t.Fatalf("dump: %v", err)
		}
		var got map[string]any
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || strings.Count(out.String(), "\n") != 1 {
			t.Fatalf("output is not one JSON line: %v\n%s", err, out.String())
		}
		n := 0
		for _, k := range []string{"dta", "dta_ack", "bth", "error"} {
			if _, ok := got[k]; ok {
				n++
			}
		}
		// A RoCEv2 packet whose headers decode but whose CM MAD does not
		// has both bth and error.
		_, bth := got["bth"]
		_, hasErr := got["error"]
		if n != 1 && !(n == 2 && bth && hasErr) {
			t.Fatalf("want exactly one of dta, dta_ack, bth and error: %s", out.String())
		}
	})
}
