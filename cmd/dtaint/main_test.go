package main

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/dtakit/dtakit/inband"
	"github.com/dtakit/dtakit/internal/test/proctest"
)

const intPort = 5000

// traceReport is a Telemetry Report of an INT-MD path trace of flow t
// over path (source first) with each hop's latency and queue occupancy.
func traceReport(t *testing.T, seq uint32, flow inband.FiveTuple, path, latency, queue []uint32) []byte {
	t.Helper()
	inner := intFrame(t, flow, path, latency, queue)
	rep := inband.Report{Sequence: seq, NodeID: path[len(path)-1], Individuals: []inband.Individual{{RepType: inband.RepINT, InType: inband.InEthernet, Inner: inner}}}
	b, err := rep.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// intFrame is flow's packet as it reaches the sink: INT-MD over UDP to
// intPort after path's hops (source first) pushed their metadata.
func intFrame(t *testing.T, flow inband.FiveTuple, path, latency, queue []uint32) []byte {
	t.Helper()
	bits := uint16(0x8000 | 0x8000>>inband.BitHopLatency | 0x8000>>inband.BitQueue)
	md := &inband.INT{Type: inband.TypeMD, NPT: inband.NPTL4Header, Field: 6, Version: 2, HopML: 3, RemainingHopCount: 3, Instructions: bits}
	for h := len(path) - 1; h >= 0; h-- {
		if err := md.AppendHop(&inband.Metadata{Present: bits, NodeID: path[h], HopLatency: latency[h], QueueOccupancy: queue[h]}); err != nil {
			t.Fatal(err)
		}
	}
	src, dst := flow.Src.As4(), flow.Dst.As4()
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 60, Protocol: layers.IPProtocolUDP, SrcIP: src[:], DstIP: dst[:]}
	u := &layers.UDP{SrcPort: layers.UDPPort(flow.SrcPort), DstPort: intPort}
	u.SetNetworkLayerForChecksum(ip)
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp, flow.SrcPort)
	binary.BigEndian.PutUint16(tcp[2:], flow.DstPort)
	tcp[12] = 5 << 4
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, u, md, gopacket.Payload(tcp)); err != nil {
		t.Fatal(err)
	}
	inner := buf.Bytes()
	return append(inner, make([]byte, (4-len(inner)%4)%4)...)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := proctest.GetJSON(url, v); err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, url, token, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDaemons runs dtaint with dtatranslator and dtacollector, each its own
// process, and sends it a scripted stream of Telemetry Reports: one flow
// over switches 1, 2, 3 whose queue at switch 2 climbs to 250 (over a
// level of 200) and stays there, then rerouted through switch 4. Its API
// gives the exact events and histogram counts; the collector holds the
// flow's path, its report count and the events; SIGTERM exits 0.
func TestDaemons(t *testing.T) {
	r := startTrio(t)
	conn, err := net.Dial("udp", r.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	flow := inband.FiveTuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 5555, DstPort: 80, Proto: 6}
	key := inband.FlowKey(flow)
	const before, after = 20, 10
	for p := range before + after {
		path := []uint32{1, 2, 3}
		if p >= before {
			path = []uint32{1, 4, 3}
		}
		// Switch 2's queue: 10, then 250 from the fifth packet on.
		q := uint32(10)
		if p >= 4 {
			q = 250
		}
		if _, err := conn.Write(traceReport(t, uint32(p), flow, path, []uint32{50, 500, 50}, []uint32{1, q, 1})); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // loopback UDP without pacing may drop
	}
	var flowRow struct {
		Key     string
		Packets uint64
		Path    []uint32
	}
	proctest.WaitFor(t, "every report analysed", 10*time.Second, func() bool {
		return proctest.GetJSON(fmt.Sprintf("%s/v1/flows/%#x", r.base, key), &flowRow) == nil && flowRow.Packets == before+after
	}, r.d)
	if fmt.Sprint(flowRow.Path) != "[1 4 3]" {
		t.Errorf("flow: %+v", flowRow)
	}

	want := checkEvents(t, r.base)
	checkSwitches(t, r.base)
	checkRulesAtRuntime(t, r.base)
	r.checkCollector(t, key, before+after, len(want))

	r.d.Cmd.Process.Signal(syscall.SIGTERM)
	if err := r.d.Cmd.Wait(); err != nil {
		t.Fatalf("dtaint after SIGTERM: %v\n%s", err, r.d.Logs())
	}
	if !strings.Contains(r.d.Logs(), "stopped") {
		t.Errorf("logs:\n%s", r.d.Logs())
	}
}

// trio is TestDaemons' three processes: dtaint, dtatranslator and
// dtacollector, with dtaint's report address and HTTP bases.
type trio struct {
	d, tr, col  *proctest.Proc
	listen      string // dtaint's Telemetry Report address
	base, cbase string // dtaint's and the collector's HTTP
}

// startTrio starts the collector, the translator (waiting until it is
// connected) and dtaint.
func startTrio(t *testing.T) trio {
	ibin := proctest.Build(t, ".", "dtaint")
	tbin := proctest.Build(t, "../dtatranslator", "dtatranslator")
	cbin := proctest.Build(t, "../dtacollector", "dtacollector")
	cmPort := 46000 + os.Getpid()%1000
	roce := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp"))
	report := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp"))
	listen := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp"))
	thttp := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	chttp := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	ihttp := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	dir := t.TempDir()
	ccfg := filepath.Join(dir, "c.json")
	os.WriteFile(ccfg, []byte(fmt.Sprintf(`{"addr": %q, "http": %q, "cm_port": %d, "instances": [
		{"primitive": "keywrite", "slots": 4096, "data_size": 20},
		{"primitive": "keyincrement", "slots": 4096},
		{"primitive": "append", "lists": 3, "entries": 256, "entry_size": 12, "batch": 1, "markers": true}]}`, roce, chttp, cmPort)), 0o600)
	col := proctest.Start(t, cbin, "-config", ccfg)
	tcfg := filepath.Join(dir, "t.json")
	os.WriteFile(tcfg, []byte(fmt.Sprintf(`{"collectors": [%q], "cm_port": %d, "ring_size": 4096}`, roce, cmPort)), 0o600)
	tr := proctest.Start(t, tbin, "-config", tcfg, "-report", report, "-http", thttp)
	var st struct{ Instances []struct{ Ready bool } }
	proctest.WaitFor(t, "translator connected", 20*time.Second, func() bool {
		if proctest.GetJSON("http://"+thttp+"/v1/translator", &st) != nil || len(st.Instances) != 3 {
			return false
		}
		for _, in := range st.Instances {
			if !in.Ready {
				return false
			}
		}
		return true
	}, tr, col)

	icfg := filepath.Join(dir, "i.json")
	os.WriteFile(icfg, []byte(`{"token": "s3cret", "event_list": 2,
		"rules": {"queue-occupancy": {"threshold": 1000, "level": 200}, "hop-latency": {"threshold": 100}, "flow-latency": {"threshold": 1000}},
		"latency_bins": [100, 1000], "queue_bins": [100, 200]}`), 0o600)
	d := proctest.Start(t, ibin, "-config", icfg, "-listen", listen, "-translator", report, "-http", ihttp, "-int-port", fmt.Sprint(intPort))
	base := "http://" + ihttp
	proctest.WaitFor(t, "dtaint up", 10*time.Second, func() bool { return proctest.GetJSON(base+"/healthz", nil) == nil }, d)
	return trio{d: d, tr: tr, col: col, listen: listen, base: base, cbase: "http://" + chttp}
}

// checkEvents checks dtaint's events and returns them as TestDaemons
// expects them.
func checkEvents(t *testing.T, base string) []string {
	type event struct {
		Metric, Kind     string
		Switch           *uint32
		Queue            *uint8
		Old, New         *uint32
		Unit             string
		OldPath, NewPath []uint32 `json:"-"`
		Old_path         []uint32
		New_path         []uint32
	}
	var ev struct {
		Last   uint64
		Events []event
	}
	getJSON(t, base+"/v1/events", &ev)
	var got []string
	for _, e := range ev.Events {
		s := e.Metric + " " + e.Kind
		// A path event names the node IDs, no lengths; every other
		// value has its unit.
		switch {
		case e.Metric == "path" && e.Old == nil && e.New == nil && e.Unit == "":
			s += fmt.Sprintf(" %v -> %v", e.Old_path, e.New_path)
		case e.Old == nil || e.New == nil:
			s += " without values"
		case e.Switch != nil:
			s += fmt.Sprintf(" switch %d %d %s -> %d %s", *e.Switch, *e.Old, e.Unit, *e.New, e.Unit)
		default:
			s += fmt.Sprintf(" %d %s -> %d %s", *e.Old, e.Unit, *e.New, e.Unit)
		}
		got = append(got, s)
	}
	want := []string{
		"path new-flow [] -> [1 2 3]",
		"hop-latency change switch 1 0 ns -> 50 ns", "hop-latency change switch 2 0 ns -> 500 ns", "hop-latency change switch 3 0 ns -> 50 ns",
		"flow-latency change 0 ns -> 600 ns",
		"queue-occupancy change switch 1 0 cells -> 1 cells", "queue-occupancy change switch 2 0 cells -> 10 cells", "queue-occupancy change switch 3 0 cells -> 1 cells",
		"queue-occupancy rise switch 2 10 cells -> 250 cells",
		"path change [1 2 3] -> [1 4 3]",
		"hop-latency change switch 1 0 ns -> 50 ns", "hop-latency change switch 4 0 ns -> 500 ns", "hop-latency change switch 3 0 ns -> 50 ns",
		"queue-occupancy change switch 4 0 cells -> 250 cells", "queue-occupancy rise switch 4 0 cells -> 250 cells",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || ev.Last != uint64(len(want)) {
		t.Fatalf("events (last %d):\n%s\nwant\n%s", ev.Last, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	return want
}

// checkSwitches checks the per-switch histograms and /metrics.
func checkSwitches(t *testing.T, base string) {
	var sw struct {
		Switches []struct {
			Switch         uint32
			Packets        uint64
			Latency, Queue struct{ Counts []uint64 }
		}
	}
	getJSON(t, base+"/v1/switches", &sw)
	hist := map[uint32]string{}
	for _, s := range sw.Switches {
		hist[s.Switch] = fmt.Sprintf("%d %v %v", s.Packets, s.Latency.Counts, s.Queue.Counts)
	}
	// Bins: latency ≤100, ≤1000, above; queue ≤100, ≤200, above.
	if hist[1] != "30 [30 0 0] [30 0 0]" || hist[2] != "20 [0 20 0] [4 0 16]" || hist[4] != "10 [0 10 0] [0 0 10]" || hist[3] != "30 [30 0 0] [30 0 0]" {
		t.Errorf("histograms: %v", hist)
	}

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`dtakit_int_hop_latency_nanoseconds_bucket{switch="2",le="1000"} 20`, `dtakit_int_events_total{kind="rise",metric="queue-occupancy"} 2`,
		"dtakit_int_flows 1", "dtakit_int_daemon_datagrams_total 30", "dtakit_int_telemetry_report_key_writes_total 30"} {
		if !strings.Contains(string(metrics), m+"\n") {
			t.Errorf("/metrics lacks %q", m)
		}
	}
}

// checkRulesAtRuntime: rules change at runtime, with the token only.
func checkRulesAtRuntime(t *testing.T, base string) {
	if code := put(t, base+"/v1/rules", "", `{"rules": {"queue-occupancy": {"level": 300}}}`); code != http.StatusUnauthorized {
		t.Errorf("a rule change without the token: %d", code)
	}
	if code := put(t, base+"/v1/rules", "s3cret", `{"rules": {"queue-occupancy": {"threshold": 5, "level": 300}}, "period": "1s"}`); code != http.StatusOK {
		t.Errorf("a rule change: %d", code)
	}
	var rules struct {
		Rules  map[string]struct{ Threshold, Level uint32 }
		Period string
	}
	getJSON(t, base+"/v1/rules", &rules)
	if r := rules.Rules["queue-occupancy"]; r.Threshold != 5 || r.Level != 300 || rules.Period != "1s" {
		t.Errorf("rules after the change: %+v", rules)
	}
}

// checkCollector: the DTA side: the path (Key-Write), the report count
// (Key-Increment, at least reports) and the events (Append list 2, events
// of them) are in the collector's memory.
func (r trio) checkCollector(t *testing.T, key uint32, reports uint64, events int) {
	var kw struct{ Status, Data string }
	wantPath := hex.EncodeToString(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 1), 4), 3)) + strings.Repeat("00", 8)
	proctest.WaitFor(t, "the path in the collector", 10*time.Second, func() bool {
		return proctest.GetJSON(fmt.Sprintf("%s/v1/instances/0/keywrite?key=%d", r.cbase, key), &kw) == nil && kw.Data == wantPath
	}, r.d, r.tr, r.col)
	var ki struct{ Count uint64 }
	var al struct{ Entries []string }
	proctest.WaitFor(t, "the report count and the events in the collector", 10*time.Second, func() bool {
		return proctest.GetJSON(fmt.Sprintf("%s/v1/instances/1/keyincrement?key=%d", r.cbase, key), &ki) == nil && ki.Count >= reports &&
			proctest.GetJSON(r.cbase+"/v1/instances/2/append?list=2", &al) == nil && len(al.Entries) >= events
	}, r.d, r.tr, r.col)
	if len(al.Entries) != events {
		t.Errorf("%d events in Append list 2, want %d", len(al.Entries), events)
	} else if e, _ := hex.DecodeString(al.Entries[8]); len(e) != 12 || e[0] != 4<<4|3 || binary.BigEndian.Uint32(e[4:]) != 2 || binary.BigEndian.Uint32(e[8:]) != 250 {
		t.Errorf("the rise event's entry %x", e)
	}
}

func TestFlags(t *testing.T) {
	bin := proctest.Build(t, ".", "dtaint")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"-h"}, 0},
		{[]string{"-nope"}, 2},
		{[]string{"-translator", "nowhere", "-http", "none", "-listen", "127.0.0.1:0"}, 2},
	} {
		p := proctest.Start(t, bin, c.args...)
		err := p.Cmd.Wait()
		code := 0
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			code = ee.ExitCode()
		}
		if code != c.code {
			t.Errorf("dtaint %v: exit %d, want %d\n%s", c.args, code, c.code, p.Logs())
		}
	}
}

// TestReplay: -replay feeds a capture through before serving, at the
// capture's times, with no translator.
func TestReplay(t *testing.T) {
	bin := proctest.Build(t, ".", "dtaint")
	pcap := filepath.Join(t.TempDir(), "r.pcap")
	f, err := os.Create(pcap)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(f)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	flow := inband.FiveTuple{Src: netip.MustParseAddr("10.0.0.7"), Dst: netip.MustParseAddr("10.0.0.8"), SrcPort: 7, DstPort: 8, Proto: 6}
	start := time.Unix(1764000000, 0)
	for p := range 10 {
		payload := traceReport(t, uint32(p), flow, []uint32{7, 8}, []uint32{100 * uint32(p+1), 10}, []uint32{1, 1})
		eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{192, 0, 2, 1}, DstIP: []byte{192, 0, 2, 2}}
		u := &layers.UDP{SrcPort: 40000, DstPort: 32766}
		u.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, u, gopacket.Payload(payload))
		w.WritePacket(gopacket.CaptureInfo{Timestamp: start.Add(time.Duration(p) * time.Millisecond), CaptureLength: len(buf.Bytes()), Length: len(buf.Bytes())}, buf.Bytes())
	}
	f.Close()
	web := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	d := proctest.Start(t, bin, "-replay", pcap, "-translator", "none", "-http", web, "-int-port", fmt.Sprint(intPort), "-listen", "127.0.0.1:0")
	var row struct {
		Packets     uint64
		First, Last time.Time
		Hops        []struct {
			Latency struct{ Recent, Average uint32 }
		}
	}
	key := inband.FlowKey(flow)
	// The flow appears with the first packet: the check waits for the
	// end of the replay (logged), then reads the flow.
	proctest.WaitFor(t, "the capture replayed", 10*time.Second, func() bool {
		return strings.Contains(d.Logs(), `"msg":"replayed"`) &&
			proctest.GetJSON(fmt.Sprintf("http://%s/v1/flows/%d", web, key), &row) == nil
	}, d)
	// Latencies 100..1000 at the source: the most recent 1000, the
	// average (weight 1/8, each step truncated) 508.
	if row.Packets != 10 || !row.First.Equal(start) || !row.Last.Equal(start.Add(9*time.Millisecond)) || len(row.Hops) != 2 || row.Hops[0].Latency.Recent != 1000 || row.Hops[0].Latency.Average != 508 {
		t.Fatalf("flow after the replay: %+v", row)
	}
	if !strings.Contains(d.Logs(), `"msg":"replayed"`) {
		t.Errorf("logs:\n%s", d.Logs())
	}
}

// TestRawINT: -raw-int takes data packets carrying INT, one Ethernet frame
// a datagram, dtaint their INT sink: the flow's path and latencies reach
// the flow table, a packet without INT is counted, and the input's
// counters are on /metrics.
func TestRawINT(t *testing.T) {
	bin := proctest.Build(t, ".", "dtaint")
	web := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	raw := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp"))
	d := proctest.Start(t, bin, "-translator", "none", "-http", web, "-int-port", fmt.Sprint(intPort), "-raw-int", raw, "-sink-node", "9")
	proctest.WaitFor(t, "dtaint listening", 10*time.Second, func() bool { return strings.Contains(d.Logs(), raw) }, d)
	conn, err := net.Dial("udp", raw)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	flow := inband.FiveTuple{Src: netip.MustParseAddr("10.0.0.7"), Dst: netip.MustParseAddr("10.0.0.8"), SrcPort: 7, DstPort: 8, Proto: 6}
	for p := range 5 {
		if _, err := conn.Write(intFrame(t, flow, []uint32{7, 8, 9}, []uint32{10, 20, 100 * uint32(p+1)}, []uint32{1, 2, 3})); err != nil {
			t.Fatal(err)
		}
	}
	// An IPv4/UDP frame without INT.
	plain := intFrame(t, flow, []uint32{7}, []uint32{1}, []uint32{1})
	plain[14+20+2], plain[14+20+3] = 0, 53 // UDP to port 53, not the INT port
	conn.Write(plain)
	var row struct {
		Packets uint64
		Path    []uint32
		Hops    []struct {
			Switch  uint32
			Latency struct{ Recent uint32 }
		}
		Units struct{ Latency, Queue, Tx_util string }
	}
	key := inband.FlowKey(flow)
	var metrics string
	proctest.WaitFor(t, "the packets handled", 10*time.Second, func() bool {
		resp, err := http.Get("http://" + web + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		metrics = string(b)
		return strings.Contains(metrics, "dtakit_int_raw_int_packets_total 6")
	}, d)
	getJSON(t, fmt.Sprintf("http://%s/v1/flows/%d", web, key), &row)
	if row.Packets != 5 || fmt.Sprint(row.Path) != "[7 8 9]" || len(row.Hops) != 3 || row.Hops[2].Latency.Recent != 500 ||
		row.Units.Latency != "ns" || row.Units.Queue != "cells" || row.Units.Tx_util != "%" {
		t.Fatalf("flow %+v", row)
	}
	for _, m := range []string{"dtakit_int_raw_int_no_int_total 1", "dtakit_int_raw_int_key_writes_total 5", "dtakit_int_daemon_records_total 5"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("no %q in /metrics:\n%s", m, metrics)
		}
	}
}
