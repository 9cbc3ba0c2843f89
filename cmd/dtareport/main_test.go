package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/app/stream"
	"github.com/dtakit/dtakit/internal/test/proctest"
	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/reporter"
)

// sink stands in for the translator: it keeps every datagram, and with
// nackTo set answers each wide report with a NACK (reason busy) to that
// port of the sender's address.
type sink struct {
	uc     *net.UDPConn
	mu     sync.Mutex
	got    [][]byte
	from   []netip.Addr // the source of each of got
	nackTo uint16
	done   chan struct{}
}

func newSink(t *testing.T, nackTo uint16) *sink {
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	_ = uc.SetReadBuffer(8 << 20)
	conn, err := udpio.New(uc, 64)
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{uc: uc, nackTo: nackTo, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		var acks []udpio.Datagram
		_ = conn.ReadLoop(udpio.Buffers(64, 2048), 0, func(ms []udpio.Datagram, _ time.Time) bool {
			acks = acks[:0]
			s.mu.Lock()
			for _, m := range ms {
				b := append([]byte(nil), m.Buf...)
				s.got = append(s.got, b)
				s.from = append(s.from, m.Addr.Addr())
				if h, err := dta.ParseHeader(b); err == nil && h.Wide && s.nackTo != 0 {
					acks = append(acks, udpio.Datagram{Buf: dta.Ack{Seq: h.Seq, NACK: true, Wide: true, Reason: dta.ReasonBusy, Session: h.Session}.AppendTo(nil),
						Addr: netip.AddrPortFrom(m.Addr.Addr(), s.nackTo)})
				}
			}
			s.mu.Unlock()
			_, _ = conn.WriteAll(acks)
			return true
		})
	}()
	t.Cleanup(func() { uc.Close(); <-s.done })
	return s
}

func (s *sink) addr() string { return s.uc.LocalAddr().String() }

func (s *sink) wait(t *testing.T, n int) [][]byte {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		got := len(s.got)
		s.mu.Unlock()
		if got >= n {
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dtareport")
	if err != nil {
		panic(err)
	}
	bin = dir + "/dtareport"
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// dtareport runs the binary and returns its result and exit status.
func dtareport(t *testing.T, args ...string) (Result, int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var res Result
	if code == 0 || code == 3 {
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("output %q: %v\n%s", stdout.String(), err, stderr.String())
		}
	}
	return res, code, stderr.String()
}

// TestSynthetic: the binary sends exactly the stream package stream
// defines, in order, and says so; fire and forget, it confirms none. The
// sink's socket buffer holds the whole stream, so none is dropped however
// late its reader is scheduled.
func TestSynthetic(t *testing.T) {
	s := newSink(t, 0)
	const n = 5000 // an 8 MiB socket buffer holds about 10 000 of them
	res, code, logs := dtareport(t, "-translator", s.addr(), "-count", strconv.Itoa(n), "-rate", "200000", "-keys", "1000", "-fire-and-forget")
	if code != 3 || res.Reports != n || res.Counters.Datagrams != n || res.Counters.Unconfirmed != n || res.Delivery != "fire-and-forget" {
		t.Fatalf("exit %d, %+v: want exit 3, %d reports sent, all unconfirmed (fire and forget)\n%s", code, res, n, logs)
	}
	if !strings.Contains(logs, strconv.Itoa(n)+" unconfirmed") || !strings.Contains(logs, "-fire-and-forget") {
		t.Errorf("standard error %q does not say why it exits 3", logs)
	}
	got := s.wait(t, n)
	if len(got) != n {
		t.Fatalf("the sink got %d of %d reports", len(got), n)
	}
	st := stream.Default
	st.Keys = 1000
	buf := make([]byte, st.EntrySize)
	var r dta.Report
	for i, b := range got {
		st.Report(i, &r, buf)
		want, err := dta.AppendPayload(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("report %d: %x, want %x", i, b, want)
		}
	}
}

// TestRate: -rate paces the stream.
func TestRate(t *testing.T) {
	s := newSink(t, 0)
	res, code, logs := dtareport(t, "-translator", s.addr(), "-count", "2000", "-rate", "10000", "-fire-and-forget")
	// The first batch goes at once (the pace's burst), the rest at the rate.
	least := float64(2000-reporter.DefaultBatch) / 10000
	if code != 3 || res.Seconds < least || res.Counters.Waits == 0 {
		t.Fatalf("exit %d, %+v: want exit 3 (fire and forget), at least %.3f s, some waits\n%s", code, res, least, logs)
	}
}

// TestPcapReplay: -pcap sends the valid reports of the file, byte for
// byte, looping over it.
func TestPcapReplay(t *testing.T) {
	const file = "../../testdata/reports.pcap"
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for {
		data, _, err := pr.ReadPacketData()
		if err != nil {
			break
		}
		p := gopacket.NewPacket(data, pr.LinkType(), gopacket.Default)
		udp, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if !ok || udp.DstPort != layers.UDPPort(dta.ReportPort) {
			continue
		}
		if _, err := dta.ParseReport(udp.Payload); err == nil { // the file has invalid ones too: skipped
			want = append(want, udp.Payload)
		}
	}
	if len(want) == 0 {
		t.Fatal("no report in the test pcap")
	}
	s := newSink(t, 0)
	res, code, logs := dtareport(t, "-translator", s.addr(), "-pcap", file, "-count", strconv.Itoa(2*len(want)), "-fire-and-forget")
	if code != 3 || res.Reports != 2*len(want) {
		t.Fatalf("exit %d, %+v: want exit 3 (fire and forget), %d reports\n%s", code, res, 2*len(want), logs)
	}
	got := s.wait(t, 2*len(want))
	for i, b := range got {
		if !bytes.Equal(b, want[i%len(want)]) {
			t.Fatalf("datagram %d: %x, want %x", i, b, want[i%len(want)])
		}
	}
}

// TestLossExitStatus: a translator that NACKs everything: dtareport
// resends, gives up, reports every report lost and exits 3.
func TestLossExitStatus(t *testing.T) {
	ackPort := proctest.FreePort(t, "udp")
	s := newSink(t, uint16(ackPort))
	losses := filepath.Join(t.TempDir(), "losses.jsonl")
	res, code, logs := dtareport(t, "-translator", s.addr(), "-count", "50", "-ack-port", strconv.Itoa(ackPort), "-losses", losses)
	if code != 3 || res.Counters.Lost != 50 || res.Counters.Resent == 0 {
		t.Fatalf("exit %d, %+v: want exit 3, 50 lost after resends\n%s", code, res, logs)
	}
	if !strings.Contains(logs, "50 lost") {
		t.Errorf("standard error %q does not name the 50 lost", logs)
	}
	// -losses names each one, by its index in the stream, with the reason.
	b, err := os.ReadFile(losses)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct{ Seq, Reason uint32 }
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Reason != uint32(dta.ReasonBusy) || l.Seq >= 50 || seen[l.Seq] {
			t.Fatalf("loss line %q: %v", line, err)
		}
		seen[l.Seq] = true
	}
	if len(seen) != 50 {
		t.Fatalf("%d reports in -losses, want all 50", len(seen))
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-translator", "nowhere"},
		{"-count", "0"},
		{"-mix", "keywrite,bogus"},
		{"-hops", "0"},
		{"-rate", "-1"},
		{"-local", "0.0.0.0:0"}, // acks cannot come to it
		{"-split", "-local", "0.0.0.0:0"},
		{"-fire-and-forget", "-losses", "/tmp/x.jsonl"},
		{"-nacks", "-fire-and-forget"},
	} {
		if _, code, logs := dtareport(t, args...); code != 2 || logs == "" {
			t.Errorf("%v: exit %d, %q", args, code, logs)
		}
	}
}

// TestNoTranslator: with nothing listening at the translator's address,
// no report is confirmed: exit 3, every report unconfirmed, and standard
// error says so.
func TestNoTranslator(t *testing.T) {
	to := "127.0.0.1:" + strconv.Itoa(proctest.FreePort(t, "udp"))
	ackPort := strconv.Itoa(proctest.FreePort(t, "udp"))
	res, code, logs := dtareport(t, "-translator", to, "-count", "1000", "-ack-port", ackPort)
	if code != 3 || res.Counters.Unconfirmed+res.Counters.Lost != 1000 {
		t.Fatalf("exit %d, %+v: want exit 3 and all 1000 reports unconfirmed\n%s", code, res, logs)
	}
	if !strings.Contains(logs, "1000 of 1000 reports not confirmed") || !strings.Contains(logs, "no ack came") {
		t.Errorf("standard error %q does not say why it exits 3", logs)
	}
}

// TestDroppingTranslator: at full rate into a translator whose socket
// drops what it cannot hold (a small buffer, never read: a stalled
// translator), dtareport with its default flags exits 3 and counts every
// report unconfirmed rather than delivered.
func TestDroppingTranslator(t *testing.T) {
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	_ = uc.SetReadBuffer(4096)
	ackPort := strconv.Itoa(proctest.FreePort(t, "udp"))
	const n = 5000 // more than a credit (3072): Send stalls a second, then counts those in flight
	res, code, logs := dtareport(t, "-translator", uc.LocalAddr().String(), "-count", strconv.Itoa(n), "-ack-port", ackPort)
	if code != 3 || res.Counters.Unconfirmed+res.Counters.Lost != n {
		t.Fatalf("exit %d, %+v: want exit 3 and all %d reports unconfirmed\n%s", code, res, n, logs)
	}
	if !strings.Contains(logs, strconv.Itoa(n)+" unconfirmed") {
		t.Errorf("standard error %q does not name the unconfirmed reports", logs)
	}
}

// TestNacksDeprecated: -nacks is still taken, says it does nothing, and
// changes nothing.
func TestNacksDeprecated(t *testing.T) {
	ackPort := proctest.FreePort(t, "udp")
	s := newSink(t, uint16(ackPort))
	res, code, logs := dtareport(t, "-translator", s.addr(), "-count", "10", "-nacks", "-ack-port", strconv.Itoa(ackPort))
	if code != 3 || res.Counters.Lost != 10 || res.Delivery != "confirmed" {
		t.Fatalf("exit %d, %+v: want exit 3, 10 lost, confirmed delivery\n%s", code, res, logs)
	}
	if !strings.Contains(logs, "-nacks is deprecated") {
		t.Errorf("standard error %q does not say -nacks is deprecated", logs)
	}
}

// TestDaemonsSmallRing: dtareport with its default flags, at full rate,
// into a dtatranslator process whose ring holds 256 reports (it refuses
// the rest, busy) in front of a dtacollector process: the NACKed reports
// are resent, and what dtareport says is what the collector's HTTP API
// shows. Every report it did not name in -losses is counted exactly once;
// one it names lost (NACKed, not resent) not at all, one unconfirmed at
// most once; and it exits 0 exactly when it names none.
func TestDaemonsSmallRing(t *testing.T) {
	tbin := proctest.Build(t, "../dtatranslator", "dtatranslator")
	cbin := proctest.Build(t, "../dtacollector", "dtacollector")
	cmPort := 46000 + os.Getpid()%1000
	roce := "127.0.0.51:4791"
	report := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp"))
	thttp := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	chttp := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	dir := t.TempDir()
	ccfg := filepath.Join(dir, "c.json")
	os.WriteFile(ccfg, []byte(fmt.Sprintf(`{"addr": %q, "http": %q, "cm_port": %d, "instances": [
		{"primitive": "keyincrement", "slots": 65536, "redundancy": 2}]}`, roce, chttp, cmPort)), 0o600)
	col := proctest.Start(t, cbin, "-config", ccfg)
	proctest.WaitFor(t, "collector up", 10*time.Second, func() bool { return proctest.GetJSON("http://"+chttp+"/v1/instances", nil) == nil }, col)
	tcfg := filepath.Join(dir, "t.json")
	os.WriteFile(tcfg, []byte(fmt.Sprintf(`{"collectors": [%q], "cm_port": %d, "ring_size": 256}`, roce, cmPort)), 0o600)
	tr := proctest.Start(t, tbin, "-config", tcfg, "-report", report, "-http", thttp)
	ready := func() bool {
		var st struct{ Instances []struct{ Ready bool } }
		return proctest.GetJSON("http://"+thttp+"/v1/translator", &st) == nil && len(st.Instances) == 1 && st.Instances[0].Ready
	}
	proctest.WaitFor(t, "translator connected", 20*time.Second, ready, tr, col)

	// The translator sends acks to port 40044 of the reports' source: an
	// address of this test's own keeps other tests' reporters apart.
	local := fmt.Sprintf("127.%d.%d.1:0", 100+os.Getpid()%100, os.Getpid()/100%250)
	losses := filepath.Join(dir, "losses.jsonl")
	const keys, per = 1000, 50
	res, code, logs := dtareport(t, "-translator", report, "-local", local, "-mix", "keyincrement", "-keys", strconv.Itoa(keys), "-count", strconv.Itoa(keys*per), "-losses", losses)
	c := res.Counters
	if want := map[bool]int{true: 0, false: 3}[c.Lost+c.Unconfirmed == 0]; code != want {
		t.Fatalf("exit %d with %d lost and %d unconfirmed, want %d\n%s\n%s", code, c.Lost, c.Unconfirmed, want, logs, tr.Logs())
	}
	if c.Acks == 0 {
		t.Fatalf("no ack from the translator: %+v\n%s", c, tr.Logs())
	}
	// Report i of a Key-Increment stream adds 1 to key i % keys.
	b, err := os.ReadFile(losses)
	if err != nil {
		t.Fatal(err)
	}
	var lost, unconfirmed [keys]uint64
	named := uint64(0)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var l struct{ Seq, Reason uint32 }
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Seq >= keys*per {
			t.Fatalf("-losses line %q: %v", line, err)
		}
		if l.Reason == uint32(dta.ReasonUnconfirmed) {
			unconfirmed[l.Seq%keys]++
		} else {
			lost[l.Seq%keys]++
		}
		named++
	}
	if named != c.Lost+c.Unconfirmed {
		t.Fatalf("-losses names %d reports, the counters %d lost and %d unconfirmed", named, c.Lost, c.Unconfirmed)
	}
	bad := 0
	for k := range keys {
		var got struct{ Count uint64 }
		if err := proctest.GetJSON(fmt.Sprintf("http://%s/v1/instances/0/keyincrement?key=%d", chttp, k), &got); err != nil {
			t.Fatal(err)
		}
		hi := per - lost[k]
		if lo := hi - unconfirmed[k]; got.Count < lo || got.Count > hi {
			if bad++; bad <= 5 {
				t.Errorf("key %d counts %d, want %d..%d: %d reports, %d of them lost and %d unconfirmed", k, got.Count, lo, hi, per, lost[k], unconfirmed[k])
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d keys counted other than dtareport said: %+v", bad, keys, c)
	}
	if code != 0 {
		t.Logf("dtareport exited %d, naming %d lost and %d unconfirmed, each accounted for in memory:\n%s", code, c.Lost, c.Unconfirmed, logs)
	}
	t.Logf("%d reports, %d NACKs, %d resent: every key right", keys*per, c.NACKs, c.Resent)
}

// TestSplit: with -split each place of the mix has its own reporter and
// source address (-local's, then the next), and the reports are the
// stream's, each once; the counters are the reporters' summed.
func TestSplit(t *testing.T) {
	s := newSink(t, 0)
	const n = 4000
	base := fmt.Sprintf("127.%d.%d.1", 100+os.Getpid()%100, os.Getpid()/100%250)
	res, code, logs := dtareport(t, "-translator", s.addr(), "-local", base+":0", "-split", "-mix", "keywrite,append,keyincrement",
		"-count", strconv.Itoa(n), "-rate", "200000", "-keys", "1000", "-fire-and-forget")
	if code != 3 || res.Reports != n || res.Counters.Datagrams != n || res.Counters.Unconfirmed != n {
		t.Fatalf("exit %d, %+v: want exit 3, %d reports sent, all unconfirmed (fire and forget)\n%s", code, res, n, logs)
	}
	got := s.wait(t, n)
	if len(got) != n {
		t.Fatalf("the sink got %d of %d reports", len(got), n)
	}
	st := stream.Default
	st.Keys = 1000
	st.Mix = []dta.Opcode{dta.OpKeyWrite, dta.OpAppend, dta.OpKeyIncrement}
	want := map[string]int{} // each report of the stream, by its bytes and the place of the mix that sends it
	buf := make([]byte, st.EntrySize)
	var r dta.Report
	for i := range n {
		st.Report(i, &r, buf)
		b, err := dta.AppendPayload(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("%x@%d", b, i%3)]++
	}
	a0 := netip.MustParseAddr(base)
	places := map[netip.Addr]int{a0: 0, a0.Next(): 1, a0.Next().Next(): 2}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range got {
		j, ok := places[s.from[i]]
		if !ok {
			t.Fatalf("report %d from %v, want one of %v", i, s.from[i], places)
		}
		k := fmt.Sprintf("%x@%d", b, j)
		if want[k] == 0 {
			t.Fatalf("report %d (%x) from %v: not the stream's, or not its place's", i, b, s.from[i])
		}
		want[k]--
	}
}

// TestThreads: dtareport runs one thread of Go code per reporter (one, or
// one per place of -mix with -split, at most the cores), unless the
// GOMAXPROCS environment variable says otherwise.
func TestThreads(t *testing.T) {
	s := newSink(t, 0)
	base := fmt.Sprintf("127.%d.%d.1", 100+os.Getpid()%100, os.Getpid()/100%250+1)
	for _, c := range []struct {
		env  string
		args []string
		want int
	}{
		{"", nil, 1},
		{"", []string{"-local", base + ":0", "-split", "-mix", "keywrite,append,keyincrement"}, min(3, runtime.NumCPU())},
		{"GOMAXPROCS=2", nil, 2},
	} {
		cmd := exec.Command(bin, append([]string{"-translator", s.addr(), "-count", "100", "-keys", "100", "-fire-and-forget"}, c.args...)...)
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(v string) bool { return strings.HasPrefix(v, "GOMAXPROCS=") }), c.env)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var res Result
		if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
			t.Fatalf("%s %v: %v, output %q: %v\n%s", c.env, c.args, err, stdout.String(), jerr, stderr.String())
		}
		if res.Threads != c.want {
			t.Errorf("%s %v: gomaxprocs %d, want %d", c.env, c.args, res.Threads, c.want)
		}
	}
}
