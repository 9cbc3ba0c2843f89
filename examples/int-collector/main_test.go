package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/inband"
)

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "int-collector")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// output is what the program printed, by kind of line.
type output struct {
	paths   map[uint32]string // flow key -> path
	reports map[uint32]string // flow key -> count
	drops   []string
	cong    []string
	events  map[string]string // "metric kind" -> count
	changes map[string]int    // "metric kind" -> event lines printed
	hists   map[string]string // switch -> histogram line
	raw     string
}

func runBin(t *testing.T, bin string, args ...string) output {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s%s", bin, args, err, out, stderr.String())
	}
	o := output{paths: map[uint32]string{}, reports: map[uint32]string{}, events: map[string]string{}, changes: map[string]int{},
		hists: map[string]string{}, raw: string(out)}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 0 && f[0] == "flow":
			key, err := strconv.ParseUint(f[1], 0, 32)
			if err != nil {
				t.Fatalf("flow line %q: %v", sc.Text(), err)
			}
			line := sc.Text()
			o.paths[uint32(key)] = strings.TrimSpace(line[strings.Index(line, " path ")+6 : strings.Index(line, " reports ")])
			o.reports[uint32(key)] = f[len(f)-1]
		case len(f) > 0 && f[0] == "drop":
			o.drops = append(o.drops, sc.Text())
		case len(f) > 0 && f[0] == "congestion":
			o.cong = append(o.cong, sc.Text())
		case len(f) == 4 && f[0] == "events":
			o.events[f[1]+" "+f[2]] = f[3]
		case len(f) > 3 && f[0] == "event":
			o.changes[f[1]+" "+f[2]]++
		case len(f) > 3 && f[0] == "switch":
			o.hists[f[1]] = sc.Text()
		}
	}
	return o
}

func pathString(p []uint32) string {
	s := make([]string, len(p))
	for i, id := range p {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, " ")
}

// The generated trace, replayed from a capture file by the program: every
// flow's path and report count come back from the collector's memory, each
// drop and congestion event from its Append lists, and the detector sees
// the one reroute and the one latency jump.
func TestGenerated(t *testing.T) {
	bin := build(t)
	pcap := filepath.Join(t.TempDir(), "trace.pcap")
	f, err := os.Create(pcap)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := generate(f, 30, 25, 5000, 32766, 7)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	o := runBin(t, bin, "-pcap", pcap)
	if len(o.paths) != len(truth.paths) {
		t.Fatalf("%d flows printed, %d in the trace:\n%s", len(o.paths), len(truth.paths), o.raw)
	}
	for k, p := range truth.paths {
		if o.paths[k] != pathString(p) || o.reports[k] != fmt.Sprint(truth.reports[k]) {
			t.Fatalf("flow %#x: path %q reports %s, want %q and %d", k, o.paths[k], o.reports[k], pathString(p), truth.reports[k])
		}
	}
	if len(o.drops) != truth.drops || len(o.cong) != truth.congestion || truth.drops == 0 || truth.congestion == 0 {
		t.Fatalf("%d drops and %d congestion events printed, %d and %d in the trace", len(o.drops), len(o.cong), truth.drops, truth.congestion)
	}
	// One reroute, one latency jump (printed: changes from a known value).
	if o.events["path new-flow"] != "30" || o.events["path change"] != "1" || o.changes["path change"] != 1 || o.changes["hop-latency change"] != 1 {
		t.Fatalf("events %v, printed %v\n%s", o.events, o.changes, o.raw)
	}
	// Every value with its unit, a path change by its node IDs.
	if !regexp.MustCompile(`(?m)^event path change flow 0x[0-9a-f]{8} path \[\d+ \d+ \d+ \d+ \d+\] -> \[\d+ \d+ \d+ \d+ \d+\] at `).MatchString(o.raw) ||
		!regexp.MustCompile(`(?m)^event hop-latency change flow 0x[0-9a-f]{8} switch \d+ hop \d: \d+ ns -> \d+ ns at `).MatchString(o.raw) ||
		!regexp.MustCompile(`(?m)^congestion node \d+ flow 0x[0-9a-f]{8} queue \d+ occupancy \d+ cells$`).MatchString(o.raw) {
		t.Fatalf("event lines without units or node IDs:\n%s", o.raw)
	}
	if !strings.Contains(o.raw, " 0 reports dropped") || len(o.hists) != 4+4+1+4+4 {
		t.Fatalf("drops or histograms:\n%s", o.raw)
	}
	// Without arguments it generates its own trace: the README's command.
	if o := runBin(t, bin); len(o.paths) != 24 || o.events["path change"] != "1" {
		t.Fatalf("default run: %d flows, events %v", len(o.paths), o.events)
	}
}

// TestPerHop replays per-hop reports (INT-XD postcards): each flow's path
// comes back from the collector's Postcarding instance (there was none:
// every postcard was refused), the translator drops nothing (it printed
// twice the reports it refused), and the analytics see the congested
// core: one congestion rise and its latency in the histogram's top bins.
func TestPerHop(t *testing.T) {
	bin := build(t)
	pcap := filepath.Join(t.TempDir(), "perhop.pcap")
	f, err := os.Create(pcap)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := generatePerHop(f, 4, 6, 32766, 1)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	o := runBin(t, bin, "-pcap", pcap)
	if len(o.paths) != 4 {
		t.Fatalf("%d flows printed, want 4:\n%s", len(o.paths), o.raw)
	}
	for k, p := range truth.paths {
		if o.paths[k] != pathString(p) || o.reports[k] != fmt.Sprint(truth.reports[k]) {
			t.Fatalf("flow %#x: path %q reports %s, want %q and %d\n%s", k, o.paths[k], o.reports[k], pathString(p), truth.reports[k], o.raw)
		}
	}
	if !strings.Contains(o.raw, "120 Telemetry Reports") || !strings.Contains(o.raw, "120 Postcards") || !strings.Contains(o.raw, " 0 reports dropped") {
		t.Fatalf("counts:\n%s", o.raw)
	}
	if len(o.cong) != truth.congestion || o.events["queue-congestion rise"] != "1" || o.events["queue-occupancy rise"] != "3" || o.events["queue-occupancy fall"] != "3" {
		t.Fatalf("congestion %d (want %d), events %v\n%s", len(o.cong), truth.congestion, o.events, o.raw)
	}
	// Switch 300, the core, sees every packet; 3 at 6000 ns and 9000 cells.
	if h := o.hists["300"]; !strings.HasPrefix(h, "switch 300 packets 24 latency (ns) 0[250] 21[500] 0[1000] 0[2000] 0[4000] 3[8000] 0[+] queue (cells) ") || !strings.HasSuffix(h, " 0[1024] 3[+]") {
		t.Fatalf("switch 300: %q", h)
	}
}

// scapyPython returns a Python that imports scapy, or "".
func scapyPython() string {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import scapy.all").Run() == nil {
			return py
		}
	}
	return ""
}

// TestScapy replays a capture scapy built (testdata/mkpcap.py, from the
// specifications, not from dtakit's encoder).
func TestScapy(t *testing.T) {
	py := scapyPython()
	if py == "" {
		if os.Getenv("DTAKIT_REQUIRE_TOOLS") == "1" {
			t.Fatal("no python3 with scapy (apt-get install python3-scapy), and DTAKIT_REQUIRE_TOOLS=1")
		}
		t.Skip("no python3 with scapy (apt-get install python3-scapy): the scapy-built capture is not checked")
	}
	pcap := filepath.Join(t.TempDir(), "scapy.pcap")
	if out, err := exec.Command(py, "testdata/mkpcap.py", pcap).CombinedOutput(); err != nil {
		t.Fatalf("mkpcap.py: %v\n%s", err, out)
	}
	o := runBin(t, build(t), "-pcap", pcap)
	// mkpcap.py's FLOWS.
	want := []struct {
		src, dst         string
		sport, dport     uint16
		path             []uint32
		packets, dropped int
	}{
		{"10.9.0.1", "10.9.1.1", 1111, 80, []uint32{11, 22, 33}, 5, 0},
		{"10.9.0.2", "10.9.1.2", 2222, 443, []uint32{11, 23, 34, 45}, 3, 1},
		{"10.9.0.3", "10.9.1.3", 3333, 8080, []uint32{12, 24, 35, 46, 57}, 4, 0},
	}
	if !strings.Contains(o.raw, "13 packets, 12 Telemetry Reports, 1 skipped") || len(o.paths) != len(want) {
		t.Fatalf("output:\n%s", o.raw)
	}
	for _, w := range want {
		k := inband.FlowKey(inband.FiveTuple{Src: netip.MustParseAddr(w.src), Dst: netip.MustParseAddr(w.dst), Proto: 6, SrcPort: w.sport, DstPort: w.dport})
		if o.paths[k] != pathString(w.path) || o.reports[k] != fmt.Sprint(w.packets) {
			t.Fatalf("flow %s: path %q reports %s, want %v and %d\n%s", w.src, o.paths[k], o.reports[k], w.path, w.packets, o.raw)
		}
	}
	if len(o.drops) != 1 || !strings.Contains(o.drops[0], "drop node 45 ") || !strings.Contains(o.drops[0], "queue 3 reason 71") {
		t.Fatalf("drops %q", o.drops)
	}
}
